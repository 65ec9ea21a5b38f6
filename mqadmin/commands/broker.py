"""Broker commands (Apache's tools/command/broker): brokerStatus, getBrokerConfig, updateBrokerConfig,
and ours, brokerFault (the broker stub's fault switchboard; its --partition and --heal go through the
local cluster's fault proxy for a broker behind it, see networkFault).
"""

from __future__ import annotations

import ipaddress
from typing import Any

import typer

from mqadmin.client import AdminClient, run
from mqadmin.client import broker_admin as ba
from mqadmin.client.broker import REJECT_CODES
from mqadmin.client.errors import AdminError, PerServer, code_name
from mqadmin.commands.options import (
    JsonOpt,
    NamesrvOpt,
    TimeoutOpt,
    addr_opt,
    bad_option,
    broker_addr_option,
    client_for,
    given_spelling,
    one_target,
)
from mqadmin.commands.results import exit_if_any_failed, only, per_server, print_failure
from mqadmin.localcluster.faultpaths import broker_partition
from mqadmin.localcluster.namesrvs import local_cluster_of
from mqadmin.localcluster.state import ClusterError, local_impls
from mqadmin.output.console import out, print_json
from mqadmin.output.tables import Col, fit_table


def broker_status(
    broker_addr: str | None = broker_addr_option("Broker address (host:port)."),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="Every broker (masters and slaves) of this cluster."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    one_target(broker_addr, cluster)
    if broker_addr is not None:
        results = run(AdminClient([], timeout=timeout).runtime_infos, [broker_addr])  # no NameServer needed
    else:
        client = client_for(namesrv, timeout)
        results = run(_cluster_runtime_infos, client, cluster)
    if as_json:
        print_json({"brokers": [{"addr": r.addr, "reachable": r.ok, "error": r.error,
                                 "table": dict(sorted(r.value.items())) if r.ok else None} for r in results]})
    else:  # Apache's lines, sorted by key (awk -F': ' reads them); with -c, each starts with its broker
        for r in results:
            if r.ok:
                for key, value in sorted(r.value.items()):
                    out.print(f"{key:<32}: {value}" if broker_addr is not None else f"{r.addr:<24} {key:<32}: {value}")
    if broker_addr is not None:
        only(results)  # the one broker named: its failure is the command's error (stderr)
    for r in results:
        if not r.ok:
            print_failure(r)  # one of a cluster's brokers: a result line like the others
    exit_if_any_failed(results)


async def _cluster_runtime_infos(client: AdminClient, cluster: str) -> list[PerServer]:
    groups = await client.brokers_of_cluster(cluster)
    addrs = [addr for ids in groups.values() for _, addr in sorted(ids.items())]
    return await client.runtime_infos(addrs)


def get_broker_config(
    broker_addr: str | None = broker_addr_option("This broker (host:port)."),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="Every broker of this cluster."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    one_target(broker_addr, cluster)
    if broker_addr is not None:
        targets = [(f"============{broker_addr}============", broker_addr, None)]
        client = AdminClient([], timeout=timeout)
    else:
        client = client_for(namesrv, timeout)
        assert cluster is not None
        groups = run(client.brokers_of_cluster, cluster)
        targets = []
        for ids in groups.values():
            master = ids.get(0)
            if master is not None:
                targets.append((f"============Master: {master}============", master, None))
            for bid, slave in sorted(ids.items()):
                if bid != 0:
                    targets.append((f"============My Master: {master}=====Slave: {slave}============", slave, master))

    async def fetch() -> list[PerServer]:
        async def one(target: tuple[str, str, str | None]) -> PerServer:
            try:
                return PerServer(target[1], await ba.broker_config(client, target[1]), kind="broker")
            except AdminError as exc:
                return PerServer(target[1], error=str(exc), kind="broker")

        return await ba.gather(targets, one)

    results = run(fetch)
    if broker_addr is not None and not as_json:
        only(results)
    if as_json:
        print_json({"brokers": [{"addr": t[1], "master": t[2], "config": r.value, "error": r.error}
                                for t, r in zip(targets, results)]})
    else:
        for (title, _, _), r in zip(targets, results):
            if not r.ok:
                print_failure(r)
                continue
            out.print(title)
            for key, value in r.value.items():
                out.print(f"{key:<50}=  {value}")
            out.print("")
    exit_if_any_failed(results)


def update_broker_config(
    key: str = typer.Option(..., "-k", "--key", help="Config key."),
    value: str = typer.Option(..., "-v", "--value", help="New value."),
    broker_addr: str | None = broker_addr_option("This broker (host:port)."),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="Every master of this cluster."),
    all_brokers: str | None = typer.Option(None, "-a", "--updateAllBroker", metavar="true",
                                           help="With -c: slaves too (any value, as Java's option)."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    one_target(broker_addr, cluster)
    key, value = key.strip(), value.strip()
    if not key:
        raise bad_option("-k", "the key is empty")
    if broker_addr is not None:
        addrs = [broker_addr]
        client = AdminClient([], timeout=timeout)
    else:
        client = client_for(namesrv, timeout)
        assert cluster is not None
        groups = run(client.brokers_of_cluster, cluster)
        addrs = [a for ids in groups.values() for bid, a in sorted(ids.items()) if bid == 0 or all_brokers is not None]
        if not addrs:
            raise AdminError(f"cluster {cluster} has no broker to update")
    results = run(ba.update_broker_config, client, addrs, key, value)
    if broker_addr is not None and not as_json:
        only(results)
    per_server(results, "update broker config success, {addr}", as_json, extra={"key": key, "value": value})


def broker_fault(
    broker: str = typer.Option(..., "-b", "--broker", help="Broker address (host:port) or broker name (via the NameServer)."),
    broker_id: int = typer.Option(0, "--id", min=0, help="With a broker name: which brokerId (0 = master)."),
    latency: int | None = typer.Option(None, "--latency", min=0, max=600_000, metavar="MS", help="Answer every send MS later."),
    reject: int | None = typer.Option(None, "--reject", metavar="CODE", min=REJECT_CODES[0], max=REJECT_CODES[1],
                                      help="Answer every send with response CODE (16 bits, as on the wire)."),
    remark: str | None = typer.Option(None, "--remark", help="With --reject: the remark sent back."),
    hang: bool = typer.Option(False, "--hang", help="Answer nothing (connections stay open) until --resume."),
    resume: bool = typer.Option(False, "--resume", help="End --hang; waiting requests are answered."),
    partition: str | None = typer.Option(None, "--partition", metavar="NAMESRV", help="Cut the broker off from this "
                                         "NameServer (host:port): through the local cluster's fault proxy (nothing "
                                         "crosses, connections stay open), else the stub stops registering there."),
    heal: str | None = typer.Option(None, "--heal", metavar="NAMESRV|all", help="Undo --partition (and every "
                                    "other network fault of the broker's paths) for one NameServer, or all."),
    clear: bool = typer.Option(False, "--clear", help="Back to normal: no latency, reject, hang, partition or "
                               "network fault."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    """With no fault option, show the switchboard; otherwise change one thing and show the result."""
    action, params = _chosen_fault(latency, reject, remark, hang, resume, partition, heal, clear)
    by_addr = ":" in broker or _is_ip(broker)
    fault_addr = addr_opt("-b", broker) if by_addr else None  # an address without its port is a usage error

    async def resolve() -> str:
        return fault_addr or await _addr_of_name(namesrv, timeout, broker.strip(), broker_id)

    addr = run(resolve)
    routed = None
    if action in ("partition", "heal", "clear", "status"):
        try:
            routed = broker_partition(addr, action, params.get("namesrv"))  # type: ignore[arg-type]
        except ClusterError as exc:
            raise bad_option("--partition" if action == "partition" else "--heal", str(exc)) from None
        if routed is not None and action in ("partition", "heal"):
            _print_routed(addr, action, *routed, as_json)
            return
    impl = local_impls().get(addr, "stub")
    if impl.startswith("java"):  # no switchboard (the stub's request 9000): say what works, not Java's "not supported"
        if routed is not None:  # status, or clear (every path healed): what the proxy says is all there is
            _print_routed(addr, action, *routed, as_json)
            return
        raise AdminError(f"{addr} runs {impl}, which has no fault switchboard ({action} is the broker stub's): on a "
                         "Java broker use killBroker (kill -9, --signal TERM|STOP|CONT), restartBroker, and "
                         "brokerFault --partition/--heal or networkFault through the local cluster's fault proxy")

    async def call() -> dict[str, Any]:
        # A hung broker answers nothing but fault requests, so a fresh connection is used each time.
        return await AdminClient([], timeout=timeout).broker_fault(addr, action, **params)

    state = run(call)
    if routed is not None:  # cut off through the proxy or by the switchboard: the broker is partitioned
        state["partitioned"] = sorted({*(state.get("partitioned") or []), *routed[0]})
    _print_switchboard(addr, action, state, as_json)


def _chosen_fault(latency: int | None, reject: int | None, remark: str | None, hang: bool, resume: bool,
                  partition: str | None, heal: str | None, clear: bool) -> tuple[str, dict[str, object]]:
    """The one fault action the options ask for (``status`` when none), checked before anything is sent."""
    chosen: list[tuple[str, dict[str, object]]] = []
    if latency is not None:
        chosen.append(("latency", {"millis": latency}))
    if reject is not None:
        chosen.append(("reject", {"code": reject, **({"remark": remark} if remark else {})}))
    elif remark is not None:
        raise bad_option("--remark", "only goes with --reject")
    if hang:
        chosen.append(("hang", {}))
    if resume:
        chosen.append(("resume", {}))
    if partition is not None:
        chosen.append(("partition", {"namesrv": addr_opt("--partition", partition)}))
    if heal is not None:
        chosen.append(("heal", {} if heal.strip().lower() == "all" else {"namesrv": addr_opt("--heal", heal)}))
    if clear:
        chosen.append(("clear", {}))
    if len(chosen) > 1:
        given = "/".join(given_spelling(f"--{action}") for action, _ in chosen)
        raise bad_option(given, "give at most one of --latency, --reject, --hang, --resume, --partition, --heal, --clear")
    return chosen[0] if chosen else ("status", {})


def _print_switchboard(addr: str, action: str, state: dict[str, Any], as_json: bool) -> None:
    """The broker stub's fault switchboard after ``action``, as a table or JSON."""
    if as_json:
        print_json({"broker": addr, "action": action, "state": state})
        return
    rows = [
        ["send latency", f"{state.get('sendLatencyMillis', 0)} ms"],
        ["reject sends with", "-" if state.get("rejectCode") is None else code_name(int(state["rejectCode"]))],
        ["hung", "yes" if state.get("hung") else "no"],
        ["partitioned from", ", ".join(state.get("partitioned") or []) or "-"],
    ]
    title = f"broker {addr}: " + ("fault state" if action == "status" else f"{action} applied")
    out.print(fit_table([Col("#Fault"), Col("#State", wrap=True)], rows, title=title))


async def _addr_of_name(namesrv: str | None, timeout: float, name: str, broker_id: int) -> str:
    """A broker's address by its name: from the local cluster's own record when the command talks to
    the local cluster (it knows a broker partitioned from the very NameServer a command would ask, or
    from every one), else from any NameServer that knows it (each is asked); an unknown name names
    every NameServer asked and what it knew, and the local cluster looked in."""
    state = local_cluster_of(namesrv)
    found = [p.addr for p in state.brokers if p.broker_name == name and p.broker_id == broker_id] if state else []
    if found:
        return found[0]
    try:
        return await client_for(namesrv, timeout).broker_addr_of(name, broker_id)
    except AdminError as exc:
        if state is None:
            raise
        known = ", ".join(sorted({p.broker_name or p.name for p in state.brokers})) or "none"
        raise AdminError(f"{exc}; nor is it in the local cluster in {state.dir} (brokers: {known})") from None


def _print_routed(addr: str, action: str, partitioned: list[str], paths: list[dict[str, Any]], as_json: bool) -> None:
    """brokerFault's answer when the fault proxy carried out --partition or --heal (or all there is to say
    of a Java broker: no switchboard)."""
    if as_json:
        print_json({"broker": addr, "action": action, "via": "faultproxy", "state": {"partitioned": partitioned},
                    "paths": paths})
        return
    rows = [["partitioned from", ", ".join(partitioned) or "-"],
            ["through the fault proxy", ", ".join(p["name"] for p in paths)]]
    title = f"broker {addr}: " + ("fault state" if action == "status" else f"{action} applied")
    out.print(fit_table([Col("#Fault"), Col("#State", wrap=True)], rows, title=title))


def _is_ip(text: str) -> bool:
    """Whether ``-b`` is an IP address (an address missing its port), not a broker name."""
    try:
        ipaddress.ip_address(text.strip())
    except ValueError:
        return False
    return True


def register(app: typer.Typer) -> None:
    app.command("brokerStatus", help="Fetch a broker's runtime status data (GET_BROKER_RUNTIME_INFO).")(broker_status)
    app.command("getBrokerConfig", help="Show a broker's (or a cluster's brokers') configuration.")(get_broker_config)
    app.command("updateBrokerConfig", help="Change one broker setting on a broker or a cluster.")(update_broker_config)
    app.command("brokerFault", help="Inject a fault into a broker stub (latency, reject, hang, partition) or show its faults.")(broker_fault)
