"""The simulated producer against real mqnamesrv and broker stub processes over loopback TCP.

Each test starts its own NameServer(s) and brokers (short registration
periods) and kills them afterwards, pass or fail.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import pytest
import trio

from remoting import requests as rq
from remoting.bodies import TopicRouteData
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, request
from remoting.transport import connect
from simclient import (
    ClientPool,
    LoadSpec,
    ProducerOptions,
    RecordWriter,
    SendRecord,
    SimProducer,
    read_records,
    run_load,
)

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess
    from tests.procs import NamesrvProcess

    Cluster = tuple[NamesrvProcess, BrokerProcess, BrokerProcess]

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

FAULT = 9000
TOPIC = "SimTopic"


async def call(addr: str, req: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
    async with connect(addr) as client:
        return await client.invoke(req, timeout)


async def fault(broker: BrokerProcess, action: str, **ext: object) -> None:
    resp = await call(broker.addr, request(FAULT, {"action": action, **ext}))
    assert resp.code == ResponseCode.SUCCESS, resp


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = trio.current_time() + timeout
    while not await check():
        if trio.current_time() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        await trio.sleep(0.05)


async def route_brokers(ns: str, topic: str) -> set[str]:
    resp = await call(ns, rq.get_route(topic))
    if resp.code != ResponseCode.SUCCESS:
        return set()
    return {q.broker_name for q in TopicRouteData.decode(resp.body).queue_datas}


async def stored_count(broker: BrokerProcess, topic: str, queues: int = 8) -> int:
    """Messages a broker holds for a topic: the sum of its queues' max offsets."""
    total = 0
    for q in range(queues):
        resp = await call(broker.addr, request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": q}))
        assert resp.code == ResponseCode.SUCCESS, resp
        total += int(resp.ext("offset") or 0)
    return total


def dead_addr() -> str:
    """A loopback port nobody listens on (connects are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


class OffsetClock:
    """trio's clock plus a jump we control: fault windows pass without waiting."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return trio.current_time() + self.offset



@pytest.fixture
async def cluster(start_namesrv: Callable[..., NamesrvProcess], start_broker: Callable[..., BrokerProcess]) -> Cluster:
    """One NameServer and two master brokers (broker-a, broker-b), both registered."""
    ns = start_namesrv()
    a = start_broker("a", brokerName="broker-a", namesrvAddr=ns.addr, registerNameServerPeriod=300)
    b = start_broker("b", brokerName="broker-b", namesrvAddr=ns.addr, registerNameServerPeriod=300)
    await registered(ns.addr, {"broker-a", "broker-b"})
    return ns, a, b


async def registered(ns: str, brokers: set[str]) -> None:
    """Wait until the brokers' first registrations reached the NameServer (boot is printed before)."""
    await eventually(lambda: _has(ns, "TBW102", brokers), what=f"{sorted(brokers)} registered")


async def topic_on_both(ns: NamesrvProcess, topic: str = TOPIC) -> None:
    """Auto-create ``topic`` on both brokers through TBW102 and wait for the NameServer to route it."""
    async with ClientPool() as pool:
        p = SimProducer(ProducerOptions(namesrv_addrs=(ns.addr,)), pool)
        for _ in range(16):
            assert (await p.send(topic, b"seed")).outcome == "ok"
    await eventually(lambda: _has(ns.addr, topic, {"broker-a", "broker-b"}), what=f"route of {topic} on both brokers")


async def _has(ns: str, topic: str, brokers: set[str]) -> bool:
    return await route_brokers(ns, topic) == brokers


# --------------------------------------------------------------------------


async def test_sends_succeed_and_queue_offsets_increase(cluster: Cluster) -> None:
    ns, a, b = cluster
    async with ClientPool() as pool:
        p = SimProducer(ProducerOptions(namesrv_addrs=(ns.addr,)), pool)
        recs = [await p.send("Fresh", b"x" * 100, tags="TagA") for _ in range(40)]
    assert [r.outcome for r in recs] == ["ok"] * 40
    assert {r.attempts for r in recs} == {1}
    # first send had no route of its own: TBW102 fallback, 4 queues per broker
    assert {(r.broker, r.queue_id) for r in recs} == {(n, q) for n in ("broker-a", "broker-b") for q in range(4)}
    by_queue: dict[tuple[str | None, int], list[int]] = {}
    for r in recs:
        by_queue.setdefault((r.broker, r.queue_id), []).append(r.queue_offset)
    for offsets in by_queue.values():
        assert offsets == list(range(len(offsets)))  # 0, 1, 2, ... per queue
    assert await stored_count(a, "Fresh") + await stored_count(b, "Fresh") == 40
    assert p.route_stats.queries == 2 and p.route_stats.not_found == 1  # the topic, then TBW102
    assert p.route_stats.failures == 0


async def test_send_result_carries_the_uniq_key_and_broker_msg_id(cluster: Cluster) -> None:
    ns, _, _ = cluster
    async with ClientPool() as pool:
        p = SimProducer(ProducerOptions(namesrv_addrs=(ns.addr,)), pool)
        rec, result = await p.send_detailed("Fresh", b"y" * 5000)  # compressed on the wire
    assert rec.outcome == "ok" and result is not None
    assert len(result.msg_id) == 32 and result.msg_id.startswith("7F000001")
    assert len(result.offset_msg_id) == 32 and result.offset_msg_id != result.msg_id
    assert (result.queue_id, result.queue_offset) == (rec.queue_id, rec.queue_offset)


async def test_unknown_topic_without_auto_create_has_no_route(
    start_namesrv: Callable[..., NamesrvProcess], start_broker: Callable[..., BrokerProcess]
) -> None:
    ns = start_namesrv()
    start_broker("a", brokerName="broker-a", namesrvAddr=ns.addr, autoCreateTopicEnable=False)
    await eventually(lambda: _has(ns.addr, "broker-a", {"broker-a"}), what="broker-a registered")
    async with ClientPool() as pool:
        p = SimProducer(ProducerOptions(namesrv_addrs=(ns.addr,)), pool)
        rec = await p.send("Nowhere", b"x")
    assert (rec.outcome, rec.broker, rec.queue_id, rec.attempts) == ("no_route", None, -1, 0)
    assert p.route_stats.not_found == 2  # the topic, then TBW102


async def test_route_discovery_fails_over_when_the_first_namesrv_is_down(cluster: Cluster) -> None:
    ns, _, _ = cluster
    options = ProducerOptions(namesrv_addrs=(dead_addr(), ns.addr))
    async with ClientPool(connect_timeout=1.0) as pool:
        rng = random.Random(5)
        producers = [SimProducer(options, pool, producer_id=i, rng=rng) for i in range(12)]
        first_choices = [p._ns_index for p in producers]  # the one before each producer's first pick
        recs = [await p.send("Fresh", b"x") for p in producers]
        for p in producers:  # later queries stick to the NameServer that answered
            await p.refresh_routes()
    assert all(r.outcome == "ok" for r in recs), recs
    unlucky = sum(1 for i in first_choices if (i + 1) % 2 == 0)
    assert unlucky > 0
    failures = sum(p.route_stats.failures for p in producers)
    assert failures == unlucky


async def test_a_broken_namesrv_channel_moves_the_producer_to_the_next_namesrv(
    start_namesrv: Callable[..., NamesrvProcess],
) -> None:
    """Java keeps its NameServer while the channel lives; once it broke, the next lookup goes
    to the next one, even if the first came back meanwhile."""
    first, second = start_namesrv("one"), start_namesrv("two")
    async with ClientPool() as pool:
        p = SimProducer(ProducerOptions(namesrv_addrs=(first.addr, second.addr)), pool, rng=random.Random(0))
        p._ns_index = 1  # so the first pick is ``first``
        await p.refresh_routes()
        assert p.namesrv is None  # nothing queried yet: no topic in use
        await p.send("Nowhere", b"x")  # no broker at all: no route, but the NameServer answered
        assert p.namesrv == first.addr
        await p.refresh_routes()
        assert p.namesrv == first.addr  # sticky while the channel lives
        port = first.addr.rsplit(":", 1)[1]
        first.kill()
        start_namesrv("one-again", listenPort=port)
        await trio.sleep(0.1)
        await p.refresh_routes()
        assert p.namesrv == second.addr
        assert p.route_stats.failures == 0  # the broken channel was noticed before any request


async def test_java_strict_namesrv_switch_fails_one_lookup_then_uses_the_next(cluster: Cluster) -> None:
    ns, _, _ = cluster
    options = ProducerOptions(namesrv_addrs=(dead_addr(), ns.addr), namesrv_failover_in_call=False)
    async with ClientPool(connect_timeout=1.0) as pool:
        p = SimProducer(options, pool, rng=random.Random(0))
        p._ns_index = 1  # so the first pick is the dead one
        first, second = await p.send("Fresh", b"x"), await p.send("Fresh", b"x")
    assert (first.outcome, first.attempts) == ("no_route", 0)
    assert second.outcome == "ok"
    assert p.route_stats.failures == 1


async def test_killed_broker_sends_retry_on_the_other_broker_and_none_is_lost(cluster: Cluster) -> None:
    ns, a, b = cluster
    await topic_on_both(ns)
    async with ClientPool() as pool:
        p = SimProducer(ProducerOptions(namesrv_addrs=(ns.addr,)), pool)
        before = [await p.send(TOPIC, b"x") for _ in range(16)]
        assert {r.broker for r in before} == {"broker-a", "broker-b"}
        a.kill()  # SIGKILL: connection refused from now on
        after = [await p.send(TOPIC, b"x") for _ in range(16)]
        # every send still stored: the ones that picked broker-a failed fast and went to broker-b
        assert [r.outcome for r in after] == ["ok"] * 16, after
        assert {r.broker for r in after} == {"broker-b"}
        retried = [r for r in after if r.attempts > 1]
        assert retried and all(r.attempts == 2 for r in retried)
        assert max(r.latency_ms for r in after) < 2000  # refused connects fail fast (3 s timeout unused)
        # the NameServer drops broker-a (its connection closed); the next poll sees it
        await eventually(lambda: _has(ns.addr, TOPIC, {"broker-b"}), what="route without broker-a")
        await p.refresh_routes()
        assert p.brokers_in_route(TOPIC) == ["broker-b"]
        assert p.route_stats.changes == 1
        final = [await p.send(TOPIC, b"x") for _ in range(8)]
        assert {(r.outcome, r.broker, r.attempts) for r in final} == {("ok", "broker-b", 1)}
    ok_on_b = sum(1 for r in before + after + final if r.broker == "broker-b")
    assert await stored_count(b, TOPIC) == ok_on_b + 8  # 8 is broker-b's share of the seeding sends


async def test_fault_avoidance_skips_a_killed_broker_after_one_failure(cluster: Cluster) -> None:
    ns, a, _ = cluster
    await topic_on_both(ns)
    async with ClientPool() as pool:
        p = SimProducer(ProducerOptions(namesrv_addrs=(ns.addr,), send_latency_fault_enable=True), pool)
        for _ in range(4):
            assert (await p.send(TOPIC, b"x")).outcome == "ok"
        a.kill()
        after = [await p.send(TOPIC, b"x") for _ in range(30)]
    assert all(r.outcome == "ok" and r.broker == "broker-b" for r in after)
    assert sum(r.attempts > 1 for r in after) <= 1  # isolated for 10 s after the first failure
    assert p.fault is not None and p.fault.isolated() == ["broker-a"]


async def test_latency_fault_isolates_a_slow_broker_for_its_penalty(cluster: Cluster) -> None:
    ns, a, _ = cluster
    await topic_on_both(ns)
    clock = OffsetClock()
    async with ClientPool() as pool:
        p = SimProducer(ProducerOptions(namesrv_addrs=(ns.addr,), send_latency_fault_enable=True), pool, clock=clock)
        await fault(a, "latency", millis=600)
        slow = None
        for _ in range(8):
            rec = await p.send(TOPIC, b"x")
            assert rec.outcome == "ok"
            if rec.broker == "broker-a":
                slow = rec
                break
        assert slow is not None and slow.latency_ms >= 600
        # 600 ms is in the 550 ms band: broker-a is avoided for 2 s (5.x table)
        during = [await p.send(TOPIC, b"x") for _ in range(20)]
        assert {r.broker for r in during} == {"broker-b"}
        await fault(a, "clear")
        clock.offset += 2.1
        later = [await p.send(TOPIC, b"x") for _ in range(20)]
        assert "broker-a" in {r.broker for r in later}


async def test_rejecting_broker_is_retried_elsewhere_and_isolated(cluster: Cluster) -> None:
    ns, _, b = cluster
    await topic_on_both(ns)
    clock = OffsetClock()
    async with ClientPool() as pool:
        p = SimProducer(ProducerOptions(namesrv_addrs=(ns.addr,), send_latency_fault_enable=True), pool, clock=clock)
        await fault(b, "reject", code=int(ResponseCode.SERVICE_NOT_AVAILABLE))
        recs = [await p.send(TOPIC, b"x") for _ in range(20)]
        assert all(r.outcome == "ok" and r.broker == "broker-a" for r in recs)
        assert sum(r.attempts == 2 for r in recs) == 1  # one refusal, then broker-b is avoided
        assert p.fault is not None and not p.fault.is_reachable("broker-b")
        clock.offset += 10.1  # the 10 s isolation ends: broker-b is tried (and refuses) again
        again = [await p.send(TOPIC, b"x") for _ in range(20)]
        assert sum(r.attempts == 2 for r in again) == 1


async def test_non_retryable_refusal_ends_the_send(cluster: Cluster) -> None:
    ns, a, b = cluster
    await topic_on_both(ns)
    for broker in (a, b):
        await fault(broker, "reject", code=int(ResponseCode.MESSAGE_ILLEGAL))
    async with ClientPool() as pool:
        p = SimProducer(ProducerOptions(namesrv_addrs=(ns.addr,)), pool)
        rec = await p.send(TOPIC, b"x")
        for broker in (a, b):
            await fault(broker, "reject", code=int(ResponseCode.SYSTEM_BUSY))
        busy = await p.send(TOPIC, b"x")
    assert (rec.outcome, rec.attempts, rec.code) == ("rejected", 1, ResponseCode.MESSAGE_ILLEGAL)
    assert (busy.outcome, busy.attempts, busy.code) == ("rejected", 3, ResponseCode.SYSTEM_BUSY)


async def test_hung_broker_times_out_within_the_send_timeout(cluster: Cluster) -> None:
    ns, a, _ = cluster
    await topic_on_both(ns)
    async with ClientPool() as pool:
        p = SimProducer(ProducerOptions(namesrv_addrs=(ns.addr,), send_timeout=0.5), pool)
        await fault(a, "hang")
        try:
            recs = [await p.send(TOPIC, b"x") for _ in range(6)]
        finally:
            await fault(a, "resume")
        # the hung requests' late answers are dropped; the same connection serves again
        connects = pool.connects
        resumed = [await p.send(TOPIC, b"x") for _ in range(8)]
        assert {r.outcome for r in resumed} == {"ok"} and "broker-a" in {r.broker for r in resumed}
        assert pool.connects == connects
    timeouts = [r for r in recs if r.outcome == "timeout"]
    assert timeouts and all(r.broker == "broker-a" for r in timeouts)
    assert all(400 <= r.latency_ms < 2500 for r in timeouts)
    assert all(r.outcome == "ok" and r.broker == "broker-b" for r in recs if r.outcome != "timeout")


async def test_cached_routes_keep_working_with_all_namesrvs_down(
    start_namesrv: Callable[..., NamesrvProcess], start_broker: Callable[..., BrokerProcess]
) -> None:
    ns1, ns2 = start_namesrv("ns1"), start_namesrv("ns2")
    both = f"{ns1.addr};{ns2.addr}"
    start_broker("a", brokerName="broker-a", namesrvAddr=both)
    start_broker("b", brokerName="broker-b", namesrvAddr=both)
    for ns in (ns1, ns2):
        await registered(ns.addr, {"broker-a", "broker-b"})
    async with ClientPool(connect_timeout=1.0) as pool:
        p = SimProducer(ProducerOptions(namesrv_addrs=(ns1.addr, ns2.addr)), pool)
        assert (await p.send("Fresh", b"x")).outcome == "ok"
        ns1.kill()
        ns2.kill()
        await p.refresh_routes()
        assert p.route_stats.failures == 2  # both tried, neither answered
        recs = [await p.send("Fresh", b"x") for _ in range(10)]
        assert {r.outcome for r in recs} == {"ok"}
        assert {r.broker for r in recs} == {"broker-a", "broker-b"}
        assert (await p.send("NeverSeen", b"x")).outcome == "no_route"


async def test_heartbeats_reach_every_master(cluster: Cluster) -> None:
    ns, a, _ = cluster
    async with ClientPool() as pool:
        p = SimProducer(ProducerOptions(namesrv_addrs=(ns.addr,)), pool)
        assert await p.heartbeat_once() == 0  # no broker known yet
        await p.send("Fresh", b"x")
        assert await p.heartbeat_once() == 2
        a.kill()
        assert await p.heartbeat_once() == 1


async def test_bounded_run_load_stops_in_time(cluster: Cluster, tmp_path) -> None:
    ns, a, b = cluster
    options = ProducerOptions(namesrv_addrs=(ns.addr,), poll_name_server_interval=0.5)
    spec = LoadSpec(producers=40, topics=("L1", "L2"), rate_per_producer=20, duration=1.5, message_size=64)
    with trio.fail_after(60):  # stops sending at 1.5 s and closes in bounded time (a hang fails here)
        summary = await run_load(options, spec, lambda r: None)
    # never above the rate; a busy machine may send fewer
    assert 0.2 * 40 * 20 * 1.5 <= summary.sends <= 40 * 20 * 1.5 + 40
    assert summary.ok == summary.sends
    assert summary.route.queries >= 80  # every producer looks both topics up, and polls
    path = tmp_path / "sends.msgpack"
    spec = LoadSpec(producers=30, topics=("C1",), rate_per_producer=0, messages_per_producer=7, duration=30)
    with RecordWriter(path) as writer:
        summary = await run_load(options, spec, writer.write)
    recs = list(read_records(path))
    assert summary.sends == len(recs) == 210
    assert sorted(r.producer for r in recs) == sorted(list(range(30)) * 7)
    assert summary.by_broker == {
        name: sum(1 for r in recs if r.broker == name and r.outcome == "ok") for name in ("broker-a", "broker-b")
    }
    assert summary.by_broker["broker-a"] == await stored_count(a, "C1")
    assert summary.by_broker["broker-b"] == await stored_count(b, "C1")
    assert all(isinstance(r, SendRecord) and r.t >= 0 for r in recs)


async def test_broker_killed_under_load_loses_no_send_and_every_producer_drops_it(cluster: Cluster) -> None:
    ns, a, _ = cluster
    await topic_on_both(ns)
    producers: list[SimProducer] = []
    recs: list[SendRecord] = []
    options = ProducerOptions(namesrv_addrs=(ns.addr,), poll_name_server_interval=0.5)
    spec = LoadSpec(producers=20, topics=(TOPIC,), rate_per_producer=40, duration=5.0, message_size=32)
    timeline: dict[str, float] = {}

    async def kill_then_watch() -> None:
        await trio.sleep(1.0)
        a.kill()
        timeline["killed"] = trio.current_time() - t0
        while any("broker-a" in p.brokers_in_route(TOPIC) for p in producers):
            await trio.sleep(0.02)
        timeline["all_dropped"] = trio.current_time() - t0

    t0 = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(kill_then_watch)
        summary = await run_load(options, spec, recs.append, on_start=producers.extend, t0=t0)
    assert summary.sends == len(recs) > 300
    assert summary.ok == summary.sends  # every send stored: those aimed at broker-a were retried on broker-b
    after = [r for r in recs if r.t > timeline["killed"] + 0.05]
    assert after and all(r.broker == "broker-b" for r in after)
    assert any(r.attempts == 2 for r in after)
    # the NameServer drops broker-a when its connection closes (its expiry is 120 s away), and each
    # producer's next poll sees it while the load still runs
    assert "all_dropped" in timeline
    settled = [r for r in recs if r.t > timeline["all_dropped"]]
    assert settled and all(r.attempts == 1 for r in settled)


def test_messages_the_java_client_refuses_are_not_sent() -> None:
    from simclient.producer_options import message_problem

    assert message_problem("Fine_Topic-1", b"x") is None
    assert "blank" in (message_problem(" ", b"x") or "")
    assert "illegal" in (message_problem("bad topic", b"x") or "")
    assert "longer" in (message_problem("T" * 128, b"x") or "")
    assert "empty" in (message_problem("T", b"") or "")
    assert "over max" in (message_problem("T", b"x" * (4 * 1024 * 1024 + 1)) or "")


async def test_run_load_ramps_producers_up_and_spreads_topics(cluster: Cluster) -> None:
    ns, _, _ = cluster
    recs: list[SendRecord] = []
    seen: list[SimProducer] = []
    spec = LoadSpec(producers=30, topics=("R1", "R2", "R3"), rate_per_producer=10, duration=1.6, ramp_up=1.0,
                    topics_per_producer=1)
    summary = await run_load(ProducerOptions(namesrv_addrs=(ns.addr,)), spec, recs.append, on_start=seen.extend,
                             first_producer_id=100)
    assert [p.producer_id for p in seen] == list(range(100, 130))
    first = {}
    for r in recs:
        first.setdefault(r.producer, r.t)
    assert sorted(first) == list(range(100, 130))
    starts = sorted(first.values())
    assert starts[0] < 0.4 and 0.6 < starts[-1] < 2.0  # spread over the 1 s ramp
    assert {r.topic for r in recs if r.producer == 100} == {"R2"}  # 100 % 3 == 1
    assert {r.topic for r in recs} == {"R1", "R2", "R3"}
    assert summary.ok == summary.sends == len(recs)
    assert summary.loop_lag.count > 50  # the probe ran all along
