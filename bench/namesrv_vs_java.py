#!/usr/bin/env python3
"""Our NameServer against Apache RocketMQ's Java NameServer, side by side in one run.

Why a benchmark of its own: ``namesrv_bench.py`` measures our server alone, so a change that helps us
less than Java's last release helped Java still looks like progress; and on this shared 2-core machine
two runs minutes apart differ by more than the gaps we care about. Here both servers run at once and
take turns in rounds (Java, ours, Java, ours, ...), so drift on the machine lands on both alike, and
every figure is given with its ratio per round.

- Java: the NameServer of ``--java-version`` (5.5.0 by default), resolved from Maven Central by
  ``mqadmin.rocketmq`` and run with the JVM options of Apache's runserver.sh (``bench/java_namesrv.py``).
- Ours: ``mqnamesrv`` of this checkout (or ``--server-root``).

Each server is pinned to CPU 0 and the C load generator (``bench/loadgen.c``) to CPU 1, where the
machine has two cores; so is this script, which sends the registrations. Everything is on 127.0.0.1.

The shape (RocketMQ's route-info benchmark; ``--clusters``, ``--brokers``, ``--topics``): 4 clusters x
8 brokers, 10,000 topics per cluster, every broker of a cluster serving all its topics (40,000 topics,
1.7 KB route answers, 1.7 MB registrations). Per round and server:

1. first registrations of a fresh cluster (``--probes`` brokers, 10,000 new topics: the first broker
   creates them, the others join), each timed as the broker sees it, then unregistered again;
2. route queries for random topics at each of ``--connections``: without churn, then with every
   broker re-registering each ``--churn-period`` seconds (``--churn-mode``: ``version``, a new data
   version and the same topics, is what a burst of topic changes sends; ``same`` is the unchanged
   heartbeat body; ``one-topic`` changes one topic each time), with q/s, p50, p99, the longest query,
   the server's CPU, and the registrations' latency;
3. the server's RSS.

Writes JSON (``--out``) and a Markdown table beside it (same name, ``.md``).

usage: bench/namesrv_vs_java.py [--java-version 5.5.0] [--rounds 3] [--duration 10] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.java_namesrv import JavaNamesrv, JavaNamesrvError
from bench.namesrv_bench import (
    CLIENT_CPU,
    SERVER_CPU,
    BlockingConn,
    BrokerBody,
    build_loadgen,
    pct,
    pin,
    pinned_child,
    query_load,
    queries_with,
    rss_mb,
    start_server,
    topic_configs,
    write_results,
)
from bench.vs_java_report import markdown, summarize
from remoting import requests as rq
from remoting.codec import encode
from remoting.codes import ResponseCode

SERVERS = ("java", "ours")
CHURN_MODES = ("version", "same", "one-topic")
#: Re-send every broker's registration before a phase if the last one is this old (expiry: 120 s).
REFRESH_S = 30.0


@dataclass
class Peer:
    """One server under test and the connections of its brokers (a closed one unregisters the broker)."""

    name: str
    pid: int
    addr: str
    conns: list[BlockingConn] = field(default_factory=list)
    last_registered: float = 0.0

    def register(self, brokers: list[BrokerBody]) -> list[float]:
        """Connect and register every broker once; the latencies in ms."""
        took = []
        for broker in brokers:
            conn = BlockingConn(self.addr)
            self.conns.append(conn)
            took.append(call_ok(conn, broker.current, f"{self.name}: first registration"))
        self.last_registered = time.monotonic()
        return took

    def refresh(self, brokers: list[BrokerBody]) -> None:
        """Re-send each broker's last registration if it is getting old (never while measuring)."""
        if time.monotonic() - self.last_registered >= REFRESH_S:
            for conn, broker in zip(self.conns, brokers):
                call_ok(conn, broker.current, f"{self.name}: re-registration")
            self.last_registered = time.monotonic()

    def close(self) -> None:
        for conn in self.conns:
            conn.sock.close()


def call_ok(conn: BlockingConn, frame: bytes, what: str) -> float:
    took, code = conn.call(frame)
    if code != ResponseCode.SUCCESS:
        raise SystemExit(f"{what} answered code {code}")
    return took * 1000


