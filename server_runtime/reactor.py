"""All connections of a remoting server, multiplexed by one trio task.

Why not one trio task per connection: on the 2-core benchmark machine a
trio task that parks in ``recv`` and yields in ``send`` for every request
tops out near 27,000 round trips/s over 16 connections, below the 40,000
route queries/s the NameServer must answer (the broker stub has the same
need for sends). Here one task waits (through
trio) on a level-triggered selector that holds every connection, then
reads, answers and writes all ready connections in one pass: about 80,000
round trips/s on the same machine. Everything else (signals, timers, KV
writes in worker threads, cancellation) is still plain trio.

Per connection, requests are answered in order, one at a time from the
decoder, so a connection can stop between two requests. It stops being
read while any of these holds, and nothing queues without bound:

- a handler must await (a KV or config write): until it answered;
- its unsent answers passed the high water mark: until they drain below
  the low mark (Netty's WRITE_BUFFER_HIGH/LOW_WATER_MARK model);
- its partial frame does not fit the global read budget
  (:class:`server_runtime.limits.ReadBudget`): until room frees up;
- it already had :data:`BATCH_REQUESTS` requests answered in this pass:
  until the next pass, so one pipelining peer cannot hold the loop.

A task that expires peers by silence (the idle sweep,
:mod:`server_runtime.idle_sweep`; the NameServer's broker expiry) first calls
:meth:`Reactor.read_pending` when the process was paused: what the peers
sent meanwhile is read before anyone is judged silent.

TLS (:mod:`server_runtime.tls_gate`, acted on by :mod:`server_runtime.tls_link`) sits
between the socket and the decoder. A plaintext connection costs one
attribute read and two tests per read, and one per write, more than
without TLS. What each connection is charged against the read budget is
:mod:`server_runtime.read_admission`'s.

Nothing a peer sends leaves this module as an exception: a frame that
cannot be decoded closes that connection, a request whose handling or
encoding fails is answered SYSTEM_ERROR (or closes the connection if even
that cannot be encoded), each with one short, rate-limited log line.
"""

from __future__ import annotations

import itertools
import logging
import selectors
import socket
from collections.abc import Callable, Hashable
from typing import Protocol

import trio

from remoting.clip import clip
from remoting.codec import OVERSIZE_FRAME, ProtocolError, encode
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from server_runtime.acceptor import Acceptor
from server_runtime.connection import READ, WRITE, Connection
from server_runtime.idle_sweep import PENDING_ANSWER_SECONDS, IdleSweep
from server_runtime.limits import ReadBudget, water_marks
from server_runtime.memtrim import Trimmer
from server_runtime.ratelog import CLIP_ARGS, RateLimitedLog
from server_runtime.read_admission import ReadAdmission
from server_runtime.tls_gate import TlsGate
from server_runtime.tls_link import TlsLink
from server_runtime.tls_session import MAX_RECORD_BYTES, Hello, TlsSession

log = logging.getLogger("remoting")
log.addFilter(CLIP_ARGS)

RECV_SIZE = 256 * 1024
#: Read size while the read budget is tight: bounds what a refused connection holds.
TIGHT_RECV_SIZE = 16 * 1024
POLLS_PER_WAKEUP = 16
TURN_SECONDS = 0.002
#: Requests answered per connection per pass (about 10 ms of route queries).
BATCH_REQUESTS = 512
#: Answers are joined into one send up to this size (and never past the high water mark).
BATCH_BYTES = 256 * 1024


