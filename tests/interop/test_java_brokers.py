"""Java 4.9.7 and 5.3.3 brokers (master and slave) with our NameServer, beside Java's own.

Every broker of the session's ``java_cluster`` registers with both NameServers, so each answer of
ours is compared with the Java 5.3.3 NameServer's answer to the same registrations. Timing is not
compared (Java expires a silent broker after a fixed 120 s, ours after ``brokerChannelExpiredTime``):
behaviour is. The tests that stop slaves come last in this module; masters stay up for the package.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
import trio

from remoting import requests as rq
from remoting.bodies import parse_topic_list
from remoting.codes import ResponseCode
from tests.interop.clusters import JavaCluster
from tests.interop.harness_build import JAVA_VERSIONS
from tests.interop.java_procs import AdminRunners
from tests.interop.namesrv_ask import ask, broker_addrs, cluster_info, eventually, route


def _route_obj(data: Any) -> dict[str, Any] | None:
    if data is None:
        return None
    obj = data.to_obj()
    obj["brokerDatas"] = sorted(obj["brokerDatas"], key=lambda b: b["brokerName"])
    obj["queueDatas"] = sorted(obj["queueDatas"], key=lambda q: q["brokerName"])
    return obj


def test_java_servers_listen_on_loopback_only(java_cluster: JavaCluster) -> None:
    for server in [java_cluster.java_namesrv, *java_cluster.brokers.values()]:
        addrs = server.listening_addresses()
        assert addrs and all(a.startswith("127.0.0.1:") for a in addrs), (server.version, addrs)


@pytest.mark.parametrize("version", JAVA_VERSIONS)
async def test_master_and_slave_register_with_ours_and_java(java_cluster: JavaCluster, version: str) -> None:
    name = java_cluster.broker_name(version)
    expected = {0: java_cluster.brokers[(version, 0)].addr, 1: java_cluster.brokers[(version, 1)].addr}
    for addr in (java_cluster.ours.addr, java_cluster.java_namesrv.addr):
        async def registered(addr: str = addr) -> bool:
            return await broker_addrs(addr, name) == expected
        await eventually(registered, 60, f"{name} master and slave registered at {addr}")
    info = await cluster_info(java_cluster.ours.addr)
    assert name in info.cluster_addr_table[f"Java{version[0]}"]


async def test_cluster_info_is_javas(java_cluster: JavaCluster) -> None:
    ours, java = await cluster_info(java_cluster.ours.addr), await cluster_info(java_cluster.java_namesrv.addr)
    assert {k: v.to_obj() for k, v in ours.broker_addr_table.items()} == \
        {k: v.to_obj() for k, v in java.broker_addr_table.items()}
    assert {k: sorted(v) for k, v in ours.cluster_addr_table.items()} == \
        {k: sorted(v) for k, v in java.cluster_addr_table.items()}


async def test_every_topic_route_is_javas(java_cluster: JavaCluster) -> None:
    lists = []
    for addr in (java_cluster.ours.addr, java_cluster.java_namesrv.addr):
        resp = await ask(addr, rq.all_topics())
        assert resp.code == ResponseCode.SUCCESS, resp
        lists.append(set(parse_topic_list(resp.body)[0]))
    assert lists[0] == lists[1]
    assert {"TBW102", "Java4", "Java5", "broker-497", "broker-533"} <= lists[0]
    for topic in sorted(lists[0]):
        assert _route_obj(await route(java_cluster.ours.addr, topic)) == \
            _route_obj(await route(java_cluster.java_namesrv.addr, topic)), topic


def _rows(stdout: str) -> list[list[str]]:
    """clusterList's broker rows without the figures that move (TPS, hours, disk ratio)."""
    return sorted(line.split()[:5] for line in stdout.splitlines() if line.split()[:1] in (["Java4"], ["Java5"]))


@pytest.mark.parametrize("version", JAVA_VERSIONS)
def test_java_mqadmin_cluster_list_same_on_both(java_cluster: JavaCluster, java_admin: AdminRunners,
                                                version: str) -> None:
    outputs = [java_admin[version].run("clusterList", "-n", addr)
               for addr in (java_cluster.ours.addr, java_cluster.java_namesrv.addr)]
    assert _rows(outputs[0]["stdout"]) == _rows(outputs[1]["stdout"])
    rows = _rows(outputs[0]["stdout"])
    for (broker_version, broker_id), broker in java_cluster.brokers.items():
        if version == "4.9.7" and broker_version == "5.3.3":
            continue  # 4.9.7's tool stops at a 5.3.3 broker (no getTransferedTps): Java's own limit
        assert [f"Java{broker_version[0]}", java_cluster.broker_name(broker_version), str(broker_id),
                broker.addr, "V" + broker_version.replace(".", "_")] in rows, rows


async def test_silent_java_broker_expires_on_ours(java_cluster: JavaCluster) -> None:
    """SIGSTOP keeps the connection open and stops the heartbeats: ours expires the broker at
    brokerChannelExpiredTime; Java's NameServer would take its fixed 120 s (not waited for)."""
    slave = java_cluster.brokers[("4.9.7", 1)]
    assert slave.proc is not None
    name = java_cluster.broker_name("4.9.7")
    os.kill(slave.proc.pid, signal.SIGSTOP)
    try:
        async def expired() -> bool:
            return 1 not in await broker_addrs(java_cluster.ours.addr, name)
        await eventually(expired, 120, "ours expired the stopped slave")
        assert 1 in await broker_addrs(java_cluster.java_namesrv.addr, name)
    finally:
        os.kill(slave.proc.pid, signal.SIGCONT)

    async def back() -> bool:
        return 1 in await broker_addrs(java_cluster.ours.addr, name)
    await eventually(back, 90, "the resumed slave registered again with ours")


async def test_kill_9_removes_java_broker_from_both(java_cluster: JavaCluster) -> None:
    slave = java_cluster.brokers[("4.9.7", 1)]
    name = java_cluster.broker_name("4.9.7")
    slave.kill()
    for addr in (java_cluster.ours.addr, java_cluster.java_namesrv.addr):
        async def gone(addr: str = addr) -> bool:
            return 1 not in await broker_addrs(addr, name)
        await eventually(gone, 30, f"the killed slave removed at {addr} (connection closed)")
    assert 0 in await broker_addrs(java_cluster.ours.addr, name)


async def test_sigterm_unregisters_java_broker_from_both(java_cluster: JavaCluster) -> None:
    slave = java_cluster.brokers[("5.3.3", 1)]
    name = java_cluster.broker_name("5.3.3")
    assert await broker_addrs(java_cluster.ours.addr, name) == await broker_addrs(java_cluster.java_namesrv.addr, name)
    await trio.to_thread.run_sync(slave.terminate)
    for addr in (java_cluster.ours.addr, java_cluster.java_namesrv.addr):
        async def gone(addr: str = addr) -> bool:
            return 1 not in await broker_addrs(addr, name)
        await eventually(gone, 30, f"the stopped slave unregistered at {addr}")
    assert slave.proc is not None and slave.proc.returncode in (0, 143)  # 143: the JVM ran its hooks on SIGTERM
