"""The simulated consumer's pure parts: allocation, decoding, process queues, request shapes."""

from __future__ import annotations

import pytest

from broker_stub.store import MessageStore
from remoting import fastjson
from remoting.codes import RequestCode
from simclient.consume_records import (
    ConsumeRecord,
    consume_record_from_array,
    consume_record_writer,
    read_consume_records,
)
from simclient.consume_stats import ConsumeStats
from simclient.consumer import ConsumerOptions
from simclient.consumer_wire import consumer_heartbeat, java_string_hash, pull_message, subscription
from simclient.decode import DecodeError, decode_pulled
from simclient.process_queue import ProcessQueue
from simclient.rebalance import allocate_averagely, allocation_of_group, sort_queues

# 2 brokers x 4 queues, in MessageQueue order
MQ_ALL = sort_queues([("T", b, q) for b in ("broker-b", "broker-a") for q in range(4)])


def idx(queues: list[tuple[str, str, int]]) -> list[int]:
    return [MQ_ALL.index(q) for q in queues]


def test_queues_sort_like_message_queue_compare_to() -> None:
    assert MQ_ALL[0] == ("T", "broker-a", 0) and MQ_ALL[4] == ("T", "broker-b", 0)
    assert sort_queues([("b", "a", 1), ("a", "z", 9), ("a", "z", 10)]) == [("a", "z", 9), ("a", "z", 10), ("b", "a", 1)]


@pytest.mark.parametrize(
    ("consumers", "expected"),
    [
        (1, [[0, 1, 2, 3, 4, 5, 6, 7]]),
        (2, [[0, 1, 2, 3], [4, 5, 6, 7]]),
        (3, [[0, 1, 2], [3, 4, 5], [6, 7]]),  # 8 % 3 = 2: the first two take one more
        (5, [[0, 1], [2, 3], [4, 5], [6], [7]]),
        (8, [[i] for i in range(8)]),
        (10, [[i] for i in range(8)] + [[], []]),  # more consumers than queues: the last ones idle
    ],
)
def test_allocation_matches_allocate_message_queue_averagely(consumers: int, expected: list[list[int]]) -> None:
    cids = sorted(f"127.0.0.1@1#c{i}" for i in range(consumers))
    got = [idx(allocate_averagely(MQ_ALL, cids, cid)) for cid in cids]
    assert got == expected
    owners = [q for alloc in allocation_of_group(MQ_ALL, cids).values() for q in alloc]
    assert sorted(owners) == MQ_ALL  # every queue exactly once


def test_allocation_uses_string_order_of_ids_and_ignores_unknown_consumers() -> None:
    cids = sorted(["c10", "c9", "c2"])  # "c10" < "c2" < "c9" as strings, as Java sorts them
    assert cids == ["c10", "c2", "c9"]
    assert idx(allocate_averagely(MQ_ALL, cids, "c10")) == [0, 1, 2]
    assert idx(allocate_averagely(MQ_ALL, cids, "c9")) == [6, 7]
    assert allocate_averagely(MQ_ALL, cids, "not-yet-heartbeated") == []
    assert allocate_averagely([], cids, "c2") == []


def test_decode_reads_what_the_broker_stores() -> None:
    store = MessageStore("127.0.0.1", 10911, 100)
    props = "KEYS\x01k1\x02UNIQ_KEY\x01ABC\x02TAGS\x01TagA\x02"
    store.put("T", 2, b"hello", 0, props, 0, 1234, bytes(4), 5, 0, "TagA")
    store.put("T", 2, b"x" * 300, 0, "UNIQ_KEY\x01DEF\x02RETRY_TOPIC\x01Orig\x02", 0, 1235, bytes(4), 5, 3, None)
    records, _ = store.get("T", 2, 0, 32, 1 << 20)
    msgs = decode_pulled(b"".join(records))
    assert [(m.queue_id, m.queue_offset, m.msg_id, m.tags, m.retry_topic, m.reconsume_times, m.body_len) for m in msgs] == [
        (2, 0, "ABC", "TagA", None, 0, 5),
        (2, 1, "DEF", None, "Orig", 3, 300),
    ]
    assert msgs[0].topic == "T" and msgs[0].born_ms == 1234 and msgs[1].phys > msgs[0].phys > -1
    with pytest.raises(DecodeError):
        decode_pulled(b"".join(records)[:-3])
    with pytest.raises(DecodeError):
        decode_pulled(b"\x00" * 60)


