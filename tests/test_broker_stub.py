"""The broker stub as real processes beside a real mqnamesrv, over loopback TCP."""

from __future__ import annotations

import functools
import json
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Awaitable, Callable

import pytest
import trio

from remoting import properties
from remoting import requests as rq
from remoting.bodies import ClusterInfo, TopicRouteData, parse_kv_table
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, request
from remoting.transport import RemotingTimeout, connect
from tests.broker_wire import decode_stored

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

FAULT = 9000
UNIQ = "7F0000010A2B18B4AAC2476FE7A60000"


# --------------------------------------------------------------------------
# helpers


async def call(addr: str, req: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
    async with connect(addr) as client:
        return await client.invoke(req, timeout)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 30.0, what: str = "condition") -> float:
    """Poll ``check`` until true; returns the seconds it took."""
    start = trio.current_time()
    while True:
        if await check():
            return trio.current_time() - start
        if trio.current_time() - start > timeout:
            raise AssertionError(f"{what} not reached within {timeout} s")
        await trio.sleep(0.02)


async def route(ns: str, topic: str) -> TopicRouteData | None:
    resp = await call(ns, rq.get_route(topic))
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert resp.code == ResponseCode.SUCCESS, resp
    return TopicRouteData.decode(resp.body)


async def cluster(ns: str) -> ClusterInfo:
    resp = await call(ns, rq.cluster_info())
    assert resp.code == ResponseCode.SUCCESS, resp
    return ClusterInfo.decode(resp.body)


async def broker_addrs(ns: str, name: str) -> dict[int, str]:
    data = (await cluster(ns)).broker_addr_table.get(name)
    return dict(data.broker_addrs) if data else {}


def props_text(**props: str) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items())


def send_v2(topic: str, queue_id: int | str, body: bytes, *, uniq: str = UNIQ, default_queues: object = 4) -> RemotingCommand:
    # C++ style: some values as numbers (the codec stringifies them), others as strings.
    return request(
        RequestCode.SEND_MESSAGE_V2,
        {"a": "PG", "b": topic, "c": "TBW102", "d": default_queues, "e": queue_id, "f": 0, "g": str(int(time.time() * 1000)),
         "h": 0, "i": props_text(UNIQ_KEY=uniq, TAGS="tagA", WAIT="true"), "j": "0", "k": "false", "m": "false"},
        body,
    )


def send_v1(topic: str, queue_id: int, body: bytes, *, uniq: str = UNIQ) -> RemotingCommand:
    return request(
        RequestCode.SEND_MESSAGE,
        {"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4, "queueId": queue_id,
         "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": 0, "properties": props_text(UNIQ_KEY=uniq),
         "reconsumeTimes": 0, "unitMode": False, "batch": False},
        body,
    )


def encode_batch(bodies: list[bytes]) -> bytes:
    out = b""
    for i, body in enumerate(bodies):
        props = props_text(UNIQ_KEY=f"{UNIQ[:-4]}{i:04X}", WAIT="true").encode()
        total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
        out += struct.pack(">iiiii", total, 0, 0, 0, len(body)) + body + struct.pack(">h", len(props)) + props
    return out


def send_batch(topic: str, queue_id: int, bodies: list[bytes]) -> RemotingCommand:
    return request(
        RequestCode.SEND_BATCH_MESSAGE,
        {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0", "g": "0", "h": "0", "i": "",
         "j": "0", "k": "false", "m": "true"},
        encode_batch(bodies),
    )


def create_topic(topic: str, queues: int = 4, perm: int = 6) -> RemotingCommand:
    return request(
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues, "perm": perm,
         "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False},
    )


def pull(topic: str, queue_id: int, offset: int, group: str = "CG", *, sys_flag: int = 4, suspend_ms: int = 0,
         subscription: str = "*", max_nums: int = 32) -> RemotingCommand:
    """A pull as Java's pull consumer sends it: with its subscription (flag 0x4); 0x2 asks to be held."""
    return request(
        RequestCode.PULL_MESSAGE,
        {"consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": max_nums,
         "sysFlag": sys_flag, "commitOffset": 0, "suspendTimeoutMillis": suspend_ms, "subscription": subscription,
         "subVersion": 0, "expressionType": "TAG"},
    )


def fault(action: str, **ext: object) -> RemotingCommand:
    return request(FAULT, {"action": action, **ext})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------
# registration


async def test_master_and_slave_register_and_slave_learns_master(start_namesrv, start_broker) -> None:
    ns = start_namesrv()
    master = start_broker("m", brokerName="broker-a", brokerId=0, namesrvAddr=ns.addr)
    slave = start_broker("s", brokerName="broker-a", brokerId=1, namesrvAddr=ns.addr)

    async def both() -> bool:
        return await broker_addrs(ns.addr, "broker-a") == {0: master.addr, 1: slave.addr}

    await eventually(both, what="master and slave in cluster info")
    info = await cluster(ns.addr)
    assert set(info.cluster_addr_table["DefaultCluster"]) == {"broker-a"}
    for topic in ("TBW102", "SELF_TEST_TOPIC", "DefaultCluster", "broker-a", "OFFSET_MOVED_EVENT"):
        r = await route(ns.addr, topic)
        assert r is not None and r.broker_datas[0].broker_addrs == {0: master.addr, 1: slave.addr}, topic
    tbw = await route(ns.addr, "TBW102")
    assert tbw is not None and tbw.queue_datas[0].perm == 7 and tbw.queue_datas[0].write_queue_nums == 8

    async def slave_knows_master() -> bool:
        resp = await call(slave.addr, request(RequestCode.GET_BROKER_RUNTIME_INFO))
        return parse_kv_table(resp.body).get("masterAddr") == master.addr

    await eventually(slave_knows_master, what="slave learning its master")
    # A slave refuses sends like a Java slave store does.
    resp = await call(slave.addr, send_v2("TBW102x", 0, b"x"))
    assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE


