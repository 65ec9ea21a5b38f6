"""The broker admin requests Java mqadmin sends, against real mqbroker-stub processes over loopback TCP.

Each request code has a test that checks the body byte shapes Java reads
(fastjson's object-keyed maps included) as well as the values.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import trio

from remoting.admin_bodies import (
    BrokerStatsData,
    ConsumeStats,
    ConsumerConnection,
    TopicStatsTable,
    decode_producer_connection,
    decode_reset_offsets,
)
from remoting.bodies import parse_kv_table
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, request
from remoting.mqjson import MessageQueue, loads
from remoting.transport import connect
from tests.broker_wire import decode_stored
from tests.test_broker_stub import RawConn, call, create_topic, eventually, heartbeat, pull, send_v2

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

BROKER = "broker-a"


def mq(topic: str, queue_id: int) -> MessageQueue:
    return MessageQueue(topic, BROKER, queue_id)


def update_offset(group: str, topic: str, queue_id: int, offset: int) -> RemotingCommand:
    return request(RequestCode.UPDATE_CONSUMER_OFFSET,
                   {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset})


def query_offset(group: str, topic: str, queue_id: int) -> RemotingCommand:
    return request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": queue_id})


def producer_heartbeat(client_id: str, group: str) -> RemotingCommand:
    body = {"clientID": client_id, "consumerDataSet": [], "producerDataSet": [{"groupName": group}]}
    return request(RequestCode.HEART_BEAT, body=json.dumps(body).encode())


async def ok(addr: str, req: RemotingCommand) -> RemotingCommand:
    resp = await call(addr, req)
    assert resp.code == ResponseCode.SUCCESS, resp
    return resp


async def fill(addr: str, topic: str, per_queue: dict[int, int], queues: int = 4) -> None:
    await ok(addr, create_topic(topic, queues=queues))
    async with connect(addr) as c:
        for queue_id, count in per_queue.items():
            for i in range(count):
                resp = await c.invoke(send_v2(topic, queue_id, f"{queue_id}-{i}".encode()))
                assert resp.code == ResponseCode.SUCCESS, resp


# --------------------------------------------------------------------------
# 202, 351


async def test_topic_stats_info_and_topic_config(start_broker) -> None:
    broker = start_broker(namesrvAddr="", brokerName=BROKER)
    t0 = int(time.time() * 1000)
    await fill(broker.addr, "TS", {0: 3, 2: 1})
    resp = await ok(broker.addr, request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "TS"}))
    # fastjson's object keys: the MessageQueue's JSON, unquoted, fields alphabetical
    assert resp.body.startswith(b'{"offsetTable":{{"brokerName":"broker-a","queueId":')
    assert re.search(rb'\{"brokerName":"broker-a","queueId":1,"topic":"TS"\}:'
                     rb'\{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0\}', resp.body)
    assert re.search(rb',"topicPutTps":\d+\.\d+(E-?\d+)?\}$', resp.body)
    table = TopicStatsTable.decode(resp.body)
    assert sorted(table.offset_table) == [mq("TS", i) for i in range(4)]
    assert (table.offset_table[mq("TS", 0)].min_offset, table.offset_table[mq("TS", 0)].max_offset) == (0, 3)
    assert table.offset_table[mq("TS", 2)].max_offset == 1
    assert t0 <= table.offset_table[mq("TS", 0)].last_update_timestamp <= int(time.time() * 1000)
    assert table.offset_table[mq("TS", 3)].last_update_timestamp == 0
    missing = await call(broker.addr, request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "nope"}))
    assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[nope] not exist")

    resp = await ok(broker.addr, request(RequestCode.GET_TOPIC_CONFIG, {"topic": "TS", "lo": "true"}))
    assert resp.body == (b'{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
                         b'"topicName":"TS","topicSysFlag":0,"writeQueueNums":4}')
    missing = await call(broker.addr, request(RequestCode.GET_TOPIC_CONFIG, {"topic": "nope"}))
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST and "nope" in (missing.remark or "")


# --------------------------------------------------------------------------
# 315 (and the put TPS of 202, the consume TPS of 208)


async def test_view_broker_stats_data_minute_window(start_broker) -> None:
    broker = start_broker(namesrvAddr="", brokerName=BROKER, brokerClusterName="C1")
    await fill(broker.addr, "ST", {0: 5, 1: 2}, queues=2)
    async with connect(broker.addr) as c:
        got = await c.invoke(pull("ST", 0, 0, group="G1"))
        assert got.code == ResponseCode.SUCCESS

        async def view(name: str, key: str) -> RemotingCommand:
            return await c.invoke(request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key}))

        async def sampled() -> bool:  # Java samples every 10 s: the minute window shows it after the next tick
            resp = await view("TOPIC_PUT_NUMS", "ST")
            return resp.code == ResponseCode.SUCCESS and BrokerStatsData.decode(resp.body).minute.sum == 7

        await eventually(sampled, timeout=25.0, what="TOPIC_PUT_NUMS sampled")
        resp = await view("TOPIC_PUT_NUMS", "ST")
        assert re.fullmatch(rb'\{"statsDay":\{"avgpt":[-\d.E]+,"sum":\d+,"tps":[-\d.E]+\},"statsHour":\{.*\},'
                            rb'"statsMinute":\{"avgpt":[-\d.E]+,"sum":7,"tps":[-\d.E]+\}\}', resp.body), resp.body
        puts = BrokerStatsData.decode(resp.body)
        assert puts.minute.tps > 0 and puts.hour.sum == 0 and puts.day.sum == 0 and puts.sum_24h() == 7
        assert puts.minute.avgpt == 7.0  # the second's 7 messages were one increment (one call, as a batch)
        gets = BrokerStatsData.decode((await view("GROUP_GET_NUMS", "ST@G1")).body)
        assert gets.minute.sum == 5 and gets.minute.tps > 0
        size = BrokerStatsData.decode((await view("TOPIC_PUT_SIZE", "ST")).body)
        assert size.minute.sum == sum(len(f"{q}-{i}") for q, n in ((0, 5), (1, 2)) for i in range(n))
        assert BrokerStatsData.decode((await view("BROKER_PUT_NUMS", "C1")).body).minute.sum == 7
        assert BrokerStatsData.decode((await view("BROKER_GET_NUMS", "C1")).body).minute.sum == 5
        missing = await view("TOPIC_PUT_NUMS", "nope")
        assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR, "The stats <TOPIC_PUT_NUMS> <nope> not exist")
        missing = await view("NO_SUCH_STATS", "ST")
        assert missing.code == ResponseCode.SYSTEM_ERROR

        stats = TopicStatsTable.decode((await c.invoke(request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "ST"}))).body)
        assert stats.topic_put_tps == puts.minute.tps
        consume = ConsumeStats.decode((await c.invoke(
            request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "G1", "topic": "ST"}))).body)
        assert consume.consume_tps == gets.minute.tps


async def test_send_backs_are_counted_under_the_first_topic_and_group(start_broker) -> None:
    """CONSUMER_SEND_MSG_BACK feeds SNDBCK_PUT_NUMS (``topic@group``), as Java's broker does; a refused one does not."""
    broker = start_broker(namesrvAddr="", brokerName=BROKER)
    await fill(broker.addr, "SB", {0: 1}, queues=1)
    async with connect(broker.addr) as c:
        stored = decode_stored((await c.invoke(pull("SB", 0, 0, group="CG"))).body)[0]
        back = {"offset": stored["phys"], "group": "CG", "delayLevel": 0, "originTopic": "SB", "unitMode": False,
                "maxReconsumeTimes": 16}
        for _ in range(2):
            assert (await c.invoke(request(RequestCode.CONSUMER_SEND_MSG_BACK, back))).code == ResponseCode.SUCCESS
        refused = await c.invoke(request(RequestCode.CONSUMER_SEND_MSG_BACK, {**back, "offset": 999999}))
        assert refused.code == ResponseCode.SYSTEM_ERROR

        async def view() -> RemotingCommand:
            return await c.invoke(request(RequestCode.VIEW_BROKER_STATS_DATA,
                                          {"statsName": "SNDBCK_PUT_NUMS", "statsKey": "SB@CG"}))

        async def sampled() -> bool:  # the minute window shows a second's counts after the next sample
            resp = await view()
            return resp.code == ResponseCode.SUCCESS and BrokerStatsData.decode(resp.body).minute.sum >= 2

        await eventually(sampled, timeout=25.0, what="SNDBCK_PUT_NUMS sampled")
        assert BrokerStatsData.decode((await view()).body).minute.sum == 2


