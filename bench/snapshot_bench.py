#!/usr/bin/env python3
"""Route snapshot (warm restart) benchmark: what it costs the event loop, and how fast a restart answers.

Three parts, every loop bounded in count and time, everything on 127.0.0.1:

1. In process, for tables of 10,000 and 100,000 topics (two brokers serving
   every topic) and RocketMQ's route-benchmark shape (4 clusters x 8 brokers
   x 10,000 topics): the capture on the event loop (in all, and its longest
   step: what one request may wait), the export + msgpack
   encoding and the atomic durable write (in the writer's worker thread),
   and read + decode + restore (at start, before listening). Median of 5.
2. A real ``mqnamesrv`` (pinned to CPU 0) holding two 100,000-topic brokers:
   route-query latency from a probe connection while a cheap change
   (DELETE_TOPIC_IN_NAMESRV of one topic) every 0.5 s makes the writer
   capture and rewrite the whole table, with warmRestartEnable on and off.
3. ``kill -9`` of that NameServer and a restart: spawn-to-listening time,
   time from listening to the first route, and 2,000 random topics' routes
   asked right after the restart (all must be answered).

Prints the figures and writes them to bench/results/snapshot.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.namesrv_bench import BlockingConn, pin, rss_mb  # noqa: E402
from namesrv import route_state, snapshot  # noqa: E402
from namesrv.durable import write_atomic  # noqa: E402
from namesrv.routes import Registration, RouteTable  # noqa: E402
from remoting import requests as rq  # noqa: E402
from remoting.bodies import DataVersion, TopicConfig  # noqa: E402
from remoting.register_body import RegisterBody
from remoting.codec import encode  # noqa: E402

SERVER_CPU = 0
CLIENT_CPU = 1
BOOT = re.compile(rb"address ([\d.]+):(\d+)")
RESTORED = re.compile(r"restored (\d+) brokers and (\d+) topics .* in (\d+) ms")


def build_table(clusters: int, brokers: int, topics: int) -> RouteTable:
    table = RouteTable()
    for c in range(clusters):
        body = RegisterBody(DataVersion(1, 1), {f"t-{c}-{i:06d}": (8, 8, 6, 0) for i in range(topics)})
        for b in range(brokers):
            reg = Registration(f"cluster-{c}", f"127.0.{c}.1:{10911 + b}", f"broker-{c}-{b}", 0)
            table.register_broker(reg, lambda body=body: body, body_digest=bytes([c, b]), conn=(c, b), now=0.0)
    return table


def in_process(shape: tuple[int, int, int], workdir: Path, rounds: int = 5) -> dict[str, float]:
    table = build_table(*shape)
    path = str(workdir / f"snap-{'x'.join(map(str, shape))}.msgpack")
    times: dict[str, list[float]] = {"capture_ms": [], "capture_step_ms": [], "export_encode_ms": [], "write_ms": [],
                                     "restore_ms": []}
    size = 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        capture = route_state.Capture(table)  # the writer's steps (it yields to the loop between them)
        steps = []
        more = True
        while more:
            s0 = time.perf_counter()
            more = capture.step()
            steps.append(time.perf_counter() - s0)
        captured = capture.finish()
        t1 = time.perf_counter()
        times["capture_step_ms"].append(max(steps) * 1000)
        data = snapshot.encode(route_state.export(captured), int(time.time() * 1000))
        t2 = time.perf_counter()
        write_atomic(path, data)
        t3 = time.perf_counter()
        found = snapshot.read(path)
        assert found is not None
        route_state.restore(RouteTable(), found[2], 0.0, int(time.time() * 1000))
        t4 = time.perf_counter()
        size = len(data)
        for key, value in zip(("capture_ms", "export_encode_ms", "write_ms", "restore_ms"), (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            times[key].append(value * 1000)
    out: dict[str, float] = {"topics": len(table.topic_queues),
                             "queue_entries": sum(len(q) for q in table.topic_queues.values()),
                             "file_kb": round(size / 1024, 1)}
    for key, values in times.items():
        out[key] = round(statistics.median(values), 1)
        out[key.replace("_ms", "_max_ms")] = round(max(values), 1)
    return out


def start_server(workdir: Path) -> tuple[subprocess.Popen[bytes], str, float]:
    """(process, addr, seconds from spawn to listening)."""
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "namesrv.cli", "-c", str(workdir / "namesrv.properties")],
        stdout=subprocess.PIPE,
        stderr=open(workdir / "namesrv.log", "ab"),
        cwd=ROOT,
        preexec_fn=lambda: pin(SERVER_CPU),
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    seen = b""
    while time.monotonic() < deadline:
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            break
        seen += chunk
        m = BOOT.search(seen)
        if m:
            return proc, f"{m.group(1).decode()}:{m.group(2).decode()}", time.perf_counter() - began
    proc.kill()
    raise SystemExit(f"server did not start: {seen!r}")


def probe_while_changing(addr: str, topic_names: list[str], seconds: float, changes_every: float) -> dict[str, float]:
    """Route-query latency on one connection while one topic is deleted every ``changes_every`` s."""
    done = threading.Event()
    latencies: list[float] = []

    def probe() -> None:
        conn = BlockingConn(addr)
        frame = encode(rq.get_route(topic_names[0]))
        end = time.monotonic() + seconds + 5  # bounded even if the main loop fails
        while not done.is_set() and time.monotonic() < end:
            took, _ = conn.call(frame)
            latencies.append(took * 1000)
            time.sleep(0.002)
        conn.sock.close()

    thread = threading.Thread(target=probe)
    thread.start()
    admin = BlockingConn(addr)
    end = time.monotonic() + seconds
    i = 1
    while time.monotonic() < end:
        admin.call(encode(rq.delete_topic(topic_names[-i])))
        i += 1
        time.sleep(changes_every)
    done.set()
    thread.join()
    admin.sock.close()
    latencies.sort()
    return {
        "queries": len(latencies),
        "changes": i - 1,
        "p50_ms": round(latencies[len(latencies) // 2], 3),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)], 3),
        "max_ms": round(latencies[-1], 1),
    }


def process_part(args: argparse.Namespace, workdir: Path) -> dict[str, object]:
    (workdir / "namesrv.properties").write_text(
        f"listenPort=0\nbindAddress=127.0.0.1\nkvConfigPath={workdir}/kvConfig.json\n"
        f"frameMaxLength={64 * 1024 * 1024}\nrouteSnapshotIntervalMillis={args.interval_ms}\n"
    )
    out: dict[str, object] = {}
    proc, addr, _ = start_server(workdir)
    try:
        names = [f"big-{i:06d}" for i in range(args.topics)]
        configs = [TopicConfig(n, 8, 8, 6) for n in names]
        conns = []
        for b in range(2):
            conn = BlockingConn(addr)
            _, code = conn.call(encode(rq.register_broker(
                cluster="cluster-big", broker_name=f"broker-{b}", broker_addr=f"127.0.1.1:{10911 + b}", broker_id=0,
                topics=configs, data_version=DataVersion(1, 1), compressed=True, version=407)))
            assert code == 0, code
            conns.append(conn)
        out["rss_mb"] = rss_mb(proc.pid)
        time.sleep(3 * args.interval_ms / 1000 + 1)  # the first full write is on disk
        phases = {}
        for enabled in ("true", "false"):
            _, code = conns[0].call(encode(rq.update_namesrv_config({"warmRestartEnable": enabled})))
            assert code == 0, code
            time.sleep(0.5)
            phases[f"warmRestartEnable={enabled}"] = probe_while_changing(addr, names, args.probe_seconds, 0.5)
            print(f"route latency, warmRestartEnable={enabled}: {json.dumps(phases[f'warmRestartEnable={enabled}'])}")
        out["route_latency_during_snapshot_writes"] = phases
        _, code = conns[0].call(encode(rq.update_namesrv_config({"warmRestartEnable": "true"})))
        assert code == 0
        time.sleep(3 * args.interval_ms / 1000 + 0.5)
        snap_file = workdir / "routeSnapshot.msgpack"
        out["snapshot_file_kb"] = round(snap_file.stat().st_size / 1024, 1)
        for conn in conns:
            conn.sock.close()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

        proc, addr, boot_s = start_server(workdir)
        conn = BlockingConn(addr)
        t0 = time.perf_counter()
        _, first_code = conn.call(encode(rq.get_route(names[0])))
        first_ms = (time.perf_counter() - t0) * 1000
        sample = random.Random(15).sample(names[: args.topics - 200], 2000)  # the deleted ones are at the end
        t1 = time.perf_counter()
        codes = [conn.call(encode(rq.get_route(t)))[1] for t in sample]
        sample_s = time.perf_counter() - t1
        conn.sock.close()
        m = RESTORED.search((workdir / "namesrv.log").read_text())
        out["restart"] = {
            "spawn_to_listening_s": round(boot_s, 3),
            "restore_ms_logged": int(m.group(3)) if m else None,
            "restored_topics": int(m.group(2)) if m else None,
            "first_route_after_listening_ms": round(first_ms, 2),
            "first_route_code": first_code,
            "sample_routes": len(sample),
            "sample_routes_found": codes.count(0),
            "sample_seconds": round(sample_s, 3),
        }
        print(f"restart after kill -9: {json.dumps(out['restart'])}")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=100_000, help="topics of the process part")
    ap.add_argument("--interval-ms", type=int, default=1000, help="routeSnapshotIntervalMillis of the process part")
    ap.add_argument("--probe-seconds", type=float, default=8.0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "snapshot.json"))
    args = ap.parse_args()
    pin(CLIENT_CPU)
    results: dict[str, object] = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
    }
    with tempfile.TemporaryDirectory(prefix="snapshot-bench-") as tmp:
        shapes = {"10k topics x 2 brokers": (1, 2, 10_000), "100k topics x 2 brokers": (1, 2, 100_000),
                  "4 clusters x 8 brokers x 10k topics": (4, 8, 10_000)}
        in_proc = {}
        for label, shape in shapes.items():
            in_proc[label] = in_process(shape, Path(tmp))
            print(f"{label}: {json.dumps(in_proc[label])}")
        results["in_process"] = in_proc
        results["process"] = process_part(args, Path(tmp))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
