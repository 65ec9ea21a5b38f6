"""The local cluster's record: which processes it has, where, and whether each is alive.

``mqadmin start`` writes ``cluster.json`` in the state directory; every later
command (status, stop, killBroker, restartNamesrv, and the NameServer commands
that default to the local cluster) reads it back here. A recorded pid counts as
alive only if it is still the process we started (its start time matches), so
a pid reused by the system is never signalled. Starting and stopping the
processes is :mod:`mqadmin.localcluster.processes`.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mqadmin.localcluster import prometheus_sd
from server_runtime.regular_file import load_text

STATE_FILE = "cluster.json"
#: Largest cluster.json read (one of 26 broker groups with slaves, NameServers and proxy paths is a few KB).
STATE_MAX_BYTES = 4 * 1024 * 1024


class ClusterError(Exception):
    """A cluster operation failed; the message is one line."""


def default_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "mqadmin" / "cluster"


@dataclass
class Proc:
    """One process of the cluster, as recorded in cluster.json."""

    kind: str  # "namesrv", "broker", "faultproxy" or "proxy" (Apache's RocketMQ Proxy)
    name: str  # "namesrv-0", "broker-a-0" (broker name + id)
    config: str
    log: str
    port: int = 0
    pid: int = 0
    broker_name: str | None = None
    broker_id: int | None = None
    started: int = 0  # the process's start time (/proc ticks): a reused pid is not ours
    metrics_port: int = 0  # its /metrics port (mqadmin start --metrics), 0: none
    impl: str = ""  # "toolkit" (our NameServer), "stub" (our broker) or "java"; "": ours (an older cluster.json)
    version: str | None = None  # a Java process's RocketMQ version (the RocketMQ Proxy's too)
    command: list[str] = field(default_factory=list)  # a Java process's command line, reused by a restart
    env: dict[str, str] = field(default_factory=dict)  # ... and what its environment adds (ROCKETMQ_HOME, ...)
    vip_port: int = 0  # a broker's VIP port (listenPort - 2, as a Java broker's), 0: none

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def java(self) -> bool:
        return self.impl == "java"

    @property
    def label(self) -> str:
        """What runs as this process: ``toolkit``, ``stub`` or ``java 5.5.0`` (Apache's RocketMQ Proxy too)."""
        if self.java or self.kind == "proxy":
            return f"java {self.version}" if self.version else "java"
        return self.impl or ("stub" if self.kind == "broker" else "toolkit")  # the fault proxy is ours too

    @property
    def vip_addr(self) -> str | None:
        return f"127.0.0.1:{self.vip_port}" if self.vip_port else None

    def alive(self) -> bool:
        if not pid_alive(self.pid):
            return False
        return not self.started or start_ticks(self.pid) in (None, self.started)


@dataclass
class ProxyPath:
    """One path of the cluster's fault proxy (:mod:`mqadmin.localcluster.faultpaths`), as in cluster.json."""

    name: str  # "broker-a-0.namesrv-1" (a broker to a NameServer) or "clients.broker-a-0" (clients to a broker)
    broker: str  # the broker process's name
    namesrv: str | None  # the NameServer process's name; None: the clients' path to the broker
    listen: str  # where the proxy listens (what the broker's namesrvAddr, or its registered address, names)
    upstream: str  # where it forwards to


@dataclass
class ClusterState:
    dir: str
    cluster: str = "DefaultCluster"
    procs: list[Proc] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    auth: bool = False  # started with --auth: accounts in <dir>/conf (mqadmin.localcluster.accounts)
    tls: bool = False  # started with --tls: enforcing, its certificate in <dir>/conf/tls (mqadmin.localcluster.certs)
    paths: list[ProxyPath] = field(default_factory=list)  # the fault proxy's paths (none without the proxy)

    @property
    def namesrvs(self) -> list[Proc]:
        return [p for p in self.procs if p.kind == "namesrv"]

    @property
    def brokers(self) -> list[Proc]:
        return [p for p in self.procs if p.kind == "broker"]

    @property
    def fault_proxy(self) -> Proc | None:
        """The fault proxy's process (its port is the control endpoint's), or None without one."""
        return next((p for p in self.procs if p.kind == "faultproxy"), None)

    @property
    def namesrv_addr(self) -> str:
        return ";".join(p.addr for p in self.namesrvs)

    @property
    def metrics(self) -> bool:
        """Whether the cluster was started with --metrics."""
        return any(p.metrics_port for p in self.procs)

    def save(self) -> None:
        """Write cluster.json, and with metrics the Prometheus targets too, so they always agree."""
        path = Path(self.dir) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        os.replace(tmp, path)
        prometheus_sd.write(self.dir, self.procs, self.cluster)

    @classmethod
    def load(cls, directory: Path) -> ClusterState:
        path = directory / STATE_FILE
        text = load_text(str(path), ClusterError, what="the cluster record", max_bytes=STATE_MAX_BYTES,
                         missing=f"no local cluster in {directory} (start one with: mqadmin start)")
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ClusterError(f"cannot read {path}: {exc}") from None
        try:
            procs = [Proc(**p) for p in data["procs"]]
            return cls(dir=data["dir"], cluster=data.get("cluster", "DefaultCluster"), procs=procs,
                       topics=list(data.get("topics", [])), auth=bool(data.get("auth", False)),
                       tls=bool(data.get("tls", False)), paths=[ProxyPath(**p) for p in data.get("paths", [])])
        except (KeyError, TypeError) as exc:
            raise ClusterError(f"cannot read {path}: unexpected content ({exc})") from None

    def find_broker(self, name: str, broker_id: int | None) -> list[Proc]:
        found = [p for p in self.brokers if p.broker_name == name and (broker_id is None or p.broker_id == broker_id)]
        if not found:
            known = ", ".join(sorted({p.broker_name or "" for p in self.brokers})) or "none"
            raise ClusterError(f"no broker {name}{'' if broker_id is None else f' id {broker_id}'} in the local cluster in "
                               f"{self.dir} (brokers: {known})")
        return found


def local_impls(directory: Path | None = None) -> dict[str, str]:
    """``addr -> implementation`` (``toolkit``, ``stub``, ``java 5.3.3``) of every process of the local
    cluster in ``directory`` (default: the usual one); empty when there is none. Commands that talk to
    any NameServer use it to name what runs at the addresses that are the local cluster's: a broker
    behind the clients' fault proxy is named at the address it registers too."""
    try:
        state = ClusterState.load(directory or default_dir())
    except ClusterError:
        return {}
    found = {p.addr: p.label for p in state.procs if p.port}
    by_name = {p.name: p.label for p in state.brokers}
    found.update({path.listen: by_name[path.broker] for path in state.paths
                  if path.namesrv is None and path.broker in by_name})
    return found


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours is not alive
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot; Linux), or None where unknown."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def proc_state(proc: Proc) -> str:
    """``running``, ``paused (SIGSTOP)`` or ``stopped``."""
    if not proc.alive():
        return "stopped"
    try:
        with open(f"/proc/{proc.pid}/stat") as fh:
            return "paused (SIGSTOP)" if fh.read().rsplit(")", 1)[1].split()[0] in ("T", "t") else "running"
    except OSError:
        return "running"
