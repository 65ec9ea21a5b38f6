"""Apache RocketMQ's Java NameServer as a benchmark peer: from Maven Central, pinned, on loopback only.

The jars come from ``mqadmin.rocketmq.artifacts.resolve(version, "server")`` and the command line from
``mqadmin.rocketmq.jvm.java_command``, with the JVM options Apache's ``bin/runserver.sh`` gives a
NameServer on JDK 9 and later (a 4 GB heap, G1, the C2 compiler): the peer runs as its users run it, not
as the test suite's small C1-only JVMs, which are sized to start quickly on a busy machine.

Loopback only: 5.x takes ``bindAddress=127.0.0.1`` and ``listenPort=0`` (the boot line names the port it
got); 4.x has neither, so it gets a free port and the LD_PRELOAD shim of ``interop/loopback`` turns its
wildcard bind into a loopback one. Either way the listening sockets are checked after the boot, and the
JVM is refused if one is not on 127.0.0.0/8. The JVM is killed if the benchmark dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from mqadmin.rocketmq import artifacts
from mqadmin.rocketmq.jvm import NAMESRV_MAIN, java_command, java_env, rocketmq_home

ROOT = Path(__file__).resolve().parent.parent
SHIM_SOURCE = ROOT / "interop" / "loopback" / "loopback_bind.c"
BOOT = re.compile(r"The Name Server boot success[^\n]*?(?:address ([\d.]+):(\d+))?\n")
#: JVM options of Apache's runserver.sh for JDK 9+ (java_command's small-heap defaults are overridden:
#: for a boolean HotSpot flag the last occurrence wins).
RUNSERVER_FLAGS = [
    "-server", "-XX:MetaspaceSize=128m", "-XX:MaxMetaspaceSize=320m",
    "-XX:-UseSerialGC", "-XX:+UseG1GC", "-XX:G1HeapRegionSize=16m", "-XX:G1ReservePercent=25",
    "-XX:InitiatingHeapOccupancyPercent=30", "-XX:SoftRefLRUPolicyMSPerMB=0",
    "-XX:-OmitStackTraceInFastThrow", "-XX:-UseLargePages", "-XX:TieredStopAtLevel=4",
]
BOOT_TIMEOUT = 240.0


class JavaNamesrvError(Exception):
    """The Java NameServer could not be had or started; the message is one line."""


def build_shim(workdir: Path) -> Path:
    """Compile the loopback bind shim into ``workdir`` (a C compiler is needed anyway for the load generator)."""
    shim = workdir / "libloopback_bind.so"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(shim), str(SHIM_SOURCE), "-ldl"], check=True)
    return shim


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class JavaNamesrv:
    """One Java NameServer JVM: started with :meth:`start`, stopped (always) with :meth:`stop`."""

    def __init__(self, version: str, workdir: Path, heap: str, preexec: object) -> None:
        try:
            self.build = artifacts.resolve(version, "server")
        except artifacts.ArtifactError as exc:
            raise JavaNamesrvError(str(exc)) from None
        self.version = version
        self.workdir = workdir
        self.heap = heap
        self.preexec = preexec
        self.proc: subprocess.Popen[bytes] | None = None
        self.addr = ""

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> JavaNamesrv:
        """Start the JVM and return at once (a JVM takes 5-60 s to boot here); :meth:`wait_boot` waits."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        home = rocketmq_home(self.workdir / "home")
        port = 0 if self.build.major >= 5 else free_port()
        config = self.workdir / "namesrv.properties"
        config.write_text(
            f"listenPort={port}\nbindAddress=127.0.0.1\nrocketmqHome={home}\n"
            f"kvConfigPath={self.workdir / 'kvConfig.json'}\nconfigStorePath={self.workdir / 'namesrv-store.properties'}\n"
        )
        self.addr = "" if port == 0 else f"127.0.0.1:{port}"
        cmd = java_command(self.build, NAMESRV_MAIN, ["-c", str(config)], home, heap=self.heap,
                           extra_flags=RUNSERVER_FLAGS)
        with open(self.workdir / "stdout.log", "wb") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir,
                env=java_env(home, loopback_shim=build_shim(self.workdir)), preexec_fn=self.preexec,  # type: ignore[arg-type]
            )
        return self

    def wait_boot(self, timeout: float = BOOT_TIMEOUT) -> JavaNamesrv:
        assert self.proc is not None
        out = self.workdir / "stdout.log"
        deadline = time.monotonic() + timeout
        while True:
            text = out.read_text(errors="replace")
            found = BOOT.search(text)
            if found:
                if found.group(2):
                    self.addr = f"{found.group(1)}:{found.group(2)}"
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise JavaNamesrvError(f"Java NameServer {self.version} did not boot (exit {self.proc.returncode}): "
                                       f"{text.strip().splitlines()[-1:] or 'no output'}")
            time.sleep(0.2)
        bad = [a for a in self.listening() if not a.startswith("127.")]
        if bad or not self.addr:
            self.stop()
            raise JavaNamesrvError(f"Java NameServer {self.version} listens on {bad or 'no known address'}: refused")
        return self

    def listening(self) -> list[str]:
        import psutil

        return [f"{c.laddr.ip}:{c.laddr.port}" for c in psutil.Process(self.pid).net_connections("tcp")
                if c.status == psutil.CONN_LISTEN]

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s; always reaps the JVM."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(15)
