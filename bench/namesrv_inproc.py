#!/usr/bin/env python3
"""Registration cost inside the NameServer process: CPU time, no sockets.

Why: on a shared machine wall-clock figures vary by 2x from minute to
minute, while the CPU time a registration takes in the request handler,
and the longest stretch of it between two yields to the reactor, is what
decides how long route queries wait behind it. This drives the real
processor with the frames brokers send and measures both with
``time.process_time`` (each figure is the median over the brokers, or over
``--rounds`` repeats for the 100,000-topic broker).

Also a phase of ``bench/namesrv_bench.py`` (``--phases inproc``).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from namesrv.config import NamesrvConfig
from namesrv.kvconfig import KVConfig
from namesrv.processor import NameServerProcessor
from remoting import requests as rq
from remoting.bodies import DataVersion, TopicConfig
from remoting.codec import decode_frame, encode
from remoting.command import RemotingCommand


async def _no_persist(path: str, data: bytes) -> None:
    raise OSError("the in-process bench writes nothing")


def _frame(name: str, addr: str, configs: list[TopicConfig], counter: int, **kw: Any) -> RemotingCommand:
    req = rq.register_broker(
        cluster="cluster-0", broker_name=name, broker_addr=addr, broker_id=0,
        topics=configs, data_version=DataVersion(counter, 1_700_000_000_000), **kw,
    )
    return decode_frame(encode(req))  # as the server gets it: a decoded frame


def _sliced(proc: NameServerProcessor, req: RemotingCommand) -> tuple[float, float, int]:
    """(total CPU ms, longest slice CPU ms, slices) of one registration driven as the server does."""
    parsed = proc.registrations._request(req, 1)
    assert not isinstance(parsed, RemotingCommand), parsed.remark
    reg, raw = parsed.reg, parsed.raw
    steps = proc.table.register_raw(reg, raw, conn=1, now=proc.now_ms())
    longest, slices = 0.0, 0
    start = last = time.process_time()
    while True:
        try:
            next(steps)
        except StopIteration as done:
            assert done.value.ok
            break
        now = time.process_time()
        longest, last, slices = max(longest, now - last), now, slices + 1
    end = time.process_time()
    return (end - start) * 1000, max(longest, end - last) * 1000, slices + 1


def measure(topics: int = 10_000, brokers: int = 8, big_topics: int = 100_000, rounds: int = 3) -> dict[str, Any]:
    proc = NameServerProcessor(NamesrvConfig(), KVConfig("/nonexistent/kv.json"), clock=time.monotonic, persist=_no_persist)
    configs = [TopicConfig(f"topic-0-{i:06d}", 8, 8, 6) for i in range(topics)]
    changed = list(configs)
    changed[topics // 2] = TopicConfig(configs[topics // 2].topic_name, 8, 8, 2)
    kinds = {"first": (configs, 1), "unchanged_body": (configs, 1), "new_version_same_table": (configs, 2),
             "new_version_one_topic_changed": (changed, 3)}
    small = [
        [(kind, _frame(f"broker-0-{b}", f"127.0.0.10:{10911 + b * 10}", cs, counter)) for kind, (cs, counter) in kinds.items()]
        for b in range(brokers)
    ]
    big = [TopicConfig(f"big-{i:06d}", 8, 8, 6) for i in range(big_topics)]
    forms = {"compressed_v407": {"compressed": True, "version": 407}, "json": {}}
    large = {
        label: [(step, _frame(f"big-{label}", "127.0.1.1:10911", big, counter, **kw))
                for step, counter in (("first", 1), ("new_version", 2))]
        for label, kw in forms.items()
    }
    # The bench's own objects (TopicConfigs) must not be what the GC walks during the figures.
    del configs, changed, big, kinds
    gc.collect()

    costs: dict[str, list[float]] = {}
    for b, frames in enumerate(small):
        for kind, req in frames:
            start = time.process_time()
            proc.handle(req, b)
            costs.setdefault(kind, []).append((time.process_time() - start) * 1000)
    out: dict[str, Any] = {
        f"register_{topics}_cpu_ms_median": {k: round(statistics.median(v), 2) for k, v in costs.items()}
    }
    for label, frames in large.items():
        rows = []
        for _ in range(rounds):
            for step, req in frames:
                total, longest, slices = _sliced(proc, req)
                rows.append((step, total, longest, slices))
            proc.table.unregister_broker("cluster-0", "127.0.1.1:10911", f"big-{label}")  # the next round starts afresh
        for step in ("first", "new_version"):
            mine = [row for row in rows if row[0] == step]
            out[f"register_{big_topics}_{label}_{step}"] = {
                "cpu_ms_median": round(statistics.median(r[1] for r in mine), 1),
                "longest_slice_cpu_ms_max": round(max(r[2] for r in mine), 2),
                "slices": mine[0][3],
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--brokers", type=int, default=8)
    ap.add_argument("--big-topics", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(json.dumps(measure(args.topics, args.brokers, args.big_topics, args.rounds), indent=2))


if __name__ == "__main__":
    main()