# --------------------------------------------------------------------------
# 208


async def test_consume_stats(start_broker) -> None:
    broker = start_broker(namesrvAddr="", brokerName=BROKER)
    await fill(broker.addr, "CS", {0: 3, 1: 1}, queues=2)
    await fill(broker.addr, "CS2", {0: 2}, queues=1)
    await ok(broker.addr, update_offset("G", "CS", 0, 2))
    await ok(broker.addr, update_offset("G", "CS2", 0, 1))
    resp = await ok(broker.addr, request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "G", "topic": "CS"}))
    assert resp.body.startswith(b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":')
    assert b'{"brokerName":"broker-a","queueId":1,"topic":"CS"}:{"brokerOffset":1,"consumerOffset":0,' \
           b'"lastTimestamp":0,"pullOffset":0}' in resp.body
    stats = ConsumeStats.decode(resp.body)
    q0 = stats.offset_table[mq("CS", 0)]
    assert (q0.broker_offset, q0.consumer_offset, q0.pull_offset) == (3, 2, 2)
    assert q0.last_timestamp > 0  # the store time of the last consumed message (offset 1)
    assert stats.total_diff() == 2 and sorted(stats.offset_table) == [mq("CS", 0), mq("CS", 1)]

    # no topic: every topic the group has offsets on; a topic list: just those
    every = ConsumeStats.decode((await ok(broker.addr, request(RequestCode.GET_CONSUME_STATS,
                                                               {"consumerGroup": "G"}))).body)
    assert sorted(every.offset_table) == [mq("CS", 0), mq("CS", 1), mq("CS2", 0)]
    listed = ConsumeStats.decode((await ok(broker.addr, request(RequestCode.GET_CONSUME_STATS,
                                                                {"consumerGroup": "G", "topicList": "CS2"}))).body)
    assert sorted(listed.offset_table) == [mq("CS2", 0)] and listed.total_diff() == 1
    # an online consumer's subscriptions limit the topics (only CS subscribed)
    c = await RawConn.open(broker.addr)
    await c.send(heartbeat("cid-1", group="G", topic="CS"), 1)
    assert (await c.response(1)).code == ResponseCode.SUCCESS
    every = ConsumeStats.decode((await ok(broker.addr, request(RequestCode.GET_CONSUME_STATS,
                                                               {"consumerGroup": "G"}))).body)
    assert sorted(every.offset_table) == [mq("CS", 0), mq("CS", 1)]
    await c.stream.aclose()
    nobody = ConsumeStats.decode((await ok(broker.addr, request(RequestCode.GET_CONSUME_STATS,
                                                                {"consumerGroup": "nobody"}))).body)
    assert nobody.offset_table == {} and nobody.consume_tps == 0.0


# --------------------------------------------------------------------------
# 203, 204


async def test_consumer_and_producer_connection_lists(start_broker) -> None:
    broker = start_broker(namesrvAddr="", brokerName=BROKER)
    c = await RawConn.open(broker.addr)
    local = c.stream.socket.getsockname()
    await c.send(heartbeat("10.0.0.9@consumer-1", group="CG1", topic="CT", sub="TagA || TagB"), 1)
    assert (await c.response(1)).code == ResponseCode.SUCCESS
    await c.send(producer_heartbeat("10.0.0.9@producer-1", "PG1"), 2)
    assert (await c.response(2)).code == ResponseCode.SUCCESS

    resp = await ok(broker.addr, request(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG1"}))
    raw = json.loads(resp.body)
    assert list(raw) == ["connectionSet", "consumeFromWhere", "consumeType", "messageModel", "subscriptionTable"]
    assert raw["connectionSet"] == [{"clientAddr": f"{local[0]}:{local[1]}", "clientId": "10.0.0.9@consumer-1",
                                     "language": "JAVA", "version": 479}]
    assert (raw["consumeType"], raw["messageModel"], raw["consumeFromWhere"]) == (
        "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET")
    sub = raw["subscriptionTable"]["CT"]
    assert list(sub) == ["classFilterMode", "codeSet", "expressionType", "subString", "subVersion", "tagsSet", "topic"]
    # String.hashCode of "TagA" and "TagB" (31-polynomial of the UTF-16 units)
    assert sub["tagsSet"] == ["TagA", "TagB"] and sub["codeSet"] == [2598919, 2598920]
    assert sub["subString"] == "TagA || TagB" and "%RETRY%CG1" in raw["subscriptionTable"]
    assert ConsumerConnection.decode(resp.body).min_version() == 479

    resp = await ok(broker.addr, request(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG1"}))
    assert json.loads(resp.body) == {"connectionSet": [{"clientAddr": f"{local[0]}:{local[1]}",
                                                        "clientId": "10.0.0.9@producer-1", "language": "JAVA",
                                                        "version": 479}]}
    assert [p.client_id for p in decode_producer_connection(resp.body)] == ["10.0.0.9@producer-1"]

    missing = await call(broker.addr, request(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "nope"}))
    assert (missing.code, missing.remark) == (ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group[nope] not online")
    missing = await call(broker.addr, request(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "nope"}))
    assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR, "the producer group[nope] not exist")

    await c.stream.aclose()  # the clients go with their connection, as in Java

    async def gone() -> bool:
        resp = await call(broker.addr, request(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG1"}))
        return resp.code == ResponseCode.CONSUMER_NOT_ONLINE

    await eventually(gone, what="consumer gone with its connection")


# --------------------------------------------------------------------------
# 200, 201, 207


def sub_group(name: str, **fields: object) -> RemotingCommand:
    return request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps({"groupName": name, **fields}).encode())


async def all_groups(addr: str) -> dict[str, dict[str, object]]:
    doc = loads((await ok(addr, request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))).body)
    assert list(doc) == ["dataVersion", "forbiddenTable", "subscriptionGroupTable"]
    return doc["subscriptionGroupTable"]


async def test_subscription_groups_created_deleted_and_kept_across_restart(start_broker, tmp_path: Path) -> None:
    store = tmp_path / "store"
    broker = start_broker("sg", namesrvAddr="", brokerName=BROKER, storePathRootDir=store)
    groups = await all_groups(broker.addr)
    assert {"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PULL",
            "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_RMQ_SYS_TRANS"} == set(groups)
    assert groups["TOOLS_CONSUMER"] == {
        "attributes": {}, "brokerId": 0, "consumeBroadcastEnable": True, "consumeEnable": True,
        "consumeFromMinEnable": True, "consumeMessageOrderly": False, "consumeTimeoutMinute": 15,
        "groupName": "TOOLS_CONSUMER", "groupRetryPolicy": {"type": "CUSTOMIZED"}, "groupSysFlag": 0,
        "notifyConsumerIdsChangedEnable": True, "retryMaxTimes": 16, "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1,
    }

    await ok(broker.addr, sub_group("G1", retryMaxTimes=3, consumeBroadcastEnable=False, attributes={"+a": "b"},
                                    groupRetryPolicy={"type": "EXPONENTIAL",
                                                      "exponentialRetryPolicy": {"initial": 1000, "max": 60000,
                                                                                 "multiplier": 2}}))
    await ok(broker.addr, sub_group("G2"))
    c = await RawConn.open(broker.addr)  # a consumer's first heartbeat creates its group
    await c.send(heartbeat("cid", group="AUTO_G", topic="T"), 1)
    assert (await c.response(1)).code == ResponseCode.SUCCESS
    await c.stream.aclose()
    await ok(broker.addr, update_offset("G2", "TBW102", 0, 1))
    await ok(broker.addr, request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "G2", "cleanOffset": "true"}))
    assert (await call(broker.addr, query_offset("G2", "TBW102", 0))).code == ResponseCode.QUERY_NOT_FOUND

    for bad, code, why in ((b"{", ResponseCode.SYSTEM_ERROR, "JSON"),
                           (json.dumps({"groupName": "a b"}).encode(), ResponseCode.INVALID_PARAMETER, "illegal characters"),
                           (json.dumps({"groupName": "G3", "retryMaxTimes": "x"}).encode(), ResponseCode.SYSTEM_ERROR,
                            "retryMaxTimes")):
        resp = await call(broker.addr, request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=bad))
        assert resp.code == code and why in (resp.remark or ""), resp

    saved = json.loads((store / "config" / "subscriptionGroup.json").read_bytes())
    assert {"G1", "AUTO_G"} <= set(saved["subscriptionGroupTable"]) and "G2" not in saved["subscriptionGroupTable"]
    before = saved["dataVersion"]["counter"]

    assert broker.terminate() == 0
    again = start_broker("sg", namesrvAddr="", brokerName=BROKER, storePathRootDir=store)
    groups = await all_groups(again.addr)
    assert {"G1", "AUTO_G", "TOOLS_CONSUMER"} <= set(groups) and "G2" not in groups
    g1 = groups["G1"]
    assert (g1["retryMaxTimes"], g1["consumeBroadcastEnable"], g1["attributes"]) == (3, False, {"+a": "b"})
    assert g1["groupRetryPolicy"] == {"exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 2},
                                      "type": "EXPONENTIAL"}
    doc = loads((await ok(again.addr, request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))).body)
    assert doc["dataVersion"]["counter"] > before


