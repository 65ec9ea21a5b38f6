"""The broker stub's /metrics on a real process: traffic by topic (busiest N plus other), store,
refusals, faults, clients and registrations each move when the thing they count happens."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, request
from server_runtime.metrics_families import package_version
from remoting.transport import connect
from tests.broker_wire import create_topic, props_5x, pull, send_v2
from tests.metrics_scrape import Scrape, scrape, until
from tests.procs import NamesrvProcess

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

S = "rocketmq_broker_stub"
FAULT = 9000


def fault(action: str, **ext: object) -> RemotingCommand:
    return request(FAULT, {"action": action, **ext})


def heartbeat(client_id: str, producer: str | None = None, consumer: str | None = None) -> RemotingCommand:
    body = {
        "clientID": client_id,
        "producerDataSet": [{"groupName": producer}] if producer else [],
        "consumerDataSet": [{"groupName": consumer, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                             "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": []}]
        if consumer else [],
    }
    return request(RequestCode.HEART_BEAT, body=json.dumps(body).encode())


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def by_topic(got: Scrape, name: str) -> dict[str, float]:
    return {dict(labels)["topic"]: v for labels, v in got.series(name).items()}


async def test_broker_metrics(start_namesrv: Callable[..., NamesrvProcess],
                              start_broker: Callable[..., BrokerProcess]) -> None:
    ns = start_namesrv()
    dead = f"127.0.0.1:{closed_port()}"  # a NameServer that is down: its registrations fail
    broker = start_broker(namesrvAddr=f"{ns.addr};{dead}", metricsPort=-1, metricsTopTopics=2, maxMessageSize=1024,
                          autoCreateTopicEnable=False)
    url = broker.metrics_url
    assert url.startswith("http://127.0.0.1:")
    got = await until(url, lambda s: s.get(f"{S}_registrations_total", namesrv=ns.addr, result="success") >= 1
                      and s.get(f"{S}_registrations_total", namesrv=dead, result="failed") >= 1,
                      what="registrations counted by NameServer")
    assert got.value(f"{S}_up", version=package_version(), cluster="DefaultCluster", broker_name=broker.name,
                     broker_id="0") == 1
    assert {dict(k)["namesrv"] for k in got.series(f"{S}_registrations_total")} == {ns.addr, dead}

    async with connect(broker.addr) as client:
        for topic in ("T1", "T2", "T3"):
            assert (await client.invoke(create_topic(topic))).code == ResponseCode.SUCCESS

        async def send(topic: str, count: int, size: int = 100) -> None:
            for _ in range(count):
                resp = await client.invoke(send_v2(topic, b"x" * size, props_5x(UNIQ_KEY="k")))
                assert resp.code == ResponseCode.SUCCESS, resp

        # A topic's series begins at the first scrape that ranks it among the busiest two; what it
        # carried before stays counted in "other" (so no series ever goes down).
        await send("T1", 1)
        got = await until(url, lambda s: s.total("rocketmq_messages_in_total") == 1, what="1 message counted")
        assert by_topic(got, "rocketmq_messages_in_total") == {"T1": 0, "other": 1}
        await send("T2", 1)
        got = await until(url, lambda s: s.total("rocketmq_messages_in_total") == 2, what="2 messages counted")
        assert by_topic(got, "rocketmq_messages_in_total") == {"T1": 0, "T2": 0, "other": 2}
        await send("T1", 3, size=200)
        await send("T2", 2)
        await send("T3", 1)  # third busiest: counted in "other"
        got = await until(url, lambda s: s.total("rocketmq_messages_in_total") == 8, what="8 messages counted")
        assert by_topic(got, "rocketmq_messages_in_total") == {"T1": 3, "T2": 2, "other": 3}
        assert by_topic(got, "rocketmq_throughput_in_total") == {"T1": 600, "T2": 200, "other": 300}
        assert got.value(f"{S}_store_max_offsets") == 8  # every message went to queue 0
        assert got.value(f"{S}_store_min_offsets") == 0
        assert got.value(f"{S}_store_bytes") > 1000
        assert got.value(f"{S}_topics") >= 3

        resp = await client.invoke(pull("T1", 0, 0))
        assert resp.code == ResponseCode.SUCCESS
        got = await until(url, lambda s: s.total("rocketmq_messages_out_total") == 4, what="4 messages pulled")
        assert by_topic(got, "rocketmq_messages_out_total") == {"T1": 4, "T2": 0, "other": 0}
        assert by_topic(got, "rocketmq_throughput_out_total")["T1"] > 700  # stored records, headers and all

        # refusals by reason
        assert (await client.invoke(send_v2("T1", b"x" * 2048, ""))).code == ResponseCode.MESSAGE_ILLEGAL
        assert (await client.invoke(send_v2("NoSuchTopic", b"x", ""))).code == ResponseCode.TOPIC_NOT_EXIST
        assert (await client.invoke(fault("reject", code=2))).code == ResponseCode.SUCCESS
        assert (await client.invoke(send_v2("T1", b"x", ""))).code == 2
        got = await scrape(url)
        assert got.value(f"{S}_send_refusals_total", reason="message_illegal") == 1
        assert got.value(f"{S}_send_refusals_total", reason="topic_not_exist") == 1
        assert got.value(f"{S}_send_refusals_total", reason="fault_reject") == 1
        assert got.value(f"{S}_faults_active", fault="reject") == 1
        assert got.value(f"{S}_faults_active", fault="hang") == 0
        assert got.total(f"{S}_requests_total", code="310", result="message_illegal") == 1

        for action, ext in (("clear", {}), ("latency", {"millis": 5}), ("partition", {"namesrv": ns.addr}),
                            ("hang", {})):
            assert (await client.invoke(fault(action, **ext))).code == ResponseCode.SUCCESS
        got = await scrape(url)  # the metrics port still answers while the broker hangs
        assert {dict(k)["fault"]: v for k, v in got.series(f"{S}_faults_active").items()} == {
            "hang": 1, "reject": 0, "latency": 1, "partition": 1}
        assert (await client.invoke(fault("clear"))).code == ResponseCode.SUCCESS

        assert (await client.invoke(heartbeat("c1", consumer="CG1"))).code == ResponseCode.SUCCESS
        assert (await client.invoke(heartbeat("p1", producer="PG1"))).code == ResponseCode.SUCCESS
        got = await scrape(url)
        assert got.value(f"{S}_consumer_groups") == 1
        assert got.value(f"{S}_clients", role="consumer") == 1
        assert got.value(f"{S}_clients", role="producer") == 1
        assert got.value(f"{S}_active_connections") >= 1


async def test_many_topics_stay_within_the_series_bound(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(metricsPort=-1, metricsTopTopics=3)
    async with connect(broker.addr) as client:
        for i in range(40):  # auto-created by their first send
            resp = await client.invoke(send_v2(f"Auto{i:02d}", b"y" * 10, ""))
            assert resp.code == ResponseCode.SUCCESS, resp
    got = await until(broker.metrics_url, lambda s: s.total("rocketmq_messages_in_total") == 40, what="40 counted")
    assert len(got.series("rocketmq_messages_in_total")) == 4  # 3 topics and other
    assert "other" in by_topic(got, "rocketmq_messages_in_total")
