#!/usr/bin/env python3
"""What metrics cost the NameServer: route-query throughput with and without them.

Issue 21's bound: with ``/metrics`` scraped every second, route-query
throughput stays within 3 % of a NameServer without metrics
(``metricsPort=0``, the default: no request meter at all).

The shape is ``bench/namesrv_bench.py``'s: 4 clusters x 8 brokers, 10,000
topics per cluster (40,000 topics), registered once; the ``mqnamesrv``
process pinned to CPU 0, the C load generator (16 connections, one request
in flight on each, a random topic per request) pinned to CPU 1. Each round
starts a fresh server per mode and alternates which mode goes first
(off/on, on/off, ...), so the shared machine's drift hits both alike. With
metrics on, a thread of this script fetches ``/metrics`` once a second
while the load runs, and records how long each scrape took.

On a shared machine the server's share of its core swings with other
work, so throughput alone is noisy; each run also records the server's CPU
time over the measured phase (``/proc/PID/stat``, 10 ms ticks) divided by
the queries answered: the CPU cost of a query, scrapes included, which a
busy neighbour slows less than it slows throughput.

Two steady figures besides (CPU time, in this process, no sockets):

* the request meter's cost per route query: the real processor answering a
  decoded route request, bare and through :class:`server_runtime.metering.RequestMeter`;
* one scrape's render with 100,000 topics in the table (it reads sizes and
  counters only, so it costs the same with 100).

Prints the figures and writes them as JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.namesrv_bench import (  # noqa: E402
    CLIENT_CPU,
    SERVER_CPU,
    BlockingConn,
    BrokerBody,
    build_loadgen,
    pin,
    query_load,
    topic_configs,
)
from remoting.codec import encode  # noqa: E402
from remoting.codes import RequestCode  # noqa: E402
from remoting.command import request  # noqa: E402

BOOT = re.compile(rb"address ([\d.]+):(\d+)")
METRICS = re.compile(rb"metrics at (http://\S+)")


def start_server(workdir: Path, metrics: bool) -> tuple[subprocess.Popen[bytes], str, str | None]:
    cfg = workdir / "namesrv.properties"
    cfg.write_text(
        "listenPort=0\nbindAddress=127.0.0.1\nwarmRestartEnable=false\n"
        f"kvConfigPath={workdir}/kvConfig.json\nmetricsPort={-1 if metrics else 0}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "namesrv.cli", "-c", str(cfg)],
        stdout=subprocess.PIPE, stderr=open(workdir / "namesrv.log", "ab"), cwd=ROOT,
        preexec_fn=lambda: pin(SERVER_CPU),
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    seen = b""
    while time.monotonic() < deadline:
        seen += os.read(proc.stdout.fileno(), 4096)
        boot = BOOT.search(seen)
        if boot:
            url = METRICS.search(seen)
            return proc, f"{boot.group(1).decode()}:{boot.group(2).decode()}", url.group(1).decode() if url else None
    proc.kill()
    raise SystemExit(f"server did not start: {seen!r}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (``/proc/PID/stat``, clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


class Scraper(threading.Thread):
    """GET /metrics once a second until stopped; keeps each scrape's wall time (ms) and size."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.done = threading.Event()
        self.ms: list[float] = []
        self.size = 0

    def run(self) -> None:
        while not self.done.wait(1.0):
            began = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=5) as resp:
                self.size = len(resp.read())
            self.ms.append((time.perf_counter() - began) * 1000)


def one_run(workdir: Path, loadgen: Path, metrics: bool, args: argparse.Namespace) -> dict[str, object]:
    proc, addr, url = start_server(workdir, metrics)
    try:
        frames = workdir / "route-requests.bin"
        conns = []  # held open for the run: a closed connection removes its broker
        for c in range(args.clusters):
            configs = topic_configs(c, args.topics)
            for b in range(args.brokers):
                conn = BlockingConn(addr)
                _, code = conn.call(BrokerBody(c, b, configs).current)
                assert code == 0, code
                conns.append(conn)
        query_load(loadgen, frames, addr, args.connections, args.warmup)  # warm the route cache
        scraper = Scraper(url) if url else None
        if scraper is not None:
            scraper.start()
        cpu_before = cpu_seconds(proc.pid)
        result = query_load(loadgen, frames, addr, args.connections, args.duration)
        cpu = cpu_seconds(proc.pid) - cpu_before
        if scraper is not None:
            scraper.done.set()
            scraper.join(10)
        row: dict[str, object] = {"metrics": metrics, "qps": result["qps"], "p99_ms": result.get("p99_ms"),
                                  "errors": result.get("errors", 0), "server_cpu_s": round(cpu, 2),
                                  "cpu_us_per_query": round(cpu / result["queries"] * 1e6, 2)}
        if scraper is not None:
            row.update(scrapes=len(scraper.ms), scrape_ms_median=statistics.median(scraper.ms) if scraper.ms else None,
                       scrape_ms_max=max(scraper.ms, default=None), scrape_bytes=scraper.size)
        return row
    finally:
        stop(proc)


