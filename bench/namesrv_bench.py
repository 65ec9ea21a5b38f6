#!/usr/bin/env python3
"""NameServer benchmark in the shape of RocketMQ's route-info benchmark.

4 clusters x 8 brokers, 10,000 topics per cluster (every broker of a
cluster serves all of its cluster's topics: 40,000 topics, 320,000
queue-data entries), brokers re-registering in the background, clients
querying random topics over 1, 16 and 64 connections. The server runs as
a real ``mqnamesrv`` process pinned to CPU 0; this load generator is pinned
to CPU 1 and reports its own CPU use, so it can be seen not to be the
bottleneck. Everything stays on 127.0.0.1 and every loop is bounded.

Prints the figures and writes them to bench/results/namesrv.json.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from remoting import requests as rq
from remoting.bodies import DataVersion, TopicConfig
from remoting.codec import FrameDecoder, encode
from remoting.codes import RequestCode
from remoting.command import request

SERVER_CPU = 0
CLIENT_CPU = 1
BOOT = re.compile(rb"address ([\d.]+):(\d+)")


def pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and os.cpu_count() and os.cpu_count() > cpu:  # type: ignore[operator]
        os.sched_setaffinity(0, {cpu})


def start_server(workdir: Path, frame_max: int) -> tuple[subprocess.Popen[bytes], str]:
    cfg = workdir / "namesrv.properties"
    cfg.write_text(
        "listenPort=0\nbindAddress=127.0.0.1\n"
        f"kvConfigPath={workdir}/kvConfig.json\nframeMaxLength={frame_max}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "namesrv.cli", "-c", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=open(workdir / "namesrv.log", "wb"),
        cwd=ROOT,
        preexec_fn=lambda: pin(SERVER_CPU),
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 20
    seen = b""
    while time.monotonic() < deadline:
        seen += os.read(proc.stdout.fileno(), 4096)
        m = BOOT.search(seen)
        if m:
            return proc, f"{m.group(1).decode()}:{m.group(2).decode()}"
    proc.kill()
    raise SystemExit(f"server did not start: {seen!r}")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


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


def register_frame(cluster: int, broker: int, configs: list[TopicConfig], counter: int, **kw: object) -> bytes:
    return encode(
        rq.register_broker(
            cluster=f"cluster-{cluster}",
            broker_name=f"broker-{cluster}-{broker}",
            broker_addr=f"127.0.0.{10 + cluster}:{10911 + broker * 10}",
            broker_id=0,
            topics=configs,
            data_version=DataVersion(counter, 1_700_000_000_000 + counter),
            **kw,  # type: ignore[arg-type]
        )
    )


def build_loadgen(workdir: Path) -> Path:
    """Compile the C load generator (a Python one would be the bottleneck)."""
    exe = workdir / "loadgen"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O2", "-o", str(exe), str(ROOT / "bench" / "loadgen.c")], check=True)
    return exe


def query_load(loadgen: Path, frames_file: Path, addr: str, conns: int, duration: float, depth: int = 1) -> dict[str, float]:
    """Closed-loop random route queries from the C generator pinned to CPU 1."""
    host, port = addr.rsplit(":", 1)
    out = subprocess.run(
        [str(loadgen), host, port, str(conns), str(duration), str(depth), str(frames_file)],
        capture_output=True, text=True, timeout=duration + 60, preexec_fn=lambda: pin(CLIENT_CPU),
    )
    if out.returncode != 0:
        raise SystemExit(f"load generator failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


class Reregistrar(threading.Thread):
    """Brokers re-sending their full registration on a period, like real brokers."""

    def __init__(self, conns: list[BlockingConn], frames: list[bytes], period: float) -> None:
        super().__init__(daemon=True)
        self.conns, self.frames, self.period = conns, frames, period
        self.stop = threading.Event()
        self.latencies: list[float] = []

    def run(self) -> None:
        gap = self.period / len(self.conns)
        i = 0
        while not self.stop.wait(gap):
            took, code = self.conns[i].call(self.frames[i])
            if code != 0:
                raise RuntimeError(f"re-registration failed with code {code}")
            self.latencies.append(took)
            i = (i + 1) % len(self.conns)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, default=4)
    ap.add_argument("--brokers", type=int, default=8, help="brokers per cluster")
    ap.add_argument("--topics", type=int, default=10_000, help="topics per cluster")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per query phase")
    ap.add_argument("--connections", default="1,16,64")
    ap.add_argument("--rereg-period", type=float, default=3.0, help="seconds between a broker's re-registrations")
    ap.add_argument("--big-topics", type=int, default=100_000)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "namesrv.json"))
    args = ap.parse_args()

    pin(CLIENT_CPU)
    results: dict[str, object] = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "shape": f"{args.clusters} clusters x {args.brokers} brokers, {args.topics} topics per cluster",
    }
    with tempfile.TemporaryDirectory(prefix="namesrv-bench-") as tmp:
        loadgen = build_loadgen(Path(tmp))
        proc, addr = start_server(Path(tmp), frame_max=64 * 1024 * 1024)
        try:
            results.update(run(args, proc.pid, addr, loadgen, Path(tmp)))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {args.out}")


def run(args: argparse.Namespace, pid: int, addr: str, loadgen: Path, workdir: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    configs = [topic_configs(c, args.topics) for c in range(args.clusters)]
    all_topics = [tc.topic_name for cs in configs for tc in cs]
    frames_file = workdir / "route-requests.bin"
    frames_file.write_bytes(
        b"".join(encode(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": t}, opaque=1)) for t in all_topics)
    )

    # -- registration of the 32 brokers ---------------------------------
    conns: list[BlockingConn] = []
    frames: list[bytes] = []
    first: list[float] = []
    for c in range(args.clusters):
        for b in range(args.brokers):
            conn = BlockingConn(addr)
            frame = register_frame(c, b, configs[c], counter=1)
            took, code = conn.call(frame)
            assert code == 0, code
            first.append(took)
            conns.append(conn)
            frames.append(frame)
    changed = []
    for i in range(0, len(conns), max(1, args.brokers)):
        c, b = divmod(i, args.brokers)
        took, code = conns[i].call(register_frame(c, b, configs[c], counter=2))
        assert code == 0
        changed.append(took)
    same = [conns[i].call(frames[i])[0] for i in range(len(conns))]
    # Re-register the ones bumped to counter 2 with their counter-1 frame once,
    # so the periodic frames below are what the table holds.
    for i in range(0, len(conns), max(1, args.brokers)):
        conns[i].call(frames[i])
    body_kb = (len(frames[0]) - 8) / 1024
    out["register_10k"] = {
        "topics": args.topics,
        "frame_kb": round(body_kb, 1),
        "first_ms_median": sorted(first)[len(first) // 2] * 1000,
        "first_ms_max": max(first) * 1000,
        "changed_version_ms_max": max(changed) * 1000,
        "unchanged_ms_max": max(same) * 1000,
    }
    out["rss_mb_after_topics"] = rss_mb(pid)
    print(f"registered {len(conns)} brokers, {len(all_topics)} topics; RSS {out['rss_mb_after_topics']:.1f} MB")
    print(json.dumps(out["register_10k"], indent=2))

    # -- route queries with background re-registration --------------------
    queries = []
    for n in [int(x) for x in args.connections.split(",")]:
        rereg = Reregistrar(conns, frames, args.rereg_period)
        rereg.start()
        cpu0 = cpu_seconds(pid)
        t0 = time.perf_counter()
        res = query_load(loadgen, frames_file, addr, n, args.duration)
        server_cpu = 100 * (cpu_seconds(pid) - cpu0) / (time.perf_counter() - t0)
        rereg.stop.set()
        rereg.join()
        res["server_cpu_pct"] = server_cpu
        res["reregistrations"] = len(rereg.latencies)
        res["rereg_ms_max"] = max(rereg.latencies, default=0) * 1000
        queries.append(res)
        print(
            f"{n:3d} conns: {res['qps']:9.0f} q/s  p50 {res['p50_ms']:.3f} ms  p99 {res['p99_ms']:.3f} ms  "
            f"max {res['max_ms']:.1f} ms  errors {res['errors']}  server CPU {server_cpu:.0f}%  "
            f"client CPU {res['client_cpu_pct']:.0f}%  re-registrations {res['reregistrations']}"
        )
    out["route_queries"] = queries
    out["rss_mb_after_queries"] = rss_mb(pid)

    # -- one broker with 100,000 topics -----------------------------------
    big = [TopicConfig(f"big-{i:06d}", 8, 8, 6) for i in range(args.big_topics)]
    big_out: dict[str, object] = {}
    for label, kw in [] if not args.big_topics else (("compressed_v407", {"compressed": True, "version": 407}), ("json_raised_frame_limit", {})):
        conn = BlockingConn(addr)
        frame = encode(
            rq.register_broker(
                cluster="cluster-big", broker_name=f"broker-big-{label}", broker_addr=f"127.0.1.1:{10911 + len(big_out)}",
                broker_id=0, topics=big, data_version=DataVersion(1, 1), **kw,  # type: ignore[arg-type]
            )
        )
        stall: dict[str, float] = {}
        done = threading.Event()

        def probe(done: threading.Event = done, stall: dict[str, float] = stall) -> None:
            probe_conn = BlockingConn(addr)
            worst = 0.0
            frame_q = encode(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": all_topics[0]}))
            while not done.is_set():
                took, _ = probe_conn.call(frame_q)
                worst = max(worst, took)
            stall["max_query_ms"] = worst * 1000
            probe_conn.sock.close()

        t = threading.Thread(target=probe)
        t.start()
        time.sleep(0.2)
        took, code = conn.call(frame)
        time.sleep(0.1)
        done.set()
        t.join()
        assert code == 0, code
        big_out[label] = {
            "topics": args.big_topics,
            "frame_mb": round(len(frame) / 1024 / 1024, 2),
            "register_ms": took * 1000,
            "max_route_query_ms_meanwhile": stall["max_query_ms"],
        }
        print(f"100k-topic broker ({label}): {json.dumps(big_out[label])}")
        conns.append(conn)
    out["register_100k"] = big_out
    out["rss_mb_final"] = rss_mb(pid)
    for conn in conns:
        conn.sock.close()
    return out


if __name__ == "__main__":
    main()
