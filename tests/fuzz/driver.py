"""Send fuzz frames to one live server and judge what comes back.

A finding is one of:

- ``crash``: the server process exited;
- ``hang``: a fresh connection's plain request was not answered within
  ``probe_timeout``, nor a second one within ``confirm_timeout`` (probed
  every ``probe_interval`` seconds and at the end);
- ``stall``: the first probe went unanswered while the server used nearly
  all of that time as CPU, so its loop held on to a request (one answered
  late while the server got little CPU is the machine's load, not the
  server's doing: counted, not a finding);
- ``malformed-answer``: bytes from the server that do not decode as frames,
  a response whose opaque was never sent on that connection, or a request
  from the server that no RocketMQ server sends its clients;
- ``traceback``/``long-log-line``: found in the server's log afterwards
  (see :func:`scan_log`).

Each worker keeps one connection while its frames are answered and opens a
new one after a frame that closed the connection or went unanswered (a
partial frame would otherwise swallow the frames after it). Connections the
fuzzer gives up on are reset (SO_LINGER 0) so a long run does not pile up
TIME_WAIT sockets. Everything is bounded by a frame count and a deadline.
"""

from __future__ import annotations

import collections
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import trio

from remoting.codec import FrameDecoder, ProtocolError, decode_frame
from tests.fuzz.frames import SERVER_INITIATED_CODES, Frame, frame_bytes, json_header, make_frame

_NOT_SUPPORTED = 3
_LINGER_RESET = struct.pack("ii", 1, 0)


@dataclass
class Finding:
    kind: str
    detail: str
    frame: Frame | None = None
    #: A hang: the frames in flight when it was seen (first, last), to replay one by one.
    span: tuple[int, int] | None = None

    def line(self, seed: int) -> str:
        if self.frame is None:
            return f"{self.kind}: {self.detail}"
        hexed = self.frame.data[:512].hex()
        more = "" if len(self.frame.data) <= 512 else f"... ({len(self.frame.data)} bytes)"
        return (f"{self.kind}: {self.detail} [seed {seed} frame {self.frame.index} {self.frame.kind} "
                f"code {self.frame.code}] {hexed}{more}")


@dataclass
class RunStats:
    sent: int = 0
    answered: int = 0
    closed_by_server: int = 0
    unanswered: int = 0
    probes: int = 0
    slowest_probe: float = 0.0
    starved: int = 0  # probes answered late while the server got little CPU (a loaded machine)
    findings: list[Finding] = field(default_factory=list)


