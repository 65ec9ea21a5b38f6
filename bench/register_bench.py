#!/usr/bin/env python3
"""A huge broker re-registering new topics while a fresh client asks for routes (issue 20).

One broker registers ``--topics`` topics (compressed, as a Java broker with
``compressedRegister=true`` sends them) ``--rounds`` times, each round with
a new data version and topics the table has not seen (the table grows by
``--topics`` a round, as in the issue's reproduction). Meanwhile a prober
opens a fresh connection every ``--probe-interval`` seconds and asks for the
route of a topic a small broker registered first; every probe's time from
connect to answer is recorded. A registration that holds the event loop
shows up as a slow probe.

The same rounds are first driven through the real processor in this
process (``inproc``): the CPU time of each registration and the longest
stretch of it between two yields to the reactor, which is what a route query
waits behind at worst, and which stays steady on a loaded machine where the
wall-clock probes do not (each probe also records how much CPU the server
used while it waited: a long wait with little server CPU is the OS
scheduler's doing).

Also measured: the registration's own latency, the server's RSS after each
round (memory per topic = RSS growth / topics added), and, with
``--stop-topics``, how long a SIGTERM stop takes while a registration of that
many topics is in flight, and what the registering client got.

The server is a real ``mqnamesrv`` process on 127.0.0.1 pinned to CPU 0;
this script runs on CPU 1. Every loop is bounded by count and time. Prints
the figures and writes them as JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import namesrv_bench  # noqa: E402
from namesrv_bench import CLIENT_CPU, BlockingConn, cpu_seconds, pct, pin, rss_mb  # noqa: E402

from namesrv_inproc import _frame, _no_persist, _sliced  # noqa: E402

from namesrv.config import NamesrvConfig  # noqa: E402
from namesrv.kvconfig import KVConfig  # noqa: E402
from namesrv.processor import NameServerProcessor  # noqa: E402
from remoting import requests as rq  # noqa: E402
from remoting.bodies import BodyError, DataVersion, TopicConfig  # noqa: E402
from remoting.codec import FrameDecoder, encode  # noqa: E402

PROBE_TOPIC = "probe-topic"
#: Longest a probe waits for its answer (a stall longer than this is recorded as this).
PROBE_TIMEOUT = 30.0
#: Longest a registration may take to be answered (a shared, loaded machine is slow).
REGISTER_TIMEOUT = 600.0


def start_server(workdir: Path, props: dict[str, object], nice: int = 0) -> tuple[subprocess.Popen[bytes], str]:
    settings: dict[str, object] = {
        "brokerChannelExpiredTime": 600_000,
        "serverChannelMaxIdleTimeSeconds": 3600,  # the probe broker's connection stays idle for minutes
    }
    settings.update(props)
    return namesrv_bench.start_server(workdir, 64 * 1024 * 1024, props=settings, nice=nice)


def register_frame(name: str, addr: str, topics: list[TopicConfig], counter: int) -> bytes:
    return encode(rq.register_broker(
        cluster="bench-cluster", broker_name=name, broker_addr=addr, broker_id=0, topics=topics,
        data_version=DataVersion(counter, 1_700_000_000_000 + counter), compressed=True,
    ))


def route_probe(addr: str, opaque: int) -> float:
    """Seconds from connect to the route answer on a fresh connection (PROBE_TIMEOUT if none)."""
    host, port = addr.rsplit(":", 1)
    start = time.perf_counter()
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            req = rq.get_route(PROBE_TOPIC)
            req.opaque = opaque
            sock.sendall(encode(req))
            decoder = FrameDecoder(1 << 24)
            while True:
                data = sock.recv(1 << 16)
                if not data:
                    raise ConnectionError("closed")
                got = decoder.feed(data)
                if got:
                    if got[0].code != 0:  # the probe topic lost its route: a failure, counted as the longest wait
                        return PROBE_TIMEOUT
                    return time.perf_counter() - start
    except (OSError, ConnectionError):
        return PROBE_TIMEOUT


class Prober(threading.Thread):
    """A fresh connection's route query every ``interval`` seconds, until stopped (bounded by ``limit`` probes).

    Each probe also records the CPU time the server used while it waited:
    on a loaded machine a long wait with little server CPU is the OS
    scheduler's doing, one with as much CPU as wait is the server's loop.
    """

    def __init__(self, addr: str, pid: int, interval: float, limit: int = 1_000_000) -> None:
        super().__init__(daemon=True)
        self.addr, self.pid, self.interval, self.limit = addr, pid, interval, limit
        self.samples: list[tuple[float, float]] = []  # (start, seconds)
        self.cpu: list[float] = []  # server CPU seconds during each probe
        self.stop = threading.Event()

    def run(self) -> None:
        for n in range(self.limit):
            if self.stop.is_set():
                return
            began = time.perf_counter()
            cpu = cpu_seconds(self.pid)
            took = route_probe(self.addr, n + 1)
            self.cpu.append(cpu_seconds(self.pid) - cpu)
            self.samples.append((began, took))
            self.stop.wait(self.interval)

    def slowest(self) -> tuple[float, float]:
        """(seconds, server CPU seconds meanwhile) of the slowest probe."""
        if not self.samples:
            return 0.0, 0.0
        i = max(range(len(self.samples)), key=lambda j: self.samples[j][1])
        return self.samples[i][1], self.cpu[i]

    def between(self, start: float, end: float) -> list[float]:
        """Probes that were waiting at some point in [start, end]."""
        return [took for began, took in self.samples if began <= end and began + took >= start]


def rounds_phase(args: argparse.Namespace, workdir: Path) -> dict[str, object]:
    workdir.mkdir(parents=True)
    props: dict[str, object] = {"maxTopics": args.max_topics} if args.max_topics else {}
    if args.no_snapshot:
        props["warmRestartEnable"] = "false"
    proc, addr = start_server(workdir, props, args.nice)
    try:
        small = BlockingConn(addr)
        took, code = small.call(register_frame("probe-broker", "127.0.0.1:10911", [TopicConfig(PROBE_TOPIC, 4, 4, 6), TopicConfig(PROBE_TOPIC + "-2", 4, 4, 6)], 1))
        if code != 0:
            raise SystemExit(f"probe broker registration failed: code {code}")
        print(f"building {args.rounds} bodies of {args.topics:,} topics ...", flush=True)
        frames = [
            register_frame("big-broker", "127.0.0.1:10921",
                           [TopicConfig(f"r{r}-topic-{i:07d}", 8, 8, 6) for i in range(args.topics)], r + 1)
            for r in range(args.rounds)
        ]
        prober = Prober(addr, proc.pid, args.probe_interval)
        prober.start()
        time.sleep(1.0)
        idle = prober.between(0, time.perf_counter())
        rss_before = rss_mb(proc.pid)
        rows = []
        conn = BlockingConn(addr)
        conn.sock.settimeout(REGISTER_TIMEOUT)
        for r, frame in enumerate(frames):
            start = time.perf_counter()
            cpu = cpu_seconds(proc.pid)
            took, code = conn.call(frame)
            end = time.perf_counter()
            cpu = cpu_seconds(proc.pid) - cpu
            time.sleep(0.3)  # the probes that began during the registration finish
            during = prober.between(start, end)
            rss = rss_mb(proc.pid)
            row = {
                "round": r + 1, "frame_mb": round(len(frame) / 1e6, 2), "code": code,
                "register_ms": round(took * 1000, 1), "server_cpu_ms": round(cpu * 1000), "probes": len(during),
                "probe_max_ms": round(max(during, default=0) * 1000, 1),
                "probe_p99_ms": round(pct(during, 99) * 1000, 1), "rss_mb": round(rss, 1),
            }
            rows.append(row)
            print(f"round {r + 1}: {row['frame_mb']} MB, answer code {code} in {row['register_ms']} ms "
                  f"({row['server_cpu_ms']} ms of server CPU); "
                  f"{row['probes']} route probes meanwhile, max {row['probe_max_ms']} ms, p99 {row['probe_p99_ms']} ms; "
                  f"RSS {row['rss_mb']} MB", flush=True)
        prober.stop.set()
        prober.join(PROBE_TIMEOUT + 1)
        applied = [row for row in rows if row["code"] == 0]
        per_topic = (rows[len(applied) - 1]["rss_mb"] - rss_before) * 1024 * 1024 / (len(applied) * args.topics) if applied else 0.0
        all_probes = [took for _, took in prober.samples]
        slowest, slowest_cpu = prober.slowest()
        return {
            "topics_per_round": args.topics, "rounds": rows, "rss_before_mb": round(rss_before, 1),
            "bytes_per_topic": round(per_topic), "idle_probe_max_ms": round(max(idle, default=0) * 1000, 1),
            "probe_count": len(all_probes), "probe_max_ms": round(slowest * 1000, 1),
            "probe_max_server_cpu_ms": round(slowest_cpu * 1000, 1),
            "probes_over_50ms": sum(1 for t in all_probes if t > 0.05),
            # ... of which the server was running for at least half of the wait (its loop, not the OS scheduler)
            "probes_over_50ms_server_busy": sum(
                1 for (_, t), c in zip(prober.samples, prober.cpu) if t > 0.05 and c >= t / 2),
        }
    finally:
        proc.kill()
        proc.wait()


def inproc_phase(args: argparse.Namespace) -> dict[str, object]:
    """The same rounds driven through the real processor in this process: CPU per registration and the
    longest stretch between two yields (steady on a loaded machine, where wall-clock figures are not)."""
    config = NamesrvConfig()
    config.maxTopics = args.max_topics or config.maxTopics
    proc = NameServerProcessor(config, KVConfig("/nonexistent/kv.json"), clock=time.monotonic, persist=_no_persist)
    rows = []
    for r in range(args.rounds):
        req = _frame("big-broker", "127.0.0.1:10921", [TopicConfig(f"r{r}-topic-{i:07d}", 8, 8, 6)
                                                       for i in range(args.topics)], r + 1, compressed=True)
        try:
            total, longest, slices = _sliced(proc, req)
        except BodyError as exc:  # maxTopics
            rows.append({"round": r + 1, "refused": str(exc)})
            print(f"in-process round {r + 1}: refused: {exc}", flush=True)
            continue
        rows.append({"round": r + 1, "cpu_ms": round(total), "longest_slice_cpu_ms": round(longest, 1), "slices": slices})
        print(f"in-process round {r + 1}: {total:.0f} ms of CPU in {slices} slices, the longest {longest:.1f} ms", flush=True)
    return {"rounds": rows}


def _call(addr: str, frame: bytes) -> tuple[float, int]:
    conn = BlockingConn(addr)
    conn.sock.settimeout(REGISTER_TIMEOUT)
    try:
        return conn.call(frame)
    finally:
        conn.sock.close()


def _server_with_table(workdir: Path, base: list[bytes], nice: int) -> tuple[subprocess.Popen[bytes], str]:
    """A server with the ``base`` registrations applied (and their route snapshot written)."""
    workdir.mkdir(parents=True)
    proc, addr = start_server(workdir, {}, nice)
    for frame in base:  # a table this large already: the final snapshot has it all to write
        took, code = _call(addr, frame)
        if code != 0:
            proc.kill()
            proc.wait()
            raise SystemExit(f"base registration failed: code {code}")
    if base:
        time.sleep(3.0)
    return proc, addr


def stop_phase(args: argparse.Namespace, workdir: Path) -> dict[str, object]:
    """SIGTERM while a registration of ``--stop-topics`` is in flight: time to exit, and the answer.

    The SIGTERM points are shares of the server CPU a whole registration of
    that size costs (measured first, on a server of its own): on a loaded
    machine a registration takes 5-20 times its CPU time in wall-clock time,
    so fixed delays would all land in its first steps.
    """
    out = []
    frame = register_frame("stop-broker", "127.0.0.1:10931",
                           [TopicConfig(f"s-topic-{i:07d}", 8, 8, 6) for i in range(args.stop_topics)], 1)
    base = [
        register_frame(f"base-broker-{b}", f"127.0.0.1:{11000 + b}",
                       [TopicConfig(f"b{b}-topic-{i:07d}", 8, 8, 6) for i in range(min(200_000, args.stop_base_topics - b * 200_000))], 1)
        for b in range((args.stop_base_topics + 199_999) // 200_000)
    ]
    proc, addr = _server_with_table(workdir / "calibrate", base, args.nice)
    try:
        cpu = cpu_seconds(proc.pid)
        took, code = _call(addr, frame)
        whole_cpu = cpu_seconds(proc.pid) - cpu
    finally:
        proc.kill()
        proc.wait()
    print(f"a whole {args.stop_topics:,}-topic registration: {whole_cpu:.2f} s of server CPU, {took:.1f} s (code {code})",
          flush=True)
    for attempt, share in enumerate(a for a in args.stop_at for _ in range(args.stop_runs)):
        proc, addr = _server_with_table(workdir / f"stop{attempt}", base, args.nice)
        try:
            conn = BlockingConn(addr)
            conn.sock.settimeout(REGISTER_TIMEOUT)
            answer: dict[str, object] = {}

            def call() -> None:
                try:
                    answer["seconds"], answer["code"] = conn.call(frame)
                except (OSError, ConnectionError) as exc:
                    answer["error"] = str(exc)

            caller = threading.Thread(target=call, daemon=True)
            cpu = cpu_seconds(proc.pid)
            began = time.perf_counter()
            caller.start()
            while (cpu_seconds(proc.pid) - cpu < share * whole_cpu and caller.is_alive()
                   and time.perf_counter() - began < REGISTER_TIMEOUT):
                time.sleep(0.002)
            sent = time.perf_counter()
            answered_before = not caller.is_alive()
            cpu = cpu_seconds(proc.pid)
            proc.send_signal(signal.SIGTERM)
            stop_cpu = 0.0  # the server's CPU from the SIGTERM to its last sample before it exited
            while proc.poll() is None and time.perf_counter() - sent < 30:
                stop_cpu = max(stop_cpu, cpu_seconds(proc.pid) - cpu)
                time.sleep(0.002)
            proc.wait(1)
            exited = time.perf_counter() - sent
            caller.join(5)
            row = {"share": share, "after_s": round(sent - began, 2), "answered_before_sigterm": answered_before,
                   "exit_s": round(exited, 3), "logged_stop_s": _logged_stop(workdir / f"stop{attempt}"),
                   "stop_cpu_s": round(stop_cpu, 2),
                   "exit_status": proc.returncode, **answer}
            out.append(row)
            print(f"stop {attempt + 1}: SIGTERM at {share:.0%} of the server CPU of a {args.stop_topics:,}-topic "
                  f"registration ({row['after_s']} s after sending it; {args.stop_base_topics:,} topics in the table "
                  f"already): exited in {exited:.2f} s (status {proc.returncode}; {row['logged_stop_s']} s from its "
                  f"'received SIGTERM' to its 'name server stopped' log line; {stop_cpu:.2f} s of server CPU); the broker got {answer}"
                  + (" (before the SIGTERM)" if answered_before else ""), flush=True)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return {"stop_topics": args.stop_topics, "whole_registration_cpu_s": round(whole_cpu, 2), "stop_at": args.stop_at,
            "table_topics": args.stop_base_topics, "runs": out}


def _logged_stop(workdir: Path) -> float | None:
    """Seconds between the server's "received SIGTERM" and "name server stopped" log lines (ms stamps):
    the stop itself, without the interpreter's exit that ``exit_s`` also counts."""
    stamps = {}
    for line in (workdir / "namesrv.log").read_text(errors="replace").splitlines():
        for key in ("received SIGTERM", "name server stopped"):
            if key in line:
                stamps[key] = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    if len(stamps) < 2:
        return None
    return round((stamps["name server stopped"] - stamps["received SIGTERM"]).total_seconds(), 3)


