"""What every hostile-client case of ``bench/hostile_check.py`` measures, and how.

A case is one reproduction of issue 11 run against a real server process on
127.0.0.1. Around it the harness measures what the issue's "Done when" asks:

- **stall**: a probe *process* (not a thread: the attacker's own Python
  work must not delay it through the GIL) keeps one connection open to the
  server and sends a cheap request every ~10 ms; the longest round trip
  whose request was in flight during the case is the stall another client
  saw. Each server's probe is also measured idle first, so the machine's
  own noise is on record next to every figure.
- **fresh client**: after the case a brand-new connection sends one request
  and must be answered within 1 s.
- **RSS**: the server's peak resident memory during the case, sampled every
  20 ms (psutil), where the issue gives a memory figure.
- **log**: the bytes the server's log grew by during the case, and whether
  they hold a traceback.

Everything here is bounded: every socket has a timeout, every wait a
deadline, and the probe is stopped with the server.
"""

from __future__ import annotations

import multiprocessing
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any


ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from attack_bench import RssSampler  # noqa: E402  (bench/ is on the path: scripts run from it)
from remoting import requests as rq
from remoting.codec import FrameDecoder, encode
from remoting.codes import RequestCode
from remoting.command import RemotingCommand, request
from tests.broker_procs import BrokerProcess
from tests.procs import NamesrvProcess

MIB = 1024 * 1024
#: The issue's bounds for PASS.
FRESH_CLIENT_SECONDS = 1.0
STALL_MS = 50.0
RSS_BUDGET_MB = 300.0
#: Answers we read may be larger than a server's frame limit (to see an over-long one).
CLIENT_MAX_FRAME = 64 * MIB
PROBE_PERIOD = 0.01
PROBE_TIMEOUT = 3.0


def frame(header: bytes, body: bytes = b"") -> bytes:
    """A JSON-header frame written by hand (hostile frames are not what ``encode`` makes)."""
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def cheap_request(kind: str) -> bytes:
    """What the probe sends: a request each server answers from memory in microseconds."""
    if kind == "namesrv":
        return encode(rq.get_route("HostileProbeTopic"))
    return encode(request(RequestCode.GET_MIN_OFFSET, {"topic": "TBW102", "queueId": 0}))


# --------------------------------------------------------------------------
# blocking client