class _Conn:
    """One client connection: raw stream plus a sans-IO decoder."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder(1 << 26)
        self.sent_opaques: set[int] = set()

    async def close(self) -> None:
        try:
            self.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
        except OSError:
            pass
        await self.stream.aclose()


async def _connect(host: str, port: int) -> _Conn:
    return _Conn(await trio.open_tcp_stream(host, port))


def probe_frame(code: int, opaque: int) -> bytes:
    return frame_bytes(json_header({"code": code, "language": "JAVA", "version": 453, "opaque": opaque, "flag": 0}), b"")


async def probe(host: str, port: int, code: int, timeout: float) -> float | None:
    """Seconds a fresh connection took to get an answer to ``code``; None if none came in ``timeout``."""
    start = time.monotonic()
    with trio.move_on_after(timeout):
        try:
            conn = await _connect(host, port)
        except OSError:
            return None
        try:
            await conn.stream.send_all(probe_frame(code, 7))
            while True:
                data = await conn.stream.receive_some(65536)
                if not data:
                    return None
                if conn.decoder.feed(data):
                    return time.monotonic() - start
        except (OSError, trio.BrokenResourceError, ProtocolError):
            return None
        finally:
            await conn.close()
    return None


async def discover_codes(host: str, port: int, candidates: Sequence[int]) -> list[int]:
    """The request codes the server handles: every candidate not answered REQUEST_CODE_NOT_SUPPORTED."""
    handled: list[int] = []
    conn = await _connect(host, port)
    try:
        for opaque, code in enumerate(candidates, start=1):
            await conn.stream.send_all(probe_frame(code, opaque))
            answer = None
            with trio.move_on_after(2.0):
                while answer is None:
                    data = await conn.stream.receive_some(65536)
                    if not data:
                        break
                    for cmd in conn.decoder.feed(data):
                        if cmd.opaque == opaque:
                            answer = cmd
            if answer is None:  # closed or held: count it as handled, on a new connection
                handled.append(code)
                await conn.close()
                conn = await _connect(host, port)
            elif answer.code != _NOT_SUPPORTED:
                handled.append(code)
    finally:
        await conn.close()
    return handled


class ServerFuzzer:
    """Fuzz one server at ``host:port`` with frames of ``seed``."""

    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        codes: Sequence[int],
        *,
        seed: int,
        probe_code: int,
        alive: Callable[[], bool],
        answer_wait: float = 0.05,
        probe_timeout: float = 1.0,
        probe_interval: float = 0.25,
        send_timeout: float = 2.0,
        confirm_timeout: float = 10.0,
        cpu: Callable[[], float] = lambda: 0.0,
        workers: int = 8,
    ) -> None:
        self.name = name
        self.host = host
        self.port = port
        self.codes = list(codes)
        self.seed = seed
        self.probe_code = probe_code
        self.alive = alive
        self.answer_wait = answer_wait
        self.probe_timeout = probe_timeout
        self.probe_interval = probe_interval
        self.send_timeout = send_timeout
        self.confirm_timeout = confirm_timeout
        self.cpu = cpu  # the server's CPU seconds so far
        self.workers = workers
        self.stats = RunStats()
        self._next = 0
        self._limit = 0
        self._deadline = 0.0
        self._stop = False
        self._scope: trio.CancelScope | None = None
        self._last_good = 0
        self._last_heard = 0.0  # when the server last answered or closed a connection
        self._recent: collections.deque[tuple[float, int]] = collections.deque(maxlen=4096)

    def _take(self) -> int | None:
        if self._stop or self._next >= self._limit or time.monotonic() >= self._deadline:
            return None
        index = self._next
        self._next += 1
        return index

    async def run(self, frames: int, seconds: float, start_index: int = 0) -> RunStats:
        self._next = start_index
        self._last_good = start_index
        self._limit = start_index + frames
        self._deadline = time.monotonic() + seconds
        async with trio.open_nursery() as nursery:
            self._scope = nursery.cancel_scope
            for _ in range(self.workers):
                nursery.start_soon(self._worker)
            nursery.start_soon(self._prober)
        if not self._stop:
            await self._check(None, final=True)
        return self.stats

    def _halt(self) -> None:
        """Stop at once: a worker blocked sending to a stuck server must not hold the run (and the server) up."""
        self._stop = True
        if self._scope is not None:
            self._scope.cancel()

    async def _prober(self) -> None:
        """Probe every ``probe_interval`` seconds: a stall longer than the probe timeout cannot slip between probes."""
        while not self._stop and self._next < self._limit and time.monotonic() < self._deadline:
            await trio.sleep(self.probe_interval)
            await self._check(None)

    async def _check(self, frame: Frame | None, *, final: bool = False) -> None:
        if not self.alive():
            if not self._stop:
                self.stats.findings.append(Finding("crash", f"{self.name} exited", frame or self._suspect()))
            self._halt()
            return
        since = self._last_good
        upto = self._next
        cpu_before = self.cpu()
        took = await probe(self.host, self.port, self.probe_code, self.probe_timeout)
        self.stats.probes += 1
        if took is not None:
            self._last_good = upto
            self.stats.slowest_probe = max(self.stats.slowest_probe, took)
            return
        busy = self.cpu() - cpu_before
        where = "at the end" if final else f"while frames {since}..{upto - 1} were in flight"
        late = await probe(self.host, self.port, self.probe_code, self.confirm_timeout)
        if late is None:
            if not self._stop:
                self.stats.findings.append(Finding(
                    "hang", f"{self.name}: a fresh connection got no answer within {self.probe_timeout} s, nor a second"
                    f" one within {self.confirm_timeout} s, {where}", frame or self._suspect(since), span=(since, upto - 1)))
            self._halt()
            return
        self.stats.slowest_probe = max(self.stats.slowest_probe, self.probe_timeout + late)
        if busy < 0.9 * self.probe_timeout:
            self.stats.starved += 1
            return
        if not self._stop:
            self.stats.findings.append(Finding(
                "stall", f"{self.name}: a fresh connection got no answer within {self.probe_timeout} s while the server"
                f" used {busy:.2f} s of CPU (its loop held on to a request) {where}",
                frame or self._suspect(since), span=(since, upto - 1)))
        self._halt()

    def _suspect(self, since: int | None = None) -> Frame | None:
        """The likeliest culprit of a stall: the first answerable frame sent after the server last said anything.

        A server stuck in one request stops answering everyone, so the
        frame it is stuck on was sent no later than that. Replay the range
        printed with the finding (``--start``, ``--frames``) to be sure.
        """
        floor = self._last_good if since is None else since
        for sent_at, index in self._recent:
            if index >= floor and sent_at >= self._last_heard - 0.005:
                return make_frame(self.seed, index, self.codes)
        return make_frame(self.seed, floor, self.codes) if floor < self._next else None

    async def _worker(self) -> None:
        conn: _Conn | None = None
        try:
            while (index := self._take()) is not None:
                frame = make_frame(self.seed, index, self.codes)
                if conn is None:
                    try:
                        conn = await _connect(self.host, self.port)
                    except OSError as exc:
                        await self._check(frame)
                        if not self._stop:
                            self.stats.findings.append(Finding("refused", f"{self.name}: connect failed: {exc}", frame))
                            self._halt()
                        return
                keep = await self._exchange(conn, frame)
                if not keep:
                    await conn.close()
                    conn = None
                if not self.alive():
                    await self._check(frame)
                    return
        finally:
            if conn is not None:
                await conn.close()

    async def _exchange(self, conn: _Conn, frame: Frame) -> bool:
        """Send one frame; True when the connection answered it and may be reused."""
        self.stats.sent += 1
        mine, wait = _expectation(frame)
        conn.sent_opaques |= mine
        sent = False
        with trio.move_on_after(self.send_timeout):  # a server that stopped reading fills the socket buffers
            try:
                await conn.stream.send_all(frame.data)
                sent = True
            except (OSError, trio.BrokenResourceError):
                self.stats.closed_by_server += 1
                return False
        if not sent:
            self.stats.unanswered += 1
            return False
        if wait:
            self._recent.append((time.monotonic(), frame.index))
        if not wait:  # a partial frame, a oneway request or a "response": nothing will come back
            self.stats.unanswered += 1
            return False
        with trio.move_on_after(self.answer_wait):
            try:
                while True:
                    data = await conn.stream.receive_some(1 << 20)
                    self._last_heard = time.monotonic()
                    if not data:
                        self.stats.closed_by_server += 1
                        return False
                    try:
                        commands = conn.decoder.feed(data)
                    except ProtocolError as exc:
                        self.stats.findings.append(Finding("malformed-answer", f"{self.name}: {exc}", frame))
                        return False
                    for cmd in commands:
                        if not cmd.flag & 1:
                            if cmd.code not in SERVER_INITIATED_CODES:
                                self.stats.findings.append(
                                    Finding("malformed-answer", f"{self.name}: request code {cmd.code} from the server", frame)
                                )
                            continue
                        if cmd.opaque not in conn.sent_opaques:
                            self.stats.findings.append(
                                Finding("malformed-answer", f"{self.name}: answer with unknown opaque {cmd.opaque}", frame)
                            )
                            return False
                        if cmd.opaque in mine:
                            self.stats.answered += 1
                            return True
            except (OSError, trio.BrokenResourceError):
                self.stats.closed_by_server += 1
                return False
        self.stats.unanswered += 1
        return False


def _expectation(frame: Frame) -> tuple[set[int], bool]:
    """The opaques the server reads from ``frame`` and whether it can answer at all.

    A mutated frame may hold several frames, carry another opaque or none,
    or declare a length past its bytes (the server then waits for more). A
    oneway request or one flagged as a response gets no answer: waiting for
    those would only slow the run down. An undecodable frame should make the
    server close the connection, so that is waited for.
    """
    data = frame.data
    opaques: set[int] = set()
    wait = False
    pos = 0
    while len(data) - pos >= 4:
        length = int.from_bytes(data[pos : pos + 4], "big")
        if length > len(data) - pos - 4:
            break  # partial: the server waits for the rest
        try:
            cmd = decode_frame(data[pos : pos + 4 + length])
        except Exception:
            return opaques or {frame.index + 1}, True
        opaques.add(cmd.opaque)
        wait = wait or not cmd.flag & 3
        pos += 4 + length
    return opaques or {frame.index + 1}, wait


def scan_log(text: str, max_line: int = 2000) -> list[Finding]:
    """Tracebacks and over-long lines in a server log (a bad value must be logged short)."""
    findings: list[Finding] = []
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if line.startswith("Traceback"):
            tail = next((ln for ln in lines[number:] if ln and not ln.startswith(" ")), "")
            findings.append(Finding("traceback", f"log line {number}: {tail[:300]}"))
        elif len(line) > max_line:
            findings.append(Finding("long-log-line", f"log line {number} has {len(line)} characters: {line[:120]!r}..."))
    return findings
