#!/usr/bin/env python3
"""Peak memory of one broker stub fed more messages than its store may hold (issue 11, item 4).

Two floods, each against a fresh ``mqbroker-stub`` with its default
settings (``maxStoreBytes`` 128 MiB, ``maxMessagesPerQueue`` 10,000):

* ``benchmark``: 8 KiB messages round-robin over the 1,024 queues of the
  ``BenchmarkTest`` topic every broker has (the issue measured 893 MB);
* ``large``: 1 MiB messages to one queue (the issue measured 1.04 GB for 2,000).

Sends are pipelined (``--window`` in flight on one connection). Afterwards
the script reads the broker's peak RSS (``VmHWM``) and current RSS from
/proc and the min/max offsets of a few queues, to show the oldest messages
were dropped. ``--src DIR`` runs the broker from another source tree (an
export of an older commit) for a before/after comparison. Bounded in sends
(``--megabytes`` per flood) and time (``--timeout``); 127.0.0.1 only; the
broker is stopped on exit, also on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from remoting.codec import FrameDecoder, encode  # noqa: E402
from remoting.codes import RequestCode  # noqa: E402
from remoting.command import RemotingCommand, request  # noqa: E402

BOOT = re.compile(rb"The broker\[[^,]+, ([\d.]+):(\d+)\] boot success")
PROPS = "UNIQ_KEY\x017F0000010A2B18B4AAC2476FE7A60000\x02WAIT\x01true\x02TAGS\x01TagA\x02"


def send(topic: str, queue_id: int, body: bytes) -> RemotingCommand:
    return request(
        RequestCode.SEND_MESSAGE_V2,
        {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
         "g": str(int(time.time() * 1000)), "h": "0", "i": PROPS, "j": "0", "k": "false", "m": "false"},
        body,
    )


def status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def flood(addr: tuple[str, int], topic: str, queues: int, size: int, count: int, window: int, deadline: float) -> int:
    """Send ``count`` messages of ``size`` bytes, ``window`` in flight; returns how many were answered SUCCESS."""
    sock = socket.create_connection(addr, timeout=30)
    decoder = FrameDecoder()
    body = b"m" * size
    ok = sent = answered = 0
    try:
        while answered < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {answered} answers")
            while sent < count and sent - answered < window:
                req = send(topic, sent % queues, body)
                req.opaque = sent + 1
                sock.sendall(encode(req))
                sent += 1
            for resp in decoder.feed(sock.recv(1 << 20) or b""):
                answered += 1
                ok += resp.code == 0
    finally:
        sock.close()
    return ok


def offsets(addr: tuple[str, int], topic: str, queue_ids: list[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    sock = socket.create_connection(addr, timeout=10)
    decoder = FrameDecoder()
    try:
        for qid in queue_ids:
            pair = []
            for code in (RequestCode.GET_MIN_OFFSET, RequestCode.GET_MAX_OFFSET):
                sock.sendall(encode(request(code, {"topic": topic, "queueId": qid})))
                got: list[RemotingCommand] = []
                while not got:
                    got = decoder.feed(sock.recv(65536) or b"")
                pair.append(int(got[0].ext("offset") or "-1"))
            out[qid] = pair
    finally:
        sock.close()
    return out


def run_case(src: Path, name: str, megabytes: int, window: int, timeout: float) -> dict[str, object]:
    topic, queues, size = ("BenchmarkTest", 1024, 8 * 1024) if name == "benchmark" else ("LargeTopic", 1, 1024 * 1024)
    count = megabytes * 1024 * 1024 // size
    with tempfile.TemporaryDirectory(prefix="memory-bench-") as tmp:
        work = Path(tmp)
        (work / "broker.properties").write_text("listenPort=0\nbrokerIP1=127.0.0.1\n")
        with open(work / "broker.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "broker_stub.cli", "-c", str(work / "broker.properties")],
                stdout=subprocess.PIPE, stderr=log, env={**os.environ, "PYTHONPATH": str(src)}, cwd=work,
            )
        try:
            assert proc.stdout is not None
            seen = b""
            boot_deadline = time.monotonic() + 20
            match = None
            while match is None and time.monotonic() < boot_deadline:
                chunk = proc.stdout.read1(4096)  # type: ignore[attr-defined]
                if not chunk:
                    break
                seen += chunk
                match = BOOT.search(seen)
            if match is None:
                raise RuntimeError(f"broker did not boot: {seen!r}")
            addr = (match.group(1).decode(), int(match.group(2)))
            rss_boot = status_kb(proc.pid, "VmRSS")
            began = time.monotonic()
            ok = flood(addr, topic, queues, size, count, window, began + timeout)
            elapsed = time.monotonic() - began
            result = {
                "case": name, "src": str(src), "messages": count, "messageBytes": size, "succeeded": ok,
                "sentMiB": round(count * size / 2**20), "seconds": round(elapsed, 1),
                "rssBootMiB": round(rss_boot / 1024, 1),
                "peakRssMiB": round(status_kb(proc.pid, "VmHWM") / 1024, 1),
                "rssAfterMiB": round(status_kb(proc.pid, "VmRSS") / 1024, 1),
                "offsets": offsets(addr, topic, [0, queues // 2, queues - 1]),
            }
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT, help="source tree the broker runs from")
    parser.add_argument("--cases", default="benchmark,large")
    parser.add_argument("--megabytes", type=int, default=400, help="MiB sent per flood")
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results = [run_case(args.src.resolve(), c, args.megabytes, args.window, args.timeout) for c in args.cases.split(",")]
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
