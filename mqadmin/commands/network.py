"""networkFault (ours): network faults on the local cluster's fault proxy paths, for any broker.

The paths are a broker's links to its NameServers (``broker-a-0.namesrv-1``) and, with ``start
--client-proxy``, its clients' link to it (``clients.broker-a-0``). The faults are the proxy's
(docs/faultproxy.md): ``--partition`` (silent, both ways), ``--refuse``, ``--blackhole``,
``--latency``, ``--bandwidth``, ``--reset`` and ``--heal``; with none, the paths and their faults are
shown. The processes are run by :mod:`mqadmin.localcluster`; the faults are put by
:func:`mqadmin.localcluster.faultpaths.apply`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from faultproxy.client import describe_faults
from mqadmin.commands.options import JsonOpt, bad_option, given_spelling
from mqadmin.localcluster import faultpaths
from mqadmin.localcluster.state import ClusterError, ClusterState, Proc, ProxyPath, default_dir
from mqadmin.output.console import out, print_json
from mqadmin.output.tables import Col, fit_table

STREAMS = ("both", "upstream", "downstream")


def network_fault(
    broker: str | None = typer.Option(None, "-b", "--brokerName", help="Broker group (broker-a) or a broker's "
                                      "address; default: every broker of the cluster."),
    broker_id: int | None = typer.Option(None, "--id", min=0, help="With a group name: only this brokerId "
                                         "(default: every broker of the group)."),
    namesrv: str | None = typer.Option(None, "--to", metavar="NS", help="Only the path to this NameServer: "
                                       "its index (0) or address; default: every NameServer."),
    clients: bool = typer.Option(False, "--clients", help="The clients' path to the broker instead (needs "
                                 "start --client-proxy)."),
    partition: bool = typer.Option(False, "--partition", help="Nothing crosses, either way; connections stay "
                                   "open (a NameServer drops the broker after brokerChannelExpiredTime)."),
    refuse: bool = typer.Option(False, "--refuse", help="Connects refused, live connections reset (a NameServer "
                                "drops the broker at once: its connection closed)."),
    blackhole: bool = typer.Option(False, "--blackhole", help="Drop what --stream carries, and its close."),
    latency: int | None = typer.Option(None, "--latency", metavar="MS", min=0, max=600_000,
                                       help="Deliver each byte MS later (see --jitter, --stream)."),
    jitter: int = typer.Option(0, "--jitter", metavar="MS", min=0, max=600_000, help="With --latency: +- this much."),
    bandwidth: int | None = typer.Option(None, "--bandwidth", metavar="KBPS", min=1, max=10_000_000,
                                         help="At most KBPS x 1000 bytes a second (see --stream)."),
    reset: bool = typer.Option(False, "--reset", help="TCP RST on every live connection now (new ones work)."),
    heal: bool = typer.Option(False, "--heal", help="Remove every fault of the paths."),
    stream: str = typer.Option("both", "--stream", help="For --blackhole, --latency, --bandwidth: upstream "
                               "(broker->NameServer, client->broker), downstream, or both."),
    directory: Path | None = typer.Option(None, "--dir", help="State directory of the local cluster."),
    as_json: bool = JsonOpt,
) -> None:
    """With no fault option, show the paths and their faults; otherwise put one fault on them."""
    chosen = [name for name, on in (("partition", partition), ("refuse", refuse), ("blackhole", blackhole),
                                    ("latency", latency is not None), ("bandwidth", bandwidth is not None),
                                    ("reset", reset), ("heal", heal)) if on]
    if len(chosen) > 1:
        given = "/".join(given_spelling(f"--{fault}") for fault in chosen)  # the options named are the ones given
        raise bad_option(given, "give at most one of --partition, --refuse, --blackhole, --latency, --bandwidth, "
                                "--reset, --heal")
    if stream not in STREAMS:
        raise bad_option("--stream", f"{stream!r} is not upstream, downstream or both")
    if jitter and latency is None:
        raise bad_option("--jitter", "only goes with --latency")
    if stream != "both" and not set(chosen) & {"blackhole", "latency", "bandwidth"}:
        raise bad_option("--stream", "only goes with --blackhole, --latency or --bandwidth")
    state = ClusterState.load(directory if directory is not None else default_dir())
    paths = _paths(state, broker, broker_id, namesrv, clients)
    proxy = faultpaths.client(state)
    if chosen:
        faultpaths.apply(proxy, paths, chosen[0], stream=stream, millis=latency or 0, jitter=jitter,
                         rate_kbps=bandwidth or 0)
    live = faultpaths.live_paths(proxy)
    if as_json:
        print_json({"fault": chosen[0] if chosen else None, "stream": stream if chosen else None,
                    "paths": [_path_json(p, live.get(p.name)) for p in paths]})
        return
    title = f"{chosen[0]} applied" if chosen else "network faults"
    out.print(paths_table(paths, live, title))


def _paths(state: ClusterState, broker: str | None, broker_id: int | None, namesrv: str | None,
           clients: bool) -> list[ProxyPath]:
    """The paths the options name; a name or address that is not in the cluster is a usage error."""
    if not state.paths and state.fault_proxy is None:
        raise ClusterError(f"the local cluster in {state.dir} has no fault proxy (it was started with "
                           "--no-fault-proxy): restart the cluster without that option")
    if clients and namesrv is not None:
        raise bad_option("--to", "a clients' path leads to the broker, not to a NameServer")
    brokers: list[Proc] = state.brokers
    if broker is not None:
        by_addr = faultpaths.find_broker(state, broker.strip())
        if by_addr is not None:
            brokers = [by_addr]
        else:
            try:
                brokers = state.find_broker(broker.strip(), broker_id)
            except ClusterError as exc:
                raise bad_option("-b", str(exc)) from None
    elif broker_id is not None:
        raise bad_option("--id", "only goes with -b")
    try:
        ns = faultpaths.find_namesrv(state, namesrv) if namesrv is not None else None
    except ClusterError as exc:
        raise bad_option("--to", str(exc)) from None
    found: list[ProxyPath] = []
    for b in brokers:
        try:
            found += faultpaths.paths_of(state, b, ns, clients=clients)
        except ClusterError as exc:
            raise bad_option("--clients" if clients else "-b", str(exc)) from None
    return found


def _path_json(p: ProxyPath, now: dict[str, Any] | None) -> dict[str, Any]:
    return {"name": p.name, "broker": p.broker, "namesrv": p.namesrv, "listen": p.listen, "upstream": p.upstream,
            "enabled": now["enabled"] if now else None, "toxics": now["toxics"] if now else None,
            "connections": now["connections"] if now else None, "faults": describe_faults(now) if now else None}


def paths_table(paths: list[ProxyPath], live: dict[str, dict[str, Any]], title: str) -> Any:
    rows = [[name, listen, upstream, Text(faults, style="green" if faults == "-" else "red"), conns]
            for name, listen, upstream, faults, conns in faultpaths.path_rows(paths, live)]
    cols = [Col("#Path"), Col("#Listen"), Col("#Upstream"), Col("#Faults", wrap=True), Col("#Conns", 1)]
    return fit_table(cols, rows, title=title)


def register(app: typer.Typer) -> None:
    app.command("networkFault", help="Network faults between brokers and NameServers (or clients) through the "
                "local cluster's fault proxy: partition, refuse, blackhole, latency, bandwidth, reset, heal.")(
        network_fault)
