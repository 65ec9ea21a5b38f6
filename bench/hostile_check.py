#!/usr/bin/env python3
"""Replay every reproduction of issue 11 against real servers and judge it by the issue's "Done when".

Every case of issue 11 (items 1-10, each sub-case, plus the KV durability
check and a few suspects found while verifying) runs against a real
``mqnamesrv`` or ``mqbroker-stub`` process on 127.0.0.1. For each the script
prints the case, what the server answered or did, whether a fresh client was
served within 1 s (and its latency), the longest stall a probe client saw
while the attack ran (one request every ~10 ms on its own connection), the
server's peak RSS where the issue gives a memory figure, and PASS/FAIL
against: fresh client within 1 s; no stall over 50 ms; RSS under 300 MB;
no second key and no attacker path after a restart; no traceback in the log;
plus the case's own expectations. The full-size attacks of the issue are
used where feasible; the 200 x 16 MiB slow frames run for 8 s, and the 620
``kill -9`` rounds are cut to ``--kv-rounds`` (50).

    .venv/bin/python bench/hostile_check.py                 # everything, about 3-4 minutes
    .venv/bin/python bench/hostile_check.py --only 3x,4-    # cases whose id starts with these

Writes bench/results/hostile_check.json. Loopback only; every process it
starts is stopped (also on failure or Ctrl-C). Exit status 0 when every
case passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import hostile_broker
import hostile_namesrv
import hostile_process
import psutil
from hostile_harness import Case, Server, run_case, servers

RESULTS = HERE / "results" / "hostile_check.json"


def wanted(case_id: str, only: list[str]) -> bool:
    return not only or any(case_id.startswith(prefix) for prefix in only)


def _wants_prefix(group: str, only: list[str]) -> bool:
    """Whether any case of a group (ids starting with ``group``) is wanted."""
    return not only or any(group.startswith(p) or p.startswith(group) for p in only)


def run(workdir: Path, only: list[str], kv_rounds: int, settings: dict[str, str]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    store = workdir / "broker-files"
    with servers([lambda: Server.namesrv(workdir / "namesrv", **settings),
                  lambda: Server.broker(workdir / "broker", brokerName="hostile-broker")]) as (ns, broker):
        for server in (ns, broker):
            base = server.measure_baseline()
            print(f"{server.kind} at {server.addr[0]}:{server.addr[1]}: idle probe max {base['max_ms']} ms "
                  f"(p99 {base['p99_ms']} ms, {base['samples']} probes)", flush=True)
        cases: list[Case] = hostile_namesrv.cases(ns) + hostile_broker.cases(broker, store)
        results += [run_case(c) for c in cases if wanted(c.id, only)]
    if wanted("10-", only):
        with servers([lambda: Server.broker(workdir / "broker-files", brokerName="hostile-files",
                                            storePathRootDir=store, maxAutoCreatedTopics=4000)]) as (broker,):
            broker.measure_baseline(1.0)
            results += [run_case(c) for c in hostile_broker.file_cases(broker, store)]
    results += hostile_process.run_all(workdir / "process", kv_rounds, lambda prefix: _wants_prefix(prefix, only))
    return results


def summary(results: list[dict[str, Any]]) -> str:
    rows = ["| case | item | server | answer | fresh client ms | max stall ms | RSS peak MB | verdict |",
            "|---|---|---|---|---|---|---|---|"]
    for r in results:
        failed = [k for k, ok in r["checks"].items() if not ok]
        verdict = "PASS" if r["pass"] else "FAIL: " + ", ".join(failed)
        answer = r["answer"].replace("|", "\\|")
        if len(answer) > 120:
            answer = answer[:120] + "..."
        stall = r["stall_max_ms"]
        if "first_attempt" in r:
            stall = f"{stall} (first run {r['first_attempt']['stall_max_ms']})"
        rows.append(f"| {r['case']} | {r['item']} | {r['server']} | {answer} | {r['fresh_client_ms']} | "
                    f"{stall} | {r['rss_peak_mb']} | {verdict} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated case-id prefixes (default: all)")
    parser.add_argument("--kv-rounds", type=int, default=50, help="kill -9 rounds during KV writes (default 50)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a key of the main NameServer's config (e.g. registerBodyMaxBytes=2097152)")
    args = parser.parse_args()
    if args.kv_rounds < 1:
        parser.error("--kv-rounds must be positive")
    if any("=" not in item for item in args.set):
        parser.error("--set takes KEY=VALUE")
    settings = dict(item.split("=", 1) for item in args.set)
    only = [p.strip() for p in args.only.split(",") if p.strip()]
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hostile-check-") as tmp:
        results = run(Path(tmp), only, args.kv_rounds, settings)
    took = time.monotonic() - began
    print("\n" + summary(results))
    failed = [r["case"] for r in results if not r["pass"]]
    print(f"\n{len(results) - len(failed)} of {len(results)} cases passed in {took:.0f} s"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    doc = {
        "command": "bench/hostile_check.py " + " ".join(sys.argv[1:]),
        "machine": {"cpus": psutil.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
        "namesrv_settings": settings,
        "seconds": round(took, 1),
        "passed": len(results) - len(failed),
        "failed": failed,
        "cases": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
