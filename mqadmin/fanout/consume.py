"""Simulated push consumers in the fan-out: what a partition runs, and what the driver reads after.

Each partition runs its share of the consumers on the same trio loop and
connection pool as its producers (:class:`simclient.consumer.SimConsumer`;
a shared pool is what lets thousands fit). Consumer ``i`` belongs to group
``fanout_consumer_group_{i % G}``; with at least as many groups as topics,
group ``g`` subscribes to topic ``g % K``, otherwise to every topic ``t``
with ``t % G == g``, so every topic is consumed and each message by about
``G / K`` groups. Consumers start with the producers (spread over the same
ramp-up) from the first offset (CONSUME_FROM_FIRST_OFFSET: with Java's
default, CONSUME_FROM_LAST_OFFSET, a group that is new when producers
already send starts each queue at its max offset at that moment and
skips what came just before, which a reconciliation reports as
unexplained), keep consuming ``drain`` seconds after the load ends, then shut
down as Java's do (offsets committed, unregistered), so the driver can read
the offsets each group committed on the brokers and reconcile
(:mod:`mqadmin.fanout.consume_metrics`).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import trio

from mqadmin.fanout.consume_metrics import ConsumeMetrics, QueueKey
from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from simclient.consume_records import ConsumeRecord
from simclient.consumer import ConsumerOptions, SimConsumer
from simclient.pool import ClientPool

if TYPE_CHECKING:
    from mqadmin.fanout.brokers import ClusterView
    from mqadmin.fanout.plan import FanoutPlan

GROUP_PREFIX = "fanout_consumer_group_"
STOP_TIMEOUT = 5.0  # s for every consumer of a partition to commit and unregister
MAX_OFFSET_READS = 20_000  # committed-offset reads after the run (groups x queues); beyond: not read


def group_topics(plan: FanoutPlan, group_index: int) -> tuple[str, ...]:
    k, g = len(plan.topics), plan.consumer_groups
    if g >= k:
        return (plan.topics[group_index % k],)
    return tuple(t for i, t in enumerate(plan.topics) if i % g == group_index)


def consumer_share(plan: FanoutPlan, index: int) -> tuple[int, int]:
    """(first consumer id, count) of partition ``index``."""
    base, extra = divmod(plan.consumers, plan.partitions)
    return index * base + min(index, extra), base + (1 if index < extra else 0)


def consumer_options(plan: FanoutPlan, group_index: int) -> ConsumerOptions:
    return ConsumerOptions(
        namesrv_addrs=plan.namesrv_addrs,
        group=f"{GROUP_PREFIX}{group_index}",
        subscriptions=tuple((t, "*") for t in group_topics(plan, group_index)),
        # Java's default (last offset) starts a brand-new group at the queue's max offset at its first
        # rebalance, skipping what producers sent just before; the run must account for every message.
        consume_from="first_offset",
        poll_name_server_interval=plan.poll_interval,
        heartbeat_broker_interval=plan.consumer_heartbeat_interval,
        rebalance_interval=plan.rebalance_interval,
        persist_consumer_offset_interval=plan.persist_interval,
    )


async def run_consumers(
    plan: FanoutPlan,
    index: int,
    pool: ClientPool,
    metrics: ConsumeMetrics,
    *,
    t0: float,
    offset: float,
    end_at: float,
    rng: random.Random,
    load_done: trio.Event | None = None,
) -> None:
    """Run partition ``index``'s consumers until ``plan.drain`` seconds after ``load_done`` (the partition's
    producers finished: with --messages-per-producer, long before the time limit), at the latest until
    ``end_at`` (trio time), then shut them down (bounded)."""
    first, count = consumer_share(plan, index)
    if count == 0:
        return
    options = {g: consumer_options(plan, g) for g in {(first + i) % plan.consumer_groups for i in range(count)}}
    for g, opts in options.items():
        metrics.topics[opts.group] = [t for t, _ in opts.subscriptions]

    def emit(rec: ConsumeRecord) -> None:
        if rec.outcome == "ok":
            key: QueueKey = (rec.topic, rec.broker, rec.queue_id)
            metrics.consumed_one(rec.group, key, rec.queue_offset, max(0, int(offset + rec.t)))

    consumers = []
    for i in range(count):
        opts = options[(first + i) % plan.consumer_groups]
        c = SimConsumer(opts, pool, consumer_id=first + i, emit=emit, stats=metrics.stats, t0=t0, rng=rng)
        consumers.append(c)
        metrics.members[opts.group] = metrics.members.get(opts.group, 0) + 1

    async def one(c: SimConsumer, start_at: float) -> None:
        await trio.sleep_until(start_at)
        await c.run()

    ramp = plan.ramp_up
    async with trio.open_nursery() as nursery:
        for c in consumers:
            nursery.start_soon(one, c, t0 + (rng.uniform(0, ramp) if ramp > 0 else 0.0))
        with trio.move_on_at(end_at):
            if load_done is None:
                await trio.sleep_forever()
            await load_done.wait()
            await trio.sleep(plan.drain)
        with trio.move_on_after(STOP_TIMEOUT):
            async with trio.open_nursery() as stoppers:
                for c in consumers:
                    stoppers.start_soon(c.shutdown, STOP_TIMEOUT)
        for c in consumers:
            c.kill()  # any that did not stop in time (or had not started)
        nursery.cancel_scope.cancel()


def end_of_consumers(plan: FanoutPlan) -> float:
    """Seconds after the load starts at which consumers stop (the load's end + drain)."""
    return plan.time_limit + plan.drain


# ---------------------------------------------------------------------------- driver side


async def _read_offsets(view: ClusterView, metrics: ConsumeMetrics, timeout: float
                        ) -> tuple[dict[tuple[str, str, str, int], int], dict[QueueKey, int]] | None:
    from mqadmin.client import AdminClient
    from mqadmin.client.errors import AdminError

    keys = sorted({(t, b, q) for (b, t), n in view.queues.items() for q in range(n)})
    wanted = [(g, k) for g, topics in metrics.topics.items() for k in keys if k[0] in topics]
    if len(wanted) + len(keys) > MAX_OFFSET_READS:
        return None
    client = AdminClient([], timeout=timeout, security=view.security)
    committed: dict[tuple[str, str, str, int], int] = {}
    max_offsets: dict[QueueKey, int] = {}
    failed: list[str] = []

    async def read_max(key: QueueKey) -> None:
        try:
            max_offsets[key] = await client.max_offset(view.masters[key[1]], key[0], key[2])
        except AdminError as exc:
            failed.append(str(exc))

    async def read_committed(group: str, key: QueueKey) -> None:
        topic, broker, q = key
        req = request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": q})
        try:
            resp = await client.invoke(view.masters[broker], req)
        except AdminError as exc:
            failed.append(str(exc))
            return
        if resp.code == ResponseCode.SUCCESS:
            committed[(group, *key)] = int(resp.ext("offset") or 0)

    with trio.move_on_after(timeout * 4):
        async with client.pooled():
            async with trio.open_nursery() as nursery:
                for key in keys:
                    nursery.start_soon(read_max, key)
            async with trio.open_nursery() as nursery:
                for group, key in wanted:
                    nursery.start_soon(read_committed, group, key)
            return (committed, max_offsets) if not failed else None
    return None


def read_offsets(view: ClusterView, metrics: ConsumeMetrics, timeout: float = 3.0
                 ) -> tuple[dict[tuple[str, str, str, int], int], dict[QueueKey, int]] | None:
    """After the run: each group's committed offset per queue and each queue's max offset (None: unreadable)."""
    return trio.run(_read_offsets, view, metrics, timeout)


def consumers_doc(metrics: ConsumeMetrics, rows: list[dict[str, object]], window: float) -> dict[str, object]:
    """The report's ``consumers`` section: totals, latency, per-group reconciliation."""
    st = metrics.stats
    lat = st.latency
    total = {k: sum(int(r[k] or 0) for r in rows) for k in ("acknowledged", "consumed", "lag", "unexplained", "other",
                                                            "duplicates")}
    seconds = range(max(metrics.per_second, default=-1) + 1)
    firsts = metrics.first_per_second()
    return {
        "consumers": st.consumers,
        "groups": len(metrics.members),
        "consumptions": st.consumed,  # every delivery, re-deliveries included
        "distinct": st.consumed - total["duplicates"],  # messages delivered (to each group: once per group)
        "redeliveries": total["duplicates"],
        "perSecond": round(st.consumed / window, 1) if window > 0 else None,
        "latencyMs": {"count": lat.count, "p50": round(lat.percentile(50), 3), "p99": round(lat.percentile(99), 3),
                       "max": round(lat.max_ms, 3)},
        "pulls": st.pulls, "pullsFound": st.pulls_found, "pullErrors": st.pull_errors, "rebalances": st.rebalances,
        "heartbeats": st.heartbeats,
        "total": total,
        "reconciled": total["unexplained"] == 0 and all(r["offsetsRead"] for r in rows),
        "byGroup": rows,
        "perSecondSeries": [metrics.per_second.get(s, 0) for s in seconds],
        # first deliveries per second (None when too many runs to keep): perSecondSeries minus these are re-deliveries
        "firstPerSecondSeries": None if firsts is None else [firsts.get(s, 0) for s in seconds],
    }


__all__ = ["GROUP_PREFIX", "consumer_options", "consumer_share", "consumers_doc", "end_of_consumers", "group_topics",
           "read_offsets", "run_consumers"]
