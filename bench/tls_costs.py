#!/usr/bin/env python3
"""What TLS costs a server besides throughput: CPU per handshake, memory per connection.

* handshakes: in-process, the server's ``TlsSession`` against an ``ssl``
  client over memory BIOs (no sockets, so only OpenSSL's and our work is
  timed, with ``time.thread_time``), TLS 1.3 and 1.2, with the test-mode
  certificate; and the RSS left after them (a session cache that grew would
  show here);
* memory: a real ``mqnamesrv`` on 127.0.0.1, ``--connections`` plaintext
  connections then as many TLS ones, each answering one request; the
  server's RSS growth per connection.

Every loop is bounded by its count. Prints the figures and writes them as
JSON (``--out``, default ``bench/results/tls-costs.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from remoting import requests as rq
from remoting.codec import FrameDecoder, encode
from security.tls_context import client_context, self_signed_context
from server_runtime.tls_session import TlsSession

BOOT = re.compile(rb"address ([\d.]+):(\d+)")


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def handshake_cpu(server_ctx: ssl.SSLContext, version: ssl.TLSVersion | None) -> float:
    """Server CPU seconds of one whole handshake."""
    client_ctx = client_context()
    if version is not None:
        client_ctx.maximum_version = version
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(incoming, outgoing)
    server = TlsSession(server_ctx, 0.0)
    spent = 0.0
    for _ in range(8):
        try:
            client.do_handshake()
        except ssl.SSLWantReadError:
            pass
        data = outgoing.read()
        start = time.thread_time()
        server.receive(data)
        out = server.take_output()
        spent += time.thread_time() - start
        incoming.write(out)
        if server.handshaken and client.version():
            return spent
    raise SystemExit("handshake did not complete")


def handshakes(count: int) -> dict[str, object]:
    server_ctx = self_signed_context()
    out: dict[str, object] = {}
    for name, version in (("tls1.3", None), ("tls1.2", ssl.TLSVersion.TLSv1_2)):
        base = _rss_mib()
        cpu = [handshake_cpu(server_ctx, version) for _ in range(count)]
        cpu.sort()
        out[name] = {
            "handshakes": count,
            "server_cpu_ms_median": 1000 * cpu[len(cpu) // 2],
            "server_cpu_ms_mean": 1000 * sum(cpu) / count,
            "rss_growth_mib": _rss_mib() - base,
        }
        print(f"{name}: server CPU per handshake {out[name]['server_cpu_ms_median']:.2f} ms (median of {count}), "
              f"RSS after them +{out[name]['rss_growth_mib']:.1f} MiB")
    return out


def _call(sock: socket.socket) -> None:
    sock.sendall(encode(rq.cluster_info()))
    decoder = FrameDecoder()
    while True:
        data = sock.recv(65536)
        if not data:
            raise SystemExit("the server closed a connection")
        if decoder.feed(data):
            return


def connection_memory(count: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="tls-costs-") as tmp:
        cfg = Path(tmp) / "namesrv.properties"
        cfg.write_text(f"listenPort=0\nbindAddress=127.0.0.1\nkvConfigPath={tmp}/kv.json\nwarmRestartEnable=false\n")
        proc = subprocess.Popen(
            [sys.executable, "-m", "namesrv.cli", "-c", str(cfg)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT,
        )
        try:
            assert proc.stdout is not None
            seen, deadline = b"", time.monotonic() + 30
            while not BOOT.search(seen):
                if time.monotonic() > deadline:
                    raise SystemExit(f"server did not start: {seen!r}")
                seen += proc.stdout.read1(4096)
            match = BOOT.search(seen)
            assert match is not None
            addr = (match.group(1).decode(), int(match.group(2)))
            server = psutil.Process(proc.pid)
            ctx = client_context()
            for warm in (ctx.wrap_socket(socket.create_connection(addr)), socket.create_connection(addr)):
                _call(warm)  # the test-mode certificate is made; both paths warmed
                warm.close()
            time.sleep(1.5)
            out: dict[str, object] = {"connections": count}
            for kind in ("plaintext", "tls"):
                base = server.memory_info().rss
                socks: list[socket.socket] = []
                try:
                    for _ in range(count):
                        sock = socket.create_connection(addr, timeout=30)
                        if kind == "tls":
                            sock = ctx.wrap_socket(sock)
                        socks.append(sock)
                        _call(sock)
                    time.sleep(1.5)
                    grown = server.memory_info().rss - base
                finally:
                    for sock in socks:
                        sock.close()
                out[kind] = {"rss_growth_mib": grown / 2**20, "kib_per_connection": grown / count / 1024}
                print(f"{kind}: {count} open connections, each answered once: server RSS "
                      f"+{grown / 2**20:.1f} MiB ({grown / count / 1024:.1f} KiB each)")
                time.sleep(2.0)
            return out
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--handshakes", type=int, default=2000)
    ap.add_argument("--connections", type=int, default=500)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "tls-costs.json"))
    args = ap.parse_args()
    if not (1 <= args.handshakes <= 100_000 and 1 <= args.connections <= 5000):
        ap.error("--handshakes 1-100000, --connections 1-5000")
    results: dict[str, object] = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
                   f"{ssl.OPENSSL_VERSION}",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "load_average_before": os.getloadavg()[0],
        "handshakes": handshakes(args.handshakes),
        "memory": connection_memory(args.connections),
        "load_average_after": os.getloadavg()[0],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
