"""What every NameServer believes, side by side: the data behind ``mqadmin watch``.

NameServers never talk to each other, so after a partition, a restart or a
lost heartbeat they can disagree about which brokers are alive and where a
topic's queues are. A snapshot asks each NameServer separately (all
requests in parallel, each bounded by the client's timeout) and marks every
row on which they differ. The view and the live loop are in
:mod:`mqadmin.commands.watch`.

A NameServer that restored its routes from its snapshot (a warm restart)
marks the brokers that have not registered with it since (code 9002):
those cells say ``restored`` and the row's ``provisionalBy`` lists them.
"""

from __future__ import annotations

from typing import Any

import trio

from mqadmin.client import AdminClient
from mqadmin.client.errors import PerServer
from remoting.bodies import TopicRouteData, perm_to_string

MAX_TOPICS = 20
#: Default silence (s) after which a broker is marked suspect: past a 30 s registration period
#: (Java's default) plus slack, or half its heartbeat timeout when that is shorter.
SUSPECT_AFTER = 35.0


def route_summary(route: TopicRouteData) -> list[str]:
    """``broker-a:RW-:4`` per broker with a master address, sorted."""
    masters = {b.broker_name for b in route.broker_datas if b.master_addr}
    return sorted(
        f"{q.broker_name}:{perm_to_string(q.perm)}:{q.write_queue_nums}" + ("" if q.broker_name in masters else ":no-master")
        for q in route.queue_datas
    )


def suspect_limit(timeout_ms: int | None, suspect_after: float | None) -> float:
    """Seconds of silence after which a broker is suspect: the user's, else the default rule."""
    if suspect_after is not None:
        return suspect_after
    return min(SUSPECT_AFTER, timeout_ms / 2000.0) if timeout_ms else SUSPECT_AFTER


def _agreement(values: list[Any]) -> bool:
    """Agreement needs every NameServer's answer: a silent one (None) never counts as agreeing."""
    return all(v is not None for v in values) and len(set(values)) <= 1


async def snapshot(client: AdminClient, topics: list[str] | None = None, max_topics: int = MAX_TOPICS,
                   suspect_after: float | None = None) -> dict[str, Any]:
    """One consistent-enough look at every NameServer (the documented ``watch --json`` shape)."""
    addrs = client.namesrv_addrs
    infos, lists, lives, restored = await _gather(client.cluster_infos_everywhere, client.topic_lists_everywhere,
                                                  client.broker_live_tables_everywhere,
                                                  client.restored_brokers_everywhere)
    provisional = provisional_by(restored)
    errors = {r.addr: r.error for r in infos if not r.ok}
    brokers: dict[tuple[str, int, str], dict[str, bool]] = {}
    for r in infos:
        if not r.ok:
            continue
        for name, bd in r.value.broker_addr_table.items():
            for bid, addr in bd.broker_addrs.items():
                brokers.setdefault((name, bid, addr), {})[r.addr] = True
    # (ns addr, broker addr) -> (seconds since last heard, heartbeat timeout ms); absent where the
    # NameServer does not serve GET_BROKER_LIVE_TABLE (a Java one): its column then shows no age.
    heard: dict[tuple[str, str], tuple[float, int]] = {}
    for r in lives:
        if r.ok:
            for b in r.value:
                heard[(r.addr, b["brokerAddr"])] = (b["lastUpdateAgoMillis"] / 1000.0, b["heartbeatTimeoutMillis"])
    broker_rows = []
    for (name, bid, addr), seen in sorted(brokers.items()):
        seen_by = {a: seen.get(a, False) if a not in errors else None for a in addrs}
        ages = {a: round(heard[(a, addr)][0], 1) if seen_by[a] and (a, addr) in heard else None for a in addrs}
        suspect = sorted(a for a in addrs if ages[a] is not None
                         and ages[a] > suspect_limit(heard[(a, addr)][1], suspect_after))
        prov = provisional.get((name, bid, addr), [])
        broker_rows.append({"broker": name, "id": bid, "addr": addr, "seenBy": seen_by,
                            "agree": _agreement(list(seen_by.values())), "lastHeard": ages, "suspectBy": suspect,
                            "provisional": bool(prov), "provisionalBy": prov})
    if topics is None:
        topics = sorted({t for r in lists if r.ok for t in r.value})[:max_topics]
    per_topic = await _gather(*[lambda t=t: client.topic_routes_everywhere(t) for t in topics])
    topic_rows = []
    for topic, per in zip(topics, per_topic):
        routes: dict[str, Any] = {}
        for r in per:
            if r.ok:
                routes[r.addr] = route_summary(r.value)
            elif "TOPIC_NOT_EXIST" in (r.error or ""):
                routes[r.addr] = []
            else:
                routes[r.addr] = None  # that NameServer did not answer
        topic_rows.append({"topic": topic, "routes": routes,
                           "agree": _agreement([None if v is None else tuple(v) for v in routes.values()])})
    return {"namesrvs": addrs, "errors": errors, "brokers": broker_rows, "topics": topic_rows}


def provisional_by(restored: list[PerServer]) -> dict[tuple[str, int, str], list[str]]:
    """(brokerName, id, addr) -> the NameServers on which it is restored and not registered since.

    A NameServer that does not know code 9002 (a Java one) contributes nothing.
    """
    out: dict[tuple[str, int, str], list[str]] = {}
    for r in restored:
        for b in r.value if r.ok else ():
            name, bid, addr = b.get("brokerName"), b.get("brokerId"), b.get("brokerAddr")
            if isinstance(name, str) and type(bid) is int and isinstance(addr, str):
                out.setdefault((name, bid, addr), []).append(r.addr)
    return out


async def _gather(*fns: Any) -> list[list[PerServer]]:
    results: list[Any] = [None] * len(fns)

    async def run(i: int) -> None:
        results[i] = await fns[i]()

    async with trio.open_nursery() as nursery:
        for i in range(len(fns)):
            nursery.start_soon(run, i)
    return results
