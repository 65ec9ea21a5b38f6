"""The local cluster's commands (ours; Apache has none): start, status, stop, killBroker, restartBroker,
killNamesrv, restartNamesrv, logs. The processes are run by :mod:`mqadmin.localcluster`."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Group
from rich.text import Text

from faultproxy.client import FaultProxyError
from mqadmin.client import AdminClient, run
from mqadmin.client.errors import AdminError
from mqadmin.commands.options import JsonOpt, bad_option, state_dir_option
from mqadmin.commands.results import fail, self_command
from mqadmin.localcluster import faultpaths, java, processes, prometheus_sd
from mqadmin.localcluster.certs import cert_path
from mqadmin.localcluster.state import STATE_FILE, ClusterError, ClusterState, Proc, default_dir, proc_state
from mqadmin.output.console import make_console, out, print_json
from mqadmin.output.tables import Col, fit_table
from mqadmin.rocketmq.artifacts import ArtifactError
from mqadmin.rocketmq.servers import Sizing

DirOpt = typer.Option(None, "--dir", help="State directory of the local cluster (default ~/.local/state/mqadmin/cluster).")
SIGNALS = {"KILL": signal.SIGKILL, "TERM": signal.SIGTERM, "STOP": signal.SIGSTOP, "CONT": signal.SIGCONT}


def _dir(directory: Path | None) -> Path:
    return directory if directory is not None else default_dir()


def _role(p: Proc) -> str:
    if p.kind != "broker":
        return "fault proxy" if p.kind == "faultproxy" else p.kind  # namesrv, proxy
    return "master" if p.broker_id == 0 else f"slave {p.broker_id}"


def status_table(state: ClusterState) -> Any:
    rows = []
    for p in state.procs:
        st = proc_state(p)
        style = "green" if st == "running" else "yellow" if st.startswith("paused") else "red"
        rows.append([p.name, _role(p), p.label, p.addr, p.vip_addr or "", str(p.pid), Text(st, style=style)])
    cols = [Col("#Process"), Col("#Role"), Col("#Impl"), Col("#Addr"), Col("#VIP Addr", 2), Col("#PID", 1),
            Col("#State")]
    return fit_table(cols, rows, title=f"cluster {state.cluster} in {state.dir}")


def _live_paths(state: ClusterState) -> dict[str, dict[str, Any]] | None:
    """The fault proxy's paths as it serves them now; None when it does not answer."""
    proxy = state.fault_proxy
    if proxy is None or not proxy.alive():
        return None
    try:
        return faultpaths.client(state, timeout=2.0).paths()
    except (FaultProxyError, ClusterError):
        return None


def paths_table(state: ClusterState, live: dict[str, dict[str, Any]] | None) -> Any:
    """Each path of the fault proxy: where it listens, where it leads, and its faults now."""
    rows = [[name, listen, upstream, Text(faults, style="green" if faults == "-" else "red"), conns]
            for name, listen, upstream, faults, conns in faultpaths.path_rows(state.paths, live)]
    where = "" if live is not None else " (not answering: faults unknown)"
    return fit_table([Col("#Path"), Col("#Listen"), Col("#Upstream"), Col("#Faults", wrap=True), Col("#Conns", 1)],
                     rows, title=f"fault proxy paths{where}")


def _metrics_url(p: Proc) -> str | None:
    return f"http://127.0.0.1:{p.metrics_port}/metrics" if p.metrics_port else None


def state_json(state: ClusterState) -> dict[str, Any]:
    """The documented shape of ``start --json`` and ``status --json``."""
    return {
        "dir": state.dir, "cluster": state.cluster, "namesrvAddr": state.namesrv_addr, "topics": state.topics,
        "auth": state.auth, "tls": state.tls,
        "procs": [{"name": p.name, "kind": p.kind, "role": _role(p), "impl": p.label.split(" ")[0],
                   "version": p.version, "brokerName": p.broker_name, "brokerId": p.broker_id, "addr": p.addr,
                   "vipAddr": p.vip_addr, "pid": p.pid, "state": proc_state(p),
                   "log": p.log, "config": p.config, "metricsUrl": _metrics_url(p)} for p in state.procs],
        "prometheusConfig": str(prometheus_sd.config_path(state.dir)) if state.metrics else None,
        "faultProxy": _proxy_json(state),
        "grpcEndpoint": next((p.addr for p in state.procs if p.kind == "proxy"), None),
    }


