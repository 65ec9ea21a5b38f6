"""Broker names that come and go leave nothing behind in the route table (issue 20's soak).

The table keeps, per broker name, registration epochs, what its last
registration applied and its interned QueueData, so that an unchanged
re-registration is cheap. Those used to outlive the broker: every unique name
ever seen stayed, about 1 KB each. These tests churn thousands of unique
names through every way out (unregistration, connection close, expiry) and
check the tables stay bounded, and that forgetting never costs correctness.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from namesrv import snapshot
from namesrv.config import default_snapshot_path
from namesrv.routes import RouteTable
from remoting import requests as rq
from remoting.bodies import ClusterInfo, DataVersion, TopicConfig
from remoting.codes import ResponseCode
from remoting.transport import connect
from tests.procs import NamesrvProcess
from tests.test_routes import C1, Loader, body, reg

SLACK = 64  # departed names remembered at most (the server's FORGET_SLACK is 1024; smaller keeps the test quick)
TOPICS = {"TBW102": (8, 8, 7, 0), "Shared": (4, 4, 6, 0)}


def new_table() -> RouteTable:
    table = RouteTable()
    table._forget_slack = SLACK
    return table


def per_name_sizes(table: RouteTable) -> dict[str, int]:
    return {
        "epoch": len(table._epoch),
        "removal_epoch": len(table._removal_epoch),
        "applied": len(table._applied),
        "interned": len(table._interned),
    }


def churn(table: RouteTable, start: int, count: int) -> None:
    """``count`` brokers of new names, each registering its own topics and leaving one of three ways."""
    for n in range(start, start + count):
        name, addr = f"broker-{n}", f"10.0.{n // 250 % 250}.{n % 250}:10911"
        topics = dict(TOPICS, **{f"own-{n}-{i}": (2, 2, 6, 0) for i in range(3)})
        table.register_broker(reg(addr, name=name, timeout=1000), Loader(body(topics)), body_digest=None,
                              conn=f"c{n}", now=n)
        if n % 3 == 0:
            table.unregister_broker(C1, addr, name)
        elif n % 3 == 1:
            table.connection_closed(f"c{n}")
        else:
            table.scan_not_active(now=n + 2000)


def test_unique_broker_names_coming_and_going_leave_bounded_bookkeeping() -> None:
    table = new_table()
    churn(table, 0, SLACK)
    peak = 0
    for round_ in range(1, 6):
        churn(table, round_ * SLACK, SLACK)
        sizes = per_name_sizes(table)
        peak = max(peak, *sizes.values())
        assert table.brokers == {} and table.live == {} and table.topic_queues == {}
    # at most SLACK departed names are remembered (3 interned QueueData each), after 6 x that many
    assert peak <= 3 * (SLACK + 1), peak


def test_live_brokers_keep_their_bookkeeping_and_returning_names_start_afresh() -> None:
    table = new_table()
    stay = Loader(body(dict(TOPICS, Mine=(4, 4, 6, 0))))
    table.register_broker(reg("10.9.9.9:10911", name="stayer"), stay, body_digest=b"stayer-1", conn="s", now=0)
    leaver = Loader(body(dict(TOPICS, Back=(4, 4, 6, 0))))
    table.register_broker(reg("10.9.9.8:10911", name="returner"), leaver, body_digest=b"ret-1", conn="r", now=0)
    table.unregister_broker(C1, "10.9.9.8:10911", "returner")
    churn(table, 0, 3 * SLACK)  # forgetting runs several times meanwhile

    assert "stayer" in table._epoch and "returner" not in table._epoch
    # the stayer's unchanged body still takes the cheap path: its body is not read again
    table.register_broker(reg("10.9.9.9:10911", name="stayer"), stay, body_digest=b"stayer-1", conn="s", now=1)
    assert stay.calls == 1
    assert "Mine" in table.topic_queues
    # the returner's same body is applied in full: its topics are back
    table.register_broker(reg("10.9.9.8:10911", name="returner"), leaver, body_digest=b"ret-1", conn="r", now=1)
    assert leaver.calls == 2
    assert "returner" in table.topic_queues["Back"]


def test_a_name_still_held_by_a_live_entry_is_not_forgotten() -> None:
    """An id that moved to a new address leaves the old address's live entry behind (as in Java).
    When the name then leaves the table, that entry still remembers the name's removal epoch: if
    forgetting dropped it, the old address coming back with its unchanged body after the name
    re-appeared would skip its topics, which were removed meanwhile."""
    table = new_table()
    old = Loader(body(dict(TOPICS, Moved=(4, 4, 6, 0))))
    other = Loader(body(dict(TOPICS, Other=(4, 4, 6, 0))))
    table.register_broker(reg("10.1.1.1:10911", name="mover"), old, body_digest=b"old", conn="a1", now=0)
    table.register_broker(reg("10.1.1.2:10911", name="mover"), other, body_digest=b"other", conn="a2", now=0)
    table.unregister_broker(C1, "10.1.1.2:10911", "mover")  # the name leaves the table; a1's entry stays
    assert "mover" not in table.brokers and (C1, "10.1.1.1:10911") in table.live
    assert "Moved" not in table.topic_queues
    churn(table, 0, 3 * SLACK)  # forgetting runs several times
    assert "mover" in table._removal_epoch
    table.register_broker(reg("10.1.1.3:10911", name="mover"), other, body_digest=b"other", conn="a3", now=1)
    table.register_broker(reg("10.1.1.1:10911", name="mover"), old, body_digest=b"old", conn="a1", now=1)
    assert "mover" in table.topic_queues.get("Moved", {})  # applied again, not skipped



# ----------------------------------------------------------------------
# a real NameServer process

#: Runs the NameServer with its two slacks at 64 (so that a short churn goes through many
#: forgetting rounds) and tracemalloc on; a thread answers each ``measure`` file the test
#: creates with the bytes Python holds after a full collection: an exact figure, not the RSS.
MEASURED_SERVER = """
import gc, os, sys, threading, time, tracemalloc
import namesrv.routes
from namesrv.cli import entry
namesrv.routes.FORGET_SLACK = namesrv.routes.CHUNK_CONTENTS_SLACK = 64
tracemalloc.start(1)
def answer(ask, reply):
    while True:
        time.sleep(0.05)
        if os.path.exists(ask):
            gc.collect()
            with open(reply + ".tmp", "w") as fh:
                fh.write(str(tracemalloc.get_traced_memory()[0]))
            os.remove(ask)
            os.replace(reply + ".tmp", reply)
