"""Warm restart of real ``mqnamesrv`` processes: SIGTERM and SIGKILL, expiry, adoption, the CLI marks.

Brokers are faked by registrations over real connections (as in
test_namesrv_server.py); every NameServer is a real process on 127.0.0.1,
killed by the ``start_namesrv`` fixture whatever the test's outcome.
"""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Callable

import orjson
import trio

from namesrv import snapshot
from namesrv.provisional import RESTORED_BROKERS_CODE
from remoting import requests as rq
from remoting.bodies import ClusterInfo, DataVersion, TopicConfig, TopicRouteData
from remoting.codes import ResponseCode
from remoting.command import request
from remoting.transport import RemotingClient, connect
from tests.procs import NamesrvProcess
from tests.test_mqadmin_cli import mqadmin

CLUSTER = "DefaultCluster"
A = "127.0.0.1:1"  # nothing listens on these: clusterList shows them unreachable at once
B = "127.0.0.1:3"
Start = Callable[..., NamesrvProcess]


async def register(c: RemotingClient, name: str, addr: str, topics: tuple[str, ...] = ("TopicA",), counter: int = 1,
                   timeout_ms: int | None = None) -> None:
    resp = await c.invoke(rq.register_broker(
        cluster=CLUSTER, broker_name=name, broker_addr=addr, broker_id=0,
        topics=[TopicConfig("TBW102", 8, 8, 7)] + [TopicConfig(t, 4, 4, 6) for t in topics],
        data_version=DataVersion(counter, 1_700_000_000_000), heartbeat_timeout_ms=timeout_ms))
    assert resp.code == ResponseCode.SUCCESS, resp


async def route_brokers(c: RemotingClient, topic: str) -> list[str]:
    resp = await c.invoke(rq.get_route(topic))
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return []
    assert resp.code == ResponseCode.SUCCESS, resp
    return sorted(q.broker_name for q in TopicRouteData.decode(resp.body).queue_datas)


async def provisional(c: RemotingClient) -> list[str]:
    resp = await c.invoke(request(RESTORED_BROKERS_CODE))
    assert resp.code == ResponseCode.SUCCESS, resp
    return [b["brokerName"] for b in orjson.loads(resp.body)["brokers"]]


async def test_restore_after_graceful_stop_uses_the_final_write(start_namesrv: Start) -> None:
    # an interval far beyond the test: only the write during the graceful stop can save the routes
    props = {"routeSnapshotIntervalMillis": 600_000}
    ns = start_namesrv("ns", **props)
    async with connect(ns.addr) as ca, connect(ns.addr) as cb:
        await register(ca, "broker-a", A, ("TopicA", "TopicX"))
        await register(cb, "broker-b", B)
        assert ns.terminate() == 0
    ns = start_namesrv("ns", **props)
    async with connect(ns.addr) as c:
        assert await route_brokers(c, "TopicA") == ["broker-a", "broker-b"]  # the first answer already
        assert await route_brokers(c, "TopicX") == ["broker-a"]
        info = ClusterInfo.decode((await c.invoke(rq.cluster_info())).body)
        assert info.cluster_addr_table == {CLUSTER: ["broker-a", "broker-b"]}
        assert await provisional(c) == ["broker-a", "broker-b"]
    assert "restored 2 brokers and 3 topics from route snapshot" in ns.log()


async def test_restore_after_sigkill_and_adoption_by_a_new_registration(start_namesrv: Start) -> None:
    props = {"routeSnapshotIntervalMillis": 50}
    ns = start_namesrv("ns", **props)
    async with connect(ns.addr) as ca, connect(ns.addr) as cb:
        await register(ca, "broker-a", A)
        await register(cb, "broker-b", B)
        await trio.sleep(0.5)  # ten intervals: the change is on disk
        ns.kill()
    ns = start_namesrv("ns", **props)
    async with connect(ns.addr) as c:
        assert await route_brokers(c, "TopicA") == ["broker-a", "broker-b"]
        async with connect(ns.addr) as ca:
            await register(ca, "broker-a", A)  # unchanged re-registration on a new connection
            assert await provisional(c) == ["broker-b"]
        # that connection closed: broker-a is removed at once, as any registered broker
        with trio.fail_after(5):
            while await route_brokers(c, "TopicA") != ["broker-b"]:
                await trio.sleep(0.02)


async def test_restored_broker_expires_under_its_timeout_counted_from_the_restart(start_namesrv: Start) -> None:
    props = {"routeSnapshotIntervalMillis": 50, "scanNotActiveBrokerInterval": 100}
    ns = start_namesrv("ns", **props)
    async with connect(ns.addr) as ca, connect(ns.addr) as cb:
        await register(ca, "broker-a", A, timeout_ms=3_000)
        await register(cb, "broker-b", B)  # the default 120 s
        await trio.sleep(0.4)
        ns.kill()
    await trio.sleep(3.5)  # down longer than broker-a's timeout: it must not expire at boot
    ns = start_namesrv("ns", **props)
    async with connect(ns.addr) as c:
        assert await route_brokers(c, "TopicA") == ["broker-a", "broker-b"]  # not expired at boot...
        with trio.fail_after(30):  # ...but 3 s after the restore, not after broker-b's 120 s
            while await route_brokers(c, "TopicA") != ["broker-b"]:
                await trio.sleep(0.02)
        assert await provisional(c) == ["broker-b"]
    assert "expired: no heartbeat within its timeout" in ns.log()


