"""GET_CONSUMER_RUNNING_INFO (307), GET_BROKER_CONSUME_STATS (317) and GET_ALL_PRODUCER_INFO (328)
against real broker stub processes over loopback TCP.

The expected shapes and orders are what Java 5.3.3 brokers answered to the
same requests: 307 relays the consumer's own response, 317 lists groups in
the order a Java broker's group table iterates them, 328 lists producer
groups in the order a Java HashMap iterates them (orders seen from Java:
``SELF_TEST_C_GROUP, G4, G5, GS, CID_ONSAPI_OWNER, ...`` and ``PGX5, PGX4,
CLIENT_INNER_PRODUCER``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
import trio

from remoting.codes import LanguageCode, RequestCode, ResponseCode
from remoting.command import RemotingCommand, request, response_to
from remoting.mqjson import MessageQueue, loads, mq_table
from remoting.transport import connect
from simclient import ClientPool
from simclient.consumer import SimConsumer
from simclient.consumer_options import ConsumerOptions
from tests.broker_wire import call, create_topic, send_v2
from tests.test_broker_stub import RawConn, eventually, heartbeat

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

#: The group table order a Java 5.3.3 broker answered 317 with (G5 left out: not used here).
JAVA_GROUP_ORDER = ["SELF_TEST_C_GROUP", "G4", "GS", "CID_ONSAPI_OWNER", "CID_ONSAPI_PERMISSION", "CID_RMQ_SYS_TRANS",
                    "TOOLS_CONSUMER", "CID_ONS-HTTP-PROXY", "FILTERSRV_CONSUMER", "CID_ONSAPI_PULL"]


def running_info_request(group: str, client_id: str) -> RemotingCommand:
    return request(RequestCode.GET_CONSUMER_RUNNING_INFO,
                   {"consumerGroup": group, "clientId": client_id, "jstackEnable": "false"})


def producer_heartbeat(client_id: str, *groups: str) -> RemotingCommand:
    body = {"clientID": client_id, "consumerDataSet": [], "producerDataSet": [{"groupName": g} for g in groups]}
    return request(RequestCode.HEART_BEAT, body=json.dumps(body).encode())


def commit(group: str, topic: str, queue_id: int, offset: int) -> RemotingCommand:
    return request(RequestCode.UPDATE_CONSUMER_OFFSET,
                   {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset})


# --------------------------------------------------------------------------
# 307


async def test_running_info_is_relayed_to_the_consumer_and_its_answer_back(
    start_broker: Callable[..., BrokerProcess],
) -> None:
    broker = start_broker(namesrvAddr="")
    consumer = await RawConn.open(broker.addr)
    intruder = await RawConn.open(broker.addr)
    admin = await RawConn.open(broker.addr)
    async with consumer.stream, intruder.stream, admin.stream:
        await consumer.send(heartbeat("C1", group="G"), 1)
        assert (await consumer.response(1)).code == ResponseCode.SUCCESS
        await admin.send(running_info_request("G", "C1"), 77)
        asked = await consumer.wait_for(lambda c: c.code == RequestCode.GET_CONSUMER_RUNNING_INFO and not c.is_response)
        assert asked.ext_fields == {"consumerGroup": "G", "clientId": "C1", "jstackEnable": "false"}
        assert asked.flag == 0 and asked.language == LanguageCode.JAVA
        # a response with the right opaque on another connection is not the consumer's: ignored
        await intruder.stream.send_all(_encode(response_to(asked, ResponseCode.SUCCESS, body=b"forged")))
        # the consumer's own response, its remark, fields, language and version as they are
        answer = response_to(asked, ResponseCode.SUCCESS, "not set any response code", ext_fields={"k": "v"},
                             body=b'{"properties":{}}')
        answer.language, answer.version = LanguageCode.PYTHON, 407
        await consumer.stream.send_all(_encode(answer))
        relayed = await admin.response(77)
        assert (relayed.code, relayed.remark, relayed.body) == (0, "not set any response code", b'{"properties":{}}')
        assert relayed.ext_fields == {"k": "v"} and relayed.language == LanguageCode.PYTHON and relayed.version == 407
        # unknown consumer, a client too old to be asked (Java: below V3_1_8_SNAPSHOT)
        gone = await call(broker.addr, running_info_request("G", "nobody"))
        assert (gone.code, gone.remark) == (ResponseCode.SYSTEM_ERROR, "The Consumer <G> <nobody> not online")
        old = heartbeat("C0", group="G")
        old.version = 30
        await consumer.send(old, 2)
        assert (await consumer.response(2)).code == ResponseCode.SUCCESS
        refused = await call(broker.addr, running_info_request("G", "C0"))
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert refused.remark == "The Consumer <C0> Version <V3_0_8_SNAPSHOT> too low to finish, please upgrade it to V3_1_8_SNAPSHOT"


async def test_a_silent_or_gone_consumer_gets_java_s_errors(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="")
    silent = await RawConn.open(broker.addr)
    leaving = await RawConn.open(broker.addr)
    admin = await RawConn.open(broker.addr)
    async with silent.stream, admin.stream:
        await silent.send(heartbeat("SILENT", group="G"), 1)
        await leaving.send(heartbeat("LEAVING", group="G"), 1)
        assert (await silent.response(1)).code == (await leaving.response(1)).code == ResponseCode.SUCCESS
        await admin.send(running_info_request("G", "SILENT"), 5)
        await admin.send(running_info_request("G", "LEAVING"), 6)
        await leaving.wait_for(lambda c: c.code == RequestCode.GET_CONSUMER_RUNNING_INFO)
        await leaving.stream.aclose()
        closed = await admin.response(6, timeout=5)
        assert closed.code == ResponseCode.SYSTEM_ERROR
        assert (closed.remark or "").startswith("invoke consumer <G> <LEAVING> Exception: ")
        timed_out = await admin.response(5, timeout=20)  # Broker2Client waits 10 s
        assert timed_out.code == ResponseCode.CONSUME_MSG_TIMEOUT
        assert (timed_out.remark or "").startswith("consumer <G> <SILENT> Timeout: ")
        assert "timeout, 10000(ms)" in (timed_out.remark or "")


async def test_a_simulated_consumer_answers_with_its_running_info(
    start_namesrv: Callable[..., object], start_broker: Callable[..., BrokerProcess]
) -> None:
    ns = start_namesrv()
    broker = start_broker(namesrvAddr=ns.addr, brokerName="broker-r")  # type: ignore[attr-defined]
    assert (await call(broker.addr, create_topic("RT", queues=2))).code == ResponseCode.SUCCESS
    opts = ConsumerOptions(namesrv_addrs=(ns.addr,), group="GR", subscriptions=(("RT", "TagA || TagB"),),  # type: ignore[attr-defined]
                           poll_name_server_interval=0.5, heartbeat_broker_interval=1.0, rebalance_interval=2.0)
    async with trio.open_nursery() as nursery, ClientPool() as pool:
        consumer = SimConsumer(opts, pool)
        await nursery.start(consumer.run)

        async def owns_both() -> bool:
            return len([q for q in consumer.owned() if q[0] == "RT"]) == 2

        await eventually(owns_both, 20, "the consumer owns both queues")
        resp = await call(broker.addr, running_info_request("GR", consumer.client_id))
        assert resp.code == ResponseCode.SUCCESS and resp.remark == "not set any response code"
        info = loads(resp.body)
        assert list(info) == ["mqPopTable", "mqTable", "properties", "statusTable", "subscriptionSet",
                              "userConsumerInfo"]
        props = info["properties"]
        assert props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and props["PROP_CONSUMEORDERLY"] == "false"
        assert props["PROP_CLIENT_VERSION"] == "V5_3_3" and props["consumerGroup"] == "GR"
        assert props["PROP_NAMESERVER_ADDR"] == f"{ns.addr};"  # type: ignore[attr-defined]
        assert 0 < int(props["PROP_CONSUMER_START_TIMESTAMP"]) <= int(time.time() * 1000)
        subs = info["subscriptionSet"]
        assert [s["topic"] for s in subs] == ["%RETRY%GR", "RT"]  # TreeSet order: topic@expression
        assert subs[1]["subString"] == "TagA || TagB" and sorted(subs[1]["tagsSet"]) == ["TagA", "TagB"]
        queues = mq_table(info["mqTable"])
        assert {MessageQueue("RT", "broker-r", 0), MessageQueue("RT", "broker-r", 1)} <= set(queues)
        assert list(queues) == sorted(queues)  # TreeMap order
        pq = queues[MessageQueue("RT", "broker-r", 0)]
        assert pq["droped"] is False and pq["cachedMsgCount"] == 0 and pq["lastPullTimestamp"] > 0
        assert set(info["statusTable"]) == {"%RETRY%GR", "RT"}
        nursery.cancel_scope.cancel()


def _encode(cmd: RemotingCommand) -> bytes:
    from remoting.codec import encode

    return encode(cmd)


# --------------------------------------------------------------------------
# 317


async def test_broker_consume_stats_lists_every_group_as_java_does(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="", brokerName="broker-s")
    t0 = int(time.time() * 1000)
    consumer = await RawConn.open(broker.addr)
    async with consumer.stream, connect(broker.addr) as c:
        for topic in ("CS", "OTHER"):
            assert (await c.invoke(create_topic(topic, queues=2))).code == ResponseCode.SUCCESS
        for i in range(5):
            assert (await c.invoke(send_v2("CS", f"m{i}".encode(), "", queue_id=i % 2))).code == ResponseCode.SUCCESS
        await consumer.send(heartbeat("C1", group="G4", topic="CS"), 1)  # creates group G4 (and subscribes CS)
        await consumer.send(heartbeat("C2", group="GS", topic="CS"), 2)
        assert (await consumer.response(1)).code == (await consumer.response(2)).code == ResponseCode.SUCCESS
        for req in (commit("G4", "CS", 0, 2), commit("G4", "OTHER", 0, 0), commit("NOGROUP", "CS", 0, 1)):
            assert (await c.invoke(req)).code == ResponseCode.SUCCESS
        resp = await c.invoke(request(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"}))
        assert resp.code == ResponseCode.SUCCESS, resp
        body = loads(resp.body)
        assert list(body) == ["brokerAddr", "consumeStatsList", "totalDiff", "totalInflightDiff"]
        assert body["brokerAddr"] == broker.addr
        groups = [next(iter(entry)) for entry in body["consumeStatsList"]]
        assert groups == JAVA_GROUP_ORDER  # a group without a subscription group (NOGROUP) is not listed
        by_group = {g: entry[g] for entry in body["consumeStatsList"] for g in entry}
        (stats,) = by_group["G4"]  # OTHER: the group's online consumers do not subscribe to it
        assert by_group["GS"] == [] and by_group["TOOLS_CONSUMER"] == []
        table = mq_table(stats["offsetTable"])
        assert sorted(table) == [MessageQueue("CS", "broker-s", 0), MessageQueue("CS", "broker-s", 1)]
        q0, q1 = table[MessageQueue("CS", "broker-s", 0)], table[MessageQueue("CS", "broker-s", 1)]
        assert list(q0) == ["brokerOffset", "consumerOffset", "lastTimestamp", "pullOffset"]
        assert (q0["brokerOffset"], q0["consumerOffset"], q0["pullOffset"]) == (3, 2, 0)
        assert t0 <= q0["lastTimestamp"] <= int(time.time() * 1000)  # store time of the last consumed message
        assert (q1["brokerOffset"], q1["consumerOffset"], q1["lastTimestamp"]) == (2, 0, 0)
        assert isinstance(stats["consumeTps"], float)
        assert body["totalDiff"] == 3 and body["totalInflightDiff"] == -2  # pullOffset 0, as 5.3.3 answers
        ordered = await c.invoke(request(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true"}))
        assert all(not entry[g] for entry in loads(ordered.body)["consumeStatsList"] for g in entry)
        assert loads(ordered.body)["totalDiff"] == 0


# --------------------------------------------------------------------------
# 328


async def test_producer_table_lists_live_producers_by_group(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="")
    empty = await call(broker.addr, request(RequestCode.GET_ALL_PRODUCER_INFO))
    assert (empty.code, empty.body) == (ResponseCode.SUCCESS, b'{"data":{}}')
    t0 = int(time.time() * 1000)
    async with connect(broker.addr) as p4, connect(broker.addr) as p5:
        assert (await p4.invoke(producer_heartbeat("c4", "PGX4", "CLIENT_INNER_PRODUCER"))).code == ResponseCode.SUCCESS
        assert (await p5.invoke(producer_heartbeat("c5", "PGX5"))).code == ResponseCode.SUCCESS
        resp = await call(broker.addr, request(RequestCode.GET_ALL_PRODUCER_INFO))
        assert resp.code == ResponseCode.SUCCESS
        data = loads(resp.body)["data"]
        assert list(data) == ["PGX5", "PGX4", "CLIENT_INNER_PRODUCER"]  # Java's HashMap order
        (info,) = data["PGX4"]
        assert list(info) == ["clientId", "language", "lastUpdateTimestamp", "remoteIP", "version"]
        assert (info["clientId"], info["language"], info["version"]) == ("c4", "JAVA", 479)
        assert info["remoteIP"].startswith("/127.0.0.1:") and int(info["remoteIP"].rsplit(":", 1)[1]) > 0
        assert t0 <= info["lastUpdateTimestamp"] <= int(time.time() * 1000)
        assert [i["clientId"] for i in data["CLIENT_INNER_PRODUCER"]] == ["c4"]
        assert data["PGX5"][0]["remoteIP"] != info["remoteIP"]  # each its own connection

    async def forgotten() -> bool:  # a client goes with its connection
        return (await call(broker.addr, request(RequestCode.GET_ALL_PRODUCER_INFO))).body == b'{"data":{}}'

    await eventually(forgotten, 5, "the producers forgotten")


async def test_an_answer_past_its_bound_is_refused_not_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """Built in-process (the bound lowered): more queues than MAX_ROWS is an error, not a partial total."""
    from broker_stub import consume_stats
    from broker_stub.config import BrokerConfig
    from broker_stub.faults import Faults
    from broker_stub.processor import BrokerProcessor
    from broker_stub.store import MessageStore
    from broker_stub.topics import TopicTable, default_topics
    from remoting.bodies import TopicConfig

    config = BrokerConfig(namesrvAddr="", brokerName="broker-b")
    topics = TopicTable(default_topics(config.brokerClusterName, config.brokerName, 8, True))
    topics.put(TopicConfig("BIG", 8, 8, 6))
    proc = BrokerProcessor(config, topics, MessageStore("127.0.0.1", 1, 100), Faults(), broker_addr="127.0.0.1:1")
    proc.consuming.set_offset("TOOLS_CONSUMER", "BIG", 0, 0)
    builder = proc.admin.broker_consume_stats
    monkeypatch.setattr(consume_stats, "MAX_ROWS", 7)
    with pytest.raises(consume_stats.TooManyRows, match="more than 7 queues"):
        await builder.build(False)
    monkeypatch.setattr(consume_stats, "MAX_ROWS", 8)
    body = loads(await builder.build(False))
    (stats,) = next(entry["TOOLS_CONSUMER"] for entry in body["consumeStatsList"] if "TOOLS_CONSUMER" in entry)
    assert len(mq_table(stats["offsetTable"])) == 8 and body["totalDiff"] == 0
