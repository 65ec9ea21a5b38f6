#!/usr/bin/env python3
"""NameServer benchmark in the shape of RocketMQ's route-info benchmark.

4 clusters x 8 brokers, 10,000 topics per cluster (every broker of a
cluster serves all of its cluster's topics: 40,000 topics, 320,000
queue-data entries), clients querying random topics over 1, 16 and 64
connections. The server runs as a real ``mqnamesrv`` process pinned to
CPU 0; the C load generator is pinned to CPU 1 and reports its own CPU
use, so it can be seen not to be the bottleneck. Everything stays on
127.0.0.1 and every loop is bounded in time.

Phases (``--phases``, comma-separated; the 32 brokers always register first):

* ``inproc``: registration CPU time inside the processor, no sockets, and
  the longest stretch between two yields to the reactor
  (``bench/namesrv_inproc.py``: steady where wall-clock figures are not);
* ``queries``: route queries while every broker re-sends its unchanged
  registration every ``--rereg-period`` seconds (issue 2's table);
* ``churn``: route queries at ``--churn-connections`` while the 32 brokers
  re-register every ``--churn-period`` seconds in each ``--churn-modes``
  mode: ``none`` (no registrations, the reference), ``same`` (the very
  same body), ``version`` (a new data version, identical topic table) and
  ``one-topic`` (a new data version and one topic changed); with
  registrations/s achieved and their latency as the brokers see it;
* ``big``: a 100,000-topic broker registering (compressed, then JSON; first
  registration and a new data version) while 16 connections query routes.

``--tls`` sends the route queries over TLS (the generator links OpenSSL;
the server's default permissive port with its test-mode certificate),
for the cost of TLS beside the plaintext figures.

``--auth`` runs the same phases against a NameServer with accounts
(``aclEnable``, a generated plain_acl.yml): the brokers sign their
registrations with an admin account; route queries go ``unsigned`` (the
default aclUnsignedClasses lets them through with one set lookup) or
``signed`` by a plain account (verified until each connection has shown
one good signature, see security/gate.py); ``ignored`` sends the signed
queries to a server without accounts. A signature does not cover the
opaque, so the load generator's pre-encoded frames stay valid, as a
replayed request would. ``bench/auth_bench.py`` compares these modes in
interleaved rounds, which one run per mode cannot do on a noisy machine.

Prints the figures and writes them as JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from remoting import acl
from remoting import requests as rq
from remoting.bodies import DataVersion, TopicConfig
from remoting.register_body import encode_register_body
from remoting.codec import FrameDecoder, encode
from remoting.codes import RequestCode
from remoting.command import request

SERVER_CPU = 0
CLIENT_CPU = 1
BOOT = re.compile(rb"address ([\d.]+):(\d+)")
PHASES = ("inproc", "queries", "churn", "big")
CHURN_MODES = ("none", "same", "version", "one-topic")
#: Data-version counters start here so that bumping one never changes the body's length.
COUNTER_BASE = 10**12
#: Topics per broker whose readQueueNums the one-topic mode toggles in turn.
TOGGLED_TOPICS = 512
AUTH_MODES = ("off", "ignored", "unsigned", "signed")
#: The modes whose server has accounts (``ignored``: signed queries, a server without accounts).
ACCOUNTS_ON = ("unsigned", "signed")
#: The accounts of --auth runs: the brokers' admin account and the clients' plain one.
BROKER_KEYS = acl.Credentials("benchBroker", "benchBrokerSecret")
CLIENT_KEYS = acl.Credentials("benchClient", "benchClientSecret")


def accounts_yaml() -> str:
    return (
        "accounts:\n"
        f"  - accessKey: {BROKER_KEYS.access_key}\n    secretKey: {BROKER_KEYS.secret_key}\n    admin: true\n"
        f"  - accessKey: {CLIENT_KEYS.access_key}\n    secretKey: {CLIENT_KEYS.secret_key}\n    admin: false\n"
    )


def pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and os.cpu_count() and os.cpu_count() > cpu:  # type: ignore[operator]
        os.sched_setaffinity(0, {cpu})


def die_with_parent() -> None:
    """In a child before its exec: SIGKILLed when the benchmark dies, even by SIGKILL (Linux PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG


def pinned_child(cpu: int) -> Callable[[], None]:
    """A ``preexec_fn``: the child runs on ``cpu`` (where the machine has it) and dies with the benchmark."""

    def setup() -> None:
        pin(cpu)
        die_with_parent()

    return setup


def start_server(
    workdir: Path,
    frame_max: int,
    auth: bool = False,
    server_root: Path = ROOT,
    props: dict[str, object] | None = None,
    nice: int = 0,
) -> tuple[subprocess.Popen[bytes], str]:
    """A ``mqnamesrv`` on 127.0.0.1 pinned to SERVER_CPU (at ``nice``), with ``props`` added to its config."""
    cfg = workdir / "namesrv.properties"
    extra = ""
    if auth:
        (workdir / "plain_acl.yml").write_text(accounts_yaml())
        extra = f"aclEnable=true\naclConfigPath={workdir}/plain_acl.yml\n"
    cfg.write_text(
        "listenPort=0\nbindAddress=127.0.0.1\n"
        f"kvConfigPath={workdir}/kvConfig.json\nframeMaxLength={frame_max}\n"
        + extra
        + "".join(f"{k}={v}\n" for k, v in (props or {}).items())
    )

    def setup() -> None:
        pinned_child(SERVER_CPU)()
        if nice:
            os.nice(nice)

    proc = subprocess.Popen(
        [sys.executable, "-m", "namesrv.cli", "-c", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=open(workdir / "namesrv.log", "wb"),
        cwd=server_root,  # python -m imports the server from here: another checkout can be measured
        preexec_fn=setup,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 120  # importing the server took over 15 s on a machine with load 19
    seen = b""
    while time.monotonic() < deadline:
        chunk = os.read(proc.stdout.fileno(), 4096)
        seen += chunk
        m = BOOT.search(seen)
        if m:
            return proc, f"{m.group(1).decode()}:{m.group(2).decode()}"
        if not chunk:  # it exited
            break
    proc.kill()
    proc.wait()
    raise SystemExit(f"server did not start: {seen!r}; its log: {workdir / 'namesrv.log'}")


def cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, all its threads."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid: int) -> float:
    return sum(cpu_split(pid))


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


class BlockingConn:
    """A plain blocking connection for registrations (run from one thread)."""

    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder(1 << 30)

    def call(self, frame: bytes) -> tuple[float, int]:
        """Send a pre-encoded request; return (seconds, response code)."""
        start = time.perf_counter()
        self.sock.sendall(frame)
        while True:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("server closed the connection")
            got = self.decoder.feed(data)
            if got:
                return time.perf_counter() - start, got[0].code


def topic_configs(cluster: int, count: int) -> list[TopicConfig]:
    return [TopicConfig(f"topic-{cluster}-{i:06d}", 8, 8, 6) for i in range(count)]


class BrokerBody:
    """One broker's registration, patched in place (a bench-side encode would cost 10+ ms).

    ``frame(change)`` bumps the data version (same length: counters start at
    COUNTER_BASE) and, with ``change``, toggles one topic's readQueueNums
    between 8 and 9, a different topic each time.
    """

    def __init__(
        self, cluster: int, broker: int, configs: list[TopicConfig], keys: acl.Credentials | None = None
    ) -> None:
        self.cluster, self.broker = cluster, broker
        self.keys = keys
        self.counter = COUNTER_BASE
        self.body = bytearray(encode_register_body(configs, DataVersion(self.counter, 1_700_000_000_000)))
        self.counter_at = self.body.index(b'"counter":%d' % self.counter) + len(b'"counter":')
        step = max(1, len(configs) // TOGGLED_TOPICS)
        self.toggles = []
        for tc in configs[::step][:TOGGLED_TOPICS]:
            at = self.body.index(b'"%s":{' % tc.topic_name.encode())
            self.toggles.append(self.body.index(b'"readQueueNums":', at) + len(b'"readQueueNums":'))
        self.turn = 0
        self.current = self._frame()

    @property
    def identity(self) -> dict[str, str]:
        """The broker's cluster, name and address as its registration names them."""
        return {"cluster": f"cluster-{self.cluster}", "broker_name": f"broker-{self.cluster}-{self.broker}",
                "broker_addr": f"127.0.0.{10 + self.cluster}:{10911 + self.broker * 10}"}

    def _frame(self) -> bytes:
        body = bytes(self.body)
        names = self.identity
        ext = {
            "brokerName": names["broker_name"],
            "brokerAddr": names["broker_addr"],
            "clusterName": names["cluster"],
            "haServerAddr": f"127.0.0.{10 + self.cluster}:{10912 + self.broker * 10}",
            "brokerId": 0,
            "compressed": False,
            "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF,
            "enableActingMaster": False,
        }
        cmd = request(RequestCode.REGISTER_BROKER, ext, body)
        return encode(acl.sign(cmd, self.keys) if self.keys is not None else cmd)

    def frame(self, change: bool) -> bytes:
        self.counter += 1
        self.body[self.counter_at : self.counter_at + 13] = b"%d" % self.counter
        if change:
            at = self.toggles[self.turn % len(self.toggles)]
            self.body[at] = ord("9") if self.body[at] == ord("8") else ord("8")
            self.turn += 1
        self.current = self._frame()
        return self.current


def build_loadgen(workdir: Path, tls: bool = False) -> Path:
    """Compile the C load generator (a Python one would be the bottleneck); with OpenSSL for ``tls``."""
    exe = workdir / "loadgen"
    cc = os.environ.get("CC", "cc")
    tls_flags = (["-DWITH_TLS"], ["-lssl", "-lcrypto"]) if tls else ([], [])
    subprocess.run([cc, "-O2", *tls_flags[0], "-o", str(exe), str(ROOT / "bench" / "loadgen.c"), *tls_flags[1]],
                   check=True)
    return exe


def loadgen_cmd(
    loadgen: Path, frames_file: Path, addr: str, conns: int, duration: float, tls: bool = False, depth: int = 1
) -> list[str]:
    host, port = addr.rsplit(":", 1)
    command = [str(loadgen), host, port, str(conns), str(duration), str(depth), str(frames_file)]
    return command + (["tls"] if tls else [])


def query_load(
    loadgen: Path, frames_file: Path, addr: str, conns: int, duration: float, tls: bool = False, depth: int = 1
) -> dict[str, float]:
    """Closed-loop random route queries from the C generator pinned to CPU 1 (over TLS with ``tls``)."""
    out = subprocess.run(
        loadgen_cmd(loadgen, frames_file, addr, conns, duration, tls, depth),
        capture_output=True, text=True, timeout=duration + 60, preexec_fn=pinned_child(CLIENT_CPU),
    )
    if out.returncode != 0:
        raise SystemExit(f"load generator failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


class Reregistrar(threading.Thread):
    """The brokers re-registering in turn, each every ``period`` seconds, on a fixed schedule.

    Late registrations are sent at once (not skipped), so "registrations/s
    achieved" falls below 32/s when the server cannot keep up.
    """

    def __init__(self, conns: list[BlockingConn], brokers: list[BrokerBody], period: float, mode: str) -> None:
        super().__init__(daemon=True)
        self.conns, self.brokers, self.period, self.mode = conns, brokers, period, mode
        self.stop = threading.Event()
        self.latencies: list[float] = []
        self.error: str | None = None

    def run(self) -> None:
        gap = self.period / len(self.conns)
        due = time.perf_counter()
        i = 0
        while not self.stop.is_set():
            wait = due - time.perf_counter()
            if wait > 0 and self.stop.wait(wait):
                break
            broker = self.brokers[i]
            frame = broker.current if self.mode == "same" else broker.frame(self.mode == "one-topic")
            took, code = self.conns[i].call(frame)
            if code != 0:
                self.error = f"re-registration failed with code {code}"
                return
            self.latencies.append(took)
            due += gap
            i = (i + 1) % len(self.conns)


def queries_with(
    pid: int, run_load: Callable[[], dict[str, float]], conns: list[BlockingConn], brokers: list[BrokerBody], period: float, mode: str
) -> dict[str, object]:
    """One query phase with the brokers re-registering in ``mode`` (none: not at all)."""
    rereg = Reregistrar(conns, brokers, period, mode) if mode != "none" else None
    if rereg is not None:
        rereg.start()
    user0, sys0 = cpu_split(pid)
    t0 = time.perf_counter()
    try:
        res: dict[str, object] = dict(run_load())
    finally:
        elapsed = time.perf_counter() - t0
        if rereg is not None:
            rereg.stop.set()
            rereg.join()
    user1, sys1 = cpu_split(pid)
    cpu = user1 - user0 + sys1 - sys0
    res["server_cpu_pct"] = 100 * cpu / elapsed
    res["server_sys_share"] = (sys1 - sys0) / cpu if cpu else 0.0  # the kernel's part: recv, send, epoll
    # CPU per query: steadier than q/s on a shared machine, where the server may get a fraction of its core
    res["server_cpu_us_per_query"] = 1e6 * cpu / max(1.0, float(res.get("queries", 0)))
    if rereg is not None:
        if rereg.error:
            raise SystemExit(rereg.error)
        lat = [x * 1000 for x in rereg.latencies]
        res.update(
            registrations=len(lat),
            registrations_per_s=len(lat) / elapsed,
            reg_p50_ms=pct(lat, 50),
            reg_p99_ms=pct(lat, 99),
            reg_max_ms=max(lat, default=0.0),
        )
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated, of: {', '.join(PHASES)}")
    ap.add_argument("--clusters", type=int, default=4)
    ap.add_argument("--brokers", type=int, default=8, help="brokers per cluster")
    ap.add_argument("--topics", type=int, default=10_000, help="topics per cluster")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per query phase")
    ap.add_argument("--connections", default="1,16,64", help="queries phase")
    ap.add_argument("--rereg-period", type=float, default=3.0, help="queries phase: seconds between a broker's re-registrations")
    ap.add_argument("--churn-connections", default="16,64")
    ap.add_argument("--churn-period", type=float, default=1.0, help="churn: seconds between a broker's re-registrations")
    ap.add_argument("--churn-modes", default=",".join(CHURN_MODES), help=f"comma-separated, of: {', '.join(CHURN_MODES)}")
    ap.add_argument("--big-topics", type=int, default=100_000)
    ap.add_argument("--depth", type=int, default=1, help="queries phase: requests in flight per connection (1-64)")
    ap.add_argument("--tls", action="store_true",
                    help="route queries over TLS (the server's default permissive port, test-mode certificate)")
    ap.add_argument("--server-root", type=Path, default=ROOT,
                    help="run the NameServer of another checkout (e.g. an export of main), for A/B comparisons")
    ap.add_argument("--warmup", type=float, default=0.0,
                    help="seconds of untimed route queries (16 connections) before the query phases")
    ap.add_argument("--auth", choices=AUTH_MODES, default="off",
                    help="accounts on the server; route queries unsigned or signed (see the docstring)")
    ap.add_argument("--out", help="JSON results (default bench/results/namesrv.json, or namesrv-PHASES.json for a subset)")
    args = ap.parse_args()
    phases = [p for p in args.phases.split(",") if p]
    modes = [m for m in args.churn_modes.split(",") if m]
    bad = [p for p in phases if p not in PHASES] + [m for m in modes if m not in CHURN_MODES]
    if bad or not (0 < args.duration <= 600) or args.churn_period <= 0 or args.rereg_period <= 0 or not (
        0 <= args.warmup <= 600
    ):
        ap.error(f"bad phase, mode or duration: {', '.join(bad) or args.duration}")
    if not 1 <= args.depth <= 64:
        ap.error(f"--depth must be 1-64, got {args.depth}")
    out_path = Path(args.out) if args.out else ROOT / "bench" / "results" / (
        "namesrv.json" if set(phases) == set(PHASES) else f"namesrv-{'-'.join(phases)}.json")

    pin(CLIENT_CPU)
    results: dict[str, object] = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "shape": f"{args.clusters} clusters x {args.brokers} brokers, {args.topics} topics per cluster",
        "auth": args.auth,
        "server_root": str(args.server_root.resolve()),
        "warmup_s": args.warmup,
        "load_average_before": os.getloadavg()[0],
        "tls": args.tls,
        "depth": args.depth,
    }
    if "inproc" in phases:
        from bench.namesrv_inproc import measure

        results["inproc"] = inproc = measure(args.topics, args.brokers, args.big_topics)
        print("in-process registration CPU ms:", json.dumps(inproc, indent=2))
        phases = [p for p in phases if p != "inproc"]
        if not phases:
            write_results(out_path, results)
            return
    with tempfile.TemporaryDirectory(prefix="namesrv-bench-") as tmp:
        loadgen = build_loadgen(Path(tmp), tls=args.tls)
        proc, addr = start_server(Path(tmp), frame_max=64 * 1024 * 1024, auth=args.auth in ACCOUNTS_ON,
                                  server_root=args.server_root.resolve())
        try:
            results.update(run(args, phases, modes, proc.pid, addr, loadgen, Path(tmp)))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    results["load_average_after"] = os.getloadavg()[0]
    write_results(out_path, results)


def write_results(path: Path, results: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {path}")


def run(
    args: argparse.Namespace, phases: list[str], modes: list[str], pid: int, addr: str, loadgen: Path, workdir: Path
) -> dict[str, object]:
    out: dict[str, object] = {}
    configs = [topic_configs(c, args.topics) for c in range(args.clusters)]
    all_topics = [tc.topic_name for cs in configs for tc in cs]
    frames_file = workdir / "route-requests.bin"
    broker_keys = BROKER_KEYS if args.auth in ACCOUNTS_ON else None
    client_keys = CLIENT_KEYS if args.auth in ("signed", "ignored") else None

    def route_frame(topic: str) -> bytes:
        cmd = request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, opaque=1)
        return encode(acl.sign(cmd, client_keys) if client_keys is not None else cmd)

    frames_file.write_bytes(b"".join(route_frame(t) for t in all_topics))

    # -- registration of the 32 brokers, then one of each kind per broker --
    conns: list[BlockingConn] = []
    brokers: list[BrokerBody] = []
    first: list[float] = []
    for c in range(args.clusters):
        for b in range(args.brokers):
            conn = BlockingConn(addr)
            broker = BrokerBody(c, b, configs[c], broker_keys)
            took, code = conn.call(broker.current)
            assert code == 0, code
            first.append(took * 1000)
            conns.append(conn)
            brokers.append(broker)
    kinds = {"unchanged": "same", "new_version": "version", "one_topic_changed": "one-topic"}
    timings: dict[str, list[float]] = {}
    for label, mode in kinds.items():
        timings[label] = []
        for conn, broker in zip(conns, brokers):
            frame = broker.current if mode == "same" else broker.frame(mode == "one-topic")
            took, code = conn.call(frame)
            assert code == 0, code
            timings[label].append(took * 1000)
    reg: dict[str, object] = {
        "topics": args.topics,
        "frame_kb": round(len(brokers[0].current) / 1024, 1),
        "first_ms_median": pct(first, 50),
        "first_ms_max": max(first),
    }
    for label, values in timings.items():
        reg[f"{label}_ms_median"] = pct(values, 50)
        reg[f"{label}_ms_max"] = max(values)
    out["register_10k"] = reg
    out["rss_mb_after_topics"] = rss_mb(pid)
    print(f"registered {len(conns)} brokers, {len(all_topics)} topics; RSS {out['rss_mb_after_topics']:.1f} MB")
    print("registration, client-observed ms (median / max of 32):")
    for key in ("first", *timings):
        print(f"  {key:18s} {reg[f'{key}_ms_median']:7.2f} / {reg[f'{key}_ms_max']:7.2f}")

    def load(n: int) -> Callable[[], dict[str, float]]:
        return lambda: query_load(loadgen, frames_file, addr, n, args.duration, args.tls, args.depth)

    if args.warmup > 0:  # every topic asked about (and, with --auth signed, verified) before measuring
        query_load(loadgen, frames_file, addr, 16, args.warmup, args.tls)

    if "queries" in phases:
        queries = []
        for n in [int(x) for x in args.connections.split(",")]:
            res = queries_with(pid, load(n), conns, brokers, args.rereg_period, "same")
            queries.append(res)
            print(
                f"{n:3d} conns: {res['qps']:9.0f} q/s  {res['server_cpu_us_per_query']:6.1f} us CPU/q  "
                f"p50 {res['p50_ms']:.3f} ms  p99 {res['p99_ms']:.3f} ms  "
                f"max {res['max_ms']:.1f} ms  errors {res['errors']}  server CPU {res['server_cpu_pct']:.0f}%  "
                f"client CPU {res['client_cpu_pct']:.0f}%  re-registrations {res['registrations']}"
            )
        out["route_queries"] = queries
        out["rss_mb_after_queries"] = rss_mb(pid)

    if "churn" in phases:
        churn = []
        for mode in modes:
            for n in [int(x) for x in args.churn_connections.split(",")]:
                res = queries_with(pid, load(n), conns, brokers, args.churn_period, mode)
                res["mode"] = mode
                churn.append(res)
        out["churn"] = {"period_s": args.churn_period, "brokers": len(conns), "phases": churn}
        out["rss_mb_after_churn"] = rss_mb(pid)
        print_churn(churn, args.churn_period, len(conns), args.topics)

    if "big" in phases:
        out["register_100k"] = big_phase(args, pid, addr, loadgen, frames_file, conns)
    out["rss_mb_final"] = rss_mb(pid)
    for conn in conns:
        conn.sock.close()
    return out


def print_churn(rows: list[dict[str, object]], period: float, brokers: int, topics: int) -> None:
    print(f"\nchurn: {brokers} brokers x {topics:,} topics, each re-registering every {period:g} s")
    head = ("mode", "conns", "q/s", "p50 ms", "p99 ms", "max ms", "reg/s", "reg p50", "reg p99", "reg max", "srv CPU", "gen CPU")
    print("  ".join(f"{h:>9s}" for h in head))
    for r in rows:
        cells = [
            str(r["mode"]), str(r["connections"]), f"{r['qps']:,.0f}", f"{r['p50_ms']:.3f}", f"{r['p99_ms']:.3f}",
            f"{r['max_ms']:.1f}", f"{r.get('registrations_per_s', 0):.1f}", f"{r.get('reg_p50_ms', 0):.1f}",
            f"{r.get('reg_p99_ms', 0):.1f}", f"{r.get('reg_max_ms', 0):.1f}", f"{r['server_cpu_pct']:.0f}%",
            f"{r['client_cpu_pct']:.0f}%",
        ]
        print("  ".join(f"{c:>9s}" for c in cells))


def big_phase(
    args: argparse.Namespace, pid: int, addr: str, loadgen: Path, frames_file: Path, conns: list[BlockingConn]
) -> dict[str, object]:
    """A 100,000-topic broker registering (first, then a new data version) under 16 connections of queries."""
    big = [TopicConfig(f"big-{i:06d}", 8, 8, 6) for i in range(args.big_topics)]
    out: dict[str, object] = {}
    window = 3.0
    for n, (label, kw) in enumerate((("compressed_v407", {"compressed": True, "version": 407}), ("json", {}))):
        conn = BlockingConn(addr)
        conns.append(conn)
        for step, counter in (("first", 1), ("new_version", 2)):
            cmd = rq.register_broker(
                cluster="cluster-big", broker_name=f"broker-big-{label}", broker_addr=f"127.0.1.1:{10911 + n}",
                broker_id=0, topics=big, data_version=DataVersion(counter, 1), **kw,  # type: ignore[arg-type]
            )
            frame = encode(acl.sign(cmd, BROKER_KEYS) if args.auth in ACCOUNTS_ON else cmd)
            gen = subprocess.Popen(
                loadgen_cmd(loadgen, frames_file, addr, 16, window, args.tls),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=lambda: pin(CLIENT_CPU),
            )
            try:
                time.sleep(window / 3)
                took, code = conn.call(frame)
                stdout, stderr = gen.communicate(timeout=window + 60)
            finally:
                if gen.poll() is None:
                    gen.kill()
                    gen.wait()
            if gen.returncode != 0 or code != 0:
                raise SystemExit(f"big registration failed: code {code}, load generator: {stderr.strip()}")
            q = json.loads(stdout)
            res = {
                "topics": args.big_topics,
                "frame_mb": round(len(frame) / 1024 / 1024, 2),
                "register_ms": took * 1000,
                "queries_meanwhile": {k: q[k] for k in ("connections", "qps", "p99_ms", "max_ms", "errors")},
            }
            out[f"{label}_{step}"] = res
            print(
                f"{args.big_topics:,}-topic broker ({label}, {step}): {res['frame_mb']} MB registered in {took * 1000:.0f} ms; "
                f"16 conns of queries meanwhile: {q['qps']:,.0f} q/s, p99 {q['p99_ms']:.2f} ms, max {q['max_ms']:.1f} ms"
            )
    return out


if __name__ == "__main__":
    main()
