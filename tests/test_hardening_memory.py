"""Memory and descriptor bounds of the shared reactor (issue 11, items 4 and 8).

Real ``mqnamesrv`` / ``mqbroker-stub`` processes on 127.0.0.1, attacked at a
scale a test can afford (a few hundred MB through loopback at most); the
full-size attacks are in ``bench/attack_bench.py``. RSS is read with psutil.
"""

from __future__ import annotations

import resource
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from remoting import requests as rq
from remoting.bodies import DataVersion, TopicConfig
from remoting.codec import FrameDecoder, encode
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from server_runtime.limits import ReadBudget, default_max_connections, water_marks
from tests.broker_procs import broker_command
from tests.broker_wire import socket_call
from tests.procs import NamesrvProcess

MIB = 1024 * 1024


def _addr(proc: NamesrvProcess) -> tuple[str, int]:
    host, port = proc.addr.rsplit(":", 1)
    return host, int(port)


def _rss(proc: NamesrvProcess) -> int:
    assert proc.proc is not None
    return psutil.Process(proc.proc.pid).memory_info().rss


def _fresh_client_answered(addr: tuple[str, int], within: float = 10.0) -> None:
    """A fresh client is answered (``within`` only detects a hang: stall figures are the benchmarks')."""
    with socket.create_connection(addr, timeout=within) as sock:
        resp = socket_call(sock, rq.get_route("NoSuchTopic"), timeout=within)
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST


# ---------------------------------------------------------------------------
# the read budget


def test_read_budget_admits_whole_frames_and_keeps_room_for_small_ones() -> None:
    budget = ReadBudget(16 * MIB)  # big frames may take 14 MiB, the last 2 MiB are for small ones
    assert budget.resize(0, 8 * MIB)
    assert not budget.resize(0, 8 * MIB)  # would pass what big frames may take
    assert budget.resize(0, 6 * MIB)
    assert budget.tight
    assert budget.resize(0, 60 * 1024)  # a small frame still fits
    assert budget.resize(8 * MIB, 0)  # a frame completed: room again
    assert not budget.resize(0, 8 * MIB)  # 6 MiB + 60 KiB are still held
    assert budget.resize(0, 7 * MIB)
    budget.release(7 * MIB)
    budget.release(6 * MIB)
    budget.release(60 * 1024)
    assert budget.used == 0
    assert budget.resize(0, 20 * MIB)  # bigger than the budget: admitted alone
    assert not budget.resize(0, 100 * 1024)
    assert budget.overdraw(0, 30_000) == 30_000


def test_read_budget_is_not_held_forever_by_refused_first_reads() -> None:
    """CI once saw 39 of 40 big frames never answered: each connection's first read
    (256 KiB) was charged after its frame was refused, together those reads filled the
    budget, and no frame was in progress to free any of it."""
    budget = ReadBudget(8 * MIB)
    assert budget.resize(0, 4 * MIB)  # the first frame is admitted
    waiting = []
    for _ in range(39):
        assert not budget.resize(0, 4 * MIB)  # the rest are refused after one read each
        charge = budget.overdraw(0, 256 * 1024)
        budget.waiting += charge
        waiting.append(charge)
    assert not budget.resize(waiting[0], 4 * MIB, waiting=True)  # a frame is in progress
    assert budget.resize(4 * MIB, 0)  # it completes
    assert budget.used > budget.big_limit  # only waiting connections' reads are held now...
    assert budget.resize(waiting[0], 4 * MIB, waiting=True)  # ...so the oldest of them goes on
    budget.waiting -= waiting[0]
    assert not budget.resize(waiting[1], 4 * MIB, waiting=True)  # and the next waits for it


def test_water_marks_default_to_nettys() -> None:
    assert water_marks(0, 0) == (64 * 1024, 32 * 1024)
    assert water_marks(4 * MIB, 1 * MIB) == (4 * MIB, 1 * MIB)
    assert water_marks(16 * 1024, 0) == (16 * 1024, 16 * 1024)
    with pytest.raises(ValueError, match="above"):
        water_marks(1000, 2000)


