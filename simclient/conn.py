"""One pipelined remoting connection for many concurrent callers.

``remoting.transport.RemotingClient`` writes each request under a lock. With
thousands of producer tasks on one connection that lock becomes a convoy:
trio hands it to one waiter per scheduler pass, so a connection carries one
request per pass however many are waiting. Here callers only append their
encoded frame to an outgoing buffer and wake a writer task, which sends
everything buffered with one ``send_all``; a reader task matches answers to
callers by ``opaque``. Both tasks run in :meth:`run` until the connection
breaks or is closed.

Given credentials, every request is signed before it is queued
(:func:`remoting.acl.sign`, Java's AclClientRPCHook).

Bounded: requests in flight per connection (callers wait for a slot within
their own timeout) and therefore the outgoing buffer.

The per-request path is kept lean because one trio loop drives thousands of
producers: the caller is parked directly and rescheduled by the reader with
its answer, or by the run's :mod:`~simclient.ticker` when its deadline
passes (a heap entry instead of a cancel scope per request), and there is
no semaphore checkpoint while below the in-flight bound. Cancelling the
caller (an outer scope) still works: the request is forgotten.
"""

from __future__ import annotations

import itertools
import logging
import ssl
from collections.abc import Callable

import outcome
import trio
from trio.lowlevel import Abort, Task, current_task, reschedule, wait_task_rescheduled

from remoting.acl import Credentials, sign
from remoting.codec import FrameDecoder, ProtocolError, encode
from remoting.command import RemotingCommand
from remoting.transport import RemotingError, RemotingTimeout, open_stream
from simclient.ticker import ticker

log = logging.getLogger("simclient.conn")

MAX_IN_FLIGHT = 8192
READ_SIZE = 256 * 1024
_TIMED_OUT = object()  # what the timer hands a caller whose deadline passed


