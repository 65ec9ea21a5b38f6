"""The listening sockets of a reactor: accept, refuse at the limit, back off on EMFILE.

Why a backoff: when the process is out of descriptors, ``accept`` fails
with EMFILE while the pending connection stays queued, so the listener
stays readable and a level-triggered loop retries at once, forever (98 %
CPU and 1.67 million log lines in 5 s). Instead the listener is taken out
of the selector for 100 ms, doubling up to 1 s while it keeps failing, and
the failure is logged once per interval with a count.
"""

from __future__ import annotations

import errno
import selectors
import socket
from collections.abc import Callable

import trio

from server_runtime.ratelog import RateLimitedLog

ACCEPTS_PER_WAKEUP = 128
BACKOFF_FIRST = 0.1
BACKOFF_MAX = 1.0
_OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

#: Called with each accepted socket (non-blocking) and its peer address.
OnAccept = Callable[[socket.socket, str], None]


class Acceptor:
    def __init__(
        self,
        selector: selectors.BaseSelector,
        warn: RateLimitedLog,
        on_accept: OnAccept,
        *,
        max_connections: Callable[[], int],
        open_connections: Callable[[], int],
    ) -> None:
        self.selector = selector
        self.warn = warn
        self.on_accept = on_accept
        self.max_connections = max_connections
        self.open_connections = open_connections
        self.listeners: list[socket.socket] = []
        self.accepting = True
        self.nursery: trio.Nursery | None = None  # set by the reactor's run: backoff timers
        self._delay = 0.0
        self._paused: set[socket.socket] = set()
        self.accepted = 0  # connections taken, since start (metrics)
        self.refused = 0  # connections closed at once: over serverMaxConnections, or stopping

    def listen(self, host: str, port: int, backlog: int) -> tuple[str, int]:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        lsock = socket.socket(family, socket.SOCK_STREAM)
        try:
            lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            lsock.bind((host, port))
            lsock.listen(backlog)
        except OSError:
            lsock.close()
            raise
        lsock.setblocking(False)
        self.listeners.append(lsock)
        self.selector.register(lsock, selectors.EVENT_READ, None)
        name = lsock.getsockname()
        return name[0], name[1]

    def accept(self, lsock: socket.socket) -> None:
        """Take the pending connections of a readable listener (a bounded number per wakeup)."""
        for _ in range(ACCEPTS_PER_WAKEUP):
            try:
                sock, addr = lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_DESCRIPTORS:
                    self._back_off(lsock, exc)
                else:
                    self.warn.warning(
                        "accept", "accept failed {count} more times in the last {seconds} s", "accept failed: %s", exc
                    )
                return
            self._delay = 0.0
            if not self.accepting or self.open_connections() >= self.max_connections():
                self.refused += 1
                self.warn.warning(
                    "refused",
                    "refused {count} more connections at the limit in the last {seconds} s",
                    "refusing connection from %s:%s: %d connections open (serverMaxConnections)",
                    addr[0], addr[1], self.open_connections(),
                )
                sock.close()
                continue
            self.accepted += 1
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.on_accept(sock, f"{addr[0]}:{addr[1]}")

    def _back_off(self, lsock: socket.socket, exc: OSError) -> None:
        delay = min(BACKOFF_MAX, self._delay * 2 or BACKOFF_FIRST)
        self._delay = delay
        self.warn.warning(
            "emfile",
            "accept failed {count} more times for lack of descriptors in the last {seconds} s",
            "accept failed: %s; not accepting for %.1f s (%d connections open)",
            exc.strerror or exc, delay, self.open_connections(),
        )
        if lsock in self._paused or self.nursery is None:
            return
        self.selector.unregister(lsock)
        self._paused.add(lsock)
        self.nursery.start_soon(self._resume, lsock, delay)

    async def _resume(self, lsock: socket.socket, delay: float) -> None:
        await trio.sleep(delay)
        self._paused.discard(lsock)
        if self.accepting and lsock in self.listeners:
            self.selector.register(lsock, selectors.EVENT_READ, None)

    def stop(self) -> None:
        """Close every listener; new connections are refused by the kernel from now on."""
        self.accepting = False
        for lsock in self.listeners:
            if lsock not in self._paused:
                self.selector.unregister(lsock)
            lsock.close()
        self.listeners.clear()
        self._paused.clear()
