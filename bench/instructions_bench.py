#!/usr/bin/env python3
"""Instructions per route query and per registration, counted by valgrind: steady on a busy machine.

Why: on this shared 2-core machine two timed runs of the same server a
minute apart differ by more than a restructuring could change, even
interleaved (bench/auth_bench.py). An instruction count does not depend on
what else runs: the same code on the same input gives the same count,
within a fraction of a percent. So each workload runs in-process through
the NameServer's real processor (``NameServerProcessor.handle``, the path a
decoded request takes behind the reactor and the access gate), under
``valgrind --tool=callgrind``, once with ``n`` repetitions and once with
none; the difference over ``n`` is the instructions of one operation.

Workloads (brokers of ``--topics`` topics, JSON bodies as a Java broker sends them):

- ``route``: GET_ROUTEINFO_BY_TOPIC of every topic, answered from the cache;
- ``register-same``: a broker re-sending the body it sent last (the 30 s heartbeat);
- ``register-changed``: a new data version with one topic changed;
- ``register-new``: a registration of ``--topics`` topics the table has not seen
  (written in slices behind the previous state when past 2,048 topic writes).

``--today-root`` names another checkout (``git archive main``) whose code
runs the same workloads; the two alternate (A B A B) and the figures are
printed side by side. CPython's own hash seed is fixed (PYTHONHASHSEED=0)
so that dict layouts are the same in every run.

usage: bench/instructions_bench.py [--today-root DIR] [--topics 10000] [--repeat 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The workload, run with the code of the checkout it is started in (its cwd comes first on sys.path).
WORKLOAD = r'''
import sys, time
from namesrv.config import NamesrvConfig
from namesrv.kvconfig import KVConfig
from namesrv.processor import NameServerProcessor
from remoting import requests as rq
from remoting.bodies import DataVersion, TopicConfig
from remoting.codec import decode_frame, encode
from remoting.codes import RequestCode
from remoting.command import request

kind, topics_n, build, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

async def no_persist(*args):
    pass

config = NamesrvConfig()
config.maxTopics = 10_000_000
proc = NameServerProcessor(config, KVConfig("/nonexistent/kv.json"), clock=time.monotonic, persist=no_persist)

def register(name, topics, version):
    req = decode_frame(encode(rq.register_broker(
        cluster="c", broker_name=name, broker_addr=f"127.0.0.1:{10911 + 10 * int(name[1:])}", broker_id=0,
        topics=topics, data_version=DataVersion(version, 1_700_000_000_000))))
    return req

base = [TopicConfig(f"topic-{i:07d}", 8, 8, 6) for i in range(topics_n)]
for b in range(2):
    assert proc.handle(register(f"b{b}", base, 1), f"conn{b}") is not None
if kind == "route":
    reqs = [decode_frame(encode(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": t.topic_name}, opaque=i)))
            for i, t in enumerate(base)]
    for r in reqs:
        proc.handle(r, "client")  # every answer cached
    work = [lambda: [proc.handle(r, "client") for r in reqs]] * build
elif kind == "register-same":
    same = register("b0", base, 1)
    work = [lambda: proc.handle(same, "conn0")] * build
elif kind == "register-changed":
    frames = []
    for v in range(build):
        changed = list(base)
        changed[v] = TopicConfig(base[v].topic_name, 9, 8, 6)
        frames.append(register("b0", changed, 2 + v))
    work = [lambda f=f: proc.handle(f, "conn0") for f in frames]
elif kind == "register-new":
    frames = [register(f"b{2 + v}", [TopicConfig(f"new{v}-{i:07d}", 8, 8, 6) for i in range(topics_n)], 1)
              for v in range(build)]
    work = [lambda v=v, f=f: proc.handle(f, f"conn{2 + v}") for v, f in enumerate(frames)]
else:
    raise SystemExit(f"unknown workload {kind}")
for w in work[:n]:  # the same setup with n = 0 and n = build: the difference is the work
    w()
'''

KINDS = ("route", "register-same", "register-changed", "register-new")
#: Repetitions per workload: a route query is one of ``--topics`` per repetition.
REPS = {"route": 2, "register-same": 10, "register-changed": 10, "register-new": 2}


def instructions(root: Path, script: Path, kind: str, topics: int, n: int) -> int:
    """Instructions callgrind counts for the workload's setup and ``n`` of its operations."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, str(script), kind,
         str(topics), str(REPS[kind]), str(n)],
        cwd=root, env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(root)},
        capture_output=True, text=True, timeout=3600,
    )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise SystemExit(f"{kind} in {root} failed: {out.stderr[-2000:]}")
    return int(found.group(1))


def per_operation(root: Path, script: Path, kind: str, topics: int) -> float:
    n = REPS[kind]
    ops = n * (topics if kind == "route" else 1)
    return (instructions(root, script, kind, topics, n) - instructions(root, script, kind, topics, 0)) / ops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--today-root", type=Path, help="another checkout to compare with (git archive main)")
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=2, help="alternations of the two checkouts (A B A B ...)")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "instructions.json")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    if not (100 <= args.topics <= 200_000 and 1 <= args.repeat <= 5):
        ap.error("--topics 100..200000, --repeat 1..5")
    roots = {"this": ROOT}
    if args.today_root is not None:
        roots = {"today": args.today_root.resolve(), "this": ROOT}
    kinds = args.kinds.split(",")
    results: dict[str, object] = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "topics": args.topics, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    figures: dict[str, dict[str, list[float]]] = {k: {r: [] for r in roots} for k in kinds}
    with tempfile.TemporaryDirectory(prefix="instructions-bench-") as tmp:
        script = Path(tmp) / "workload.py"
        script.write_text(WORKLOAD)
        for turn in range(args.repeat):
            for kind in kinds:
                for name, root in roots.items():
                    figures[kind][name].append(per_operation(root, script, kind, args.topics))
                print(f"pass {turn + 1} {kind}: " + "  ".join(
                    f"{name} {figures[kind][name][-1]:,.0f}" for name in roots) + " instructions per operation",
                    flush=True)
    print(f"\n{'workload':18s} " + " ".join(f"{name:>16s}" for name in roots) + ("    this/today" if len(roots) > 1 else ""))
    for kind in kinds:
        means = {name: sum(v) / len(v) for name, v in figures[kind].items()}
        ratio = f"    {means['this'] / means['today']:.4f}" if "today" in means else ""
        print(f"{kind:18s} " + " ".join(f"{means[name]:16,.0f}" for name in roots) + ratio)
    results.update(per_operation=figures, finished=time.strftime("%Y-%m-%d %H:%M:%S"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