def test_process_queue_commits_the_smallest_offset_still_waiting() -> None:
    store = MessageStore("127.0.0.1", 1, 100)
    for _ in range(4):
        store.put("T", 0, b"m", 0, "UNIQ_KEY\x01X\x02", 0, 1, bytes(4), 1, 0, None)
    msgs = decode_pulled(b"".join(store.get("T", 0, 0, 32, 1 << 20)[0]))
    pq = ProcessQueue(("T", "b", 0), 0)
    pq.put(msgs)
    assert pq.count == 4 and pq.span == 3
    assert pq.remove([1, 2]) == 0  # offset 0 still being consumed: commit nothing past it
    assert pq.remove([0]) == 3
    assert pq.remove([3]) == 4  # all done: one past the largest pulled
    assert pq.remove([3]) == -1


def test_heartbeat_and_pull_have_java_shapes() -> None:
    sub = subscription("T", "TagA || TagB")
    assert sub.tags == frozenset({"TagA", "TagB"})
    hb = consumer_heartbeat("cid", "g", [sub], consume_from_where="CONSUME_FROM_LAST_OFFSET")
    body = fastjson.loads(hb.body)
    data = body["consumerDataSet"][0]
    assert hb.code == RequestCode.HEART_BEAT and body["clientID"] == "cid"
    assert (data["groupName"], data["messageModel"], data["consumeType"]) == ("g", "CLUSTERING", "CONSUME_PASSIVELY")
    sd = data["subscriptionDataSet"][0]
    assert sd["tagsSet"] == ["TagA", "TagB"] and sd["codeSet"] == [java_string_hash("TagA"), java_string_hash("TagB")]
    assert java_string_hash("hello") == 99162322 and java_string_hash("") == 0  # String.hashCode
    assert java_string_hash("polygenelubricants") == -2147483648  # wraps as a Java int
    pull = pull_message(group="g", topic="T", broker_name="broker-a", queue_id=1, offset=7, max_nums=32, sys_flag=3,
                        commit_offset=5, suspend_ms=15000, sub_version=sub.version)
    assert pull.ext_fields is not None
    assert {k: pull.ext_fields[k] for k in ("queueOffset", "sysFlag", "commitOffset", "suspendTimeoutMillis", "bname")} == {
        "queueOffset": "7", "sysFlag": "3", "commitOffset": "5", "suspendTimeoutMillis": "15000", "bname": "broker-a"}
    assert "subscription" not in pull.ext_fields  # postSubscriptionWhenPull is off: the broker uses the heartbeat's


def test_consume_records_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    recs = [ConsumeRecord(0.5, 1, "g", "T", "broker-a", 0, 2, 7, "ID1", 3.5),
            ConsumeRecord(0.7, 2, "g", "T", "broker-a", 1, 2, 8, "ID2", 4.0, "retry", 1)]
    path = tmp_path / "c.msgpack"
    with consume_record_writer(path) as w:
        for r in recs:
            w.write(r)
    assert list(read_consume_records(path)) == recs
    assert consume_record_from_array([0.5, 1, "g", "T", "b", 0, 2, 7, "ID", 1.0]).outcome == "ok"
    with pytest.raises(ValueError):
        consume_record_from_array([1, 2])


def test_consume_stats_merge_and_round_trip() -> None:
    a, b = ConsumeStats(consumed=3, pulls=5), ConsumeStats(consumed=2, retried=1)
    a.latency.record(5.0)
    b.latency.record(7.0)
    a.merge(b)
    assert (a.consumed, a.retried, a.pulls, a.latency.count) == (5, 1, 5, 2)
    assert ConsumeStats.from_obj(a.to_obj()).to_obj() == a.to_obj()


def test_options_are_checked() -> None:
    ok = {"namesrv_addrs": ("127.0.0.1:9876",), "group": "g", "subscriptions": (("T", "*"),)}
    assert ConsumerOptions(**ok).inline
    assert not ConsumerOptions(**ok, consume_delay=0.01).inline
    for bad in ({"group": " "}, {"subscriptions": ()}, {"consume_from": "middle"}, {"rebalance_interval": 0},
                {"consume_failure_rate": 2.0}, {"namesrv_addrs": "127.0.0.1:9876"}):
        with pytest.raises(ValueError):
            ConsumerOptions(**{**ok, **bad})