def _proxy_json(state: ClusterState) -> dict[str, Any] | None:
    if state.fault_proxy is None:
        return None
    live = _live_paths(state)
    return {"control": state.fault_proxy.addr, "answering": live is not None,
            "paths": [{"name": p.name, "broker": p.broker, "namesrv": p.namesrv, "listen": p.listen,
                       "upstream": p.upstream, "enabled": live[p.name]["enabled"] if live and p.name in live else None,
                       "toxics": live[p.name]["toxics"] if live and p.name in live else None}
                      for p in state.paths]}


def start_cmd(
    namesrvs: int = typer.Option(2, "--namesrvs", min=1, max=16, help="NameServer processes."),
    brokers: int = typer.Option(2, "--brokers", min=0, max=26, help="Broker groups (broker-a, broker-b, ...)."),
    slaves: int = typer.Option(0, "--slaves", min=0, max=4, help="Slaves per broker group (brokerId 1..S)."),
    topics: str | None = typer.Option(None, "--topics", metavar="A,B", help="Topics to create on every master."),
    topic_queues: int = typer.Option(8, "--topic-queues", min=1, max=1024, help="Read/write queues of --topics."),
    cluster_name: str = typer.Option("DefaultCluster", "--cluster", help="Cluster name."),
    register_period: int = typer.Option(30000, "--register-period", min=100, help="Broker registration period, ms."),
    broker_timeout: int = typer.Option(120000, "--broker-timeout", min=100,
                                       help="NameServer brokerChannelExpiredTime: silence after which a broker is dropped, ms."),
    scan_interval: int = typer.Option(5000, "--scan-interval", min=10,
                                      help="NameServer scanNotActiveBrokerInterval: how often silence is checked, ms."),
    auth: bool = typer.Option(False, "--auth", help="Accounts on every process (aclEnable=true), keys generated into "
                              "<dir>/conf; mqadmin commands to this cluster sign with its admin keys."),
    tls: bool = typer.Option(False, "--tls", help="TLS on every process in enforcing mode (no plaintext), with a "
                             "certificate generated into <dir>/conf/tls; mqadmin commands to this cluster trust it."),
    metrics: bool = typer.Option(False, "--metrics",
                                 help="Serve /metrics on every process (each its own port) and write a prometheus.yml."),
    namesrv_impl: str = typer.Option("toolkit", "--namesrv-impl", metavar="IMPL[,IMPL...]",
                                     help="toolkit (ours) or java:VERSION (Apache's, e.g. java:5.5.0): one for "
                                          "every NameServer, or one each in order (toolkit,java:5.5.0)."),
    broker_impl: str = typer.Option("stub", "--broker-impl", metavar="IMPL[,IMPL...]",
                                    help="stub (ours) or java:VERSION (Apache's, e.g. java:5.3.3): one for every "
                                         "broker group, or one each in order; slaves run their master's."),
    java_opts: list[str] | None = typer.Option(None, "--java-opt", metavar="OPT",
                                               help="Another JVM option for every Java process (repeatable; "
                                                    "e.g. --java-opt=-Xmx512m overrides the runner's heap)."),
    broker_props: list[str] | None = typer.Option(None, "--broker-prop", metavar="KEY=VALUE",
                                                  help="Another broker.properties key for every broker (repeatable; "
                                                       "e.g. mappedFileSizeCommitLog=1073741824)."),
    reuse: bool = typer.Option(False, "--reuse", help="If the local cluster in --dir is already running, say so and "
                               "exit 0 instead of failing (make run twice); nothing is started or changed."),
    fault_proxy: bool = typer.Option(True, "--fault-proxy/--no-fault-proxy",
                                     help="Route every broker->NameServer connection through a fault proxy (for "
                                          "networkFault and brokerFault --partition); off: brokers dial NameServers."),
    client_proxy: bool = typer.Option(False, "--client-proxy", help="Brokers register the proxy's address "
                                      "(127.0.0.2:PORT), so clients reach them through it too (networkFault --clients)."),
    proxy: str | None = typer.Option(None, "--proxy", metavar="VERSION",
                                     help="Also start Apache's RocketMQ Proxy of this version (e.g. 5.3.3, from Maven "
                                     "Central, cached) in cluster mode: the gRPC endpoint of RocketMQ 5 clients."),
    directory: Path | None = DirOpt,
    as_json: bool = JsonOpt,
) -> None:
    if reuse and _already_running(_dir(directory), as_json):
        return
    topic_list = tuple(t.strip() for t in (topics or "").split(",") if t.strip())
    opts = processes.StartOptions(
        namesrvs=namesrvs, brokers=brokers, slaves=slaves, cluster=cluster_name, register_period_ms=register_period,
        broker_expired_ms=broker_timeout, scan_interval_ms=scan_interval, topics=topic_list, topic_queues=topic_queues,
        auth=auth, tls=tls, metrics=metrics, namesrv_impl=namesrv_impl, broker_impl=broker_impl,
        broker_props=_key_values("--broker-prop", broker_props or []),
        java_sizing=Sizing(java_opts=tuple(java_opts or ())), fault_proxy=fault_proxy, client_proxy=client_proxy,
        proxy=proxy,
    )
    try:
        processes.validate_options(opts)
    except ClusterError as exc:
        raise typer.BadParameter(str(exc)) from None  # the message names the option
    where = state_dir_option(directory)
    try:
        with _progress(bool(opts.java_versions())) as (say, detail):
            java.resolve(opts.java_versions(), say, detail)  # first use: Maven, with progress; then the cache
            state = processes.start(where, opts, say)
    except ArtifactError as exc:
        fail(str(exc), 2)
    if as_json:
        print_json(state_json(state))
        return
    out.print(summary(state, directory))


