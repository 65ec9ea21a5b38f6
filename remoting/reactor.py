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
  (:class:`remoting.limits.ReadBudget`): until room frees up;
- it already had :data:`BATCH_REQUESTS` requests answered in this pass:
  until the next pass, so one pipelining peer cannot hold the loop.

A task that expires peers by silence (the idle sweep here, the
NameServer's broker expiry) first calls :meth:`Reactor.read_pending` when
the process was paused (:mod:`remoting.pause`): the peers' messages sent
meanwhile wait in the sockets and are read before anyone is judged silent.

TLS (:mod:`remoting.tls_gate`) sits between the socket and the decoder:
ciphertext read goes through the connection's TLS session and its
plaintext into the same decoder, answers are encrypted before they join
``out``, so the read budget and water marks bound TLS connections as they
do plaintext ones (``out`` holds ciphertext). A plaintext connection costs
one attribute read and two tests per read, and one per write, more than
without TLS.

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

from remoting.acceptor import Acceptor
from remoting.codec import OVERSIZE_FRAME, ProtocolError, encode
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import READ, WRITE, Connection
from remoting.limits import ReadBudget, water_marks
from remoting.memtrim import Trimmer
from remoting.pause import paused_for
from remoting.ratelog import CLIP_ARGS, RateLimitedLog, clip
from remoting.tls_gate import SUMMARIES, TlsGate, TlsRefused
from remoting.tls_session import MAX_RECORD_BYTES, Hello, PeerClosed, TlsSession

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
#: How often idle connections are looked for.
SWEEP_SECONDS = 1.0
#: Passes over the ready connections after a pause, and how long to wait for the answers they start.
PENDING_PASSES = 4
PENDING_ANSWER_SECONDS = 5.0


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
        self._starved: dict[int, Connection] = {}  # insertion order = arrival order
        self._backlog: dict[int, Connection] = {}
        self.warn = RateLimitedLog(log)
        self.trimmer = Trimmer()
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
        self.tls = tls  # None: no TLS at all, not even to recognise and refuse a handshake

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
            nursery.start_soon(self._sweep_idle)
            while True:
                if self._backlog or (tls is not None and tls.deferred):
                    await trio.lowlevel.checkpoint()  # others' turn, then the batches or hellos left over
                else:
                    await trio.lowlevel.wait_readable(fd)
                if tls is not None:
                    deferred = tls.new_turn()
                    if deferred:
                        self._resume_tls(deferred)  # new TLS connections the last turn had no time for
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
        if type(conn.tls) is TlsSession and not conn.out:
            try:
                conn.sock.send(conn.tls.close_notify())
            except OSError:
                pass  # best effort: the peer may be gone
        if conn.interest:
            self.selector.unregister(conn.sock)
            conn.interest = 0
        conn.sock.close()
        self.connections.pop(conn.id, None)
        self._backlog.pop(conn.id, None)
        if self._starved.pop(conn.id, None) is not None:
            self.budget.waiting -= conn.held
        self.trimmer.note_freed(max(conn.held, conn.decoder.buffered) + len(conn.out))
        conn.decoder.clear()
        conn.out = bytearray()
        if conn.held:
            self.budget.release(conn.held)
            conn.held = 0
            self._wake_starved()
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

    async def _sweep_idle(self) -> None:
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
                for stalled, refusal in self.tls.stalled(list(self.connections.values()), self.clock()):
                    self._refuse(stalled, refusal)
            self.warn.flush()
            self.trimmer.maybe_trim()

    async def read_pending(self, timeout: float = PENDING_ANSWER_SECONDS) -> int:
        """Read and answer what already waits on every connection, then wait (at most
        ``timeout``) until every awaiting request has been answered.

        For a server that was paused (see :mod:`remoting.pause`): its peers'
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
                    self.acceptor.accept(key.fileobj)  # type: ignore[arg-type]
                    continue
                if events & WRITE and not conn.closed:
                    self._flush(conn)
                if events & READ and not conn.closed:
                    self._read(conn, now)
                    read.append(conn)
        # Every awaiting request, not only those this call read: after a pause the idle sweep and the
        # NameServer's expiry both catch up, and the first one to run reads what the other must wait for.
        waiting = [conn for conn in self.connections.values() if conn.busy]
        with trio.move_on_after(timeout):
            while any(conn.busy for conn in waiting):
                await trio.sleep(0.005)
        return len(read)

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
            data = self._tls_receive(conn, data, now)
            if not data:
                return
        try:
            decoder.push(data)
        except ProtocolError as exc:
            self.close(conn, f"malformed frame: {exc}")
            return
        self._process(conn)

    # ------------------------------------------------------------------
    # TLS

    def _tls_receive(self, conn: Connection, data: bytes, now: float) -> bytes:
        """Plaintext for the decoder out of bytes read from a TLS or not yet classified connection."""
        assert self.tls is not None
        try:
            plain, out = self.tls.receive(conn, data, now)
        except TlsRefused as refusal:
            self._refuse(conn, refusal)
            return b""
        except PeerClosed:
            self.close(conn, "closed by peer")
            return b""
        if out:
            self._send(conn, out)
            if conn.closed:
                return b""
        if conn.busy or out:
            self._set_interest(conn)  # parked until the certificate is ready, or handshake bytes to flush
            if self.tls.start_preparing():
                assert self._nursery is not None
                self._nursery.start_soon(self._tls_ready)
        return plain

    async def _tls_ready(self) -> None:
        """Serve the connections that waited for the test-mode certificate (or refuse them)."""
        assert self.tls is not None
        self._resume_tls(await self.tls.prepare())

    def _resume_tls(self, conns: list[Connection]) -> None:
        """Go on with connections the gate parked after their first bytes (their hello is kept)."""
        for conn in conns:
            if conn.closed:
                continue
            plain = self._tls_receive(conn, b"", self.clock())
            if conn.closed:
                continue
            if plain:
                try:
                    conn.decoder.push(plain)
                except ProtocolError as exc:
                    self.close(conn, f"malformed frame: {exc}")
                    continue
            self._process(conn)

    def _refuse(self, conn: Connection, refusal: TlsRefused) -> None:
        """Close a connection the TLS mode or handshake refuses, with one rate-limited line."""
        if refusal.output and not conn.out:
            try:
                conn.sock.send(refusal.output)  # the alert, so the peer learns why
            except OSError:
                pass
        self.warn.warning(
            f"tls-{refusal.kind}", SUMMARIES[refusal.kind],
            "closing connection from %s: %s", conn.peer, refusal.message,
        )
        self.close(conn, f"tls: {refusal.message}")

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

    def _account(self, conn: Connection) -> None:
        """Charge the read budget for what this connection holds and is about to receive."""
        decoder = conn.decoder
        buffered = decoder.buffered
        if conn.busy or conn.unwritable or conn.backlogged:
            want = buffered  # not reading: whole frames wait, a partial one needs no room yet
        else:
            want = decoder.partial_frame_size or buffered
        if want == conn.held and not conn.starved:
            return
        budget = self.budget
        was_waiting = bool(conn.starved)
        if budget.resize(conn.held, want, was_waiting):
            shrunk = want < conn.held
            if shrunk:
                self.trimmer.note_freed(conn.held - want)  # a big frame done: its buffer is free
            if was_waiting:
                budget.waiting -= conn.held
                conn.starved = 0
                self._starved.pop(conn.id, None)
            conn.held = want
            if shrunk and self._starved:
                self._wake_starved()
        else:
            if was_waiting:
                budget.waiting -= conn.held
            conn.held = budget.overdraw(conn.held, buffered)
            budget.waiting += conn.held
            conn.starved = want
            self._starved[conn.id] = conn

    def _wake_starved(self) -> None:
        """Admit waiting frames that fit now, oldest first."""
        budget = self.budget
        for conn in list(self._starved.values()):
            if budget.resize(conn.held, conn.starved, waiting=True):
                budget.waiting -= conn.held
                conn.held = conn.starved
                conn.starved = 0
                del self._starved[conn.id]
                self._set_interest(conn)

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
