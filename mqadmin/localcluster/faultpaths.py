"""The local cluster's fault proxy: one ``mqfaultproxy`` process and a path for each broker->NameServer pair.

A network fault between a broker and a NameServer must work on any broker, ours or Apache's, without
the broker's help. So the runner starts one proxy per cluster and gives each broker a ``namesrvAddr``
of proxy ports, one per NameServer: the path ``broker-a-0.namesrv-1`` listens on 127.0.0.1:P and
forwards to namesrv-1, and a fault on it is a fault on that broker's link to that NameServer, whatever
the broker is. With ``client_proxy``, each broker also listens on 127.0.0.1:PORT but registers
``127.0.0.2:PORT``, where the proxy listens (path ``clients.broker-a-0``): producers and consumers
then reach it through the proxy too (all of 127/8 is loopback). A Java broker can do the same from
5.0 on (``bindAddress``); 4.9 listens on every address and cannot.

The paths outlive restarts: a NameServer restarts on its port, a broker with its config, and the
proxy from a config file that lists every path with its port (:func:`write_config`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from faultproxy.client import FaultProxyClient, FaultProxyError, describe_faults
from mqadmin.localcluster.state import ClusterError, ClusterState, Proc, ProxyPath, default_dir

PROXY_BOOT = re.compile(r"The fault proxy boot success\. control ([\d.]+):(\d+)")
#: Where brokers register, and the proxy listens for their clients, with client_proxy.
CLIENT_HOST = "127.0.0.2"
#: The faults a path takes (:func:`apply`), in the words of ``mqadmin networkFault`` and the scenarios.
FAULTS = ("partition", "refuse", "blackhole", "latency", "bandwidth", "reset", "heal")
CONTROL_TIMEOUT = 5.0


def new_proxy(directory: Path) -> Proc:
    """The proxy's process record, with a first config: any control port, no paths yet."""
    work = directory / "faultproxy"
    work.mkdir(exist_ok=True)
    proc = Proc("faultproxy", "faultproxy", str(work / "faultproxy.json"), str(work / "faultproxy.log"))
    Path(proc.config).write_text(json.dumps({"control": "127.0.0.1:0", "logFile": proc.log, "paths": []}))
    return proc


def write_config(state: ClusterState) -> None:
    """The proxy's config as the cluster now is: its control port and every path on its port, so that
    a restarted proxy serves the same addresses."""
    proc = state.fault_proxy
    if proc is None:
        return
    paths = [{"name": p.name, "listen": p.listen, "upstream": p.upstream} for p in state.paths]
    Path(proc.config).write_text(json.dumps({"control": proc.addr, "logFile": proc.log, "paths": paths}, indent=1))


def client(state: ClusterState, timeout: float = CONTROL_TIMEOUT) -> FaultProxyClient:
    """The control client of the cluster's proxy; ClusterError (one line) when there is none running."""
    proc = state.fault_proxy
    if proc is None:
        raise ClusterError(f"the local cluster in {state.dir} has no fault proxy (it was started with "
                           "--no-fault-proxy): restart the cluster without that option")
    if not proc.alive():
        raise ClusterError(f"the fault proxy of the local cluster in {state.dir} is not running "
                           f"(restart it with: mqadmin restartBroker -b BROKER; its log: {proc.log})")
    return FaultProxyClient(proc.addr, timeout)


def _populate(state: ClusterState, planned: list[ProxyPath]) -> None:
    """Create ``planned`` paths on the proxy (any port where none is fixed) and record them with their ports."""
    try:
        made = client(state).populate({"name": p.name, "listen": p.listen, "upstream": p.upstream} for p in planned)
    except FaultProxyError as exc:
        raise ClusterError(str(exc)) from None
    listen = {m["name"]: m["listen"] for m in made}
    for p in planned:
        p.listen = listen[p.name]
    state.paths.extend(planned)
    write_config(state)


def route_brokers(state: ClusterState, brokers: Iterable[Proc]) -> None:
    """A path from each broker to each NameServer, before the brokers start (their namesrvAddr names them)."""
    _populate(state, [ProxyPath(f"{b.name}.{ns.name}", b.name, ns.name, "127.0.0.1:0", ns.addr)
                      for b in brokers for ns in state.namesrvs])


def namesrv_addr_of(state: ClusterState, broker: Proc) -> str:
    """What the broker's namesrvAddr says: its proxy paths, in the NameServers' order."""
    by_ns = {p.namesrv: p.listen for p in state.paths if p.broker == broker.name and p.namesrv is not None}
    return ";".join(by_ns[ns.name] for ns in state.namesrvs)


def client_props() -> dict[str, object]:
    """A broker's keys with client_proxy: listen on 127.0.0.1, register the proxy's address."""
    return {"brokerIP1": CLIENT_HOST, "bindAddress": "127.0.0.1"}


def route_clients(state: ClusterState, brokers: Iterable[Proc]) -> None:
    """The clients' path to each broker, once it listens: CLIENT_HOST:PORT -> 127.0.0.1:PORT."""
    _populate(state, [ProxyPath(f"clients.{b.name}", b.name, None, f"{CLIENT_HOST}:{b.port}", b.addr)
                      for b in brokers])


def paths_of(state: ClusterState, broker: Proc, namesrv: Proc | None = None, *, clients: bool = False) -> list[ProxyPath]:
    """A broker's paths: to one NameServer (or to every one), or its clients' path."""
    if clients:
        found = [p for p in state.paths if p.broker == broker.name and p.namesrv is None]
        if not found:
            raise ClusterError(f"{broker.name} has no clients' path: the cluster was not started with --client-proxy")
        return found
    found = [p for p in state.paths if p.broker == broker.name and p.namesrv is not None
             and (namesrv is None or p.namesrv == namesrv.name)]
    if not found:
        raise ClusterError(f"{broker.name} has no path through the fault proxy"
                           + ("" if namesrv is None else f" to {namesrv.name}"))
    return found


