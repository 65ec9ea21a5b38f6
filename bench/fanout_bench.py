#!/usr/bin/env python3
"""Spark fan-out scale-out figures: producers, task slots, Spark vs plain processes, who is the bottleneck.

Each configuration runs ``mqadmin fanout``'s driver in this process
against a fresh 2-NameServer, 2-broker local cluster (real processes on
127.0.0.1) and samples the CPU time and memory of every process involved:
the NameServers, the brokers, the engine (Spark's JVM and Python workers,
or the multiprocessing workers) and this driver. CPU is counted over the
load window only (start barrier to end of the load), as a percentage of
one core; the machine has 2.

Configurations (``--quick`` runs a smaller set):

* Spark ``local[2]`` with 1,000 / 5,000 / 10,000 producers, 1 send/s each;
* Spark ``local[1]`` with 5,000 producers (one task slot, one partition);
* multiprocessing (2 processes, no Spark) with 1,000 / 5,000 / 10,000;
* route-heavy runs: 10,000 producers polling one topic every 0.25 s
  (40,000 route queries/s asked for) at 0.2 send/s, to compare the route
  throughput clients achieve with the NameServer benchmark's figure.

Prints a summary and writes everything to ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil

from mqadmin.fanout import spark
from mqadmin.fanout.report import to_json
from mqadmin.fanout.runner import FanoutOptions, run
from mqadmin.localcluster import processes
from mqadmin.localcluster.state import ClusterState


@dataclass(frozen=True)
class Config:
    label: str
    engine: str  # "spark" or "multiprocessing"
    master: str | None
    producers: int
    rate: float = 1.0
    poll_interval: float = 30.0
    topics: int = 4
    ramp_up: float | None = None


def configs(quick: bool) -> list[Config]:
    """In run order: Spark and plain processes alternate, so both see the same machine load."""
    sizes = (1000, 5000) if quick else (1000, 5000, 10000)
    heavy = 5000 if quick else 10000
    out = []
    for n in sizes:
        out.append(Config(f"spark local[2] {n}", "spark", "local[2]", n))
        out.append(Config(f"multiprocessing 2 {n}", "multiprocessing", None, n))
    # Every producer sends its first message within 1 s, then polls its one topic every 0.25 s:
    # 4 route queries/s per producer are asked for (40,000/s from 10,000), next to 0.2 sends/s each.
    for engine, master in (("spark", "local[2]"), ("multiprocessing", None)):
        label = f"route-heavy {'spark local[2]' if master else 'multiprocessing 2'} {heavy}"
        out.append(Config(label, engine, master, heavy, rate=0.2, poll_interval=0.25, topics=1, ramp_up=1.0))
    out.append(Config("spark local[1] 5000", "spark", "local[1]", 5000))
    return out


class CpuSampler(threading.Thread):
    """Cumulative CPU seconds and RSS of each process group, every ``every`` s, with timestamps."""

    def __init__(self, state: ClusterState, engine: str, every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.engine = engine
        self.every = every
        self.groups = {
            "namesrvs": [p.pid for p in state.namesrvs],
            "brokers": [p.pid for p in state.brokers],
        }
        self.cluster_pids = {p.pid for p in state.procs}
        self.samples: list[tuple[float, dict[str, float], float, float]] = []  # (wall, cpu by group, engine RSS MB, JVM RSS MB)
        self.stop = threading.Event()
        self.me = psutil.Process()
        self._last: dict[int, float] = {}  # pid -> last CPU seen (so a process that exits keeps its share)
        self._group_of: dict[int, str] = {}

    def _cpu(self, proc: psutil.Process) -> float:
        try:
            t = proc.cpu_times()
            value = t.user + t.system
        except psutil.Error:
            return self._last.get(proc.pid, 0.0)
        self._last[proc.pid] = value
        return value

    def sample(self) -> None:
        cpu = {"namesrvs": 0.0, "brokers": 0.0, "engine": 0.0, "driver": 0.0}
        for group in ("namesrvs", "brokers"):
            for pid in self.groups[group]:
                self._group_of[pid] = group
        cpu["driver"] = self._cpu(self.me)
        self._group_of[self.me.pid] = "driver"
        engine_rss = jvm_rss = 0.0
        try:
            children = self.me.children(recursive=True)
        except psutil.Error:
            children = []
        spark_tree: set[int] = set()
        for child in children:
            try:
                if "java" in child.name():
                    spark_tree.add(child.pid)
                    spark_tree.update(c.pid for c in child.children(recursive=True))
            except psutil.Error:
                pass
        for child in children:
            if child.pid in self.cluster_pids:
                continue
            # The engine of this run: Spark's JVM and its Python workers, or the pool processes
            # (an idle Spark session kept for the next run is not counted in a multiprocessing run).
            if (child.pid in spark_tree) != (self.engine == "spark"):
                continue
            self._group_of[child.pid] = "engine"
            try:
                rss = child.memory_info().rss / 2**20
                engine_rss += rss
                if "java" in child.name():
                    jvm_rss += rss
            except psutil.Error:
                pass
            self._cpu(child)
        for pid, group in self._group_of.items():
            if group in ("namesrvs", "brokers"):
                try:
                    self._cpu(psutil.Process(pid))
                except psutil.Error:
                    pass
            if group != "driver":
                cpu[group] += self._last.get(pid, 0.0)
        self.samples.append((time.time(), cpu, engine_rss, jvm_rss))

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(self.every)

    def window(self, begin: float, end: float) -> dict[str, Any]:
        """CPU % of one core per group between two wall times, and the peak engine memory."""
        inside = [s for s in self.samples if begin <= s[0] <= end]
        if len(inside) < 2:
            return {}
        first, last = inside[0], inside[-1]
        span = last[0] - first[0]
        cpu = {g: round(100.0 * (last[1][g] - first[1][g]) / span, 1) for g in first[1]}
        return {"cpu_percent": cpu, "engine_rss_mb": round(max(s[2] for s in self.samples), 1),
                "jvm_rss_mb": round(max(s[3] for s in self.samples), 1)}


def one_run(cfg: Config, duration: float, session: Any, workdir: Path) -> dict[str, Any]:
    state = processes.start(workdir / cfg.label.replace(" ", "-").replace("[", "").replace("]", ""),
                            processes.StartOptions(namesrvs=2, brokers=2, topics=tuple(f"FanoutTopic{i}" for i in range(cfg.topics)),
                                                   topic_queues=8))
    sampler = CpuSampler(state, cfg.engine)
    load_before = os.getloadavg()
    try:
        sampler.start()
        opts = FanoutOptions(producers=cfg.producers, topics=cfg.topics, duration=duration, rate=cfg.rate,
                             poll_interval=cfg.poll_interval, ramp_up=cfg.ramp_up, namesrv=state.namesrv_addr, engine=cfg.engine,
                             master=cfg.master or "local[*]", workers=2, start_delay=3.0)
        result = run(opts, session=session if cfg.engine == "spark" else None)
    finally:
        sampler.stop.set()
        sampler.join(5)
        processes.stop_procs(state.procs)
    doc = to_json(result)
    begin = result.plan.start_wall
    usage = sampler.window(begin, begin + duration)
    return {"label": cfg.label, "config": cfg.__dict__, "loadavg_before": [round(x, 2) for x in load_before],
            "usage": usage, "report": doc}


def summary_line(r: dict[str, Any]) -> str:
    d = r["report"]
    cpu = r["usage"].get("cpu_percent", {})
    return (f"{r['label']:<38} sends/s {d['sends']['per_second']:>8,.0f} (ok {d['sends']['outcomes']['ok']:>7,}, "
            f"agree {d['agreement']['agree']}), send p50/p99 {d['sends']['latency_ms']['p50']:>7.1f}/"
            f"{d['sends']['latency_ms']['p99']:>7.1f} ms, routes/s {d['routes']['per_second']:>8,.0f} "
            f"p99 {d['routes']['latency_ms']['p99']:>7.1f} ms | CPU% ns {cpu.get('namesrvs', 0):.0f} "
            f"brokers {cpu.get('brokers', 0):.0f} engine {cpu.get('engine', 0):.0f} driver {cpu.get('driver', 0):.0f} "
            f"(asked {r['config']['producers'] * r['config']['topics'] / r['config']['poll_interval']:,.0f}) "
            f"| engine RSS {r['usage'].get('engine_rss_mb', 0):.0f} MB | {d['resources']['connections']} conns "
            f"| load {r['loadavg_before'][0]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--quick", action="store_true", help="Fewer and smaller configurations.")
    ap.add_argument("--only", default=None, help="Run only configurations whose label contains this text.")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "fanout.json")
    args = ap.parse_args()
    todo = [c for c in configs(args.quick) if args.only is None or args.only in c.label]
    results: list[dict[str, Any]] = []
    sessions: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="fanout-bench-") as tmp:
        workdir = Path(tmp)
        session, master = None, None
        try:
            for cfg in todo:
                if cfg.master is not None and cfg.master != master:
                    if session is not None:
                        session.stop()
                    began = time.monotonic()
                    session, master = spark.start_session(cfg.master, work_dir=workdir / "spark"), cfg.master
                    sessions[cfg.master] = {"start_s": round(time.monotonic() - began, 2)}
                r = one_run(cfg, args.duration, session, workdir)
                results.append(r)
                print(summary_line(r), flush=True)
        finally:
            if session is not None:
                session.stop()
    doc = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "memory_gb": round(psutil.virtual_memory().total / 2**30, 1)},
        "duration": args.duration,
        "spark_sessions": sessions,
        "runs": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
