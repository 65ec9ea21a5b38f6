"""The broker stub under hostile or careless input, over real TCP against real processes.

Issue 11 (broker part): fault codes bounded to int16 (a ROCKETMQ header
carries them in 16 bits), numeric header fields checked as Java's types,
a byte budget for the store, a bound on auto-created topics, topics.json
written off the event loop; issue 13: ``listenPort=0`` reported as the
bound port.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import trio
import trio.testing

from broker_stub.topic_store import TopicSaver
from remoting import properties
from remoting.bodies import DataVersion, TopicConfig
from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand, request
from remoting.transport import connect
from tests.broker_wire import (
    UNIQ,
    call,
    create_topic,
    decode_stored,
    props_5x,
    pull,
    send_batch,
    send_v1,
    send_v2,
)

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

FAULT = 9000
I32 = 2**31
I64 = 2**63


def no_traceback(log: str) -> None:
    assert "Traceback" not in log and "struct.error" not in log, log[-3000:]


# --------------------------------------------------------------------------
# fault codes


async def test_reject_code_beyond_int16_is_refused_and_binary_sends_keep_working(start_broker) -> None:
    broker = start_broker()
    for bad in ("70000", "32768", "-32769", "2147483647"):
        resp = await call(broker.addr, request(FAULT, {"action": "reject", "code": bad}))
        assert resp.code == ResponseCode.INVALID_PARAMETER, resp
        assert "[-32768, 32767]" in (resp.remark or "") and "16 bits" in (resp.remark or ""), resp.remark
    state = await call(broker.addr, request(FAULT, {"action": "status"}))
    assert json.loads(state.body)["rejectCode"] is None  # nothing was switched on
    # the broken sequence of the issue: now a binary-header send is simply stored
    resp = await call(broker.addr, send_v2("FaultTopic", b"x", props_5x(UNIQ_KEY=UNIQ), serialize=SerializeType.ROCKETMQ))
    assert resp.code == ResponseCode.SUCCESS and resp.serialize_type is SerializeType.ROCKETMQ, resp
    # the widest codes allowed are answered in both serializations
    for code in (32767, -32768):
        assert (await call(broker.addr, request(FAULT, {"action": "reject", "code": code}))).code == ResponseCode.SUCCESS
        for serialize in (SerializeType.ROCKETMQ, SerializeType.JSON):
            resp = await call(broker.addr, send_v2("FaultTopic", b"x", "", serialize=serialize))
            assert resp.code == code and resp.serialize_type is serialize, resp
    no_traceback(broker.log())


# --------------------------------------------------------------------------
# numeric header fields


def _req(code: int, **fields: object) -> RemotingCommand:
    return request(code, {"topic": "RangeTopic", "consumerGroup": "CG", "queueId": 0, **fields})


def out_of_range_cases() -> list[tuple[str, RemotingCommand, str]]:
    """(what, request, field named in the remark): one field beyond its Java type each."""
    huge = "9" * 5000  # more digits than Python parses by default: still a number, still out of range
    return [
        ("V2 sysFlag", send_v2("RangeTopic", b"x", "", f=I32), "sysFlag (f)"),
        ("V2 flag", send_v2("RangeTopic", b"x", "", h=I32), "flag (h)"),
        ("V2 reconsumeTimes", send_v2("RangeTopic", b"x", "", j=I32), "reconsumeTimes (j)"),
        ("V2 bornTimestamp", send_v2("RangeTopic", b"x", "", g=I64), "bornTimestamp (g)"),
        ("V2 queueId", send_v2("RangeTopic", b"x", "", queue_id=I32), "queueId (e)"),
        ("V2 defaultTopicQueueNums", send_v2("RangeTopic", b"x", "", d=-I32 - 1), "defaultTopicQueueNums (d)"),
        ("V2 maxReconsumeTimes", send_v2("RangeTopic", b"x", "", l=I32), "maxReconsumeTimes (l)"),
        ("V2 sysFlag, 5000 digits", send_v2("RangeTopic", b"x", "", f=huge), "sysFlag (f)"),
        ("V2 binary sysFlag", send_v2("RangeTopic", b"x", "", f=I32, serialize=SerializeType.ROCKETMQ), "sysFlag (f)"),
        ("V1 sysFlag", send_v1("RangeTopic", b"x", "", sysFlag=I32), "sysFlag"),
        ("V1 bornTimestamp", send_v1("RangeTopic", b"x", "", bornTimestamp=-I64 - 1), "bornTimestamp"),
        ("V1 flag", send_v1("RangeTopic", b"x", "", flag=I32), "flag"),
        ("V1 reconsumeTimes", send_v1("RangeTopic", b"x", "", reconsumeTimes=I32), "reconsumeTimes"),
        ("batch flag", send_batch("RangeTopic", [(b"x", "")], "", h=I32), "flag (h)"),
        ("batch bornTimestamp", send_batch("RangeTopic", [(b"x", "")], "", g=I64), "bornTimestamp (g)"),
        ("pull queueOffset", pull("RangeTopic", 0, I64), "queueOffset"),
        ("pull maxMsgNums", pull("RangeTopic", 0, 0, max_nums=I32), "maxMsgNums"),
        ("pull sysFlag", pull("RangeTopic", 0, 0, sysFlag=I32), "sysFlag"),
        ("pull commitOffset", pull("RangeTopic", 0, 0, commitOffset=I64), "commitOffset"),
        ("pull suspendTimeoutMillis", pull("RangeTopic", 0, 0, suspendTimeoutMillis=I64), "suspendTimeoutMillis"),
        ("pull subVersion", pull("RangeTopic", 0, 0, subVersion=I64), "subVersion"),
        ("pull queueId", pull("RangeTopic", I32, 0), "queueId"),
        ("query offset", _req(RequestCode.QUERY_CONSUMER_OFFSET, queueId=I32), "queueId"),
        ("update offset", _req(RequestCode.UPDATE_CONSUMER_OFFSET, commitOffset=I64), "commitOffset"),
        ("search by time", _req(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp=I64), "timestamp"),
        ("max offset", _req(RequestCode.GET_MAX_OFFSET, queueId=I32), "queueId"),
        ("min offset", _req(RequestCode.GET_MIN_OFFSET, queueId=-I32 - 1), "queueId"),
        ("earliest time", _req(RequestCode.GET_EARLIEST_MSG_STORETIME, queueId=I32), "queueId"),
        ("view by id", _req(RequestCode.VIEW_MESSAGE_BY_ID, offset=I64), "offset"),
        ("send back offset", _req(RequestCode.CONSUMER_SEND_MSG_BACK, group="CG", offset=I64), "offset"),
        ("send back delayLevel", _req(RequestCode.CONSUMER_SEND_MSG_BACK, group="CG", offset=0, delayLevel=I32), "delayLevel"),
        ("create topic queues", create_topic("RangeTopic2", readQueueNums=I32), "readQueueNums"),
        ("create topic perm", create_topic("RangeTopic2", perm=I32), "perm"),
    ]


async def test_numeric_fields_beyond_java_types_are_refused_by_name_without_traceback(start_broker) -> None:
    broker = start_broker()
    async with connect(broker.addr) as client:  # one connection: every refusal leaves it usable
        assert (await client.invoke(create_topic("RangeTopic", 1), 5.0)).code == ResponseCode.SUCCESS
        for what, req, field in out_of_range_cases():
            resp = await client.invoke(req, 5.0)
            assert resp.code == ResponseCode.SYSTEM_ERROR, (what, resp)
            remark = resp.remark or ""
            assert f"header field {field}=" in remark and "out of range for a Java" in remark, (what, remark)
            assert len(remark) < 200, (what, remark)  # the 5000-digit value is cut
        # the extremes of each type are accepted and stored as sent
        resp = await client.invoke(
            send_v2("RangeTopic", b"edge", props_5x(UNIQ_KEY=UNIQ), h=I32 - 1, j=I32 - 1, g=I64 - 1, f=0), 5.0
        )
        assert resp.code == ResponseCode.SUCCESS, resp
        resp = await client.invoke(send_v1("RangeTopic", b"low", "", flag=-I32, bornTimestamp=-I64), 5.0)
        assert resp.code == ResponseCode.SUCCESS, resp
        got = await client.invoke(pull("RangeTopic", 0, 0), 5.0)
        assert got.code == ResponseCode.SUCCESS, got
        edge, low = decode_stored(got.body)
        assert (edge["flag"], edge["reconsumeTimes"], edge["bornTimestamp"]) == (I32 - 1, I32 - 1, I64 - 1)
        assert (low["flag"], low["bornTimestamp"]) == (-I32, -I64)
        assert (await client.invoke(pull("RangeTopic", 0, I64 - 1), 5.0)).code == ResponseCode.PULL_OFFSET_MOVED
    no_traceback(broker.log())


# --------------------------------------------------------------------------
# the store's byte budget and the auto-created topics bound


async def queue_offsets(client, topic: str, queue_id: int) -> tuple[int, int]:
    lo = await client.invoke(request(RequestCode.GET_MIN_OFFSET, {"topic": topic, "queueId": queue_id}), 5.0)
    hi = await client.invoke(request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id}), 5.0)
    return int(lo.ext("offset") or "-1"), int(hi.ext("offset") or "-1")


async def test_byte_budget_drops_the_oldest_messages_of_all_queues_first(start_broker) -> None:
    budget = 1024 * 1024
    broker = start_broker(maxStoreBytes=budget, maxMessagesPerQueue=100000)
    body = b"b" * 1024
    async with connect(broker.addr) as client:
        assert (await client.invoke(create_topic("Budget", 2), 5.0)).code == ResponseCode.SUCCESS
        for i in range(300):  # the oldest: ~0.4 MB in queue 0
            assert (await client.invoke(send_v2("Budget", body, "", queue_id=0), 5.0)).code == ResponseCode.SUCCESS
        for i in range(1200):  # then ~1.6 MB in queue 1: more than the whole budget
            assert (await client.invoke(send_v2("Budget", body, "", queue_id=1), 5.0)).code == ResponseCode.SUCCESS
        lo0, hi0 = await queue_offsets(client, "Budget", 0)
        lo1, hi1 = await queue_offsets(client, "Budget", 1)
        assert (lo0, hi0) == (300, 300), "queue 0 held the oldest messages: all dropped first"
        held = hi1 - lo1
        assert hi1 == 1200 and 0 < lo1 and 600 <= held, (lo1, hi1)
        assert held * 1024 < budget  # records alone stay within the budget
        # a consumer behind the min offset is moved to it, as after a commit-log file deletion
        moved = await client.invoke(pull("Budget", 1, 0), 5.0)
        assert moved.code == ResponseCode.PULL_OFFSET_MOVED and moved.ext("nextBeginOffset") == str(lo1), moved
        first = await client.invoke(pull("Budget", 1, lo1, max_nums=1), 5.0)
        assert first.code == ResponseCode.SUCCESS and decode_stored(first.body)[0]["queueOffset"] == lo1
        # a message larger than the whole budget is refused without dropping anything
        too_big = await client.invoke(send_v2("Budget", b"z" * (budget + 1), "", queue_id=1), 5.0)
        assert too_big.code == ResponseCode.SERVICE_NOT_AVAILABLE and "maxStoreBytes" in (too_big.remark or "")
        assert await queue_offsets(client, "Budget", 1) == (lo1, hi1)
    no_traceback(broker.log())


async def test_auto_created_topics_are_bounded_and_admin_topics_are_not(start_broker) -> None:
    broker = start_broker(maxAutoCreatedTopics=3)
    async with connect(broker.addr) as client:
        for i in range(3):
            resp = await client.invoke(send_v2(f"Auto{i}", b"x", ""), 5.0)
            assert resp.code == ResponseCode.SUCCESS, resp
        refused = await client.invoke(send_v2("Auto3", b"x", ""), 5.0)
        assert refused.code == ResponseCode.TOPIC_NOT_EXIST, refused
        assert "maxAutoCreatedTopics=3" in (refused.remark or ""), refused.remark
        # a retry topic made by a consumer's heartbeat counts too
        heartbeat = request(RequestCode.HEART_BEAT, body=json.dumps(
            {"clientID": "c1", "consumerDataSet": [{"groupName": "G1", "subscriptionDataSet": []}], "producerDataSet": []}
        ).encode())
        hb = await client.invoke(heartbeat, 5.0)
        assert hb.code == ResponseCode.SYSTEM_ERROR and "maxAutoCreatedTopics" in (hb.remark or ""), hb
        # admin-created topics are not auto-created ones
        assert (await client.invoke(create_topic("Admin0", 1), 5.0)).code == ResponseCode.SUCCESS
        assert (await client.invoke(send_v2("Admin0", b"x", ""), 5.0)).code == ResponseCode.SUCCESS
        # deleting an auto-created topic frees its place
        delete = request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Auto0"})
        assert (await client.invoke(delete, 5.0)).code == ResponseCode.SUCCESS
        assert (await client.invoke(send_v2("Auto3", b"x", ""), 5.0)).code == ResponseCode.SUCCESS
    no_traceback(broker.log())


# --------------------------------------------------------------------------
# topics.json


def read_saved(path: str) -> tuple[set[str], DataVersion]:
    """The topics file as a reader sees it (not topic_store.load: that removes stale temp files,
    which would be the broker's write in flight)."""
    with open(path, "rb") as f:
        doc = json.loads(f.read())
    return set(doc["topicConfigTable"]), DataVersion.from_obj(doc["dataVersion"])


def saved_topics(store: Path) -> set[str]:
    return read_saved(str(store / "config" / "topics.json"))[0]


async def test_topic_change_is_answered_once_durable_and_auto_created_ones_are_written_soon(start_broker, tmp_path) -> None:
    store = tmp_path / "store"
    broker = start_broker(storePathRootDir=store)
    async with connect(broker.addr) as client:
        for i in range(5):  # each answered only once a file holding it is on disk
            assert (await client.invoke(create_topic(f"Durable{i}", 2), 5.0)).code == ResponseCode.SUCCESS
            assert f"Durable{i}" in saved_topics(store)
        for i in range(50):  # answered at once, written soon
            assert (await client.invoke(send_v2(f"Soon{i}", b"x", ""), 5.0)).code == ResponseCode.SUCCESS
        with trio.fail_after(5):
            while not {f"Soon{i}" for i in range(50)} <= saved_topics(store):
                await trio.sleep(0.02)
        # a write that fails answers the topic change SYSTEM_ERROR, and the next write carries it
        config_dir = store / "config"
        shutil.rmtree(config_dir)
        config_dir.write_text("not a directory")
        failed = await client.invoke(create_topic("Failed", 1), 5.0)
        assert failed.code == ResponseCode.SYSTEM_ERROR and "not on disk" in (failed.remark or ""), failed
        config_dir.unlink()
        assert (await client.invoke(create_topic("After", 1), 5.0)).code == ResponseCode.SUCCESS
        assert {"Failed", "After", "Durable0", "Soon49"} <= saved_topics(store)
    assert broker.log().count("cannot write") >= 1
    no_traceback(broker.log())


async def test_sigterm_writes_the_auto_created_topics_not_yet_on_disk(start_broker, tmp_path) -> None:
    store = tmp_path / "store"
    broker = start_broker(storePathRootDir=store)
    async with connect(broker.addr) as client:
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:  # 200 sends in flight at once on one connection
                for i in range(200):
                    nursery.start_soon(client.invoke, send_v2(f"Last{i}", b"x", ""), 10.0)
    assert broker.terminate() == 0
    assert {f"Last{i}" for i in range(200)} <= saved_topics(store)


async def test_saver_coalesces_changes_made_while_a_write_is_in_flight(tmp_path) -> None:
    path = str(tmp_path / "config" / "topics.json")
    table: dict[str, TopicConfig] = {}
    version = [DataVersion(0, 1, 0)]
    saver = TopicSaver(path, lambda: (list(table.values()), version[0]))

    def change(name: str) -> int:
        table[name] = TopicConfig(name, 1, 1)
        version[0] = version[0].next(2)
        return saver.changed()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(saver.run)
        first = change("T0")
        await trio.testing.wait_all_tasks_blocked()  # the writer holds T0's snapshot, in its thread
        gens = [change(f"T{i}") for i in range(1, 40)]
        await saver.durable(first)
        assert "T0" in read_saved(path)[0]
        await saver.durable(gens[-1])
        assert saver.writes == 2  # 40 changes, one write in flight, the next one carrying the other 39
        names, saved_version = read_saved(path)
        assert names == {f"T{i}" for i in range(40)}
        assert saved_version == version[0]
        assert not [n for n in os.listdir(tmp_path / "config") if n.endswith(".tmp")]
        nursery.cancel_scope.cancel()


# --------------------------------------------------------------------------
# listenPort=0


async def test_listen_port_zero_reports_the_bound_port_and_its_ha_port(start_broker) -> None:
    broker = start_broker(listenPort=0)
    port = int(broker.addr.rsplit(":", 1)[1])
    assert port > 0
    resp = await call(broker.addr, request(RequestCode.GET_BROKER_CONFIG))
    config = properties.loads(resp.body.decode())
    assert config["listenPort"] == str(port)
    assert config["haListenPort"] == str(port + 1)
    # a runtime config update still validates (the written-back ports are valid ones)
    update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"defaultTopicQueueNums=4\n")
    assert (await call(broker.addr, update)).code == ResponseCode.SUCCESS
    # an explicit haListenPort is kept
    other = start_broker("explicit", listenPort=0, haListenPort=23456)
    config = properties.loads((await call(other.addr, request(RequestCode.GET_BROKER_CONFIG))).body.decode())
    assert config["haListenPort"] == "23456" and config["listenPort"] == other.addr.rsplit(":", 1)[1]
    assert broker.terminate() == 0 and other.terminate() == 0
