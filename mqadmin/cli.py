"""``mqadmin``: Apache RocketMQ's admin commands, with Rich output and --json.

Thin by design: each command resolves the NameServer addresses, calls
:mod:`mqadmin.client` and renders the result. This module holds the
NameServer commands and ``watch``; broker commands live in
:mod:`mqadmin.broker_cli`, the local cluster runner in :mod:`mqadmin.runner_cli`.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import trio
import typer

from mqadmin import (
    broker_admin_cli,
    broker_cli,
    cluster,
    clusterlist,
    fanout_cli,
    runner_cli,
    scenario_cli,
    watch,
)
from mqadmin.client import AdminClient, AdminError, run
from mqadmin.cliutil import (
    CONTEXT_SETTINGS,
    JsonOpt,
    NamesrvOpt,
    TimeoutOpt,
    client_for,
    fail,
    full_summaries,
    interruptible,
    per_server,
)
from mqadmin.render import (
    Col,
    current_console,
    fit_table,
    fit_variants,
    out,
    print_json,
)
from namesrv.config_policy import config_view, key_class
from remoting.bodies import ClusterInfo, TopicRouteData
from remoting.climain import run_app

app = typer.Typer(
    add_completion=False,
    context_settings=CONTEXT_SETTINGS,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="RocketMQ admin commands (Apache mqadmin names and options), a local cluster runner and a live view.",
)


def route_json(route: TopicRouteData) -> dict[str, Any]:
    """The documented --json shape of a route (standard JSON, string ids)."""
    obj = route.to_obj()
    for bd in obj["brokerDatas"]:
        bd["brokerAddrs"] = {str(k): v for k, v in bd["brokerAddrs"].items()}
    return obj


@app.command("topicRoute", help="Show a topic's route: brokers, addresses, queues (JSON unless -l).")
def topic_route(
    topic: str = typer.Option(..., "-t", "--topic", help="Topic name."),
    list_format: bool = typer.Option(False, "-l", "--list", help="One row per broker."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    route = run(client_for(namesrv, timeout).topic_route, topic)
    if as_json or not list_format:
        print_json(route_json(route))
        return
    queues = {q.broker_name: q for q in route.queue_datas}
    rows = []
    total_r = total_w = 0
    for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
        q = queues.get(bd.broker_name)
        r, w = (q.read_queue_nums, q.write_queue_nums) if q else (0, 0)
        total_r, total_w = total_r + r, total_w + w
        addrs = "{" + ", ".join(f"{k}={v}" for k, v in sorted(bd.broker_addrs.items())) + "}"
        rows.append([bd.cluster, bd.broker_name, addrs, str(r), str(w), str(q.perm) if q else "-"])
    cols = [Col("#ClusterName"), Col("#BrokerName"), Col("#BrokerAddrs", wrap=True), Col("#ReadQueue"),
            Col("#WriteQueue"), Col("#Perm")]
    footer = [["Total:", str(len(route.broker_datas)), "", str(total_r), str(total_w), ""]]
    out.print(fit_table(cols, rows, footer_rows=footer))


@app.command("topicList", help="List every topic the NameServer knows (-c: with cluster and consumer groups).")
def topic_list(
    cluster_mode: bool = typer.Option(False, "-c", "--clusterModel", help="Show each topic's cluster and consumer groups."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    client = client_for(namesrv, timeout)
    if not cluster_mode:
        topics = sorted(run(client.topic_list))
        if as_json:
            print_json({"topicList": topics})
        else:
            for t in topics:
                out.print(t)
        return
    rows = run(_topic_clusters, client)
    if as_json:
        print_json({"topics": rows})
        return
    cells = [[r["cluster"] or "", r["topic"], group] for r in rows for group in (r["consumerGroups"] or [""])]
    out.print(fit_table([Col("#Cluster Name"), Col("#Topic"), Col("#Consumer Group", wrap=True)], cells))


async def _topic_clusters(client: AdminClient) -> list[dict[str, Any]]:
    """TopicListSubCommand -c: each topic's cluster (of its first broker) and consumer groups (code 300)."""
    async with client.pooled():
        info = await client.cluster_info()
        topics = [t for t in sorted(await client.topic_list()) if not t.startswith(("%RETRY%", "%DLQ%"))]
        rows: list[dict[str, Any]] = [{"topic": t, "cluster": None, "consumerGroups": []} for t in topics]
        limit = trio.CapacityLimiter(16)

        async def fill(row: dict[str, Any]) -> None:
            async with limit:
                try:
                    route = await client.topic_route(row["topic"])
                    if not route.broker_datas:
                        return
                    first = route.broker_datas[0]
                    row["cluster"] = _cluster_of(info, first.broker_name)
                    addr = first.master_addr or next(iter(first.broker_addrs.values()), None)
                    if addr:
                        row["consumerGroups"] = await client.topic_consumer_groups(addr, row["topic"])
                except AdminError:
                    pass  # Java prints the row with what it has

        async with trio.open_nursery() as nursery:
            for row in rows:
                nursery.start_soon(fill, row)
    return rows


