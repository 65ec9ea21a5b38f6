#!/usr/bin/env python3
"""How many simulated producers, and how many sends/s, one trio loop sustains.

Starts a local cluster as real processes on 127.0.0.1 (2 NameServers, 2
master broker stubs), then runs ``simclient.run_load`` in this process
(one trio loop) in phases:

* ``paced``: N producers each sending at a modest fixed rate (default one
  message every 5 s) with the real 30 s route poll and heartbeats, for N in
  --paced (default 1000, 5000, 10000, 20000): does the loop keep up (achieved vs target rate, send latency,
  event-loop lag), and what does a producer cost in memory;
* ``closed``: N producers sending back to back (closed loop), for N in
  --closed: the most sends/s the loop and the cluster manage together;
* ``poll``: N producers with a short route poll interval and no sends: the
  route-query rate the clients generate.

On the 2-core machine the servers and this client share the CPUs, so the
closed-loop figure is the whole local cluster's, not the client's alone;
the client's own CPU use is reported beside it. Prints the figures and
writes them to bench/results/simclient.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import trio

from remoting.codes import RequestCode
from remoting.command import request
from simclient import (
    ClientPool,
    Histogram,
    LoadSpec,
    ProducerOptions,
    SendRecord,
    run_load,
)

NS_BOOT = re.compile(rb"address ([\d.]+):(\d+)")
BROKER_BOOT = re.compile(rb"The broker\[[^,\]]+, ([\d.]+):(\d+)\] boot success")


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def cpu_pressure() -> float | None:
    """Linux PSI: % of the last 60 s some task waited for a CPU (others' load shows here)."""
    try:
        with open("/proc/pressure/cpu") as fh:
            return float(fh.readline().split()[2].split("=")[1])
    except (OSError, IndexError, ValueError):
        return None


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Cluster:
    """2 NameServers + 2 broker stubs as child processes; always stopped by ``stop``."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[subprocess.Popen[bytes]] = []
        self.namesrvs: list[str] = []
        self.brokers: dict[str, str] = {}

    def _start(self, args: list[str], name: str, pattern: re.Pattern[bytes], timeout: float = 20.0) -> re.Match[bytes]:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 (handed to the child)
        proc = subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.PIPE, stderr=log, cwd=ROOT)
        log.close()
        self.procs.append(proc)
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        seen = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = proc.stdout.read() or b""
            seen += chunk
            match = pattern.search(seen)
            if match:
                return match
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"{name} did not start: {seen!r}")

    def start(self) -> Cluster:
        for i in range(2):
            cfg = self.workdir / f"ns{i}.properties"
            cfg.write_text(f"listenPort=0\nbindAddress=127.0.0.1\nkvConfigPath={self.workdir}/kv{i}.json\n")
            m = self._start(["namesrv.cli", "-c", str(cfg)], f"ns{i}", NS_BOOT)
            self.namesrvs.append(f"{m.group(1).decode()}:{m.group(2).decode()}")
        for name in ("broker-a", "broker-b"):
            cfg = self.workdir / f"{name}.properties"
            cfg.write_text(
                f"brokerName={name}\nlistenPort=0\nbrokerIP1=127.0.0.1\nnamesrvAddr={';'.join(self.namesrvs)}\n"
                "registerNameServerPeriod=5000\nmaxMessagesPerQueue=2000\n"
            )
            m = self._start(["broker_stub.cli", "-c", str(cfg)], name, BROKER_BOOT)
            self.brokers[name] = f"{m.group(1).decode()}:{m.group(2).decode()}"
        time.sleep(1.0)  # first registrations
        return self

    async def stored(self, topics: tuple[str, ...]) -> dict[str, int]:
        """Messages each broker says it stored for ``topics`` (sum of queue max offsets)."""
        out: dict[str, int] = {}
        for name, addr in self.brokers.items():
            total = 0
            async with ClientPool() as pool:
                for topic in topics:
                    for q in range(16):
                        resp = await pool.invoke(addr, request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": q}), 5.0)
                        total += int(resp.ext("offset") or 0) if resp.code == 0 else 0
            out[name] = total
        return out

    def server_cpu(self) -> float:
        return sum(cpu_seconds(p.pid) for p in self.procs if p.poll() is None)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for p in self.procs:
            p.wait(10)


async def phase(
    cluster: Cluster, name: str, producers: int, rate: float, duration: float, poll: float = 30.0
) -> dict[str, object]:
    options = ProducerOptions(namesrv_addrs=tuple(cluster.namesrvs), poll_name_server_interval=poll)
    topics = ("BenchA", "BenchB")
    spec = LoadSpec(
        producers=producers,
        topics=topics,
        rate_per_producer=rate,
        duration=duration,
        message_size=256,
        topics_per_producer=1,
        ramp_up=min(duration / 3, producers / 2000.0) if rate else 0.0,
    )
    # steady state: from 2 s after the last producer started to the end
    steady_from = spec.ramp_up + (1.0 / rate if rate else 0.0) + 1.0
    steady = Histogram()
    marks: dict[str, float] = {}

    def sink(rec: SendRecord) -> None:
        if steady_from <= rec.t < duration:
            steady.record(rec.latency_ms)

    async def mark(at: float, name: str) -> None:
        await trio.sleep_until(t0 + at)
        marks[name] = {"cpu": time.process_time(), "scpu": cluster.server_cpu(), "wall": time.monotonic()}

    stored0 = await cluster.stored(topics)
    rss0 = rss_mb()
    cpu0, scpu0, wall0 = time.process_time(), cluster.server_cpu(), time.monotonic()
    async with ClientPool() as pool, trio.open_nursery() as nursery:
        t0 = trio.current_time()
        nursery.start_soon(mark, steady_from, "start")
        nursery.start_soon(mark, duration, "end")
        summary = await run_load(options, spec, sink, pool=pool, t0=t0)
        peak_rss = rss_mb()
        nursery.cancel_scope.cancel()
    start, end = marks["start"], marks["end"]
    steady_wall = end["wall"] - start["wall"]
    wall = time.monotonic() - wall0
    cpu = time.process_time() - cpu0
    scpu = cluster.server_cpu() - scpu0
    stored1 = await cluster.stored(topics)
    stored = {name: stored1[name] - stored0.get(name, 0) for name in stored1}
    out: dict[str, object] = {
        "phase": name,
        "producers": producers,
        "rate_per_producer": rate,
        "target_sends_per_s": producers * rate if rate else None,
        "duration_s": duration,
        "sends": summary.sends,
        "ok": summary.ok,
        "outcomes": {k: v for k, v in summary.outcomes.items() if v},
        "sends_per_s": round(summary.sends / duration, 1),
        "send_latency_ms": summary.latency.summary(),
        "steady_from_s": steady_from,
        "steady_sends_per_s": round(steady.count / steady_wall, 1) if steady_wall > 0 else None,
        "steady_send_latency_ms": steady.summary(),
        "steady_client_cpu_pct": round(100 * (end["cpu"] - start["cpu"]) / steady_wall, 1) if steady_wall > 0 else None,
        "steady_servers_cpu_pct": round(100 * (end["scpu"] - start["scpu"]) / steady_wall, 1) if steady_wall > 0 else None,
        "route_queries": summary.route.queries,
        "route_queries_per_s": round(summary.route.queries / duration, 1),
        "route_latency_ms": summary.route.latency.summary(),
        "loop_lag_ms": {
            "p50": round(summary.loop_lag.percentile(50), 2),
            "p99": round(summary.loop_lag.percentile(99), 2),
            "max": round(summary.loop_lag.max_ms, 2),
        },
        "client_cpu_pct": round(100 * cpu / wall, 1),
        "servers_cpu_pct": round(100 * scpu / wall, 1),
        "client_by_broker": dict(sorted(summary.by_broker.items())),
        "brokers_stored": stored,
        # a send that timed out on the client may still have been stored: stored >= acknowledged
        "counts_agree": {k: v for k, v in stored.items() if v} == dict(summary.by_broker),
        "stored_not_acknowledged": sum(stored.values()) - summary.ok,
        "cpu_pressure_some_pct": cpu_pressure(),
        # a loop lag p99 above ~50 ms means the client loop, not the cluster, limited the phase
        "client_loop_limited": summary.loop_lag.percentile(99) > 50.0,
        "client_rss_mb_delta": round(peak_rss - rss0, 1),
        "kb_per_producer": round((peak_rss - rss0) * 1024 / producers, 2),
    }
    lat = out["steady_send_latency_ms"]
    print(
        f"{name:7} N={producers:6} rate={rate:5g}/s  ok={summary.ok:7}/{summary.sends:7}  steady: sends/s="
        f"{out['steady_sends_per_s']:8}  p50={lat['p50_ms']:7.2f} p99={lat['p99_ms']:8.2f} ms  "
        f"client cpu={out['steady_client_cpu_pct']:5}%  servers cpu={out['steady_servers_cpu_pct']:5}%  |  "
        f"routeq/s={out['route_queries_per_s']:7}  lag p99={out['loop_lag_ms']['p99']:6.1f} ms  "
        f"+rss={out['client_rss_mb_delta']} MB  "
        f"broker counts agree={out['counts_agree']} (+{out['stored_not_acknowledged']})  "
        f"cpu pressure={out['cpu_pressure_some_pct']}%",
        flush=True,
    )
    return out


async def run(args: argparse.Namespace, cluster: Cluster) -> list[dict[str, object]]:
    results = []
    for n in args.paced:
        results.append(await phase(cluster, "paced", n, args.rate, args.duration))
    for n in args.closed:
        results.append(await phase(cluster, "closed", n, 0.0, args.duration))
    for n in args.poll:
        results.append(await phase(cluster, "poll", n, 0.5, args.duration, poll=args.poll_interval))
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paced", type=int, nargs="*", default=[1000, 5000, 10000, 20000])
    ap.add_argument("--rate", type=float, default=0.2, help="sends/s per producer in the paced phases")
    ap.add_argument("--closed", type=int, nargs="*", default=[100, 1000, 5000])
    ap.add_argument("--poll", type=int, nargs="*", default=[5000], help="producers in the route-poll phase")
    ap.add_argument("--poll-interval", type=float, default=2.0)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "simclient.json"))
    args = ap.parse_args()
    info = {
        "python": platform.python_version(),
        "trio": trio.__version__,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(f"simclient bench: {info}")
    with tempfile.TemporaryDirectory(prefix="simbench-") as tmp:
        cluster = Cluster(Path(tmp))
        try:
            cluster.start()
            print(f"cluster: namesrvs {cluster.namesrvs}, 2 brokers")
            results = trio.run(run, args, cluster)
        finally:
            cluster.stop()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"info": info, "phases": results}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
