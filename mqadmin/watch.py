"""What every NameServer believes, side by side: the data behind ``mqadmin watch``.

NameServers never talk to each other, so after a partition, a restart or a
lost heartbeat they can disagree about which brokers are alive and where a
topic's queues are. A snapshot asks each NameServer separately and marks
every row on which they differ.
"""

from __future__ import annotations

from typing import Any

import trio

from mqadmin.client import AdminClient, PerServer
from remoting.bodies import TopicRouteData, perm_to_string

MAX_TOPICS = 20


def route_summary(route: TopicRouteData) -> list[str]:
    """``broker-a:RW-:4`` per broker with a master address, sorted."""
    masters = {b.broker_name for b in route.broker_datas if b.master_addr}
    return sorted(
        f"{q.broker_name}:{perm_to_string(q.perm)}:{q.write_queue_nums}" + ("" if q.broker_name in masters else ":no-master")
        for q in route.queue_datas
    )


async def snapshot(client: AdminClient, topics: list[str] | None = None, max_topics: int = MAX_TOPICS) -> dict[str, Any]:
    """One consistent-enough look at every NameServer (all asked in parallel)."""
    addrs = client.namesrv_addrs
    infos, lists = await _both(client.cluster_infos_everywhere(), client.topic_lists_everywhere())
    errors = {r.addr: r.error for r in infos if not r.ok}
    brokers: dict[tuple[str, int, str], dict[str, bool]] = {}
    for r in infos:
        if not r.ok:
            continue
        for name, bd in r.value.broker_addr_table.items():
            for bid, addr in bd.broker_addrs.items():
                brokers.setdefault((name, bid, addr), {})[r.addr] = True
    broker_rows = []
    for (name, bid, addr), seen in sorted(brokers.items()):
        seen_by = {a: seen.get(a, False) if a not in errors else None for a in addrs}
        answered = [v for v in seen_by.values() if v is not None]
        broker_rows.append({"broker": name, "id": bid, "addr": addr, "seenBy": seen_by, "agree": len(set(answered)) <= 1})
    if topics is None:
        union = sorted({t for r in lists if r.ok for t in r.value})
        topics = union[:max_topics]
    topic_rows = []
    for topic in topics:
        per = await client.topic_routes_everywhere(topic)
        routes: dict[str, Any] = {}
        for r in per:
            if r.ok:
                routes[r.addr] = route_summary(r.value)
            elif "TOPIC_NOT_EXIST" in (r.error or ""):
                routes[r.addr] = []
            else:
                routes[r.addr] = None  # that NameServer did not answer
        answered = [tuple(v) for v in routes.values() if v is not None]
        topic_rows.append({"topic": topic, "routes": routes, "agree": len(set(answered)) <= 1})
    return {"namesrvs": addrs, "errors": errors, "brokers": broker_rows, "topics": topic_rows}


async def _both(a: Any, b: Any) -> tuple[list[PerServer], list[PerServer]]:
    results: dict[str, Any] = {}

    async def run(key: str, coro: Any) -> None:
        results[key] = await coro

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "a", a)
        nursery.start_soon(run, "b", b)
    return results["a"], results["b"]