async def test_topic_created_is_routable_within_one_second(start_namesrv, start_broker) -> None:
    ns = start_namesrv()
    # only a kick can be fast; and the registration body is compressed, as for large topic tables
    broker = start_broker(namesrvAddr=ns.addr, registerNameServerPeriod=30000, compressedRegister=True)
    await eventually(lambda: _has(ns.addr, "TBW102"), what="first registration")
    resp = await call(broker.addr, create_topic("OrderTopic", queues=3))
    assert resp.code == ResponseCode.SUCCESS, resp
    # well within the 30 s registration period: only the kick after the topic change can have done it
    await eventually(lambda: _has(ns.addr, "OrderTopic"), timeout=20.0, what="route for new topic")
    r = await route(ns.addr, "OrderTopic")
    assert r is not None and (r.queue_datas[0].read_queue_nums, r.queue_datas[0].perm) == (3, 6)

    resp = await call(broker.addr, request(RequestCode.GET_ALL_TOPIC_CONFIG))
    table = json.loads(resp.body)["topicConfigTable"]
    assert table["OrderTopic"]["writeQueueNums"] == 3 and "TBW102" in table
    resp = await call(broker.addr, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "OrderTopic"}))
    assert resp.code == ResponseCode.SUCCESS
    resp = await call(broker.addr, request(RequestCode.GET_ALL_TOPIC_CONFIG))
    assert "OrderTopic" not in json.loads(resp.body)["topicConfigTable"]
    resp = await call(broker.addr, create_topic("bad topic!"))  # 5.3.3's code (4.9.7 answered SYSTEM_ERROR)
    assert resp.code == ResponseCode.INVALID_PARAMETER and "illegal" in (resp.remark or "")


async def _has(ns: str, topic: str) -> bool:
    return await route(ns, topic) is not None


async def test_one_dead_namesrv_does_not_block_and_is_joined_when_it_starts(start_namesrv, start_broker) -> None:
    live = start_namesrv("live")
    port = free_port()
    dead = f"127.0.0.1:{port}"
    broker = start_broker(namesrvAddr=f"{dead};{live.addr}", registerBrokerTimeoutMills=1000)
    await eventually(lambda: _has(live.addr, "TBW102"), timeout=2.0, what="registration with the live namesrv")
    late = start_namesrv("late", listenPort=port)
    await eventually(lambda: _has(late.addr, "TBW102"), timeout=8.0, what="registration after the namesrv came up")
    assert await broker_addrs(late.addr, "broker-a") == {0: broker.addr}


async def test_a_namesrv_that_drops_every_connection_is_dialled_once_per_period(start_broker) -> None:
    """A connection that breaks during its first registration is not re-dialled in a tight loop."""
    accepted = 0

    async def drop(stream: trio.SocketStream) -> None:
        nonlocal accepted
        accepted += 1
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, drop, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        broker = start_broker(namesrvAddr=f"127.0.0.1:{port}", registerNameServerPeriod=1000)
        await trio.sleep(2.5)
        nursery.cancel_scope.cancel()
    assert 1 <= accepted <= 5, accepted
    assert "connection closed during the first registration" in broker.log()


async def test_sigterm_unregisters_at_once_and_exits_zero(start_namesrv, start_broker) -> None:
    ns = start_namesrv(brokerChannelExpiredTime=600000)
    broker = start_broker(namesrvAddr=ns.addr)
    await eventually(lambda: _has(ns.addr, "TBW102"), what="registration")
    assert broker.terminate() == 0
    # gone at once: its channel would only expire after 600 s, so the broker unregistered itself
    assert await route(ns.addr, "TBW102") is None
    assert await broker_addrs(ns.addr, "broker-a") == {}
    assert "unregistered from" in broker.log()


async def test_kill9_is_dropped_when_its_connection_closes(start_namesrv, start_broker) -> None:
    ns = start_namesrv(brokerChannelExpiredTime=600000)
    broker = start_broker(namesrvAddr=ns.addr)
    await eventually(lambda: _has(ns.addr, "TBW102"), what="registration")
    broker.kill()
    await eventually(lambda: _not(_has(ns.addr, "TBW102")), timeout=20.0, what="route gone after kill -9")


async def _not(aw: Awaitable[bool]) -> bool:
    return not await aw


