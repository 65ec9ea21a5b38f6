"""``/metrics`` over HTTP, served on the server's own trio loop.

Both servers expose their metrics here when ``metricsPort`` is set (0, the
default, serves nothing; -1 takes any free port, which the server prints).
The text is ``prometheus_client``'s exposition of the server's registry,
rendered on the loop: the collectors only read counters and sizes the server
keeps (no walk over topics), so a scrape costs about a millisecond whatever
the table holds, and :attr:`MetricsEndpoint.slowest_render` records the
worst one.

A deliberately small HTTP/1.1 server, because every peer of it is bounded:
at most :data:`MAX_CLIENTS` connections at once (more are closed at once),
a request line and headers of at most :data:`MAX_REQUEST_BYTES` read within
:data:`REQUEST_SECONDS`, one answer per connection. ``GET /metrics`` is the
exposition, ``GET /`` a pointer to it, anything else 404 (or 405 for a
method other than GET/HEAD).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import trio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

MAX_CLIENTS = 8
MAX_REQUEST_BYTES = 8 * 1024
REQUEST_SECONDS = 10.0
METRICS_PATH = "/metrics"
#: metricsPort values: 0 serves nothing, -1 any free port.
OFF, ANY_PORT = 0, -1


class MetricsListenError(OSError):
    """The metrics port could not be bound; the text names it (the servers stop with this one line)."""


def metrics_url(host: str, port: int) -> str:
    """The URL Prometheus scrapes (an IPv6 address in brackets)."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{METRICS_PATH}"


class MetricsEndpoint:
    """Listens on (host, port) and answers scrapes of ``registry``."""

    def __init__(self, registry: CollectorRegistry, log: logging.Logger, *,
                 prepare: Callable[[], Awaitable[None]] | None = None,
                 render: Callable[[CollectorRegistry], bytes] = generate_latest) -> None:
        self.registry = registry
        self.log = log
        self.prepare = prepare  # awaited before each render: work that must not run on the loop
        self.render = render
        self._rendering = trio.Lock()  # one scrape's prepare and render at a time
        self.listeners: list[trio.SocketListener] = []
        self.address: tuple[str, int] | None = None
        self.clients = 0
        self.scrapes = 0
        self.slowest_render = 0.0  # seconds the longest render held the loop

    async def listen(self, host: str, port: int) -> tuple[str, int]:
        """Bind (port -1: any free port); returns the bound address."""
        try:
            listeners = await trio.open_tcp_listeners(0 if port == ANY_PORT else port, host=host)
        except OSError as exc:
            raise MetricsListenError(
                exc.errno, f"cannot serve metrics on {host}:{port} (metricsBindAddress, metricsPort): "
                f"{exc.strerror or exc}") from None
        self.listeners = list(listeners)
        bound = self.listeners[0].socket.getsockname()
        self.address = (bound[0], bound[1])
        return self.address

    @property
    def url(self) -> str:
        assert self.address is not None
        return metrics_url(*self.address)

    async def run(self) -> None:
        """Serve until cancelled."""
        async with trio.open_nursery() as nursery:
            for listener in self.listeners:
                nursery.start_soon(self._accept, listener, nursery)

    async def _accept(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        try:
            while True:
                stream = await listener.accept()
                if self.clients >= MAX_CLIENTS:
                    await trio.aclose_forcefully(stream)
                    continue
                self.clients += 1
                nursery.start_soon(self._serve, stream)
        finally:
            with trio.CancelScope(shield=True):
                await listener.aclose()

    async def _serve(self, stream: trio.SocketStream) -> None:
        try:
            with trio.move_on_after(REQUEST_SECONDS):
                head = await _read_head(stream)
                if head is not None:
                    await stream.send_all(await self._answer(head))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the scraper went away
        finally:
            self.clients -= 1
            await trio.aclose_forcefully(stream)

    async def _answer(self, head: bytes) -> bytes:
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) != 3:
            return _response(400, b"bad request line\n")
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method not in (b"GET", b"HEAD"):
            return _response(405, b"only GET\n", extra=b"Allow: GET, HEAD\r\n")
        if target == METRICS_PATH.encode():
            async with self._rendering:
                if self.prepare is not None:
                    await self.prepare()
                began = time.perf_counter()
                body = self.render(self.registry)
                self.slowest_render = max(self.slowest_render, time.perf_counter() - began)
                self.scrapes += 1
            return _response(200, body, CONTENT_TYPE_LATEST.encode(), head_only=method == b"HEAD")
        if target == b"/":
            return _response(200, b"metrics: " + METRICS_PATH.encode() + b"\n", head_only=method == b"HEAD")
        return _response(404, b"not found: the metrics are at " + METRICS_PATH.encode() + b"\n")


async def _read_head(stream: trio.SocketStream) -> bytes | None:
    """The request line and headers, or None if the peer closed or sent too much."""
    data = b""
    while b"\r\n\r\n" not in data and b"\n\n" not in data:
        chunk = await stream.receive_some(MAX_REQUEST_BYTES)
        if not chunk:
            return None
        data += chunk
        if len(data) > MAX_REQUEST_BYTES:
            return None
    return data


_REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 405: b"Method Not Allowed"}


def _response(status: int, body: bytes, content_type: bytes = b"text/plain; charset=utf-8", *,
              extra: bytes = b"", head_only: bool = False) -> bytes:
    head = (
        b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n%s\r\n"
        % (status, _REASONS[status], content_type, len(body), extra)
    )
    return head if head_only else head + body
