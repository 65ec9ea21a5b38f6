"""The NameServer's network side: listener, connections, housekeeping, shutdown.

One trio task per connection reads frames, lets the processor answer them
and writes every answer of one read in a single send. One housekeeping
task expires silent brokers. A graceful stop shuts the read side of every
connection, so requests already read are answered while nothing new is
taken, and gives them a bounded time to finish.
"""

from __future__ import annotations

import itertools
import logging
import socket
import time
from dataclasses import dataclass, field
from typing import Callable

import trio

from namesrv.config import NamesrvConfig
from namesrv.durable import write_atomic
from namesrv.kvconfig import KVConfig
from namesrv.processor import NameServerProcessor
from remoting.codec import FrameDecoder, ProtocolError

log = logging.getLogger("namesrv")

RECV_SIZE = 256 * 1024
SHUTDOWN_GRACE_SECONDS = 1.5


@dataclass(eq=False)
class Connection:
    id: int
    peer: str
    sock: trio.socket.SocketType
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)


class NameServer:
    def __init__(self, config: NamesrvConfig, kv: KVConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.kv = kv
        self._write_lock = trio.Lock()
        self.processor = NameServerProcessor(config, kv, clock=clock, persist=self._persist)
        self.connections: dict[int, Connection] = {}
        self._ids = itertools.count(1)
        self._stopping = False
        self._stop_event = trio.Event()
        self.address: tuple[str, int] | None = None

    async def _persist(self, path: str, data: bytes) -> None:
        async with self._write_lock:
            await trio.to_thread.run_sync(write_atomic, path, data)

    # ------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED) -> None:
        """Run until cancelled or until :meth:`stop` has drained the connections."""
        listeners = await trio.open_tcp_listeners(
            self.config.listenPort, host=self.config.bindAddress or None, backlog=self.config.serverSocketBacklog
        )
        sockname = listeners[0].socket.getsockname()
        self.address = (sockname[0], sockname[1])
        async with trio.open_nursery() as conns:
            async with trio.open_nursery() as services:
                services.start_soon(self._housekeeping)
                for listener in listeners:
                    services.start_soon(self._accept_loop, listener, conns)
                task_status.started(self.address)
                await self._stop_event.wait()
                services.cancel_scope.cancel()
            for listener in listeners:
                await listener.aclose()
            await self._drain(conns)

    def stop(self) -> None:
        """Begin a graceful stop: no new connections or requests."""
        self._stopping = True
        self._stop_event.set()

    async def _drain(self, conns: trio.Nursery) -> None:
        for conn in list(self.connections.values()):
            try:
                conn.sock.shutdown(socket.SHUT_RD)
            except OSError:
                conn.scope.cancel()
        with trio.move_on_after(SHUTDOWN_GRACE_SECONDS):
            while self.connections:
                await trio.sleep(0.01)
        conns.cancel_scope.cancel()

    async def _accept_loop(self, listener: trio.SocketListener, conns: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:  # e.g. EMFILE: back off instead of spinning
                log.error("accept failed: %s", exc)
                await trio.sleep(0.1)
                continue
            if len(self.connections) >= self.config.serverMaxConnections:
                log.warning("refusing connection: %d connections open", len(self.connections))
                await stream.aclose()
                continue
            conns.start_soon(self._connection, stream)

    async def _housekeeping(self) -> None:
        table = self.processor.table
        while True:
            await trio.sleep(self.config.scanNotActiveBrokerInterval / 1000.0)
            for removed in table.scan_not_active(self.processor.now_ms()):
                log.warning(
                    "broker %s %s (%s) expired: no heartbeat within its timeout",
                    removed.name, removed.addr, removed.cluster,
                )
                conn = self.connections.get(removed.conn) if isinstance(removed.conn, int) else None
                if conn is not None:
                    conn.scope.cancel()

    async def _connection(self, stream: trio.SocketStream) -> None:
        sock = stream.socket
        try:
            peer = "%s:%s" % sock.getpeername()[:2]
        except OSError:
            peer = "?"
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        conn = Connection(next(self._ids), peer, sock)
        self.connections[conn.id] = conn
        processor = self.processor
        handle = processor.handle
        decoder = FrameDecoder(self.config.frameMaxLength)
        idle = float(self.config.serverChannelMaxIdleTimeSeconds)
        current_time = trio.current_time
        reason = "closed by peer"
        try:
            with conn.scope:
                last_reset = current_time()
                conn.scope.deadline = last_reset + idle
                while True:
                    data = await sock.recv(RECV_SIZE)
                    if not data:
                        break
                    try:
                        requests = decoder.feed(data)
                    except ProtocolError as exc:
                        reason = f"malformed frame: {exc}"
                        log.warning("closing connection from %s: %s", peer, exc)
                        break
                    out = []
                    for req in requests:
                        if req.flag & 1:
                            continue  # a response: this server sends no requests
                        if processor.is_async(req.code):
                            answer = await processor.handle_async(req)
                        else:
                            answer = handle(req, conn.id)
                        if answer is not None:
                            out.append(answer)
                    if out:
                        await _send_all(sock, out[0] if len(out) == 1 else b"".join(out))
                    now = current_time()
                    if now - last_reset > 1.0:
                        last_reset = now
                        conn.scope.deadline = now + idle
            if conn.scope.cancelled_caught:
                reason = "idle or expired" if not self._stopping else "server stopping"
        except OSError as exc:
            reason = f"socket error: {exc}"
        finally:
            del self.connections[conn.id]
            for removed in processor.table.connection_closed(conn.id):
                log.warning(
                    "broker %s %s (%s) removed: its connection %s closed (%s)",
                    removed.name, removed.addr, removed.cluster, peer, reason,
                )
            sock.close()


async def _send_all(sock: trio.socket.SocketType, data: bytes) -> None:
    view = memoryview(data)
    while view:
        sent = await sock.send(view)
        view = view[sent:]