async def test_topics_survive_a_restart_when_store_path_is_set(start_namesrv, start_broker, tmp_path) -> None:
    """With storePathRootDir, topics.json is written before a change is answered and read back on start."""
    ns = start_namesrv(brokerChannelExpiredTime=600000)
    store = tmp_path / "store"
    broker = start_broker(namesrvAddr=ns.addr, storePathRootDir=store)
    await eventually(lambda: _has(ns.addr, "TBW102"), what="registration")
    assert (await call(broker.addr, create_topic("Kept", queues=3))).code == ResponseCode.SUCCESS
    assert (await call(broker.addr, create_topic("Dropped"))).code == ResponseCode.SUCCESS
    deleted = await call(broker.addr, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Dropped"}))
    assert deleted.code == ResponseCode.SUCCESS
    saved = json.loads((store / "config" / "topics.json").read_bytes())  # Java's file, Java's shape
    assert saved["topicConfigTable"]["Kept"]["readQueueNums"] == 3 and "Dropped" not in saved["topicConfigTable"]
    assert "TBW102" in saved["topicConfigTable"]
    counter_before = saved["dataVersion"]["counter"]

    broker.kill()  # kill -9 right after the answers: what was acknowledged is on disk
    await eventually(lambda: _not(_has(ns.addr, "Kept")), timeout=20.0, what="route gone after kill -9")
    broker.start()
    await eventually(lambda: _has(ns.addr, "Kept"), timeout=3.0, what="route back after the restart")
    r = await route(ns.addr, "Kept")
    assert r is not None and r.queue_datas[0].read_queue_nums == 3
    assert await route(ns.addr, "Dropped") is None
    table = json.loads((await call(broker.addr, request(RequestCode.GET_ALL_TOPIC_CONFIG))).body)
    assert table["topicConfigTable"]["Kept"]["writeQueueNums"] == 3
    assert table["dataVersion"]["counter"] > counter_before  # the version goes on from the saved one

    memory_only = start_broker("mem", namesrvAddr=ns.addr, brokerName="broker-m")  # the default: no file
    assert (await call(memory_only.addr, create_topic("Forgotten"))).code == ResponseCode.SUCCESS
    memory_only.kill()
    memory_only.start()
    table = json.loads((await call(memory_only.addr, request(RequestCode.GET_ALL_TOPIC_CONFIG))).body)
    assert "Forgotten" not in table["topicConfigTable"] and "TBW102" in table["topicConfigTable"]
    assert not list(memory_only.workdir.rglob("topics.json"))


def test_unreadable_topics_file_is_one_line(tmp_path) -> None:
    from tests.broker_procs import broker_command  # the module is loaded as a plugin

    store = tmp_path / "store"
    (store / "config").mkdir(parents=True)
    (store / "config" / "topics.json").write_text("{not json")
    cfg = tmp_path / "broker.properties"
    cfg.write_text(f"storePathRootDir={store}\nlistenPort=0\n")
    out = subprocess.run(broker_command() + ["-c", str(cfg)], capture_output=True, text=True, timeout=20, check=False)
    assert out.returncode != 0 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "topics.json is not a topics file" in out.stderr


# --------------------------------------------------------------------------
# producing and consuming


async def test_send_v2_v1_batch_and_pull_round_trip(start_namesrv, start_broker) -> None:
    ns = start_namesrv()
    broker = start_broker(namesrvAddr=ns.addr)
    host, port = broker.addr.split(":")
    async with connect(broker.addr) as c:
        assert (await c.invoke(create_topic("RT", queues=2))).code == ResponseCode.SUCCESS
        hb = {"clientID": "127.0.0.1@1#1", "producerDataSet": [{"groupName": "PG"}]}
        resp = await c.invoke(request(RequestCode.HEART_BEAT, body=(json.dumps(hb) + "\n").encode()))
        assert resp.code == ResponseCode.SUCCESS
        results = [await c.invoke(send_v2("RT", 1, b"hello-v2"))]
        results.append(await c.invoke(send_v1("RT", 1, b"hello-v1")))
        batch = await c.invoke(send_batch("RT", 1, [b"b0", b"b1", b"b2"]))
        other = await c.invoke(send_v2("RT", 0, b"queue0"))
    for resp in results + [batch, other]:
        assert resp.code == ResponseCode.SUCCESS, resp
        ext = resp.ext_fields or {}
        assert all(isinstance(v, str) for v in ext.values())
        assert ext["MSG_REGION"] == "DefaultRegion" and ext["TRACE_ON"] == "true"
    assert [r.ext("queueOffset") for r in results] == ["0", "1"]
    assert [r.ext("queueId") for r in results] == ["1", "1"]
    assert results[0].ext("transactionId") == UNIQ
    msg_id = results[0].ext("msgId") or ""
    assert len(msg_id) == 32 and msg_id == msg_id.upper()
    raw = bytes.fromhex(msg_id)
    assert socket.inet_ntoa(raw[:4]) == host and struct.unpack(">i", raw[4:8])[0] == int(port)
    assert batch.ext("queueOffset") == "2" and len((batch.ext("msgId") or "").split(",")) == 3
    assert other.ext("queueOffset") == "0" and other.ext("queueId") == "0"

    resp = await call(broker.addr, pull("RT", 1, 0))
    assert resp.code == ResponseCode.SUCCESS, resp
    assert resp.ext("nextBeginOffset") == "5" and resp.ext("minOffset") == "0" and resp.ext("maxOffset") == "5"
    assert resp.ext("suggestWhichBrokerId") == "0"
    msgs = decode_stored(resp.body)
    assert [m["body"] for m in msgs] == [b"hello-v2", b"hello-v1", b"b0", b"b1", b"b2"]
    assert [m["queueOffset"] for m in msgs] == [0, 1, 2, 3, 4]
    assert all(m["topic"] == "RT" and m["queueId"] == 1 and m["storeHost"] == broker.addr for m in msgs)
    assert "UNIQ_KEY\x01" + UNIQ in str(msgs[0]["props"]) and "TAGS\x01tagA" in str(msgs[0]["props"])
    # the offset message id encodes the stored physical offset
    assert struct.unpack(">q", raw[8:])[0] == msgs[0]["phys"]

    resp = await call(broker.addr, pull("RT", 1, 3))
    assert [m["queueOffset"] for m in decode_stored(resp.body)] == [3, 4]
    resp = await call(broker.addr, pull("RT", 1, 5))
    assert resp.code == ResponseCode.PULL_NOT_FOUND and resp.ext("nextBeginOffset") == "5"
    resp = await call(broker.addr, pull("RT", 1, 99))
    assert resp.code == ResponseCode.PULL_OFFSET_MOVED
    resp = await call(broker.addr, pull("Missing", 0, 0))
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    resp = await call(broker.addr, request(RequestCode.GET_MAX_OFFSET, {"topic": "RT", "queueId": 1}))
    assert resp.ext("offset") == "5"
    resp = await call(broker.addr, request(RequestCode.GET_MIN_OFFSET, {"topic": "RT", "queueId": 1}))
    assert resp.ext("offset") == "0"
    resp = await call(broker.addr, send_v2("RT", 7, b"bad queue"))
    assert resp.code == ResponseCode.SYSTEM_ERROR


async def test_bounded_queue_drops_oldest_and_moves_min_offset(start_broker) -> None:
    broker = start_broker(maxMessagesPerQueue=3, namesrvAddr="")
    async with connect(broker.addr) as c:
        assert (await c.invoke(create_topic("B", queues=1))).code == ResponseCode.SUCCESS
        for i in range(5):
            resp = await c.invoke(send_v2("B", 0, f"m{i}".encode()))
            assert resp.ext("queueOffset") == str(i)
        resp = await c.invoke(request(RequestCode.GET_MIN_OFFSET, {"topic": "B", "queueId": 0}))
        assert resp.ext("offset") == "2"
        resp = await c.invoke(pull("B", 0, 0))
        assert resp.code == ResponseCode.PULL_OFFSET_MOVED and resp.ext("nextBeginOffset") == "2"
        resp = await c.invoke(pull("B", 0, 2))
        assert [m["body"] for m in decode_stored(resp.body)] == [b"m2", b"m3", b"m4"]


class RawConn:
    """A plain connection that also sees what the broker sends unasked (NOTIFY_CONSUMER_IDS_CHANGED)
    and answers in any order: requests carry our own opaques, frames are collected as they come."""

    def __init__(self, stream: trio.SocketStream) -> None:
        from remoting.codec import FrameDecoder

        self.stream = stream
        self.decoder = FrameDecoder()
        self.seen: list[RemotingCommand] = []

    @classmethod
    async def open(cls, addr: str) -> RawConn:
        host, port = addr.split(":")
        return cls(await trio.open_tcp_stream(host, int(port)))

    async def send(self, req: RemotingCommand, opaque: int) -> None:
        from remoting.codec import encode

        req.opaque = opaque
        await self.stream.send_all(encode(req))

    async def wait_for(self, match: Callable[[RemotingCommand], bool], timeout: float = 30.0) -> RemotingCommand:
        with trio.fail_after(timeout):
            while True:
                for cmd in self.seen:
                    if match(cmd):
                        self.seen.remove(cmd)
                        return cmd
                data = await self.stream.receive_some(1 << 20)
                assert data, "broker closed the connection"
                self.seen.extend(self.decoder.feed(data))

    async def response(self, opaque: int, timeout: float = 3.0) -> RemotingCommand:
        return await self.wait_for(lambda c: c.is_response and c.opaque == opaque, timeout)


def heartbeat(client_id: str, group: str = "CG", topic: str = "CT", sub: str = "*", version: int = 1) -> RemotingCommand:
    """A Java push consumer's HEART_BEAT (5.x body, with its %RETRY% subscription)."""
    subs = [{"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": sub, "subVersion": version,
             "tagsSet": [] if sub == "*" else sub.split(" || "), "topic": topic},
            {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*", "subVersion": version,
             "tagsSet": [], "topic": f"%RETRY%{group}"}]
    body = {"clientID": client_id, "consumerDataSet": [{"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "consumeType": "CONSUME_PASSIVELY", "groupName": group, "messageModel": "CLUSTERING",
            "subscriptionDataSet": subs, "unitMode": False}], "heartbeatFingerprint": 0, "producerDataSet": [],
            "withoutSub": False}
    return request(RequestCode.HEART_BEAT, body=json.dumps(body).encode())


def send_tagged(topic: str, queue_id: int, body: bytes, tag: str) -> RemotingCommand:
    req = send_v2(topic, queue_id, body)
    assert req.ext_fields is not None
    req.ext_fields["i"] = props_text(UNIQ_KEY=UNIQ, TAGS=tag)
    return req


async def test_consumer_start_up_requests_as_a_java_push_consumer_sends_them(start_broker) -> None:
    broker = start_broker(namesrvAddr="")
    c1 = await RawConn.open(broker.addr)
    c2 = await RawConn.open(broker.addr)
    async with c1.stream, c2.stream, connect(broker.addr) as c:
        assert (await c.invoke(create_topic("CT", queues=2))).code == ResponseCode.SUCCESS
        await c1.send(heartbeat("c1", sub="TagA || TagB"), 1)
        resp = await c1.response(1)
        assert resp.code == ResponseCode.SUCCESS and resp.ext("IS_SUPPORT_HEART_BEAT_V2") == "true"
        # the group's retry topic exists from the first heartbeat on, as on a Java broker
        table = json.loads((await c.invoke(request(RequestCode.GET_ALL_TOPIC_CONFIG))).body)["topicConfigTable"]
        assert table["%RETRY%CG"]["readQueueNums"] == 1 and table["%RETRY%CG"]["perm"] == 6
        # a second member joins: the first is told to rebalance (oneway 40)
        await c2.send(heartbeat("c2", sub="TagA || TagB"), 1)
        assert (await c2.response(1)).code == ResponseCode.SUCCESS
        note = await c1.wait_for(lambda m: not m.is_response)
        assert note.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED and note.is_oneway and note.ext("consumerGroup") == "CG"
        resp = await c.invoke(request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"}))
        assert resp.code == ResponseCode.SUCCESS and sorted(json.loads(resp.body)["consumerIdList"]) == ["c1", "c2"]

        # where to start: nothing committed and nothing stored -> QUERY_NOT_FOUND (then GET_MAX_OFFSET)
        q = {"consumerGroup": "CG", "topic": "CT", "queueId": 0}
        resp = await c.invoke(request(RequestCode.QUERY_CONSUMER_OFFSET, q))
        assert resp.code == ResponseCode.QUERY_NOT_FOUND
        for i, tag in enumerate(["TagA", "TagC", "TagB", "TagC"]):
            assert (await c.invoke(send_tagged("CT", 0, f"m{i}".encode(), tag))).code == ResponseCode.SUCCESS
        resp = await c.invoke(request(RequestCode.QUERY_CONSUMER_OFFSET, q))
        assert resp.code == ResponseCode.SUCCESS and resp.ext("offset") == "0"  # first message still held
        resp = await c.invoke(request(RequestCode.QUERY_CONSUMER_OFFSET, {**q, "setZeroIfNotFound": "false"}))
        assert resp.code == ResponseCode.QUERY_NOT_FOUND
        resp = await c.invoke(request(RequestCode.GET_MAX_OFFSET, q))
        assert resp.ext("offset") == "4"

        # a push consumer's pull carries no subscription: the heartbeat's tags filter it
        resp = await c.invoke(pull("CT", 0, 0, sys_flag=0))
        assert resp.code == ResponseCode.SUCCESS and resp.remark == "FOUND"
        # the scan goes on past the last match, as Java's does: the next pull starts after all of them
        assert [m["body"] for m in decode_stored(resp.body)] == [b"m0", b"m2"] and resp.ext("nextBeginOffset") == "4"
        resp = await c.invoke(pull("CT", 0, 3, sys_flag=0))  # only a TagC left
        assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY and resp.ext("nextBeginOffset") == "4"
        resp = await c.invoke(pull("CT", 0, 0, sys_flag=4, subscription="TagC"))  # its own subscription wins
        assert [m["body"] for m in decode_stored(resp.body)] == [b"m1", b"m3"]
        resp = await c.invoke(pull("CT", 0, 0, group="Nobody", sys_flag=0))
        assert resp.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
        check = {"clientId": "c1", "group": "CG", "subscriptionData": {"expressionType": "SQL92", "subString": "a > 1",
                                                                        "topic": "CT"}}
        resp = await c.invoke(request(RequestCode.CHECK_CLIENT_CONFIG, body=json.dumps(check).encode()))
        assert resp.code == ResponseCode.SYSTEM_ERROR and "SQL92" in (resp.remark or "")
        resp = await c.invoke(pull("CT", 9, 0))
        assert resp.code == ResponseCode.INVALID_PARAMETER

        # progress: committed by UPDATE (also oneway) and by the pull's commit flag
        resp = await c.invoke(request(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": 2}))
        assert resp.code == ResponseCode.SUCCESS
        assert (await c.invoke(request(RequestCode.QUERY_CONSUMER_OFFSET, q))).ext("offset") == "2"
        await c.invoke_oneway(request(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "queueId": 1, "commitOffset": 7}))
        commit = pull("CT", 0, 3, sys_flag=1 | 4)
        assert commit.ext_fields is not None
        commit.ext_fields["commitOffset"] = "3"
        await c.invoke(commit)
        assert (await c.invoke(request(RequestCode.QUERY_CONSUMER_OFFSET, q))).ext("offset") == "3"
        assert (await c.invoke(request(RequestCode.QUERY_CONSUMER_OFFSET, {**q, "queueId": 1}))).ext("offset") == "7"
        resp = await c.invoke(request(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "topic": "Nope", "commitOffset": 1}))
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        resp = await c.invoke(request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "CT"}))
        assert json.loads(resp.body) == {"groupList": ["CG"]}

        # orderly consumers lock queues: one holder at a time
        mqs = [{"brokerName": "broker-a", "queueId": i, "topic": "CT"} for i in range(2)]
        lock = {"clientId": "c1", "consumerGroup": "CG", "mqSet": mqs, "onlyThisBroker": False}
        resp = await c.invoke(request(RequestCode.LOCK_BATCH_MQ, body=json.dumps(lock).encode()))
        assert sorted(m["queueId"] for m in json.loads(resp.body)["lockOKMQSet"]) == [0, 1]
        other = {**lock, "clientId": "c2"}
        resp = await c.invoke(request(RequestCode.LOCK_BATCH_MQ, body=json.dumps(other).encode()))
        assert json.loads(resp.body)["lockOKMQSet"] == []
        await c.invoke(request(RequestCode.UNLOCK_BATCH_MQ, body=json.dumps({**lock, "mqSet": mqs[:1]}).encode()))
        resp = await c.invoke(request(RequestCode.LOCK_BATCH_MQ, body=json.dumps(other).encode()))
        assert [m["queueId"] for m in json.loads(resp.body)["lockOKMQSet"]] == [0]

        # leaving: UNREGISTER_CLIENT and a closed connection both take members away (and notify)
        resp = await c.invoke(request(RequestCode.UNREGISTER_CLIENT, {"clientID": "c2", "consumerGroup": "CG"}))
        assert resp.code == ResponseCode.SUCCESS
        assert (await c1.wait_for(lambda m: not m.is_response)).code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
        await c1.stream.aclose()
        await eventually_code(c, request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"}),
                              ResponseCode.SYSTEM_ERROR)
        resp = await c.invoke(request(12345))
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and resp.remark == " request type 12345 not supported"