def _key_values(option: str, items: list[str]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip() or not key.strip().replace("_", "a").replace(".", "a").isalnum() or "\n" in value:
            raise bad_option(option, f"{item!r} is not KEY=VALUE (a properties key and a one-line value)")
        pairs.append((key.strip(), value.strip()))
    return tuple(pairs)


@contextmanager
def _progress(java_roles: bool) -> Iterator[tuple[java.Progress, java.Progress | None]]:
    """(a line to say on stderr, a passing detail): with Java roles on a terminal, a status line shows
    each jar Maven downloads on first use and then that the JVMs are starting."""
    console = make_console(stderr=True)

    def say(line: str) -> None:
        console.print(line, highlight=False)

    if not (java_roles and console.is_terminal):
        yield say, None
        return
    with console.status("starting the Java processes ...") as status:
        yield say, lambda line: status.update(line)


def _already_running(where: Path, as_json: bool) -> bool:
    """``start --reuse``: whether a whole cluster runs in ``where`` already (said on stdout); a cluster only
    partly running is an error naming what is down, since reusing it would hide that."""
    if not (where / STATE_FILE).exists():
        return False
    state = ClusterState.load(where)
    states = {p.name: proc_state(p) for p in state.procs}
    if not any(p.alive() for p in state.procs):
        return False  # stopped (or crashed) whole: start it again
    down = [f"{name} ({st})" for name, st in states.items() if st != "running"]
    if down:
        raise ClusterError(f"the local cluster in {where} is only partly running ({', '.join(down)} not running): "
                           f"{self_command()} stop, then start it again")
    if as_json:
        print_json(state_json(state))
    else:
        out.print(f"the local cluster in {where} is already running ({len(state.namesrvs)} NameServer(s), "
                  f"{len(state.brokers)} broker(s)): nothing started; {self_command()} status shows it")
        out.print(f"export NAMESRV_ADDR='{state.namesrv_addr}'")
    return True


def summary(state: ClusterState, directory: Path | None) -> Group:
    """The table of processes and what to type next."""
    masters = sum(1 for p in state.brokers if p.broker_id == 0)
    slaves = len(state.brokers) - masters
    topics = ", ".join(["TBW102", *state.topics]) if state.brokers else "none (no brokers)"
    dir_opt = "" if directory is None else f" --dir {state.dir}"
    if state.brokers:
        up = (f"cluster {state.cluster} is up: {len(state.namesrvs)} NameServer(s), {masters} master(s), "
              f"{slaves} slave(s); topics: {topics}")
    else:  # --brokers 0: NameServers alone route nothing; say what was started, not that a cluster "is up"
        up = (f"started {len(state.namesrvs)} NameServer(s) and no broker (--brokers 0): nothing is routable "
              "until brokers register with them")
    lines = [
        Text(up, style="bold green"),
        Text(f"export NAMESRV_ADDR='{state.namesrv_addr}'"),
    ]
    if state.auth:
        lines.append(Text(f"accounts: {Path(state.dir) / 'conf' / 'plain_acl.yml'} (localAdmin signs mqadmin's and the "
                          "brokers' requests, localUser is for applications)"))
        if directory is not None:  # elsewhere than the default, commands find the keys through ROCKETMQ_HOME
            lines.append(Text(f"export ROCKETMQ_HOME='{state.dir}'  # its conf/tools.yml: mqadmin (ours and Java's) signs"))
    if state.tls:
        cert = cert_path(Path(state.dir))
        lines.append(Text(f"TLS only (enforcing); certificate: {cert} (other clients: --tls-trust-cert {cert})"))
    hint = "" if directory is None else "  (with NAMESRV_ADDR set)"
    me = self_command()
    # Commands apart, never joined by | or ; -- a pasted line must not run killBroker along with the rest.
    if state.brokers:
        first = state.brokers[0].broker_name or "broker-a"
        lines.append(Text(f"try:  {me} clusterList,  {me} topicRoute -t TBW102,  {me} killBroker -b {first}{dir_opt}"
                          f"{hint}"))
    else:  # no broker to route or kill
        lines.append(Text(f"try:  {me} clusterList,  {me} getNamesrvConfig{hint}"))
    for p in state.procs:
        if p.kind == "proxy":
            lines.append(Text(f"RocketMQ 5 clients (gRPC, Apache's Proxy): endpoints {p.addr}"))
    lines.append(Text(f"stop: {me} stop{dir_opt}"))
    if state.metrics:
        lines.append(Text("metrics: " + "  ".join(f"{p.name} {_metrics_url(p)}" for p in state.procs if p.metrics_port)))
        lines.append(Text(f"watch:   {prometheus_sd.prometheus_command(state.dir)}   (then http://127.0.0.1:9090)"))
    return Group(status_table(state), *lines)


def status_cmd(directory: Path | None = DirOpt, as_json: bool = JsonOpt) -> None:
    """A health check too: exit 1, with one line on stderr naming them, when any process is not running
    (stopped, or paused with SIGSTOP)."""
    state = ClusterState.load(_dir(directory))
    if as_json:
        print_json(state_json(state))
    else:
        out.print(status_table(state))
        if state.paths:
            out.print(paths_table(state, _live_paths(state)))
        out.print(f"export NAMESRV_ADDR='{state.namesrv_addr}'")
    down = [f"{p.name} ({st})" for p in state.procs if (st := proc_state(p)) != "running"]
    if down:
        again = f" ({self_command()} start starts it again)" if len(down) == len(state.procs) else ""
        fail(f"{len(down)} of {len(state.procs)} processes of the local cluster are not running: "
             f"{', '.join(down)}{again}")


def stop_cmd(directory: Path | None = DirOpt) -> None:
    """Idempotent: with nothing running (never started, or stopped already) it says so and exits 0,
    so that ``make stop`` twice is not an error."""
    where = _dir(directory)
    if not (where / STATE_FILE).exists():
        out.print(f"nothing is running: no local cluster in {where}")
        return
    state = ClusterState.load(where)
    running = [p for p in state.procs if p.alive()]
    if not running:
        processes.stop_cluster(state)  # forgets the cluster
        out.print(f"nothing is running: every process of the cluster in {where} had stopped already")
        return
    forced, left = processes.stop_cluster(state)
    if left:
        raise ClusterError(f"could not stop {', '.join(left)} (state kept in {state.dir})")
    out.print(f"stopped {len(running)} processes" + (f" (forced: {', '.join(forced)})" if forced else ""))


def _signal(value: str) -> signal.Signals:
    sig = SIGNALS.get(value.strip().upper().removeprefix("SIG"))
    if sig is None:
        raise bad_option("--signal", f"unknown signal {value!r}: use KILL, TERM, STOP or CONT")
    return sig


def _sent(p: Proc, signum: signal.Signals) -> None:
    out.print(f"sent SIG{signum.name.removeprefix('SIG')} to {p.name} ({p.label}, pid {p.pid}, {p.addr}): "
              f"{proc_state(p)}")


def kill_broker(
    broker: str = typer.Option(..., "-b", "--brokerName", help="Broker group name (broker-a, ...)."),
    broker_id: int | None = typer.Option(None, "--id", help="Only this broker id (default: all of the group)."),
    sig: str = typer.Option("KILL", "--signal", help="KILL (crash), TERM (graceful), STOP (hang) or CONT (resume)."),
    directory: Path | None = DirOpt,
) -> None:
    signum = _signal(sig)
    state = ClusterState.load(_dir(directory))
    for p in state.find_broker(broker, broker_id):
        processes.signal_proc(p, signum)
        _sent(p, signum)


def restart_broker(
    broker: str = typer.Option(..., "-b", "--brokerName", help="Broker group name."),
    broker_id: int | None = typer.Option(None, "--id", help="Only this broker id (default: all of the group)."),
    directory: Path | None = DirOpt,
) -> None:
    state = ClusterState.load(_dir(directory))
    for p in state.find_broker(broker, broker_id):
        processes.restart(p, state)
        state.save()
        out.print(f"restarted {p.name} ({p.label}, pid {p.pid}, {p.addr})")


def _namesrv(state: ClusterState, index: int) -> Proc:
    if not 0 <= index < len(state.namesrvs):
        raise AdminError(f"no NameServer {index}: the cluster has {len(state.namesrvs)} (0-{len(state.namesrvs) - 1})")
    return state.namesrvs[index]


def kill_namesrv(
    index: int = typer.Option(0, "-i", "--index", help="Which NameServer (0-based, see status)."),
    sig: str = typer.Option("KILL", "--signal", help="KILL, TERM, STOP or CONT."),
    directory: Path | None = DirOpt,
) -> None:
    signum = _signal(sig)
    state = ClusterState.load(_dir(directory))
    p = _namesrv(state, index)
    processes.signal_proc(p, signum)
    _sent(p, signum)


def restart_namesrv(
    index: int = typer.Option(0, "-i", "--index", help="Which NameServer (0-based)."),
    directory: Path | None = DirOpt,
) -> None:
    state = ClusterState.load(_dir(directory))
    p = _namesrv(state, index)
    processes.restart(p, state)
    state.save()
    note = ("a Java NameServer starts with no routes: each broker is routed again when it next registers"
            if p.java else _restored_note(p.addr))
    out.print(f"restarted {p.name} ({p.label}, pid {p.pid}, {p.addr}): {note}")


def _restored_note(addr: str) -> str:
    """What the restarted NameServer routes at once: its warm restart's brokers (code 9002), or none."""
    (answer,) = run(AdminClient([addr]).warm_restarts)
    if not answer.ok:
        return f"cannot tell which routes it restored ({answer.error})"
    restore = answer.value["restore"]
    if restore is None:
        return "no routes restored (no recent route snapshot): each broker is routed again when it next registers"
    return (f"{restore['brokers']} broker(s) and {restore['topics']} topic(s) restored from its route snapshot, "
            "routed at once (provisional until each broker registers again)")


def logs_cmd(
    name: str | None = typer.Argument(None, help="Process name (see status); default: all."),
    lines: int = typer.Option(20, "-l", "--lines", min=1, help="Lines from the end of each log."),
    directory: Path | None = DirOpt,
    as_json: bool = JsonOpt,
) -> None:
    state = ClusterState.load(_dir(directory))
    procs = [p for p in state.procs if name is None or p.name == name]
    if not procs:
        known = ", ".join(p.name for p in state.procs)
        raise AdminError(f"no process named {name} (processes: {known})")
    tails = {p.name: (p.log, processes.log_tail(Path(p.log), lines)) for p in procs}
    java_logs = {p.name: str(java.java_log_dir(p)) for p in procs if p.java}
    if as_json:
        print_json({"logs": {n: {"path": path, "lines": text, "javaLogs": java_logs.get(n)}
                             for n, (path, text) in tails.items()}})
        return
    for n, (path, text) in tails.items():
        more = f"; Java's own logs in {java_logs[n]}" if n in java_logs else ""
        out.print(f"==> {n} ({path}{more}) <==", style="bold")
        for line in text:
            out.print(line)


def register(app: typer.Typer) -> None:
    app.command("start", help="Start a local cluster of NameServers and broker stubs on 127.0.0.1; returns once routable.")(start_cmd)
    app.command("status", help="Show the local cluster's processes.")(status_cmd)
    app.command("stop", help="Stop every process of the local cluster (graceful, then forced).")(stop_cmd)
    app.command("killBroker", help="Send a signal to a broker's processes (default KILL: a crash).")(kill_broker)
    app.command("restartBroker", help="Restart a broker's processes on their previous ports.")(restart_broker)
    app.command("killNamesrv", help="Send a signal to one NameServer (default KILL).")(kill_namesrv)
    app.command("restartNamesrv", help="Restart one NameServer on its previous port; it answers routes at once from its route snapshot (warm restart).")(restart_namesrv)
    app.command("logs", help="Print the last lines of a process's log.")(logs_cmd)
