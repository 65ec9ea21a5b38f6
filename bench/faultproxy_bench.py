#!/usr/bin/env python3
"""Fault proxy figures: what it adds to ``mqadmin start``, and to a request that crosses it.

1. Start time: ``mqadmin start``'s default shape (2 NameServers, 2 broker groups) with the fault
   proxy and without it (``--no-fault-proxy``), interleaved A B A B so that a busy machine slows
   both alike; until every NameServer routes TBW102 to every broker, as ``start`` waits.
2. Round trip: a 64-byte request to a loopback echo server, directly and through a path of a real
   ``mqfaultproxy`` with no fault, interleaved per batch.
3. Throughput: 64 MiB pushed through the path to the echo server and read back, against direct.

Everything on 127.0.0.1; every process is stopped. Prints the figures and writes them to
bench/results/faultproxy.json (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mqadmin.localcluster import processes  # noqa: E402
from tests.faultproxy_procs import echo_server, fault_proxy  # noqa: E402


def start_seconds(tmp: Path, label: str, with_proxy: bool) -> float:
    directory = tmp / label
    began = time.monotonic()
    state = processes.start(directory, processes.StartOptions(fault_proxy=with_proxy))
    took = time.monotonic() - began
    processes.stop_cluster(state)
    return took


def round_trips(port: int, count: int) -> list[float]:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        out = []
        for _ in range(count):
            began = time.perf_counter()
            sock.sendall(b"x" * 64)
            got = 0
            while got < 64:
                got += len(sock.recv(64 - got))
            out.append(time.perf_counter() - began)
    return out


def throughput_mib_s(port: int, total: int) -> float:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        block = b"\0" * 65536

        def send() -> None:
            for _ in range(total // len(block)):
                sock.sendall(block)

        sender = threading.Thread(target=send)
        began = time.perf_counter()
        sender.start()
        got = 0
        while got < total:
            got += len(sock.recv(1 << 20))
        sender.join()
        return total / (time.perf_counter() - began) / (1 << 20)


def summary(values: list[float], scale: float = 1.0) -> dict[str, float]:
    return {"min": round(min(values) * scale, 3), "median": round(statistics.median(values) * scale, 3),
            "max": round(max(values) * scale, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="start-time pairs (A B) to run")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "faultproxy.json")
    args = parser.parse_args()
    starts: dict[str, list[float]] = {"withProxy": [], "withoutProxy": []}
    rtt: dict[str, list[float]] = {"direct": [], "proxied": []}
    mib: dict[str, list[float]] = {"direct": [], "proxied": []}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for i in range(args.rounds):
            starts["withoutProxy"].append(start_seconds(tmp, f"plain-{i}", False))
            starts["withProxy"].append(start_seconds(tmp, f"proxy-{i}", True))
        with echo_server() as echo, fault_proxy(tmp / "proxy") as proxy:
            direct = int(echo.addr.rsplit(":", 1)[1])
            path = proxy.client.create_path("bench", "127.0.0.1:0", echo.addr)
            proxied = int(path["listen"].rsplit(":", 1)[1])
            for _ in range(5):
                rtt["direct"] += round_trips(direct, 400)
                rtt["proxied"] += round_trips(proxied, 400)
            for _ in range(args.rounds):
                mib["direct"].append(throughput_mib_s(direct, 64 << 20))
                mib["proxied"].append(throughput_mib_s(proxied, 64 << 20))
    result = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
                    "loadAverage1m": round(os.getloadavg()[0], 2)},
        "startSeconds": {k: summary(v) for k, v in starts.items()},
        "startSecondsEach": {k: [round(x, 3) for x in v] for k, v in starts.items()},
        "roundTripMs": {k: summary(v, 1000.0) for k, v in rtt.items()},
        "throughputMiBPerSecond": {k: summary(v) for k, v in mib.items()},
    }
    print(json.dumps(result, indent=2))
    out = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
