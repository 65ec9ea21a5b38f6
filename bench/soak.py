#!/usr/bin/env python3
"""Soak a real ``mqnamesrv``: unique brokers coming and going, topic churn, connection storms.

Issue 20 saw RSS go 38.8 -> 68.7 MB in a 10-minute soak of 37,336 unique
brokers, still rising at the end, and the log grow 11.8 MB. This runs the
same kind of load against one NameServer process on 127.0.0.1, bounded in
time (``--duration``) and in counts, and samples the server every
``--sample`` seconds: RSS, open file descriptors, live brokers, topics and
the bytes of its (rotating) log on disk.

The load, all at once:

* ``--slots`` broker lifecycles in parallel, each a broker of a name never
  used before: it connects, registers (shared topics plus topics of its
  own), re-registers a few times (an unchanged body, or a changed topic set
  under a new data version), then leaves by UNREGISTER_BROKER, by closing
  its connection, or by falling silent until the NameServer expires it and
  closes the connection itself;
* topic churn: DELETE_TOPIC_IN_NAMESRV of topics of live brokers, and KV
  puts and deletes of ever new keys;
* a storm every ``--storm-every`` seconds: ``--storm-size`` connections at
  once, a third of them asking one route, a third closing at once, a third
  leaving half a frame behind;
* route queries on persistent connections (shared, per-broker and unknown
  topics) and cluster-info queries.

Prints one line per sample and a summary of the second half (RSS first,
last, min, max and the least-squares slope in MB per 10 minutes), and
writes everything to ``--out`` (JSON).

``--trace`` runs the server under tracemalloc and writes, every
``--trace-every`` seconds, a snapshot plus the count of objects of each
type the garbage collector tracks into the work directory, then prints what
grew between the first snapshot after warm-up and the last: the debug mode
used to find where the memory went.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from remoting import requests as rq  # noqa: E402
from remoting.bodies import ClusterInfo, DataVersion, TopicConfig, parse_topic_list  # noqa: E402
from remoting.codec import encode  # noqa: E402
from remoting.codes import ResponseCode  # noqa: E402
from remoting.transport import RemotingClient, RemotingError, connect  # noqa: E402
from tests.procs import BOOT_LINE  # noqa: E402

RESULTS = ROOT / "bench" / "results"
MB = 1024 * 1024
SHARED_TOPICS = [f"SoakShared-{i}" for i in range(8)]
CLUSTERS = [f"SoakCluster-{i}" for i in range(4)]
HEARTBEAT_TIMEOUT_MS = 8000  # the silent leavers are expired after this (longer: a loaded machine stretches the lifecycles)
#: Wrapper that runs the NameServer with tracemalloc and dumps snapshots and gc type counts.
TRACE_WRAPPER = """
import collections, gc, json, os, sys, threading, time, tracemalloc
from namesrv.cli import entry  # imported before tracing starts: imports under tracemalloc take minutes
tracemalloc.start(6)
out, every = sys.argv[1], float(sys.argv[2])
def dump():
    n = 0
    while True:
        time.sleep(every)
        gc.collect()
        types = collections.Counter(type(o).__name__ for o in gc.get_objects())
        with open(os.path.join(out, f"types-{n:03d}.json"), "w") as fh:
            json.dump({"t": time.monotonic(), "objects": sum(types.values()), "types": types.most_common(40)}, fh)
        tracemalloc.take_snapshot().dump(os.path.join(out, f"trace-{n:03d}.bin"))
        n += 1