def every_path_of(state: ClusterState, broker: Proc) -> list[ProxyPath]:
    """All of a broker's paths: to each NameServer, and its clients' path if it has one."""
    return [p for p in state.paths if p.broker == broker.name]


def find_broker(state: ClusterState, addr: str) -> Proc | None:
    """The cluster's broker at ``addr``: where it listens, or the address it registers (client_proxy)."""
    registered = {p.listen: p.broker for p in state.paths if p.namesrv is None}
    return next((b for b in state.brokers if addr == b.addr or registered.get(addr) == b.name), None)


def find_namesrv(state: ClusterState, which: str) -> Proc:
    """A NameServer of the cluster by index (``0``) or address (its own, or that of a path leading to it)."""
    which = which.strip()
    if which.isdigit() and int(which) < len(state.namesrvs):
        return state.namesrvs[int(which)]
    by_path = {p.listen: p.namesrv for p in state.paths if p.namesrv is not None}
    for ns in state.namesrvs:
        if which in (ns.addr, ns.name) or by_path.get(which) == ns.name:
            return ns
    known = ", ".join(f"{i} ({ns.addr})" for i, ns in enumerate(state.namesrvs))
    raise ClusterError(f"no NameServer {which!r} in the local cluster (NameServers: {known})")


def partitioned_from(state: ClusterState, broker: Proc, live: dict[str, dict[str, Any]]) -> list[str]:
    """The addresses of the NameServers the broker's paths cut it off from now (refusing, or a blackhole)."""
    addrs = {ns.name: ns.addr for ns in state.namesrvs}
    cut = []
    for p in state.paths:
        now = live.get(p.name)
        if p.broker == broker.name and p.namesrv is not None and now is not None and (
                not now["enabled"] or any(t["type"] == "blackhole" for t in now["toxics"])):
            cut.append(addrs[p.namesrv])
    return sorted(cut)


def path_rows(paths: Iterable[ProxyPath], live: dict[str, dict[str, Any]] | None) -> list[tuple[str, ...]]:
    """(path, listen, upstream, faults, connections) per path, for a table; ``?`` where the proxy did not say."""
    rows = []
    for p in paths:
        now = (live or {}).get(p.name)
        rows.append((p.name, p.listen, p.upstream, describe_faults(now) if now else "?",
                     str(now["connections"]) if now else "?"))
    return rows


def broker_partition(addr: str, action: str, namesrv: str | None,
                     state_dir: Path | None = None) -> tuple[list[str], list[dict[str, Any]]] | None:
    """``brokerFault --partition/--heal/--clear`` (or ``status``: no change) through the proxy, when the
    broker at ``addr`` is one of the local cluster's behind it: returns the NameServers it is now cut
    off from, and its paths' states.
    None when it is not behind a proxy (the broker stub's switchboard then partitions it itself). A
    NameServer that is not the cluster's is a ClusterError."""
    try:
        state = ClusterState.load(state_dir or default_dir())
    except ClusterError:
        return None
    broker = find_broker(state, addr)
    if broker is None or state.fault_proxy is None or not any(p.broker == broker.name for p in state.paths):
        return None
    ns = find_namesrv(state, namesrv) if namesrv else None
    paths = paths_of(state, broker, ns) if action == "partition" or ns is not None else every_path_of(state, broker)
    proxy = client(state)
    if action != "status":
        apply(proxy, paths, "partition" if action == "partition" else "heal")
    live = live_paths(proxy)
    return partitioned_from(state, broker, live), [live[p.name] for p in paths if p.name in live]


def apply(proxy: FaultProxyClient, paths: Iterable[ProxyPath], fault: str, *, stream: str = "both",
          millis: int = 0, jitter: int = 0, rate_kbps: int = 0) -> list[dict[str, Any]]:
    """Put one fault (:data:`FAULTS`) on each path; returns each path's state after it (the control API's).
    A failure is a ClusterError (one line)."""
    try:
        return _apply(proxy, list(paths), fault, stream, millis, jitter, rate_kbps)
    except FaultProxyError as exc:
        raise ClusterError(str(exc)) from None


def live_paths(proxy: FaultProxyClient) -> dict[str, dict[str, Any]]:
    """Every path as the proxy serves it now; a failure is a ClusterError."""
    try:
        return proxy.paths()
    except FaultProxyError as exc:
        raise ClusterError(str(exc)) from None


def _apply(proxy: FaultProxyClient, paths: list[ProxyPath], fault: str, stream: str, millis: int, jitter: int,
           rate_kbps: int) -> list[dict[str, Any]]:
    states = []
    for p in paths:
        if fault == "partition":
            states.append(proxy.partition(p.name))
        elif fault == "refuse":
            states.append(proxy.refuse(p.name))
        elif fault == "blackhole":
            states.append(proxy.blackhole(p.name, stream))
        elif fault == "latency":
            states.append(proxy.latency(p.name, millis, jitter, stream))
        elif fault == "bandwidth":
            states.append(proxy.bandwidth(p.name, rate_kbps, stream))
        elif fault == "reset":
            proxy.reset(p.name)
            states.append(proxy.path(p.name))
        elif fault == "heal":
            proxy.heal(p.name)
            states.append(proxy.path(p.name))
        else:
            raise ValueError(f"unknown network fault {fault!r}")
    return states
