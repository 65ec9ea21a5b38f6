"""Cluster commands (Apache's tools/command/cluster): clusterList and clusterRT.

The clusterList rows come from :mod:`mqadmin.client.clusterlist`; here they become Apache 5.x's
table (plus a #Status column: Apache prints a stack trace for a broker that does not answer).
"""

from __future__ import annotations

import datetime
import time
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import trio
import typer
from rich.text import Text

from mqadmin.client import AdminClient, run
from mqadmin.client.clusterlist import cluster_rows
from mqadmin.client.errors import AdminError, PerServer
from mqadmin.commands.options import JsonOpt, NamesrvOpt, TimeoutOpt, client_for
from mqadmin.commands.results import exit_if_any_failed, interruptible
from mqadmin.localcluster.state import local_impls
from mqadmin.output.console import out, print_json
from mqadmin.output.tables import Col, fit_table, fit_variants

#: Apache 5.x's columns (ClusterListSubCommand.printClusterBaseInfo) plus #Status.
BASE_COLUMNS = [
    Col("#Cluster Name"), Col("#Broker Name"), Col("#BID"), Col("#Addr"), Col("#VIP Addr", 8), Col("#Version", 3),
    Col("#InTPS(LOAD)", 1, "right"), Col("#OutTPS(LOAD)", 2, "right"), Col("#Timer(Progress)", 7),
    Col("#PCWait(ms)", 6, "right"), Col("#Hour", 4), Col("#SPACE", 5), Col("#ACTIVATED", 3), Col("#Status", wrap=True),
]
#: Drop rank of #Timer(Progress): the one column given up before the (LOAD) details are.
TIMER_RANK = 7
#: The same figures without the thread-pool load, tried when the full table is too wide.
COMPACT_COLUMNS = [
    Col("#Cluster Name"), Col("#Broker Name"), Col("#BID"), Col("#Addr"), Col("#VIP Addr", 8), Col("#Version", 3),
    Col("#InTPS", 1, "right"), Col("#OutTPS", 2, "right"), Col("#PCWait(ms)", 6, "right"), Col("#Hour", 4),
    Col("#SPACE", 5), Col("#ACTIVATED", 3), Col("#Status", wrap=True),
]
MORE_COLUMNS = [
    Col("#Cluster Name"), Col("#Broker Name"), Col("#BID"), Col("#Addr"), Col("#InTotalYest", 1, "right"),
    Col("#OutTotalYest", 1, "right"), Col("#InTotalToday", 1, "right"), Col("#OutTotalToday", 1, "right"),
    Col("#Status", wrap=True),
]


def _s(value: Any, default: str = "N") -> str:
    return default if value is None else str(value)


def _f(value: float | None, fmt: str) -> str:
    return format(value or 0.0, fmt)


def status(r: dict[str, Any]) -> Text:
    text = Text("OK", style="green") if r["reachable"] else Text(f"no answer: {r['error']}", style="red")
    if r.get("provisionalOn"):
        text.append(f"; restored on {', '.join(r['provisionalOn'])}, not registered since", style="yellow")
    return text


def base_cells(r: dict[str, Any]) -> list[str | Text]:
    """Apache 5.x's cells (same formats, leading padding dropped) plus the status."""
    ident: list[str | Text] = [r["cluster"], r["brokerName"], str(r["brokerId"]), r["addr"], r["vipAddr"] or "-"]
    if not r["reachable"]:
        return ident + ["-"] * 8 + [status(r)]
    congest = (r["timerCongestNum"] or 0) / 10000.0
    return ident + [
        _s(r["version"], ""),
        f"{_f(r['inTps'], '.2f')}({_s(r['sendQueue'])},{_s(r['sendWaitMs'])}ms)",
        f"{_f(r['outTps'], '.2f')}({_s(r['pullQueue'])},{_s(r['pullWaitMs'])}ms|{_s(r['ackQueue'])},{_s(r['ackWaitMs'])}ms)",
        (f"{r['timerReadBehind'] or 0}-{r['timerOffsetBehind'] or 0}({congest:.1f}w, "
         f"{_f(r['timerEnqueueTps'], '.1f')}, {_f(r['timerDequeueTps'], '.1f')})"),
        _s(r["pageCacheLockTimeMs"], ""),
        _f(r["hours"], ".2f"),
        _f(r["space"], ".4f"),
        "" if r["activated"] is None else str(r["activated"]).lower(),
        status(r),
    ]


def compact_cells(r: dict[str, Any]) -> list[str | Text]:
    cells = base_cells(r)
    if not r["reachable"]:
        return cells[:5] + ["-"] * 7 + [cells[-1]]
    return cells[:6] + [_f(r["inTps"], ".2f"), _f(r["outTps"], ".2f")] + cells[9:]


def more_cells(r: dict[str, Any]) -> list[str | Text]:
    ident: list[str | Text] = [r["cluster"], r["brokerName"], str(r["brokerId"]), r["addr"]]
    if not r["reachable"]:
        return ident + ["-"] * 4 + [status(r)]
    return ident + [str(r[k] or 0) for k in ("inTotalYest", "outTotalYest", "inTotalToday", "outTotalToday")] + [status(r)]


IMPL_COLUMN = Col("#Impl", 3)


def with_impl(columns: list[Col], cells: list[list[str | Text]],
              rows: list[dict[str, Any]]) -> tuple[list[Col], list[list[str | Text]]]:
    """The table with an #Impl column after #Addr when some broker is the local cluster's (ours: which
    implementation and version runs there); Apache's columns alone otherwise."""
    if not any(r["impl"] for r in rows):
        return columns, cells
    at = [c.header for c in columns].index("#Addr") + 1
    return ([*columns[:at], IMPL_COLUMN, *columns[at:]],
            [[*c[:at], r["impl"] or "", *c[at:]] for c, r in zip(cells, rows)])