def _cluster_of(info: ClusterInfo, broker_name: str) -> str | None:
    return next((c for c, names in info.cluster_addr_table.items() if broker_name in names), None)


@app.command("clusterList", help="List clusters and brokers with each broker's runtime stats (Apache 5.x columns).")
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
            rows = run(_cluster_rows, client, cluster_name)
            if as_json:
                print_json({"brokers": rows})
            elif more_stats:
                out.print(fit_table(clusterlist.MORE_COLUMNS, [clusterlist.more_cells(r) for r in rows]))
            else:
                out.print(fit_variants([
                    (clusterlist.BASE_COLUMNS, [clusterlist.base_cells(r) for r in rows], clusterlist.TIMER_RANK),
                    (clusterlist.COMPACT_COLUMNS, [clusterlist.compact_cells(r) for r in rows]),
                ]))
            if interval is None:
                break
            time.sleep(interval)
    if not rows and cluster_name is None and not as_json:
        out.print("no broker is registered with the NameServer", style="yellow")


async def _cluster_rows(client: AdminClient, only: str | None) -> list[dict[str, Any]]:
    info = await client.cluster_info()
    try:
        brokers = clusterlist.broker_addrs(info, only)
    except LookupError as exc:
        raise AdminError(str(exc)) from None
    answers = await client.runtime_infos([b[3] for b in brokers])
    provisional = watch.provisional_by(await client.restored_brokers_everywhere())
    now_ms = int(time.time() * 1000)
    return [clusterlist.row(*b, answer, now_ms, provisional.get((b[1], b[2], b[3]), []))
            for b, answer in zip(brokers, answers)]