class Client:
    """One blocking connection: send frames, read answers (bounded by a timeout)."""

    def __init__(self, addr: tuple[str, int], timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(addr, timeout=timeout)
        self.decoder = FrameDecoder(CLIENT_MAX_FRAME)
        self.pending: list[RemotingCommand] = []

    def send(self, data: bytes | RemotingCommand) -> None:
        self.sock.sendall(data if isinstance(data, bytes | bytearray) else encode(data))

    def read(self, timeout: float = 10.0) -> RemotingCommand:
        deadline = time.monotonic() + timeout
        while not self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer within {timeout} s")
            self.sock.settimeout(left)
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("closed by the server")
            self.pending.extend(self.decoder.feed(data))
        return self.pending.pop(0)

    def call(self, data: bytes | RemotingCommand, timeout: float = 10.0) -> RemotingCommand:
        self.send(data)
        return self.read(timeout)

    def closed_by_server(self, timeout: float = 5.0) -> bool:
        """True when the server closes this connection within ``timeout`` (answers are skipped)."""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self.sock.settimeout(max(0.01, deadline - time.monotonic()))
                if not self.sock.recv(1 << 16):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def answer_text(resp: RemotingCommand) -> str:
    """An answer in a few words for the report: code and (short) remark."""
    remark = (resp.remark or "").replace("\n", " ")
    if len(remark) > 140:
        remark = remark[:140] + "..."
    return f"code {resp.code}" + (f" '{remark}'" if remark else "") + (f", body {len(resp.body)} B" if resp.body else "")


# --------------------------------------------------------------------------
# the probe process


def _probe_main(host: str, port: int, payload: bytes, ctl: Connection) -> None:
    """Send ``payload`` every PROBE_PERIOD s on one connection; answer window queries on ``ctl``."""
    samples: list[tuple[float, float, bool]] = []  # (sent at, round trip, answered)
    sock: socket.socket | None = None
    decoder = FrameDecoder(CLIENT_MAX_FRAME)
    while True:
        while ctl.poll(0):
            msg = ctl.recv()
            if msg[0] == "stop":
                if sock is not None:
                    sock.close()
                return
            ctl.send(_window(samples, msg[1], msg[2]))
        if sock is None:
            try:
                sock = socket.create_connection((host, port), timeout=PROBE_TIMEOUT)
                decoder = FrameDecoder(CLIENT_MAX_FRAME)
            except OSError:
                samples.append((time.monotonic(), 0.0, False))
                time.sleep(0.1)
                continue
        sent = time.monotonic()
        ok = False
        try:
            sock.sendall(payload)
            deadline = sent + PROBE_TIMEOUT
            while not ok:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                data = sock.recv(65536)
                if not data:
                    raise ConnectionError("closed")
                ok = bool(decoder.feed(data))
        except (OSError, ValueError):
            sock.close()
            sock = None
        took = time.monotonic() - sent
        samples.append((sent, took, ok))
        time.sleep(max(0.0, PROBE_PERIOD - took))


def _window(samples: list[tuple[float, float, bool]], t0: float, t1: float) -> dict[str, Any]:
    """Round trips of the probe requests in flight at any time in [t0, t1]; one sent before t0
    counts only from t0 (what it waited before belongs to whatever ran before the case)."""
    hit = [(sent + lat - max(sent, t0), ok) for sent, lat, ok in samples if sent <= t1 and sent + lat >= t0]
    lats = sorted(lat for lat, ok in hit if ok)
    return {
        "samples": len(hit),
        "failed": sum(1 for _, ok in hit if not ok),
        "max_ms": round(max((lat for lat, _ in hit), default=0.0) * 1000, 1),
        "p99_ms": round(lats[int(len(lats) * 0.99)] * 1000, 1) if lats else None,
    }


class Probe:
    """A probe process against one server; :meth:`window` asks it what it saw."""

    def __init__(self, addr: tuple[str, int], kind: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._ctl, child = ctx.Pipe()
        self._proc = ctx.Process(target=_probe_main, args=(addr[0], addr[1], cheap_request(kind), child), daemon=True)
        self._proc.start()
        child.close()

    def window(self, t0: float, t1: float) -> dict[str, Any]:
        self._ctl.send(("window", t0, t1))
        if not self._ctl.poll(PROBE_TIMEOUT + 5):
            return {"samples": 0, "failed": 0, "max_ms": None, "p99_ms": None, "error": "probe did not answer"}
        return self._ctl.recv()  # type: ignore[no-any-return]

    def stop(self) -> None:
        try:
            self._ctl.send(("stop",))
        except OSError:
            pass
        self._proc.join(PROBE_TIMEOUT + 2)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(2)


# --------------------------------------------------------------------------
# memory


# --------------------------------------------------------------------------
# servers


class Server:
    """A real server process with its probe and RSS sampler; :meth:`stop` ends all three."""

    def __init__(self, kind: str, proc: NamesrvProcess | BrokerProcess) -> None:
        self.kind = kind
        self.proc = proc
        host, port = proc.addr.rsplit(":", 1)
        self.addr = (host, int(port))
        assert proc.proc is not None
        self.pid = proc.proc.pid
        self.rss = RssSampler(self.pid).start()
        self.probe = Probe(self.addr, kind)
        self.baseline: dict[str, Any] = {}

    @classmethod
    def namesrv(cls, workdir: Path, **props: object) -> Server:
        proc = NamesrvProcess(workdir, **props)
        try:
            proc.start()
        except BaseException:
            proc.kill()
            raise
        return cls("namesrv", proc)

    @classmethod
    def broker(cls, workdir: Path, **props: object) -> Server:
        proc = BrokerProcess(workdir, **props)
        try:
            proc.start()
        except BaseException:
            proc.kill()
            raise
        return cls("broker", proc)

    def measure_baseline(self, seconds: float = 2.0) -> dict[str, Any]:
        """The probe's figures with nothing attacking: the machine's own noise."""
        time.sleep(0.3)  # the probe process is up and connected
        t0 = time.monotonic()
        time.sleep(seconds)
        self.baseline = self.probe.window(t0, time.monotonic())
        return self.baseline

    @property
    def alive(self) -> bool:
        return self.proc.proc is not None and self.proc.proc.poll() is None

    @property
    def log_path(self) -> Path:
        return self.proc.log_path

    def log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def log_since(self, offset: int) -> bytes:
        if not self.log_path.exists():
            return b""
        with open(self.log_path, "rb") as fh:
            fh.seek(offset)
            return fh.read()

    def fresh_client(self) -> tuple[bool, float]:
        """Whether a brand-new connection is answered within 1 s, and how long it took."""
        start = time.monotonic()
        try:
            with Client(self.addr, timeout=FRESH_CLIENT_SECONDS) as c:
                c.call(cheap_request(self.kind), timeout=FRESH_CLIENT_SECONDS)
        except OSError:
            return False, time.monotonic() - start
        took = time.monotonic() - start
        return took < FRESH_CLIENT_SECONDS, took

    def restart(self) -> int:
        """SIGTERM, start again (a new pid, maybe a new port): returns the exit status."""
        assert isinstance(self.proc, NamesrvProcess)
        self.probe.stop()
        self.rss.stop()
        status = self.proc.terminate()
        self.proc.start()
        host, port = self.proc.addr.rsplit(":", 1)
        self.addr = (host, int(port))
        assert self.proc.proc is not None
        self.pid = self.proc.proc.pid
        self.rss = RssSampler(self.pid).start()
        self.probe = Probe(self.addr, self.kind)
        return status

    def stop(self) -> None:
        self.probe.stop()
        self.rss.stop()
        self.proc.kill()


@contextmanager
def servers(starters: list[Callable[[], Server]]) -> Iterator[list[Server]]:
    """Start servers in order; every one started is stopped, whatever happens."""
    started: list[Server] = []
    try:
        for start in starters:
            started.append(start())
        yield started
    finally:
        for server in started:
            server.stop()


# --------------------------------------------------------------------------
# one case


@dataclass
class Outcome:
    """What a case's attack reports back: the server's answer and checks of the issue's own."""

    answer: str
    checks: dict[str, bool] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    rss_limited: bool = False  # the issue gives a memory figure for this case: RSS is judged
    #: When the attack proper began, if the case first set something up (a big topic table):
    #: the stall is measured from here.
    window_start: float | None = None
    #: When the attack proper ended, if the case then tore something down (closing a broker's
    #: connection drops its topics: a cost of its own, reported as a figure).
    window_end: float | None = None


@dataclass
class Case:
    """One reproduction: ``attack`` runs against ``server``; ``stall_applies`` is False for the
    figures that are not attacks (a legitimate large broker: its stall is issue 12's)."""

    id: str
    item: int
    what: str
    server: Server
    attack: Callable[[], Outcome]
    stall_applies: bool = True


def run_case(case: Case) -> dict[str, Any]:
    """Run one attack against its server and measure it; a PASS needs every bound met.

    The machine is shared and noisy: a case that fails on the stall alone is run once more,
    and both figures are kept (``first_attempt``); a stall that comes back is a FAIL.
    """
    result = _run_once(case)
    failed = [k for k, ok in result["checks"].items() if not ok]
    if failed == ["stall <= 50 ms"]:
        first = {"stall_max_ms": result["stall_max_ms"], "stall_p99_ms": result["stall_p99_ms"]}
        print("        (stall only: running the case once more)", flush=True)
        result = _run_once(case)
        result["first_attempt"] = first
    return result


def _run_once(case: Case) -> dict[str, Any]:
    case_id, item, what, server, attack = case.id, case.item, case.what, case.server, case.attack
    log_at = server.log_size()
    server.rss.reset_peak()
    t0 = time.monotonic()
    try:
        outcome = attack()
    except Exception as exc:  # a case that cannot finish is a FAIL with the reason, not a crash of the check
        outcome = Outcome(f"attack failed: {type(exc).__name__}: {exc}"[:300], {"attack completed": False})
    time.sleep(0.05)  # a few probes after the last answer: a stall the attack left behind shows too
    t1 = time.monotonic()
    stall = server.probe.window(outcome.window_start or t0, outcome.window_end or t1)
    peak_mb = server.rss.peak / 1e6
    alive = server.alive
    fresh_ok, fresh_s = server.fresh_client() if alive else (False, 0.0)
    new_log = server.log_since(log_at)
    traceback = b"Traceback" in new_log
    checks = {
        "server alive": alive,
        "fresh client < 1 s": fresh_ok,
        "no traceback in log": not traceback,
        **outcome.checks,
    }
    stall_ms = stall.get("max_ms")
    if case.stall_applies:
        checks["stall <= 50 ms"] = stall_ms is not None and stall_ms <= STALL_MS and not stall.get("failed")
    if outcome.rss_limited:
        checks["RSS < 300 MB"] = peak_mb < RSS_BUDGET_MB
    result = {
        "case": case_id,
        "item": item,
        "server": server.kind,
        "what": what,
        "answer": outcome.answer,
        "seconds": round(t1 - t0, 2),
        "fresh_client_ms": round(fresh_s * 1000, 1),
        "stall_max_ms": stall_ms,
        "stall_p99_ms": stall.get("p99_ms"),
        "probe_samples": stall.get("samples"),
        "probe_failed": stall.get("failed"),
        "baseline_stall_max_ms": server.baseline.get("max_ms"),
        "rss_peak_mb": round(peak_mb, 1),
        "log_bytes": len(new_log),
        "log_lines": new_log.count(b"\n"),
        "figures": outcome.figures,
        "checks": checks,
        "pass": all(checks.values()),
    }
    print_result(result)
    return result


def print_result(r: dict[str, Any]) -> None:
    verdict = "PASS" if r["pass"] else "FAIL"
    failed = [k for k, ok in r["checks"].items() if not ok]
    print(
        f"[{verdict}] {r['case']} (item {r['item']}, {r['server']}): {r['what']}\n"
        f"        answer: {r['answer']}\n"
        f"        fresh client {r['fresh_client_ms']} ms; stall max {r['stall_max_ms']} ms "
        f"(p99 {r['stall_p99_ms']}, idle max {r['baseline_stall_max_ms']}, {r['probe_samples']} probes); "
        f"RSS peak {r['rss_peak_mb']} MB; log +{r['log_bytes']} B/{r['log_lines']} lines; {r['seconds']} s"
        + (f"\n        figures: {r['figures']}" if r["figures"] else "")
        + (f"\n        failed: {', '.join(failed)}" if failed else ""),
        flush=True,
    )
