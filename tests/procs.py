"""Start and stop real ``mqnamesrv`` processes for tests (loopback only)."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

BOOT_LINE = re.compile(rb"The Name Server boot success\. serializeType=JSON, address ([\d.]+):(\d+)")
#: Printed before the boot line when metricsPort is set.
METRICS_LINE = re.compile(rb"metrics at (http://\S+)")


class NamesrvProcess:
    """One NameServer process with its own config, KV file and log."""

    def __init__(self, workdir: Path, **props: object) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.kv_path = workdir / "kvConfig.json"
        self.config_path = workdir / "namesrv.properties"
        self.log_path = workdir / "namesrv.log"
        settings: dict[str, object] = {
            "listenPort": 0,
            "bindAddress": "127.0.0.1",
            "kvConfigPath": self.kv_path,
            "scanNotActiveBrokerInterval": 200,
        }
        settings.update(props)
        self.config_path.write_text("".join(f"{k}={_text(v)}\n" for k, v in settings.items()))
        self.proc: subprocess.Popen[bytes] | None = None
        self.addr = ""
        #: what runs, before ``-c <config>`` (a test may run the server under a measuring wrapper)
        self.command = [sys.executable, "-m", "namesrv.cli"]
        self.metrics_url = ""  # with metricsPort set: where its /metrics is

    def start(self, timeout: float = 60.0) -> NamesrvProcess:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [*self.command, "-c", str(self.config_path)],
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=self.workdir,
        )
        log.close()
        self.addr = self._wait_for_boot(timeout)
        return self

    def _wait_for_boot(self, timeout: float) -> str:
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
                        metrics = METRICS_LINE.search(seen)
                        self.metrics_url = metrics.group(1).decode() if metrics else ""
                        return f"{match.group(1).decode()}:{match.group(2).decode()}"
        self.kill()
        raise RuntimeError(f"namesrv did not boot: stdout={seen!r} log={self.log_path.read_text()!r}")

    def terminate(self, timeout: float = 5.0) -> int:
        """SIGTERM and wait; returns the exit status."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