def _send_big_frames(addr: tuple[str, int], count: int, frame_len: int, deadline: float) -> tuple[int, float]:
    """``count`` connections each send one whole ``frame_len`` frame as fast as the server
    reads; returns (answers received, seconds). Meanwhile a fresh client sends a small
    request split in two and must be answered within 1 s."""
    header = b'{"code":105,"extFields":{"topic":"T"}}'
    prefix = struct.pack(">II", frame_len - 4, len(header)) + header
    body = memoryview(bytes(frame_len - len(prefix)))
    socks = [socket.create_connection(addr, timeout=5) for _ in range(count)]
    for sock in socks:
        sock.setblocking(False)
    sent = [0] * count
    answered = [False] * count
    started = time.monotonic()
    probed = False
    try:
        while not all(answered):
            assert time.monotonic() < deadline, f"only {sum(answered)} of {count} frames answered in time"
            for i, sock in enumerate(socks):
                if sent[i] < frame_len:
                    data = prefix if sent[i] == 0 else body[sent[i] - len(prefix) :][: 256 * 1024]
                    try:
                        sent[i] += sock.send(data)
                    except BlockingIOError:
                        pass
                if not answered[i]:
                    try:
                        answered[i] = bool(sock.recv(65536))
                    except BlockingIOError:
                        pass
            if not probed and sum(sent) > 4 * frame_len:  # the budget is taken by now
                probed = True
                with socket.create_connection(addr, timeout=10) as small:
                    frame = encode(rq.get_route("NoSuchTopic"))
                    small.sendall(frame[:10])
                    time.sleep(0.05)
                    assert socket_call(small, frame[10:], timeout=10.0).code == ResponseCode.TOPIC_NOT_EXIST
            time.sleep(0.001)
    finally:
        for sock in socks:
            sock.close()
    assert probed
    return sum(answered), time.monotonic() - started


