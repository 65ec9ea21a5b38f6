"""The NameServer as a real process, driven over real TCP on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys

import pytest
import trio

from remoting import requests as rq
from remoting.bodies import (
    ClusterInfo,
    DataVersion,
    TopicConfig,
    TopicRouteData,
    parse_kv_table,
    parse_topic_list,
)
from remoting.codec import FrameDecoder, encode
from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand, request
from remoting.transport import RemotingClient, connect
from tests.procs import NamesrvProcess

CLUSTER = "DefaultCluster"


def topics(*names: str, queues: int = 4, perm: int = 6) -> list[TopicConfig]:
    return [TopicConfig("TBW102", 8, 8, 7)] + [TopicConfig(n, queues, queues, perm) for n in names]


async def register(
    client: RemotingClient,
    name: str,
    addr: str,
    broker_id: int = 0,
    names: tuple[str, ...] = ("TopicA",),
    counter: int = 1,
    **kw: object,
) -> RemotingCommand:
    req = rq.register_broker(
        cluster=kw.pop("cluster", CLUSTER),  # type: ignore[arg-type]
        broker_name=name,
        broker_addr=addr,
        broker_id=broker_id,
        topics=topics(*names),
        data_version=DataVersion(counter, 1_700_000_000_000),
        **kw,  # type: ignore[arg-type]
    )
    resp = await client.invoke(req)
    assert resp.code == ResponseCode.SUCCESS, resp
    return resp


async def route(client: RemotingClient, topic: str, **kw: object) -> TopicRouteData | None:
    resp = await client.invoke(rq.get_route(topic, **kw))  # type: ignore[arg-type]
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert resp.code == ResponseCode.SUCCESS, resp
    return TopicRouteData.decode(resp.body)


async def wait_for(predicate, timeout: float = 30.0, interval: float = 0.02) -> float:  # type: ignore[no-untyped-def]
    """Poll an async predicate; return the seconds it took to become true."""
    start = trio.current_time()
    with trio.fail_after(timeout):
        while not await predicate():
            await trio.sleep(interval)
    return trio.current_time() - start


# ---------------------------------------------------------------------------
# registration and routes


async def test_master_and_slave_registration(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as master, connect(namesrv.addr) as slave:
        resp = await register(master, "broker-a", "127.0.0.1:10911")
        assert resp.ext_fields == {}
        resp = await register(slave, "broker-a", "127.0.0.1:10921", broker_id=1)
        assert resp.ext_fields == {"haServerAddr": "127.0.0.1:10912", "masterAddr": "127.0.0.1:10911"}

        r = await route(master, "TopicA")
        assert r is not None
        assert [b.broker_addrs for b in r.broker_datas] == [{0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}]
        assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in r.queue_datas] == [
            ("broker-a", 4, 4, 6)
        ]
        info = ClusterInfo.decode((await master.invoke(rq.cluster_info())).body)
        assert info.cluster_addr_table == {CLUSTER: ["broker-a"]}
        assert info.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}


async def test_route_encodings_follow_client_version(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        await register(c, "broker-a", "127.0.0.1:10911")
        new = await c.invoke(rq.get_route("TopicA", version=479))
        old = await c.invoke(rq.get_route("TopicA", version=333))
        opted_in = await c.invoke(rq.get_route("TopicA", version=333, accept_standard_json=True))
        assert b'"brokerAddrs":{"0":"127.0.0.1:10911"}' in new.body
        assert b'"brokerAddrs":{0:"127.0.0.1:10911"}' in old.body
        assert opted_in.body == new.body
        json.loads(new.body)  # standard JSON parses with any JSON parser
        assert TopicRouteData.decode(old.body) == TopicRouteData.decode(new.body)
        for resp in (new, old):
            assert set(json.loads(new.body)) == {"brokerDatas", "filterServerTable", "queueDatas"}
            assert resp.ext_fields is None and resp.remark is None


async def test_unknown_topic_and_unknown_code(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        resp = await c.invoke(rq.get_route("NoSuchTopic"))
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        assert resp.remark is not None
        assert resp.remark.startswith("No topic route info in name server for the topic: NoSuchTopic\nSee ")
        resp = await c.invoke(request(4242))
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert resp.remark == " request type 4242 not supported"


async def test_binary_header_request_gets_binary_answer(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        await register(c, "broker-a", "127.0.0.1:10911")
        req = rq.get_route("TopicA")
        req.serialize_type = SerializeType.ROCKETMQ
        resp = await c.invoke(req)
        assert resp.serialize_type == SerializeType.ROCKETMQ
        assert resp.code == ResponseCode.SUCCESS
        assert TopicRouteData.decode(resp.body).queue_datas[0].broker_name == "broker-a"


async def test_oneway_request_gets_no_answer_but_applies(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        req = rq.register_broker(
            cluster=CLUSTER, broker_name="broker-a", broker_addr="127.0.0.1:10911", broker_id=0,
            topics=topics("TopicA"), data_version=DataVersion(1, 1),
        )
        await c.invoke_oneway(req)
        # The next answer on this connection must be for the next request.
        assert await route(c, "TopicA") is not None


async def test_crc_mismatch_and_bad_header_types(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        req = rq.register_broker(
            cluster=CLUSTER, broker_name="broker-a", broker_addr="127.0.0.1:10911", broker_id=0,
            topics=topics("TopicA"), data_version=DataVersion(1, 1),
        )
        assert req.ext_fields is not None
        req.ext_fields["bodyCrc32"] = str(int(req.ext_fields["bodyCrc32"]) ^ 1)
        resp = await c.invoke(req)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
        req.ext_fields["bodyCrc32"] = "0"
        req.ext_fields["brokerId"] = "not-a-number"
        resp = await c.invoke(req)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "brokerId" in (resp.remark or "")
        req.ext_fields["brokerId"] = "0"
        req.body = b"{not json"
        resp = await c.invoke(req)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert await route(c, "TopicA") is None


async def test_compressed_register_body(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        await register(c, "broker-a", "127.0.0.1:10911", names=("TopicZ",), compressed=True, version=407)
        r = await route(c, "TopicZ")
        assert r is not None and r.queue_datas[0].write_queue_nums == 4


# ---------------------------------------------------------------------------
# liveness


async def test_connection_close_removes_broker_at_once(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as admin:
        async with connect(namesrv.addr) as broker:
            await register(broker, "broker-a", "127.0.0.1:10911")
            await register(broker, "broker-b", "127.0.0.1:10931", names=("TopicA", "TopicB"))
        # the fixture's brokers expire after 120 s: gone this early, it was the closed connection
        await wait_for(lambda: _gone(admin, "TopicB"), timeout=20.0)
        r = await route(admin, "TopicA")
        assert r is None
        info = ClusterInfo.decode((await admin.invoke(rq.cluster_info())).body)
        assert info.broker_addr_table == {}


async def _gone(client: RemotingClient, topic: str) -> bool:
    return await route(client, topic) is None


async def test_silent_broker_expires_after_heartbeat_timeout(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    ns = start_namesrv(brokerChannelExpiredTime=1000, scanNotActiveBrokerInterval=100)
    async with connect(ns.addr) as broker, connect(ns.addr) as admin:
        await register(broker, "broker-a", "127.0.0.1:10911")
        await register(broker, "broker-b", "127.0.0.1:10931", names=("TopicB",), heartbeat_timeout_ms=3000)
        start = trio.current_time()
        await wait_for(lambda: _gone(admin, "TopicA"), timeout=20.0)
        assert trio.current_time() - start >= 0.9  # not before its timeout
        assert "broker broker-a 127.0.0.1:10911 (DefaultCluster) expired: no heartbeat within its timeout" in ns.log()
        # The connection was closed with the expired broker, as Java does,
        # which also drops broker-b that came over it.
        await wait_for(lambda: _gone(admin, "TopicB"), timeout=10.0)


async def test_heartbeats_keep_a_broker_alive(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    ns = start_namesrv(brokerChannelExpiredTime=800, scanNotActiveBrokerInterval=100)
    async with connect(ns.addr) as broker:
        await register(broker, "broker-a", "127.0.0.1:10911")
        ident = dict(cluster=CLUSTER, broker_name="broker-a", broker_addr="127.0.0.1:10911", broker_id=0)
        for i in range(8):
            await trio.sleep(0.25)
            if i % 2:
                resp = await broker.invoke(rq.broker_heartbeat(**ident))
            else:
                resp = await broker.invoke(rq.query_data_version(**ident, data_version=DataVersion(1, 1_700_000_000_000)))
                assert resp.ext_fields == {"changed": "false"}
                assert DataVersion.decode(resp.body) == DataVersion(1, 1_700_000_000_000)
            assert resp.code == ResponseCode.SUCCESS
        assert await route(broker, "TopicA") is not None


async def test_unregister_broker(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        await register(c, "broker-a", "127.0.0.1:10911")
        await register(c, "broker-a", "127.0.0.1:10921", broker_id=1)
        resp = await c.invoke(rq.unregister_broker(cluster=CLUSTER, broker_name="broker-a", broker_addr="127.0.0.1:10911", broker_id=0))
        assert resp.code == ResponseCode.SUCCESS
        info = ClusterInfo.decode((await c.invoke(rq.cluster_info())).body)
        assert info.broker_addr_table["broker-a"].broker_addrs == {1: "127.0.0.1:10921"}
        # No master: the topic has queue data and a broker, but producers get no queue.
        r = await route(c, "TopicA")
        assert r is not None and r.broker_datas[0].master_addr is None


# ---------------------------------------------------------------------------
# perms and topic lists


async def test_wipe_and_add_write_perm(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        await register(c, "broker-a", "127.0.0.1:10911", names=("TopicA", "TopicB"))
        resp = await c.invoke(rq.wipe_write_perm("broker-a"))
        assert resp.ext_fields == {"wipeTopicCount": "3"}
        r = await route(c, "TopicA")
        assert r is not None and r.queue_datas[0].perm == 4
        tbw = await route(c, "TBW102")
        assert tbw is not None and tbw.queue_datas[0].perm == 5
        # An unchanged re-registration does not undo the wipe (same data version).
        await register(c, "broker-a", "127.0.0.1:10911", names=("TopicA", "TopicB"))
        r = await route(c, "TopicA")
        assert r is not None and r.queue_datas[0].perm == 4
        resp = await c.invoke(rq.add_write_perm("broker-a"))
        assert resp.ext_fields == {"addTopicCount": "3"}
        r = await route(c, "TopicA")
        assert r is not None and r.queue_datas[0].perm == 6
        resp = await c.invoke(rq.wipe_write_perm("no-such-broker"))
        assert resp.ext_fields == {"wipeTopicCount": "0"}


async def test_topic_lists_and_delete(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        await register(c, "broker-a", "127.0.0.1:10911", names=("TopicA",))
        await register(c, "broker-b", "127.0.0.1:10931", names=("TopicB",), cluster="OtherCluster")
        all_topics, _ = parse_topic_list((await c.invoke(rq.all_topics())).body)
        assert sorted(all_topics) == ["TBW102", "TopicA", "TopicB"]
        by_cluster, _ = parse_topic_list((await c.invoke(rq.topics_by_cluster("OtherCluster"))).body)
        assert sorted(by_cluster) == ["TBW102", "TopicB"]
        unknown, _ = parse_topic_list((await c.invoke(rq.topics_by_cluster("Nope"))).body)
        assert unknown == []
        system, addr = parse_topic_list((await c.invoke(request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS))).body)
        assert sorted(system) == ["DefaultCluster", "OtherCluster", "broker-a", "broker-b"]
        assert addr in ("127.0.0.1:10911", "127.0.0.1:10931")
        await c.invoke(rq.delete_topic("TBW102", "OtherCluster"))
        r = await route(c, "TBW102")
        assert r is not None and [q.broker_name for q in r.queue_datas] == ["broker-a"]
        await c.invoke(rq.delete_topic("TopicA"))
        assert await route(c, "TopicA") is None


async def test_topic_list_switches(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    ns = start_namesrv(enableAllTopicList=False, enableTopicList=False)
    async with connect(ns.addr) as c:
        for req in (rq.all_topics(), rq.topics_by_cluster(CLUSTER), request(RequestCode.GET_UNIT_TOPIC_LIST)):
            resp = await c.invoke(req)
            assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "disable")


async def test_order_topic_conf_from_kv(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    ns = start_namesrv(orderMessageEnable=True)
    async with connect(ns.addr) as c:
        await register(c, "broker-a", "127.0.0.1:10911")
        assert (await c.invoke(rq.put_kv("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:2"))).code == 0
        r = await route(c, "TopicA")
        assert r is not None and r.order_topic_conf == "broker-a:2"
        r = await route(c, "TBW102")
        assert r is not None and r.order_topic_conf is None
        # The broker is told its order topics in the register answer.
        resp = await register(c, "broker-a", "127.0.0.1:10911", counter=2)
        assert parse_kv_table(resp.body) == {"TopicA": "broker-a:2"}


# ---------------------------------------------------------------------------
# KV config


async def test_kv_crud(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        assert (await c.invoke(rq.put_kv("ns1", "k1", "v1"))).code == ResponseCode.SUCCESS
        assert (await c.invoke(rq.put_kv("ns1", "k2", "v2"))).code == ResponseCode.SUCCESS
        resp = await c.invoke(rq.get_kv("ns1", "k1"))
        assert (resp.code, resp.ext_fields) == (ResponseCode.SUCCESS, {"value": "v1"})
        resp = await c.invoke(rq.kv_list("ns1"))
        assert parse_kv_table(resp.body) == {"k1": "v1", "k2": "v2"}
        assert (await c.invoke(rq.delete_kv("ns1", "k1"))).code == ResponseCode.SUCCESS
        resp = await c.invoke(rq.get_kv("ns1", "k1"))
        assert resp.code == ResponseCode.QUERY_NOT_FOUND
        assert resp.remark == "No config item, Namespace: ns1 Key: k1"
        resp = await c.invoke(rq.kv_list("missing"))
        assert (resp.code, resp.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: missing")
        resp = await c.invoke(request(RequestCode.PUT_KV_CONFIG, {"key": "k"}))
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "namespace or key is null")
    on_disk = json.loads(namesrv.kv_path.read_text())
    assert on_disk == {"configTable": {"ns1": {"k2": "v2"}}}


async def test_kv_survives_restart_and_kill_9(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    ns = start_namesrv()
    async with connect(ns.addr) as c:
        assert (await c.invoke(rq.put_kv("app", "a", "1"))).code == 0
    assert ns.terminate() == 0
    ns.start()
    async with connect(ns.addr) as c:
        assert (await c.invoke(rq.get_kv("app", "a"))).ext_fields == {"value": "1"}
        for i in range(50):
            assert (await c.invoke(rq.put_kv("app", f"k{i}", "x" * i))).code == 0
    ns.kill()  # SIGKILL right after the last acknowledged write
    ns.start()
    async with connect(ns.addr) as c:
        table = parse_kv_table((await c.invoke(rq.kv_list("app"))).body)
        assert table == {"a": "1", **{f"k{i}": "x" * i for i in range(50)}}
    assert not [p for p in os.listdir(ns.workdir) if p.endswith(".tmp")]


async def test_kill_9_during_write_storm_never_corrupts(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    ns = start_namesrv()
    acked: dict[str, str] = {}

    async def writer(c: RemotingClient) -> None:
        for i in range(10_000):
            resp = await c.invoke(rq.put_kv("storm", f"k{i % 64}", f"v{i}"))
            if resp.code != 0:
                return
            acked[f"k{i % 64}"] = f"v{i}"

    async with connect(ns.addr) as c:
        with trio.move_on_after(0.5):
            await writer(c)
        assert ns.proc is not None
        ns.proc.send_signal(signal.SIGKILL)
        ns.proc.wait(5)
    assert acked, "no write was acknowledged"
    data = json.loads(ns.kv_path.read_text())  # never half-written
    stored = data["configTable"]["storm"]
    # Every acknowledged write is there; a later unacknowledged one may be too.
    for key, value in acked.items():
        assert int(stored[key][1:]) >= int(value[1:])


# ---------------------------------------------------------------------------
# configuration


async def test_config_get_update_and_blacklist(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    ns = start_namesrv()
    async with connect(ns.addr) as c:
        text = (await c.invoke(rq.get_namesrv_config())).body.decode()
        lines = text.splitlines()
        assert lines == sorted(lines)
        assert "enableTopicList=true" in lines and f"kvConfigPath={ns.kv_path}" in lines

        resp = await c.invoke(rq.update_namesrv_config({"enableTopicList": "false"}))
        assert resp.code == ResponseCode.SUCCESS
        resp = await c.invoke(rq.topics_by_cluster(CLUSTER))
        assert resp.remark == "disable"  # took effect at once
        assert "enableTopicList=false" in ns.config_path.read_text()  # and was persisted

        for key in ("kvConfigPath", "configStorePath", "configBlackList", "rocketmqHome", "someLogPath"):
            resp = await c.invoke(rq.update_namesrv_config({key: "/tmp/evil", "enableTopicList": "true"}))
            assert (resp.code, resp.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        text = (await c.invoke(rq.get_namesrv_config())).body.decode()
        assert "enableTopicList=false" in text and "/tmp/evil" not in text

        resp = await c.invoke(request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"a=\\u12"))
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "string2Properties error")
        resp = await c.invoke(rq.update_namesrv_config({"scanNotActiveBrokerInterval": "soon"}))
        assert resp.code == ResponseCode.SYSTEM_ERROR and "scanNotActiveBrokerInterval" in (resp.remark or "")


# ---------------------------------------------------------------------------
# hostile input


def _raw(addr: str) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=5)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize(
    "frame",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # garbage: a huge declared length
        struct.pack(">II", 8, 100) + b"\0" * 4,  # header longer than its frame
        struct.pack(">I", 16 * 1024 * 1024 + 1),  # over the frame limit
        struct.pack(">II", 4 + 9, 9) + b"{not json",  # invalid JSON header
        struct.pack(">II", 4 + 13, 13) + b'{"opaque":{}}',  # wrong field type
        struct.pack(">II", 4 + 3, (7 << 24) | 3) + b"abc",  # unknown serialize type
        struct.pack(">II", 4 + 2, 2) + b"[]",  # header not an object
    ],
)
async def test_malformed_frame_closes_only_that_connection(namesrv: NamesrvProcess, frame: bytes) -> None:
    async with connect(namesrv.addr) as good:
        await register(good, "broker-a", "127.0.0.1:10911")
        bad = _raw(namesrv.addr)
        bad.sendall(frame)
        assert await trio.to_thread.run_sync(_closed_by_server, bad)
        bad.close()
        assert await route(good, "TopicA") is not None  # other connections go on
    assert "closing connection" in namesrv.log()
    assert namesrv.proc is not None and namesrv.proc.poll() is None


async def test_pipelined_requests_are_answered_in_order(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        await register(c, "broker-a", "127.0.0.1:10911")
        sock = _raw(namesrv.addr)
        frames = b"".join(
            encode(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"}, opaque=i)) for i in range(200)
        )
        await trio.to_thread.run_sync(sock.sendall, frames)
        got: list[RemotingCommand] = []
        dec = FrameDecoder()
        while len(got) < 200:
            got.extend(dec.feed(await trio.to_thread.run_sync(sock.recv, 65536)))
        assert [r.opaque for r in got] == list(range(200))
        assert all(r.code == 0 and r.flag == 1 for r in got)
        sock.close()


# ---------------------------------------------------------------------------
# lifecycle


def test_sigterm_stops_with_a_client_connected(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    ns = start_namesrv()
    idle = _raw(ns.addr)  # an open client connection must not hold up the stop (how long it takes: bench/)
    assert ns.terminate(timeout=30) == 0
    idle.close()


def test_sigint_finishes_in_flight_request(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    ns = start_namesrv()
    sock = _raw(ns.addr)
    sock.sendall(encode(rq.put_kv("final", "k", "v")))
    assert ns.proc is not None
    ns.proc.send_signal(signal.SIGINT)
    dec = FrameDecoder()
    answers: list[RemotingCommand] = []
    sock.settimeout(5)
    while not answers:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:  # the signal came before the request was read: closed unread, never acknowledged
            break
        if not data:
            break
        answers.extend(dec.feed(data))
    assert ns.proc.wait(5) == 0
    if answers:  # acknowledged means persisted
        assert json.loads(ns.kv_path.read_text())["configTable"]["final"] == {"k": "v"}
    sock.close()


def test_port_in_use_is_one_clear_line(start_namesrv, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ns = start_namesrv()
    port = ns.addr.rsplit(":", 1)[1]
    cfg = tmp_path / "second.properties"
    cfg.write_text(f"listenPort={port}\nbindAddress=127.0.0.1\nkvConfigPath={tmp_path}/kv2.json\n")
    out = subprocess.run([sys.executable, "-m", "namesrv.cli", "-c", str(cfg)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == f"mqnamesrv: cannot listen on 127.0.0.1:{port}: Address already in use"
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "content, message",
    [
        ("listenPort=abc\n", "listenPort='abc' is not an integer"),
        ("orderMessageEnable=yes\n", "orderMessageEnable='yes' is not true or false"),
        ("listenPort=70000\n", "listenPort 70000 is not a TCP port"),
        ("a=\\u12\n", "Malformed \\uxxxx encoding."),
    ],
)
def test_bad_config_file_is_one_clear_line(tmp_path, content: str, message: str) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "bad.properties"
    cfg.write_text(content)
    out = subprocess.run([sys.executable, "-m", "namesrv.cli", "-c", str(cfg)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and message in out.stderr
    assert "Traceback" not in out.stderr


def test_print_config_and_bad_option(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "ns.properties"
    cfg.write_text("listenPort=9999\ncustomKey=1\n")
    out = subprocess.run([sys.executable, "-m", "namesrv.cli", "-c", str(cfg), "-p"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    assert "listenPort=9999" in out.stdout.splitlines() and "scanNotActiveBrokerInterval=5000" in out.stdout
    out = subprocess.run([sys.executable, "-m", "namesrv.cli", "--bogus"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--bogus" in out.stderr


def test_corrupt_kv_file_is_one_clear_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    kv = tmp_path / "kv.json"
    kv.write_text("{broken")
    cfg = tmp_path / "ns.properties"
    cfg.write_text(f"listenPort=0\nbindAddress=127.0.0.1\nkvConfigPath={kv}\n")
    out = subprocess.run([sys.executable, "-m", "namesrv.cli", "-c", str(cfg)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and str(kv) in out.stderr


async def test_idle_connection_is_closed_and_its_broker_dropped(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    ns = start_namesrv(serverChannelMaxIdleTimeSeconds=1, brokerChannelExpiredTime=60000)
    async with connect(ns.addr) as admin:
        idle = _raw(ns.addr)
        req = rq.register_broker(
            cluster=CLUSTER, broker_name="broker-a", broker_addr="127.0.0.1:10911", broker_id=0,
            topics=topics("TopicA"), data_version=DataVersion(1, 1),
        )
        await trio.to_thread.run_sync(idle.sendall, encode(req))
        dec = FrameDecoder()
        while not dec.feed(await trio.to_thread.run_sync(idle.recv, 65536)):
            pass
        assert await route(admin, "TopicA") is not None
        # The admin connection stays busy; the broker's goes quiet.
        quiet_since = trio.current_time()
        with trio.fail_after(30):
            while await route(admin, "TopicA") is not None:
                await trio.sleep(0.1)
        assert trio.current_time() - quiet_since >= 0.8  # not before its idle time (1 s)
        assert await trio.to_thread.run_sync(_closed_by_server, idle)
        idle.close()


async def test_delete_in_unknown_namespace_creates_nothing(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        assert (await c.invoke(rq.delete_kv("ghost", "k"))).code == ResponseCode.SUCCESS
        assert (await c.invoke(rq.kv_list("ghost"))).code == ResponseCode.QUERY_NOT_FOUND