async def eventually_code(c, req: RemotingCommand, code: int, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return (await c.invoke(req)).code == code

    await eventually(check, timeout, what=f"code {code}")


async def test_long_polling_pull_is_held_until_a_message_arrives_without_blocking_the_connection(start_broker) -> None:
    broker = start_broker(namesrvAddr="")
    consumer = await RawConn.open(broker.addr)
    async with consumer.stream, connect(broker.addr) as producer:
        assert (await producer.invoke(create_topic("LP", queues=2))).code == ResponseCode.SUCCESS
        # held: a pull that finds nothing, with the suspend flag (Java push consumer: 15 s)
        await consumer.send(pull("LP", 0, 0, sys_flag=2 | 4, suspend_ms=10000, subscription="TagA"), 1)
        # the same connection is still served while the pull waits (answers by opaque, out of order)
        await consumer.send(request(RequestCode.GET_MAX_OFFSET, {"topic": "LP", "queueId": 0}), 2)
        assert (await consumer.response(2)).ext("offset") == "0"
        table = parse_kv_table((await producer.invoke(request(RequestCode.GET_BROKER_RUNTIME_INFO))).body)
        assert table["pullHoldRequestNum"] == "1"
        # a message for another queue, then one with another tag: still held
        await producer.invoke(send_tagged("LP", 1, b"other queue", "TagA"))
        await producer.invoke(send_tagged("LP", 0, b"other tag", "TagB"))
        with pytest.raises(trio.TooSlowError):
            await consumer.response(1, timeout=0.3)
        await producer.invoke(send_tagged("LP", 0, b"wanted", "TagA"))
        # answered by the arrival (with the message), not by the 10 s suspend running out (PULL_NOT_FOUND)
        resp = await consumer.response(1, timeout=8.0)
        assert resp.code == ResponseCode.SUCCESS and [m["body"] for m in decode_stored(resp.body)] == [b"wanted"]
        assert resp.ext("nextBeginOffset") == "2"

        # nothing arrives: answered PULL_NOT_FOUND when the suspend time is over, not before
        start = trio.current_time()
        await consumer.send(pull("LP", 1, 1, sys_flag=2 | 4, suspend_ms=400), 3)
        resp = await consumer.response(3, timeout=20.0)
        assert resp.code == ResponseCode.PULL_NOT_FOUND and resp.remark == "OFFSET_OVERFLOW_ONE"
        assert trio.current_time() - start >= 0.35
        # without the suspend flag: answered at once, not held for its 30 s suspend time
        resp = await producer.invoke(pull("LP", 1, 1, suspend_ms=30000), timeout=15.0)
        assert resp.code == ResponseCode.PULL_NOT_FOUND

        # a closed connection's held pulls are dropped
        await consumer.send(pull("LP", 1, 1, sys_flag=2 | 4, suspend_ms=10000), 4)
        await eventually(lambda: _held(producer, "1"), what="pull held")
    async with connect(broker.addr) as c:
        await eventually(lambda: _held(c, "0"), what="held pull dropped with its connection")


async def _held(c, count: str) -> bool:  # type: ignore[no-untyped-def]
    table = parse_kv_table((await c.invoke(request(RequestCode.GET_BROKER_RUNTIME_INFO))).body)
    return table["pullHoldRequestNum"] == count


async def test_send_back_goes_to_retry_topic_after_its_delay_then_to_dlq(start_broker) -> None:
    broker = start_broker(namesrvAddr="", messageDelayLevel="1s 1s 1s 1s 1s")
    async with connect(broker.addr) as c:
        assert (await c.invoke(create_topic("SB", queues=1))).code == ResponseCode.SUCCESS
        sent = await c.invoke(send_tagged("SB", 0, b"fails", "TagA"))
        phys = struct.unpack(">q", bytes.fromhex(sent.ext("msgId") or "")[8:])[0]
        back = {"offset": phys, "group": "CG", "delayLevel": 0, "originMsgId": sent.ext("msgId"), "originTopic": "SB",
                "unitMode": False, "maxReconsumeTimes": 1}
        assert (await c.invoke(request(RequestCode.CONSUMER_SEND_MSG_BACK, back))).code == ResponseCode.SUCCESS

        async def retried() -> bool:
            return (await c.invoke(pull("%RETRY%CG", 0, 0))).code == ResponseCode.SUCCESS

        took = await eventually(retried, timeout=5.0, what="message on the retry topic")
        assert took >= 0.8  # not before its delay (level 3 = 1 s here)
        msg = decode_stored((await c.invoke(pull("%RETRY%CG", 0, 0))).body)[0]
        props = str(msg["props"])
        assert msg["body"] == b"fails" and "RETRY_TOPIC\x01SB" in props and f"ORIGIN_MESSAGE_ID\x01{sent.ext('msgId')}" in props
        # it failed again: reconsumeTimes (1) has reached maxReconsumeTimes (1) -> dead-letter queue, at once
        again = {**back, "offset": msg["phys"]}
        assert (await c.invoke(request(RequestCode.CONSUMER_SEND_MSG_BACK, again))).code == ResponseCode.SUCCESS
        resp = await c.invoke(pull("%DLQ%CG", 0, 0))
        assert resp.code == ResponseCode.SUCCESS and decode_stored(resp.body)[0]["body"] == b"fails"
        resp = await c.invoke(request(RequestCode.CONSUMER_SEND_MSG_BACK, {**back, "offset": 999999}))
        assert resp.code == ResponseCode.SYSTEM_ERROR and "look message by offset failed" in (resp.remark or "")

        # VIEW_MESSAGE_BY_ID reads the stored record at that offset (mqadmin queryMsgById)
        resp = await c.invoke(request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phys}))
        assert resp.code == ResponseCode.SUCCESS and decode_stored(resp.body)[0]["body"] == b"fails"


