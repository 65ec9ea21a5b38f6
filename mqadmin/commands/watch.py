"""``mqadmin watch``: what every NameServer believes, side by side, once or live.

The data is :func:`mqadmin.client.snapshot.snapshot`; here it becomes two tables (brokers, routes)
with one column per NameServer and the rows on which they differ marked. The live view redraws
once per interval on a fixed cadence; off a terminal it prints one frame per interval instead.
"""

from __future__ import annotations

import time
from typing import Any

import trio
import typer
from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from mqadmin.client import AdminClient, run
from mqadmin.client.snapshot import MAX_TOPICS, SUSPECT_AFTER, snapshot
from mqadmin.commands.options import JsonOpt, NamesrvOpt, client_for, topic_option
from mqadmin.commands.results import error_line, fail, interruptible
from mqadmin.localcluster.state import local_impls
from mqadmin.output.console import current_console, out, print_json
from mqadmin.output.tables import Col, fit_table

WatchTopicsOpt = topic_option("Topics to show (repeatable; default: the first 20).", default=None)


def watch_cmd(
    topics: list[str] | None = WatchTopicsOpt,
    interval: float = typer.Option(1.0, "--interval", min=0.1, help="Seconds between refreshes."),
    count: int | None = typer.Option(None, "--count", min=1, help="Stop after this many refreshes."),
    once: bool = typer.Option(False, "--once", help="Print one snapshot and exit."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = typer.Option(0.8, "--timeout", min=0.05, help="Seconds to wait for each NameServer."),
    suspect_after: float | None = typer.Option(
        None, "--suspect-after", min=0.1, metavar="SECONDS",
        help="Mark a broker suspect when a NameServer has not heard from it for this long "
             f"(default {SUSPECT_AFTER:g} s, or half its heartbeat timeout if shorter)."),
) -> None:
    client = client_for(namesrv, timeout)
    if once or as_json:
        snap = with_impls(run(snapshot, client, topics, MAX_TOPICS, suspect_after))
        if as_json:
            print_json(snap)
        else:
            out.print(view(snap, out))
        if snap["errors"]:  # a health check: every NameServer must answer
            silent = ", ".join(snap["errors"])
            fail(f"{len(snap['errors'])} of {len(snap['namesrvs'])} NameServer(s) did not answer: {silent}")
        return
    with interruptible():
        trio.run(lambda: live(client, topics, current_console(), interval=interval, count=count,
                              suspect_after=suspect_after))


def with_impls(snap: dict[str, Any]) -> dict[str, Any]:
    """The snapshot with ``impls``: what runs at each address that is the local cluster's (``toolkit``,
    ``stub``, ``java 5.5.0``), for the NameServers and brokers it shows."""
    known = local_impls()
    addrs = [*snap["namesrvs"], *(row["addr"] for row in snap["brokers"])]
    snap["impls"] = {addr: known[addr] for addr in addrs if addr in known}
    return snap


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
    impls = snap.get("impls", {})
    stamp = time.strftime("%H:%M:%S")
    cols = [Col("#Broker"), Col("#ID"), Col("#Addr"), *([Col("#Impl", 1)] if impls else []), Col("#Agree"),
            *[Col(f"@{a}") for a in addrs]]
    rows = []
    for row in snap["brokers"]:
        ages = row.get("lastHeard", {})
        cells = [_broker_cell(v, ages.get(a), a in row.get("suspectBy", ())) for a, v in row["seenBy"].items()]
        for cell, addr in zip(cells, row["seenBy"]):
            if addr in row.get("provisionalBy", ()):
                cell.append(" restored", style="yellow")
        impl = [impls.get(row["addr"], "")] if impls else []
        rows.append([row["broker"], str(row["id"]), row["addr"], *impl, _agree(row["agree"], row["seenBy"].values()),
                     *cells])
    title = f"brokers as each NameServer sees them  {stamp}{note}"
    if any(a in impls for a in addrs):
        title += "\nNameServers: " + ", ".join(f"@{a} {impls[a]}" for a in addrs if a in impls)
    brokers = fit_table(cols, rows, title=title, console=console)
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
                snap = with_impls(await snapshot(client, topics, suspect_after=suspect_after))
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


def register(app: typer.Typer) -> None:
    app.command("watch", help="Live view of brokers and routes as each NameServer sees them; disagreements marked.")(watch_cmd)