def hot_path_ns(topics: int, rounds: int = 40, per_round: int = 5_000) -> dict[str, object]:
    """CPU ns per route query: the processor bare, and through the request meter.

    The two paths alternate in ``rounds`` rounds (which one goes first alternates too), so the shared
    machine's drift hits both alike; the meter's cost is the median of each round's difference.
    """
    from namesrv.config import NamesrvConfig
    from namesrv.kvconfig import KVConfig
    from namesrv.processor import NameServerProcessor
    from namesrv.request_classes import REQUEST_CLASSES
    from remoting.codec import decode_frame
    from server_runtime.metering import RequestMeter

    async def no_persist(path: str, data: bytes) -> None:
        raise OSError("nothing is written here")

    proc = NameServerProcessor(NamesrvConfig(), KVConfig("/nonexistent/kv.json"), clock=time.monotonic,
                               persist=no_persist)
    configs = topic_configs(0, topics)
    body = BrokerBody(0, 0, configs)
    reg = decode_frame(body.current)
    assert proc.handle(reg, 1) is not None
    reqs = [decode_frame(encode(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": tc.topic_name}, opaque=i)))
            for i, tc in enumerate(configs[:1000])]
    meter = RequestMeter(proc, REQUEST_CLASSES)
    paths = {"bare": proc.handle, "metered": meter.handle}
    for handle in paths.values():
        for req in reqs:
            handle(req, 1)  # warm
    samples: dict[str, list[float]] = {"bare": [], "metered": []}
    for r in range(rounds):
        for label in (("bare", "metered") if r % 2 == 0 else ("metered", "bare")):
            handle = paths[label]
            began = time.process_time()
            for i in range(per_round):
                handle(reqs[i % 1000], 1)
            samples[label].append((time.process_time() - began) / per_round * 1e9)
    diffs = [m - b for b, m in zip(samples["bare"], samples["metered"])]
    return {
        "rounds": rounds, "queries_per_round": per_round,
        "bare_min": min(samples["bare"]), "bare_median": statistics.median(samples["bare"]),
        "metered_min": min(samples["metered"]), "metered_median": statistics.median(samples["metered"]),
        "meter_ns_median_of_round_differences": statistics.median(diffs),
        "meter_ns_difference_of_minimums": min(samples["metered"]) - min(samples["bare"]),
    }


def render_ms(topics: int) -> dict[str, float]:
    """CPU ms of one scrape's render (families and text), with ``topics`` topics in the table."""
    from prometheus_client import generate_latest

    from namesrv.config import NamesrvConfig
    from namesrv.kvconfig import KVConfig
    from namesrv.metrics import NamesrvMetrics
    from namesrv.processor import NameServerProcessor
    from namesrv.request_classes import REQUEST_CLASSES
    from namesrv.snapshot import RouteSnapshots
    from remoting.codec import decode_frame
    from server_runtime.metering import RequestMeter
    from server_runtime.reactor import Reactor

    async def no_persist(path: str, data: bytes) -> None:
        raise OSError("nothing is written here")

    config = NamesrvConfig(frameMaxLength=256 * 1024 * 1024, registerBodyMaxTopics=topics + 1)
    proc = NameServerProcessor(config, KVConfig("/nonexistent/kv.json"), clock=time.monotonic, persist=no_persist)
    reg = decode_frame(BrokerBody(0, 0, topic_configs(0, topics)).current)
    answer = proc.handle(reg, 1)
    assert answer is not None and len(proc.table.topic_queues) == topics
    meter = RequestMeter(proc, REQUEST_CLASSES)
    reactor = Reactor(meter, on_close=lambda *a: None, max_frame=1 << 20, max_connections=lambda: 10,
                      idle_seconds=lambda: 60.0, clock=time.monotonic)
    metrics = NamesrvMetrics(table=proc.table, kv=proc.kv, counters=proc.counters, meter=meter, reactor=reactor,
                             snapshots=RouteSnapshots(proc.table, config, now_ms=proc.now_ms), restored=lambda: None)
    registry = metrics.registry()
    generate_latest(registry)
    samples = []
    for _ in range(50):
        began = time.process_time()
        generate_latest(registry)
        samples.append((time.process_time() - began) * 1000)
    return {"topics": topics, "render_ms_median": statistics.median(samples), "render_ms_max": max(samples)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="pairs of runs (one without metrics, one with)")
    ap.add_argument("--clusters", type=int, default=4)
    ap.add_argument("--brokers", type=int, default=8, help="brokers per cluster")
    ap.add_argument("--topics", type=int, default=10_000, help="topics per cluster")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of measured load per run")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds of unmeasured load first")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "metrics.json")
    args = ap.parse_args()
    if not (1 <= args.rounds <= 20 and 1 <= args.duration <= 600 and 0 <= args.warmup <= 60):
        ap.error("rounds 1-20, duration 1-600 s, warmup 0-60 s")
    pin(CLIENT_CPU)
    results: dict[str, object] = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "shape": f"{args.clusters} clusters x {args.brokers} brokers, {args.topics} topics per cluster, "
                 f"{args.connections} connections",
        "load_average_before": os.getloadavg()[0],
    }
    runs: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="metrics-bench-") as tmp:
        loadgen = build_loadgen(Path(tmp))
        frames = Path(tmp) / "route-requests.bin"
        frames.write_bytes(b"".join(
            encode(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": tc.topic_name}, opaque=1))
            for c in range(args.clusters) for tc in topic_configs(c, args.topics)))
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            for metrics in order:
                work = Path(tmp) / f"run-{r}-{'on' if metrics else 'off'}"
                work.mkdir()
                (work / "route-requests.bin").symlink_to(frames)
                row = one_run(work, loadgen, metrics, args)
                row["round"] = r + 1
                runs.append(row)
                print(json.dumps(row), flush=True)
    results["runs"] = runs
    off = [float(x["qps"]) for x in runs if not x["metrics"]]  # type: ignore[arg-type]
    on = [float(x["qps"]) for x in runs if x["metrics"]]  # type: ignore[arg-type]
    per_round = []
    for r in range(1, args.rounds + 1):
        qps = {bool(x["metrics"]): float(x["qps"]) for x in runs if x["round"] == r}  # type: ignore[arg-type]
        per_round.append(round((qps[True] / qps[False] - 1) * 100, 2))
    cpu_off = [float(x["cpu_us_per_query"]) for x in runs if not x["metrics"]]  # type: ignore[arg-type]
    cpu_on = [float(x["cpu_us_per_query"]) for x in runs if x["metrics"]]  # type: ignore[arg-type]
    results["summary"] = {
        "qps_off_median": statistics.median(off), "qps_on_median": statistics.median(on),
        "change_of_medians_pct": round((statistics.median(on) / statistics.median(off) - 1) * 100, 2),
        "per_round_change_pct": per_round,
        "cpu_us_per_query_off_median": statistics.median(cpu_off),
        "cpu_us_per_query_on_median": statistics.median(cpu_on),
        "cpu_change_of_medians_pct": round((statistics.median(cpu_on) / statistics.median(cpu_off) - 1) * 100, 2),
    }
    results["hot_path_ns"] = hot_path = hot_path_ns(args.topics)
    meter_ns = float(hot_path["meter_ns_median_of_round_differences"])  # type: ignore[arg-type]
    results["summary"]["meter_pct_of_cpu_per_query"] = round(  # type: ignore[index]
        meter_ns / (statistics.median(cpu_off) * 1000) * 100, 2)
    results["render"] = render_ms(100_000)
    results["load_average_after"] = os.getloadavg()[0]
    print(json.dumps({k: results[k] for k in ("summary", "hot_path_ns", "render")}, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
