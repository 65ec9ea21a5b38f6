"""One proxied connection: the accepted client socket, its upstream socket, and a pump per stream.

Each stream has a reader and a writer joined by a channel of :data:`QUEUE_CHUNKS` chunks. The reader
stamps each chunk with the time it may go out (latency), or drops it under a blackhole; the writer
waits for that time, paces the bytes (bandwidth) and writes them. A stream without faults and with
nothing queued skips the channel: its reader writes each chunk itself (the common case, at about
twice the throughput). A full channel stops the reader, so
a slow writer (latency, bandwidth, a peer that does not read) slows the sender through TCP's own flow
control instead of growing a queue: a link never holds more than its two channels and two reads.

Closes travel like bytes. A side that closes (EOF) is passed on as a half-close once what it sent
before is delivered; a side that resets, or a write that fails, resets the other side too. Under a
blackhole neither is passed on (a partition hides a close as it hides bytes), and the link remembers
that its stream has a hole: when the blackhole is lifted the path resets such a link, since its two
ends cannot resynchronise a byte stream with a piece missing (Toxiproxy closes the connection when
its ``timeout`` toxic is removed, for the same reason).
"""

from __future__ import annotations

import random
import socket
import struct
from collections.abc import Callable

import trio

from faultproxy.faults import DOWNSTREAM, NO_FAULTS, UPSTREAM, Pacer, StreamFaults, due_time
from faultproxy.limits import CHUNK_BYTES, QUEUE_CHUNKS, UPSTREAM_CONNECT_SECONDS

_LINGER_RESET = struct.pack("ii", 1, 0)
#: What a writer is handed: (when it may go out, the bytes), or None for the reader's EOF.
_Item = tuple[float, bytes] | None


class Link:
    """A client connection and its upstream; :meth:`run` serves it until both streams end or it is reset."""

    def __init__(self, faults: Callable[[str], StreamFaults], client: trio.SocketStream, rng: random.Random) -> None:
        self._faults = faults  # the path's current faults of a stream (read per chunk: toxics change live)
        self.client = client
        self.upstream: trio.SocketStream | None = None
        self._rng = rng
        #: streams a blackhole took bytes or a close from: reset when the blackhole is lifted
        self.holes: set[str] = set()
        self.forwarded = {UPSTREAM: 0, DOWNSTREAM: 0}
        self.dropped = {UPSTREAM: 0, DOWNSTREAM: 0}
        self._queued = {UPSTREAM: 0, DOWNSTREAM: 0}  # chunks in a stream's channel, not yet written
        self._scope = trio.CancelScope()
        self._reset = False

    def reset(self) -> None:
        """End the link now with a TCP RST to both ends (safe before, during or after :meth:`run`)."""
        self._reset = True
        self._scope.cancel()

    async def run(self, upstream: tuple[str, int]) -> bool:
        """Serve the link; False when the upstream could not be reached (the client was reset)."""
        try:
            with self._scope:
                with trio.move_on_after(UPSTREAM_CONNECT_SECONDS):
                    try:
                        self.upstream = await trio.open_tcp_stream(*upstream)
                    except OSError:
                        pass
                if self.upstream is None:
                    self._reset = True  # as a dead server would: the client's connection breaks at once
                    return False
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._pump, UPSTREAM, self.client, self.upstream)
                    nursery.start_soon(self._pump, DOWNSTREAM, self.upstream, self.client)
            return True
        finally:
            for stream in (self.client, self.upstream):
                if stream is not None:
                    _close(stream, rst=self._reset)

    async def _pump(self, stream: str, src: trio.SocketStream, dst: trio.SocketStream) -> None:
        send, receive = trio.open_memory_channel[_Item](QUEUE_CHUNKS)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._write, stream, receive, dst)
            await self._read(stream, src, dst, send)

    async def _read(self, stream: str, src: trio.SocketStream, dst: trio.SocketStream,
                    send: trio.MemorySendChannel[_Item]) -> None:
        last_due = 0.0
        async with send:
            while True:
                data: bytes | None
                try:
                    data = await src.receive_some(CHUNK_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = None  # that side reset (or its socket broke)
                faults = self._faults(stream)
                if faults.blackhole:
                    self.holes.add(stream)
                    if data:
                        self.dropped[stream] += len(data)
                        continue
                    return  # its close is hidden too; the other side keeps its connection, silent
                if data is None:
                    self.reset()
                    return
                if not data:
                    await send.send(None)
                    return
                if faults is NO_FAULTS and not self._queued[stream]:  # nothing to wait for: write it now
                    if not await self._write_now(stream, dst, data):
                        return
                    continue
                last_due = due_time(trio.current_time(), faults, self._rng.uniform(-1.0, 1.0), last_due)
                self._queued[stream] += 1
                await send.send((last_due, data))

    async def _write(self, stream: str, receive: trio.MemoryReceiveChannel[_Item], dst: trio.SocketStream) -> None:
        pacer = Pacer()
        async with receive:
            async for item in receive:
                try:
                    if item is None:
                        await dst.send_eof()
                        return
                    due, data = item
                    await trio.sleep_until(due)
                    await self._send_paced(stream, dst, data, pacer)
                    self._queued[stream] -= 1
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self.reset()  # that side is gone: the sender learns it as it would without the proxy
                    return

    async def _write_now(self, stream: str, dst: trio.SocketStream, data: bytes) -> bool:
        """The fast path of a stream without faults: the reader writes itself (False: ``dst`` is gone)."""
        try:
            await dst.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.reset()
            return False
        self.forwarded[stream] += len(data)
        return True

    async def _send_paced(self, stream: str, dst: trio.SocketStream, data: bytes, pacer: Pacer) -> None:
        view = memoryview(data)
        while view:
            rate = self._faults(stream).rate_bps  # read per slice: a rate set or lifted applies at once
            if not rate:
                await dst.send_all(view)
                self.forwarded[stream] += len(view)
                return
            piece = view[: pacer.slice_bytes(rate)]
            await trio.sleep_until(pacer.start_of(trio.current_time(), len(piece), rate))
            await dst.send_all(piece)
            self.forwarded[stream] += len(piece)
            view = view[len(piece):]


def _close(stream: trio.SocketStream, *, rst: bool) -> None:
    """Close at once (this may run cancelled); with ``rst`` the peer gets a TCP RST instead of a FIN."""
    sock = stream.socket
    if rst:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
        except OSError:
            pass
    sock.close()


def reset_socket(stream: trio.SocketStream) -> None:
    """Refuse an accepted connection: a TCP RST, no bytes."""
    _close(stream, rst=True)
