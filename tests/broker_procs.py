"""Start and stop real ``mqbroker-stub`` processes for tests (loopback only)."""

from __future__ import annotations

import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

BOOT_LINE = re.compile(rb"The broker\[([^,\]]+), ([\d.]+):(\d+)\] boot success\. serializeType=JSON")
#: Printed before the boot line when metricsPort is set.
METRICS_LINE = re.compile(rb"metrics at (http://\S+)")
#: Printed before the boot line unless vipChannelEnabled=false.
VIP_LINE = re.compile(rb"VIP channel at ([\d.]+:\d+)")


def broker_command() -> list[str]:
    """The installed console script when present (it is what users run), else the module."""
    script = Path(sys.executable).parent / "mqbroker-stub"
    if script.exists():
        return [str(script)]
    found = shutil.which("mqbroker-stub")
    return [found] if found else [sys.executable, "-m", "broker_stub.cli"]


class BrokerProcess:
    """One broker stub process with its own properties file and log."""

    def __init__(self, workdir: Path, **props: object) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = workdir / "broker.properties"
        self.log_path = workdir / "broker.log"
        settings: dict[str, object] = {"listenPort": 0, "brokerIP1": "127.0.0.1", "registerNameServerPeriod": 500}
        settings.update(props)
        self.config_path.write_text("".join(f"{k}={_text(v)}\n" for k, v in settings.items()))
        self.proc: subprocess.Popen[bytes] | None = None
        self.addr = ""
        self.name = ""
        self.metrics_url = ""  # with metricsPort set: where its /metrics is
        self.vip_addr = ""  # its VIP port (listenPort - 2), unless vipChannelEnabled=false

    def start(self, timeout: float = 60.0) -> BrokerProcess:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                broker_command() + ["-c", str(self.config_path)], stdout=subprocess.PIPE, stderr=log, cwd=self.workdir
            )
        self._wait_for_boot(timeout)
        return self

    def _wait_for_boot(self, timeout: float) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        seen = b""
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if sel.select(timeout=0.1):
                    chunk = os.read(self.proc.stdout.fileno(), 4096)
                    if not chunk:
                        break
                    seen += chunk
                    match = BOOT_LINE.search(seen)
                    if match:
                        self.name = match.group(1).decode()
                        self.addr = f"{match.group(2).decode()}:{match.group(3).decode()}"
                        metrics = METRICS_LINE.search(seen)
                        self.metrics_url = metrics.group(1).decode() if metrics else ""
                        vip = VIP_LINE.search(seen)
                        self.vip_addr = vip.group(1).decode() if vip else ""
                        return
        self.kill()
        raise RuntimeError(f"broker did not boot: stdout={seen!r} log={self.log()!r}")

    def terminate(self, timeout: float = 10.0) -> int:
        """SIGTERM and wait; returns the exit status."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL (no unregistration) and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Factory for broker stub processes; every one is killed after the test, pass or fail."""
    started: list[BrokerProcess] = []

    def start(name: str = "broker", **props: object) -> BrokerProcess:
        proc = BrokerProcess(tmp_path / f"broker-{name}-{len(started)}", **props)
        started.append(proc)
        return proc.start()

    yield start
    for proc in started:
        proc.kill()
