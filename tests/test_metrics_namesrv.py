"""The NameServer's /metrics on a real process: each family moves when the thing it counts happens.

Brokers here are the test's own registrations on connections it holds, so
every removal reason can be caused on purpose: closing the connection
(connection_closed), UNREGISTER_BROKER (unregistered), and a registration
whose heartbeatTimeoutMillis runs out while its connection stays open
(expired). Counts are asserted exactly where the test alone causes them.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from remoting import requests as rq
from remoting.bodies import DataVersion, TopicConfig
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, request
from server_runtime.metering import SAMPLE_EVERY
from server_runtime.metrics_families import package_version
from remoting.transport import connect, parse_addr
from tests.metrics_scrape import Scrape, scrape, until
from tests.peers import write_accounts
from tests.procs import NamesrvProcess

CLUSTER = "DefaultCluster"
P = "rocketmq_namesrv"


def register(name: str, port: int, *, topic: str = "TopicA", counter: int = 1, timeout_ms: int | None = None,
             cluster: str = CLUSTER) -> RemotingCommand:
    return rq.register_broker(
        cluster=cluster, broker_name=name, broker_addr=f"127.0.0.1:{port}", broker_id=0,
        topics=[TopicConfig("TBW102", 8, 8, 7), TopicConfig(topic, 4, 4, 6)],
        data_version=DataVersion(counter, 1_700_000_000_000), heartbeat_timeout_ms=timeout_ms,
    )


def brokers(got: Scrape) -> float:
    return got.value(f"{P}_active_brokers")


def removed(got: Scrape, reason: str) -> float:
    return got.value(f"{P}_brokers_removed_total", reason=reason)


def registrations(got: Scrape, result: str) -> float:
    return got.value(f"{P}_registration_events_total", result=result)


def requests(got: Scrape, code: object, result: str) -> float:
    return got.total(f"{P}_requests_total", code=str(code), result=result)


async def test_metrics_are_off_by_default(start_namesrv: Callable[..., NamesrvProcess]) -> None:
    ns = start_namesrv()
    assert ns.metrics_url == ""
    assert "metrics at" not in ns.log()


@pytest.mark.parametrize("program", ["namesrv.cli", "broker_stub.cli"])
def test_a_bad_or_taken_metrics_port_stops_the_start_with_one_line(program: str, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for value, expected in ((str(port), f"cannot serve metrics on 127.0.0.1:{port} (metricsBindAddress, "
                                 "metricsPort): Address already in use"),
                                ("-2", "metricsPort -2 is not a TCP port (1-65535), 0 (off) or -1 (any free port)")):
            config = tmp_path / f"{program}.properties"
            config.write_text(f"listenPort=0\nkvConfigPath={tmp_path}/kv.json\nmetricsPort={value}\n")
            done = subprocess.run([sys.executable, "-m", program, "-c", str(config)], capture_output=True, text=True,
                                  timeout=60, cwd=tmp_path)
            assert done.returncode == 1
            lines = done.stderr.strip().splitlines()
            assert expected in lines[-1] and "Traceback" not in done.stderr, done.stderr


async def test_brokers_routes_and_removals_by_reason(start_namesrv: Callable[..., NamesrvProcess]) -> None:
    ns = start_namesrv(metricsPort=-1)
    url = ns.metrics_url
    assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
    first = await scrape(url)
    assert first.value(f"{P}_up", version=package_version()) == 1
    assert first.families[f"{P}_requests"] == "counter"
    assert first.families[f"{P}_request_handler_latency_seconds"] == "histogram"
    assert brokers(first) == 0 and first.value(f"{P}_topics") == 0 and first.value(f"{P}_clusters") == 0
    assert first.value(f"{P}_restored_brokers") == 0 and first.value(f"{P}_provisional_brokers") == 0

    async with connect(ns.addr) as a, connect(ns.addr) as b, connect(ns.addr) as c:
        assert (await a.invoke(register("broker-a", 10911))).code == ResponseCode.SUCCESS
        assert (await b.invoke(register("broker-b", 10921, topic="TopicB", cluster="OtherCluster"))).code == 0
        assert (await c.invoke(register("broker-c", 10931, timeout_ms=300))).code == 0
        # the very same body again: liveness refreshed, routes untouched
        assert (await a.invoke(register("broker-a", 10911))).code == ResponseCode.SUCCESS
        got = await scrape(url)
        assert registrations(got, "applied") == 3
        assert registrations(got, "unchanged") == 1
        assert got.value(f"{P}_registration_duration_seconds_count", result="applied") == 3
        assert got.value(f"{P}_registration_duration_seconds_count", result="unchanged") == 1
        assert got.value(f"{P}_clusters") == 2
        assert got.value(f"{P}_topics") == 3  # TBW102, TopicA, TopicB

        # broker-c's 300 ms heartbeat timeout runs out with its connection open: expired
        got = await until(url, lambda s: removed(s, "expired") == 1, what="broker-c expired")
        assert brokers(got) == 2

        for _ in range(25):
            assert (await a.invoke(rq.get_route("TopicA"))).code == ResponseCode.SUCCESS
        assert (await a.invoke(rq.get_route("NoSuchTopic"))).code == ResponseCode.TOPIC_NOT_EXIST
        got = await scrape(url)
        assert requests(got, 105, "success") == 25
        assert requests(got, 105, "topic_not_exist") == 1
        assert got.value(f"{P}_requests_total", code="105", **{"class": "route-read"}, result="success") == 25
        hits = got.value(f"{P}_route_cache_events_total", result="hit")
        encoded = got.value(f"{P}_route_cache_events_total", result="encoded")
        assert hits + encoded == 25 and 1 <= encoded <= 2  # the first answer is encoded, later ones cached
        # route queries are timed one in SAMPLE_EVERY; broker-control requests every one
        assert got.value(f"{P}_request_handler_latency_seconds_count", **{"class": "route-read"}) == 26 // SAMPLE_EVERY
        control = got.total(f"{P}_requests_total", **{"class": "broker-control"})
        assert control == 4
        assert got.value(f"{P}_request_handler_latency_seconds_count", **{"class": "broker-control"}) == control
        assert got.value(f"{P}_request_handler_latency_seconds_bucket", **{"class": "broker-control", "le": "+Inf"}) == 4

        unregister = rq.unregister_broker(cluster="OtherCluster", broker_name="broker-b",
                                          broker_addr="127.0.0.1:10921", broker_id=0)
        assert (await b.invoke(unregister)).code == ResponseCode.SUCCESS
        got = await scrape(url)
        assert removed(got, "unregistered") == 1 and brokers(got) == 1
    # the three connections closed: broker-a goes with its connection
    got = await until(url, lambda s: removed(s, "connection_closed") == 1 and s.value(f"{P}_active_connections") == 0,
                      what="broker-a removed, every connection closed")
    assert brokers(got) == 0 and removed(got, "expired") == 1 and removed(got, "unregistered") == 1
    assert got.value(f"{P}_active_connections") == 0
    assert got.value(f"{P}_connection_events_total", event="accepted") == 3
    assert got.value(f"{P}_connection_events_total", event="closed") == 3
    assert got.value(f"{P}_bytes_received_total") > 0 and got.value(f"{P}_bytes_sent_total") > 0
    assert got.value(f"{P}_clusters") == 0 and got.value(f"{P}_topics") == 0


async def test_registration_refusals_kv_and_config(start_namesrv: Callable[..., NamesrvProcess]) -> None:
    ns = start_namesrv(metricsPort=-1, maxBrokersPerConnection=1, kvValueMaxBytes=16, serverMaxConnections=4)
    url = ns.metrics_url
    async with connect(ns.addr) as client:
        assert (await client.invoke(register("broker-a", 10911))).code == ResponseCode.SUCCESS
        refused = await client.invoke(register("broker-b", 10921))
        assert refused.code == ResponseCode.SYSTEM_ERROR and "maxBrokersPerConnection" in (refused.remark or "")
        bad_crc = register("broker-a", 10911, counter=2)
        bad_crc.ext_fields["bodyCrc32"] = "12345"  # type: ignore[index]
        assert (await client.invoke(bad_crc)).code == ResponseCode.SYSTEM_ERROR
        assert (await client.invoke(rq.put_kv("ns", "k", "v"))).code == ResponseCode.SUCCESS
        assert (await client.invoke(rq.put_kv("ns", "k2", "x" * 17))).code == ResponseCode.SYSTEM_ERROR
        assert (await client.invoke(rq.delete_kv("ns", "k"))).code == ResponseCode.SUCCESS
        assert (await client.invoke(rq.update_namesrv_config({"productEnvName": "metrics"}))).code == 0
        moved = await client.invoke(rq.update_namesrv_config({"listenPort": "1"}))
        assert moved.code == ResponseCode.NO_PERMISSION
        assert (await client.invoke(rq.update_namesrv_config({"productEnvName": "x" * 70_000}))).code != 0
        for code in range(7000, 7050):  # made-up codes: one "other" series, not fifty
            assert (await client.invoke(request(code))).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        got = await scrape(url)
    assert registrations(got, "applied") == 1
    assert registrations(got, "refused_bound") == 1
    assert registrations(got, "failed") == 1
    assert registrations(got, "refused_auth") == 0
    assert got.value(f"{P}_limit_refusals_total", limit="max_brokers_per_connection") == 1
    assert got.value(f"{P}_kv_entries") == 0
    assert got.value(f"{P}_kv_writes_total", operation="put", result="success") == 1
    assert got.value(f"{P}_kv_writes_total", operation="put", result="refused") == 1
    assert got.value(f"{P}_kv_writes_total", operation="delete", result="success") == 1
    assert got.value(f"{P}_limit_refusals_total", limit="kv_size") == 1
    assert got.value(f"{P}_config_updates_total", result="accepted") == 1
    assert got.value(f"{P}_config_updates_total", result="refused") == 2
    assert got.value(f"{P}_limit_refusals_total", limit="config_update_size") == 1
    other = {labels: v for labels, v in got.series(f"{P}_requests_total").items() if ("code", "other") in labels}
    assert other == {(("class", "unknown"), ("code", "other"), ("result", "request_code_not_supported")): 50}
    codes = {dict(labels)["code"] for labels in got.series(f"{P}_requests_total")}
    assert codes <= {str(c) for c in (100, 102, 103, 318)} | {"other"}
    assert got.value(f"{P}_snapshot_writes_total", result="success") >= 0
    assert got.value(f"{P}_kv_entries") == 0

    # serverMaxConnections=4: the fifth connection is closed at accept
    socks = [socket.create_connection(parse_addr(ns.addr), timeout=5) for _ in range(5)]
    try:
        got = await until(url, lambda s: s.value(f"{P}_limit_refusals_total", limit="connections") >= 1,
                          what="a connection refused at the limit")
        assert got.value(f"{P}_active_connections") == 4
    finally:
        for s in socks:
            s.close()
    # a frame announcing more than frameMaxLength closes its connection
    with socket.create_connection(parse_addr(ns.addr), timeout=5) as sock:
        sock.sendall(struct.pack(">II", 64 * 1024 * 1024, 10) + b"x" * 10)
        try:
            assert sock.recv(16) == b""  # closed by the server
        except ConnectionResetError:
            pass  # closed with the unread bytes still queued: a reset
    got = await until(url, lambda s: s.value(f"{P}_limit_refusals_total", limit="frame_size") == 1,
                      what="the oversize frame counted")
    assert got.value(f"{P}_malformed_frames_total") == 1


async def test_registration_refused_by_access_control(start_namesrv: Callable[..., NamesrvProcess],
                                                       tmp_path: Path) -> None:
    accounts = write_accounts(tmp_path / "plain_acl.yml")
    ns = start_namesrv(metricsPort=-1, aclEnable=True, aclConfigPath=accounts)
    async with connect(ns.addr) as client:  # unsigned: broker-control needs an admin's signature
        assert (await client.invoke(register("broker-a", 10911))).code == ResponseCode.NO_PERMISSION
    got = await scrape(ns.metrics_url)
    assert registrations(got, "refused_auth") == 1
    assert registrations(got, "applied") == 0
    assert requests(got, RequestCode.REGISTER_BROKER, "no_permission") == 1


async def test_snapshot_and_restored_brokers_after_a_warm_restart(tmp_path: Path) -> None:
    procs = []
    try:
        ns = NamesrvProcess(tmp_path / "ns", metricsPort=-1, routeSnapshotIntervalMillis=50).start()
        procs.append(ns)
        async with connect(ns.addr) as client:
            assert (await client.invoke(register("broker-a", 10911))).code == ResponseCode.SUCCESS
            got = await until(ns.metrics_url, lambda s: s.value(f"{P}_snapshot_writes_total", result="success") >= 1
                              and s.value(f"{P}_snapshot_size_bytes") > 0, what="a snapshot written")
            assert got.value(f"{P}_snapshot_age_seconds") >= 0
            ns.kill()  # the broker's connection stays open, and the snapshot holds it
        again = NamesrvProcess(tmp_path / "ns", metricsPort=-1).start()
        procs.append(again)
        got = await scrape(again.metrics_url)
        assert got.value(f"{P}_restored_brokers") == 1
        assert got.value(f"{P}_provisional_brokers") == 1
        assert brokers(got) == 1
        async with connect(again.addr) as client:
            assert (await client.invoke(register("broker-a", 10911))).code == ResponseCode.SUCCESS
            got = await scrape(again.metrics_url)
        assert got.value(f"{P}_provisional_brokers") == 0 and got.value(f"{P}_restored_brokers") == 1
    finally:
        for p in procs:
            p.kill()