class Processor(Protocol):
    """What the reactor needs from a server's request handlers."""

    #: Codes whose answer must await (the connection waits for each of them).
    async_codes: frozenset[int]

    def handle(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        """The encoded answer (None: no answer) of a request that needs no I/O."""

    async def handle_async(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        """The encoded answer of a request that awaits (a disk write, a fault delay)."""


#: Called with (connection id, peer, reason) after a connection closed.
OnClose = Callable[[int, str, str], None]
#: Called with (connection id, response) for a response a peer sent (to a request the server made).
OnResponse = Callable[[int, RemotingCommand], None]


class Reactor:
    def __init__(
        self,
        processor: Processor,
        *,
        on_close: OnClose,
        max_frame: int,
        max_connections: Callable[[], int],
        idle_seconds: Callable[[], float],
        clock: Callable[[], float] = trio.current_time,
        read_budget: int | None = None,
        high_water_mark: int = 0,
        low_water_mark: int = 0,
        tls: TlsGate | None = None,
        on_response: OnResponse | None = None,
    ) -> None:
        self.processor = processor
        self.on_close = on_close
        self.on_response = on_response  # None: responses are dropped (a server that sends no requests)
        self.max_frame = max_frame
        self.idle_seconds = idle_seconds
        self.clock = clock
        self.budget = ReadBudget() if read_budget is None else ReadBudget(read_budget)
        # 0 means Netty's default, as in Java's writeBufferHigh/LowWaterMark keys.
        self.high_water_mark, self.low_water_mark = water_marks(high_water_mark, low_water_mark)
        self.selector = selectors.DefaultSelector()
        self.connections: dict[int, Connection] = {}
        self._ids = itertools.count(1)
        self._nursery: trio.Nursery | None = None
        self._backlog: dict[int, Connection] = {}
        self.warn = RateLimitedLog(log)
        self.trimmer = Trimmer()
        self.admission = ReadAdmission(self.budget, self.trimmer, self._set_interest)
        self._account = self.admission.account  # bound once: called after every read
        self.acceptor = Acceptor(
            self.selector,
            self.warn,
            self._accepted,
            max_connections=max_connections,
            open_connections=self.connections.__len__,
        )
        self.reading = True
        #: Traffic totals since start (read by the servers' metrics): bytes taken from and
        #: handed to the kernel, connections closed for a malformed frame, and those of them
        #: closed for a frame over ``max_frame``.
        self.bytes_in = 0
        self.bytes_out = 0
        self.malformed_frames = 0
        self.oversize_frames = 0
        #: None: no TLS at all, not even to recognise and refuse a handshake
        self.tls = None if tls is None else TlsLink(
            tls, warn=self.warn, clock=clock, close=self.close, send=self._send,
            set_interest=self._set_interest, process=self._process,
        )
        self.sweep = IdleSweep(
            selector=self.selector, connections=self.connections, accept=self.acceptor.accept, read=self._read,
            flush=self._flush, close=self.close, clock=clock, idle_seconds=idle_seconds, tls=self.tls,
            warn=self.warn, trimmer=self.trimmer,
        )

    # ------------------------------------------------------------------
    # setup

    def listen(self, host: str, port: int, backlog: int) -> tuple[str, int]:
        return self.acceptor.listen(host, port, backlog)

    async def run(self) -> None:
        """Serve until cancelled; answers of awaiting handlers run in a child nursery."""
        fd = self.selector.fileno()
        select = self.selector.select
        clock = self.clock
        read = self._read
        tls = self.tls
        async with trio.open_nursery() as nursery:
            self._nursery = self.acceptor.nursery = nursery
            if tls is not None:
                tls.nursery = nursery
            nursery.start_soon(self.sweep.run)
            while True:
                if self._backlog or (tls is not None and tls.gate.deferred):
                    await trio.lowlevel.checkpoint()  # others' turn, then the batches or hellos left over
                else:
                    await trio.lowlevel.wait_readable(fd)
                if tls is not None:
                    tls.new_turn()  # new TLS connections the last turn had no time for
                # Peers that answered while we worked are served in the same
                # turn, saving a trip through trio; bounded in polls and time
                # so timers and other tasks still run.
                turn_ends = clock() + TURN_SECONDS
                for _ in range(POLLS_PER_WAKEUP):
                    ready = select(0)
                    now = clock()
                    if not ready or now > turn_ends:
                        break
                    for key, events in ready:
                        conn = key.data
                        if conn is None:
                            self.acceptor.accept(key.fileobj)  # type: ignore[arg-type]
                            continue
                        if events & WRITE:
                            self._flush(conn)
                        if events & READ and not conn.closed:
                            read(conn, now)
                # Connections that answered a whole batch get another, in
                # arrival order, while the turn lasts; the rest wait a turn.
                backlog_ends = clock() + TURN_SECONDS
                for i, conn in enumerate(list(self._backlog.values())):
                    if i and clock() > backlog_ends:
                        break
                    del self._backlog[conn.id]
                    conn.backlogged = False
                    self._process(conn)

    # ------------------------------------------------------------------
    # connections

    def _accepted(self, sock: socket.socket, peer: str) -> None:
        conn = Connection(next(self._ids), sock, peer, self.max_frame, self.clock())
        if self.tls is not None:
            conn.tls = Hello()
        self.connections[conn.id] = conn
        self.selector.register(sock, READ, conn)

    def _readable(self, conn: Connection) -> bool:
        return not (
            conn.closed or conn.busy or conn.unwritable or conn.starved or conn.backlogged or not self.reading
        )

    def _set_interest(self, conn: Connection) -> None:
        if conn.closed:
            return
        interest = (READ if self._readable(conn) else 0) | (WRITE if conn.out else 0)
        if interest != conn.interest:
            if conn.interest == 0:
                self.selector.register(conn.sock, interest, conn)
            elif interest == 0:
                self.selector.unregister(conn.sock)
            else:
                self.selector.modify(conn.sock, interest, conn)
            conn.interest = interest

    def close(self, conn: Connection, reason: str) -> None:
        """Close one connection, free its buffers and tell the server (which may drop its brokers)."""
        if conn.closed:
            return
        conn.closed = True
        if self.tls is not None:
            self.tls.closing(conn)
        if conn.interest:
            self.selector.unregister(conn.sock)
            conn.interest = 0
        conn.sock.close()
        self.connections.pop(conn.id, None)
        self._backlog.pop(conn.id, None)
        self.trimmer.note_freed(max(conn.held, conn.decoder.buffered) + len(conn.out))
        conn.decoder.clear()
        conn.out = bytearray()
        self.admission.release(conn)
        if reason.startswith("malformed"):
            self.malformed_frames += 1
            if OVERSIZE_FRAME in reason:
                self.oversize_frames += 1
            self.warn.warning(
                "malformed",
                "closed {count} more connections for malformed frames in the last {seconds} s",
                "closing connection from %s: %s", conn.peer, clip(reason),
            )
        try:
            self.on_close(conn.id, conn.peer, reason)
        except Exception as exc:  # the server's bookkeeping must not take the reactor down
            log.error("after closing connection from %s: %s: %s", conn.peer, type(exc).__name__, clip(exc))

    def close_by_id(self, conn_id: Hashable, reason: str) -> None:
        conn = self.connections.get(conn_id) if isinstance(conn_id, int) else None
        if conn is not None:
            self.close(conn, reason)

    async def read_pending(self, timeout: float = PENDING_ANSWER_SECONDS) -> int:
        """Read and answer what waits on every connection, after a pause (see :mod:`server_runtime.idle_sweep`)."""
        return await self.sweep.read_pending(timeout)

    # ------------------------------------------------------------------
    # reading and answering

    def _read(self, conn: Connection, now: float) -> None:
        if not self._readable(conn):
            return  # the selector's list was taken before this connection paused
        tls = conn.tls
        decoder = conn.decoder
        partial = decoder.partial_frame_size
        if partial:
            # Only the rest of the admitted frame; on TLS, plus one record (its ciphertext is longer).
            size = min(RECV_SIZE, partial - decoder.buffered + (0 if tls is None else MAX_RECORD_BYTES))
        else:
            size = TIGHT_RECV_SIZE if self.budget.tight else RECV_SIZE
        try:
            data = conn.sock.recv(size)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.close(conn, f"socket error: {exc}")
            return
        if not data:
            self.close(conn, "closed by peer")
            return
        conn.last_active = now
        self.bytes_in += len(data)  # as read from the socket (TLS records included)
        if tls is not None:
            data = self.tls.receive(conn, data, now)  # type: ignore[union-attr]  # conn.tls set: a TLS reactor
            if not data:
                return
        try:
            decoder.push(data)
        except ProtocolError as exc:
            self.close(conn, f"malformed frame: {exc}")
            return
        self._process(conn)

    def _process(self, conn: Connection) -> None:
        """Answer the whole frames buffered, in order, until one of the pause reasons holds."""
        decoder = conn.decoder
        handle = self.processor.handle
        async_codes = self.processor.async_codes
        batch_limit = min(self.high_water_mark, BATCH_BYTES)
        answers: list[bytes] = []
        pending = 0
        count = 0
        while not (conn.busy or conn.unwritable or conn.closed):
            if count >= BATCH_REQUESTS:
                conn.backlogged = True
                self._backlog[conn.id] = conn
                break
            try:
                req = decoder.next()
            except ProtocolError as exc:
                self.close(conn, f"malformed frame: {exc}")
                return
            if req is None:
                break
            count += 1
            if req.flag & 1:  # a response to a request this server sent (a broker asking a consumer)
                if self.on_response is not None:
                    try:
                        self.on_response(conn.id, req)
                    except Exception as exc:  # a bug in the hook must not take the connection down
                        self.warn.warning("response", "{count} more responses failed in the last {seconds} s",
                                          "response from %s failed: %s: %s", conn.peer, type(exc).__name__, clip(exc))
                continue
            if req.code in async_codes:
                conn.busy = True
                assert self._nursery is not None
                self._nursery.start_soon(self._answer_async, conn, req)
                break
            try:
                answer = handle(req, conn.id)
            except Exception as exc:  # a handler or encoding bug is this request's error only
                answer = self._failed(conn, req, exc)
            if answer:
                answers.append(answer)
                pending += len(answer)
                if pending > batch_limit or conn.out:  # behind unsent bytes: append, no joined copy
                    self._write(conn, answers[0] if len(answers) == 1 else b"".join(answers))
                    answers = []
                    pending = 0
        if answers:
            self._write(conn, answers[0] if len(answers) == 1 else b"".join(answers))
        if conn.closed:
            return
        self._account(conn)
        self._set_interest(conn)

    async def _answer_async(self, conn: Connection, req: RemotingCommand) -> None:
        try:
            try:
                answer = await self.processor.handle_async(req, conn.id)
            except Exception as exc:
                answer = self._failed(conn, req, exc)
            if answer and not conn.closed:
                self._write(conn, answer)
        finally:
            conn.busy = False
            conn.last_active = self.clock()
        if not conn.closed:
            self._process(conn)  # the requests that arrived behind it

    def _failed(self, conn: Connection, req: RemotingCommand, exc: Exception) -> bytes | None:
        """One short log line, and SYSTEM_ERROR for the request (closing the connection if
        even that cannot be encoded)."""
        what = f"{type(exc).__name__}: {clip(exc)}"
        self.warn.warning(
            "failed",
            "{count} more requests failed in handling or encoding in the last {seconds} s",
            "request code %s from %s failed: %s", req.code, conn.peer, what,
        )
        if req.flag & 2:
            return None  # oneway: never answered
        try:
            return encode(response_to(req, ResponseCode.SYSTEM_ERROR, what))
        except Exception:
            self.close(conn, f"cannot answer request code {req.code}: {what}")
            return None

    # ------------------------------------------------------------------
    # writing

    def write_to(self, conn_id: Hashable, data: bytes) -> bool:
        """Send bytes produced outside a handler call (a held request's late answer, a
        server-initiated oneway request); False when that connection is gone."""
        conn = self.connections.get(conn_id) if isinstance(conn_id, int) else None
        if conn is None or conn.closed:
            return False
        self._write(conn, data)
        if conn.out:
            self._set_interest(conn)
        return not conn.closed

    def _write(self, conn: Connection, data: bytes) -> None:
        """Send an answer (encrypted on a TLS connection); what the kernel does not take joins ``out``."""
        if conn.closed:
            return
        tls = conn.tls
        if tls is not None:
            if type(tls) is not TlsSession:
                return  # nothing is answered before a connection's first bytes were classified
            data = tls.encrypt(data)
        self._send(conn, data)

    def _send(self, conn: Connection, data: bytes) -> None:
        if conn.out:
            conn.out += data
        else:
            try:
                sent = conn.sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self.close(conn, f"socket error: {exc}")
                return
            self.bytes_out += sent
            if sent < len(data):
                conn.out += memoryview(data)[sent:]
        if len(conn.out) > self.high_water_mark:
            conn.unwritable = True

    def _flush(self, conn: Connection) -> None:
        try:
            sent = conn.sock.send(conn.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.close(conn, f"socket error: {exc}")
            return
        self.bytes_out += sent
        if sent >= len(conn.out):
            self.trimmer.note_freed(len(conn.out))
            conn.out = bytearray()  # a drained big buffer is freed, not kept at its capacity
        else:
            del conn.out[:sent]
        conn.last_active = self.clock()
        if conn.unwritable and len(conn.out) <= self.low_water_mark:
            conn.unwritable = False
            if not (conn.busy or conn.backlogged):
                self._process(conn)  # requests read before it paused, then reading again
                return
        self._set_interest(conn)

    # ------------------------------------------------------------------
    # shutdown

    def stop_accepting(self) -> None:
        self.acceptor.stop()

    def stop_reading(self) -> None:
        """Take no new requests; answers in progress still go out."""
        self.reading = False
        for conn in list(self.connections.values()):
            self._set_interest(conn)

    @property
    def in_flight(self) -> bool:
        return any(c.busy or c.out for c in self.connections.values())

    def close_all(self, reason: str) -> None:
        for conn in list(self.connections.values()):
            self.close(conn, reason)