async def test_offsets_by_time_earliest_store_time_and_min_offset_code(start_broker) -> None:
    broker = start_broker(namesrvAddr="", maxMessagesPerQueue=3)
    async with connect(broker.addr) as c:
        assert (await c.invoke(create_topic("TS", queues=1))).code == ResponseCode.SUCCESS
        q = {"topic": "TS", "queueId": 0}
        resp = await c.invoke(request(RequestCode.GET_EARLIEST_MSG_STORETIME, q))
        assert resp.ext("timestamp") == "-1"
        for i in range(4):  # the first is dropped (bound 3): min offset 1
            await c.invoke(send_v2("TS", 0, f"t{i}".encode()))
            await trio.sleep(0.02)  # distinct store times (ms)
        assert (await c.invoke(request(31, q))).ext("offset") == "1"  # GET_MIN_OFFSET is 31 on the wire
        stamps = {m["queueOffset"]: m["storeTs"] for m in decode_stored((await c.invoke(pull("TS", 0, 1))).body)}
        assert sorted(stamps) == [1, 2, 3] and stamps[1] < stamps[2] < stamps[3]
        resp = await c.invoke(request(RequestCode.GET_EARLIEST_MSG_STORETIME, q))
        assert resp.ext("timestamp") == str(stamps[1])

        async def search(ts: int, boundary: str | None = None) -> str | None:
            ext = {**q, "timestamp": ts, **({"boundaryType": boundary} if boundary else {})}
            return (await c.invoke(request(29, ext))).ext("offset")  # SEARCH_OFFSET_BY_TIMESTAMP

        assert await search(0) == "1"  # before everything held: the min offset
        assert await search(stamps[3] + 10_000) == "4"  # after everything: the max offset
        assert await search(stamps[2]) == "2" and await search(stamps[2] + 1) == "3"  # first at or after (LOWER)
        assert await search(stamps[3] - 1, "UPPER") == "2"  # last at or before


