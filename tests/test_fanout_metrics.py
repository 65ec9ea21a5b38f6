"""Fan-out metrics merge exactly, plans split producers exactly, and the report's judgements.

No Spark and no network here: partitions are simulated by feeding known
send records and attempts into separate FanoutMetrics, whose merge must
equal one FanoutMetrics that saw everything.
"""

from __future__ import annotations

import random

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqadmin.fanout.brokers import StoredCount
from mqadmin.fanout.metrics import FanoutMetrics, PartInfo, merge_blobs
from mqadmin.fanout.partition import FanoutPlan, run_partition
from mqadmin.fanout.report import agreement, failover, to_json
from mqadmin.fanout.runner import FanoutOptions, FanoutResult, make_plan
from mqadmin.fanout.timeline import Event
from simclient.load import LoadSummary
from simclient.records import OUTCOMES, SendRecord

BROKERS = ("broker-a", "broker-b", "broker-c")

# One simulated send: (t, broker index, outcome index, latency in 1/8 ms so float sums stay exact, attempts)
send_st = st.tuples(
    st.integers(0, 4000).map(lambda x: x / 100),
    st.integers(0, len(BROKERS) - 1),
    st.integers(0, len(OUTCOMES) - 1),
    st.integers(1, 80_000).map(lambda x: x / 8),
    st.integers(1, 3),
)


def feed(m: FanoutMetrics, sends: list[tuple[float, int, int, float, int]]) -> None:
    """What a partition's sink and tracking pool do with these sends."""
    for t, b, o, lat, attempts in sends:
        broker, outcome = BROKERS[b], OUTCOMES[o]
        rec = SendRecord(t, 0, "T", broker, 0, outcome, lat, attempts)
        m.load.add(rec)
        row = m.timeline.setdefault(int(t), [0, 0, 0, 0])
        row[0 if outcome == "ok" else 1] += 1
        use = m.broker(broker)
        use.attempt(t, failed=outcome == "conn_error", refused=outcome == "rejected")
        if outcome == "ok":
            use.stored += 1
            use.last_stored = t if use.last_stored is None else max(use.last_stored, t)
        m.load.route.queries += attempts
        m.load.route.latency.record(lat / 4)


def partition(index: int, sends: list[tuple[float, int, int, float, int]]) -> FanoutMetrics:
    m = FanoutMetrics(load=LoadSummary(producers=len(sends)), parts=[PartInfo(index, producers=len(sends))])
    feed(m, sends)
    return m


def canonical(m: FanoutMetrics) -> dict:
    obj = m.to_obj()
    obj.pop("parts")
    obj["load"].pop("producers")
    return obj


@settings(max_examples=60, deadline=None)
@given(st.lists(send_st, max_size=120), st.integers(1, 6), st.randoms(use_true_random=False))
def test_merge_of_partitions_equals_one_partition_that_saw_everything(sends, parts, rnd) -> None:
    whole = partition(0, sends)
    chunks: list[list] = [[] for _ in range(parts)]
    for s in sends:
        chunks[rnd.randrange(parts)].append(s)
    blobs = [partition(i, c).encode() for i, c in enumerate(chunks)]
    rnd.shuffle(blobs)
    merged = merge_blobs(blobs)
    assert canonical(merged) == canonical(whole)
    assert merged.partitions == parts
    assert [p.index for p in merged.parts] == list(range(parts))
    assert merged.producers == len(sends)


def test_known_counts_add_up() -> None:
    a = partition(0, [(0.5, 0, 0, 1.0, 1)] * 7 + [(1.5, 1, 4, 3.0, 2)] * 2)  # 7 ok on a, 2 conn_error on b
    b = partition(1, [(2.5, 1, 0, 2.0, 1)] * 5 + [(3.5, 0, 1, 3000.0, 1)])  # 5 ok on b, 1 timeout on a
    m = merge_blobs([a.encode(), b.encode()])
    assert m.load.sends == 15
    assert m.load.outcomes["ok"] == 12 and m.load.outcomes["conn_error"] == 2 and m.load.outcomes["timeout"] == 1
    assert m.load.by_broker == {"broker-a": 7, "broker-b": 5}
    assert m.load.retried == 2
    assert m.brokers["broker-a"].attempts == 8 and m.brokers["broker-a"].stored == 7
    assert m.brokers["broker-b"].attempts == 7 and m.brokers["broker-b"].failed == 2
    assert m.brokers["broker-b"].first_failure == 1.5 and m.brokers["broker-b"].last_attempt == 2.5
    assert m.timeline == {0: [7, 0, 0, 0], 1: [0, 2, 0, 0], 2: [5, 0, 0, 0], 3: [0, 1, 0, 0]}
    assert m.load.latency.count == 15 and m.load.latency.max_ms == 3000.0
    assert m.load.route.queries == 7 + 4 + 5 + 1


