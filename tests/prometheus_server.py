"""A real Prometheus server for the metrics tests: Debian's ``prometheus`` binary, started on loopback.

Not the package's systemd service: the test starts the binary itself, with
its own config and its own storage directory under the test's tmp path, on
a free loopback port (Prometheus cannot be told ``:0``, so a port is found
by binding and releasing it, and another is tried if someone took it
meanwhile), and always stops it. ``make test`` and ``.ci/run`` install the
package where it is missing; without it these tests fail, they do not skip.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

START_ATTEMPTS = 5
READY_SECONDS = 60.0


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        raise AssertionError(
            "the prometheus binary is missing: `make test` installs it (Debian: apt-get install -y "
            "--no-install-recommends prometheus)"
        )
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/-/ready", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


@contextmanager
def running_prometheus(config: Path, workdir: Path) -> Iterator[str]:
    """Prometheus on ``config``; yields its base URL (http://127.0.0.1:PORT). Stopped on exit."""
    binary = prometheus_binary()
    workdir.mkdir(parents=True, exist_ok=True)
    proc: subprocess.Popen[bytes] | None = None
    base = ""
    try:
        for attempt in range(START_ATTEMPTS):
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            log = workdir / f"prometheus-{attempt}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
                     f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                )
            deadline = time.monotonic() + READY_SECONDS
            while time.monotonic() < deadline and proc.poll() is None and not _ready(base):
                time.sleep(0.1)
            if proc.poll() is None and _ready(base):
                break
            stop(proc)
            text = log.read_text(errors="replace")
            if "address already in use" not in text:
                raise AssertionError(f"prometheus did not start: {text[-2000:]}")
            proc = None  # the port was taken meanwhile: another one
        else:
            raise AssertionError(f"prometheus found no free port in {START_ATTEMPTS} attempts")
        yield base
    finally:
        if proc is not None:
            stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def query(base: str, promql: str) -> list[dict[str, Any]]:
    """An instant query through the HTTP API; the result vector (AssertionError if Prometheus refuses it)."""
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            answer = json.load(resp)
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{promql}: HTTP {exc.code}: {exc.read()[:500]!r}") from None
    assert answer["status"] == "success", (promql, answer)
    return list(answer["data"]["result"])


def by_label(results: list[dict[str, Any]], label: str) -> dict[str, float]:
    """{label value: sample value} of an instant vector."""
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in results}


def until(base: str, promql: str, check: Any, timeout: float = 60.0, what: str = "") -> list[dict[str, Any]]:
    """Query until ``check(results)`` holds, within ``timeout`` (no wall-clock assertion: a bounded poll)."""
    deadline = time.monotonic() + timeout
    while True:
        results = query(base, promql)
        if check(results):
            return results
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or promql}: not reached in {timeout} s; last result: {results}")
        time.sleep(0.25)