def test_unreadable_subscription_group_file_is_one_line(tmp_path: Path) -> None:
    import subprocess

    from tests.broker_procs import broker_command

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "subscriptionGroup.json").write_text('{"subscriptionGroupTable": {"G": {"groupName": 5}}}')
    conf = tmp_path / "broker.properties"
    conf.write_text(f"listenPort=0\nnamesrvAddr=\nstorePathRootDir={tmp_path}\n")
    done = subprocess.run([*broker_command(), "-c", str(conf)], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "subscriptionGroup.json" in lines[0] and "groupName" in lines[0], done.stderr


# --------------------------------------------------------------------------
# 222 and 220


async def test_reset_offset_by_time_answers_the_table_and_tells_the_consumers(start_broker) -> None:
    broker = start_broker(namesrvAddr="", brokerName=BROKER)
    await fill(broker.addr, "RT", {0: 3, 1: 3}, queues=2)
    await trio.sleep(0.05)
    middle = int(time.time() * 1000)
    await trio.sleep(0.05)
    async with connect(broker.addr) as p:
        for queue_id in (0, 1):
            assert (await p.invoke(send_v2("RT", queue_id, b"late"))).code == ResponseCode.SUCCESS
    consumer = await RawConn.open(broker.addr)
    await consumer.send(heartbeat("cid-r", group="RG", topic="RT"), 1)
    assert (await consumer.response(1)).code == ResponseCode.SUCCESS
    for queue_id in (0, 1):
        await ok(broker.addr, update_offset("RG", "RT", queue_id, 4))

    reset = request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                    {"topic": "RT", "group": "RG", "timestamp": middle, "isForce": "true"})
    resp = await ok(broker.addr, reset)
    assert resp.body.startswith(b'{"offsetTable":{{"brokerName":"broker-a","queueId":')
    assert decode_reset_offsets(resp.body) == {mq("RT", 0): 3, mq("RT", 1): 3}
    told = await consumer.wait_for(lambda cmd: cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
    assert told.is_oneway and not told.is_response
    assert told.ext_fields == {"topic": "RT", "group": "RG", "timestamp": str(middle), "isForce": "true"}
    assert decode_reset_offsets(told.body) == {mq("RT", 0): 3, mq("RT", 1): 3}
    for queue_id in (0, 1):  # the broker's own offsets moved too (5.x's server-side reset)
        assert (await ok(broker.addr, query_offset("RG", "RT", queue_id))).ext_fields["offset"] == "3"

    # not forced: offsets only move backwards; to the end with timestamp -1
    resp = await ok(broker.addr, request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                         {"topic": "RT", "group": "RG", "timestamp": -1, "isForce": "false"}))
    assert decode_reset_offsets(resp.body) == {mq("RT", 0): 3, mq("RT", 1): 3}
    resp = await ok(broker.addr, request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                         {"topic": "RT", "group": "RG", "timestamp": -1, "isForce": "true"}))
    assert decode_reset_offsets(resp.body) == {mq("RT", 0): 4, mq("RT", 1): 4}
    # one queue to an explicit offset; outside the queue is refused
    resp = await ok(broker.addr, request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                         {"topic": "RT", "group": "RG", "timestamp": 0, "isForce": "true",
                                          "queueId": 1, "offset": 1}))
    assert decode_reset_offsets(resp.body) == {mq("RT", 1): 1}
    bad = await call(broker.addr, request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                          {"topic": "RT", "group": "RG", "timestamp": 0, "queueId": 1, "offset": 99}))
    assert bad.code == ResponseCode.SYSTEM_ERROR and "not in consume queue range [0-4]" in (bad.remark or "")
    missing = await call(broker.addr, request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                              {"topic": "nope", "group": "RG", "timestamp": 0}))
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    missing = await call(broker.addr, request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                              {"topic": "RT", "group": "NO_SUCH_GROUP", "timestamp": 0}))
    assert (missing.code, missing.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "Group NO_SUCH_GROUP does not exist")
    await consumer.stream.aclose()


