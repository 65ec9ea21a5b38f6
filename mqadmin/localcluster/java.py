"""Java NameServers and brokers as members of the local cluster.

A Java process is a :class:`~mqadmin.localcluster.state.Proc` like ours, with ``impl="java"``, its
version, and the command line and environment it was started with (kept in cluster.json, so a
restart runs exactly the same JVM on the same ports and, for a broker, the same store). What differs
from ours: Java takes its ports from its config (chosen here, free at the time, and chosen again when
a start loses the race), prints a different boot line, starts in seconds rather than a fraction of
one, and needs longer to shut down (a broker flushes and unregisters). Config, sizes and command lines
are :mod:`mqadmin.rocketmq.servers`; the jars come from :mod:`mqadmin.rocketmq.artifacts`.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

from mqadmin.localcluster.state import ClusterError, Proc, start_ticks
from mqadmin.rocketmq import artifacts, loopback, servers
from mqadmin.rocketmq.jvm import java_env, rocketmq_home

#: A JVM on a busy 2-core machine takes 10-30 s to print its boot line; this bounds the wait.
BOOT_TIMEOUT = 180.0
#: SIGTERM runs Java's shutdown hooks: a broker flushes its store and unregisters (5-10 s when busy).
STOP_GRACE = 30.0
#: How many times a start that lost a port race is tried again on new ports.
PORT_ATTEMPTS = 4

Progress = Callable[[str], None]


def resolve(versions: list[str], progress: Progress | None = None,
            detail: Progress | None = None) -> dict[str, artifacts.Artifacts]:
    """Each version's server jars, from the cache or resolved by Maven now (ArtifactError: one line).
    ``progress`` hears that a version is resolved for the first time, ``detail`` each jar downloaded."""
    found = {}
    for version in versions:
        maven_runs = artifacts.cached(version) is None and shutil.which("mvn") and shutil.which("java")
        if progress is not None and maven_runs:  # else a missing tool is the one line said
            progress(f"resolving RocketMQ {version} with Maven (first use; `mqadmin rocketmq fetch {version}` "
                     "does it ahead of time)")

        def each_jar(jar: str, version: str = version) -> None:
            if detail is not None:
                detail(f"resolving RocketMQ {version} with Maven: {jar}")

        found[version] = artifacts.resolve(version, "server", progress=each_jar)
    return found


def loopback_shim() -> tuple[Path | None, str | None]:
    """The loopback shim, or None and why not (the Java servers then bind some ports to every interface)."""
    try:
        return loopback.shim(), None
    except loopback.LoopbackError as exc:
        return None, f"{exc}: Java's HA and fast ports (every 4.9.7 port) listen on every interface"


def prepare(proc: Proc, build: artifacts.Artifacts, props: dict[str, object], sizing: servers.Sizing,
            shim: Path | None) -> None:
    """Choose the process's ports, write its config and record its command line (not started yet)."""
    work = Path(proc.config).parent
    home = rocketmq_home(work / "home")
    proc.impl, proc.version = "java", build.version
    proc.port = servers.free_port_block(servers.PORT_OFFSETS[proc.kind])
    write_config(proc, props)
    proc.command = servers.server_command(build, proc.kind, Path(proc.config), home, sizing)
    env = java_env(home, loopback_shim=shim)
    proc.env = {k: env[k] for k in ("ROCKETMQ_HOME", "LD_PRELOAD") if k in env}


def write_config(proc: Proc, props: dict[str, object]) -> None:
    """The properties file with the process's current ports."""
    ports: dict[str, object] = {"listenPort": proc.port}
    if proc.kind == "broker":
        ports["haListenPort"] = proc.port + 1
    Path(proc.config).write_text(servers.properties_text({**props, **ports}))


def move_ports(proc: Proc) -> None:
    """New free ports for a process whose start lost a port race (its config rewritten to match)."""
    proc.port = servers.free_port_block(servers.PORT_OFFSETS[proc.kind])
    text = Path(proc.config).read_text()
    text = re.sub(r"(?m)^listenPort=.*$", f"listenPort={proc.port}", text)
    text = re.sub(r"(?m)^haListenPort=.*$", f"haListenPort={proc.port + 1}", text)
    Path(proc.config).write_text(text)


def spawn(proc: Proc) -> None:
    """Start the recorded command line, detached (it outlives ``mqadmin start``), output to its log."""
    if not proc.command:
        raise ClusterError(f"{proc.name}: no Java command line recorded (start the cluster again)")
    env = {k: v for k, v in os.environ.items() if k not in ("NAMESRV_ADDR", "JAVA_TOOL_OPTIONS", "CLASSPATH",
                                                            "LD_PRELOAD")}
    env.update(proc.env)
    with open(proc.log, "ab") as log:
        try:
            child = subprocess.Popen(proc.command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     cwd=Path(proc.config).parent, env=env, start_new_session=True)
        except OSError as exc:
            raise ClusterError(f"{proc.name}: cannot run {proc.command[0]}: {exc.strerror or exc}") from None
    proc.pid = child.pid
    proc.started = start_ticks(child.pid) or 0


def boot_pattern(proc: Proc) -> re.Pattern[str]:
    return servers.NAMESRV_BOOT if proc.kind == "namesrv" else servers.BROKER_BOOT


def failure_line(text: str) -> str:
    """The line of a Java process's output that says why it stopped (an exception), else its last line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in lines:
        if "Exception" in line or "Error" in line:
            return line[:300]
    return lines[-1][:300] if lines else "(no output)"


def java_log_dir(proc: Proc) -> Path:
    """Where the JVM writes its own logs (``namesrv.log``, ``broker.log``, ...; 4.9.7 and 5.x alike)."""
    return Path(proc.config).parent / "home" / "logs"


def kill_java(procs: Iterable[Proc]) -> None:
    """SIGKILL the Java servers among ``procs`` (Apache's Proxy included), for a cluster thrown away.

    A Java broker's graceful shutdown takes about 10 s (3 s of it a fixed sleep in its message
    store) and the Proxy's longer: a scenario on Java, or a test's teardown, would spend longer
    stopping than most timelines last. Only where nothing is measured after it: ``mqadmin stop``
    stops Java gracefully.
    """
    for p in procs:
        if (p.java or p.kind == "proxy") and p.alive():
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
