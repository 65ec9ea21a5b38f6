"""Broker admin calls for topic status, stats, consumer groups and broker config (client library).

What Apache's DefaultMQAdminExt does for ``topicStatus``, ``statsAll``,
``consumerProgress``, ``consumerConnection``, ``producerConnection``,
``updateSubGroup``/``deleteSubGroup``, ``getBrokerConfig``/
``updateBrokerConfig`` and ``resetOffsetByTime``: the per-broker requests
(202, 315, 208, 203, 204, 200, 207, 26, 25, 222) and the cluster-wide
views built from them (one request per broker of a route, merged). No CLI
code here; every failure is an :class:`~mqadmin.client.errors.AdminError` naming
the address, and every call has the client's timeout.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import trio

from mqadmin.client import AdminClient
from mqadmin.client.errors import AdminError, ConsumerNotOnline, NotFound, PerServer, check_answer, parse_answer
from remoting import properties
from remoting.admin_bodies import (
    BrokerStatsData,
    Connection,
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    TopicStatsTable,
    decode_producer_connection,
    decode_reset_offsets,
    encode_subscription_group,
)
from remoting.bodies import BrokerData, TopicConfig, TopicRouteData
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, request
from remoting.mqjson import MessageQueue, loads

T = TypeVar("T")
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
#: Stats names of VIEW_BROKER_STATS_DATA that statsAll reads (Stats.java).
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
PARALLEL = 16  # brokers or topics asked at once


def select_addr(bd: BrokerData) -> str | None:
    """BrokerData.selectBrokerAddr: the master, else a slave."""
    return bd.master_addr or next((a for _, a in sorted(bd.broker_addrs.items())), None)


async def _call(client: AdminClient, addr: str, req: RemotingCommand, what: str) -> RemotingCommand:
    return check_answer(addr, await client.invoke(addr, req), what)


async def _each(client: AdminClient, addrs: list[str], make: Callable[[], RemotingCommand], what: str) -> list[PerServer]:
    """The same request to every address in parallel, one result each (in ``addrs`` order)."""

    async def one(addr: str) -> PerServer:
        try:
            await _call(client, addr, make(), what)
            return PerServer(addr, kind="broker")
        except AdminError as exc:
            return PerServer(addr, error=str(exc), kind="broker")

    return await gather(addrs, one)


async def gather(items: list[Any], fn: Callable[[Any], Any]) -> list[Any]:
    """``await fn(item)`` for every item, at most PARALLEL at once, results in ``items`` order."""
    results: list[Any] = [None] * len(items)
    limit = trio.CapacityLimiter(PARALLEL)

    async def one(i: int, item: Any) -> None:
        async with limit:
            results[i] = await fn(item)

    async with trio.open_nursery() as nursery:
        for i, item in enumerate(items):
            nursery.start_soon(one, i, item)
    return results


# ---------------------------------------------------------------------------
# one broker


async def topic_stats(client: AdminClient, addr: str, topic: str) -> TopicStatsTable:
    resp = await _call(client, addr, request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}), f"stats of {topic}")
    return parse_answer(addr, TopicStatsTable.decode, resp.body, "GET_TOPIC_STATS_INFO")


async def view_stats(client: AdminClient, addr: str, name: str, key: str) -> BrokerStatsData:
    req = request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
    resp = await _call(client, addr, req, f"stats {name} {key}")
    return parse_answer(addr, BrokerStatsData.decode, resp.body, "VIEW_BROKER_STATS_DATA")


async def consume_stats(client: AdminClient, addr: str, group: str, topic: str | None = None) -> ConsumeStats:
    ext = {"consumerGroup": group, **({"topic": topic} if topic else {})}
    resp = await _call(client, addr, request(RequestCode.GET_CONSUME_STATS, ext), f"consume stats of {group}")
    return parse_answer(addr, ConsumeStats.decode, resp.body, "GET_CONSUME_STATS")


async def consumer_connection(client: AdminClient, addr: str, group: str) -> ConsumerConnection:
    req = request(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
    resp = await _call(client, addr, req, f"consumer connections of {group}")
    return parse_answer(addr, ConsumerConnection.decode, resp.body, "GET_CONSUMER_CONNECTION_LIST")


async def producer_connection(client: AdminClient, addr: str, group: str) -> list[Connection]:
    req = request(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group})
    resp = await _call(client, addr, req, f"producer connections of {group}")
    return parse_answer(addr, decode_producer_connection, resp.body, "GET_PRODUCER_CONNECTION_LIST")


async def broker_config(client: AdminClient, addr: str) -> dict[str, str]:
    resp = await _call(client, addr, request(RequestCode.GET_BROKER_CONFIG), "GET_BROKER_CONFIG")
    return parse_answer(addr, lambda b: properties.loads(b.decode("utf-8")), resp.body, "GET_BROKER_CONFIG")


async def update_broker_config(client: AdminClient, addrs: list[str], key: str, value: str) -> list[PerServer]:
    body = properties.dumps({key: value}).encode("utf-8")
    return await _each(client, addrs, lambda: request(RequestCode.UPDATE_BROKER_CONFIG, body=body),
                              "UPDATE_BROKER_CONFIG")


async def update_sub_group(client: AdminClient, addrs: list[str], cfg: dict[str, Any]) -> list[PerServer]:
    body = encode_subscription_group(cfg)
    return await _each(client, addrs, lambda: request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body),
                              f"create subscription group {cfg['groupName']}")


async def delete_sub_group(client: AdminClient, addrs: list[str], group: str, clean_offset: bool) -> list[PerServer]:
    return await _each(
        client, addrs, lambda: request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": group, "cleanOffset": clean_offset}),
        f"delete subscription group {group}")


async def reset_offset(client: AdminClient, addr: str, topic: str, group: str, timestamp: int, force: bool,
                       *, queue_id: int | None = None, offset: int | None = None) -> dict[MessageQueue, int]:
    """INVOKE_BROKER_TO_RESET_OFFSET as DefaultMQAdminExt sends it; :class:`ConsumerNotOnline` when the
    broker (4.9.x, or 5.x with useServerSideResetOffset=false) needs a consumer online."""
    ext: dict[str, object] = {"topic": topic, "group": group, "timestamp": timestamp}
    if queue_id is None:
        ext.update(isForce=force, offset=-1)
    else:
        ext.update(queueId=queue_id, offset=-1 if offset is None else offset)
    resp = await _call(client, addr, request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext), f"reset offset of {group}")
    return parse_answer(addr, decode_reset_offsets, resp.body, "INVOKE_BROKER_TO_RESET_OFFSET") if resp.body else {}


async def update_consumer_offset(client: AdminClient, addr: str, group: str, mq: MessageQueue, offset: int) -> None:
    ext = {"consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id, "commitOffset": offset,
           "brokerName": mq.broker_name}
    await _call(client, addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, ext), f"update offset of {group}")


# ---------------------------------------------------------------------------
# across the brokers of a route


async def _route_or_none(client: AdminClient, topic: str) -> TopicRouteData | None:
    try:
        return await client.topic_route(topic)
    except NotFound:
        return None


async def examine_topic_stats(client: AdminClient, topic: str, cluster: str | None = None) -> TopicStatsTable:
    """Every broker of the topic's route (or of the cluster's route with ``cluster``): offsets merged, TPS summed."""
    route = await client.topic_route(cluster or topic)
    addrs = [a for a in map(select_addr, route.broker_datas) if a]
    merged = TopicStatsTable()
    for table in await gather(addrs, lambda addr: topic_stats(client, addr, topic)):
        merged.offset_table.update(table.offset_table)
        merged.topic_put_tps += table.topic_put_tps
    if not merged.offset_table:
        raise AdminError(f"topic {topic}: no broker reported stats (Not found the topic stats info)")
    return merged


async def examine_consume_stats(client: AdminClient, group: str, topic: str | None = None) -> ConsumeStats:
    """The brokers of ``%RETRY%group``'s route (else the topic's), merged (DefaultMQAdminExt.examineConsumeStats)."""
    route = await _route_or_none(client, RETRY_PREFIX + group)
    if route is None and topic:
        route = await _route_or_none(client, topic)
    if route is None:
        raise AdminError(f"consumer group {group}: no route for {RETRY_PREFIX}{group}" + (f" or {topic}" if topic else ""))
    merged = ConsumeStats()
    addrs = [a for a in map(select_addr, route.broker_datas) if a]
    for stats in await gather(addrs, lambda addr: consume_stats(client, addr, group, topic)):
        merged.offset_table.update(stats.offset_table)
        merged.consume_tps += stats.consume_tps
    if not merged.offset_table:
        try:
            connection = await examine_consumer_connection(client, group)
        except AdminError:
            raise ConsumerNotOnline(f"consumer group {group}: no consume stats (empty offset table) and no consumer "
                                    "online") from None
        if connection.message_model == "BROADCASTING":
            raise AdminError(f"consumer group {group}: no consume stats, the consumers are in broadcasting mode")
    return merged


async def examine_consumer_connection(client: AdminClient, group: str, broker_addr: str | None = None) -> ConsumerConnection:
    """One broker's view (``broker_addr``, else the brokers of ``%RETRY%group`` until one knows the group)."""
    if broker_addr is not None:
        found = await consumer_connection(client, broker_addr, group)
    else:
        route = await _route_or_none(client, RETRY_PREFIX + group)
        addrs = [a for a in map(select_addr, route.broker_datas) if a] if route else []
        if not addrs:
            raise ConsumerNotOnline(f"consumer group {group} is not online (no route for {RETRY_PREFIX}{group})")
        random.shuffle(addrs)
        errors = []
        found = None
        for addr in addrs:
            try:
                found = await consumer_connection(client, addr, group)
                break
            except AdminError as exc:
                errors.append(str(exc))
        if found is None:
            raise ConsumerNotOnline("; ".join(errors))
    if not found.connections:
        raise ConsumerNotOnline(f"consumer group {group} is not online (Not found the consumer group connection)")
    return found