def test_slow_big_frames_wait_for_the_budget_and_all_complete(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    budget = 8 * MIB
    namesrv = start_namesrv(serverTotalReadBufferBytes=budget)
    addr = _addr(namesrv)
    proc = psutil.Process(namesrv.proc.pid)
    base = proc.memory_info().rss
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        answered, _ = _send_big_frames(addr, count=40, frame_len=4 * MIB, deadline=time.monotonic() + 60)
    finally:
        stop.set()
        sampler.join(2)
    assert answered == 40
    # Unbounded, 40 x 4 MiB frames arrive at once (160 MB); the budget holds one or two.
    assert peak[0] - base < 60 * MIB, f"RSS grew {(peak[0] - base) / MIB:.0f} MiB"
    _fresh_client_answered(addr)
    assert "Traceback" not in namesrv.log()


def test_memory_falls_back_after_big_frames(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    """Frame buffers freed back to the heap are returned to the OS (glibc keeps them otherwise)."""
    namesrv = start_namesrv()
    addr = _addr(namesrv)
    base = _rss(namesrv)
    for _ in range(2):
        answered, _ = _send_big_frames(addr, count=12, frame_len=16 * MIB, deadline=time.monotonic() + 60)
        assert answered == 12
    time.sleep(2.5)  # a once-a-second sweep returns the pages
    assert _rss(namesrv) - base < 10 * MIB, f"still {(_rss(namesrv) - base) / MIB:.0f} MiB above the base"


# ---------------------------------------------------------------------------
# write-buffer water marks


def _register_many_topics(addr: tuple[str, int], count: int) -> tuple[socket.socket, int]:
    """A broker with ``count`` topics on a connection the caller keeps open (closing it drops
    them); returns it and the size of a GET_ALL_TOPIC_LIST answer."""
    broker = socket.create_connection(addr, timeout=30)
    resp = socket_call(broker, rq.register_broker(
        cluster="C", broker_name="b", broker_addr="127.0.0.1:1", broker_id=0,
        topics=[TopicConfig(f"Topic-{i:07d}", 4, 4, 6) for i in range(count)],
        data_version=DataVersion(1, 1), compressed=True,
    ), timeout=30)
    assert resp.code == ResponseCode.SUCCESS
    return broker, len(socket_call(broker, rq.all_topics(), timeout=30).body)


def _pipeline(addr: tuple[str, int], requests: int) -> socket.socket:
    sock = socket.create_connection(addr, timeout=10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    frames = []
    for opaque in range(requests):
        req = rq.all_topics()
        req.opaque = opaque
        frames.append(encode(req))
    sock.sendall(b"".join(frames))
    return sock


def _peak_rss_for(proc: NamesrvProcess, seconds: float) -> int:
    peak = 0
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        peak = max(peak, _rss(proc))
        time.sleep(0.02)
    return peak


def test_a_client_that_never_reads_stops_being_read(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    namesrv = start_namesrv()
    addr = _addr(namesrv)
    broker, answer_size = _register_many_topics(addr, 20000)
    try:
        assert answer_size > 300_000
        time.sleep(0.5)
        base = _rss(namesrv)
        sock = _pipeline(addr, 300)  # ~100 MB of answers asked for
        peak = _peak_rss_for(namesrv, 1.5)
        # Unbounded, every answer would be built and kept; here the connection stops being
        # read once its unsent answers pass the high water mark (64 KiB by default).
        assert peak - base < 25 * MIB, f"RSS grew {(peak - base) / MIB:.0f} MiB"
        _fresh_client_answered(addr)
        # Reading again resumes it: every answer arrives, in order.
        decoder = FrameDecoder()
        got: list[RemotingCommand] = []
        sock.settimeout(10)
        deadline = time.monotonic() + 30
        while len(got) < 300 and time.monotonic() < deadline:
            data = sock.recv(1 << 20)
            assert data
            got.extend(decoder.feed(data))
        assert [r.opaque for r in got] == list(range(300))
        assert all(r.code == ResponseCode.SUCCESS and len(r.body) == answer_size for r in got)
        sock.close()
    finally:
        broker.close()


def test_memory_falls_back_after_a_pipelining_client_closes(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    # Generous marks so the unsent answers really take memory, then must be given back.
    namesrv = start_namesrv(writeBufferHighWaterMark=48 * MIB, writeBufferLowWaterMark=16 * MIB)
    addr = _addr(namesrv)
    broker, _ = _register_many_topics(addr, 20000)
    try:
        time.sleep(0.5)
        base = _rss(namesrv)
        sock = _pipeline(addr, 300)
        peak = _peak_rss_for(namesrv, 3.0)
        assert peak - base > 40 * MIB  # the marks let it buffer
        assert peak - base < 110 * MIB  # but not everything (~100 MB of answers, doubled by copies)
        sock.close()
        time.sleep(2.5)  # the close is seen at once; pages go back at the next once-a-second sweep
        assert _rss(namesrv) - base < 15 * MIB, f"still {(_rss(namesrv) - base) / MIB:.0f} MiB above the base"
        _fresh_client_answered(addr)
    finally:
        broker.close()


# ---------------------------------------------------------------------------
# descriptors: the connection limit and EMFILE


def _low_nofile(limit: int):  # type: ignore[no-untyped-def]
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return apply


class LowFdNamesrv(NamesrvProcess):
    """A NameServer started with a low RLIMIT_NOFILE (as after ``ulimit -n``)."""

    def __init__(self, workdir: Path, nofile: int, **props: object) -> None:
        super().__init__(workdir, **props)
        self.nofile = nofile

    def start(self, timeout: float = 15.0) -> NamesrvProcess:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "namesrv.cli", "-c", str(self.config_path)],
                stdout=subprocess.PIPE, stderr=log, cwd=self.workdir, preexec_fn=_low_nofile(self.nofile),
            )
        self.addr = self._wait_for_boot(timeout)
        return self


def test_default_connection_limit_follows_rlimit_nofile(tmp_path: Path) -> None:
    for command in ([sys.executable, "-m", "namesrv.cli", "-p"], broker_command() + ["-p"]):
        out = subprocess.run(command, capture_output=True, text=True, timeout=30, preexec_fn=_low_nofile(512),
                             cwd=tmp_path)
        assert "serverMaxConnections=384" in out.stdout, out.stdout + out.stderr
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert default_max_connections() == min(10000, soft - 128)


def test_accept_backs_off_when_out_of_descriptors(tmp_path: Path) -> None:
    namesrv = LowFdNamesrv(tmp_path / "ns", nofile=256, serverMaxConnections=10000)
    clients: list[socket.socket] = []
    try:
        namesrv.start()
        addr = _addr(namesrv)
        server = psutil.Process(namesrv.proc.pid)  # type: ignore[union-attr]
        for _ in range(400):  # more than it has descriptors for; the rest wait in the backlog
            clients.append(socket.create_connection(addr, timeout=5))
        time.sleep(0.5)
        cpu_before = sum(server.cpu_times()[:2])
        time.sleep(3.0)
        cpu = sum(server.cpu_times()[:2]) - cpu_before
        assert cpu < 0.6, f"server used {cpu:.2f} s of CPU in 3 s at EMFILE (spinning)"
        log = namesrv.log()
        assert "Too many open files" in log
        assert log.count("accept failed") <= 3, log[-2000:]
        for sock in clients:
            sock.close()
        clients.clear()
        time.sleep(0.3)
        deadline = time.monotonic() + 20.0  # the listener is watched again after at most 1 s of backoff
        while True:
            try:
                _fresh_client_answered(addr, within=5.0)
                break
            except (OSError, AssertionError):
                assert time.monotonic() < deadline, "not serving after the flood"
    finally:
        for sock in clients:
            sock.close()
        namesrv.kill()


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ("writeBufferHighWaterMark=1000\nwriteBufferLowWaterMark=2000\n", "above writeBufferHighWaterMark"),
        ("serverTotalReadBufferBytes=1000\n", "serverTotalReadBufferBytes must be at least"),
    ],
)
def test_bad_wire_bounds_are_one_line_at_start(tmp_path: Path, props: str, message: str) -> None:
    conf = tmp_path / "server.properties"
    conf.write_text("listenPort=0\n" + props)
    for command in ([sys.executable, "-m", "namesrv.cli"], broker_command()):
        out = subprocess.run(command + ["-c", str(conf)], capture_output=True, text=True, timeout=30, cwd=tmp_path)
        assert out.returncode != 0
        assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
