"""QUERY_MESSAGE (12): ``queryMsgByKey`` and ``queryMsgByUniqueKey`` against real broker stub processes.

The answer shapes are the ones a Java 5.3.3 broker gave for the same
requests (QueryMessageProcessor): the records in commit-log order with
``indexLastUpdateTimestamp`` / ``indexLastUpdatePhyoffset``, or
QUERY_NOT_FOUND with Java's remark and both fields 0. The key index itself
(ring, slot chains, bounds) is exercised without processes at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from broker_stub.query_index import KeyIndex, record_keys
from broker_stub.store import MessageStore
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, request
from remoting.transport import connect
from tests.broker_wire import call, create_topic, decode_stored, java_properties, props_5x, send_v2
from tests.test_broker_stub import eventually

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

NOT_FOUND = "can not find message, maybe time range not correct"
FOREVER = 2**63 - 1


def query(topic: str, key: str, *, max_num: int = 32, begin: int = 0, end: int = FOREVER, unique: bool = False,
          **overrides: object) -> RemotingCommand:
    """QueryMessageRequestHeader as MQAdminImpl.queryMessage fills it (the flag only for a unique-key query)."""
    fields: dict[str, object] = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin,
                                 "endTimestamp": end}
    if unique:
        fields["_UNIQUE_KEY_QUERY"] = "true"
    fields.update(overrides)
    return request(RequestCode.QUERY_MESSAGE, fields)


async def put_keyed(addr: str, topic: str, items: list[tuple[str, str]], queues: int = 4) -> list[dict[str, object]]:
    """Send one message per (KEYS, UNIQ_KEY) pair, round robin over the queues; the stored records."""
    async with connect(addr) as c:
        assert (await c.invoke(create_topic(topic, queues=queues))).code == ResponseCode.SUCCESS
        sent = []
        for i, (keys, uniq) in enumerate(items):
            resp = await c.invoke(send_v2(topic, f"body-{i}".encode(), props_5x(KEYS=keys, UNIQ_KEY=uniq, TAGS="T"),
                                          queue_id=i % queues))
            assert resp.code == ResponseCode.SUCCESS, resp
            sent.append({"msgId": resp.ext("msgId"), "queueId": i % queues, "queueOffset": int(resp.ext("queueOffset"))})
    return sent


def uniq(i: int) -> str:
    return f"7F00000100002A9F0000000000{i:06X}"


async def test_query_by_key_answers_the_messages_that_carry_it(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="")
    t0 = int(time.time() * 1000)
    await put_keyed(broker.addr, "QK", [("K1 A", uniq(0)), ("B", uniq(1)), ("K1", uniq(2)), ("C K1", uniq(3))])
    resp = await call(broker.addr, query("QK", "K1"))
    assert resp.code == ResponseCode.SUCCESS, resp
    msgs = decode_stored(resp.body)
    assert [m["body"] for m in msgs] == [b"body-0", b"body-2", b"body-3"]  # commit-log order
    assert [m["phys"] for m in msgs] == sorted(m["phys"] for m in msgs)  # type: ignore[type-var]
    assert all("K1" in java_properties(str(m["props"]))["KEYS"].split(" ") for m in msgs)
    newest = msgs[-1]
    assert resp.ext("indexLastUpdatePhyoffset") == str(newest["phys"])
    assert t0 <= int(resp.ext("indexLastUpdateTimestamp") or 0) <= int(time.time() * 1000)
    # a key of one message; another topic's keys are not this topic's; a key nobody carries
    assert [m["body"] for m in decode_stored((await call(broker.addr, query("QK", "B"))).body)] == [b"body-1"]
    for topic, key in (("OTHER", "K1"), ("QK", "K"), ("QK", "nope")):
        miss = await call(broker.addr, query(topic, key))
        assert (miss.code, miss.remark) == (ResponseCode.QUERY_NOT_FOUND, NOT_FOUND)
        assert miss.ext("indexLastUpdateTimestamp") == "0" and miss.ext("indexLastUpdatePhyoffset") == "0"
        assert miss.body == b""


async def test_query_by_unique_key_time_range_and_max_num(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="")
    items = [("SAME", uniq(i)) for i in range(70)]
    await put_keyed(broker.addr, "QU", items, queues=2)
    async with connect(broker.addr) as c:
        one = await c.invoke(query("QU", uniq(5), unique=True))
        assert one.code == ResponseCode.SUCCESS
        (msg,) = decode_stored(one.body)
        assert java_properties(str(msg["props"]))["UNIQ_KEY"] == uniq(5) and msg["body"] == b"body-5"
        # maxNum is capped at maxMsgsNumBatch (64): the newest 64 of the 70, oldest first
        many = decode_stored((await c.invoke(query("QU", "SAME", max_num=1000))).body)
        assert [m["body"] for m in many] == [f"body-{i}".encode() for i in range(6, 70)]
        few = decode_stored((await c.invoke(query("QU", "SAME", max_num=3))).body)
        assert [m["body"] for m in few] == [b"body-67", b"body-68", b"body-69"]
        # a unique-key query takes defaultQueryMaxNum (32) whatever maxNum says
        capped = decode_stored((await c.invoke(query("QU", "SAME", max_num=1, unique=True))).body)
        assert len(capped) == 32
        # the time range is on the store time
        stamps = sorted(int(m["storeTs"]) for m in many)  # type: ignore[call-overload]
        window = decode_stored((await c.invoke(query("QU", "SAME", begin=stamps[-1], end=stamps[-1]))).body)
        assert window and all(m["storeTs"] == stamps[-1] for m in window)
        late = await c.invoke(query("QU", "SAME", begin=stamps[-1] + 60_000))
        assert late.code == ResponseCode.QUERY_NOT_FOUND
        # Java's checks of the header: every field present, numbers in range
        missing = await c.invoke(request(RequestCode.QUERY_MESSAGE, {"topic": "QU", "key": "SAME", "maxNum": 1}))
        assert missing.code == ResponseCode.SYSTEM_ERROR and "beginTimestamp" in (missing.remark or "")
        huge = await c.invoke(query("QU", "SAME", maxNum="99999999999"))
        assert huge.code == ResponseCode.SYSTEM_ERROR and "maxNum" in (huge.remark or "")


async def test_index_is_rebuilt_from_disk_and_built_on_a_slave(
    start_namesrv: Callable[..., object], start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    ns = start_namesrv()
    store = tmp_path / "store"
    master = start_broker("m", brokerName="broker-q", namesrvAddr=ns.addr, storePathRootDir=store)  # type: ignore[attr-defined]
    slave = start_broker("s", brokerName="broker-q", brokerId=1, namesrvAddr=ns.addr)  # type: ignore[attr-defined]
    await put_keyed(master.addr, "QD", [("DISK", uniq(i)) for i in range(5)])

    async def on_slave() -> bool:
        resp = await call(slave.addr, query("QD", "DISK"))
        return resp.code == ResponseCode.SUCCESS and len(decode_stored(resp.body)) == 5

    await eventually(on_slave, 15, "the slave's index holds the replicated messages")
    assert master.terminate() == 0
    again = start_broker("m2", brokerName="broker-q", namesrvAddr="", storePathRootDir=store)
    resp = await call(again.addr, query("QD", uniq(3), unique=True))
    assert resp.code == ResponseCode.SUCCESS and [m["body"] for m in decode_stored(resp.body)] == [b"body-3"]
    assert len(decode_stored((await call(again.addr, query("QD", "DISK"))).body)) == 5


async def test_a_deleted_topic_is_not_found_any_more(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="")
    await put_keyed(broker.addr, "QX", [("GONE", uniq(1))])
    assert (await call(broker.addr, query("QX", "GONE"))).code == ResponseCode.SUCCESS
    delete = request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "QX"})
    assert (await call(broker.addr, delete)).code == ResponseCode.SUCCESS
    assert (await call(broker.addr, query("QX", "GONE"))).code == ResponseCode.QUERY_NOT_FOUND
    await put_keyed(broker.addr, "QX", [("NEW", uniq(2))])  # the queue starts over at offset 0
    assert (await call(broker.addr, query("QX", "GONE"))).code == ResponseCode.QUERY_NOT_FOUND
    assert [m["body"] for m in decode_stored((await call(broker.addr, query("QX", "NEW"))).body)] == [b"body-0"]


async def test_message_index_enable_false_builds_no_index(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="")
    off = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"messageIndexEnable=false\n")
    assert (await call(broker.addr, off)).code == ResponseCode.SUCCESS
    await put_keyed(broker.addr, "QN", [("HIDDEN", uniq(1))])
    await trio.sleep(0.3)  # several catch-up rounds
    assert (await call(broker.addr, query("QN", "HIDDEN"))).code == ResponseCode.QUERY_NOT_FOUND
    on = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"messageIndexEnable=true\n")
    assert (await call(broker.addr, on)).code == ResponseCode.SUCCESS
    await put_keyed(broker.addr, "QN", [("SEEN", uniq(2))])
    assert (await call(broker.addr, query("QN", "SEEN"))).code == ResponseCode.SUCCESS
    assert (await call(broker.addr, query("QN", "HIDDEN"))).code == ResponseCode.QUERY_NOT_FOUND, "not indexed later"


# --------------------------------------------------------------------------
# the index without processes


def _store_with(keys: list[str], topic: str = "T", queues: int = 3) -> MessageStore:
    store = MessageStore("127.0.0.1", 10911, 100_000)
    for i, k in enumerate(keys):
        props = props_5x(KEYS=k, UNIQ_KEY=uniq(i)) if k else props_5x(UNIQ_KEY=uniq(i))
        store.put(topic, i % queues, f"b{i}".encode(), 0, props, 0, 0, b"\x7f\x00\x00\x01", 1, 0, None)
    return store


def test_index_keeps_the_newest_entries_within_its_capacity() -> None:
    store = _store_with(["A"] * 50, queues=1)
    index = KeyIndex(store, capacity=40)  # 100 entries offered (a UNIQ_KEY and a KEYS word each)
    while index.behind:
        assert index.catch_up(7) <= 7  # slices: a call never reads more than its budget
    assert index.total == 100 and len(index._locs) == 40  # the columns never grow past the capacity
    found = index.find("T", "A", 64, 0, FOREVER)
    bodies = [decode_stored(r)[0]["body"] for r in found]
    assert bodies == [f"b{i}".encode() for i in range(30, 50)]  # only the newest 40 entries: 20 messages
    assert index.find("T", uniq(49), 64, 0, FOREVER) and not index.find("T", uniq(10), 64, 0, FOREVER)
    assert store.get_total == 0, "indexing and lookups are not consumption"


def test_lookup_answers_the_newest_by_commit_log_offset_whatever_the_queue_order() -> None:
    store = _store_with(["A"] * 30, queues=4)  # one pass reads the queues one after another
    index = KeyIndex(store)
    index.catch_up(1000)
    bodies = [decode_stored(r)[0]["body"] for r in index.find("T", "A", 5, 0, FOREVER)]
    assert bodies == [f"b{i}".encode() for i in range(25, 30)]
    newest = store.get("T", 29 % 4, 29 // 4, 1, 1 << 20)[0][0]
    assert index.last_phys == decode_stored(newest)[0]["phys"]


def test_index_reads_only_touched_topics_and_skips_rolled_back_messages() -> None:
    store = _store_with(["X"], topic="T1")
    index = KeyIndex(store)
    assert index.catch_up() == 1 and not index.behind
    store.put("T2", 0, b"late", 0, props_5x(KEYS="Y"), 0, 0, b"\x7f\x00\x00\x01", 1, 0, None)
    assert index.catch_up() == 0, "nothing touched: no pass"
    index.touch("T2")
    assert index.catch_up() == 1 and index.find("T2", "Y", 1, 0, FOREVER)
    store.put("T2", 0, b"rolled back", 0, props_5x(KEYS="Z"), 0xC, 0, b"\x7f\x00\x00\x01", 1, 0, None)
    index.touch("T2")
    index.catch_up()
    assert index.find("T2", "Z", 1, 0, FOREVER) == []  # TRANSACTION_ROLLBACK_TYPE is not indexed
    record = store.get("T1", 0, 0, 1, 1 << 20)[0][0]
    assert record_keys(record) == [uniq(0), "X"]


async def test_catch_up_task_yields_and_finishes() -> None:
    store = _store_with(["K"] * 3000)
    index = KeyIndex(store)
    ticks = 0

    async def other_task() -> None:
        nonlocal ticks
        while index.behind:
            ticks += 1
            await trio.sleep(0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(index.run)
        nursery.start_soon(other_task)
        with trio.fail_after(30):
            while index.behind:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert index.indexed_records == 3000 and ticks >= 2, "the catch-up let other tasks run between slices"
