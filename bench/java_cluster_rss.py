#!/usr/bin/env python3
"""Memory of a local cluster of Apache's Java processes, sized by the runner for a laptop.

Starts, with the runner's defaults, ``mqadmin start --namesrvs 2 --namesrv-impl java:5.5.0 --brokers 2
--broker-impl java:5.3.3 --slaves 1 --topics RssTopic`` (2 Java NameServers, 2 broker groups of a
master and a slave: 6 JVMs), then runs clients against it: a Java push consumer and a Java producer
(the interop harness's programs, RocketMQ 5.3.3's client) exchanging ``--messages`` messages.
Every 0.5 s it sums the resident set (VmRSS) of every process of the cluster and of the clients; it
reports the peak of that sum, each process's peak, and the time ``start`` took. ``--ours`` runs the same
shape with our NameServer and broker stub instead (the peer to interleave with: A B A B).

Everything on 127.0.0.1; every wait is bounded; the cluster and the clients are stopped at the end,
whatever happens. Prints the figures and writes them to bench/results/java-cluster-rss[-NAME].json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.interop import harness_build  # noqa: E402
from tests.interop.java_procs import java_consumer, run_java_client  # noqa: E402
from tests.mqadmin_procs import CLI, stop_all  # noqa: E402

TOPIC = "RssTopic"
SHAPE = ["--namesrvs", "2", "--brokers", "2", "--slaves", "1", "--topics", TOPIC]
JAVA = ["--namesrv-impl", "java:5.5.0", "--broker-impl", "java:5.3.3"]
MB = 1024 * 1024


class Sampler:
    """Sums the RSS of the cluster's and the clients' processes every 0.5 s, in a thread."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = set(pids)
        self.peak_total = 0
        self.peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def add(self, pid: int) -> None:
        self.pids.add(pid)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            total = 0
            for pid in list(self.pids):
                try:
                    rss = psutil.Process(pid).memory_info().rss
                except psutil.NoSuchProcess:
                    continue
                self.peak[pid] = max(self.peak.get(pid, 0), rss)
                total += rss
            self.peak_total = max(self.peak_total, total)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--name", default="", help="suffix of the result file (run1, run2, ...)")
    parser.add_argument("--ours", action="store_true", help="our NameServer and broker stub, the same shape")
    args = parser.parse_args()
    start = ["start", *SHAPE, *([] if args.ours else JAVA)]
    builds = harness_build.build_java()
    harness_build.resolve_servers()
    base = Path(tempfile.mkdtemp(prefix="java-rss-"))
    directory = base / "cluster"
    env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    consumer = None
    try:
        began = time.monotonic()
        done = subprocess.run([*CLI, *start, "--dir", str(directory), "--json"], capture_output=True, text=True,
                              timeout=900, env=env, check=False)
        if done.returncode != 0:
            raise SystemExit(f"mqadmin start failed: {done.stderr}")
        start_seconds = time.monotonic() - began
        started = json.loads(done.stdout)
        names = {p["pid"]: p["name"] for p in started["procs"]}
        namesrv = started["namesrvAddr"]
        with Sampler(list(names)) as sampler:
            time.sleep(5)  # the cluster idle, as it runs between scenarios
            idle_total = sampler.peak_total
            consumer = java_consumer(builds["5.3.3"], base / "consumer", [
                "--namesrv", namesrv, "--topic", TOPIC, "--group", "rss_group", "--expect", str(args.messages),
                "--seconds", "300"])
            sampler.add(consumer.proc.pid)
            names[consumer.proc.pid] = "java consumer"
            consumer.wait_for("ready")
            messages = [arg for i in range(args.messages) for arg in ("--msg", f"body=rss-{i}")]
            producer = threading.Thread(target=lambda: run_java_client(
                builds["5.3.3"], "Producer", ["--namesrv", namesrv, "--topic", TOPIC, *messages], base / "producer",
                timeout=600), daemon=True)
            producer.start()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not any(
                    "interop.harness.Producer" in " ".join(c.cmdline()) for c in psutil.Process().children()):
                time.sleep(0.1)
            for child in psutil.Process().children():
                if "interop.harness.Producer" in " ".join(child.cmdline()):
                    sampler.add(child.pid)
                    names[child.pid] = "java producer"
            consumer.finish(600)
            producer.join(600)
            time.sleep(1)
        received = len(consumer.received())
    finally:
        if consumer is not None:
            consumer.kill()
        stop_all(directory)
    per_process = {names[pid]: round(rss / MB, 1) for pid, rss in sorted(sampler.peak.items(), key=lambda i: names[i[0]])}
    result = {
        "command": "mqadmin " + " ".join(start), "clients": f"Java 5.3.3 push consumer + producer, {args.messages} messages",
        "received": received, "startSeconds": round(start_seconds, 1),
        "idleTotalMB": round(idle_total / MB, 1), "peakTotalMB": round(sampler.peak_total / MB, 1),
        "peakPerProcessMB": per_process, "machine": f"{platform.node()} {os.cpu_count()} cpus",
    }
    print(json.dumps(result, indent=2))
    stem = "ours-cluster-rss" if args.ours else "java-cluster-rss"
    out = ROOT / "bench" / "results" / f"{stem}{'-' + args.name if args.name else ''}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