def probe_first_registrations(peer: Peer, probes: list[BrokerBody]) -> list[float]:
    """Register the probe brokers (a fresh cluster, new topics), then unregister them and wait until
    their topics are gone (Java unregisters in the background), so nothing is left for the next phases."""
    conns = [BlockingConn(peer.addr) for _ in probes]
    try:
        took = [call_ok(conn, broker.current, f"{peer.name}: probe registration") for conn, broker in zip(conns, probes)]
        for conn, broker in zip(conns, probes):
            call_ok(conn, encode(rq.unregister_broker(broker_id=0, **broker.identity)), f"{peer.name}: unregistration")
        topic = f"topic-{probes[0].cluster}-000000"
        deadline = time.monotonic() + 60
        while conns[0].call(encode(rq.get_route(topic)))[1] != ResponseCode.TOPIC_NOT_EXIST:
            if time.monotonic() > deadline:
                raise SystemExit(f"{peer.name}: the probe brokers' topics were still there 60 s after unregistering")
            time.sleep(0.05)
        return took
    finally:
        for conn in conns:
            conn.sock.close()


def route_frames(topics: list[str]) -> bytes:
    return b"".join(encode(rq.get_route(t)) for t in topics)


class Bench:
    """The run: both servers, the brokers, the rounds."""

    def __init__(self, args: argparse.Namespace, loadgen: Path, frames: Path) -> None:
        self.args = args
        self.loadgen, self.frames = loadgen, frames
        configs = [topic_configs(c, args.topics) for c in range(args.clusters)]
        self.brokers = [BrokerBody(c, b, configs[c]) for c in range(args.clusters) for b in range(args.brokers)]
        frames.write_bytes(route_frames([tc.topic_name for cs in configs for tc in cs]))

    def load(self, peer: Peer, conns: int, seconds: float, churn: bool) -> dict[str, Any]:
        """One phase of route queries (with churn: the brokers re-registering meanwhile)."""
        if not churn:
            peer.refresh(self.brokers)
        mode = self.args.churn_mode if churn else "none"
        res = queries_with(peer.pid, lambda: query_load(self.loadgen, self.frames, peer.addr, conns, seconds),
                           peer.conns, self.brokers, self.args.churn_period, mode)
        if churn:
            peer.last_registered = time.monotonic()
        return {"load": "churn" if churn else "none", **res}

    def probes(self, number: int) -> list[BrokerBody]:
        """Round ``number``'s probe brokers: a fresh cluster, its topics new to both servers."""
        cluster = self.args.clusters + number
        configs = topic_configs(cluster, self.args.topics)
        return [BrokerBody(cluster, b, configs) for b in range(self.args.probes)]

    def round(self, peer: Peer, probes: list[BrokerBody]) -> dict[str, Any]:
        """One server's turn in a round: probes, then every load."""
        args = self.args
        out: dict[str, Any] = {"probe_first_ms": probe_first_registrations(peer, probes) if probes else []}
        phases = []
        for churn in [c for c in (False, True) if (c and "churn" in args.loads) or (not c and "none" in args.loads)]:
            for n in args.connections:
                res = self.load(peer, n, args.duration, churn)
                phases.append(res)
                print(f"  {peer.name:4s} {res['load']:5s} {n:3d} conns: {res['qps']:9,.0f} q/s  p50 {res['p50_ms']:.3f}"
                      f"  p99 {res['p99_ms']:.3f}  max {res['max_ms']:.1f} ms  CPU {res['server_cpu_pct']:.0f}%"
                      + (f"  reg p50 {res['reg_p50_ms']:.1f} p99 {res['reg_p99_ms']:.1f} ms" if churn else "")
                      + (f"  ERRORS {res['errors']}" if res["errors"] else ""), flush=True)
        out["phases"] = phases
        out["rss_mb"] = rss_mb(peer.pid)
        return out


def start_peers(args: argparse.Namespace, work: Path, stack: list[Any]) -> dict[str, Peer]:
    """Both servers, booted (the JVM first: it takes longest), each appended to ``stack`` to be stopped."""
    java = JavaNamesrv(args.java_version, work / "java", args.java_heap, pinned_child(SERVER_CPU))
    stack.append(java.stop)
    java.start()
    (work / "ours").mkdir()
    proc, addr = start_server(work / "ours", frame_max=64 * 1024 * 1024, server_root=args.server_root.resolve())
    stack.append(lambda: stop_process(proc))
    java.wait_boot()
    return {"java": Peer("java", java.pid, java.addr), "ours": Peer("ours", proc.pid, addr)}


def stop_process(proc: Any) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except Exception:
            proc.kill()
            proc.wait()