async def examine_producer_connection(client: AdminClient, group: str, topic: str) -> list[Connection]:
    """Producers of ``group`` as the brokers of ``topic``'s route see them (every broker asked, merged by client id)."""
    route = await client.topic_route(topic)
    addrs = [a for a in map(select_addr, route.broker_datas) if a]

    async def one(addr: str) -> list[Connection]:
        try:
            return await producer_connection(client, addr, group)
        except AdminError:
            return []  # this broker has not seen the group

    merged: dict[str, Connection] = {}
    for conns in await gather(addrs, one):
        for conn in conns:
            merged.setdefault(conn.client_id, conn)
    if not merged:
        raise AdminError(f"producer group {group} is not connected to the brokers of {topic} "
                         "(Not found the producer group connection)")
    return list(merged.values())


async def topic_clusters(client: AdminClient, topic: str) -> list[str]:
    """getTopicClusterList: the clusters that hold the first broker of the topic's route."""
    route = await client.topic_route(topic)
    if not route.broker_datas:
        raise AdminError(f"topic {topic} has no broker in its route")
    info = await client.cluster_info()
    name = route.broker_datas[0].broker_name
    return sorted(c for c, names in info.cluster_addr_table.items() if name in names)


@dataclass
class StatsRow:
    """One line of statsAll."""

    topic: str
    group: str | None
    accumulation: int
    in_tps: float
    out_tps: float | None
    in_24h: int
    out_24h: int | None

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "consumerGroup": self.group, "accumulation": self.accumulation,
                "inTps": self.in_tps, "outTps": self.out_tps, "inMsg24Hour": self.in_24h, "outMsg24Hour": self.out_24h}