def test_blob_is_compact_and_garbage_is_refused() -> None:
    rnd = random.Random(7)
    sends = [(rnd.uniform(0, 60), rnd.randrange(2), 0, rnd.uniform(0.2, 50), 1) for _ in range(20_000)]
    blob = partition(0, sends).encode()
    assert len(blob) < 8_000  # counts and buckets, not one row per send
    with pytest.raises(ValueError, match="unreadable"):
        FanoutMetrics.decode(b"\xc1 not msgpack")
    with pytest.raises(ValueError, match="version"):
        FanoutMetrics.decode(msgpack.packb({"version": 99}))


@pytest.mark.parametrize(("producers", "parts"), [(1, 1), (10, 3), (5000, 2), (10_001, 7), (3, 3)])
def test_plan_shares_cover_every_producer_once(producers: int, parts: int) -> None:
    plan = FanoutPlan(("127.0.0.1:1",), ("T",), producers, parts)
    ids = []
    for i in range(parts):
        first, count = plan.share(i)
        ids.extend(range(first, first + count))
    assert ids == list(range(producers))
    counts = [plan.share(i)[1] for i in range(parts)]
    assert max(counts) - min(counts) <= 1


def test_default_ramp_up_is_one_send_interval() -> None:
    opts = FanoutOptions(rate=4.0, duration=5.0)
    assert make_plan(opts, ["a:1"], ("T",), 2).ramp_up == 0.25
    assert make_plan(FanoutOptions(rate=0.0, duration=5.0), ["a:1"], ("T",), 2).ramp_up == 0.0


def test_a_failing_partition_returns_its_error_instead_of_raising() -> None:
    plan = FanoutPlan(("127.0.0.1:1",), (), 4, 1)  # no topics: the load cannot be built
    m = FanoutMetrics.decode(run_partition(0, plan))
    assert m.errors and "topic" in m.errors[0]
    assert m.load.sends == 0


def _result(by_broker: dict[str, int], counts: dict[str, StoredCount], timeouts: int = 0,
            events: list[Event] | None = None, metrics: FanoutMetrics | None = None) -> FanoutResult:
    m = metrics or FanoutMetrics()
    m.load.by_broker = dict(by_broker)
    m.load.outcomes["ok"] = sum(by_broker.values())
    m.load.outcomes["timeout"] = timeouts
    m.load.sends = m.load.outcomes["ok"] + timeouts
    plan = FanoutPlan(("a:1",), ("T",), 10, 1, rate=2.0, duration=10.0)
    return FanoutResult(plan, "spark", "local[2]", 2, m, counts, events or [])


def test_agreement_exact_and_explained_and_gone() -> None:
    same = _result({"a": 10, "b": 5}, {"a": StoredCount(100, 110), "b": StoredCount(0, 5)})
    assert agreement(same)["agree"] is True
    off = _result({"a": 10}, {"a": StoredCount(0, 12)}, timeouts=2)
    doc = agreement(off)
    assert doc["agree"] is False and doc["explained"] is True and "+2" in doc["note"]
    unexplained = _result({"a": 10}, {"a": StoredCount(0, 9)})
    assert agreement(unexplained)["agree"] is False and agreement(unexplained)["explained"] is False
    gone = _result({"a": 10, "b": 3}, {"a": StoredCount(0, None, last_seen=7, last_seen_at=2.0), "b": StoredCount(0, 3)})
    doc = agreement(gone)
    assert doc["agree"] is True and doc["brokers"]["a"]["gone"] is True
    too_many = _result({"a": 6}, {"a": StoredCount(0, None, last_seen=7, last_seen_at=2.0)})
    assert agreement(too_many)["agree"] is False


def test_failover_measured_from_the_kill() -> None:
    m = FanoutMetrics()
    a = m.broker("broker-a")
    for t in (1.0, 2.0, 4.1, 5.0, 6.5):
        a.attempt(t, failed=t > 4)
    a.routing, a.last_routed = 0, 6.9
    result = _result({}, {}, events=[Event(4.0, "kill broker-a", True, "", "kill_broker", "broker-a", 4.0)], metrics=m)
    (row,) = failover(result, end=10.0)
    assert row["killedAt"] == 4.0 and row["failedAttempts"] == 3
    assert row["stoppedSendingAfter"] == 2.5 and row["stillSendingAtEnd"] is False
    assert row["droppedFromRoutesAfter"] == 2.9
    a.routing = 5  # producers still route to it and tried it just now
    (row,) = failover(result, end=7.0)
    assert row["stillSendingAtEnd"] is True and row["stoppedSendingAfter"] is None
    assert to_json(result)["failover"][0]["broker"] == "broker-a"
