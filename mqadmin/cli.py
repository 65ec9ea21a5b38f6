"""``mqadmin``: Apache RocketMQ's admin commands, with Rich output and --json.

Thin by design: each command resolves the NameServer addresses, calls one
:mod:`mqadmin.client` function and renders the result.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from mqadmin import cluster, fanout_cli, scenario_cli, watch
from mqadmin.client import AdminClient, AdminError, PerServer, namesrv_from_env, run, split_addrs
from remoting.bodies import TopicRouteData
from remoting.climain import run_app

app = typer.Typer(
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="RocketMQ admin commands (Apache mqadmin names and options) for NameServers and brokers.",
)
out = Console(highlight=False, markup=False, soft_wrap=True)

NamesrvOpt = typer.Option(None, "-n", "--namesrvAddr", metavar="ADDR", help="NameServer(s), 'host:port;host:port' (default: $NAMESRV_ADDR).")
JsonOpt = typer.Option(False, "--json", help="Print JSON instead of a table.")
TimeoutOpt = typer.Option(3.0, "--timeout", help="Seconds to wait for each server.")


def _client(namesrv: Optional[str], timeout: float) -> AdminClient:
    """-n, else $NAMESRV_ADDR, else the running local cluster."""
    addrs = split_addrs(namesrv) if namesrv else namesrv_from_env()
    if not addrs:
        try:
            state = cluster.ClusterState.load(cluster.default_dir())
        except cluster.ClusterError:
            state = None
        running = [p.addr for p in state.namesrvs if p.alive()] if state else []
        if not running:
            raise AdminError("no NameServer address: give -n host:port, set NAMESRV_ADDR or run mqadmin start")
        addrs = running
    return AdminClient(addrs, timeout=timeout)


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=False) + "\n")


def _per_server(results: list[PerServer], ok_line: str, fail_line: str) -> None:
    """One line per NameServer; exit 1 if any failed."""
    for r in results:
        if r.ok:
            out.print(ok_line.format(addr=r.addr, value=r.value))
        else:
            out.print(fail_line.format(addr=r.addr, error=r.error), style="red")
    if not all(r.ok for r in results):
        raise typer.Exit(1)


def route_json(route: TopicRouteData) -> dict[str, Any]:
    """The documented --json shape of a route (standard JSON, string ids)."""
    obj = route.to_obj()
    for bd in obj["brokerDatas"]:
        bd["brokerAddrs"] = {str(k): v for k, v in bd["brokerAddrs"].items()}
    return obj


@app.command("topicRoute", help="Show a topic's route: brokers, addresses, queues.")
def topic_route(
    topic: str = typer.Option(..., "-t", "--topic", help="Topic name."),
    list_format: bool = typer.Option(False, "-l", "--list", help="One row per broker."),
    namesrv: Optional[str] = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    route = run(_client(namesrv, timeout).topic_route, topic)
    if as_json or not list_format:
        _print_json(route_json(route))
        return
    queues = {q.broker_name: q for q in route.queue_datas}
    table = Table("#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
    total_r = total_w = 0
    for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
        q = queues.get(bd.broker_name)
        r, w = (q.read_queue_nums, q.write_queue_nums) if q else (0, 0)
        total_r, total_w = total_r + r, total_w + w
        addrs = "{" + ", ".join(f"{k}={v}" for k, v in sorted(bd.broker_addrs.items())) + "}"
        table.add_row(bd.cluster, bd.broker_name, addrs, str(r), str(w), str(q.perm) if q else "-")
    table.add_section()
    table.add_row("Total:", str(len(route.broker_datas)), "", str(total_r), str(total_w), "")
    out.print(table)


@app.command("topicList", help="List every topic the NameServer knows.")
def topic_list(namesrv: Optional[str] = NamesrvOpt, as_json: bool = JsonOpt, timeout: float = TimeoutOpt) -> None:
    topics = sorted(run(_client(namesrv, timeout).topic_list))
    if as_json:
        _print_json({"topicList": topics})
    else:
        for t in topics:
            out.print(t)


@app.command("clusterList", help="List clusters and brokers, with each broker's runtime stats.")
def cluster_list(
    cluster: Optional[str] = typer.Option(None, "-c", "--clusterName", help="Only this cluster."),
    namesrv: Optional[str] = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    client = _client(namesrv, timeout)
    rows = run(_cluster_rows, client, cluster)
    if as_json:
        _print_json({"brokers": rows})
        return
    table = Table("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS", "#OutTPS", "#Status")
    for r in rows:
        status = Text("OK", style="green") if r["reachable"] else Text(str(r["error"]), style="red")
        table.add_row(
            r["cluster"], r["brokerName"], str(r["brokerId"]), r["addr"],
            r["version"] or "-", r["inTps"] or "-", r["outTps"] or "-", status,
        )
    out.print(table)


async def _cluster_rows(client: AdminClient, only: str | None) -> list[dict[str, Any]]:
    import trio

    info = await client.cluster_info()
    if only is not None and only not in info.cluster_addr_table:
        raise AdminError(f"cluster {only} is not known to the NameServer")
    rows: list[dict[str, Any]] = []
    for cluster_name in sorted(info.cluster_addr_table):
        if only is not None and cluster_name != only:
            continue
        for name in sorted(info.cluster_addr_table[cluster_name]):
            bd = info.broker_addr_table.get(name)
            for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                rows.append({"cluster": cluster_name, "brokerName": name, "brokerId": bid, "addr": addr,
                             "reachable": False, "error": None, "version": None, "inTps": None, "outTps": None})

    async def fill(row: dict[str, Any]) -> None:
        try:
            kv = await client.broker_runtime_info(row["addr"])
        except AdminError as exc:
            row["error"] = str(exc).split(": ", 1)[-1]
            return
        row.update(reachable=True, version=kv.get("brokerVersionDesc"),
                   inTps=(kv.get("putTps") or "").split(" ")[0] or None,
                   outTps=(kv.get("getTransferredTps") or kv.get("getTransferedTps") or "").split(" ")[0] or None)

    async with trio.open_nursery() as nursery:
        for row in rows:
            nursery.start_soon(fill, row)
    return rows


@app.command("updateKvConfig", help="Create or update a KV config entry on every NameServer.")
def update_kv(
    namespace: str = typer.Option(..., "-s", "--namespace"),
    key: str = typer.Option(..., "-k", "--key"),
    value: str = typer.Option(..., "-v", "--value"),
    namesrv: Optional[str] = NamesrvOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(_client(namesrv, timeout).put_kv, namespace, key, value)
    _per_server(results, "create or update kv config to namespace success. [{addr}]", "{error}")


@app.command("deleteKvConfig", help="Delete a KV config entry on every NameServer.")
def delete_kv(
    namespace: str = typer.Option(..., "-s", "--namespace"),
    key: str = typer.Option(..., "-k", "--key"),
    namesrv: Optional[str] = NamesrvOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(_client(namesrv, timeout).delete_kv, namespace, key)
    _per_server(results, "delete kv config from namespace success. [{addr}]", "{error}")


@app.command("getKvConfig", help="Show one KV config value, or a whole namespace.")
def get_kv(
    namespace: str = typer.Option(..., "-s", "--namespace"),
    key: Optional[str] = typer.Option(None, "-k", "--key"),
    namesrv: Optional[str] = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    client = _client(namesrv, timeout)
    table = {key: run(client.get_kv, namespace, key)} if key is not None else run(client.kv_list, namespace)
    if as_json:
        _print_json({"namespace": namespace, "table": table})
        return
    grid = Table("#Key", "#Value", title=f"namespace {namespace}")
    for k, v in sorted(table.items()):
        grid.add_row(k, v)
    out.print(grid)


@app.command("wipeWritePerm", help="Remove write permission of a broker's topics on every NameServer.")
def wipe_write_perm(
    broker: str = typer.Option(..., "-b", "--brokerName"),
    namesrv: Optional[str] = NamesrvOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(_client(namesrv, timeout).wipe_write_perm, broker)
    _per_server(
        results,
        f"wipe write perm of broker[{broker}] in name server[{{addr}}] OK, {{value}}",
        f"wipe write perm of broker[{broker}] in name server[{{addr}}] Failed: {{error}}",
    )


@app.command("addWritePerm", help="Restore write permission of a broker's topics on every NameServer.")
def add_write_perm(
    broker: str = typer.Option(..., "-b", "--brokerName"),
    namesrv: Optional[str] = NamesrvOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(_client(namesrv, timeout).add_write_perm, broker)
    _per_server(
        results,
        f"add write perm of broker[{broker}] in name server[{{addr}}] OK, {{value}}",
        f"add write perm of broker[{broker}] in name server[{{addr}}] Failed: {{error}}",
    )


@app.command("getNamesrvConfig", help="Show every NameServer's configuration.")
def get_namesrv_config(namesrv: Optional[str] = NamesrvOpt, as_json: bool = JsonOpt, timeout: float = TimeoutOpt) -> None:
    results = run(_client(namesrv, timeout).namesrv_configs)
    if as_json:
        _print_json({r.addr: (r.value if r.ok else {"error": r.error}) for r in results})
    else:
        for r in results:
            out.print(f"============{r.addr}============")
            if not r.ok:
                out.print(r.error, style="red")
                continue
            for k, v in r.value.items():
                out.print(f"{k:<50}=  {v}")
    if not all(r.ok for r in results):
        raise typer.Exit(1)


@app.command("updateNamesrvConfig", help="Change one setting on every NameServer.")
def update_namesrv_config(
    key: str = typer.Option(..., "-k", "--key"),
    value: str = typer.Option(..., "-v", "--value"),
    namesrv: Optional[str] = NamesrvOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(_client(namesrv, timeout).update_namesrv_config, key, value)
    _per_server(results, f"update name server config success! [{{addr}}] {key} : {value}", "{error}")




@app.command("watch", help="Live view of brokers and routes as each NameServer sees them; disagreements highlighted.")
def watch_cmd(
    topics: Optional[list[str]] = typer.Option(None, "-t", "--topic", help="Topics to show (repeatable; default: the first 20)."),
    interval: float = typer.Option(1.0, "--interval", help="Seconds between refreshes."),
    once: bool = typer.Option(False, "--once", help="Print one snapshot and exit."),
    namesrv: Optional[str] = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = typer.Option(1.0, "--timeout"),
) -> None:
    client = _client(namesrv, timeout)
    if once or as_json:
        snap = run(watch.snapshot, client, topics)
        if as_json:
            _print_json(snap)
        else:
            out.print(_watch_view(snap))
        return
    from rich.live import Live

    try:
        with Live(_watch_view(run(watch.snapshot, client, topics)), console=out, auto_refresh=False) as live:
            while True:
                time.sleep(interval)
                live.update(_watch_view(run(watch.snapshot, client, topics)), refresh=True)
    except KeyboardInterrupt:
        pass


def _watch_view(snap: dict[str, Any]) -> Group:
    addrs = snap["namesrvs"]
    brokers = Table("#Broker", "#ID", "#Addr", *[f"@{a}" for a in addrs], title=time.strftime("brokers  %H:%M:%S"))
    for row in snap["brokers"]:
        cells = [Text("?", style="yellow") if v is None else Text("alive", style="green") if v else Text("absent", style="red")
                 for v in row["seenBy"].values()]
        brokers.add_row(row["broker"], str(row["id"]), row["addr"], *cells, style=None if row["agree"] else "bold")
    routes = Table("#Topic", *[f"@{a}" for a in addrs], title="routes (broker:perm:writeQueues)")
    for row in snap["topics"]:
        cells = [Text("no answer", style="yellow") if v is None else Text(" ".join(v) or "no route", style="" if row["agree"] else "bold red")
                 for v in row["routes"].values()]
        routes.add_row(Text(row["topic"], style="" if row["agree"] else "bold red"), *cells)
    parts: list[Any] = [brokers, routes]
    for addr, error in snap["errors"].items():
        parts.append(Text(f"{addr}: {error}", style="yellow"))
    return Group(*parts)


# ---------------------------------------------------------------------------
# local cluster runner

DirOpt = typer.Option(None, "--dir", help="State directory of the local cluster (default ~/.local/state/mqadmin/cluster).")


def _dir(directory: Optional[Path]) -> Path:
    return directory if directory is not None else cluster.default_dir()


def _status_table(state: cluster.ClusterState) -> Table:
    table = Table("#Process", "#Role", "#Addr", "#PID", "#State", title=f"local cluster in {state.dir}")
    for p in state.procs:
        role = "namesrv" if p.kind == "namesrv" else ("master" if p.broker_id == 0 else f"slave {p.broker_id}")
        st = _proc_state(p)
        table.add_row(p.name, role, p.addr, str(p.pid), Text(st, style="green" if st == "running" else "red"))
    return table


def _proc_state(p: cluster.Proc) -> str:
    if not p.alive():
        return "stopped"
    try:
        with open(f"/proc/{p.pid}/stat") as fh:
            return "paused (SIGSTOP)" if fh.read().rsplit(")", 1)[1].split()[0] == "T" else "running"
    except OSError:
        return "running"


async def _wait_routable(state: cluster.ClusterState, timeout: float) -> None:
    """Until every NameServer routes TBW102 to every master."""
    import trio

    masters = {p.broker_name for p in state.brokers if p.broker_id == 0}
    if not masters:
        return
    client = AdminClient([p.addr for p in state.namesrvs], timeout=1.0)
    with trio.move_on_after(timeout):
        while True:
            results = await client.topic_routes_everywhere("TBW102")
            if all(r.ok and {b.broker_name for b in r.value.broker_datas} >= masters for r in results):
                return
            await trio.sleep(0.1)
    raise AdminError(f"brokers not routable on every NameServer after {timeout:g} s")


@app.command("start", help="Start a local cluster of NameServers and broker stubs on 127.0.0.1.")
def start_cmd(
    namesrvs: int = typer.Option(2, "--namesrvs", help="NameServer processes."),
    brokers: int = typer.Option(2, "--brokers", help="Broker groups (broker-a, broker-b, ...)."),
    slaves: int = typer.Option(0, "--slaves", help="Slaves per broker group."),
    cluster_name: str = typer.Option("DefaultCluster", "--cluster", help="Cluster name."),
    register_period: int = typer.Option(30000, "--register-period", help="Broker registration period, ms."),
    broker_timeout: int = typer.Option(120000, "--broker-timeout", help="NameServer heartbeat timeout for brokers, ms."),
    directory: Optional[Path] = DirOpt,
    as_json: bool = JsonOpt,
) -> None:
    opts = cluster.StartOptions(namesrvs, brokers, slaves, cluster_name, register_period, broker_timeout)
    state = cluster.start(_dir(directory), opts)
    try:
        run(_wait_routable, state, 15.0)
    except AdminError:
        cluster.stop_procs(state.procs)
        raise
    if as_json:
        _print_json({"dir": state.dir, "namesrvAddr": state.namesrv_addr, "procs": [vars(p) for p in state.procs]})
        return
    out.print(_status_table(state))
    out.print(f"export NAMESRV_ADDR='{state.namesrv_addr}'")


@app.command("status", help="Show the local cluster's processes.")
def status_cmd(directory: Optional[Path] = DirOpt, as_json: bool = JsonOpt) -> None:
    state = cluster.ClusterState.load(_dir(directory))
    if as_json:
        _print_json({"dir": state.dir, "namesrvAddr": state.namesrv_addr,
                     "procs": [dict(vars(p), state=_proc_state(p)) for p in state.procs]})
    else:
        out.print(_status_table(state))


@app.command("stop", help="Stop every process of the local cluster (graceful, then forced).")
def stop_cmd(directory: Optional[Path] = DirOpt) -> None:
    state = cluster.ClusterState.load(_dir(directory))
    brokers_first = state.brokers + state.namesrvs
    forced = cluster.stop_procs(state.brokers) + cluster.stop_procs(state.namesrvs)
    (Path(state.dir) / cluster.STATE_FILE).unlink(missing_ok=True)
    out.print(f"stopped {len(brokers_first)} processes" + (f" (forced: {', '.join(forced)})" if forced else ""))


SIGNALS = {"KILL": signal.SIGKILL, "TERM": signal.SIGTERM, "STOP": signal.SIGSTOP, "CONT": signal.SIGCONT}


def _signal(value: str) -> signal.Signals:
    sig = SIGNALS.get(value.upper().removeprefix("SIG"))
    if sig is None:
        raise AdminError(f"unknown signal {value!r}: use KILL, TERM, STOP or CONT")
    return sig


@app.command("killBroker", help="Send a signal to a broker's processes (default KILL: a crash).")
def kill_broker(
    broker: str = typer.Option(..., "-b", "--brokerName"),
    broker_id: Optional[int] = typer.Option(None, "--id", help="Only this broker id (default: all of the group)."),
    sig: str = typer.Option("KILL", "--signal", help="KILL, TERM, STOP (hang) or CONT (resume)."),
    directory: Optional[Path] = DirOpt,
) -> None:
    state = cluster.ClusterState.load(_dir(directory))
    signum = _signal(sig)
    for p in state.find_broker(broker, broker_id):
        cluster.signal_proc(p, signum)
        out.print(f"sent SIG{signum.name.removeprefix('SIG')} to {p.name} (pid {p.pid}, {p.addr})")


@app.command("restartBroker", help="Restart a broker's processes on their previous ports.")
def restart_broker(
    broker: str = typer.Option(..., "-b", "--brokerName"),
    broker_id: Optional[int] = typer.Option(None, "--id"),
    directory: Optional[Path] = DirOpt,
) -> None:
    state = cluster.ClusterState.load(_dir(directory))
    for p in state.find_broker(broker, broker_id):
        cluster.restart(p)
        state.save()
        out.print(f"restarted {p.name} (pid {p.pid}, {p.addr})")


def _namesrv(state: cluster.ClusterState, index: int) -> cluster.Proc:
    if not 0 <= index < len(state.namesrvs):
        raise AdminError(f"no NameServer {index}: the cluster has {len(state.namesrvs)} (0-{len(state.namesrvs) - 1})")
    return state.namesrvs[index]


@app.command("killNamesrv", help="Send a signal to one NameServer (default KILL).")
def kill_namesrv(
    index: int = typer.Option(0, "-i", "--index", help="Which NameServer (0-based)."),
    sig: str = typer.Option("KILL", "--signal"),
    directory: Optional[Path] = DirOpt,
) -> None:
    state = cluster.ClusterState.load(_dir(directory))
    p = _namesrv(state, index)
    signum = _signal(sig)
    cluster.signal_proc(p, signum)
    out.print(f"sent SIG{signum.name.removeprefix('SIG')} to {p.name} (pid {p.pid}, {p.addr})")


@app.command("restartNamesrv", help="Restart one NameServer on its previous port (its routes start empty).")
def restart_namesrv(
    index: int = typer.Option(0, "-i", "--index"),
    directory: Optional[Path] = DirOpt,
) -> None:
    state = cluster.ClusterState.load(_dir(directory))
    p = _namesrv(state, index)
    cluster.restart(p)
    state.save()
    out.print(f"restarted {p.name} (pid {p.pid}, {p.addr})")


@app.command("logs", help="Print the last lines of a process's log.")
def logs_cmd(
    name: Optional[str] = typer.Argument(None, help="Process name (see status); default: all."),
    lines: int = typer.Option(20, "-l", "--lines"),
    directory: Optional[Path] = DirOpt,
) -> None:
    state = cluster.ClusterState.load(_dir(directory))
    procs = [p for p in state.procs if name is None or p.name == name]
    if not procs:
        raise AdminError(f"no process named {name} (see mqadmin status)")
    for p in procs:
        out.print(f"==> {p.name} ({p.log}) <==", style="bold")
        try:
            text = Path(p.log).read_text(errors="replace").splitlines()[-lines:]
        except OSError as exc:
            text = [f"(cannot read: {exc})"]
        for line in text:
            out.print(line)


app.add_typer(scenario_cli.app, name="scenario")
fanout_cli.register(app)


def entry() -> None:
    debug = "--debug" in sys.argv
    argv = [a for a in sys.argv[1:] if a != "--debug"]
    sys.exit(run_app(app, "mqadmin", argv, (AdminError, cluster.ClusterError), debug=debug))
