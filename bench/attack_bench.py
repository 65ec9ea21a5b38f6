#!/usr/bin/env python3
"""Memory attacks on a real ``mqnamesrv``: peak RSS and service to others while attacked.

Two attacks from issue 11, each against its own fresh NameServer on 127.0.0.1
(default config unless ``--set key=value``), each bounded in time:

* **slow frames**: ``--connections`` connections each declare a
  ``--frame-mib`` MiB frame and send it ``--chunk-kib`` KiB per connection
  every ``--interval`` s for at most ``--duration`` s.
* **pipelining, no reading**: a broker with ``--topics`` topics is
  registered (on a connection held open), then one client sends
  ``--pipeline`` GET_ALL_TOPIC_LIST requests and reads nothing for
  ``--hold`` s, then closes; RSS is sampled until ``--settle`` s later.

The server's RSS is sampled with psutil every 20 ms. During each attack a
probe opens a fresh connection every 0.5 s and times one request (a probe
that takes over 1 s counts as a failure).

Prints the figures and writes bench/results/attack_slow_frames.json and
bench/results/attack_pipelining.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import socket
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from remoting import requests as rq
from remoting.bodies import DataVersion, TopicConfig
from remoting.codec import FrameDecoder, encode
from tests.procs import NamesrvProcess

RESULTS = ROOT / "bench" / "results"
MIB = 1024 * 1024


class RssSampler:
    """Peak (and latest) RSS of one process, sampled in a thread."""

    def __init__(self, pid: int, period: float = 0.02) -> None:
        self.proc = psutil.Process(pid)
        self.period = period
        self.peak = 0
        self.latest = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.latest = self.proc.memory_info().rss
            except psutil.Error:
                return
            self.peak = max(self.peak, self.latest)
            time.sleep(self.period)

    def reset_peak(self) -> None:
        time.sleep(self.period * 2)  # a sample taken after the reset, not the one before it
        self.peak = self.latest

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)

    def __enter__(self) -> RssSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Prober:
    """A fresh connection and one request every 0.5 s; latencies of those answered."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self.addr = addr
        self.latencies: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            start = time.monotonic()
            try:
                with socket.create_connection(self.addr, timeout=1.0) as sock:
                    sock.settimeout(1.0)
                    call(sock, rq.get_route("NoSuchTopic"))
                self.latencies.append(time.monotonic() - start)
            except OSError:
                self.failures += 1

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(3)

    def summary(self) -> dict[str, object]:
        lat = sorted(self.latencies)
        return {
            "probes_answered": len(lat),
            "probes_failed": self.failures,
            "probe_max_ms": round(lat[-1] * 1000, 1) if lat else None,
            "probe_median_ms": round(lat[len(lat) // 2] * 1000, 1) if lat else None,
        }


def call(sock: socket.socket, req: object) -> object:
    sock.sendall(encode(req))  # type: ignore[arg-type]
    decoder = FrameDecoder(64 * MIB)
    while True:
        data = sock.recv(1 << 20)
        if not data:
            raise OSError("closed by server")
        got = decoder.feed(data)
        if got:
            return got[0]


@contextmanager
def namesrv(workdir: Path, settings: dict[str, str]) -> Iterator[tuple[NamesrvProcess, tuple[str, int]]]:
    proc = NamesrvProcess(workdir, **settings)
    try:
        proc.start()
        host, port = proc.addr.rsplit(":", 1)
        yield proc, (host, int(port))
    finally:
        proc.kill()


def slow_frames(args: argparse.Namespace, workdir: Path, settings: dict[str, str]) -> dict[str, object]:
    frame_len = args.frame_mib * MIB
    header = b'{"code":105,"extFields":{"topic":"T"}}'
    prefix = struct.pack(">II", frame_len - 4, len(header)) + header
    chunk = b"\0" * (args.chunk_kib * 1024)
    with namesrv(workdir, settings) as (proc, addr), RssSampler(proc.proc.pid) as rss:  # type: ignore[union-attr]
        time.sleep(0.3)
        base = rss.latest
        socks: list[socket.socket] = []
        sent: list[int] = []
        answered = 0
        began = time.monotonic()
        with Prober(addr) as prober:
            for _ in range(args.connections):
                sock = socket.create_connection(addr, timeout=5)
                sock.setblocking(False)
                socks.append(sock)
                sent.append(0)
            round_no = 0
            while time.monotonic() - began < args.duration and any(n < frame_len for n in sent):
                for i, sock in enumerate(socks):
                    if sent[i] >= frame_len:
                        continue
                    data = prefix if sent[i] == 0 else chunk[: frame_len - sent[i]]
                    try:
                        sent[i] += sock.send(data)
                    except (BlockingIOError, InterruptedError):
                        pass  # the server stopped reading this one: its frame waits for room
                    except OSError:
                        sent[i] = frame_len
                for sock in socks:
                    try:
                        while sock.recv(1 << 16):
                            answered += 1
                    except (BlockingIOError, InterruptedError, OSError):
                        pass
                round_no += 1
                time.sleep(args.interval)
            elapsed = time.monotonic() - began
            peak = rss.peak
        for sock in socks:
            sock.close()
        alive = proc.proc is not None and proc.proc.poll() is None
    return {
        "attack": "slow_frames",
        "connections": args.connections,
        "frame_mib": args.frame_mib,
        "seconds": round(elapsed, 1),
        "sent_mib": round(sum(sent) / MIB, 1),
        "connections_answered": answered,
        "rss_base_mib": round(base / MIB, 1),
        "rss_peak_mib": round(peak / MIB, 1),
        "server_alive": alive,
        **prober.summary(),
    }


def pipelining(args: argparse.Namespace, workdir: Path, settings: dict[str, str]) -> dict[str, object]:
    with namesrv(workdir, settings) as (proc, addr), RssSampler(proc.proc.pid) as rss:  # type: ignore[union-attr]
        broker = socket.create_connection(addr, timeout=30)  # held open: closing it drops the topics
        topics = [TopicConfig(f"BenchTopic-{i:07d}", 4, 4, 6) for i in range(args.topics)]
        call(broker, rq.register_broker(
            cluster="BenchCluster", broker_name="bench-a", broker_addr="127.0.0.1:1", broker_id=0,
            topics=topics, data_version=DataVersion(1, 1), compressed=True,
        ))
        answer = call(broker, rq.all_topics())
        answer_bytes = len(answer.body)  # type: ignore[attr-defined]
        time.sleep(1.5)
        base = rss.latest
        rss.reset_peak()
        with Prober(addr) as prober:
            attacker = socket.create_connection(addr, timeout=5)
            attacker.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            attacker.sendall(b"".join(encode(rq.all_topics()) for _ in range(args.pipeline)))
            time.sleep(args.hold)
            peak = rss.peak
            attacker.close()
            time.sleep(args.settle)
        after = rss.latest
        broker.close()
        alive = proc.proc is not None and proc.proc.poll() is None
    return {
        "attack": "pipelining_no_read",
        "topics": args.topics,
        "answer_bytes": answer_bytes,
        "requests": args.pipeline,
        "unanswered_bytes_asked": answer_bytes * args.pipeline,
        "rss_base_mib": round(base / MIB, 1),
        "rss_peak_mib": round(peak / MIB, 1),
        "rss_after_close_mib": round(after / MIB, 1),
        "server_alive": alive,
        **prober.summary(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--frame-mib", type=int, default=16, help="declared frame size; 16 = the whole frame limit")
    ap.add_argument("--chunk-kib", type=int, default=64)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--duration", type=float, default=20.0, help="bound of the slow-frame attack, s")
    ap.add_argument("--topics", type=int, default=100000)
    ap.add_argument("--pipeline", type=int, default=300)
    ap.add_argument("--hold", type=float, default=5.0)
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a NameServer config key")
    ap.add_argument("--only", choices=["slow", "pipelining"])
    args = ap.parse_args()
    if args.frame_mib * MIB > 16 * MIB:
        ap.error("--frame-mib must be at most 16 (the default frameMaxLength)")
    settings = dict(item.split("=", 1) for item in args.set)
    machine = {"cpus": psutil.cpu_count(), "python": platform.python_version(), "settings": settings}
    RESULTS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, attack in (("slow", slow_frames), ("pipelining", pipelining)):
            if args.only and args.only != name:
                continue
            result = attack(args, Path(tmp) / name, settings)
            result["machine"] = machine
            out = RESULTS / f"attack_{'slow_frames' if name == 'slow' else 'pipelining'}.json"
            out.write_text(json.dumps(result, indent=2) + "\n")
            print(json.dumps(result))


if __name__ == "__main__":
    main()