async def test_auto_create_from_tbw102_and_refusal_when_disabled(start_namesrv, start_broker) -> None:
    ns = start_namesrv()
    # forceRegister=false: each registration is preceded by QUERY_DATA_VERSION, as in Java
    broker = start_broker(namesrvAddr=ns.addr, registerNameServerPeriod=30000, forceRegister=False)
    await eventually(lambda: _has(ns.addr, "TBW102"), what="registration")
    resp = await call(broker.addr, send_v2("AutoTopic", 2, b"auto", default_queues=3))
    assert resp.code == ResponseCode.SUCCESS, resp
    assert resp.ext("queueOffset") == "0"
    await eventually(lambda: _has(ns.addr, "AutoTopic"), timeout=20.0, what="route of auto-created topic")
    r = await route(ns.addr, "AutoTopic")
    assert r is not None and (r.queue_datas[0].write_queue_nums, r.queue_datas[0].perm) == (3, 6)

    strict = start_broker("strict", brokerName="broker-b", namesrvAddr="", autoCreateTopicEnable=False)
    resp = await call(strict.addr, send_v2("AutoTopic", 0, b"x"))
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST and "not exist" in (resp.remark or "")


def cluster_list_row(table: dict[str, str]) -> dict[str, object]:
    """What Apache mqadmin clusterList (5.x, and 4.9.x for its own keys) computes from a broker's
    runtime table, with Java's parsers: any missing or malformed key raises here as it would there."""
    in_tps = float(table["putTps"].split(" ")[0])  # Double.parseDouble of the first of "10s 60s 600s"
    timer = (int(table["timerReadBehind"]), int(table["timerOffsetBehind"]), int(table["timerCongestNum"]),
             float(table["timerEnqueueTps"]), float(table["timerDequeueTps"]))
    for key in ("sendThreadPoolQueueSize", "pullThreadPoolQueueSize", "sendThreadPoolQueueHeadWaitTimeMills",
                "pullThreadPoolQueueHeadWaitTimeMills", "ackThreadPoolQueueSize", "ackThreadPoolQueueHeadWaitTimeMills"):
        int(table[key])
    return {
        "version": table["brokerVersionDesc"],
        "in_tps": in_tps,
        "in_tps_4_9": float(table["putTps"].split(" ")[0]),
        "out_tps": float(table["getTransferredTps"].split(" ")[0]),
        "out_tps_4_9": float(table["getTransferedTps"].split(" ")[0]),
        "timer": timer,
        "pc_wait": table["pageCacheLockTimeMills"],
        "hours": (time.time() * 1000 - int(table["earliestMessageTimeStamp"])) / 3_600_000,
        "space": float(table["commitLogDiskRatio"]),
        "active": table["brokerActive"].lower() == "true",
        # -m: Long.parseLong of the six day counters
        "in_yesterday": int(table["msgPutTotalTodayMorning"]) - int(table["msgPutTotalYesterdayMorning"]),
        "out_yesterday": int(table["msgGetTotalTodayMorning"]) - int(table["msgGetTotalYesterdayMorning"]),
        "in_today": int(table["msgPutTotalTodayNow"]) - int(table["msgPutTotalTodayMorning"]),
        "out_today": int(table["msgGetTotalTodayNow"]) - int(table["msgGetTotalTodayMorning"]),
    }


