"""Simulated push consumers against real mqnamesrv and broker-stub processes over loopback TCP.

Each test starts its own NameServer and brokers (short registration
periods) and kills them afterwards, pass or fail. Consumers run with short
intervals so rebalances and commits happen within a test's few seconds.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
import trio

from simclient import ClientPool, ProducerOptions, SimProducer
from simclient.consume_records import ConsumeRecord
from simclient.consumer import ConsumerOptions, OwnershipEvent, SimConsumer
from tests.test_simclient_cluster import eventually, registered, stored_count, topic_on_both

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess
    from tests.procs import NamesrvProcess

pytest_plugins = ("tests.broker_procs",)

TOPIC = "ConsTopic"
FAST = {
    "poll_name_server_interval": 0.5,
    "heartbeat_broker_interval": 1.0,
    "rebalance_interval": 2.0,
    "persist_consumer_offset_interval": 0.5,
    "persist_initial_delay": 0.5,
}


def options(ns: str, group: str = "cg", expr: str = "*", **kw: object) -> ConsumerOptions:
    return ConsumerOptions(namesrv_addrs=(ns,), group=group, subscriptions=((TOPIC, expr),), **{**FAST, **kw})


class Run:
    """Consumers of one test, each with its own pool (so a kill closes its connections)."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        self.records: list[ConsumeRecord] = []
        self.events: list[OwnershipEvent] = []
        self.consumers: list[SimConsumer] = []

    async def start(self, opts: ConsumerOptions) -> SimConsumer:
        pool_ready: list[SimConsumer] = []

        async def hold(task_status: trio.TaskStatus[None]) -> None:
            async with ClientPool() as pool:
                c = SimConsumer(opts, pool, consumer_id=len(self.consumers), emit=self.records.append,
                                on_event=self.events.append)
                pool_ready.append(c)
                await c.run(task_status=task_status)

        await self.nursery.start(hold)
        self.consumers.append(pool_ready[0])
        return pool_ready[0]

    def ids(self, group: str | None = None) -> Counter[str]:
        return Counter(r.msg_id for r in self.records if r.outcome == "ok" and (group is None or r.group == group))


def mine(c: SimConsumer) -> list[tuple[str, str, int]]:
    """The queues of TOPIC a consumer owns (its group's %RETRY% queues are divided too)."""
    return [q for q in c.owned() if q[0] == TOPIC]


async def produce(ns: str, count: int, *, tags: Callable[[int], str | None] = lambda i: None) -> list[str]:
    """Send ``count`` messages; the ids of those stored."""
    out = []
    async with ClientPool() as pool:
        p = SimProducer(ProducerOptions(namesrv_addrs=(ns,)), pool)
        for i in range(count):
            rec = await p.send(TOPIC, f"m{i}".encode(), tags=tags(i))
            assert rec.outcome == "ok", rec
            out.append(rec.msg_id)
    return out


async def until(check: Callable[[], bool], timeout: float, what: str) -> None:
    async def poll() -> bool:
        return check()

    await eventually(poll, timeout, what)


@pytest.fixture
async def two_brokers(start_namesrv: Callable[..., NamesrvProcess], start_broker: Callable[..., BrokerProcess]) -> str:
    ns = start_namesrv()
    start_broker("a", brokerName="broker-a", namesrvAddr=ns.addr, registerNameServerPeriod=300)
    start_broker("b", brokerName="broker-b", namesrvAddr=ns.addr, registerNameServerPeriod=300)
    await registered(ns.addr, {"broker-a", "broker-b"})
    await topic_on_both(ns, TOPIC)
    return ns.addr


