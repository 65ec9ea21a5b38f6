#!/usr/bin/env python3
"""Local cluster runner figures: start/stop time, and how fast routes show a broker fault.

Starts ``mqadmin start``'s default shape (2 NameServers, 2 broker groups) in
a temporary directory with short liveness settings (register every 300 ms,
expire after 3 s of silence, scan every 100 ms), then for ``--rounds``
rounds: SIGKILL a master and time until no NameServer routes TBW102 to it
(connection close), restart it; SIGSTOP a master and time until it leaves
the routes (heartbeat timeout), SIGCONT it and time until it is back.
Everything on 127.0.0.1; every wait is bounded; the cluster is always stopped.

Prints the figures and writes them to bench/results/runner.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mqadmin.client import SyncAdminClient
from mqadmin.localcluster import processes

REGISTER_MS, EXPIRE_MS, SCAN_MS = 300, 3000, 100
WAIT_LIMIT = 15.0


def masters(clients: list[SyncAdminClient]) -> list[set[str]]:
    return [{b.broker_name for b in c.topic_route("TBW102").broker_datas if b.master_addr} for c in clients]


def until(clients: list[SyncAdminClient], want: set[str]) -> float:
    began = time.monotonic()
    while any(seen != want for seen in masters(clients)):
        if time.monotonic() - began > WAIT_LIMIT:
            raise SystemExit(f"routes did not become {sorted(want)} within {WAIT_LIMIT} s")
        time.sleep(0.01)
    return time.monotonic() - began


def summary(values: list[float]) -> dict[str, float]:
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3), "max": round(max(values), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    both, only_b = {"broker-a", "broker-b"}, {"broker-b"}
    kill, stop_gone, cont_back, starts, stops = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "cluster"
        began = time.monotonic()
        state = processes.start(directory, processes.StartOptions(
            register_period_ms=REGISTER_MS, broker_expired_ms=EXPIRE_MS, scan_interval_ms=SCAN_MS))
        starts.append(time.monotonic() - began)
        try:
            clients = [SyncAdminClient([ns.addr], timeout=1.0) for ns in state.namesrvs]
            for _ in range(args.rounds):
                a = state.find_broker("broker-a", 0)[0]
                processes.signal_proc(a, signal.SIGKILL)
                kill.append(until(clients, only_b))
                processes.restart(a)
                until(clients, both)
                stopped = time.monotonic()
                processes.signal_proc(a, signal.SIGSTOP)
                until(clients, only_b)
                stop_gone.append(time.monotonic() - stopped)
                processes.signal_proc(a, signal.SIGCONT)
                cont_back.append(until(clients, both))
        finally:
            began = time.monotonic()
            processes.stop_procs(state.procs)
            stops.append(time.monotonic() - began)
    result = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "settings": {"registerNameServerPeriodMs": REGISTER_MS, "brokerChannelExpiredTimeMs": EXPIRE_MS,
                     "scanNotActiveBrokerIntervalMs": SCAN_MS, "rounds": args.rounds},
        "startSeconds": round(starts[0], 3),
        "stopSeconds": round(stops[0], 3),
        "killToRouteGoneSeconds": summary(kill),
        "stopToRouteGoneSeconds": summary(stop_gone),
        "contToRouteBackSeconds": summary(cont_back),
    }
    print(json.dumps(result, indent=2))
    out = ROOT / "bench" / "results" / "runner.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
