#!/usr/bin/env python3
"""What a send costs when it auto-creates a topic and the broker keeps ``topics.json`` (issue 11, item 10).

One broker stub process with ``storePathRootDir`` set (so every topic change
rewrites ``config/topics.json``, with fsync, as ``mqadmin start`` runs it)
receives SEND_MESSAGE_V2 requests, one at a time on one connection, each to
a topic it does not have yet: every send auto-creates a topic. The figure is
the round-trip time of those sends once the broker holds ``--topics`` of them
(the last ``--window`` sends), next to the same sends to one existing topic
(the floor). Meanwhile a second connection sends to an existing topic every
``--probe-ms`` ms: its worst round trip is how long the event loop stalls.

With ``--namesrv`` a NameServer runs too and the broker registers with it,
as in a cluster: every topic change then also triggers a registration of the
whole topic table.

``--src DIR`` runs the broker from another source tree (e.g. an export of an
older commit, ``git archive COMMIT | tar -x -C DIR``) so two versions can be
compared on the same machine: the client side is always this tree's code.
Everything is bounded (``--topics`` sends, ``--timeout`` seconds) and stays on
127.0.0.1; the broker is stopped on exit, also on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from remoting.codec import FrameDecoder, encode  # noqa: E402
from remoting.codes import RequestCode  # noqa: E402
from remoting.command import RemotingCommand, request  # noqa: E402

BOOT = re.compile(rb"The broker\[[^,]+, ([\d.]+):(\d+)\] boot success")
NAMESRV_BOOT = re.compile(rb"boot success\. serializeType=JSON, address ([\d.]+):(\d+)")
PROPS = "UNIQ_KEY\x017F0000010A2B18B4AAC2476FE7A60000\x02WAIT\x01true\x02TAGS\x01TagA\x02"


class Conn:
    """One blocking connection: send a request, read its answer."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self.sock = socket.create_connection(addr, timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.opaque = 0

    def invoke(self, req: RemotingCommand) -> RemotingCommand:
        self.opaque += 1
        req.opaque = self.opaque
        self.sock.sendall(encode(req))
        while True:
            got = self.decoder.feed(self.sock.recv(65536) or b"")
            if got:
                return got[0]

    def close(self) -> None:
        self.sock.close()


def send(topic: str) -> RemotingCommand:
    return request(
        RequestCode.SEND_MESSAGE_V2,
        {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": str(int(time.time() * 1000)),
         "h": "0", "i": PROPS, "j": "0", "k": "false", "m": "false"},
        b"x" * 128,
    )


def start(src: Path, workdir: Path, module: str, config_text: str, boot: re.Pattern[bytes],
          procs: list[subprocess.Popen[bytes]]) -> tuple[str, int]:
    """Start ``python -m module -c CONFIG`` from ``src``; returns the address its boot line names."""
    config = workdir / f"{module}.properties"
    config.write_text(config_text)
    env = {**os.environ, "PYTHONPATH": str(src)}
    with open(workdir / f"{module}.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, "-c", str(config)], stdout=subprocess.PIPE, stderr=log, env=env, cwd=workdir
        )
    procs.append(proc)
    assert proc.stdout is not None
    deadline = time.monotonic() + 20
    seen = b""
    while time.monotonic() < deadline:
        chunk = proc.stdout.read1(4096)  # type: ignore[attr-defined]
        if not chunk:
            break
        seen += chunk
        match = boot.search(seen)
        if match:
            return match.group(1).decode(), int(match.group(2))
    raise RuntimeError(f"{module} did not boot: {seen!r}")


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in reversed(procs):  # the broker first: it unregisters
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def summary(ms: list[float]) -> dict[str, float]:
    return {"mean": round(statistics.fmean(ms), 3), "p50": round(percentile(ms, 0.5), 3),
            "p99": round(percentile(ms, 0.99), 3), "max": round(max(ms), 3)}


def run(src: Path, topics: int, window: int, probe_ms: float, timeout: float, namesrv: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="topics-bench-") as tmp:
        work = Path(tmp)
        procs: list[subprocess.Popen[bytes]] = []
        try:
            ns = ""
            if namesrv:
                host, port = start(src, work, "namesrv.cli", f"listenPort=0\nbindAddress=127.0.0.1\n"
                                   f"kvConfigPath={work / 'kv.json'}\n", NAMESRV_BOOT, procs)
                ns = f"namesrvAddr={host}:{port}\n"
            addr = start(src, work, "broker_stub.cli", f"listenPort=0\nbrokerIP1=127.0.0.1\nstorePathRootDir={work / 'store'}\n"
                         f"maxAutoCreatedTopics=100000\nmaxMessagesPerQueue=100\n{ns}", BOOT, procs)
            main, probe = Conn(addr), Conn(addr)
            assert main.invoke(send("Existing")).code == 0
            floor = []
            for _ in range(window):
                t = time.perf_counter()
                assert main.invoke(send("Existing")).code == 0
                floor.append((time.perf_counter() - t) * 1000)
            done = threading.Event()
            probe_ms_seen: list[float] = []

            def probing() -> None:
                while not done.is_set():
                    t = time.perf_counter()
                    assert probe.invoke(send("Existing")).code == 0
                    probe_ms_seen.append((time.perf_counter() - t) * 1000)
                    time.sleep(probe_ms / 1000)

            prober = threading.Thread(target=probing, daemon=True)
            prober.start()
            created: list[float] = []
            deadline = time.monotonic() + timeout
            began = time.perf_counter()
            for i in range(topics):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"timed out after {i} topics")
                t = time.perf_counter()
                resp = main.invoke(send(f"AutoTopic{i}"))
                created.append((time.perf_counter() - t) * 1000)
                assert resp.code == 0, resp
            elapsed = time.perf_counter() - began
            done.set()
            prober.join(5)
            main.close()
            probe.close()
        finally:
            stop(procs)
        saved = json.loads((Path(tmp) / "store" / "config" / "topics.json").read_bytes())["topicConfigTable"]
    missing = [f"AutoTopic{i}" for i in range(topics) if f"AutoTopic{i}" not in saved]
    return {
        "src": str(src),
        "namesrv": namesrv,
        "topics": topics,
        "autoCreateSendMs": summary(created[-window:]),
        "autoCreateSendMsFirstWindow": summary(created[:window]),
        "existingTopicSendMs": summary(floor),
        "probeDuringRunMs": summary(probe_ms_seen),
        "seconds": round(elapsed, 2),
        "topicsMissingFromFileAfterStop": len(missing),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT, help="source tree the broker runs from")
    parser.add_argument("--topics", type=int, default=3000)
    parser.add_argument("--window", type=int, default=500, help="the last N sends are the figure")
    parser.add_argument("--probe-ms", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--namesrv", action="store_true", help="run a NameServer and register with it")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    result = run(args.src.resolve(), args.topics, min(args.window, args.topics), args.probe_ms, args.timeout, args.namesrv)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
