"""What RocketMQ Dashboard and the 5.x Proxy ask a broker beyond what mqadmin does: 305, 309 and 352.

Against real broker stub processes over loopback TCP: GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305) answers
Java's system topic set, CONSUME_MESSAGE_DIRECTLY (309) is relayed to the consumer owning the client
id with the stored message (as 307 is) and answers the consumer's result or Java's errors, and
GET_SUBSCRIPTIONGROUP_CONFIG (352) answers the group (created on first sight, as Java's
findSubscriptionGroupConfig does) or SUBSCRIPTION_GROUP_NOT_EXIST.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import orjson
import trio

from remoting.bodies import parse_topic_list
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, request, response_to
from remoting.mqjson import loads
from simclient import ClientPool
from simclient.consumer import SimConsumer
from simclient.consumer_options import ConsumerOptions
from tests.broker_wire import call, create_topic, send_v2
from tests.test_broker_consumer_admin import _encode
from tests.test_broker_stub import RawConn, eventually, heartbeat

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

#: TopicValidator.getSystemTopicSet() of 5.3.3.
JAVA_SYSTEM_TOPICS = {"TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
                      "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC",
                      "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC"}


def direct(group: str, client_id: str, msg_id: str, topic: str = "DT") -> RemotingCommand:
    """ConsumeMessageDirectlyResultRequestHeader as DefaultMQAdminExt sends it."""
    return request(RequestCode.CONSUME_MESSAGE_DIRECTLY,
                   {"consumerGroup": group, "clientId": client_id, "msgId": msg_id, "topic": topic})


async def test_system_topics_are_java_s_set(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="")
    for addr in (broker.addr, broker.vip_addr):  # the dashboard asks over the VIP port
        resp = await call(addr, request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))
        assert resp.code == ResponseCode.SUCCESS
        topics, _ = parse_topic_list(resp.body)
        assert set(topics) == JAVA_SYSTEM_TOPICS and len(topics) == len(JAVA_SYSTEM_TOPICS)


async def test_consume_directly_is_relayed_with_the_stored_message(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="", brokerName="broker-d")
    assert (await call(broker.addr, create_topic("DT", queues=1))).code == ResponseCode.SUCCESS
    sent = await call(broker.addr, send_v2("DT", 0, b"consume me"))
    msg_id = sent.ext("msgId") or ""
    consumer = await RawConn.open(broker.addr)
    admin = await RawConn.open(broker.vip_addr)
    async with consumer.stream, admin.stream:
        await consumer.send(heartbeat("C1", group="DG", topic="DT"), 1)
        assert (await consumer.response(1)).code == ResponseCode.SUCCESS
        await admin.send(direct("DG", "C1", msg_id), 9)
        asked = await consumer.wait_for(lambda c: c.code == RequestCode.CONSUME_MESSAGE_DIRECTLY and not c.is_response)
        fields = asked.ext_fields or {}
        assert (fields["brokerName"], fields["topicSysFlag"], fields["groupSysFlag"], fields["msgId"]) == (
            "broker-d", "0", "0", msg_id)
        assert b"consume me" in asked.body and asked.body[4:8] == b"\xda\xa3\x20\xa7"  # a stored record
        result = b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"spentTimeMills":3}'
        await consumer.stream.send_all(_encode(response_to(asked, ResponseCode.SUCCESS, body=result)))
        relayed = await admin.response(9)
        assert (relayed.code, relayed.body) == (ResponseCode.SUCCESS, result)
    gone = await call(broker.addr, direct("DG", "C1", msg_id))
    assert (gone.code, gone.remark) == (ResponseCode.SYSTEM_ERROR, "The Consumer <DG> <C1> not online")
    unknown = await call(broker.addr, direct("DG", "C1", "7F00000100002A9F00000000DEADBEEF"))
    assert unknown.code == ResponseCode.SYSTEM_ERROR and "no message with the offset message id" in (unknown.remark or "")


async def test_a_simulated_consumer_consumes_directly(
    start_namesrv: Callable[..., object], start_broker: Callable[..., BrokerProcess]
) -> None:
    ns = start_namesrv()
    broker = start_broker(namesrvAddr=ns.addr)  # type: ignore[attr-defined]
    assert (await call(broker.addr, create_topic("DT", queues=1))).code == ResponseCode.SUCCESS
    msg_id = (await call(broker.addr, send_v2("DT", 0, b"direct"))).ext("msgId") or ""
    opts = ConsumerOptions(namesrv_addrs=(ns.addr,), group="DG", subscriptions=(("DT", "*"),),  # type: ignore[attr-defined]
                           poll_name_server_interval=0.5, heartbeat_broker_interval=1.0, rebalance_interval=2.0)
    async with trio.open_nursery() as nursery, ClientPool() as pool:
        consumer = SimConsumer(opts, pool)
        await nursery.start(consumer.run)

        async def online() -> bool:
            resp = await call(broker.addr, request(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "DG"}))
            return resp.code == ResponseCode.SUCCESS

        await eventually(online, 20, "the consumer heartbeats")
        resp = await call(broker.vip_addr, direct("DG", consumer.client_id, msg_id))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        result = loads(resp.body)
        assert (result["consumeResult"], result["order"], result["autoCommit"]) == ("CR_SUCCESS", False, True)
        other = await call(broker.addr, direct("DG", "some-other-client", msg_id))
        assert other.code == ResponseCode.SYSTEM_ERROR  # not online
        nursery.cancel_scope.cancel()


async def test_subscription_group_config(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="")
    resp = await call(broker.addr, request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "ProxyGroup"}))
    assert resp.code == ResponseCode.SUCCESS  # created on first sight (autoCreateSubscriptionGroup)
    cfg = orjson.loads(resp.body)
    assert cfg["groupName"] == "ProxyGroup" and cfg["retryMaxTimes"] == 16 and cfg["consumeEnable"] is True
    listed = orjson.loads((await call(broker.addr, request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))).body)
    assert "ProxyGroup" in listed["subscriptionGroupTable"]
    bad = await call(broker.addr, request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "bad group!"}))
    assert (bad.code, bad.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
