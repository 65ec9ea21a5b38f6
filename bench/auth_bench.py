#!/usr/bin/env python3
"""Route-query throughput (and registration latency) in interleaved rounds against live servers.

Why a benchmark of its own: issue 19 asks that route queries keep their
throughput within 10 % of the server before access control once accounts
are configured. On this shared 2-core machine two runs of the same server
a minute apart differ by more than that, so one run per mode (as
``namesrv_bench.py --auth`` does) cannot show 10 %. Here every server is
started once and loaded with the same 32 brokers and 40,000 topics, and
the modes take turns in short rounds (the order rotating each round), so
drift on the machine lands on every mode alike; the figures are each
mode's per-round throughput and server CPU per query, and each round's
ratio to its reference.

Modes (a mode is a server and the frames its clients send):

- ``today``: the server of ``--today-root`` (another checkout to compare
  with, e.g. ``git archive e6a84e5^1`` from before access control, or
  ``git archive main`` before a branch), unsigned route queries;
- ``today-signed``: the same server, queries signed by a client with
  Java's AclClientRPCHook (a server without access control ignores the two
  extra fields, but still decodes them);
- ``off``: this checkout, no accounts (the default), unsigned queries;
- ``unsigned``: this checkout with accounts (``aclEnable``), unsigned
  queries (route-read is in the default ``aclUnsignedClasses``);
- ``signed``: the same server, every query signed and verified (each
  signature seen once before, in the warm-up pass, as a client re-asking
  its routes every 30 s is).

The reference of ``off`` and ``unsigned`` is ``today`` (``off`` without
``--today-root``); of ``signed``, ``today-signed`` (``ignored``, this
checkout without accounts and signed queries, without ``--today-root``).

With ``--registrations``, each mode's round also times that many passes of
its server's 32 brokers re-registering, once with the very body they sent
last (the 30 s heartbeat of an unchanged broker) and once with a new data
version and one topic changed (what a topic update costs); the figures are
the medians of those latencies.

Each server runs as a real ``mqnamesrv`` process pinned to CPU 0, the C
load generator (16 connections x 16 in flight, random topics) on CPU 1.
Everything stays on 127.0.0.1; every load is bounded by ``--duration``.

usage: bench/auth_bench.py [--rounds 5] [--duration 4] [--today-root DIR] [--modes today,off]
                           [--registrations 0] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.namesrv_bench import (
    BROKER_KEYS,
    CLIENT_CPU,
    CLIENT_KEYS,
    BlockingConn,
    BrokerBody,
    build_loadgen,
    cpu_seconds,
    pin,
    query_load,
    start_server,
    topic_configs,
    write_results,
)
from remoting import acl
from remoting.codec import encode
from remoting.codes import RequestCode
from remoting.command import request

CLUSTERS, BROKERS, TOPICS = 4, 8, 10_000
CONNECTIONS, DEPTH = 16, 16
#: Frames sent before reading their answers in the warm-up pass.
WARM_BATCH = 512


def route_frames(topics: list[str], keys: acl.Credentials | None) -> bytes:
    def frame(topic: str) -> bytes:
        cmd = request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, opaque=1)
        return encode(acl.sign(cmd, keys) if keys is not None else cmd)

    return b"".join(frame(t) for t in topics)


class Brokers:
    """The 32 brokers of the NameServer benchmark on every server, their connections kept open (a
    closed broker connection unregisters the broker), re-registered between measurements before
    the 120 s expiry would drop them."""

    PERIOD = 30.0

    def __init__(self) -> None:
        self.registrations: list[tuple[BlockingConn, BrokerBody]] = []
        self.by_server: dict[str, list[tuple[BlockingConn, BrokerBody]]] = {}
        self.last = 0.0

    def register(self, addr: str, keys: acl.Credentials | None) -> list[str]:
        """All brokers on ``addr``; the topic names."""
        topics: list[str] = []
        self.refresh()  # the servers registered before (a loaded machine takes minutes: none may expire)
        for c in range(CLUSTERS):
            configs = topic_configs(c, TOPICS)
            topics += [tc.topic_name for tc in configs]
            for b in range(BROKERS):
                conn = BlockingConn(addr)
                body = BrokerBody(c, b, configs, keys)
                self.registrations.append((conn, body))
                self.by_server.setdefault(addr, []).append((conn, body))
                self._send(conn, body.current)
                self.refresh()
        self.last = time.monotonic()
        return topics

    def refresh(self) -> None:
        """Re-register every broker if the last round was ``PERIOD`` ago (never while measuring)."""
        if time.monotonic() - self.last >= self.PERIOD:
            for conn, body in self.registrations:
                self._send(conn, body.current)
            self.last = time.monotonic()

    def timed(self, addr: str, change: bool) -> list[float]:
        """Every broker of ``addr`` re-registers (``change``: a new data version, one topic changed); ms each."""
        took = []
        for conn, body in self.by_server[addr]:
            seconds, code = conn.call(body.frame(change=True) if change else body.current)
            if code != 0:
                raise SystemExit(f"re-registration refused: code {code}")
            took.append(1000 * seconds)
        return took

    @staticmethod
    def _send(conn: BlockingConn, frame: bytes) -> None:
        _, code = conn.call(frame)
        if code != 0:
            raise SystemExit(f"registration refused: code {code}")

    def close(self) -> None:
        for conn, _ in self.registrations:
            conn.sock.close()


def warm(addr: str, frames: bytes, count: int) -> None:
    """Every frame once, in order, each answered SUCCESS (a signed one is verified here, once)."""
    conn = BlockingConn(addr)
    view = memoryview(frames)
    try:
        pos = 0
        left = count
        while left:
            batch = min(WARM_BATCH, left)
            end = pos
            for _ in range(batch):
                end += 4 + int.from_bytes(view[end : end + 4], "big")
            conn.sock.sendall(view[pos:end])
            answers: list[int] = []
            while len(answers) < batch:
                data = conn.sock.recv(1 << 20)
                if not data:
                    raise SystemExit(f"{addr} closed the connection during the warm-up")
                answers += [r.code for r in conn.decoder.feed(data)]
            if any(answers):
                raise SystemExit(f"{addr} refused a warm-up query: codes {sorted(set(answers))}, {answers.count(0)} of {batch} answered at frame {count - left}")
            pos, left = end, left - batch
    finally:
        conn.sock.close()


def measure(loadgen: Path, frames_file: Path, addr: str, pid: int, duration: float) -> dict[str, float]:
    cpu0 = cpu_seconds(pid)
    res = query_load(loadgen, frames_file, addr, CONNECTIONS, duration, depth=DEPTH)
    cpu = cpu_seconds(pid) - cpu0
    if res.get("errors"):
        raise SystemExit(f"{res['errors']} errors from {addr}")
    queries = max(1.0, float(res["queries"]))
    return {"qps": float(res["qps"]), "cpu_us_per_query": 1e6 * cpu / queries}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=4.0, help="seconds of load per mode per round")
    ap.add_argument("--today-root", type=Path, help="another checkout to compare with (modes today, today-signed)")
    ap.add_argument("--registrations", type=int, default=0,
                    help="passes of the brokers re-registering timed per mode and round (0: none)")
    ap.add_argument("--modes", help="comma-separated subset of the modes (each needs its reference)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "auth.json"))
    args = ap.parse_args()
    if not (1 <= args.rounds <= 30 and 0.5 <= args.duration <= 60 and 0 <= args.registrations <= 20):
        ap.error("--rounds 1..30, --duration 0.5..60, --registrations 0..20")
    if args.today_root is not None and not (args.today_root / "namesrv").is_dir():
        ap.error(f"--today-root {args.today_root}: no namesrv/ there")

    pin(CLIENT_CPU)
    results: dict[str, object] = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "shape": f"{CLUSTERS} clusters x {BROKERS} brokers, {TOPICS} topics per cluster; "
                 f"{CONNECTIONS} connections x {DEPTH} in flight",
        "load_average_before": os.getloadavg()[0],
    }
    with tempfile.TemporaryDirectory(prefix="auth-bench-") as tmp:
        work = Path(tmp)
        loadgen = build_loadgen(work)
        servers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
        brokers = Brokers()
        try:
            wanted = set(args.modes.split(",")) if args.modes else None
            for name, auth, root in (("today", False, args.today_root), ("off", False, ROOT), ("on", True, ROOT)):
                if root is None or (name == "on" and wanted is not None and not wanted & {"unsigned", "signed"}):
                    continue  # (a server with accounts only for the modes that use it)
                (work / name).mkdir()
                servers[name] = start_server(work / name, frame_max=64 * 1024 * 1024, auth=auth, server_root=root.resolve())
            topics: list[str] = []
            for name, (_, addr) in servers.items():
                topics = brokers.register(addr, BROKER_KEYS if name == "on" else None)
            plain, signed = work / "plain.bin", work / "signed.bin"
            plain.write_bytes(route_frames(topics, None))
            signed.write_bytes(route_frames(topics, CLIENT_KEYS))
            today = "today" if "today" in servers else "off"
            modes = {  # mode -> (server, frames, reference mode)
                "today": ("today", plain, "today"),
                "today-signed": ("today", signed, "today-signed"),
                "off": ("off", plain, today),
                "ignored": ("off", signed, "ignored"),
                "unsigned": ("on", plain, today),
                "signed": ("on", signed, "today-signed" if "today" in servers else "ignored"),
            }
            modes = {m: v for m, v in modes.items() if v[0] in servers and (m != "ignored" or "today" not in servers)}
            if wanted is not None:
                modes = {m: v for m, v in modes.items() if m in wanted or any(m == w[2] for k, w in modes.items() if k in wanted)}
            for mode, (server, frames, _) in modes.items():
                warm(servers[server][1], frames.read_bytes(), len(topics))
                measure(loadgen, frames, servers[server][1], servers[server][0].pid, 1.0)  # untimed
                brokers.refresh()
            rounds: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
            order = list(modes)
            for r in range(args.rounds):
                turn = order[r % len(order):] + order[: r % len(order)]
                for mode in turn:
                    brokers.refresh()
                    proc, addr = servers[modes[mode][0]]
                    rounds[mode].append(measure(loadgen, modes[mode][1], addr, proc.pid, args.duration))
                    if args.registrations:
                        for key, change in (("reg_same_ms", False), ("reg_changed_ms", True)):
                            took = [t for _ in range(args.registrations) for t in brokers.timed(addr, change)]
                            rounds[mode][-1][key] = statistics.median(took)
                print(f"round {r + 1}: " + "  ".join(f"{m} {rounds[m][-1]['qps']:,.0f} q/s" for m in order), flush=True)
        finally:
            brokers.close()
            for proc, _ in servers.values():
                proc.send_signal(signal.SIGTERM)
            for proc, _ in servers.values():
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    summary: dict[str, dict[str, object]] = {}
    print(f"\n{'mode':14s} {'median q/s':>11s} {'CPU µs/q':>9s}  reference     q/s ratio per round (median)")
    for mode, (_, _, ref) in modes.items():
        qps = [x["qps"] for x in rounds[mode]]
        cpu = [x["cpu_us_per_query"] for x in rounds[mode]]
        ratios = [a["qps"] / b["qps"] for a, b in zip(rounds[mode], rounds[ref])]
        cpu_ratios = [a["cpu_us_per_query"] / b["cpu_us_per_query"] for a, b in zip(rounds[mode], rounds[ref])]
        summary[mode] = {
            "reference": ref, "qps": qps, "cpu_us_per_query": cpu,
            "qps_ratio": ratios, "qps_ratio_median": statistics.median(ratios),
            "cpu_ratio": cpu_ratios, "cpu_ratio_median": statistics.median(cpu_ratios),
        }
        shown = " ".join(f"{x:.2f}" for x in ratios)
        print(f"{mode:14s} {statistics.median(qps):11,.0f} {statistics.median(cpu):9.1f}  {ref:13s} {shown} "
              f"({statistics.median(ratios):.3f})")
        if args.registrations:
            for key in ("reg_same_ms", "reg_changed_ms"):
                per_round = [x[key] for x in rounds[mode]]
                summary[mode][key] = per_round
                print(f"{'':14s} {key}: " + " ".join(f"{x:.2f}" for x in per_round)
                      + f" (median {statistics.median(per_round):.2f})")
    results.update(rounds=args.rounds, duration_s=args.duration, modes=summary,
                   today_root=str(args.today_root) if args.today_root else None,
                   load_average_after=os.getloadavg()[0], finished=time.strftime("%Y-%m-%d %H:%M:%S"))
    write_results(Path(args.out), results)


if __name__ == "__main__":
    main()
