#!/usr/bin/env python3
"""Broker stub benchmark: send throughput of one ``mqbroker-stub`` (issue 3).

One broker stub process, pinned to CPU 0, receives SEND_MESSAGE_V2 requests
with 1 KB bodies exactly as a Java or C++ producer sends them (all header
fields, a UNIQ_KEY/TAGS/WAIT properties string) for one topic with 8
queues. The C load generator (``bench/broker_loadgen.c``, compiled by this
script; a Python one saturates its own core first) is pinned to CPU 1 and
keeps one send in flight per connection, over 1 and then 16 connections (a
synchronous producer each), then 8 in flight on each of 16 connections (the
way a multi-threaded Java producer shares its one connection to a broker).
Each phase is bounded in time (``--duration``) and in count
(``--max-sends``). Afterwards the broker's max offsets must add up to the
number of sends answered SUCCESS, so every counted send was really stored.
With ``--store`` the broker keeps messages on disk (``storePathRootDir`` in
the temporary directory): each answer then waits until the writer thread
has written its message, which is what this measures against memory only.

The broker's own CPU time is measured too: on a shared machine it may get
less than its core, and sends per second of broker CPU is then the figure
that says what one core does.

Prints the figures and writes them to bench/results/broker.json (``--out``).
Everything stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from remoting.codec import FrameDecoder, encode
from remoting.codes import RequestCode
from remoting.command import RemotingCommand, request

SERVER_CPU = 0
CLIENT_CPU = 1
BOOT = re.compile(rb"The broker\[[^,]+, ([\d.]+):(\d+)\] boot success")
TOPIC = "BenchTopic"
QUEUES = 8


def pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > cpu:
        os.sched_setaffinity(0, {cpu})


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load_average() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def start_broker(workdir: Path, max_per_queue: int, store_dir: Path | None) -> tuple[subprocess.Popen[bytes], str]:
    cfg = workdir / "broker.properties"
    store = f"storePathRootDir={store_dir}\n" if store_dir is not None else ""
    cfg.write_text(f"listenPort=0\nbrokerIP1=127.0.0.1\nnamesrvAddr=\nmaxMessagesPerQueue={max_per_queue}\n{store}")
    with open(workdir / "broker.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "broker_stub.cli", "-c", str(cfg)],
            stdout=subprocess.PIPE, stderr=log, cwd=ROOT, preexec_fn=lambda: pin(SERVER_CPU),
        )
    assert proc.stdout is not None
    deadline = time.monotonic() + 20
    seen = b""
    while time.monotonic() < deadline:
        seen += os.read(proc.stdout.fileno(), 4096)
        m = BOOT.search(seen)
        if m:
            return proc, f"{m.group(1).decode()}:{m.group(2).decode()}"
    proc.kill()
    raise SystemExit(f"broker did not start: {seen!r}")


def call(addr: str, req: RemotingCommand) -> RemotingCommand:
    """One request on a fresh blocking connection (setup and checks only), 10 s timeout."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(encode(req))
        decoder = FrameDecoder()
        while True:
            data = sock.recv(1 << 20)
            if not data:
                raise ConnectionError("broker closed the connection")
            got = decoder.feed(data)
            if got:
                return got[0]


