"""Stored message properties as a Java 5.x broker stores them, from 4.9-form and 5.x-form producers.

Java 4.9 clients end the properties string without a separator; 5.x
clients keep it. Either way, what a consumer reads back must parse (with
Java's own parsing rules) to exactly the producer's pairs plus what the
broker adds, and tag filtering must use the real TAGS. All over real TCP
against a real ``mqbroker-stub`` process.
"""

from __future__ import annotations

import re

from remoting.codes import ResponseCode, SerializeType
from tests.broker_wire import (
    UNIQ,
    call,
    create_topic,
    decode_stored,
    java_properties,
    props_5x,
    props_49,
    pull,
    send_batch,
    send_v1,
    send_v2,
)
from remoting.transport import connect

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

CLUSTER = "HardCluster"


def uniq(i: int) -> str:
    return f"{UNIQ[:-4]}{i:04X}"


async def pull_all(addr: str, topic: str, queue_id: int, subscription: str = "*") -> list[dict[str, object]]:
    """Every message of a queue a subscription matches, following nextBeginOffset to the end."""
    out: list[dict[str, object]] = []
    offset = 0
    async with connect(addr) as client:
        for _ in range(200):  # bounded: each round moves past at least one message
            resp = await client.invoke(pull(topic, queue_id, offset, subscription=subscription), 5.0)
            if resp.code == ResponseCode.SUCCESS:
                out.extend(decode_stored(resp.body))
            elif resp.code != ResponseCode.PULL_RETRY_IMMEDIATELY:  # NOT_FOUND: at the end
                assert resp.code == ResponseCode.PULL_NOT_FOUND, resp
                return out
            offset = int(resp.ext("nextBeginOffset") or "0")
        raise AssertionError("pull did not reach the end of the queue")


async def test_49_form_producer_tags_are_filtered_and_properties_parse_back(start_broker) -> None:
    broker = start_broker(brokerClusterName=CLUSTER)
    topic = "Props49"
    assert (await call(broker.addr, create_topic(topic, 1))).code == ResponseCode.SUCCESS
    sent: dict[str, dict[str, str]] = {}
    for i in range(30):
        tag = ("TagA", "TagB", None)[i % 3]
        pairs = {"UNIQ_KEY": uniq(i), "WAIT": "true", "KEYS": f"k{i}"}
        if tag:
            pairs["TAGS"] = tag  # last, as the Java client writes it: the pair the old code broke
        text = props_49(**pairs)
        assert not text.endswith("\x02")
        resp = await call(broker.addr, send_v2(topic, f"m{i}".encode(), text))
        assert resp.code == ResponseCode.SUCCESS, resp
        assert resp.ext("transactionId") == uniq(i)
        sent[f"m{i}"] = pairs

    tag_a = await pull_all(broker.addr, topic, 0, "TagA")
    assert [m["body"] for m in tag_a] == [f"m{i}".encode() for i in range(0, 30, 3)]
    both = await pull_all(broker.addr, topic, 0, "TagA || TagB")
    assert len(both) == 20
    everything = await pull_all(broker.addr, topic, 0)
    assert len(everything) == 30
    for msg in everything:
        stored = java_properties(str(msg["props"]))
        assert stored == {**sent[msg["body"].decode()], "CLUSTER": CLUSTER}  # type: ignore[union-attr]


async def test_5x_form_producer_single_sends_both_codes_and_serializations(start_broker) -> None:
    broker = start_broker(brokerClusterName=CLUSTER)
    topic = "Props5x"
    assert (await call(broker.addr, create_topic(topic, 1))).code == ResponseCode.SUCCESS
    cases = [
        (send_v2, SerializeType.JSON, props_5x(UNIQ_KEY=uniq(1), TAGS="TagA", WAIT="true")),
        (send_v2, SerializeType.ROCKETMQ, props_5x(TAGS="TagA", UNIQ_KEY=uniq(2))),
        (send_v1, SerializeType.JSON, props_5x(WAIT="false", TAGS="TagA", UNIQ_KEY=uniq(3))),
        (send_v1, SerializeType.ROCKETMQ, props_49(UNIQ_KEY=uniq(4), TAGS="TagA")),
        (send_v2, SerializeType.JSON, props_5x(UNIQ_KEY=uniq(5), TAGS="TagB")),
    ]
    for i, (build, serialize, text) in enumerate(cases):
        resp = await call(broker.addr, build(topic, f"m{i}".encode(), text, serialize=serialize))
        assert resp.code == ResponseCode.SUCCESS, resp
        assert resp.serialize_type is serialize
    tagged = await pull_all(broker.addr, topic, 0, "TagA")
    assert [m["body"] for m in tagged] == [b"m0", b"m1", b"m2", b"m3"]
    for msg, (_b, _s, text) in zip(tagged, cases):
        assert java_properties(str(msg["props"])) == {**java_properties(text), "CLUSTER": CLUSTER}
        assert str(msg["props"]).endswith("\x02")  # stored in 5.x form


