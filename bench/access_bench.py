#!/usr/bin/env python3
"""What access control costs a route query, in CPU time inside the NameServer, no sockets.

Why: on a shared machine the end-to-end benchmark's throughput moves by 2x
from minute to minute, while the CPU time the server spends per request
is steadier, and it is what bounds throughput when the server is the
bottleneck. This drives the real processor (a table of ``--topics``
topics on ``--brokers`` brokers) with the frames clients send, decoding
each one and answering it as the reactor does, through:

- ``direct``: the processor alone (the path before the access gate existed);
- ``direct-signed``: the same, with signed queries (clients with Java's
  AclClientRPCHook against a server that ignores signatures: a signed
  header is about 60 bytes longer to decode);
- ``gate-off``: the access gate with no accounts (the default);
- ``gate-unsigned``: accounts on, unsigned route queries (aclUnsignedClasses=route-read);
- ``gate-signed``: accounts on, every query signed by a plain account, on
  a connection that has already sent one verified signature of that
  account (route-read being open unsigned, its signature adds no right, so
  the gate stops checking it on that connection);
- ``gate-signed-strict``: the same with ``aclUnsignedClasses`` empty (route
  queries must be signed), in the steady state where each (topic, account)
  was verified once before (clients re-ask the same routes every 30 s), so
  each query costs a lookup in the table of verified requests;
- ``gate-signed-cold``: strict too, every query seen for the first time, so
  every signature is computed and compared.

Each path is timed ``--rounds`` times, interleaved, over the same random
sequence of topics (after one untimed pass, except for the cold path),
with ``time.process_time``. The figures are µs of CPU per query: the
minimum over the rounds (the least disturbed by other processes on a
shared machine, so the steadiest estimate of the intrinsic cost) and the
median, each with its ratio to ``direct`` and to ``direct-signed``.

usage: bench/access_bench.py [--topics 10000] [--queries 20000] [--rounds 15] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.namesrv_inproc import _frame, _no_persist
from namesrv.config import NamesrvConfig
from namesrv.kvconfig import KVConfig
from namesrv.processor import NameServerProcessor
from namesrv.request_classes import REQUEST_CLASSES
from remoting import acl
from security.access import AccessSettings, settings_from
from security.acl_accounts import parse_accounts
from remoting.bodies import TopicConfig
from remoting.codec import FrameDecoder, encode
from remoting.codes import RequestCode
from remoting.command import request
from security.gate import Gate
from server_runtime.ratelog import RateLimitedLog

CLIENT = acl.Credentials("benchClient", "benchClientSecret")
ACCOUNTS = f"accounts:\n  - accessKey: {CLIENT.access_key}\n    secretKey: {CLIENT.secret_key}\n"
PEER = "127.0.0.1:40000"


def build_processor(topics: int, brokers: int) -> NameServerProcessor:
    proc = NameServerProcessor(NamesrvConfig(), KVConfig("/nonexistent/kv.json"), clock=time.monotonic,
                               persist=_no_persist)
    configs = [TopicConfig(f"topic-{i:06d}", 8, 8, 6) for i in range(topics)]
    for b in range(brokers):
        resp = proc.registrations.register_broker(_frame(f"broker-{b}", f"127.0.0.1:{10911 + b}", configs, 1), b + 1)
        assert resp.code == 0, resp.remark
    return proc


def frames(topics: int, queries: int, signed: bool, *, distinct: bool = False) -> bytes:
    """Route queries for random topics (``distinct``: topics 0, 1, 2, ... once each)."""
    rng = random.Random(7)
    out = []
    for i in range(queries):
        topic = i if distinct else rng.randrange(topics)
        cmd = request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": f"topic-{topic:06d}"}, opaque=1)
        out.append(encode(acl.sign(cmd, CLIENT) if signed else cmd))
    return b"".join(out)


def time_path(handle: Callable[..., bytes | None], data: bytes, queries: int) -> float:
    """CPU µs per query: decode each frame and answer it, as the reactor does."""
    decoder = FrameDecoder(1 << 30)
    decoder.push(data)
    start = time.process_time()
    for _ in range(queries):
        req = decoder.next()
        answer = handle(req, 1)
        assert answer is not None and answer[8:20] != b"", "no answer"
    return (time.process_time() - start) / queries * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--brokers", type=int, default=8)
    ap.add_argument("--queries", type=int, default=20_000, help="per round")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "access.json"))
    args = ap.parse_args()
    if not (1 <= args.queries <= 2_000_000 and 1 <= args.rounds <= 100):
        ap.error("--queries 1..2000000, --rounds 1..100")

    proc = build_processor(args.topics, args.brokers)
    warn = RateLimitedLog(__import__("logging").getLogger("bench"))
    off = settings_from(accounts=None, unsigned="route-read", admin_addresses="127.*.*.*", allow_remote_admin=False)
    on: AccessSettings = settings_from(accounts=parse_accounts(ACCOUNTS, "bench"), unsigned="route-read",
                                       admin_addresses="127.*.*.*", allow_remote_admin=False)
    strict: AccessSettings = settings_from(accounts=on.accounts, unsigned="", admin_addresses="127.*.*.*",
                                           allow_remote_admin=False)
    paths: dict[str, tuple[Callable[..., bytes | None], bytes]] = {}
    plain, signed = frames(args.topics, args.queries, False), frames(args.topics, args.queries, True)
    def gate(settings: AccessSettings) -> Callable[..., bytes | None]:
        return Gate(proc, REQUEST_CLASSES, settings, peer_of=lambda c: PEER, warn=warn).handle

    paths["direct"] = (proc.handle, plain)
    paths["direct-signed"] = (proc.handle, signed)
    paths["gate-off"] = (gate(off), plain)
    paths["gate-unsigned"] = (gate(on), plain)
    paths["gate-signed"] = (gate(on), signed)
    paths["gate-signed-strict"] = (gate(strict), signed)
    for handle, data in paths.values():
        time_path(handle, data, args.queries)  # warm: caches filled, signatures seen once
    # every query distinct (one topic each, fresh gate per round): the cost of a first verification
    cold_queries = min(args.queries, args.topics)
    cold = frames(args.topics, cold_queries, True, distinct=True)

    runs: dict[str, list[float]] = {name: [] for name in [*paths, "gate-signed-cold"]}
    for _ in range(args.rounds):
        for name, (handle, data) in paths.items():
            runs[name].append(time_path(handle, data, args.queries))
        runs["gate-signed-cold"].append(time_path(gate(strict), cold, cold_queries))
    base, base_signed = min(runs["direct"]), min(runs["direct-signed"])
    results = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "load_average": os.getloadavg()[0],
        "topics": args.topics, "queries": args.queries,
        "us_per_query": runs,
        "min_vs_direct": {name: min(v) / base for name, v in runs.items()},
        "min_vs_direct_signed": {name: min(v) / base_signed for name, v in runs.items()},
        "median_vs_direct": {name: statistics.median(v) / statistics.median(runs["direct"]) for name, v in runs.items()},
    }
    print(f"{'µs CPU per query':18s} {'min':>6s} {'median':>7s}  {'min vs direct':>13s}  {'vs direct-signed':>16s}")
    for name, values in runs.items():
        low = min(values)
        print(f"{name:18s} {low:6.2f} {statistics.median(values):7.2f}  x{low / base:12.3f}  x{low / base_signed:15.3f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