async def test_group_splits_queues_and_consumes_each_message_once(two_brokers: str) -> None:
    ns = two_brokers
    async with trio.open_nursery() as nursery:
        run = Run(nursery)
        a = await run.start(options(ns, consume_from="first_offset"))
        b = await run.start(options(ns, consume_from="first_offset"))
        total = len(a.routes[TOPIC].queues)
        await until(lambda: len(mine(a)) == len(mine(b)) == total // 2, 15, "half of the queues each")
        assert not set(mine(a)) & set(mine(b))
        sent = await produce(ns, 200)
        await until(lambda: set(sent) <= set(run.ids()), 15, "all 200 consumed")
        await trio.sleep(0.5)
        counts = run.ids()
        assert all(counts[m] == 1 for m in sent), "steady state: no message twice"
        by_consumer = Counter(r.consumer for r in run.records if r.msg_id in set(sent))
        assert by_consumer[0] > 0 and by_consumer[1] > 0
        assert all(r.latency_ms >= 0 and r.broker in ("broker-a", "broker-b") and r.broker_id == 0 for r in run.records)
        nursery.cancel_scope.cancel()


async def test_offsets_resume_after_a_consumer_restart(two_brokers: str) -> None:
    ns = two_brokers
    async with trio.open_nursery() as nursery:
        run = Run(nursery)
        first = await run.start(options(ns, consume_from="first_offset"))
        sent1 = await produce(ns, 60)
        await until(lambda: set(sent1) <= set(run.ids()), 15, "first batch consumed")
        await first.shutdown()  # commits offsets, unregisters
        sent2 = await produce(ns, 60)
        await run.start(options(ns, consume_from="first_offset"))
        await until(lambda: set(sent2) <= set(run.ids()), 15, "second batch consumed by the new consumer")
        await trio.sleep(1.0)
        second = [r.msg_id for r in run.records if r.consumer == 1]
        assert set(second) == set(sent2), "the new consumer starts at the committed offsets: nothing old again"
        nursery.cancel_scope.cancel()


async def test_tag_filtering(two_brokers: str) -> None:
    ns = two_brokers
    async with trio.open_nursery() as nursery:
        run = Run(nursery)
        await run.start(options(ns, group="tags", expr="TagA || TagC", consume_from="first_offset"))
        tagged = ["TagA", "TagB", "TagC", None]
        sent = await produce(ns, 80, tags=lambda i: tagged[i % 4])
        wanted = {m for i, m in enumerate(sent) if tagged[i % 4] in ("TagA", "TagC")}
        await until(lambda: wanted <= set(run.ids()), 15, "TagA and TagC consumed")
        await trio.sleep(1.0)
        assert set(run.ids()) & set(sent) == wanted
        nursery.cancel_scope.cancel()


async def test_a_killed_consumer_leaves_and_the_others_take_its_queues(two_brokers: str) -> None:
    ns = two_brokers
    async with trio.open_nursery() as nursery:
        run = Run(nursery)
        a = await run.start(options(ns))
        b = await run.start(options(ns))
        total = len(a.routes[TOPIC].queues)
        await until(lambda: len(mine(a)) == len(mine(b)) == total // 2, 15, "half of the queues each")
        b.kill()  # no unregister: the broker learns it from the closed connections
        await until(lambda: len(mine(a)) == total, 10, "the survivor owns them all")
        kinds = [e.kind for e in run.events if e.consumer == 1]
        assert kinds[-1] == "kill"
        nursery.cancel_scope.cancel()


async def test_failed_consumption_goes_back_and_returns_from_the_retry_topic(
    start_namesrv: Callable[..., NamesrvProcess], start_broker: Callable[..., BrokerProcess]
) -> None:
    ns = start_namesrv()
    for name in ("a", "b"):  # short delay levels: a retry is due 1 s after its send-back
        start_broker(name, brokerName=f"broker-{name}", namesrvAddr=ns.addr, registerNameServerPeriod=300,
                     messageDelayLevel="1s 1s 1s 1s")
    await registered(ns.addr, {"broker-a", "broker-b"})
    await topic_on_both(ns, TOPIC)
    async with trio.open_nursery() as nursery:
        run = Run(nursery)
        c = await run.start(options(ns.addr, group="flaky", consume_from="first_offset", consume_failure_rate=0.3,
                                    consume_delay=0.002))
        c.rng = random.Random(7)
        sent = await produce(ns.addr, 40)
        await until(lambda: set(sent) <= set(run.ids()), 20, "every message consumed in the end")
        retried = [r for r in run.records if r.outcome == "retry"]
        assert retried, "some consumptions failed"
        again = [r for r in run.records if r.outcome == "ok" and r.reconsume_times > 0]
        assert again and all(r.topic == TOPIC for r in again), "redelivered from %RETRY%flaky with the original topic"
        assert c.stats.retried == len(retried) and c.stats.send_back_failed == 0
        nursery.cancel_scope.cancel()


async def test_consumers_go_on_from_the_slave_when_the_master_dies(
    start_namesrv: Callable[..., NamesrvProcess], start_broker: Callable[..., BrokerProcess]
) -> None:
    ns = start_namesrv()
    master = start_broker("a0", brokerName="broker-a", namesrvAddr=ns.addr, registerNameServerPeriod=300)
    slave = start_broker("a1", brokerName="broker-a", brokerId=1, namesrvAddr=ns.addr, registerNameServerPeriod=300,
                         slaveReadEnable=True)
    await registered(ns.addr, {"broker-a"})
    async with trio.open_nursery() as nursery:
        run = Run(nursery)
        # a slow consumer that pulls little ahead: most messages are still to be pulled when the master dies
        c = await run.start(options(ns.addr, consume_from="first_offset", consume_delay=0.01, consume_threads=1,
                                    pull_batch_size=4, pull_threshold_for_queue=4))
        sent = await produce(ns.addr, 200)

        async def slave_has_all() -> bool:
            return await stored_count(slave, TOPIC, 4) == 200

        await eventually(slave_has_all, 30, "the slave copied all 200")
        await until(lambda: len(run.ids()) >= 30, 10, "some consumed from the master")
        master.kill()
        await until(lambda: set(sent) <= set(run.ids()), 30, "the rest consumed from the slave")
        from_slave = [r for r in run.records if r.broker_id == 1]
        assert from_slave and all(r.broker == "broker-a" for r in from_slave)
        assert c.stats.pulls_from_slave > 0
        counts = run.ids()
        assert sum(counts[m] - 1 for m in sent) == 0, "no message twice: the slave has the master's offsets"
        nursery.cancel_scope.cancel()