def cluster_list(
    cluster_name: str | None = typer.Option(None, "-c", "--clusterName", help="Only this cluster."),
    more_stats: bool = typer.Option(False, "-m", "--moreStats", help="Message totals of yesterday and today."),
    interval: int | None = typer.Option(None, "-i", "--interval", min=1, help="Repeat every this many seconds (Ctrl-C stops)."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    client = client_for(namesrv, timeout)
    with interruptible():
        while True:
            impls = local_impls()
            rows = [r | {"impl": impls.get(r["addr"])} for r in run(cluster_rows, client, cluster_name)]
            if as_json:
                print_json({"brokers": rows})
            elif more_stats:
                out.print(fit_table(*with_impl(MORE_COLUMNS, [more_cells(r) for r in rows], rows)))
            else:
                out.print(fit_variants([
                    (*with_impl(BASE_COLUMNS, [base_cells(r) for r in rows], rows), TIMER_RANK),
                    with_impl(COMPACT_COLUMNS, [compact_cells(r) for r in rows], rows),
                ]))
            if interval is None:
                break
            time.sleep(interval)
    if not rows and cluster_name is None and not as_json:
        out.print("no broker is registered with the NameServer", style="yellow")
    # A health check as well: a broker that did not answer fails the command (its row says why).
    exit_if_any_failed([PerServer(r["addr"], error=r["error"] or "no answer", kind="broker") if not r["reachable"]
                        else PerServer(r["addr"], kind="broker") for r in rows])


def cluster_rt(
    amount: int = typer.Option(100, "-a", "--amount", min=1, max=100_000, help="Messages per broker and round."),
    size: int = typer.Option(128, "-s", "--size", min=0, max=4 * 1024 * 1024, help="Message size in bytes."),
    cluster: str | None = typer.Option(None, "-c", "--cluster", help="Only this cluster (default: all)."),
    print_log: str = typer.Option("false", "-p", "--printLog", metavar="true|false", help="Print as tlog lines."),
    machine_room: str = typer.Option("noname", "-m", "--machineRoom", help="Machine room name (tlog lines)."),
    interval: float = typer.Option(10, "-i", "--interval", min=0, help="Seconds between rounds."),
    count: int | None = typer.Option(None, "--count", min=1, help="Stop after this many rounds (Java: never)."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    """Send ``-a`` messages to every broker's own topic (its broker name) and print the mean send RT."""
    tlog = print_log.strip().lower() == "true"
    client = client_for(namesrv, timeout)
    if not tlog and not as_json:
        out.print(f"{'#Cluster Name':<24}  {'#Broker Name':<24}  {'#RT':<8}  {'#successCount':<16}  {'#failCount':<16}")
    rounds = 0
    with interruptible():  # Ctrl-C ends it, as Java's never-ending loop is ended: exit 130
        while True:
            rows = run(_rt_round, client, cluster.strip() if cluster else None, amount, b"a" * size)
            for r in rows:
                if as_json:  # one JSON object per line and round: the command may run for ever
                    print_json(r, indent=None)
                elif tlog:
                    when = datetime.datetime.now(datetime.timezone(datetime.timedelta(hours=8)))
                    rt = Decimal(str(r["rt"])).quantize(Decimal(1), ROUND_HALF_UP)
                    out.print(f"{when:%Y-%m-%d %H:%M:%S}|{machine_room}|{r['cluster']}|{r['brokerName']}|{rt}")
                else:
                    out.print(f"{r['cluster']:<24}  {r['brokerName']:<24}  {r['rt']:<8.2f}  {r['successCount']:<16}  "
                              f"{r['failCount']:<16}")
            rounds += 1
            if count is not None and rounds >= count:
                break
            time.sleep(interval)


async def _rt_round(client: AdminClient, only: str | None, amount: int, body: bytes) -> list[dict[str, Any]]:
    info = await client.cluster_info()
    clusters = [only] if only else sorted(info.cluster_addr_table)
    rows = []
    async with client.pooled():
        for name in clusters:
            brokers = info.cluster_addr_table.get(name)
            if brokers is None:
                raise AdminError(f"cluster [{name}] not exist (clusters: {', '.join(sorted(info.cluster_addr_table))})")
            for broker in sorted(set(brokers)):
                rows.append(await _rt_broker(client, name, broker, amount, body))
    return rows


async def _rt_broker(client: AdminClient, cluster: str, broker: str, amount: int, body: bytes) -> dict[str, Any]:
    ok = failed = 0
    elapsed = 0.0
    try:
        route = await client.topic_route(broker)
    except AdminError:
        route = None
    for i in range(amount):
        start = trio.current_time()
        try:
            if route is None:
                raise AdminError(f"no route for topic {broker}")
            await client.send_message(broker, body, route=route)
            ok += 1
        except AdminError:
            failed += 1
        if i or amount == 1:  # Java leaves the first send (connection set-up) out of the mean
            elapsed += trio.current_time() - start
    rt = elapsed * 1000 / max(1, amount - 1)
    return {"cluster": cluster, "brokerName": broker, "rt": round(rt, 2), "successCount": ok, "failCount": failed}


def register(app: typer.Typer) -> None:
    app.command("clusterList", help="List clusters and brokers with each broker's runtime stats (Apache 5.x columns).")(cluster_list)
    app.command("clusterRT", help="Send messages to every broker and print the send RT, every -i seconds.")(cluster_rt)
