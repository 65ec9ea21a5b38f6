"""Local cluster runner: NameServer and broker processes on loopback, ours or Apache's Java ones, and the
fault proxy between them.

``start`` launches the processes detached (they outlive the command), each
on a free loopback port with its own config and log in a state directory,
and records them in ``cluster.json`` (:mod:`mqadmin.localcluster.state`) so
that later commands (status, stop, killBroker, restartNamesrv, ...) find
them. Each NameServer is ours (``toolkit``) or Java's, each broker group
ours (``stub``) or Java's (:mod:`mqadmin.localcluster.impls`); the Java
specifics are :mod:`mqadmin.localcluster.java`. No process is left behind by
``stop``: a graceful SIGTERM first, SIGKILL after a bounded wait. Unless told
not to, one fault proxy process stands on every broker->NameServer path, Java
brokers' included (:mod:`mqadmin.localcluster.faultpaths`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from mqadmin.client.security import write_private
from mqadmin.localcluster import faultpaths, impls, java
from mqadmin.localcluster.accounts import LocalAccounts, admin_security, create_accounts
from mqadmin.localcluster.certs import create_certificate, tls_props
from mqadmin.localcluster.impls import Impl
from mqadmin.localcluster.proxy import start_proxy
from mqadmin.localcluster.ready import make_ready
from mqadmin.localcluster.state import STATE_FILE, ClusterError, ClusterState, Proc, proc_state, start_ticks
from mqadmin.rocketmq import servers
from mqadmin.rocketmq.artifacts import ArtifactError, Artifacts, check_version

NAMESRV_BOOT = re.compile(r"The Name Server boot success\. serializeType=JSON, address ([\d.]+):(\d+)")
BROKER_BOOT = re.compile(r"The broker\[([^,\]]+), ([\d.]+):(\d+)\] boot success")
#: kind -> (the module run with ``-c CONFIG``, its boot line, whose last group is the port it listens on)
PROGRAMS = {
    "namesrv": ("namesrv.cli", NAMESRV_BOOT),
    "broker": ("broker_stub.cli", BROKER_BOOT),
    "faultproxy": ("faultproxy.cli", faultpaths.PROXY_BOOT),
}
#: The line either server prints before its boot line when metricsPort is set.
METRICS_LINE = re.compile(r"metrics at http://[^\s]+:(\d+)/metrics")
VIP_LINE = re.compile(r"VIP channel at [\d.]+:(\d+)")
BOOT_TIMEOUT = 20.0
STOP_GRACE = 5.0
SIGNAL_WAIT = 5.0
ROUTABLE_TIMEOUT = 15.0
#: With Java members: a Java broker registers from a worker thread, possibly well after its boot line.
JAVA_ROUTABLE_TIMEOUT = 90.0
#: At most this much of a log is read to show its last lines (logs can grow without bound).
LOG_TAIL_BYTES = 1024 * 1024


def broker_names(count: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [f"broker-{letters[i]}" if i < 26 else f"broker-{i}" for i in range(count)]


def _write_props(path: Path, props: dict[str, object], *, private: bool = False) -> None:
    """A .properties file; ``private`` (it holds a secret key): readable by its owner only."""
    text = "".join(f"{k}={'true' if v is True else 'false' if v is False else v}\n" for k, v in props.items())
    if private:
        write_private(path, text)
    else:
        path.write_text(text)


def _spawn(proc: Proc, module: str) -> None:
    with open(proc.log, "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", module, "-c", proc.config],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # outlives `mqadmin start`, and Ctrl-C of it
        )
    proc.pid = child.pid
    proc.started = start_ticks(child.pid) or 0


def _wait_boot(proc: Proc, offset: int) -> re.Match[str]:
    """Until the process prints its boot line; a ClusterError naming why when it exits or takes too long."""
    if proc.java:
        pattern, timeout = java.boot_pattern(proc), java.BOOT_TIMEOUT
    else:
        pattern, timeout = PROGRAMS[proc.kind][1], BOOT_TIMEOUT
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(proc.log, "rb") as fh:
                fh.seek(offset if offset <= os.fstat(fh.fileno()).st_size else 0)  # rotated since: from its start
                text = fh.read().decode("utf-8", "replace")
        except FileNotFoundError:
            text = ""
        match = pattern.search(text)
        if match:
            return match
        if not proc.alive():
            if proc.java:
                why = java.failure_line(text)
            else:
                why = (text.strip().splitlines()[-1:] or ["(no output)"])[0]
            raise ClusterError(f"{proc.name} exited during start: {why} (log: {proc.log})")
        time.sleep(0.05 if not proc.java else 0.2)
    raise ClusterError(f"{proc.name} did not start within {timeout:g} s (log: {proc.log})")


def _log_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _metrics_port(proc: Proc, offset: int) -> int:
    """The /metrics port a booted process printed (0 when it serves none)."""
    return _printed_port(proc, offset, METRICS_LINE)


def _printed_port(proc: Proc, offset: int, line: re.Pattern[str]) -> int:
    """A port a booted process printed in its log after ``offset`` (0 when it printed none)."""
    try:
        with open(proc.log, "rb") as fh:
            fh.seek(offset)
            match = line.search(fh.read(LOG_TAIL_BYTES).decode("utf-8", "replace"))
    except OSError:
        return 0
    return int(match.group(1)) if match else 0


def _launch(proc: Proc) -> None:
    """Start the process (detached), however it is implemented."""
    if proc.java:
        java.spawn(proc)
    else:
        _spawn(proc, PROGRAMS[proc.kind][0])


def _booted(proc: Proc, offset: int, *, move_ports: bool = False) -> None:
    """Wait for the boot line; then record the port (ours print theirs) and /metrics port.

    ``move_ports``: a Java start that lost a port race is started again on new ports (a first start;
    a restart must come back on its old address)."""
    for attempt in range(java.PORT_ATTEMPTS):
        try:
            match = _wait_boot(proc, offset)
            break
        except ClusterError:
            if not (move_ports and proc.java and attempt + 1 < java.PORT_ATTEMPTS
                    and servers.lost_port_race(_read_from(proc.log, offset))):
                raise
            java.move_ports(proc)
            offset = _log_size(proc.log)
            java.spawn(proc)
    if not proc.java:
        proc.port = int(match.group(match.lastindex or 0))
    proc.metrics_port = _metrics_port(proc, offset)
    if proc.java:  # a Java broker's fast (VIP) channel is always open at listenPort - 2; it prints no line
        proc.vip_port = proc.port - 2 if proc.kind == "broker" else 0
    else:
        proc.vip_port = _printed_port(proc, offset, VIP_LINE)


def start_proc(proc: Proc) -> None:
    """Start one process and wait for its boot line (a restart: on the ports its config names)."""
    offset = _log_size(proc.log)
    _launch(proc)
    _booted(proc, offset)


def _read_from(path: str, offset: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read(LOG_TAIL_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def signal_wait(proc: Proc) -> float:
    """How long a signal may take to act on ``proc`` (a Java broker's SIGTERM flushes and unregisters)."""
    return java.STOP_GRACE if proc.java else SIGNAL_WAIT


def signal_proc(proc: Proc, sig: signal.Signals, wait: float | None = None) -> None:
    """Send ``sig`` and wait (bounded, default :func:`signal_wait`) until it took effect, so the caller's
    next look sees it."""
    wait = signal_wait(proc) if wait is None else wait
    if not proc.alive():
        raise ClusterError(f"{proc.name} (pid {proc.pid}) is not running")
    os.kill(proc.pid, sig)
    done = {
        signal.SIGKILL: lambda: not proc.alive(),
        signal.SIGTERM: lambda: not proc.alive(),
        signal.SIGSTOP: lambda: proc_state(proc) != "running",
        signal.SIGCONT: lambda: proc_state(proc) != "paused (SIGSTOP)",
    }.get(sig)
    deadline = time.monotonic() + wait
    while done is not None and not done() and time.monotonic() < deadline:
        time.sleep(0.01)


def stop_procs(procs: Iterable[Proc], grace: float = STOP_GRACE) -> list[str]:
    """SIGTERM, wait (longer for Java processes), then SIGKILL what is left; returns the names force-killed."""
    procs = [p for p in procs if p.alive()]
    if any(p.java for p in procs):
        grace = max(grace, java.STOP_GRACE)
    for p in procs:
        try:
            os.kill(p.pid, signal.SIGCONT)  # a stopped process cannot handle SIGTERM
            os.kill(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(p.alive() for p in procs):
        time.sleep(0.05)
    forced = []
    for p in procs:
        if p.alive():
            forced.append(p.name)
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(p.alive() for p in procs):
        time.sleep(0.02)
    return forced


def stop_cluster(state: ClusterState, grace: float = STOP_GRACE) -> tuple[list[str], list[str]]:
    """Stop every process (brokers first, so they unregister), then forget the cluster unless one
    survived; returns (the names force-killed, the names still running)."""
    # the RocketMQ Proxy first (it talks to the brokers), then brokers (so they unregister), then the rest
    proxies = [p for p in state.procs if p.kind == "proxy"]
    forced = stop_procs(proxies, grace) + stop_procs(state.brokers, grace)
    forced += stop_procs([p for p in state.procs if p.kind not in ("broker", "proxy")], grace)
    left = [p.name for p in state.procs if p.alive()]
    if not left:
        (Path(state.dir) / STATE_FILE).unlink(missing_ok=True)
    return forced, left


@dataclass
class StartOptions:
    namesrvs: int = 2
    brokers: int = 2
    slaves: int = 0
    cluster: str = "DefaultCluster"
    register_period_ms: int = 30000
    broker_expired_ms: int = 120000
    scan_interval_ms: int = 5000
    namesrv_props: tuple[tuple[str, str], ...] = ()  # more namesrv.properties lines (scenario namesrv_config)
    topics: tuple[str, ...] = ()  # created on every master once the brokers are routable
    topic_queues: int = 8
    ready_timeout: float = ROUTABLE_TIMEOUT
    broker_props: tuple[tuple[str, str], ...] = ()  # extra broker.properties keys for every broker (scenarios)
    auth: bool = False  # accounts on every process (aclEnable), made by mqadmin.localcluster.accounts
    tls: bool = False  # every process enforcing TLS with a certificate made by mqadmin.localcluster.certs
    metrics: bool = False  # /metrics on every process (each its own port) and a prometheus.yml for them
    #: Each NameServer's (broker group's) implementation: one for all or one each (mqadmin.localcluster.impls).
    namesrv_impl: str | tuple[str, ...] = "toolkit"
    broker_impl: str | tuple[str, ...] = "stub"
    #: Heaps, mapped file sizes and extra JVM options of the Java processes.
    java_sizing: servers.Sizing = field(default_factory=servers.Sizing)
    fault_proxy: bool = True  # every broker->NameServer path through a fault proxy (mqadmin.localcluster.faultpaths)
    client_proxy: bool = False  # brokers register the proxy's address, so clients reach them through it too
    proxy: str | None = None  # an Apache RocketMQ Proxy of this version over the cluster (mqadmin.localcluster.proxy)

    def impls(self) -> tuple[tuple[Impl, ...], tuple[Impl, ...]]:
        """(one Impl per NameServer, one per broker group); a ClusterError for a bad value."""
        return (impls.parse(self.namesrv_impl, "namesrv", self.namesrvs, "--namesrv-impl"),
                impls.parse(self.broker_impl, "broker", self.brokers, "--broker-impl"))

    def java_versions(self) -> list[str]:
        return impls.java_versions(*self.impls())


TOPIC_NAME = re.compile(r"^[%|a-zA-Z0-9_-]{1,127}$")


def validate_options(opts: StartOptions) -> None:
    """ClusterError (one line) for options no cluster can be started with."""
    if opts.namesrvs < 1:
        raise ClusterError("a cluster needs at least one NameServer (--namesrvs >= 1)")
    if opts.brokers < 0 or opts.slaves < 0:
        raise ClusterError("--brokers and --slaves cannot be negative")
    if opts.topics and opts.brokers == 0:
        raise ClusterError("--topics needs at least one broker group (--brokers >= 1)")
    for topic in opts.topics:
        if not TOPIC_NAME.match(topic):
            raise ClusterError(f"topic {topic!r} must be 1-127 characters of ^[%|a-zA-Z0-9_-]+$")
    if not 1 <= opts.topic_queues <= 1024:
        raise ClusterError(f"topic queues must be 1-1024, got {opts.topic_queues}")
    namesrv_impls, broker_impls = opts.impls()
    impls.check(namesrv_impls, broker_impls, register_period_ms=opts.register_period_ms,
                broker_expired_ms=opts.broker_expired_ms, scan_interval_ms=opts.scan_interval_ms,
                auth=opts.auth, tls=opts.tls, metrics=opts.metrics, client_proxy=opts.client_proxy,
                proxy=opts.proxy)
    if opts.client_proxy and not opts.fault_proxy:
        raise ClusterError("--client-proxy needs the fault proxy (leave out --no-fault-proxy)")
    if opts.proxy is not None:
        if opts.brokers == 0:
            raise ClusterError("--proxy needs at least one broker group (--brokers >= 1)")
        if opts.auth or opts.tls:
            raise ClusterError("--proxy cannot be combined with --auth or --tls yet")
        try:
            check_version(opts.proxy, "proxy")
        except ArtifactError as exc:
            raise ClusterError(f"--proxy: {exc}") from None


def make_state_dir(directory: Path) -> None:
    """Create a state directory, or a ClusterError naming why not (a file is there, no permission, ...)."""
    if directory.exists() and not directory.is_dir():
        raise ClusterError(f"state directory {directory} is not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / ".mqadmin-write-check"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ClusterError(f"cannot use {directory} as a state directory: {exc.strerror or exc}") from None


def start(directory: Path, opts: StartOptions, progress: java.Progress | None = None) -> ClusterState:
    """Start a whole cluster and return once it is usable; on any failure stop what was started.

    Usable means: every NameServer routes TBW102 to every broker (masters and
    slaves) and every ``opts.topics`` topic to every master. The Java versions
    it uses are resolved first (``progress`` hears of a first resolution; an
    ArtifactError, one line, when one cannot be had).
    """
    if (directory / STATE_FILE).exists():
        old = ClusterState.load(directory)
        if any(p.alive() for p in old.procs):
            raise ClusterError(f"a cluster is already running in {directory} (mqadmin stop first)")
    validate_options(opts)
    namesrv_impls, broker_impls = opts.impls()
    builds = java.resolve(opts.java_versions(), progress)
    make_state_dir(directory)
    state = ClusterState(dir=str(directory), cluster=opts.cluster, topics=list(opts.topics), auth=opts.auth,
                         tls=opts.tls)
    setup = _Setup(opts, builds, create_accounts(directory) if opts.auth else None,
                   tls_props(directory if opts.tls else None))
    if opts.tls:
        create_certificate(directory)
    if builds:
        setup.shim, note = java.loopback_shim()
        if note and progress is not None:
            progress(note)
    try:
        namesrvs = [setup.namesrv(directory, i, impl) for i, impl in enumerate(namesrv_impls)]
        # no broker, no path for a proxy to stand on
        proxy = [faultpaths.new_proxy(directory)] if opts.fault_proxy and opts.brokers > 0 else []
        state.procs += [*namesrvs, *proxy]
        _start_all(state, [*namesrvs, *proxy])  # the proxy boots beside the NameServers, not after them
        faultpaths.write_config(state)  # its control port, fixed from now on
        setup.expiry_by_brokers = impls.brokers_send_expiry(namesrv_impls, opts.broker_expired_ms)
        members = [(_broker_proc(directory, name, broker_id, impl), impl)
                   for name, impl in zip(broker_names(opts.brokers), broker_impls)
                   for broker_id in range(opts.slaves + 1)]
        brokers = [proc for proc, _ in members]
        if proxy:
            faultpaths.route_brokers(state, brokers)  # before the configs: a broker's namesrvAddr names its paths
        for proc, impl in members:
            setup.broker(proc, faultpaths.namesrv_addr_of(state, proc) if proxy else state.namesrv_addr, impl)
        state.procs += brokers
        _start_all(state, brokers)
        if opts.client_proxy:
            faultpaths.route_clients(state, brokers)
            state.save()
        timeout = max(opts.ready_timeout, JAVA_ROUTABLE_TIMEOUT) if builds else opts.ready_timeout
        trio.run(make_ready, state, opts.topics, opts.topic_queues, timeout, admin_security(state))
        if opts.proxy is not None:
            state.procs.append(start_proxy(state, opts.proxy))
            state.save()
    except BaseException:
        stop_procs(state.procs)
        state.save()
        raise
    return state


@dataclass
class _Setup:
    """What every process's config is made from: the options and what start made for them."""

    opts: StartOptions
    builds: dict[str, Artifacts]
    accounts: LocalAccounts | None
    tls: dict[str, object]
    shim: Path | None = None
    expiry_by_brokers: bool = False  # brokers send the broker timeout (a Java NameServer reads it from them)

    def namesrv(self, directory: Path, index: int, impl: Impl) -> Proc:
        opts = self.opts
        work = directory / f"namesrv-{index}"
        work.mkdir(exist_ok=True)
        proc = Proc("namesrv", f"namesrv-{index}", str(work / "namesrv.properties"), str(work / "namesrv.log"),
                    impl=impl.kind)
        if impl.java:
            scan = opts.scan_interval_ms if servers.scan_interval_key(impl.version or "") else None
            props = {**servers.namesrv_properties(port=0, workdir=work, scan_interval_ms=scan),
                     **dict(opts.namesrv_props)}
            sizing = opts.java_sizing.with_timer_wheel() if opts.proxy is not None else opts.java_sizing
            java.prepare(proc, self.builds[impl.version or ""], props, sizing, self.shim)
            return proc
        _write_props(Path(proc.config), {
            "listenPort": 0, "bindAddress": "127.0.0.1", "kvConfigPath": work / "kvConfig.json", "logFile": proc.log,
            "scanNotActiveBrokerInterval": opts.scan_interval_ms, "brokerChannelExpiredTime": opts.broker_expired_ms,
            **_acl_props(self.accounts), **self.tls, **_metrics_props(opts), **dict(opts.namesrv_props),
        })
        return proc

    def broker(self, proc: Proc, namesrv_addr: str, impl: Impl) -> None:
        """Write the broker's config; ``namesrv_addr``: its NameServers, or its paths to them through the proxy."""
        opts = self.opts
        name, broker_id, store = proc.broker_name or "", proc.broker_id or 0, Path(proc.config).parent / "store"
        expiry = opts.broker_expired_ms if self.expiry_by_brokers else None
        client_props = faultpaths.client_props() if opts.client_proxy else {}
        if impl.java:
            props = {**servers.broker_properties(
                cluster=opts.cluster, broker_name=name, broker_id=broker_id, port=0,
                namesrv_addrs=namesrv_addr.split(";"), store=store, sizing=opts.java_sizing,
                register_period_ms=opts.register_period_ms, heartbeat_timeout_ms=expiry,
                timer_wheel=opts.proxy is not None),  # POP, for the RocketMQ Proxy, needs the timer wheel
                **client_props, **dict(opts.broker_props)}  # brokerIP2 (HA) stays 127.0.0.1
            sizing = opts.java_sizing.with_timer_wheel() if opts.proxy is not None else opts.java_sizing
            java.prepare(proc, self.builds[impl.version or ""], props, sizing, self.shim)
            return
        _write_props(Path(proc.config), {
            "brokerClusterName": opts.cluster, "brokerName": name, "brokerId": broker_id,
            "namesrvAddr": namesrv_addr, "listenPort": 0, "brokerIP1": "127.0.0.1", "logFile": proc.log,
            "registerNameServerPeriod": opts.register_period_ms,
            "storePathRootDir": store,  # topics (and messages) survive restartBroker, as with Java
            **({} if expiry is None else {"enableSlaveActingMaster": True, "brokerNotActiveTimeoutMillis": expiry}),
            **client_props,
            **_acl_props(self.accounts, signing=True), **self.tls, **_metrics_props(opts), **dict(opts.broker_props),
        }, private=self.accounts is not None)


def _broker_proc(directory: Path, name: str, broker_id: int, impl: Impl) -> Proc:
    work = directory / f"{name}-{broker_id}"
    work.mkdir(exist_ok=True)
    return Proc("broker", f"{name}-{broker_id}", str(work / "broker.properties"), str(work / "broker.log"),
                broker_name=name, broker_id=broker_id, impl=impl.kind)


def _acl_props(accounts: LocalAccounts | None, *, signing: bool = False) -> dict[str, object]:
    """The keys that turn accounts on in a process's config (and, ``signing``, its own keys: a broker's)."""
    if accounts is None:
        return {}
    props: dict[str, object] = {"aclEnable": True, "aclConfigPath": accounts.acl_path}
    if signing:
        props.update(accessKey=accounts.admin.access_key, secretKey=accounts.admin.secret_key)
    return props


def _metrics_props(opts: StartOptions) -> dict[str, object]:
    """With --metrics: /metrics on loopback, on a port of the OS's choosing (read back from the log)."""
    return {"metricsPort": -1, "metricsBindAddress": "127.0.0.1"} if opts.metrics else {}


def _start_all(state: ClusterState, procs: list[Proc]) -> None:
    """Spawn every process first, then wait for each boot line: one start-up time, not the sum."""
    offsets = [_log_size(p.log) for p in procs]
    for p in procs:
        _launch(p)
    state.save()
    for p, offset in zip(procs, offsets):
        _booted(p, offset, move_ports=True)
        state.save()  # a Java process may have moved to new ports


def restart(proc: Proc, state: ClusterState | None = None) -> None:
    """Start a stopped process again on its previous port (a running one is stopped first; a broker
    keeps its store).

    With the cluster's ``state``, a fault proxy that is not running is started again first: a
    broker's NameServer addresses (and, with client_proxy, its clients) go through it.
    """
    proxy = state.fault_proxy if state is not None else None
    if proxy is not None and proxy is not proc and not proxy.alive():
        start_proc(proxy)
    if proc.alive():
        stop_procs([proc])
    if proc.kind != "faultproxy":  # the proxy's config names its ports already (faultpaths.write_config)
        text = Path(proc.config).read_text()
        Path(proc.config).write_text(re.sub(r"(?m)^listenPort=.*$", f"listenPort={proc.port}", text))
    start_proc(proc)


def log_tail(path: Path, lines: int) -> list[str]:
    """The last ``lines`` lines of a process's log, reading at most :data:`LOG_TAIL_BYTES` of it."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - LOG_TAIL_BYTES))
            return fh.read().decode("utf-8", "replace").splitlines()[-lines:]
    except OSError as exc:
        return [f"(cannot read: {exc})"]