async def test_runtime_info_and_broker_config(start_namesrv, start_broker) -> None:
    ns = start_namesrv()
    broker = start_broker(namesrvAddr=ns.addr, registerNameServerPeriod=30000)
    await eventually(lambda: _has(ns.addr, "TBW102"), what="registration")
    t0 = int(time.time() * 1000)
    async with connect(broker.addr) as c:
        assert (await c.invoke(create_topic("RI", queues=1))).code == ResponseCode.SUCCESS
        for i in range(3):
            assert (await c.invoke(send_v2("RI", 0, f"r{i}".encode()))).code == ResponseCode.SUCCESS
        assert len(decode_stored((await c.invoke(pull("RI", 0, 0))).body)) == 3

        async def put_rate_seen() -> bool:
            table = parse_kv_table((await c.invoke(request(RequestCode.GET_BROKER_RUNTIME_INFO))).body)
            return float(table["putTps"].split(" ")[0]) > 0

        await eventually(put_rate_seen, timeout=5.0, what="a put rate")  # sampled once a second
        table = parse_kv_table((await c.invoke(request(RequestCode.GET_BROKER_RUNTIME_INFO))).body)
    row = cluster_list_row(table)
    assert row["version"] == "V5_3_3" and row["active"] is True
    assert row["in_tps"] > 0 and row["in_tps_4_9"] == row["in_tps"] and row["out_tps"] >= 0
    assert 0.0 <= row["space"] <= 1.0 and row["pc_wait"] == "0"
    assert t0 <= int(table["earliestMessageTimeStamp"]) <= int(time.time() * 1000)
    assert (row["in_today"], row["out_today"], row["in_yesterday"]) == (3, 3, 0)
    assert table["msgPutTotalTodayNow"] == "3" and table["msgGetTotalTodayNow"] == "3"

    body = properties.dumps({"brokerPermission": "4"}).encode()
    resp = await call(broker.addr, request(RequestCode.UPDATE_BROKER_CONFIG, body=body))
    assert resp.code == ResponseCode.SUCCESS, resp

    async def read_only() -> bool:
        r = await route(ns.addr, "TBW102")
        return r is not None and r.queue_datas[0].perm == 4

    await eventually(read_only, timeout=20.0, what="perm 4 in the route")
    resp = await call(broker.addr, send_v2("TBW102", 0, b"x"))
    assert resp.code == ResponseCode.NO_PERMISSION
    resp = await call(broker.addr, request(RequestCode.GET_BROKER_CONFIG))
    assert resp.code == ResponseCode.SUCCESS and "brokerPermission=4\n" in resp.body.decode()
    bad = properties.dumps({"listenPort": "1"}).encode()
    resp = await call(broker.addr, request(RequestCode.UPDATE_BROKER_CONFIG, body=bad))
    assert resp.code == ResponseCode.NO_PERMISSION and "listenPort" in (resp.remark or "")


# --------------------------------------------------------------------------
# faults


async def test_fault_latency_reject_hang_resume(start_broker) -> None:
    broker = start_broker(namesrvAddr="")
    async with connect(broker.addr) as ctl, connect(broker.addr) as c:
        assert (await ctl.invoke(fault("latency", millis=300))).code == ResponseCode.SUCCESS
        start = trio.current_time()
        assert (await c.invoke(send_v2("TBW102x", 0, b"slow"))).code == ResponseCode.SUCCESS
        assert trio.current_time() - start >= 0.3
        assert (await ctl.invoke(fault("latency", millis=0))).code == ResponseCode.SUCCESS

        resp = await ctl.invoke(fault("reject", code=14))
        assert resp.code == ResponseCode.SUCCESS and json.loads(resp.body)["rejectCode"] == 14
        assert (await c.invoke(send_v2("TBW102x", 0, b"no"))).code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert (await ctl.invoke(fault("clear"))).code == ResponseCode.SUCCESS
        assert (await c.invoke(send_v2("TBW102x", 0, b"yes"))).code == ResponseCode.SUCCESS

        assert (await ctl.invoke(fault("hang"))).code == ResponseCode.SUCCESS
        with pytest.raises(RemotingTimeout):
            await c.invoke(request(RequestCode.GET_BROKER_RUNTIME_INFO), 0.5)
        assert not c.closed  # the connection stays open
        assert json.loads((await ctl.invoke(fault("status"))).body)["hung"] is True
        assert (await ctl.invoke(fault("resume"))).code == ResponseCode.SUCCESS
        resp = await c.invoke(request(RequestCode.GET_BROKER_RUNTIME_INFO), 2.0)
        assert resp.code == ResponseCode.SUCCESS
        resp = await ctl.invoke(fault("explode"))
        assert resp.code == ResponseCode.INVALID_PARAMETER and "unknown fault action" in (resp.remark or "")


