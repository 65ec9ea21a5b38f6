"""The fan-out consumers' mergeable accounting: offset bitmaps, cross-partition duplicates, reconciliation."""

from __future__ import annotations

import random

from mqadmin.fanout.consume import GROUP_PREFIX, consumer_share, group_topics
from mqadmin.fanout.consume_metrics import ConsumeMetrics, OffsetBits, reconcile
from mqadmin.fanout.metrics import FanoutMetrics
from mqadmin.fanout.partition import FanoutPlan

Q = ("T", "broker-a", 0)


def test_offset_bits_set_grow_below_base_and_count() -> None:
    bits = OffsetBits()
    assert bits.add(Q, 100) and not bits.add(Q, 100)
    assert bits.add(Q, 5000) and bits.add(Q, 3)  # far above and below the first one
    assert bits.count() == 3
    assert bin(bits.as_int(Q, 0)).count("1") == 3 and bits.as_int(Q, 0) >> 100 & 1 == 1
    back = OffsetBits.from_obj(bits.to_obj())
    assert back.count() == 3 and back.as_int(Q, 0) == bits.as_int(Q, 0)


def test_merge_counts_offsets_both_sides_had() -> None:
    rng = random.Random(5)
    a, b = OffsetBits(), OffsetBits()
    truth_a, truth_b = {rng.randrange(50, 10_000) for _ in range(1500)}, {rng.randrange(10_000) for _ in range(1500)}
    for o in truth_a:
        a.add(Q, o)
    for o in truth_b:
        b.add(Q, o)
    assert a.merge(b) == len(truth_a & truth_b)
    assert a.count() == len(truth_a | truth_b)


def test_partitions_merge_to_the_same_figures_in_any_order() -> None:
    parts = []
    for p in range(3):
        m = ConsumeMetrics(members={"g": 1}, topics={"g": ["T"]})
        for o in range(p * 10, p * 10 + 15):  # 5 offsets overlap with the next partition
            m.consumed_one("g", Q, o, sec=o // 10)
        m.consumed_one("g", Q, p * 10, sec=0)  # one duplicate inside the partition
        for o in range(p * 10, p * 10 + 10):
            m.acked.add(Q, o)
        parts.append(FanoutMetrics(consume=m).encode())
    results = []
    for order in ([0, 1, 2], [2, 0, 1]):
        total = FanoutMetrics()
        for i in order:
            total.merge(FanoutMetrics.decode(parts[i]))
        assert total.consume is not None
        results.append((total.consume.duplicates["g"], total.consume.consumed["g"].count(), total.consume.acked.count(),
                        total.consume.members["g"], sum(total.consume.per_second.values())))
    assert results[0] == results[1] == (3 + 10, 35, 30, 3, 3 * 16)


def test_reconcile_sorts_every_acknowledged_message() -> None:
    m = ConsumeMetrics(members={"g": 2}, topics={"g": ["T"]})
    for o in range(20):
        m.acked.add(Q, o)
    for o in [*range(0, 8), *range(10, 12)]:  # 8 and 9 skipped; 12..19 not yet
        m.consumed_one("g", Q, o, sec=0)
    m.consumed_one("g", Q, 25, sec=0)  # consumed, never acknowledged to our producers
    (row,) = reconcile(m, {("g", *Q): 12}, {Q: 26})
    assert (row.acknowledged, row.consumed, row.unexplained, row.lag, row.other) == (20, 10, 2, 8, 1)
    assert row.broker_lag == 14
    (unread,) = reconcile(m, None)
    assert (unread.lag, unread.unexplained, unread.offsets_read) == (10, 0, False)


def test_consumers_are_spread_over_partitions_groups_and_topics() -> None:
    plan = FanoutPlan(namesrv_addrs=("127.0.0.1:1",), topics=("T0", "T1", "T2", "T3"), producers=10, partitions=3,
                      consumers=10, consumer_groups=4)
    shares = [consumer_share(plan, i) for i in range(3)]
    assert shares == [(0, 4), (4, 3), (7, 3)]
    assert [group_topics(plan, g) for g in range(4)] == [("T0",), ("T1",), ("T2",), ("T3",)]
    two = FanoutPlan(namesrv_addrs=("127.0.0.1:1",), topics=("T0", "T1", "T2", "T3"), producers=10, partitions=1,
                     consumers=10, consumer_groups=2)
    assert [group_topics(two, g) for g in range(2)] == [("T0", "T2"), ("T1", "T3")]
    assert GROUP_PREFIX == "fanout_consumer_group_"


def test_first_deliveries_per_second_are_exact_across_partitions() -> None:
    """Issue 29, item 8: the plot's "first deliveries" line counts each message once, in the second it was
    first consumed, whichever partition consumed it again later (a queue that moved in a rebalance)."""
    rng = random.Random(29)
    parts, first_at, deliveries = [], {}, 0
    for p in range(3):
        m = ConsumeMetrics(members={"g": 1}, topics={"g": ["T"]})
        for sec in range(6):
            start = rng.randrange(0, 300)  # each partition re-reads stretches others read before
            for offset in range(start, start + rng.randrange(1, 60)):
                m.consumed_one("g", Q, offset, sec)
                deliveries += 1
                first_at[offset] = min(first_at.get(offset, sec), sec)
        parts.append(ConsumeMetrics.from_obj(m.to_obj()))  # as a partition's blob arrives
    merged = ConsumeMetrics()
    for m in parts:
        merged.merge(m)
    firsts = merged.first_per_second()
    assert firsts is not None
    assert firsts == {sec: sum(1 for s in first_at.values() if s == sec) for sec in set(first_at.values())}
    assert sum(merged.per_second.values()) == deliveries
    assert deliveries - sum(firsts.values()) == sum(merged.duplicates.values())  # re-deliveries, as counted


def test_redelivery_note_says_when_and_why_and_that_it_does_not_fail() -> None:
    from mqadmin.fanout.consume_report import redelivery_note

    doc = {"redeliveries": 40, "perSecondSeries": [0, 50, 60, 20, 20], "firstPerSecondSeries": [0, 20, 50, 20, 20]}
    note = redelivery_note(doc)
    assert note.startswith("40 re-deliveries, 40 of them in the first 2 s of consumption: a rebalance moves a queue")
    assert "at least once" in note and "do not fail the run" in note
    assert redelivery_note({**doc, "firstPerSecondSeries": None}).startswith(
        "40 re-deliveries (when they came was not kept: too many delivery runs): a rebalance")