# --------------------------------------------------------------------------
# 28 and 21: what a Java 5.3.3 broker reports about itself

#: prepareRuntimeInfo's keys (5.3.3, timer wheel on, no transient store pool), minus the per-path disk key.
JAVA_RUNTIME_KEYS = {
    "bootTimestamp", "runtime", "putMessageEntireTimeMax", "putMessageTimesTotal", "putMessageFailedTimes",
    "putMessageSizeTotal", "putMessageDistributeTime", "putMessageAverageSize", "dispatchMaxBuffer",
    "getMessageEntireTimeMax", "putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferredTps",
    "putLatency99", "putLatency999", "commitLogDiskRatio", "consumeQueueDiskRatio", "commitLogMinOffset",
    "commitLogMaxOffset", "brokerActive", "brokerVersionDesc", "brokerVersion", "msgPutTotalYesterdayMorning",
    "msgPutTotalTodayMorning", "msgPutTotalTodayNow", "msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning",
    "msgGetTotalTodayNow", "dispatchBehindBytes", "pageCacheLockTimeMills", "earliestMessageTimeStamp",
    "startAcceptSendRequestTimeStamp", "timerReadBehind", "timerOffsetBehind", "timerCongestNum", "timerEnqueueTps",
    "timerDequeueTps", "remainTransientStoreBufferNumbs", "remainHowManyDataToFlush", "commitLogDirCapacity",
    "EndTransactionQueueSize", "EndTransactionThreadPoolQueueCapacity",
    *(f"{pool}ThreadPoolQueue{what}" for pool in ("send", "pull", "litePull", "query", "ack")
      for what in ("Size", "Capacity", "HeadWaitTimeMills")),
}
OUR_RUNTIME_KEYS = {"getTransferedTps", "pullHoldRequestNum", "vipChannelEnabled"}


