"""Real Java RocketMQ processes for the interop tests: NameServer, brokers, clients, mqadmin.

Everything runs from the published artifacts' main classes (NamesrvStartup, BrokerStartup,
MQAdminStartup through our AdminRunner) with config files written here into the test's temp dir.
The servers are configured and started as the local cluster starts them
(:mod:`mqadmin.rocketmq.servers`: small mapped files, logs under the process's own ``user.home``,
the LD_PRELOAD shim that turns Java's wildcard binds into 127.0.0.1 binds, ports picked free by
:func:`free_port_block` and a start that loses the race retried with new ones), held here as
child processes of the test.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqadmin.rocketmq import servers
from mqadmin.rocketmq.jvm import java_command, java_env, rocketmq_home
from mqadmin.rocketmq.servers import free_port_block
from tests.interop.harness_build import JavaBuild

STARTUP_TIMEOUT = 180.0
LOGBACK_STATUS = re.compile(r"^\d\d:\d\d:\d\d,\d{3} \|-")


@dataclass
class JavaServer:
    """A Java NameServer or broker: config written, started, waited for, stopped."""

    build: JavaBuild
    workdir: Path
    loopback_shim: Path
    role: str
    heap: str = "256m"
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    attempts: int = 0
    extra_props: dict[str, object] = field(default_factory=dict)
    #: -D system properties of the JVM (Java reads the tls.* keys only there: {"tls.enable": "true"})
    system_props: dict[str, str] = field(default_factory=dict)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def version(self) -> str:
        return self.build.version

    @property
    def out_path(self) -> Path:
        return self.workdir / "stdout.log"

    @property
    def boot(self) -> re.Pattern[str]:
        return servers.NAMESRV_BOOT if self.role == "namesrv" else servers.BROKER_BOOT

    def settings(self) -> dict[str, object]:
        raise NotImplementedError

    def start(self) -> JavaServer:
        """Start the JVM and return at once; :meth:`wait_boot` waits for its boot line."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        home = rocketmq_home(self.workdir / "home")
        if not self.port or self.attempts:
            self.port = free_port_block(servers.PORT_OFFSETS[self.role])
        self.attempts += 1
        config = self.workdir / "server.properties"
        config.write_text(servers.properties_text({**self.settings(), "rocketmqHome": home, **self.extra_props}))
        sizing = servers.Sizing(namesrv_heap=self.heap, broker_heap=self.heap, initial_heap=self.heap,
                                direct_memory="128m")
        with open(self.out_path, "wb") as out:
            self.proc = subprocess.Popen(
                servers.server_command(self.build, self.role, config, home, sizing, system_props=self.system_props),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir,
                env=java_env(home, loopback_shim=self.loopback_shim))
        return self

    def wait_boot(self, timeout: float = STARTUP_TIMEOUT) -> JavaServer:
        """Wait for the boot line; a start that lost a port race is retried with new ports."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc is not None
            text = self.out_path.read_text(errors="replace") if self.out_path.exists() else ""
            if self.boot.search(text):
                return self
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                if servers.lost_port_race(text + self.log()) and self.attempts < 4:
                    self.start()
                    continue
                raise RuntimeError(f"Java {self.role} {self.version} did not boot (exit {self.proc.returncode}):\n"
                                   f"{text[-3000:]}\n--- log ---\n{self.log()[-3000:]}")
            time.sleep(0.2)

    def log(self) -> str:
        logs = sorted((self.workdir / "home" / "logs").rglob("*.log"))
        return "".join(p.read_text(errors="replace") for p in logs)

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM (Java runs its shutdown hooks: a broker unregisters) and wait."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL and reap (no shutdown hook runs)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def listening_addresses(self) -> set[str]:
        """The local addresses this JVM listens on (to check the loopback shim held)."""
        import psutil

        assert self.proc is not None
        return {f"{c.laddr.ip}:{c.laddr.port}" for c in psutil.Process(self.proc.pid).net_connections("tcp")
                if c.status == psutil.CONN_LISTEN}


@dataclass
class JavaNamesrv(JavaServer):
    role: str = "namesrv"

    def settings(self) -> dict[str, object]:
        return servers.namesrv_properties(port=self.port, workdir=self.workdir)


@dataclass
class JavaBroker(JavaServer):
    role: str = "broker"
    cluster: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    namesrv_addrs: tuple[str, ...] = ()

    def settings(self) -> dict[str, object]:
        # registers every 10 s, the fastest a Java broker registers
        return servers.broker_properties(
            cluster=self.cluster, broker_name=self.broker_name, broker_id=self.broker_id, port=self.port,
            namesrv_addrs=list(self.namesrv_addrs), store=self.workdir / "store",
            register_period_ms=servers.REGISTER_PERIOD_RANGE_MS[0])


@contextmanager
def java_servers(*servers: JavaServer) -> Iterator[tuple[JavaServer, ...]]:
    """Start every server at once (JVM starts overlap), wait for all, kill all on exit."""
    try:
        for server in servers:
            server.start()
        for server in servers:
            server.wait_boot()
        yield servers
    finally:
        for server in servers:
            server.kill()


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects among a harness program's output lines (other lines are ignored)."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


class AdminRunner:
    """One JVM running Java mqadmin commands one after another (see AdminRunner.java)."""

    def __init__(self, build: JavaBuild, home: Path) -> None:
        self.build = build
        home = rocketmq_home(home)
        cmd = java_command(build, "interop.harness.AdminRunner", [], home, heap="192m",
                           extra_flags=["-Djava.security.manager=allow"])
        with open(home / "runner.err", "wb") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=home,
                                         env=java_env(home))
        self._sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)
        self._buffer = b""
        ready = self._read_line(STARTUP_TIMEOUT)
        if ready.get("event") != "ready":
            raise RuntimeError(f"AdminRunner {build.version} did not start: {ready}")

    def _read_line(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None and not self._sel.select(0):
                raise RuntimeError(f"AdminRunner {self.build.version}: no answer (exit {self.proc.poll()})")
            if self._sel.select(min(left, 1.0)):
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    raise RuntimeError(f"AdminRunner {self.build.version} closed its output")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def run(self, *args: str, timeout: float = 90.0, stop_after_ms: int | None = None) -> dict[str, Any]:
        """Run ``mqadmin args...``; returns stdout, stderr, exit (the trapped System.exit status or None).

        ``stop_after_ms`` stops a command that never ends by itself (clusterRT) after that long.
        """
        assert self.proc.stdin is not None
        if any("\t" in a or "\n" in a for a in args):
            raise ValueError(f"mqadmin args may not hold tabs or newlines: {args!r}")
        prefix = [f"@timeout={stop_after_ms}"] if stop_after_ms is not None else []
        self.proc.stdin.write(("\t".join([*prefix, *args]) + "\n").encode())
        self.proc.stdin.flush()
        result = self._read_line(timeout)
        # 5.x's shaded logback prints its own status lines on stdout when it first starts.
        lines = result["stdout"].splitlines(keepends=True)
        result["stdout"] = "".join(line for line in lines if not LOGBACK_STATUS.match(line))
        return result

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._sel.close()


class AdminRunners:
    """One :class:`AdminRunner` per version, started on first use, all closed together."""

    def __init__(self, builds: dict[str, JavaBuild], home_of: Callable[[str], Path]) -> None:
        self.builds = builds
        self.home_of = home_of
        self.runners: dict[str, AdminRunner] = {}

    def __getitem__(self, version: str) -> AdminRunner:
        if version not in self.runners:
            self.runners[version] = AdminRunner(self.builds[version], self.home_of(version))
        return self.runners[version]

    def close(self) -> None:
        for runner in self.runners.values():
            runner.close()


def run_java_client(build: JavaBuild, main: str, args: list[str], home: Path, *, timeout: float = 120,
                    props: dict[str, str] | None = None) -> tuple[int, list[dict[str, Any]], str]:
    """Run one harness client to its end: (exit status, its JSON lines, its stderr)."""
    rocketmq_home(home)
    done = subprocess.run(java_command(build, f"interop.harness.{main}", args, home, props=props),
                          capture_output=True, text=True, timeout=timeout, cwd=home, env=java_env(home),
                          check=False)
    return done.returncode, json_lines(done.stdout), done.stderr


class LineProcess:
    """A client process whose JSON lines are read as they come (a consumer: ready, then messages)."""

    def __init__(self, cmd: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.err_path = cwd / "stderr.log"
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                         cwd=cwd, env=env)
        self.lines: list[dict[str, Any]] = []
        self._buffer = b""

    def wait_for(self, event: str, timeout: float = STARTUP_TIMEOUT, count: int = 1) -> dict[str, Any]:
        """Read lines until ``count`` with this event arrived (or the process ends or time runs out)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while True:
                matching = [line for line in self.lines if line.get("event") == event]
                if len(matching) >= count:
                    return matching[count - 1]
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no {event!r} line: {self.lines} {self.stderr()[-2000:]}")
                if sel.select(0.5):
                    chunk = os.read(self.proc.stdout.fileno(), 65536)
                    if not chunk:
                        raise RuntimeError(f"ended (exit {self.proc.wait(10)}) before {event!r}: "
                                           f"{self.lines} {self.stderr()[-2000:]}")
                    self._buffer += chunk
                    *complete, self._buffer = self._buffer.split(b"\n")
                    self.lines += json_lines(b"\n".join(complete).decode(errors="replace"))

    def finish(self, timeout: float = STARTUP_TIMEOUT) -> int:
        """Wait for the summary and the exit; returns the exit status."""
        self.wait_for("summary", timeout)
        return self.proc.wait(30)

    def received(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("event") == "received"]

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace") if self.err_path.exists() else ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def java_consumer(build: JavaBuild, home: Path, args: list[str], *,
                  props: dict[str, str] | None = None) -> LineProcess:
    """A harness push consumer; ``props`` become system properties (``{"tls.enable": "true"}``)."""
    rocketmq_home(home)
    return LineProcess(java_command(build, "interop.harness.PushConsumer", args, home, props=props), home,
                       java_env(home))