async def test_kill_9_during_a_change_storm_never_leaves_a_broken_snapshot(start_namesrv: Start) -> None:
    props = {"routeSnapshotIntervalMillis": 10}
    rng = random.Random(15)
    counter = 1
    for round_ in range(4):
        ns = start_namesrv("ns", **props)
        async with connect(ns.addr) as c:
            if round_:  # restored from whatever the kill left
                assert await route_brokers(c, "TopicA") == ["broker-a"]
            stop_at = trio.current_time() + rng.uniform(0.2, 0.5)
            while trio.current_time() < stop_at:  # every registration changes the topic set
                counter += 1
                extra = tuple(f"T{counter}_{i}" for i in range(rng.randint(1, 300)))
                await register(c, "broker-a", A, ("TopicA", *extra), counter=counter)
            ns.kill()
        log = ns.log()
        if round_:
            assert "ignored" not in log and "restored 1 brokers" in log, log
    ns = start_namesrv("ns", **props)
    async with connect(ns.addr) as c:
        assert await route_brokers(c, "TopicA") == ["broker-a"]
    assert "ignored" not in ns.log()


async def test_warm_restart_disabled_starts_cold(start_namesrv: Start) -> None:
    props = {"warmRestartEnable": False, "routeSnapshotIntervalMillis": 50}
    ns = start_namesrv("ns", **props)
    async with connect(ns.addr) as c:
        await register(c, "broker-a", A)
        await trio.sleep(0.3)
        assert ns.terminate() == 0
    assert not (ns.workdir / "routeSnapshot.msgpack").exists()
    ns = start_namesrv("ns", **props)
    async with connect(ns.addr) as c:
        assert await route_brokers(c, "TopicA") == []
        resp = await c.invoke(request(RESTORED_BROKERS_CODE))
        assert orjson.loads(resp.body) == {"restore": None, "brokers": []}
    assert "warm restart disabled" in ns.log()


async def test_future_format_snapshot_is_ignored_and_not_fatal(start_namesrv: Start) -> None:
    ns = start_namesrv("ns")
    async with connect(ns.addr) as c:
        await register(c, "broker-a", A)
        assert ns.terminate() == 0
    path = ns.workdir / "routeSnapshot.msgpack"
    data = path.read_bytes()
    path.write_bytes(data[:8] + struct.pack(">H", snapshot.FORMAT_VERSION + 1) + data[10:])
    ns = start_namesrv("ns")
    async with connect(ns.addr) as c:
        assert await route_brokers(c, "TopicA") == []
        await register(c, "broker-a", A)  # and it serves normally
        assert await route_brokers(c, "TopicA") == ["broker-a"]
    lines = [line for line in ns.log().splitlines() if "ignored" in line]  # the log spans both runs
    assert len(lines) == 1 and "route snapshot" in lines[0] and "ignored: format version 2" in lines[0], lines


async def test_watch_and_cluster_list_mark_provisional_brokers(start_namesrv: Start) -> None:
    ns = start_namesrv("ns")
    other = start_namesrv("other")  # a NameServer that was not restarted: nothing provisional there
    async with connect(ns.addr) as ca, connect(ns.addr) as cb, connect(other.addr) as co:
        await register(ca, "broker-a", A)
        await register(cb, "broker-b", B)
        await register(co, "broker-a", A)
        assert ns.terminate() == 0
        ns = start_namesrv("ns")
        both = f"{ns.addr};{other.addr}"
        rc, stdout, stderr = await mqadmin("watch", "--once", "--json", "-n", both)
        assert rc == 0, stderr
        rows = {r["broker"]: r for r in json.loads(stdout)["brokers"]}
        assert rows["broker-a"]["provisional"] and rows["broker-a"]["provisionalBy"] == [ns.addr]
        assert rows["broker-b"]["provisionalBy"] == [ns.addr]
        rc, stdout, _ = await mqadmin("watch", "--once", "-n", both)
        assert rc == 0 and "restored" in stdout, stdout
        # nothing listens at the fake brokers' addresses: rows that say so, and a failed health check
        rc, stdout, stderr = await mqadmin("clusterList", "--json", "--timeout", "5", "-n", ns.addr)
        assert rc == 1 and stderr == f"mqadmin: 2 of 2 brokers failed: {A}, {B}\n", stderr
        flags = {r["brokerName"]: (r["provisional"], r["provisionalOn"]) for r in json.loads(stdout)["brokers"]}
        assert flags == {"broker-a": (True, [ns.addr]), "broker-b": (True, [ns.addr])}
        rc, stdout, _ = await mqadmin("clusterList", "--timeout", "5", "-n", ns.addr)
        assert rc == 1 and f"restored on {ns.addr}, not registered since" in stdout
        async with connect(ns.addr) as again:
            await register(again, "broker-a", A)
            rc, stdout, _ = await mqadmin("clusterList", "--json", "--timeout", "5", "-n", ns.addr)
            flags = {r["brokerName"]: r["provisional"] for r in json.loads(stdout)["brokers"]}
            assert flags == {"broker-a": False, "broker-b": True}
            rc, stdout, _ = await mqadmin("watch", "--once", "--json", "-n", both)
            rows = {r["broker"]: r for r in json.loads(stdout)["brokers"]}
            assert rows["broker-a"]["provisionalBy"] == [] and rows["broker-b"]["provisionalBy"] == [ns.addr]
