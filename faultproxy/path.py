"""One named path: its listener, its toxics and its live links.

The path is the only writer of its toxics and of its listener's state, and the faults its links read
(:meth:`Path.faults`) are recomputed here whenever the toxics change, so a pump reads one attribute
per chunk. Refusing closes the listening socket itself (a connect is then refused by the system, as
with a server that is not running) and resets every live link; enabling binds the same address again.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import trio

from faultproxy.faults import (
    NO_FAULTS,
    STREAMS,
    FaultError,
    PathSpec,
    StreamFaults,
    Toxic,
    effective,
    format_address,
    parse_toxic,
)
from faultproxy.limits import MAX_TOXICS_PER_PATH
from faultproxy.link import Link, reset_socket

log = logging.getLogger("faultproxy")
BACKLOG = 128


class ConnectionBudget:
    """The process-wide count of live links (:data:`faultproxy.limits.MAX_CONNECTIONS`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self) -> bool:
        if self.used >= self.limit:
            return False
        self.used += 1
        return True

    def give_back(self) -> None:
        self.used -= 1


class Path:
    def __init__(self, spec: PathSpec, nursery: trio.Nursery, budget: ConnectionBudget, rng: random.Random,
                 warn: Any) -> None:
        self.name = spec.name
        self.listen = spec.listen
        self.upstream = spec.upstream
        self.max_connections = spec.max_connections
        self.toxics: dict[str, Toxic] = {}
        self.links: set[Link] = set()
        self.stats = {"accepted": 0, "refusedAtLimit": 0, "upstreamFailed": 0, "reset": 0,
                      "bytesUpstream": 0, "bytesDownstream": 0, "droppedUpstream": 0, "droppedDownstream": 0}
        self._faults = dict.fromkeys(STREAMS, NO_FAULTS)
        self._nursery = nursery
        self._budget = budget
        self._rng = rng
        self._warn = warn  # rate-limited warnings (server_runtime.ratelog.RateLimitedLog.warning)
        self._listener: trio.socket.SocketType | None = None
        self._accepting: trio.CancelScope | None = None

    @property
    def enabled(self) -> bool:
        return self._listener is not None

    def faults(self, stream: str) -> StreamFaults:
        return self._faults[stream]

    # --- listening: enabled (accepting) or refusing --------------------------------------------

    async def enable(self) -> None:
        """Listen (again) on the path's address; FaultError (409) when it cannot be bound."""
        if self._listener is not None:
            return
        host, port = self.listen
        try:
            infos = await trio.socket.getaddrinfo(host, port, type=trio.socket.SOCK_STREAM,
                                                  flags=trio.socket.AI_PASSIVE | trio.socket.AI_NUMERICSERV)
            family, kind, proto, _, sockaddr = infos[0]
            sock = trio.socket.socket(family, kind, proto)
            try:
                sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_REUSEADDR, 1)
                await sock.bind(sockaddr)
                sock.listen(BACKLOG)
            except BaseException:
                sock.close()
                raise
        except OSError as exc:
            raise FaultError(f"path {self.name}: cannot listen on {format_address(host, port)}: "
                             f"{exc.strerror or exc}", 409) from None
        self.listen = (host, sock.getsockname()[1])  # port 0: the one the system chose, kept from now on
        self._listener = sock
        self._accepting = trio.CancelScope()
        self._nursery.start_soon(self._accept_loop, trio.SocketListener(sock), self._accepting)

    def refuse(self) -> int:
        """Stop listening (connects are refused) and reset every live link; returns how many were reset."""
        if self._listener is not None:
            self._listener.close()  # at once, so that enable() can bind the address again right away
            self._listener = None
        if self._accepting is not None:
            self._accepting.cancel()
            self._accepting = None
        return self.reset_links()

    async def _accept_loop(self, listener: trio.SocketListener, scope: trio.CancelScope) -> None:
        with scope:
            while True:
                try:
                    stream = await listener.accept()
                except (trio.ClosedResourceError, trio.BrokenResourceError):
                    return
                except OSError as exc:  # out of descriptors or memory, for now: never the end of the proxy
                    self._warn("accept", "accept failed {count} more times in the last {seconds} s",
                               "path %s: accept failed (%s); trying again in 0.1 s", self.name, exc.strerror)
                    await trio.sleep(0.1)
                    continue
                self._admit(stream)

    def _admit(self, stream: trio.SocketStream) -> None:
        if len(self.links) >= self.max_connections or not self._budget.take():
            self.stats["refusedAtLimit"] += 1
            self._warn("limit", "reset {count} more connections at a connection limit in the last {seconds} s",
                       "path %s: %d live connections (path limit %d, process limit %d): connection reset",
                       self.name, len(self.links), self.max_connections, self._budget.limit)
            reset_socket(stream)
            return
        self.stats["accepted"] += 1
        link = Link(self.faults, stream, self._rng)
        self.links.add(link)
        self._nursery.start_soon(self._serve, link)

    async def _serve(self, link: Link) -> None:
        try:
            if not await link.run(self.upstream):
                self.stats["upstreamFailed"] += 1
        finally:
            self.links.discard(link)
            self._budget.give_back()
            for stream in STREAMS:
                self.stats[f"bytes{stream.capitalize()}"] += link.forwarded[stream]
                self.stats[f"dropped{stream.capitalize()}"] += link.dropped[stream]

    def reset_links(self) -> int:
        """Reset every live link now (a TCP RST to both of its ends)."""
        links = list(self.links)
        for link in links:
            link.reset()
        self.stats["reset"] += len(links)
        return len(links)

    # --- toxics ---------------------------------------------------------------------------------

    def add_toxic(self, body: object) -> Toxic:
        toxic = parse_toxic(body)
        if toxic.name in self.toxics:
            raise FaultError(f"path {self.name} already has a toxic named {toxic.name}", 409)
        if len(self.toxics) >= MAX_TOXICS_PER_PATH:
            raise FaultError(f"path {self.name} has {MAX_TOXICS_PER_PATH} toxics, the most it may carry", 409)
        self.toxics[toxic.name] = toxic
        self._recompute()
        return toxic

    def toxic(self, name: str) -> Toxic:
        try:
            return self.toxics[name]
        except KeyError:
            raise FaultError(f"path {self.name} has no toxic named {name}", 404) from None

    def update_toxic(self, name: str, body: object) -> Toxic:
        old = self.toxic(name)
        if isinstance(body, dict) and body.get("name", name) != name:
            raise FaultError("a toxic cannot be renamed: remove it and add another")
        toxic = parse_toxic(body, existing=old)
        self.toxics[name] = toxic
        self._recompute()
        return toxic

    def remove_toxic(self, name: str) -> None:
        self.toxic(name)
        del self.toxics[name]
        self._recompute()

    def heal(self) -> None:
        """Remove every toxic (enabling is the caller's: it is asynchronous)."""
        self.toxics.clear()
        self._recompute()

    def _recompute(self) -> None:
        before = self._faults
        self._faults = {s: effective(self.toxics.values(), s) for s in STREAMS}
        for stream in STREAMS:
            if before[stream].blackhole and not self._faults[stream].blackhole:
                broken = [link for link in self.links if stream in link.holes]
                for link in broken:
                    link.reset()
                self.stats["reset"] += len(broken)

    def close(self) -> None:
        """The path is deleted: stop listening and reset its links."""
        self.refuse()

    def to_json(self) -> dict[str, Any]:
        """Toxiproxy's proxy fields, and ours: the connection limit, live connections and counters."""
        live = list(self.links)
        stats = dict(self.stats)
        for stream in STREAMS:  # the bytes of live links too, not only of the ended ones
            stats[f"bytes{stream.capitalize()}"] += sum(link.forwarded[stream] for link in live)
            stats[f"dropped{stream.capitalize()}"] += sum(link.dropped[stream] for link in live)
        return {"name": self.name, "listen": format_address(*self.listen),
                "upstream": format_address(*self.upstream), "enabled": self.enabled,
                "toxics": [t.to_json() for t in self.toxics.values()], "max_connections": self.max_connections,
                "connections": len(live), "stats": stats}
