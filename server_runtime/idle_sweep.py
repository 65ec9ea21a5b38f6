"""The reactor's once-a-second upkeep, and its catch-up after the process was paused.

Kept out of :mod:`server_runtime.reactor` because none of it is on the path of a
request: each second it closes connections with no traffic (or a send
stuck) for longer than the idle timeout and TLS handshakes that stalled,
emits the rate-limited logs' due summaries and gives big freed buffers
back to the OS.

A task that expires peers by silence (this sweep, the NameServer's broker
expiry) first calls :meth:`IdleSweep.read_pending` (the reactor's
``read_pending``) when the process was paused (:mod:`server_runtime.pause`):
the peers' messages sent meanwhile wait in the sockets and are read
before anyone is judged silent.
"""

from __future__ import annotations

import selectors
import socket
from collections.abc import Callable

import trio

from server_runtime.connection import READ, WRITE, Connection
from server_runtime.memtrim import Trimmer
from server_runtime.pause import paused_for
from server_runtime.ratelog import RateLimitedLog
from server_runtime.tls_link import TlsLink

#: How often idle connections are looked for.
SWEEP_SECONDS = 1.0
#: Passes over the ready connections after a pause, and how long to wait for the answers they start.
PENDING_PASSES = 4
PENDING_ANSWER_SECONDS = 5.0


class IdleSweep:
    def __init__(
        self,
        *,
        selector: selectors.BaseSelector,
        connections: dict[int, Connection],
        accept: Callable[[socket.socket], None],
        read: Callable[[Connection, float], None],
        flush: Callable[[Connection], None],
        close: Callable[[Connection, str], None],
        clock: Callable[[], float],
        idle_seconds: Callable[[], float],
        tls: TlsLink | None,
        warn: RateLimitedLog,
        trimmer: Trimmer,
    ) -> None:
        # The reactor's: its selector and open connections, and what it does with a ready one.
        self.selector = selector
        self.connections = connections
        self.accept = accept
        self.read = read
        self.flush = flush
        self.close = close
        self.clock = clock
        self.idle_seconds = idle_seconds
        self.tls = tls
        self.warn = warn
        self.trimmer = trimmer

    async def run(self) -> None:
        """Once a second: close connections with no traffic (or a stuck send) for too long,
        emit due log summaries, give big freed buffers back to the OS.

        After a pause of the process, what waits in the sockets is read
        first: a peer that kept sending while we were stopped is not idle."""
        while True:
            slept_at = self.clock()
            await trio.sleep(SWEEP_SECONDS)
            if paused_for(slept_at, self.clock(), SWEEP_SECONDS):
                await self.read_pending()
            limit = self.clock() - self.idle_seconds()
            for conn in [c for c in self.connections.values() if c.last_active < limit and not c.busy]:
                self.close(conn, "idle" if not conn.out else "peer stopped reading")
            if self.tls is not None:
                self.tls.refuse_stalled(list(self.connections.values()), self.clock())
            self.warn.flush()
            self.trimmer.maybe_trim()

    async def read_pending(self, timeout: float = PENDING_ANSWER_SECONDS) -> int:
        """Read and answer what already waits on every connection, then wait (at most
        ``timeout``) until every awaiting request has been answered.

        For a server that was paused (see :mod:`server_runtime.pause`): its peers'
        messages sit unread in the socket buffers, and a task that expires
        peers by silence must see them first. The run loop would read them
        too, but in its own turn, which may come after that task's. Each pass
        accepts the connections waiting in the listen queue (a peer whose
        request timed out may have reconnected) and reads every ready
        connection once; a few passes finish a frame that did not fit one read
        or the first frame of a new connection. Returns the number of reads.
        """
        read: list[Connection] = []
        for _ in range(PENDING_PASSES):
            ready = self.selector.select(0)
            if not ready:
                break
            now = self.clock()
            for key, events in ready:
                conn = key.data
                if conn is None:  # peers that connected meanwhile: their first requests are read next pass
                    self.accept(key.fileobj)  # type: ignore[arg-type]
                    continue
                if events & WRITE and not conn.closed:
                    self.flush(conn)
                if events & READ and not conn.closed:
                    self.read(conn, now)
                    read.append(conn)
        # Every awaiting request, not only those this call read: after a pause the idle sweep and the
        # NameServer's expiry both catch up, and the first one to run reads what the other must wait for.
        waiting = [conn for conn in self.connections.values() if conn.busy]
        with trio.move_on_after(timeout):
            while any(conn.busy for conn in waiting):
                await trio.sleep(0.005)
        return len(read)


__all__ = ["PENDING_ANSWER_SECONDS", "SWEEP_SECONDS", "IdleSweep"]