async def test_broker_additions_uniq_key_cluster_and_pop_ck_as_java_5(start_broker) -> None:
    broker = start_broker(brokerClusterName=CLUSTER)
    topic = "PropsAdded"
    assert (await call(broker.addr, create_topic(topic, 1))).code == ResponseCode.SUCCESS
    # no UNIQ_KEY: the broker makes one (and answers it as transactionId); a client's CLUSTER is
    # replaced by the broker's; POP_CK is a reserved property Java 5 removes
    text = props_49(TAGS="TagA", CLUSTER="NotMine", POP_CK="ck", KEYS="a b")
    resp = await call(broker.addr, send_v2(topic, b"x", text))
    assert resp.code == ResponseCode.SUCCESS, resp
    made = resp.ext("transactionId")
    assert made is not None and re.fullmatch(r"[0-9A-F]{32}", made)
    resp2 = await call(broker.addr, send_v2(topic, b"y", ""))  # no properties at all
    assert resp2.code == ResponseCode.SUCCESS, resp2
    assert resp2.ext("transactionId") not in (None, made)
    msgs = await pull_all(broker.addr, topic, 0)
    assert java_properties(str(msgs[0]["props"])) == {"TAGS": "TagA", "KEYS": "a b", "UNIQ_KEY": made, "CLUSTER": CLUSTER}
    assert java_properties(str(msgs[1]["props"])) == {"UNIQ_KEY": resp2.ext("transactionId"), "CLUSTER": CLUSTER}
    assert [m["body"] for m in await pull_all(broker.addr, topic, 0, "TagA")] == [b"x"]


async def test_batch_of_both_forms_keeps_each_message_id_and_filters_by_its_tag(start_broker) -> None:
    broker = start_broker(brokerClusterName=CLUSTER)
    topic = "PropsBatch"
    assert (await call(broker.addr, create_topic(topic, 1))).code == ResponseCode.SUCCESS
    inner = [
        (b"b0", props_49(WAIT="true", UNIQ_KEY=uniq(10), TAGS="TagA")),
        (b"b1", props_5x(WAIT="true", UNIQ_KEY=uniq(11), TAGS="TagB")),
        (b"b2", props_5x(UNIQ_KEY=uniq(12), TAGS="TagA")),  # no WAIT: the batch header's fills it in
        (b"b3", ""),
    ]
    batch_id = uniq(99)
    # a 5.x client's batch header: WAIT and the batch's own UNIQ_KEY, 4.9 form here
    resp = await call(broker.addr, send_batch(topic, inner, props_49(WAIT="true", UNIQ_KEY=batch_id)))
    assert resp.code == ResponseCode.SUCCESS, resp
    assert resp.ext("transactionId") == batch_id
    assert len((resp.ext("msgId") or "").split(",")) == 4
    msgs = await pull_all(broker.addr, topic, 0)
    assert [m["body"] for m in msgs] == [b"b0", b"b1", b"b2", b"b3"]
    got = [java_properties(str(m["props"])) for m in msgs]
    assert got[0] == {"WAIT": "true", "UNIQ_KEY": uniq(10), "TAGS": "TagA", "CLUSTER": CLUSTER}
    assert got[1] == {"WAIT": "true", "UNIQ_KEY": uniq(11), "TAGS": "TagB", "CLUSTER": CLUSTER}
    assert got[2] == {"WAIT": "true", "UNIQ_KEY": uniq(12), "TAGS": "TagA", "CLUSTER": CLUSTER}
    assert got[3] == {"WAIT": "true", "UNIQ_KEY": batch_id, "CLUSTER": CLUSTER}  # lacked both
    assert [m["body"] for m in await pull_all(broker.addr, topic, 0, "TagA")] == [b"b0", b"b2"]
    # a 4.9 batch: no header properties at all
    resp = await call(broker.addr, send_batch(topic, [(b"c0", props_49(UNIQ_KEY=uniq(20), TAGS="TagC"))], ""))
    assert resp.code == ResponseCode.SUCCESS and resp.ext("transactionId") is None, resp
    tag_c = await pull_all(broker.addr, topic, 0, "TagC")
    assert [java_properties(str(m["props"])) for m in tag_c] == [{"UNIQ_KEY": uniq(20), "TAGS": "TagC", "CLUSTER": CLUSTER}]