def _shares(text: str) -> list[float]:
    try:
        shares = [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None
    if not all(0 <= x <= 1 for x in shares):
        raise argparse.ArgumentTypeError(f"shares are between 0 and 1: {text!r}")
    return shares


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--probe-interval", type=float, default=0.01)
    ap.add_argument("--max-topics", type=int, default=0, help="the server's maxTopics (0: its default)")
    ap.add_argument("--no-snapshot", action="store_true", help="warmRestartEnable=false (no route snapshot writes)")
    ap.add_argument("--nice", type=int, default=0,
                    help="run the server at this nice value (negative: shield it from other load on a shared machine)")
    ap.add_argument("--stop-topics", type=int, default=150_000, help="0: skip the SIGTERM phase")
    ap.add_argument("--stop-runs", type=int, default=3)
    ap.add_argument("--stop-base-topics", type=int, default=0,
                    help="topics registered (by other brokers) before the stop's registration is sent")
    ap.add_argument("--stop-at", type=_shares, default=[0.02, 0.5, 0.98],
                    help="SIGTERM points: shares of the server CPU a whole registration takes, comma-separated "
                         "(--stop-runs stops at each)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "register.json")
    args = ap.parse_args()
    pin(CLIENT_CPU)
    results: dict[str, object] = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "command": " ".join(sys.argv),
    }
    with tempfile.TemporaryDirectory(prefix="register-bench-") as tmp:
        if args.rounds:
            results["inproc"] = inproc_phase(args)
            results["rounds"] = rounds_phase(args, Path(tmp) / "rounds")
        if args.stop_topics:
            results["stop"] = stop_phase(args, Path(tmp))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    if not args.rounds:
        print(f"wrote {args.out}")
        return
    r = results["rounds"]
    print(f"route probes: {r['probe_count']} in all, {r['probes_over_50ms']} over 50 ms "  # type: ignore[index]
          f"({r['probes_over_50ms_server_busy']} with the server running for half the wait or more), "  # type: ignore[index]
          f"slowest {r['probe_max_ms']} ms "  # type: ignore[index]
          f"(the server used {r['probe_max_server_cpu_ms']} ms of CPU meanwhile); "  # type: ignore[index]
          f"about {r['bytes_per_topic']} bytes of RSS per topic")  # type: ignore[index]
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