async def _stats_or_none(client: AdminClient, addr: str, name: str, key: str) -> BrokerStatsData | None:
    try:
        return await view_stats(client, addr, name, key)
    except AdminError:
        return None  # Java skips a broker whose stats are missing


async def topic_stats_rows(client: AdminClient, topic: str, active_only: bool) -> list[StatsRow]:
    """StatsAllSubCommand.printTopicDetail: the topic's in-TPS and 24 h count, then one row per consumer group."""
    route = await client.topic_route(topic)
    masters = [bd.master_addr for bd in route.broker_datas if bd.master_addr]
    groups = await client.topic_consumer_groups(masters[0], topic) if masters else []
    puts = [s for s in await gather(masters, lambda a: _stats_or_none(client, a, TOPIC_PUT_NUMS, topic)) if s]
    in_tps = sum(s.minute.tps for s in puts)
    in_24h = sum(s.sum_24h() for s in puts)
    if not groups:
        return [] if active_only and in_24h <= 0 else [StatsRow(topic, None, 0, in_tps, None, in_24h, None)]
    rows = []
    for group in groups:
        gets = [s for s in await gather(masters, lambda a: _stats_or_none(client, a, GROUP_GET_NUMS, f"{topic}@{group}"))
                if s]
        out_tps = sum(s.minute.tps for s in gets)
        out_24h = sum(s.sum_24h() for s in gets)
        try:
            accumulation = max(0, (await examine_consume_stats(client, group, topic)).total_diff())
        except AdminError:
            accumulation = 0
        if not active_only or in_24h > 0 or out_24h > 0:
            rows.append(StatsRow(topic, group, accumulation, in_tps, out_tps, in_24h, out_24h))
    return rows


