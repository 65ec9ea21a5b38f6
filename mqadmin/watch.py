"""What every NameServer believes, side by side: ``mqadmin watch``.

NameServers never talk to each other, so after a partition, a restart or a
lost heartbeat they can disagree about which brokers are alive and where a
topic's queues are. A snapshot asks each NameServer separately (all
requests in parallel, each bounded by the client's timeout) and marks every
row on which they differ. The live view redraws once per interval on a
fixed cadence; off a terminal it prints one frame per interval instead.

A NameServer that restored its routes from its snapshot (a warm restart)
marks the brokers that have not registered with it since (code 9002):
those cells say ``restored`` and the row's ``provisionalBy`` lists them.
"""

from __future__ import annotations

import time
from typing import Any

import trio
from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from mqadmin.client import AdminClient, PerServer
from mqadmin.cliutil import error_line
from mqadmin.render import Col, fit_table
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


def _agree(ok: bool, values: Any) -> Text:
    if ok:
        return Text("yes", style="green")
    if any(v is None for v in values):
        return Text("unknown", style="yellow")  # somebody did not answer: agreement cannot be claimed
    return Text("NO", style="bold red")


def _broker_cell(seen: bool | None, age: float | None, suspect: bool) -> Text:
    if seen is None:
        return Text("no answer", style="yellow")
    if not seen:
        return Text("absent", style="red")
    if age is None:
        return Text("alive", style="green")
    if suspect:
        return Text(f"suspect {age:.0f}s", style="bold yellow")
    return Text(f"alive {age:.0f}s", style="green")


def view(snap: dict[str, Any], console: Console, note: str = "") -> Group:
    """Brokers and routes, one column per NameServer; rows where they differ say NO under #Agree."""
    addrs = snap["namesrvs"]
    stamp = time.strftime("%H:%M:%S")
    cols = [Col("#Broker"), Col("#ID"), Col("#Addr"), Col("#Agree"), *[Col(f"@{a}") for a in addrs]]
    rows = []
    for row in snap["brokers"]:
        ages = row.get("lastHeard", {})
        cells = [_broker_cell(v, ages.get(a), a in row.get("suspectBy", ())) for a, v in row["seenBy"].items()]
        for cell, addr in zip(cells, row["seenBy"]):
            if addr in row.get("provisionalBy", ()):
                cell.append(" restored", style="yellow")
        rows.append([row["broker"], str(row["id"]), row["addr"], _agree(row["agree"], row["seenBy"].values()), *cells])
    brokers = fit_table(cols, rows, title=f"brokers as each NameServer sees them  {stamp}{note}", console=console)
    tcols = [Col("#Topic"), Col("#Agree"), *[Col(f"@{a}", wrap=True) for a in addrs]]
    trows = []
    for row in snap["topics"]:
        style = "" if row["agree"] else "bold red"
        cells = [Text("no answer", style="yellow") if v is None else Text(" ".join(v) or "no route", style=style)
                 for v in row["routes"].values()]
        trows.append([Text(row["topic"], style=style), _agree(row["agree"], row["routes"].values()), *cells])
    routes = fit_table(tcols, trows, title="routes (broker:perm:writeQueues)", console=console)
    parts: list[Any] = [brokers, routes]
    for addr, error in snap["errors"].items():
        parts.append(Text(error_line(addr, error), style="yellow"))
    return Group(*parts)


async def live(
    client: AdminClient, topics: list[str] | None, console: Console, *, interval: float = 1.0, count: int | None = None,
    suspect_after: float | None = None,
) -> None:
    """Redraw every ``interval`` seconds (fixed cadence) until Ctrl-C or ``count`` frames."""
    frames = 0
    next_at = trio.current_time()
    display = Live(console=console, auto_refresh=False, transient=False) if console.is_terminal else None
    async with client.pooled():
        if display is not None:
            display.start()
        try:
            while count is None or frames < count:
                began = time.monotonic()
                snap = await snapshot(client, topics, suspect_after=suspect_after)
                frames += 1
                note = f"  refresh {frames}, {int((time.monotonic() - began) * 1000)} ms"
                if display is not None:
                    display.update(view(snap, console, note), refresh=True)
                else:
                    console.print(view(snap, console, note))
                    console.print()
                next_at += interval
                # after a slow refresh, start the next one now and keep the cadence from there
                next_at = max(next_at, trio.current_time())
                if count is None or frames < count:
                    await trio.sleep_until(next_at)
        finally:
            if display is not None:
                display.stop()