async def test_runtime_info_keys_and_system_topics_are_a_java_5_broker_s(start_broker, tmp_path: Path) -> None:
    store = tmp_path / "rstore"
    broker = start_broker(namesrvAddr="", brokerName=BROKER, brokerClusterName="C9", storePathRootDir=store)
    table = parse_kv_table((await ok(broker.addr, request(RequestCode.GET_BROKER_RUNTIME_INFO))).body)
    per_path = [k for k in table if k.startswith("commitLogDiskRatio_")]
    assert per_path == [f"commitLogDiskRatio_{store}/commitlog"]
    assert set(table) - set(per_path) == JAVA_RUNTIME_KEYS | OUR_RUNTIME_KEYS
    assert re.fullmatch(r"Total : \d+\.\d [KMGTPE]iB, Free : \d+\.\d [KMGTPE]iB\.", table["commitLogDirCapacity"])
    assert table["putMessageTimesTotal"] == "1"  # Java reports 1 before the first put
    assert table["putMessageDistributeTime"].startswith("[<=0ms]:0 [0~10ms]:0 ")
    assert 0.0 <= float(table["commitLogDiskRatio"]) <= 1.0 and table["commitLogDiskRatio"] == table[per_path[0]]

    wrapper = loads((await ok(broker.addr, request(RequestCode.GET_ALL_TOPIC_CONFIG))).body)
    topics = {name: (tc["readQueueNums"], tc["perm"]) for name, tc in wrapper["topicConfigTable"].items()}
    assert topics == {
        "SELF_TEST_TOPIC": (1, 6), "TBW102": (8, 7), "BenchmarkTest": (1024, 6), "C9": (16, 7), BROKER: (1, 7),
        "OFFSET_MOVED_EVENT": (1, 6), "SCHEDULE_TOPIC_XXXX": (18, 6), "C9_REPLY_TOPIC": (1, 6),
        "rmq_sys_REVIVE_LOG_C9": (8, 6), f"rmq_sys_SYNC_BROKER_MEMBER_{BROKER}": (1, 1),
        "RMQ_SYS_TRANS_HALF_TOPIC": (1, 6), "RMQ_SYS_TRANS_OP_HALF_TOPIC": (1, 6), "rmq_sys_wheel_timer": (1, 6),
    }
