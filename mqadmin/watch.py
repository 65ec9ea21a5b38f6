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
from mqadmin.render import Col, fit_table
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
    """One consistent-enough look at every NameServer (the documented ``watch --json`` shape)."""
    addrs = client.namesrv_addrs
    infos, lists, restored = await _gather(client.cluster_infos_everywhere, client.topic_lists_everywhere,
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
    broker_rows = []
    for (name, bid, addr), seen in sorted(brokers.items()):
        seen_by = {a: seen.get(a, False) if a not in errors else None for a in addrs}
        answered = [v for v in seen_by.values() if v is not None]
        prov = provisional.get((name, bid, addr), [])
        broker_rows.append({"broker": name, "id": bid, "addr": addr, "seenBy": seen_by, "agree": len(set(answered)) <= 1,
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
        answered = [tuple(v) for v in routes.values() if v is not None]
        topic_rows.append({"topic": topic, "routes": routes, "agree": len(set(answered)) <= 1})
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


def _agree(ok: bool) -> Text:
    return Text("yes", style="green") if ok else Text("NO", style="bold red")


def view(snap: dict[str, Any], console: Console, note: str = "") -> Group:
    """Brokers and routes, one column per NameServer; rows where they differ say NO under #Agree."""
    addrs = snap["namesrvs"]
    stamp = time.strftime("%H:%M:%S")
    cols = [Col("#Broker"), Col("#ID"), Col("#Addr"), Col("#Agree"), *[Col(f"@{a}") for a in addrs]]
    rows = []
    for row in snap["brokers"]:
        cells = [Text("no answer", style="yellow") if v is None else Text("alive", style="green") if v else Text("absent", style="red")
                 for v in row["seenBy"].values()]
        for cell, addr in zip(cells, row["seenBy"]):
            if addr in row.get("provisionalBy", ()):
                cell.append(" restored", style="yellow")
        rows.append([row["broker"], str(row["id"]), row["addr"], _agree(row["agree"]), *cells])
    brokers = fit_table(cols, rows, title=f"brokers as each NameServer sees them  {stamp}{note}", console=console)
    tcols = [Col("#Topic"), Col("#Agree"), *[Col(f"@{a}", wrap=True) for a in addrs]]
    trows = []
    for row in snap["topics"]:
        style = "" if row["agree"] else "bold red"
        cells = [Text("no answer", style="yellow") if v is None else Text(" ".join(v) or "no route", style=style)
                 for v in row["routes"].values()]
        trows.append([Text(row["topic"], style=style), _agree(row["agree"]), *cells])
    routes = fit_table(tcols, trows, title="routes (broker:perm:writeQueues)", console=console)
    parts: list[Any] = [brokers, routes]
    for addr, error in snap["errors"].items():
        parts.append(Text(f"{addr}: {error}", style="yellow"))
    return Group(*parts)


async def live(
    client: AdminClient, topics: list[str] | None, console: Console, *, interval: float = 1.0, count: int | None = None
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
                snap = await snapshot(client, topics)
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
