"""POP consumption (200050, 200051, 200053) against real broker stub processes over loopback TCP.

The requests are built as Apache's Proxy builds them (MQClientAPIImpl's headers), and receipt handles as
its client builds them from the answer (ExtraInfoUtil): what a RocketMQ 5 gRPC client gets through the
Proxy. The Proxy itself, with Apache's Python and Java clients, is in tests/interop/test_proxy_clients.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from broker_stub.common import parse_properties
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, request
from remoting.transport import connect
from tests.broker_wire import call, create_topic, decode_stored
from tests.test_broker_stub import eventually, props_text

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

FOUR_FIELDS = ("popTime", "invisibleTime", "reviveQid", "restNum")


def now_ms() -> int:
    return int(time.time() * 1000)


def pop(topic: str, group: str = "PG", *, queue_id: int = -1, nums: int = 32, invisible: int = 60_000,
        poll: int = 0, exp: str = "*", init_mode: int = 1) -> RemotingCommand:
    return request(RequestCode.POP_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": queue_id, "maxMsgNums": nums, "invisibleTime": invisible,
        "pollTime": poll, "bornTime": now_ms(), "initMode": init_mode, "expType": "TAG", "exp": exp, "order": "false"})


def send(topic: str, queue_id: int, body: bytes, tag: str = "") -> RemotingCommand:
    props = props_text(TAGS=tag) if tag else props_text()
    return request(RequestCode.SEND_MESSAGE_V2, {"a": "PP", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0,
                                                 "g": now_ms(), "h": 0, "i": props, "j": 0, "k": False, "m": False}, body)


def handles(resp: RemotingCommand, broker_name: str) -> list[dict[str, Any]]:
    """The messages of a POP answer with the receipt handle the client builds for each (processPopResponse)."""
    fields = resp.ext_fields or {}
    starts = {f"{p[0]}@{p[1]}": int(p[2]) for p in (x.split(" ") for x in fields["startOffsetInfo"].split(";"))}
    out = []
    for msg in decode_stored(resp.body):
        props = parse_properties(str(msg["props"]))
        ck = props.get("POP_CK")
        if ck is None:  # a message of the topic itself: the handle is built from the offset infos
            start = starts[f"0@{msg['queueId']}"]
            ck = " ".join(str(x) for x in (start, fields["popTime"], fields["invisibleTime"], fields["reviveQid"], 0,
                                           broker_name, msg["queueId"], msg["queueOffset"]))
        msg["handle"] = ck
        msg["properties"] = props
        out.append(msg)
    return out


def ack(group: str, topic: str, msg: dict[str, Any]) -> RemotingCommand:
    real = topic if msg["handle"].split(" ")[4] == "0" else f"%RETRY%{group}_{topic}"
    return request(RequestCode.ACK_MESSAGE, {"consumerGroup": group, "topic": real, "queueId": msg["queueId"],
                                             "extraInfo": msg["handle"], "offset": msg["queueOffset"]})


def change(group: str, topic: str, msg: dict[str, Any], invisible: int) -> RemotingCommand:
    real = topic if msg["handle"].split(" ")[4] == "0" else f"%RETRY%{group}_{topic}"
    return request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
        "consumerGroup": group, "topic": real, "queueId": msg["queueId"], "extraInfo": msg["handle"],
        "offset": msg["queueOffset"], "invisibleTime": invisible})


async def popped_bodies(addr: str, topic: str, group: str, name: str, **kw: Any) -> list[dict[str, Any]]:
    resp = await call(addr, pop(topic, group, **kw))
    assert all(k in (resp.ext_fields or {}) for k in FOUR_FIELDS), resp
    return handles(resp, name) if resp.code == ResponseCode.SUCCESS else []


async def test_pop_ack_change_and_redelivery(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="", brokerName="broker-p")
    addr = broker.addr
    assert (await call(addr, create_topic("PT", queues=2))).code == ResponseCode.SUCCESS
    for i in range(4):
        assert (await call(addr, send("PT", i % 2, f"m{i}".encode()))).code == ResponseCode.SUCCESS
    first = await call(addr, pop("PT", invisible=3000))
    assert first.code == ResponseCode.SUCCESS and first.remark == "FOUND"
    assert int(first.ext("restNum") or -1) == 0 and int(first.ext("invisibleTime") or 0) == 3000
    msgs = handles(first, "broker-p")
    assert sorted(m["body"] for m in msgs) == [b"m0", b"m1", b"m2", b"m3"]  # a new group starts at 0
    by_body = {m["body"]: m for m in msgs}
    # nothing more now: POLLING_TIMEOUT, and still the four fields the client decodes
    empty = await call(addr, pop("PT"))
    assert empty.code == ResponseCode.POLLING_TIMEOUT and empty.remark == "NO_MESSAGE_IN_QUEUE"
    assert all(k in (empty.ext_fields or {}) for k in FOUR_FIELDS)
    # ack two; change one to 500 ms; leave m3 until its 3 s are up
    for body in (b"m0", b"m1"):
        assert (await call(addr, ack("PG", "PT", by_body[body]))).code == ResponseCode.SUCCESS
    changed = await call(addr, change("PG", "PT", by_body[b"m2"], 500))
    assert changed.code == ResponseCode.SUCCESS and int(changed.ext("invisibleTime") or 0) == 500
    assert int(changed.ext("popTime") or 0) >= int(first.ext("popTime") or 0)
    # the old handle acks nothing any more: m2 comes back after the new 500 ms
    assert (await call(addr, ack("PG", "PT", by_body[b"m2"]))).code == ResponseCode.SUCCESS
    again: list[dict[str, Any]] = []

    async def redelivered() -> bool:
        again.extend(await popped_bodies(addr, "PT", "PG", "broker-p"))
        return {m["body"] for m in again} >= {b"m2", b"m3"}

    await eventually(redelivered, 20, "m2 and m3 come again")
    assert sorted(m["body"] for m in again) == [b"m2", b"m3"]  # the acked ones never
    for m in again:  # handed out under the topic asked for, from the group's retry topic, counted
        assert m["topic"] == "PT" and m["reconsumeTimes"] == 1
        assert m["handle"].split(" ")[4] == "1" and "1ST_POP_TIME" in m["properties"]
    retry_msg = again[0]
    assert (await call(addr, ack("PG", "PT", retry_msg))).code == ResponseCode.SUCCESS
    # Java's refusals of an ack naming no message
    bad = await call(addr, request(RequestCode.ACK_MESSAGE, {"consumerGroup": "PG", "topic": "PT", "queueId": 7,
                                                             "extraInfo": retry_msg["handle"], "offset": 0}))
    assert bad.code == ResponseCode.MESSAGE_ILLEGAL
    far = await call(addr, request(RequestCode.ACK_MESSAGE, {"consumerGroup": "PG", "topic": "PT", "queueId": 0,
                                                             "extraInfo": retry_msg["handle"], "offset": 99}))
    assert far.code == ResponseCode.NO_MESSAGE


async def test_long_polling_tags_and_refusals(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="", brokerName="broker-p")
    addr = broker.addr
    assert (await call(addr, create_topic("LT", queues=4))).code == ResponseCode.SUCCESS
    async with connect(addr) as conn:
        held_answer: list[RemotingCommand] = []

        async def held() -> None:
            held_answer.append(await conn.invoke(pop("LT", "LG", poll=20_000, exp="TagA"), timeout=30))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(held)
            await trio.sleep(0.5)
            assert not held_answer  # held: nothing to pop yet
            assert (await call(addr, send("LT", 2, b"not for LG", tag="TagB"))).code == ResponseCode.SUCCESS
            assert (await call(addr, send("LT", 3, b"for LG", tag="TagA"))).code == ResponseCode.SUCCESS
        resp = held_answer[0]
        assert resp.code == ResponseCode.SUCCESS
        assert [m["body"] for m in handles(resp, "broker-p")] == [b"for LG"]
    # a short poll time ends with POLLING_TIMEOUT
    with trio.fail_after(20):
        timed_out = await call(addr, pop("LT", "LG", poll=300), timeout=20)
    assert timed_out.code == ResponseCode.POLLING_TIMEOUT
    # Java's refusals
    assert (await call(addr, pop("NoSuchTopic"))).code == ResponseCode.TOPIC_NOT_EXIST
    assert (await call(addr, pop("LT", nums=33))).code == ResponseCode.INVALID_PARAMETER
    assert (await call(addr, pop("LT", queue_id=9))).code == ResponseCode.INVALID_PARAMETER
    stale = pop("LT")
    (stale.ext_fields or {})["bornTime"] = str(now_ms() - 60_000)
    late = await call(addr, stale)
    assert late.code == ResponseCode.POLLING_TIMEOUT and "timeout too much" in (late.remark or "")
    assert all(k in (late.ext_fields or {}) for k in FOUR_FIELDS)
    fifo = pop("LT")
    (fifo.ext_fields or {})["order"] = "true"
    assert (await call(addr, fifo)).code == ResponseCode.SYSTEM_ERROR


async def test_a_new_group_starts_at_the_last_message_once_the_first_is_gone(
    start_broker: Callable[..., BrokerProcess],
) -> None:
    broker = start_broker(namesrvAddr="", brokerName="broker-p", maxMessagesPerQueue=3)
    addr = broker.addr
    assert (await call(addr, create_topic("OT", queues=1))).code == ResponseCode.SUCCESS
    for i in range(5):  # offsets 0..4, the queue keeps 2..4
        assert (await call(addr, send("OT", 0, f"o{i}".encode()))).code == ResponseCode.SUCCESS
    got = await popped_bodies(addr, "OT", "NEW", "broker-p")
    assert [m["body"] for m in got] == [b"o4"]  # getInitOffset: "pop last one"
    got = await popped_bodies(addr, "OT", "MIN", "broker-p", init_mode=0)
    assert [m["body"] for m in got] == [b"o2", b"o3", b"o4"]  # initMode MIN: the first held


async def test_in_flight_state_survives_a_restart(start_broker: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    store = tmp_path / "store"
    broker = start_broker(namesrvAddr="", brokerName="broker-p", storePathRootDir=store)
    assert (await call(broker.addr, create_topic("RT", queues=1))).code == ResponseCode.SUCCESS
    for body in (b"acked", b"not acked"):
        assert (await call(broker.addr, send("RT", 0, body))).code == ResponseCode.SUCCESS
    # invisible for 15 s: the restart below must end well within it, even on a busy machine (under
    # stress-ng a restart took longer than the 4 s this was, and the message was visible again)
    msgs = {m["body"]: m for m in await popped_bodies(broker.addr, "RT", "RG", "broker-p", invisible=15000)}
    assert set(msgs) == {b"acked", b"not acked"}
    assert (await call(broker.addr, ack("RG", "RT", msgs[b"acked"]))).code == ResponseCode.SUCCESS
    assert (await call(broker.addr, pop("RT", "RG"))).code == ResponseCode.POLLING_TIMEOUT
    broker.kill()  # kill -9: what was answered was on disk before it was answered
    again = start_broker(namesrvAddr="", brokerName="broker-p", storePathRootDir=store)
    assert (await call(again.addr, pop("RT", "RG"))).code == ResponseCode.POLLING_TIMEOUT  # still invisible
    back: list[dict[str, Any]] = []

    async def revived() -> bool:
        back.extend(await popped_bodies(again.addr, "RT", "RG", "broker-p"))
        return bool(back)

    await eventually(revived, 40, "the unacked message comes again after the restart")
    assert [m["body"] for m in back] == [b"not acked"] and back[0]["reconsumeTimes"] == 1


def timer_send(topic: str, body: bytes, **props: str) -> RemotingCommand:
    return request(RequestCode.SEND_MESSAGE_V2, {"a": "PP", "b": topic, "c": "TBW102", "d": 4, "e": 0, "f": 0,
                                                 "g": now_ms(), "h": 0, "i": props_text(**props), "j": 0, "k": False,
                                                 "m": False}, body)


async def test_timer_and_delay_level_messages_come_no_earlier_than_asked(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    broker = start_broker(namesrvAddr="", brokerName="broker-p", storePathRootDir=store)
    addr = broker.addr
    assert (await call(addr, create_topic("TT", queues=1))).code == ResponseCode.SUCCESS
    deliver = now_ms() + 1500
    sent = await call(addr, timer_send("TT", b"at a time", TIMER_DELIVER_MS=str(deliver)))
    assert sent.code == ResponseCode.SUCCESS and sent.ext("queueId") == "0"
    assert (await call(addr, timer_send("TT", b"level 1", DELAY="1"))).code == ResponseCode.SUCCESS
    too_far = await call(addr, timer_send("TT", b"x", TIMER_DELAY_SEC=str(4 * 24 * 3600)))
    assert too_far.code == ResponseCode.MESSAGE_ILLEGAL and "timer message illegal" in (too_far.remark or "")
    assert (await call(addr, pop("TT", "TG"))).code == ResponseCode.POLLING_TIMEOUT  # nothing yet
    got: list[dict[str, Any]] = []

    async def both() -> bool:
        got.extend(await popped_bodies(addr, "TT", "TG", "broker-p"))
        return len(got) >= 2

    await eventually(both, 20, "both delayed messages come")
    by_body = {m["body"]: m for m in got}
    assert set(by_body) == {b"at a time", b"level 1"}
    timed = by_body[b"at a time"]
    assert timed["storeTs"] >= deliver  # stored on its queue no earlier than asked
    assert timed["properties"]["TIMER_OUT_MS"] == str(deliver) and "REAL_TOPIC" not in timed["properties"]
    # a timer pending across a kill -9 comes once after the restart
    later = now_ms() + 2500
    assert (await call(addr, timer_send("TT", b"across a restart", TIMER_DELIVER_MS=str(later)))).code == 0
    broker.kill()
    again = start_broker(namesrvAddr="", brokerName="broker-p", storePathRootDir=store)
    after: list[dict[str, Any]] = []

    async def came() -> bool:
        after.extend(await popped_bodies(again.addr, "TT", "TG", "broker-p"))
        return bool(after)

    await eventually(came, 20, "the pending timer message comes after the restart")
    await trio.sleep(1.5)
    after.extend(await popped_bodies(again.addr, "TT", "TG", "broker-p"))
    assert [m["body"] for m in after] == [b"across a restart"] and after[0]["storeTs"] >= later