def send_frames(count: int, body_size: int) -> bytes:
    """SEND_MESSAGE_V2 frames as a Java producer builds them, one per queue and UNIQ_KEY."""
    body = (b"0123456789abcdef" * (body_size // 16 + 1))[:body_size]
    frames = []
    for i in range(count):
        props = f"KEYS\x01key-{i}\x02UNIQ_KEY\x017F00000100002A9F0000000000{i:06X}\x02WAIT\x01true\x02TAGS\x01TagA\x02"
        ext = {"a": "BenchProducerGroup", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(i % QUEUES), "f": "0",
               "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false", "n": "broker-a"}
        frames.append(encode(request(RequestCode.SEND_MESSAGE_V2, ext, body, opaque=i + 1)))
    return b"".join(frames)


def build_loadgen(workdir: Path) -> Path:
    exe = workdir / "broker_loadgen"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O2", "-o", str(exe), str(ROOT / "bench" / "broker_loadgen.c")], check=True)
    return exe


def stored_total(addr: str) -> int:
    total = 0
    for q in range(QUEUES):
        resp = call(addr, request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": q}))
        total += int(resp.ext("offset") or 0)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per phase (upper bound)")
    ap.add_argument("--max-sends", type=int, default=1_000_000, help="sends per phase (upper bound)")
    ap.add_argument("--phases", default="1x1,16x1,16x8", help="CONNECTIONSxIN_FLIGHT, comma-separated")
    ap.add_argument("--body", type=int, default=1024, help="message body bytes")
    ap.add_argument("--max-per-queue", type=int, default=5000, help="broker's in-memory bound per queue")
    ap.add_argument("--store", action="store_true",
                    help="keep messages on disk (storePathRootDir in a fresh temporary directory): every answer then "
                         "waits until its message is written")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "broker.json"))
    args = ap.parse_args()
    if not 0 < args.duration <= 600 or args.max_sends < 1:
        raise SystemExit("--duration must be in (0, 600] and --max-sends >= 1")

    pin(CLIENT_CPU)
    results: dict[str, object] = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "shape": f"SEND_MESSAGE_V2, {args.body} B bodies, topic with {QUEUES} queues"
                 + (", messages on disk (storePathRootDir)" if args.store else ", messages in memory only"),
        "load_average_before": load_average(),
    }
    with tempfile.TemporaryDirectory(prefix="broker-bench-") as tmp:
        work = Path(tmp)
        loadgen = build_loadgen(work)
        frames_file = work / "sends.bin"
        frames_file.write_bytes(send_frames(64, args.body))
        proc, addr = start_broker(work, args.max_per_queue, work / "store" if args.store else None)
        try:
            resp = call(addr, request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6,
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"}))
            if resp.code != 0:
                raise SystemExit(f"topic creation failed: {resp}")
            phases = []
            for phase in args.phases.split(","):
                n, depth = (int(x) for x in phase.lower().split("x"))
                before = stored_total(addr)
                cpu0, t0 = cpu_seconds(proc.pid), time.perf_counter()
                host, port = addr.rsplit(":", 1)
                out = subprocess.run(
                    [str(loadgen), host, port, str(n), str(args.duration), str(depth), str(frames_file), str(args.max_sends)],
                    capture_output=True, text=True, timeout=args.duration + 60, check=False, preexec_fn=lambda: pin(CLIENT_CPU),
                )
                if out.returncode != 0:
                    raise SystemExit(f"load generator failed: {out.stderr.strip()}")
                res = json.loads(out.stdout)
                res["server_cpu_pct"] = 100 * (cpu_seconds(proc.pid) - cpu0) / (time.perf_counter() - t0)
                # what one whole core would do: the sends per second of CPU the broker actually got
                # (on a shared machine it gets less than its core; this is its capacity per core)
                res["sends_per_server_cpu_second"] = res["per_second"] / max(res["server_cpu_pct"] / 100, 1e-9)
                res["load_average"] = load_average()
                time.sleep(0.2)  # answers of the last requests may still be on their way
                res["stored"] = stored_total(addr) - before
                res["ok_sends"] = res["requests"] - res["errors"]
                if res["stored"] < res["ok_sends"]:
                    raise SystemExit(f"only {res['stored']} of {res['ok_sends']} acknowledged sends were stored")
                res["server_rss_mb"] = rss_mb(proc.pid)
                phases.append(res)
                print(
                    f"{n:3d} conns x {depth} in flight: {res['per_second']:9.0f} sends/s  p50 {res['p50_ms']:.3f} ms  p99 {res['p99_ms']:.3f} ms"
                    f"  max {res['max_ms']:.1f} ms  errors {res['errors']}  stored {res['stored']}"
                    f"  server CPU {res['server_cpu_pct']:.0f}% ({res['sends_per_server_cpu_second']:.0f} sends per CPU-second)"
                    f"  client CPU {res['client_cpu_pct']:.0f}%  RSS {res['server_rss_mb']:.0f} MB  load {res['load_average']}"
                )
            results["sends"] = phases
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    results["load_average_after"] = load_average()
    print(f"load average before {results['load_average_before']}, after {results['load_average_after']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