@app.command("updateKvConfig", help="Create or update a KV config entry on every NameServer.")
def update_kv(
    namespace: str = typer.Option(..., "-s", "--namespace", help="Namespace."),
    key: str = typer.Option(..., "-k", "--key", help="Key."),
    value: str = typer.Option(..., "-v", "--value", help="Value."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(client_for(namesrv, timeout).put_kv, namespace, key, value)
    per_server(results, "create or update kv config to namespace success. [{addr}]", "{error}", as_json)


@app.command("deleteKvConfig", help="Delete a KV config entry on every NameServer.")
def delete_kv(
    namespace: str = typer.Option(..., "-s", "--namespace", help="Namespace."),
    key: str = typer.Option(..., "-k", "--key", help="Key."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(client_for(namesrv, timeout).delete_kv, namespace, key)
    per_server(results, "delete kv config from namespace success. [{addr}]", "{error}", as_json)


@app.command("getKvConfig", help="Show one KV config value, or a whole namespace.")
def get_kv(
    namespace: str = typer.Option(..., "-s", "--namespace", help="Namespace."),
    key: str | None = typer.Option(None, "-k", "--key", help="Key (default: the whole namespace)."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    client = client_for(namesrv, timeout)
    table = {key: run(client.get_kv, namespace, key)} if key is not None else run(client.kv_list, namespace)
    if as_json:
        print_json({"namespace": namespace, "table": table})
        return
    out.print(fit_table([Col("#Key"), Col("#Value", wrap=True)], [[k, v] for k, v in sorted(table.items())],
                        title=f"namespace {namespace}"))


@app.command("wipeWritePerm", help="Remove write permission of a broker's topics on every NameServer.")
def wipe_write_perm(
    broker: str = typer.Option(..., "-b", "--brokerName", help="Broker name."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(client_for(namesrv, timeout).wipe_write_perm, broker)
    per_server(
        results,
        f"wipe write perm of broker[{broker}] in name server[{{addr}}] OK, {{value}}",
        f"wipe write perm of broker[{broker}] in name server[{{addr}}] Failed: {{error}}",
        as_json,
    )


@app.command("addWritePerm", help="Restore write permission of a broker's topics on every NameServer.")
def add_write_perm(
    broker: str = typer.Option(..., "-b", "--brokerName", help="Broker name."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(client_for(namesrv, timeout).add_write_perm, broker)
    per_server(
        results,
        f"add write perm of broker[{broker}] in name server[{{addr}}] OK, {{value}}",
        f"add write perm of broker[{broker}] in name server[{{addr}}] Failed: {{error}}",
        as_json,
    )


@app.command("getNamesrvConfig", help="Show every NameServer's configuration.")
def get_namesrv_config(
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
    classes: bool = typer.Option(
        False, "--classes", help="Show whether updateNamesrvConfig applies each key live, at restart, never (inert) or refuses it."
    ),
) -> None:
    results = run(client_for(namesrv, timeout).namesrv_configs)
    if as_json:
        print_json({r.addr: (config_view(r.value, classes) if r.ok else {"error": r.error}) for r in results})
    else:
        for r in results:
            out.print(f"============{r.addr}============")
            if not r.ok:
                out.print(r.error, style="red")
                continue
            black_list = r.value.get("configBlackList", "")
            for k, v in r.value.items():
                suffix = f"  [{key_class(k, black_list)}]" if classes else ""
                out.print(f"{k:<50}=  {v}{suffix}")
    if not all(r.ok for r in results):
        raise typer.Exit(1)


@app.command("updateNamesrvConfig", help="Change one setting on every NameServer.")
def update_namesrv_config(
    key: str = typer.Option(..., "-k", "--key", help="Config key."),
    value: str = typer.Option(..., "-v", "--value", help="New value."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(client_for(namesrv, timeout).update_namesrv_config, key, value)
    per_server(results, f"update name server config success! [{{addr}}] {key} : {value}", "{error}", as_json)


broker_cli.register(app)
broker_admin_cli.register(app)

WatchTopicsOpt = typer.Option(None, "-t", "--topic", help="Topics to show (repeatable; default: the first 20).")


@app.command("watch", help="Live view of brokers and routes as each NameServer sees them; disagreements marked.")
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
             f"(default {watch.SUSPECT_AFTER:g} s, or half its heartbeat timeout if shorter)."),
) -> None:
    client = client_for(namesrv, timeout)
    if once or as_json:
        snap = run(watch.snapshot, client, topics, watch.MAX_TOPICS, suspect_after)
        if as_json:
            print_json(snap)
        else:
            out.print(watch.view(snap, out))
        if snap["errors"]:  # a health check: every NameServer must answer
            silent = ", ".join(snap["errors"])
            fail(f"{len(snap['errors'])} of {len(snap['namesrvs'])} NameServer(s) did not answer: {silent}")
        return
    with interruptible():
        trio.run(lambda: watch.live(client, topics, current_console(), interval=interval, count=count,
                                    suspect_after=suspect_after))


runner_cli.register(app)

app.add_typer(scenario_cli.app, name="scenario")
fanout_cli.register(app)


def main(argv: list[str]) -> int:
    """Run one mqadmin command line; returns the exit status (``--debug``: tracebacks are not hidden)."""
    debug = "--debug" in argv
    full_summaries(app)
    argv = _bare_group_help([a for a in argv if a != "--debug"])
    return run_app(app, "mqadmin", argv, (AdminError, cluster.ClusterError), debug=debug)


def _bare_group_help(argv: list[str]) -> list[str]:
    """``mqadmin`` or ``mqadmin scenario`` alone print their help (exit 0), as Apache's mqadmin lists its commands."""
    group: Any = typer.main.get_command(app)
    for word in argv:
        group = getattr(group, "commands", {}).get(word)
        if group is None:
            return argv
    return [*argv, "-h"] if hasattr(group, "commands") else argv


def entry() -> None:
    sys.exit(main(sys.argv[1:]))