def run(args: argparse.Namespace, work: Path, results: dict[str, Any]) -> None:
    loadgen = build_loadgen(work)
    bench = Bench(args, loadgen, work / "route-requests.bin")
    stack: list[Any] = []
    try:
        peers = start_peers(args, work, stack)
        stack.extend(peer.close for peer in peers.values())
        for name in SERVERS:
            peer = peers[name]
            cold = peer.register(bench.brokers)
            results["servers"][name] = {"addr": peer.addr, "cold_first_ms": cold, "rss_mb_registered": rss_mb(peer.pid)}
            print(f"{name}: {len(cold)} brokers registered, first registrations p50 {pct(cold, 50):.1f} ms, "
                  f"RSS {rss_mb(peer.pid):.0f} MB", flush=True)
        for name in SERVERS:  # untimed: the JVM compiles its hot paths, both see every path once
            warm = bench.load(peers[name], 16, args.warmup, churn=True) if args.warmup else {}
            if warm.get("errors"):
                raise SystemExit(f"{name} answered {warm['errors']} route queries with an error in the warm-up")
            results["servers"][name]["warmup"] = warm
        for number in range(1, args.rounds + 1):
            print(f"round {number}", flush=True)
            probes = bench.probes(number)
            results["rounds"].append({name: bench.round(peers[name], probes) for name in SERVERS})
    finally:
        for stop in reversed(stack):
            stop()


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--java-version", default="5.5.0", help="Apache RocketMQ version of the Java NameServer")
    ap.add_argument("--java-heap", default="4g", help="the JVM's -Xms/-Xmx (runserver.sh gives 4g)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per load phase")
    ap.add_argument("--warmup", type=float, default=10.0, help="untimed seconds of queries with churn per server first")
    ap.add_argument("--connections", default="1,16,64")
    ap.add_argument("--loads", default="none,churn", help="none (no registrations), churn, or both")
    ap.add_argument("--churn-period", type=float, default=1.0, help="seconds between one broker's re-registrations")
    ap.add_argument("--churn-mode", choices=CHURN_MODES, default="version")
    ap.add_argument("--clusters", type=int, default=4)
    ap.add_argument("--brokers", type=int, default=8, help="brokers per cluster")
    ap.add_argument("--topics", type=int, default=10_000, help="topics per cluster")
    ap.add_argument("--probes", type=int, default=8, help="first registrations timed per round and server")
    ap.add_argument("--server-root", type=Path, default=ROOT, help="run our NameServer from another checkout")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "vs-java.json")
    args = ap.parse_args()
    args.connections = [int(x) for x in args.connections.split(",") if x]
    args.loads = [x for x in args.loads.split(",") if x]
    if not (1 <= args.rounds <= 30 and 0.5 <= args.duration <= 600 and 0 <= args.warmup <= 600):
        ap.error("--rounds 1..30, --duration 0.5..600, --warmup 0..600")
    if not args.connections or any(not 1 <= n <= 1024 for n in args.connections):
        ap.error("--connections: 1..1024 each")
    if not args.loads or set(args.loads) - {"none", "churn"}:
        ap.error("--loads: none, churn or none,churn")
    if not (1 <= args.clusters <= 100 and 1 <= args.brokers <= 64 and 1 <= args.topics <= 200_000
            and 0 <= args.probes <= 64 and 0.05 <= args.churn_period <= 60):
        ap.error("shape out of range: --clusters 1..100, --brokers 1..64, --topics 1..200000, --probes 0..64")
    return args


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, _interrupted)  # stop the servers on a SIGTERM as on a Ctrl-C
    pin(CLIENT_CPU)
    results: dict[str, Any] = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "java_version": args.java_version, "java_heap": args.java_heap,
        "shape": {"clusters": args.clusters, "brokers_per_cluster": args.brokers, "topics_per_cluster": args.topics},
        "rounds_wanted": args.rounds, "duration_s": args.duration, "warmup_s": args.warmup,
        "connections": args.connections, "loads": args.loads,
        "churn": {"period_s": args.churn_period, "mode": args.churn_mode},
        "pinned": (os.cpu_count() or 1) >= 2, "load_average_before": os.getloadavg()[0],
        "started": time.strftime("%Y-%m-%d %H:%M:%S"), "servers": {}, "rounds": [],
    }
    try:
        with tempfile.TemporaryDirectory(prefix="vs-java-") as tmp:
            run(args, Path(tmp), results)
    except JavaNamesrvError as exc:
        raise SystemExit(f"namesrv_vs_java: {exc}") from None
    results["load_average_after"] = os.getloadavg()[0]
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    results["summary"] = summarize(results)
    write_results(args.out, results)
    table = markdown(results)
    args.out.with_suffix(".md").write_text(table)
    print("\n" + table)


if __name__ == "__main__":
    main()
