"""Pure parts of the simulated producer: queue selection, fault table, records, wire shapes.

No sockets: the fault table runs on an injected clock, routes are built
from decoded bodies, records go through a real msgpack file.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import msgpack
import pytest

from remoting.bodies import BrokerData, QueueData, TopicRouteData
from remoting.codes import RequestCode
from simclient.fault import (
    ISOLATION_LATENCY_MS,
    LatencyFaultTolerance,
    not_available_duration_ms,
)
from simclient.load import LoadSpec, LoadSummary
from simclient.producer_options import ProducerOptions
from simclient.records import OUTCOMES, RecordWriter, SendRecord, read_records
from simclient.route import (
    TopicPublish,
    as_default_topic_route,
    decode_snapshot,
    select_queue,
    snapshot_of,
)
from simclient.stats import Histogram, RouteStats
from simclient.wire import (
    RETRY_RESPONSE_CODES,
    UniqIdMaker,
    compress_body,
    message_properties,
    send_message_v2,
)


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def route(*brokers: tuple[str, int, int, bool]) -> TopicRouteData:
    """(name, write queues, perm, has master) per broker."""
    qds = [QueueData(name, n, n, perm) for name, n, perm, _ in brokers]
    bds = [
        BrokerData("C", name, {0: f"127.0.0.1:{10911 + i}"} if master else {1: f"127.0.0.1:{20911 + i}"})
        for i, (name, _, _, master) in enumerate(brokers)
    ]
    return TopicRouteData(qds, bds)


# --------------------------------------------------------------------------
# route -> queues


def test_queues_come_from_writable_brokers_with_a_master_in_name_order() -> None:
    snap = snapshot_of(route(("b", 2, 6, True), ("a", 3, 6, True), ("ro", 4, 4, True), ("slaveonly", 4, 6, False)))
    assert snap.queues == (("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1))
    assert snap.master_addr("a") == "127.0.0.1:10912"
    assert snap.master_addr("slaveonly") is None


def test_order_topic_conf_decides_the_queues() -> None:
    r = route(("a", 8, 6, True))
    r.order_topic_conf = "b:2;a:1"
    snap = snapshot_of(r)
    assert snap.order_topic
    assert snap.queues == (("b", 0), ("b", 1), ("a", 0))


def test_default_topic_route_cuts_queue_counts_to_four() -> None:
    cut = as_default_topic_route(route(("a", 8, 7, True), ("b", 2, 7, True)), 4)
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in cut.queue_datas] == [("a", 4, 4), ("b", 2, 2)]


def test_decoded_routes_are_shared_and_changes_detected() -> None:
    body = route(("a", 2, 6, True), ("b", 2, 6, True)).encode(standard=True)
    one, two = decode_snapshot(body), decode_snapshot(bytes(body))
    assert one is two
    # the same route in another order (another NameServer's encoding) is "unchanged"
    reordered = TopicRouteData(list(reversed(route(("a", 2, 6, True), ("b", 2, 6, True)).queue_datas)),
                               list(reversed(route(("a", 2, 6, True), ("b", 2, 6, True)).broker_datas)))
    assert decode_snapshot(reordered.encode(standard=False)).same_as(one)
    assert not decode_snapshot(route(("a", 2, 6, True)).encode(standard=True)).same_as(one)
    assert decode_snapshot(body, default_topic_queue_nums=1).queues == (("a", 0), ("b", 0))


# --------------------------------------------------------------------------
# selection


def publish(*brokers: tuple[str, int], seed: int = 7) -> TopicPublish:
    return TopicPublish(snapshot_of(route(*[(n, q, 6, True) for n, q in brokers])), rng=random.Random(seed))


def test_round_robin_visits_every_queue_in_turn() -> None:
    tp = publish(("a", 2), ("b", 2))
    picks = [select_queue(tp, last_broker=None) for _ in range(8)]
    assert sorted(set(picks)) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert picks[:4] == picks[4:]  # a fixed cycle
    first = tp.queues.index(picks[0])
    assert picks[:4] == [tp.queues[(first + i) % 4] for i in range(4)]


def test_retry_avoids_the_broker_of_the_previous_attempt() -> None:
    tp = publish(("a", 3), ("b", 1))
    for _ in range(20):
        assert select_queue(tp, last_broker="a")[0] == "b"
        assert select_queue(tp, last_broker="b")[0] == "a"


def test_retry_with_a_single_broker_uses_it_again() -> None:
    tp = publish(("a", 2))
    assert select_queue(tp, last_broker="a")[0] == "a"


def test_empty_route_selects_nothing() -> None:
    assert select_queue(TopicPublish(None), last_broker=None) is None
    assert select_queue(publish(("a", 0)), last_broker=None) is None


def test_fault_selection_prefers_available_then_reachable_then_any() -> None:
    clock = FakeClock()
    ft = LatencyFaultTolerance(clock)
    tp = publish(("a", 2), ("b", 2), ("c", 2))
    kw = {"is_available": ft.is_available, "is_reachable": ft.is_reachable, "rng": random.Random(1)}
    ft.update("a", 600, isolation=False, reachable=True)  # 2 s penalty
    assert {select_queue(tp, last_broker=None, **kw)[0] for _ in range(30)} == {"b", "c"}
    assert {select_queue(tp, last_broker="b", reset_index=True, **kw)[0] for _ in range(30)} == {"c"}
    ft.update("b", 0, isolation=True, reachable=False)
    ft.update("c", 0, isolation=True, reachable=False)
    # nobody available: a reachable one other than the last broker ("a" is reachable)
    assert {select_queue(tp, last_broker="b", **kw)[0] for _ in range(30)} == {"a"}
    # nobody available, the only reachable one was the last: any queue
    assert {select_queue(tp, last_broker="a", **kw)[0] for _ in range(60)} == {"a", "b", "c"}
    clock.advance(10.0)
    assert {select_queue(tp, last_broker=None, **kw)[0] for _ in range(30)} == {"a", "b", "c"}


# --------------------------------------------------------------------------
# fault table


@pytest.mark.parametrize(
    ("latency", "penalty"),
    [(0, 0), (49, 0), (50, 0), (549, 0), (550, 2000), (1799, 2000), (1800, 5000), (3000, 6000), (5000, 10000),
     (14999, 10000), (15000, 30000), (120000, 30000)],
)
def test_penalty_table_is_rocketmq_5x(latency: float, penalty: int) -> None:
    assert not_available_duration_ms(latency) == penalty


def test_slow_broker_is_unavailable_for_its_penalty_only() -> None:
    clock = FakeClock()
    ft = LatencyFaultTolerance(clock)
    assert ft.update("a", 600, isolation=False, reachable=True) == 2000
    assert not ft.is_available("a") and ft.is_reachable("a")
    assert ft.is_available("b")
    clock.advance(1.999)
    assert not ft.is_available("a")
    clock.advance(0.002)
    assert ft.is_available("a")
    assert ft.isolated() == []


def test_failed_attempt_isolates_for_ten_seconds_and_refusal_marks_unreachable() -> None:
    clock = FakeClock()
    ft = LatencyFaultTolerance(clock)
    assert ft.update("a", 3, isolation=True, reachable=False) == not_available_duration_ms(ISOLATION_LATENCY_MS) == 10000
    assert ft.isolated() == ["a"] and not ft.is_reachable("a")
    clock.advance(9.9)
    assert not ft.is_available("a")
    clock.advance(0.2)
    assert ft.is_available("a") and not ft.is_reachable("a")
    ft.update("a", 3, isolation=False, reachable=True)  # a later good send
    assert ft.is_reachable("a")


def test_a_penalty_never_shortens_an_isolation() -> None:
    clock = FakeClock()
    ft = LatencyFaultTolerance(clock)
    ft.update("a", 0, isolation=True, reachable=True)  # 10 s
    clock.advance(1.0)
    ft.update("a", 600, isolation=False, reachable=True)  # 2 s would end sooner
    clock.advance(8.5)
    assert not ft.is_available("a")
    ft.update("a", 1, isolation=False, reachable=True)  # fast send: no penalty, no change
    assert not ft.is_available("a")
    clock.advance(0.6)
    assert ft.is_available("a")


def test_fault_tables_must_match() -> None:
    with pytest.raises(ValueError):
        LatencyFaultTolerance(FakeClock(), latency_max=(1, 2), not_available=(0,))


# --------------------------------------------------------------------------
# wire shapes


def test_send_message_v2_header_is_what_a_java_producer_sends() -> None:
    cmd = send_message_v2(group="PG", topic="T", queue_id=3, broker_name="broker-a", body=b"x",
                          properties="UNIQ_KEY\x01U\x02", born_timestamp_ms=1700000000000)
    assert cmd.code == RequestCode.SEND_MESSAGE_V2 == 310
    assert cmd.ext_fields == {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000000",
                              "h": "0", "i": "UNIQ_KEY\x01U\x02", "j": "0", "k": "false", "m": "false", "n": "broker-a"}
    assert cmd.body == b"x"


def test_properties_and_uniq_keys() -> None:
    ids = UniqIdMaker(0x12345678)
    a, b = ids.next(1_700_000_000_000), ids.next(1_700_000_000_000)
    assert re.fullmatch(r"7F000001[0-9A-F]{4}12345678[0-9A-F]{8}0001", a)
    assert b[:-4] == a[:-4] and b.endswith("0002")
    text = message_properties(a, tags="TagA", keys="k1")
    pairs = dict(p.split("\x01") for p in text.split("\x02") if p)
    assert pairs == {"KEYS": "k1", "UNIQ_KEY": a, "WAIT": "true", "TAGS": "TagA"}
    assert text.endswith("\x02")


def test_large_bodies_are_zlib_compressed_with_the_sys_flag() -> None:
    small, flag = compress_body(b"a" * 4095)
    assert flag == 0 and small == b"a" * 4095
    big, flag = compress_body(b"a" * 4096)
    assert flag == 0x301 and len(big) < 100
    import zlib

    assert zlib.decompress(big) == b"a" * 4096


def test_retry_codes_are_the_5_3_3_set() -> None:
    assert RETRY_RESPONSE_CODES == {17, 14, 1, 2, 16, 204, 205, 1500}


# --------------------------------------------------------------------------
# records and stats


def records(n: int) -> list[SendRecord]:
    return [
        SendRecord(i * 0.5, i % 7, f"T{i % 3}", None if i % 5 == 0 else "broker-a", i % 4 - 1, OUTCOMES[i % 6],
                   i * 1.25, 1 + i % 3, i, i % 2)
        for i in range(n)
    ]


def test_records_round_trip_through_msgpack(tmp_path: Path) -> None:
    path = tmp_path / "sends.msgpack"
    recs = records(5000)
    with RecordWriter(path, buffer_bytes=1024) as w:
        for r in recs:
            w.write(r)
    assert list(read_records(path)) == recs
    with pytest.raises(ValueError):
        w.write(recs[0])


def test_truncated_record_file_yields_the_complete_records(tmp_path: Path) -> None:
    path = tmp_path / "sends.msgpack"
    with RecordWriter(path) as w:
        for r in records(10):
            w.write(r)
    path.write_bytes(path.read_bytes()[:-3])
    assert list(read_records(path)) == records(10)[:9]


def test_older_shorter_records_still_read(tmp_path: Path) -> None:
    path = tmp_path / "old.msgpack"
    path.write_bytes(msgpack.packb([1.0, 2, "T", "b", 0, "ok", 3.5, 1]))
    assert list(read_records(path)) == [SendRecord(1.0, 2, "T", "b", 0, "ok", 3.5, 1)]
    path.write_bytes(msgpack.packb([1.0, 2]))
    with pytest.raises(ValueError):
        list(read_records(path))


def test_histogram_percentiles_are_within_five_percent_and_merge() -> None:
    rng = random.Random(3)
    values = [rng.lognormvariate(1.0, 1.0) for _ in range(20000)]
    h1, h2 = Histogram(), Histogram()
    for i, v in enumerate(values):
        (h1 if i % 2 else h2).record(v)
    h1.merge(Histogram.from_obj(h2.to_obj()))
    values.sort()
    assert h1.count == 20000 and h1.max_ms == values[-1]
    for p in (50, 90, 99):
        exact = values[int(len(values) * p / 100) - 1]
        assert abs(h1.percentile(p) - exact) / exact < 0.05
    assert Histogram().percentile(99) == 0.0


def test_summaries_merge_across_partitions() -> None:
    a, b = LoadSummary(producers=2), LoadSummary(producers=3)
    for r in records(60)[:30]:
        a.add(r)
    for r in records(60)[30:]:
        b.add(r)
    b.route.queries = 5
    merged = LoadSummary.from_obj(a.to_obj())
    merged.merge(LoadSummary.from_obj(b.to_obj()))
    whole = LoadSummary()
    for r in records(60):
        whole.add(r)
    assert merged.producers == 5 and merged.sends == 60
    assert merged.outcomes == whole.outcomes and merged.by_broker == whole.by_broker
    assert merged.retried == whole.retried and merged.latency.count == 60
    assert merged.route.queries == 5 and RouteStats.from_obj(merged.route.to_obj()) == merged.route


# --------------------------------------------------------------------------
# option validation


@pytest.mark.parametrize(
    "kwargs",
    [
        {"producers": 0, "topics": ("T",), "rate_per_producer": 1, "duration": 1},
        {"producers": 1, "topics": (), "rate_per_producer": 1, "duration": 1},
        {"producers": 1, "topics": ("T",), "rate_per_producer": -1, "duration": 1},
        {"producers": 1, "topics": ("T",), "rate_per_producer": 1},
        {"producers": 1, "topics": ("T",), "rate_per_producer": 1, "duration": 0},
        {"producers": 1, "topics": "T", "rate_per_producer": 1, "duration": 1},
    ],
)
def test_bad_load_specs_are_refused(kwargs: dict) -> None:
    with pytest.raises((ValueError, TypeError)):
        LoadSpec(**kwargs)


def test_topics_are_spread_over_producers() -> None:
    spec = LoadSpec(producers=4, topics=("A", "B", "C"), rate_per_producer=0, messages_per_producer=1, topics_per_producer=2)
    assert [spec.topics_of(i) for i in range(4)] == [("A", "B"), ("B", "C"), ("C", "A"), ("A", "B")]
    assert LoadSpec(producers=1, topics=("A", "B"), rate_per_producer=0, duration=1).topics_of(5) == ("A", "B")


def test_bad_producer_options_are_refused() -> None:
    with pytest.raises(ValueError):
        ProducerOptions(namesrv_addrs=())
    with pytest.raises(TypeError):
        ProducerOptions(namesrv_addrs="127.0.0.1:9876")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ProducerOptions(namesrv_addrs=("127.0.0.1:9876",), send_timeout=0)
    assert ProducerOptions(namesrv_addrs=("x:1",)).send_latency_fault_enable is False  # 5.x default


async def test_run_load_holds_full_collections_off_and_restores_them() -> None:
    import gc
    import socket

    import trio

    from simclient import run_load

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"  # refused: every send ends as no_route
    before = gc.get_threshold()
    during: list[tuple[int, int, int]] = []
    options = ProducerOptions(namesrv_addrs=(dead,), unregister_on_close=False)
    spec = LoadSpec(producers=3, topics=("T",), rate_per_producer=0, messages_per_producer=2, duration=5)

    async def one() -> None:
        summary = await run_load(options, spec, lambda r: None, on_start=lambda ps: during.append(gc.get_threshold()))
        assert summary.outcomes["no_route"] == summary.sends == 6

    async with trio.open_nursery() as nursery:  # two overlapping loads: restored only after both
        nursery.start_soon(one)
        nursery.start_soon(one)
    assert len(during) == 2 and all(t[2] > 10**8 for t in during)
    assert gc.get_threshold() == before
    summary = await run_load(options, spec, lambda r: None, tune_gc=False, on_start=lambda ps: during.append(gc.get_threshold()))
    assert during[-1] == before and summary.sends == 6