async def stats_all(client: AdminClient, only_topic: str | None, active_only: bool) -> list[StatsRow]:
    topics = [t for t in sorted(await client.topic_list()) if not t.startswith((RETRY_PREFIX, DLQ_PREFIX))]
    if only_topic:
        topics = [t for t in topics if t == only_topic]

    async def one(topic: str) -> list[StatsRow]:
        try:
            return await topic_stats_rows(client, topic, active_only)
        except AdminError:
            return []  # Java prints nothing for a topic it cannot read

    return [row for rows in await gather(topics, one) for row in rows]


@dataclass
class Rollback:
    """RollbackStats: one queue of the old (client-side) reset."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "brokerOffset": self.broker_offset,
                "consumerOffset": self.consumer_offset, "timestampOffset": self.timestamp_offset,
                "resetOffset": self.rollback_offset}


async def reset_offset_by_time(client: AdminClient, topic: str, group: str, timestamp: int, force: bool,
                               cluster: str | None = None) -> dict[MessageQueue, int]:
    """resetOffsetByTimestamp: INVOKE_BROKER_TO_RESET_OFFSET to every broker of the route, tables merged."""
    route = await client.topic_route(_route_topic(topic, cluster))
    merged: dict[MessageQueue, int] = {}
    for addr in (a for a in map(select_addr, route.broker_datas) if a):
        merged.update(await reset_offset(client, addr, topic, group, timestamp, force))
    return merged


async def reset_offset_old(client: AdminClient, topic: str, group: str, timestamp: int, force: bool,
                           cluster: str | None = None) -> list[Rollback]:
    """resetOffsetByTimestampOld: per queue, the offset at ``timestamp`` committed with UPDATE_CONSUMER_OFFSET
    (only backwards unless ``force``): what Java does when no consumer is online."""
    route = await client.topic_route(_route_topic(topic, cluster))
    queues = {q.broker_name: q for q in route.queue_datas}
    out: list[Rollback] = []
    for bd in route.broker_datas:
        addr = select_addr(bd)
        if addr is None:
            continue
        stats = await consume_stats(client, addr, group)
        wrappers = {mq: w for mq, w in stats.offset_table.items() if mq.topic == topic}
        if not wrappers:  # never consumed: start from the queues' min offsets
            table = await topic_stats(client, addr, topic)
            qd = queues.get(bd.broker_name)
            for i in range(qd.read_queue_nums if qd else 0):
                mq = MessageQueue(topic, bd.broker_name, i)
                found = table.offset_table.get(mq)
                wrappers[mq] = OffsetWrapper(found.max_offset if found else 0, found.min_offset if found else 0)
        for mq, wrapper in sorted(wrappers.items()):
            if timestamp == -1:
                target = await client.max_offset(addr, topic, mq.queue_id)
            else:
                target = await client.search_offset(addr, topic, mq.queue_id, timestamp)
            rollback = wrapper.consumer_offset
            if force or target <= wrapper.consumer_offset:
                rollback = target
                await update_consumer_offset(client, addr, group, mq, target)
            out.append(Rollback(mq.broker_name, mq.queue_id, wrapper.broker_offset, wrapper.consumer_offset, target,
                                rollback))
    return out


def _route_topic(topic: str, cluster: str | None) -> str:
    """LMQ topics and the timer topic are routed through the cluster's topic, as Java does."""
    if cluster and (topic.startswith("%LMQ%") or topic == "rmq_sys_wheel_timer"):
        return cluster
    return topic


async def topic_config_of(client: AdminClient, addr: str, topic: str) -> TopicConfig | None:
    """GET_TOPIC_CONFIG (351): the broker's config of ``topic``; None when the broker does not have it."""
    resp = await client.invoke(addr, request(RequestCode.GET_TOPIC_CONFIG, {"topic": topic, "lo": True}))
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    resp = check_answer(addr, resp, f"config of {topic}")
    return parse_answer(addr, lambda b: TopicConfig.from_obj(topic, loads(b)), resp.body, "GET_TOPIC_CONFIG")