threading.Thread(target=answer, args=(sys.argv[1], sys.argv[2]), daemon=True).start()
sys.argv = ["mqnamesrv", *sys.argv[3:]]
entry()
"""
WARMUP_NAMES = 400
MEASURED_NAMES = 1200
#: Remembering departed names cost ~570 B each (bench/route_churn_memory.py), ~680 KB here. Forgotten,
#: what stays is at most 64 departed names and 64 spare chunk-name tuples at any moment.
GROWTH_BOUND = 200 * 1024
CHURN_CONNECTIONS = 8
NAMES_PER_CONNECTION = 50


async def churn_server(addr: str, start: int, count: int) -> None:
    """Brokers of new names over real connections: register, re-register with one topic more under
    a new data version, then half unregister and the rest go when their connection closes."""

    async def one_connection(first: int) -> None:
        async with connect(addr) as client:
            for n in range(first, min(first + NAMES_PER_CONNECTION, start + count)):
                name, baddr = f"churn-{n:06d}", f"127.0.{1 + n // 250 % 250}.{1 + n % 250}:10911"
                topics = [TopicConfig("TBW102", 8, 8, 7), TopicConfig("Shared", 4, 4, 6)]
                topics += [TopicConfig(f"own-{n}-{i}", 2, 2, 6) for i in range(3)]
                for version, extra in ((1, []), (2, [TopicConfig(f"own-{n}-x", 2, 2, 6)])):
                    resp = await client.invoke(rq.register_broker(
                        cluster="C", broker_name=name, broker_addr=baddr, broker_id=0,
                        topics=topics + extra, data_version=DataVersion(version, 1)), 60.0)
                    assert resp.code == ResponseCode.SUCCESS, resp.remark
                if n % 2:
                    resp = await client.invoke(rq.unregister_broker(cluster="C", broker_name=name,
                                                                    broker_addr=baddr, broker_id=0), 60.0)
                    assert resp.code == ResponseCode.SUCCESS, resp.remark

    firsts = list(range(start, start + count, NAMES_PER_CONNECTION))
    for i in range(0, len(firsts), CHURN_CONNECTIONS):
        async with trio.open_nursery() as nursery:
            for first in firsts[i:i + CHURN_CONNECTIONS]:
                nursery.start_soon(one_connection, first)


def snapshot_is_empty(workdir: Path) -> bool:
    found = snapshot.read(default_snapshot_path(str(workdir / "kvConfig.json")))
    return found is not None and not found[2]["brokers"] and not found[2]["topics"]


async def held_by_server(addr: str, workdir: Path) -> int:
    """Bytes the server's Python objects hold, once every broker has left and the route snapshot
    (which keeps its last capture for reuse, refreshed within an interval of a change) says so."""
    async with connect(addr) as client:
        with trio.fail_after(30):
            while ClusterInfo.decode((await client.invoke(rq.cluster_info())).body).broker_addr_table:
                await trio.sleep(0.05)  # the last connections' closes are being handled
    with trio.fail_after(30):
        while not snapshot_is_empty(workdir):
            await trio.sleep(0.05)
    (workdir / "measure").touch()
    with trio.fail_after(30):
        while not (workdir / "traced").exists():
            await trio.sleep(0.05)
    held = int((workdir / "traced").read_text())
    (workdir / "traced").unlink()
    return held


async def test_a_real_server_keeps_nothing_for_departed_broker_names(tmp_path: Path) -> None:
    ns = NamesrvProcess(tmp_path / "ns")
    ns.command = [sys.executable, "-c", MEASURED_SERVER, str(ns.workdir / "measure"), str(ns.workdir / "traced")]
    try:
        ns.start(timeout=60)
        await churn_server(ns.addr, 0, WARMUP_NAMES)
        warm = await held_by_server(ns.addr, ns.workdir)
        await churn_server(ns.addr, WARMUP_NAMES, MEASURED_NAMES)
        after = await held_by_server(ns.addr, ns.workdir)
        assert ns.terminate() == 0
    finally:
        ns.kill()
    assert after - warm < GROWTH_BOUND, f"{(after - warm) / MEASURED_NAMES:.0f} bytes kept per departed name"
