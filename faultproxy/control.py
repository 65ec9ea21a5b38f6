"""The control endpoint: an HTTP API shaped like Toxiproxy's, on a loopback port.

=======  ==================================  ===========================================================
method   path                                does
=======  ==================================  ===========================================================
GET      /version                            the proxy's version and the toxic types it knows
GET      /proxies                            every path, by name
POST     /proxies                            create a path (``name``, ``listen``, ``upstream``, ...): 201
POST     /populate                           create or replace a list of paths: 201
POST     /reset                              heal every path: no toxics, accepting (204)
GET      /proxies/NAME                       one path
POST     /proxies/NAME                       ``{"enabled": false}``: refuse; ``true``: accept again
DELETE   /proxies/NAME                       remove the path (its connections are reset): 204
POST     /proxies/NAME/heal                  heal one path (ours)
POST     /proxies/NAME/reset_connections     TCP RST on every live connection now (ours): ``{"reset": N}``
GET      /proxies/NAME/toxics                the path's toxics
POST     /proxies/NAME/toxics                add a toxic (``type``, ``stream``, ``attributes``, ``name``)
GET      /proxies/NAME/toxics/TOXIC          one toxic
POST     /proxies/NAME/toxics/TOXIC          change a toxic's attributes
DELETE   /proxies/NAME/toxics/TOXIC          remove a toxic: 204
=======  ==================================  ===========================================================

Each connection carries one request and is closed after its answer. At most
:data:`~faultproxy.limits.MAX_CONTROL_CONNECTIONS` are served at once (one more is closed unanswered),
each must send its whole request within :data:`~faultproxy.limits.REQUEST_SECONDS`, and nothing a
control client sends can end the proxy: a bad request is answered with an error status and its
connection closed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

import trio

from faultproxy import httpwire
from faultproxy.faults import TOXIC_TYPES, FaultError
from faultproxy.httpwire import HttpError
from faultproxy.limits import (
    CHUNK_BYTES,
    LINGER_BYTES,
    LINGER_SECONDS,
    MAX_CONTROL_CONNECTIONS,
    MAX_HEAD_BYTES,
    REQUEST_SECONDS,
)
from faultproxy.proxy import FaultProxy

log = logging.getLogger("faultproxy")
VERSION = "1.0"
#: (method, path pattern) -> handler(proxy, matched names, JSON body) -> (status, payload)
Handler = Callable[[FaultProxy, tuple[str, ...], Any], Awaitable[tuple[int, Any]]]


async def _version(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    return 200, {"version": VERSION, "toxicTypes": list(TOXIC_TYPES)}


async def _list(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    return 200, {name: path.to_json() for name, path in p.paths.items()}


async def _create(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    return 201, (await p.create(body)).to_json()


async def _populate(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    return 201, {"proxies": [path.to_json() for path in await p.populate(body)]}


async def _reset_all(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    await p.heal()
    return 204, None


async def _show(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    return 200, p.path(names[0]).to_json()


async def _update(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    return 200, (await p.update(names[0], body)).to_json()


async def _delete(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    p.delete(names[0])
    return 204, None


async def _heal(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    return 200, (await p.heal(names[0]))[0].to_json()


async def _reset_connections(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    return 200, {"reset": p.reset_connections(names[0])}


async def _toxics(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    return 200, [t.to_json() for t in p.path(names[0]).toxics.values()]


async def _add_toxic(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    return 200, p.add_toxic(names[0], body)


async def _toxic(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    return 200, p.path(names[0]).toxic(names[1]).to_json()


async def _update_toxic(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    return 200, p.update_toxic(names[0], names[1], body)


async def _remove_toxic(p: FaultProxy, names: tuple[str, ...], body: Any) -> tuple[int, Any]:
    p.remove_toxic(names[0], names[1])
    return 204, None


_SEG = "([^/]+)"
ROUTES: list[tuple[re.Pattern[str], dict[str, Handler]]] = [
    (re.compile(r"/version"), {"GET": _version}),
    (re.compile(r"/proxies"), {"GET": _list, "POST": _create}),
    (re.compile(r"/populate"), {"POST": _populate}),
    (re.compile(r"/reset"), {"POST": _reset_all}),
    (re.compile(rf"/proxies/{_SEG}"), {"GET": _show, "POST": _update, "DELETE": _delete}),
    (re.compile(rf"/proxies/{_SEG}/heal"), {"POST": _heal}),
    (re.compile(rf"/proxies/{_SEG}/reset_connections"), {"POST": _reset_connections}),
    (re.compile(rf"/proxies/{_SEG}/toxics"), {"GET": _toxics, "POST": _add_toxic}),
    (re.compile(rf"/proxies/{_SEG}/toxics/{_SEG}"), {"GET": _toxic, "POST": _update_toxic, "DELETE": _remove_toxic}),
]


async def dispatch(proxy: FaultProxy, method: str, target: str, body: Any) -> tuple[int, Any]:
    """The status and payload of one request; every FaultError becomes its status and message."""
    path = target.rstrip("/") or "/"
    for pattern, handlers in ROUTES:
        match = pattern.fullmatch(path)
        if match is None:
            continue
        handler = handlers.get(method)
        if handler is None:
            raise HttpError(405, f"{path} takes {', '.join(handlers)}, not {method}")
        try:
            return await handler(proxy, tuple(unquote(g) for g in match.groups()), body)
        except FaultError as exc:
            raise HttpError(exc.status, str(exc)) from None
    raise HttpError(404, f"no such resource: {path[:100]}")


class ControlServer:
    """Serves the control endpoint of one :class:`FaultProxy`."""

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        self._slots = MAX_CONTROL_CONNECTIONS

    async def serve(self, listener: trio.SocketListener) -> None:
        async with listener, trio.open_nursery() as nursery:
            while True:
                try:
                    stream = await listener.accept()
                except OSError as exc:  # out of descriptors, for now: never the end of the proxy
                    self.proxy.ratelog.warning("control-accept", "control accept failed {count} more times "
                                               "in the last {seconds} s", "control accept failed: %s", exc)
                    await trio.sleep(0.1)
                    continue
                if self._slots <= 0:
                    self.proxy.ratelog.warning("control-limit", "closed {count} more control connections at the "
                                               "limit in the last {seconds} s", "%d control connections at once: "
                                               "one more closed", MAX_CONTROL_CONNECTIONS)
                    stream.socket.close()
                    continue
                self._slots -= 1
                nursery.start_soon(self._one, stream)

    async def _one(self, stream: trio.SocketStream) -> None:
        try:
            answer = httpwire.error(408, f"the request did not arrive within {REQUEST_SECONDS:g} s")
            with trio.move_on_after(REQUEST_SECONDS):
                answer = await self._answer(stream)
            with trio.move_on_after(REQUEST_SECONDS):
                await stream.send_all(answer)
                await _linger(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went away
        finally:
            self._slots += 1
            stream.socket.close()

    async def _answer(self, stream: trio.SocketStream) -> bytes:
        buf = bytearray()
        try:
            while (end := buf.find(b"\r\n\r\n")) < 0:
                if len(buf) > MAX_HEAD_BYTES:
                    raise HttpError(431, f"the request head is over {MAX_HEAD_BYTES} bytes")
                chunk = await stream.receive_some(MAX_HEAD_BYTES)
                if not chunk:
                    raise HttpError(400, "the connection closed before the request ended")
                buf += chunk
            head = httpwire.parse_head(bytes(buf[:end]))
            body = buf[end + 4:]
            while len(body) < head.content_length:
                chunk = await stream.receive_some(head.content_length - len(body))
                if not chunk:
                    raise HttpError(400, "the connection closed before the body ended")
                body += chunk
            status, payload = await dispatch(self.proxy, head.method, head.path,
                                             httpwire.parse_json(bytes(body[:head.content_length])))
            return httpwire.render(status, payload)
        except HttpError as exc:
            return httpwire.error(exc.status, str(exc))
        except Exception:  # noqa: BLE001 (a bug of ours: logged, answered, and the proxy goes on)
            log.exception("control request failed")
            return httpwire.error(500, "the proxy failed to carry out the request (see its log)")


async def _linger(stream: trio.SocketStream) -> None:
    """Half-close after the answer, then read and drop what the client still sends, a bounded while.

    An error answered before the whole request arrived (a head over the limit, a body too large) would
    otherwise close a socket with unread bytes, and the kernel would send a reset that destroys the answer
    on its way to the client: the client would see "connection reset" instead of 431 or 413. This is
    the lingering close of HTTP servers, bounded by :data:`LINGER_SECONDS` and :data:`LINGER_BYTES`.
    """
    await stream.send_eof()
    dropped = 0
    with trio.move_on_after(LINGER_SECONDS):
        while dropped < LINGER_BYTES and (chunk := await stream.receive_some(CHUNK_BYTES)):
            dropped += len(chunk)

