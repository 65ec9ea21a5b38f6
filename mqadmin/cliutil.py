"""What every mqadmin command module shares: common options, finding the NameServers, result lines."""

from __future__ import annotations

from typing import Any

import typer

from mqadmin import cluster
from mqadmin.client import (
    AdminClient,
    AdminError,
    PerServer,
    namesrv_from_env,
    split_addrs,
)
from mqadmin.render import out, print_json

NamesrvOpt = typer.Option(None, "-n", "--namesrvAddr", metavar="ADDR",
                          help="NameServer(s), 'host:port;host:port' (default: $NAMESRV_ADDR, else the local cluster).")
JsonOpt = typer.Option(False, "--json", help="Print JSON (shapes in the README) instead of text.")
TimeoutOpt = typer.Option(3.0, "--timeout", min=0.05, help="Seconds to wait for each server.")


def namesrv_addrs(namesrv: str | None) -> list[str]:
    """-n, else $NAMESRV_ADDR, else the NameServers of the running local cluster."""
    addrs = split_addrs(namesrv) if namesrv else namesrv_from_env()
    if addrs:
        return addrs
    try:
        state = cluster.ClusterState.load(cluster.default_dir())
    except cluster.ClusterError:
        state = None
    running = [p.addr for p in state.namesrvs if p.alive()] if state else []
    if not running:
        raise AdminError("no NameServer address: give -n host:port, set NAMESRV_ADDR or run mqadmin start")
    return running


def client_for(namesrv: str | None, timeout: float) -> AdminClient:
    return AdminClient(namesrv_addrs(namesrv), timeout=timeout)


def per_server(results: list[PerServer], ok_line: str, fail_line: str, as_json: bool = False,
               extra: dict[str, Any] | None = None) -> None:
    """One line per server (or JSON ``{"results": [...]}``); exit 1 if any failed."""
    if as_json:
        print_json({**(extra or {}), "results": [r.to_json() for r in results]})
    else:
        for r in results:
            if r.ok:
                out.print(ok_line.format(addr=r.addr, value=r.value))
            else:
                out.print(fail_line.format(addr=r.addr, error=r.error), style="red")
    if not all(r.ok for r in results):
        raise typer.Exit(1)


def bad_option(option: str, message: str) -> typer.BadParameter:
    """A usage error naming the option (one line, exit 2)."""
    return typer.BadParameter(message, param_hint=option)