async def test_fault_partition_one_namesrv_with_acting_master_heartbeats(start_namesrv, start_broker) -> None:
    ns1, ns2 = start_namesrv("ns1"), start_namesrv("ns2")
    # Full registration only once (long period); liveness from 904 heartbeats every 200 ms,
    # 1 s timeout: so the partitioned NameServer expires the broker quickly.
    broker = start_broker(
        namesrvAddr=f"{ns1.addr};{ns2.addr}", registerNameServerPeriod=30000, enableSlaveActingMaster=True,
        brokerHeartbeatInterval=200, brokerNotActiveTimeoutMillis=1000,
    )
    await eventually(lambda: _has(ns1.addr, "TBW102"), what="registration ns1")
    await eventually(lambda: _has(ns2.addr, "TBW102"), what="registration ns2")
    await trio.sleep(1.5)  # longer than the timeout: only heartbeats keep it alive
    assert await _has(ns1.addr, "TBW102") and await _has(ns2.addr, "TBW102")
    resp = await call(broker.addr, fault("partition", namesrv=ns2.addr))
    assert resp.code == ResponseCode.SUCCESS and json.loads(resp.body)["partitioned"] == [ns2.addr]
    await eventually(lambda: _not(_has(ns2.addr, "TBW102")), timeout=3.0, what="expiry on the partitioned namesrv")
    assert await _has(ns1.addr, "TBW102")
    # The NameServer closed the expired broker's channel; like Java, the stub finds out when it next
    # registers (here: the heal, not the 30 s period) and then registers on a new connection.
    assert (await call(broker.addr, fault("heal"))).code == ResponseCode.SUCCESS
    await eventually(lambda: _has(ns2.addr, "TBW102"), timeout=20.0, what="re-registration after heal")
    assert "connection lost; registering on a new one" in broker.log()


# --------------------------------------------------------------------------
# command line


def test_bad_config_is_one_line_and_print_config(tmp_path) -> None:
    from tests.broker_procs import (
        broker_command,  # imported here: the module is loaded as a plugin
    )

    bad = tmp_path / "bad.properties"
    bad.write_text("brokerId=abc\n")
    out = subprocess.run(broker_command() + ["-c", str(bad)], capture_output=True, text=True, timeout=20, check=False)
    assert out.returncode != 0
    assert out.stderr.strip().count("\n") == 0 and "brokerId" in out.stderr and "Traceback" not in out.stderr
    bad.write_text("namesrvAddr=nohostport\n")
    out = subprocess.run(broker_command() + ["-c", str(bad)], capture_output=True, text=True, timeout=20, check=False)
    assert out.returncode != 0 and out.stderr.count("\n") == 1 and "namesrvAddr" in out.stderr
    bad.write_text("messageDelayLevel=1s 5x\n")
    out = subprocess.run(broker_command() + ["-c", str(bad)], capture_output=True, text=True, timeout=20, check=False)
    assert out.returncode != 0 and out.stderr.count("\n") == 1 and "messageDelayLevel" in out.stderr and "5x" in out.stderr
    good = tmp_path / "good.properties"
    good.write_text("brokerName=broker-z\nlistenPort=0\n")
    out = subprocess.run(broker_command() + ["-c", str(good), "-p"], capture_output=True, text=True, timeout=20, check=False)
    assert out.returncode == 0 and "brokerName=broker-z" in out.stdout and "defaultTopicQueueNums=8" in out.stdout


async def test_cpp_style_frame_with_numeric_ext_values(start_broker) -> None:
    """The C++ client sends some header values as JSON numbers and a trailing newline."""
    from remoting.codec import FrameDecoder

    broker = start_broker(namesrvAddr="")
    header = {"code": 310, "extFields": {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "", "a": "PG", "b": "Cpp",
              "c": "TBW102", "d": 4, "e": 1, "f": 0, "g": "1700000000000", "h": 0, "i": props_text(UNIQ_KEY=UNIQ),
              "j": "0", "k": "false", "l": 16, "m": "false"},
              "flag": 0, "language": "CPP", "opaque": 7, "remark": "", "version": 333}
    head = (json.dumps(header, separators=(",", ":")) + "\n").encode()
    body = b"from-cpp"
    frame = struct.pack(">ii", 4 + len(head) + len(body), len(head)) + head + body
    host, port = broker.addr.split(":")
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        await stream.send_all(frame)
        decoder = FrameDecoder()
        with trio.fail_after(3):
            responses: list[RemotingCommand] = []
            while not responses:
                responses = decoder.feed(await stream.receive_some(65536))
    resp = responses[0]
    assert resp.code == ResponseCode.SUCCESS and resp.opaque == 7, resp
    assert resp.ext("queueId") == "1" and resp.ext("queueOffset") == "0" and resp.ext("transactionId") == UNIQ


async def test_sigterm_while_hung_still_exits_zero(start_broker) -> None:
    broker = start_broker(namesrvAddr="")
    async with connect(broker.addr) as ctl, connect(broker.addr) as c:
        assert (await ctl.invoke(fault("hang"))).code == ResponseCode.SUCCESS
        with pytest.raises(RemotingTimeout):
            await c.invoke(request(RequestCode.GET_BROKER_RUNTIME_INFO), 0.2)
        assert broker.terminate(timeout=30) == 0  # a hung request does not keep the process alive


async def test_sigstop_then_sigcont_resumes_answers_and_registration(start_namesrv, start_broker) -> None:
    ns = start_namesrv(brokerChannelExpiredTime=1500)
    broker = start_broker(namesrvAddr=ns.addr, registerNameServerPeriod=300)
    await eventually(lambda: _has(ns.addr, "TBW102"), what="registration")
    assert broker.proc is not None
    broker.proc.send_signal(signal.SIGSTOP)  # a real hang: no heartbeats, no answers
    try:
        with pytest.raises(RemotingTimeout):
            await call(broker.addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout=0.3)
        await eventually(lambda: _not(_has(ns.addr, "TBW102")), timeout=6.0, what="expiry of the stopped broker")
    finally:
        broker.proc.send_signal(signal.SIGCONT)
    resp = await call(broker.addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout=3.0)
    assert resp.code == ResponseCode.SUCCESS
    await eventually(lambda: _has(ns.addr, "TBW102"), timeout=5.0, what="re-registration after SIGCONT")
    assert broker.terminate() == 0


def test_send_answer_fast_path_is_byte_identical_to_the_generic_encoding() -> None:
    from broker_stub.processor import send_ok_frame
    from remoting.codec import encode
    from remoting.command import response_to

    req = request(RequestCode.SEND_MESSAGE_V2, {"b": "T"}, opaque=123456)
    for tx in (UNIQ, None):
        ext: dict[str, object] = {"msgId": "7F0000010000273F00000000000004D2", "queueId": 3, "queueOffset": 77,
                                  "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
        if tx:
            ext["transactionId"] = tx
        generic = encode(response_to(req, ResponseCode.SUCCESS, ext_fields=ext))
        fast = send_ok_frame(123456, "7F0000010000273F00000000000004D2", 3, 77, "DefaultRegion", "true", tx)
        assert fast == generic

