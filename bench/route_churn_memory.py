#!/usr/bin/env python3
"""Memory kept per unique broker name that came and went: the NameServer's request path, in process.

Drives a NameServerProcessor directly (no sockets, no clock): ``--warmup``
brokers of new names, then ``--brokers`` more, each registering 21 topics
(8 shared, 12 of its own, TBW102), re-registering with one topic more under a
new data version, and leaving by UNREGISTER_BROKER or by its connection
closing. tracemalloc runs from the start; the figure is what the process
holds after the second batch minus what it held after the warm-up, divided
by the number of brokers: the memory each departed name leaves behind once
the bounded caches are full. Prints it with the five lines that grew most,
and writes ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from namesrv.config import NamesrvConfig  # noqa: E402
from namesrv.kvconfig import KVConfig  # noqa: E402
from namesrv.processor import NameServerProcessor  # noqa: E402
from remoting import requests as rq  # noqa: E402
from remoting.bodies import DataVersion, TopicConfig  # noqa: E402
from remoting.codec import FrameDecoder, encode  # noqa: E402
from remoting.command import RemotingCommand  # noqa: E402

SHARED = [f"Shared-{i}" for i in range(8)]


async def _no_persist(path: str, data: bytes) -> None:
    return None


def wire(req: RemotingCommand) -> RemotingCommand:
    """The request as the server decodes it off the wire."""
    decoder = FrameDecoder(1 << 24)
    decoder.push(encode(req))
    decoded = decoder.next()
    assert decoded is not None
    return decoded


def churn(proc: NameServerProcessor, start: int, count: int) -> None:
    for n in range(start, start + count):
        name, addr = f"churn-broker-{n:07d}", f"127.0.{1 + n // 60000 % 250}.{1 + n % 250}:{1024 + n % 60000}"
        topics = [TopicConfig("TBW102", 8, 8, 7)] + [TopicConfig(t, 4, 4, 6) for t in SHARED]
        topics += [TopicConfig(f"churn-{n:07d}-t{i}", 4, 4, 6) for i in range(12)]
        for version, extra in ((1, []), (2, [TopicConfig(f"churn-{n:07d}-x", 2, 2, 6)])):
            req = rq.register_broker(cluster="C", broker_name=name, broker_addr=addr, broker_id=0,
                                     topics=topics + extra, data_version=DataVersion(version, 1))
            proc.handle(wire(req), n)
        if n % 2:
            proc.handle(wire(rq.unregister_broker(cluster="C", broker_name=name, broker_addr=addr, broker_id=0)), n)
        proc.connection_closed(n)
        proc.table.connection_closed(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warmup", type=int, default=6000)
    ap.add_argument("--brokers", type=int, default=6000)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "route-churn-memory.json")
    args = ap.parse_args()
    proc = NameServerProcessor(NamesrvConfig(), KVConfig("/nonexistent/kv.json"), clock=time.monotonic,
                               persist=_no_persist)
    tracemalloc.start(1)
    churn(proc, 0, args.warmup)
    gc.collect()
    before = tracemalloc.take_snapshot()
    churn(proc, args.warmup, args.brokers)
    gc.collect()
    after = tracemalloc.take_snapshot()
    diffs = after.compare_to(before, "lineno")
    per_name = sum(d.size_diff for d in diffs) / args.brokers
    tables = {k: len(v) for k, v in vars(proc.table).items() if isinstance(v, dict)}
    print(f"{per_name:.0f} bytes kept per departed broker name ({args.brokers} after {args.warmup})")
    top = [str(d) for d in diffs[:5]]
    print("\n".join(top))
    print(f"route table sizes at the end: {tables}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join([Path(sys.executable).name, *sys.argv]),
                                    "bytes_per_departed_name": round(per_name, 1), "warmup": args.warmup,
                                    "brokers": args.brokers, "top": top, "tables": tables}, indent=1) + "\n")


if __name__ == "__main__":
    main()