class PipelinedConnection:
    """A connected stream plus the request table; use :func:`open_connection`, then run :meth:`run`."""

    def __init__(
        self,
        addr: str,
        stream: trio.abc.Stream,
        *,
        max_frame_length: int,
        max_in_flight: int = MAX_IN_FLIGHT,
        credentials: Credentials | None = None,
    ) -> None:
        self.addr = addr
        self.credentials = credentials
        self._stream = stream
        self._decoder = FrameDecoder(max_frame_length)
        self._pending: dict[int, Task] = {}  # opaque -> the caller parked for its answer
        self._opaques = itertools.count(1)
        self._out: list[bytes] = []
        self._wake = trio.Event()
        self._max_in_flight = max_in_flight
        self._slot_waiters = trio.lowlevel.ParkingLot()
        self._closed: str | None = None
        #: Requests the server sends us (a broker's NOTIFY_CONSUMER_IDS_CHANGED), called synchronously.
        self.on_request: Callable[[str, RemotingCommand], None] | None = None

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def _fail(self, reason: str) -> None:
        if self._closed is None:
            self._closed = reason
        pending = list(self._pending.values())
        self._pending.clear()
        for task in pending:
            reschedule(task, outcome.Value(None))
        self._out.clear()
        self._wake.set()
        self._slot_waiters.unpark_all()

    def close(self, reason: str = "closed by client") -> None:
        """Fail everything in flight and make :meth:`run` return."""
        self._fail(reason)

    async def run(self) -> None:
        """Reader and writer until the connection fails or :meth:`close` is called; closes the stream."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._reader, nursery.cancel_scope)
                await self._writer()
                nursery.cancel_scope.cancel()
        finally:
            self._fail(self._closed or "connection closed")
            with trio.CancelScope(shield=True), trio.move_on_after(1.0):
                await self._stream.aclose()

    async def _writer(self) -> None:
        stream = self._stream
        while self._closed is None:
            await self._wake.wait()
            if self._closed is not None:
                return
            self._wake = trio.Event()
            if not self._out:
                continue
            data = b"".join(self._out)
            self._out.clear()
            try:
                await stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                self._fail(f"connection lost: {exc}")
                return

    async def _reader(self, scope: trio.CancelScope) -> None:
        pending_table = self._pending
        try:
            while True:
                data = await self._stream.receive_some(READ_SIZE)
                if not data:
                    self._fail("connection closed by peer")
                    break
                for cmd in self._decoder.feed(data):
                    if not cmd.is_response:
                        if self.on_request is not None:  # e.g. NOTIFY_CONSUMER_IDS_CHANGED for consumers
                            self.on_request(self.addr, cmd)
                        continue
                    task = pending_table.pop(cmd.opaque, None)
                    if task is not None:
                        reschedule(task, outcome.Value(cmd))
        except ProtocolError as exc:
            self._fail(f"malformed frame from server: {exc}")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._fail(f"connection lost: {exc}")
        scope.cancel()

    async def invoke(self, cmd: RemotingCommand, deadline: float) -> RemotingCommand:
        """Send ``cmd`` and wait for its answer until ``deadline`` (trio time).

        RemotingTimeout when the deadline passes first (waiting for a slot
        counts), RemotingError when the connection fails. A late answer is dropped.
        """
        if len(self._pending) >= self._max_in_flight:
            with trio.move_on_at(deadline):
                while len(self._pending) >= self._max_in_flight and self._closed is None:
                    await self._slot_waiters.park()
            if len(self._pending) >= self._max_in_flight and self._closed is None:
                raise RemotingTimeout(f"{self.addr}: no free request slot in time")
        if self._closed is not None:
            raise RemotingError(f"{self.addr}: {self._closed}")
        opaque = cmd.opaque = next(self._opaques) & 0x7FFFFFFF
        pending = self._pending
        pending[opaque] = current_task()
        self._out.append(encode(cmd if self.credentials is None else sign(cmd, self.credentials)))
        self._wake.set()

        def expire() -> None:
            task = pending.pop(opaque, None)
            if task is not None:
                reschedule(task, outcome.Value(_TIMED_OUT))

        timer = ticker()
        handle = timer.call_at(deadline, expire)

        def abort(_: object) -> Abort:
            pending.pop(opaque, None)
            timer.cancel(handle)
            if self._slot_waiters:
                self._slot_waiters.unpark()
            return Abort.SUCCEEDED

        response = await wait_task_rescheduled(abort)
        timer.cancel(handle)
        if self._slot_waiters:
            self._slot_waiters.unpark()
        if response is _TIMED_OUT:
            raise RemotingTimeout(f"{self.addr}: no response to request code {cmd.code} in time")
        if response is None:
            raise RemotingError(f"{self.addr}: {self._closed}")
        return response  # type: ignore[no-any-return]

    def send_response(self, cmd: RemotingCommand) -> None:
        """Queue the answer to a request the server sent us (its opaque already set)."""
        if self._closed is not None:
            raise RemotingError(f"{self.addr}: {self._closed}")
        self._out.append(encode(cmd))
        self._wake.set()

    def send_oneway(self, cmd: RemotingCommand) -> None:
        """Queue a oneway request (no answer expected)."""
        if self._closed is not None:
            raise RemotingError(f"{self.addr}: {self._closed}")
        cmd.flag |= 2
        cmd.opaque = next(self._opaques) & 0x7FFFFFFF
        self._out.append(encode(cmd if self.credentials is None else sign(cmd, self.credentials)))
        self._wake.set()


async def open_connection(
    addr: str,
    *,
    connect_timeout: float,
    max_frame_length: int,
    max_in_flight: int = MAX_IN_FLIGHT,
    tls: ssl.SSLContext | None = None,
    credentials: Credentials | None = None,
) -> PipelinedConnection:
    """Connect to ``addr`` (TLS with ``tls``); ConnectError with the OS's reason (refused fails at
    once), the TLS failure, or on timeout. With ``credentials``, every request on it is signed."""
    stream = await open_stream(addr, connect_timeout=connect_timeout, tls=tls)
    return PipelinedConnection(
        addr, stream, max_frame_length=max_frame_length, max_in_flight=max_in_flight, credentials=credentials
    )