threading.Thread(target=dump, daemon=True).start()
sys.argv = ["mqnamesrv", "-c", sys.argv[3]]
entry()
"""


class Counters:
    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def add(self, key: str, n: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + n


class Soak:
    def __init__(self, args: argparse.Namespace, addr: str) -> None:
        self.args = args
        self.addr = addr
        self.count = Counters()
        self.rng = random.Random(args.seed)
        self.seq = 0  # broker names used
        self.topic_seq = 0  # topic names made up during re-registrations
        self.live_topics: list[str] = []  # topics of brokers alive now (sampled for queries and deletes)
        self.deadline = 0.0

    def next_name(self) -> int:
        self.seq += 1
        return self.seq

    def next_topic(self) -> int:
        self.topic_seq += 1
        return self.topic_seq

    def running(self) -> bool:
        return trio.current_time() < self.deadline

    # ------------------------------------------------------------------
    # brokers

    async def broker_slot(self) -> None:
        while self.running() and self.seq < self.args.max_brokers:
            try:
                await self.one_broker(self.next_name())
            except (RemotingError, OSError) as exc:
                self.count.add("broker_errors")
                if self.count.values["broker_errors"] <= 5:
                    print(f"  broker error: {exc}", flush=True)
                await trio.sleep(0.2)

    async def one_broker(self, n: int) -> None:
        rng = self.rng
        name = f"soak-broker-{n:07d}"
        addr = f"127.0.{1 + n // 60000 % 250}.{1 + n % 250}:{1024 + n % 60000}"
        cluster = CLUSTERS[n % len(CLUSTERS)]
        own = [f"soak-{n:07d}-t{i}" for i in range(self.args.topics_per_broker)]
        topics = [TopicConfig("TBW102", 8, 8, 7)] + [TopicConfig(t, 4, 4, 6) for t in SHARED_TOPICS + own]
        version = DataVersion(1, int(time.time() * 1000))

        def registration() -> Any:
            return rq.register_broker(cluster=cluster, broker_name=name, broker_addr=addr, broker_id=0,
                                      topics=topics, data_version=version, heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS)

        async with connect(self.addr, connect_timeout=10) as client:
            await self.expect_ok(client, registration())
            self.count.add("brokers_registered")
            self.live_topics.extend(own[:2])
            for _ in range(rng.randint(1, 3)):
                await trio.sleep(rng.uniform(0.2, 1.0))
                if rng.random() < 0.5:  # topic churn: a few topics replaced, a new data version
                    keep = [tc for tc in topics if rng.random() < 0.8 or tc.topic_name in SHARED_TOPICS]
                    fresh = [TopicConfig(f"soak-{n:07d}-x{self.next_topic()}", 2, 2, 6) for _ in range(3)]
                    topics = keep + fresh
                    version = DataVersion(version.counter + 1, int(time.time() * 1000))
                    self.count.add("reregistrations_changed")
                else:
                    self.count.add("reregistrations_unchanged")
                await self.expect_ok(client, registration())
            for t in own[:2]:
                try:
                    self.live_topics.remove(t)
                except ValueError:
                    pass
            how = rng.random()
            if how < 0.4:
                await self.expect_ok(client, rq.unregister_broker(cluster=cluster, broker_name=name,
                                                                  broker_addr=addr, broker_id=0))
                self.count.add("left_unregistered")
            elif how < 0.8:
                self.count.add("left_closed")
            else:  # silent: the NameServer expires it and closes the connection
                with trio.move_on_after(HEARTBEAT_TIMEOUT_MS / 1000.0 + 10.0):
                    while not client.closed:
                        await trio.sleep(0.25)
                self.count.add("left_expired" if client.closed else "left_expiry_not_seen")

    async def retrying(self, task: Any, what: str) -> None:
        """Run ``task`` until the deadline, on a new connection after each error (a slow server is data)."""
        while self.running():
            try:
                await task()
            except (RemotingError, OSError) as exc:
                self.count.add(f"{what}_errors")
                if self.count.values[f"{what}_errors"] <= 3:
                    print(f"  {what} error: {exc}", flush=True)
                await trio.sleep(0.5)

    async def expect_ok(self, client: RemotingClient, req: Any) -> None:
        resp = await client.invoke(req, 10.0)
        if resp.code != ResponseCode.SUCCESS:
            self.count.add(f"refused_{resp.code}")

    # ------------------------------------------------------------------
    # topic and KV churn, queries, storms

    async def churn(self) -> None:
        async with connect(self.addr) as client:
            i = 0
            while self.running() and i < 10_000_000:
                i += 1
                if self.live_topics and i % 2:
                    topic = self.rng.choice(self.live_topics)
                    await self.expect_ok(client, rq.delete_topic(topic))
                    self.count.add("topics_deleted")
                if i % 10 == 0:
                    key = f"key-{i}"
                    await self.expect_ok(client, rq.put_kv("SoakNamespace", key, "v" * 100))
                    await self.expect_ok(client, rq.delete_kv("SoakNamespace", key))
                    self.count.add("kv_put_deleted")
                await trio.sleep(0.1)

    async def queries(self) -> None:
        async with connect(self.addr) as client:
            i = 0
            while self.running() and i < 100_000_000:
                i += 1
                pick = self.rng.random()
                if pick < 0.4:
                    topic = self.rng.choice(SHARED_TOPICS)
                elif pick < 0.8 and self.live_topics:
                    topic = self.rng.choice(self.live_topics)
                else:
                    topic = f"no-such-topic-{self.rng.randrange(1_000_000)}"
                resp = await client.invoke(rq.get_route(topic), 10.0)
                self.count.add("route_queries")
                self.count.add("route_found" if resp.code == ResponseCode.SUCCESS else "route_missing")
                if i % 200 == 0:
                    await client.invoke(rq.cluster_info(), 10.0)
                    self.count.add("cluster_info_queries")
                await trio.sleep(self.args.query_pause)

    async def storms(self) -> None:
        host, port = self.addr.rsplit(":", 1)
        query = encode(rq.get_route(SHARED_TOPICS[0]))
        while self.running():
            await trio.sleep(min(self.args.storm_every, max(0.0, self.deadline - trio.current_time())))
            if not self.running():
                return
            await trio.to_thread.run_sync(storm, host, int(port), self.args.storm_size, query)
            self.count.add("storms")
            self.count.add("storm_connections", self.args.storm_size)

    # ------------------------------------------------------------------
    # sampling

    async def sample(self, proc: psutil.Process, logdir: Path) -> dict[str, Any]:
        rss = proc.memory_info().rss
        async with connect(self.addr) as client:
            resp = await client.invoke(rq.cluster_info(), 10.0)
            info = ClusterInfo.decode(resp.body)
            topics = await client.invoke(rq.all_topics(), 10.0)
        return {
            "t": round(trio.current_time() - self.started, 1),
            "rss_mb": round(rss / MB, 2),
            "fds": proc.num_fds(),
            "brokers": len(info.broker_addr_table),
            "topics": len(parse_topic_list(topics.body)[0]) if topics.code == ResponseCode.SUCCESS else -1,
            "log_bytes": sum(p.stat().st_size for p in [*logdir.glob("namesrv.log*"), logdir / "stderr.txt"]),
            "brokers_started": self.seq,
        }

    async def run(self, proc: psutil.Process, logdir: Path) -> list[dict[str, Any]]:
        self.started = trio.current_time()
        self.deadline = self.started + self.args.duration
        samples: list[dict[str, Any]] = []
        async with trio.open_nursery() as nursery:
            for _ in range(self.args.slots):
                nursery.start_soon(self.broker_slot)
            nursery.start_soon(self.retrying, self.churn, "churn")
            for _ in range(self.args.query_connections):
                nursery.start_soon(self.retrying, self.queries, "query")
            nursery.start_soon(self.storms)
            while self.running():
                await trio.sleep(min(self.args.sample, max(0.0, self.deadline - trio.current_time())))
                try:
                    s = await self.sample(proc, logdir)
                except (RemotingError, OSError) as exc:
                    print(f"  sample failed: {exc}", flush=True)
                    continue
                samples.append(s)
                print(f"t={s['t']:7.1f}s rss={s['rss_mb']:6.1f} MB fds={s['fds']:4d} brokers={s['brokers']:3d} "
                      f"topics={s['topics']:5d} log={s['log_bytes'] / MB:5.1f} MB started={s['brokers_started']}",
                      flush=True)
        # after the load: what is left once every broker is gone
        await trio.sleep(HEARTBEAT_TIMEOUT_MS / 1000.0 + 3.0)
        final = await self.sample(proc, logdir)
        final["after_load"] = True
        samples.append(final)
        return samples


def storm(host: str, port: int, size: int, query: bytes) -> None:
    """``size`` connections at once: a third query and read, a third close at once, a third leave half a frame."""
    socks = []
    for i in range(size):
        s = socket.socket()
        s.settimeout(10)
        try:
            s.connect((host, port))
        except OSError:
            s.close()
            continue
        if i % 3 == 0:
            s.sendall(query)
        elif i % 3 == 2:
            s.sendall(query[: len(query) // 2])
        socks.append((i, s))
    for i, s in socks:
        try:
            if i % 3 == 0:
                head = s.recv(4)
                if len(head) == 4:
                    s.recv(struct.unpack(">I", head)[0])
        except OSError:
            pass
        s.close()


def second_half(samples: list[dict[str, Any]]) -> dict[str, float]:
    during = [s for s in samples if not s.get("after_load")]
    half = [s for s in during if s["t"] >= during[-1]["t"] / 2]
    xs = [s["t"] / 60.0 for s in half]
    ys = [s["rss_mb"] for s in half]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mean_x) ** 2 for x in xs) or 1.0
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / var
    return {
        "first_mb": ys[0], "last_mb": ys[-1], "min_mb": min(ys), "max_mb": max(ys),
        "slope_mb_per_10min": round(slope * 10, 2), "samples": len(ys),
    }


def start_server(work: Path, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    conf = work / "namesrv.properties"
    conf.write_text("\n".join([
        "listenPort=0", "bindAddress=127.0.0.1", f"kvConfigPath={work / 'kvConfig.json'}",
        "scanNotActiveBrokerInterval=1000", f"logFile={work / 'namesrv.log'}",
        f"logFileMaxSize={args.log_max_size}", f"logFileMaxIndex={args.log_max_index}", "",
    ]))
    if args.trace:
        cmd = [sys.executable, "-c", TRACE_WRAPPER, str(work), str(args.trace_every), str(conf)]
    else:
        cmd = [sys.executable, "-m", "namesrv.cli", "-c", str(conf)]
    with open(work / "stderr.txt", "wb") as err:  # the log goes to logFile; this keeps what is printed outside it
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, cwd=work)


def wait_boot(proc: subprocess.Popen[bytes]) -> str:
    assert proc.stdout is not None
    seen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
        match = BOOT_LINE.search(seen)
        if match:
            return f"{match.group(1).decode()}:{match.group(2).decode()}"
    raise SystemExit(f"namesrv did not boot: {seen!r}")


def trace_report(work: Path) -> dict[str, Any]:
    """What grew between the second snapshot (after warm-up) and the last."""
    import tracemalloc

    traces = sorted(work.glob("trace-*.bin"))
    types = sorted(work.glob("types-*.json"))
    if len(traces) < 3:
        return {}
    first, last = tracemalloc.Snapshot.load(str(traces[1])), tracemalloc.Snapshot.load(str(traces[-1]))
    grown = [
        {"where": str(d.traceback), "size_diff_kb": round(d.size_diff / 1024, 1), "count_diff": d.count_diff}
        for d in last.compare_to(first, "lineno")[:15]
    ]
    t0, t1 = json.loads(types[1].read_text()), json.loads(types[-1].read_text())
    before = dict(t0["types"])
    type_growth = sorted(((n, c - before.get(n, 0)) for n, c in t1["types"]), key=lambda x: -x[1])[:15]
    return {"tracemalloc_top": grown, "gc_objects": [t0["objects"], t1["objects"]], "gc_type_growth": type_growth}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=1800.0, help="seconds of load")
    ap.add_argument("--sample", type=float, default=5.0, help="seconds between samples")
    ap.add_argument("--slots", type=int, default=128, help="broker lifecycles in parallel")
    ap.add_argument("--max-brokers", type=int, default=2_000_000, help="unique broker names at most")
    ap.add_argument("--topics-per-broker", type=int, default=12)
    ap.add_argument("--query-connections", type=int, default=4)
    ap.add_argument("--query-pause", type=float, default=0.002, help="seconds between two queries of a connection")
    ap.add_argument("--storm-every", type=float, default=15.0)
    ap.add_argument("--storm-size", type=int, default=300)
    ap.add_argument("--log-max-size", type=int, default=8 * MB, help="the server's logFileMaxSize")
    ap.add_argument("--log-max-index", type=int, default=3, help="the server's logFileMaxIndex")
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--trace", action="store_true", help="tracemalloc and gc type counts in the server (slow)")
    ap.add_argument("--trace-every", type=float, default=60.0)
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, traces)")
    ap.add_argument("--out", type=Path, default=RESULTS / "soak.json")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="soak-"))
    server = start_server(work, args)
    try:
        addr = wait_boot(server)
        proc = psutil.Process(server.pid)
        print(f"NameServer {addr} (pid {server.pid}), work dir {work}", flush=True)
        soak = Soak(args, addr)
        began = time.time()
        samples = trio.run(Soak.run, soak, proc, work)
        cpu = proc.cpu_times()
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)
    summary = second_half(samples)
    result: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "kernel": platform.release(),
                    "load_avg_at_end": os.getloadavg()},
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(began)),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "counters": soak.count.values,
        "server_cpu_seconds": round(cpu.user + cpu.system, 1),
        "second_half": summary,
        "samples": samples,
    }
    if args.trace:
        result["trace"] = trace_report(work)
        for row in result["trace"].get("tracemalloc_top", []):
            print(f"  {row['size_diff_kb']:+9.1f} KB {row['count_diff']:+7d}  {row['where']}")
        print(f"  gc objects {result['trace'].get('gc_objects')}; grew: {result['trace'].get('gc_type_growth')}")
    print(json.dumps({"counters": soak.count.values, "second_half": summary}, indent=1))
    print(f"after the load: {samples[-1]}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
