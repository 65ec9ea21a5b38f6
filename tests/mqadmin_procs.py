"""Run the real ``mqadmin`` CLI, and local clusters that are always stopped.

:func:`mqadmin` runs a command line through the same entry code as the
console script (argument parsing, one-line errors, exit status), in-process
with stdout/stderr captured and the given environment, which keeps a suite of
many commands fast; ``in_process=False`` runs it as a real subprocess.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import psutil

from mqadmin.cli import main
from mqadmin.localcluster import java, processes
from mqadmin.localcluster.state import ClusterError, ClusterState

CLI = [sys.executable, "-c", "from mqadmin.cli import entry; entry()"]
#: The console script a user types (``.venv/bin/mqadmin``), beside the interpreter running the tests.
SCRIPT = Path(sys.executable).parent / "mqadmin"


def cli_env(state_home: Path | None = None, columns: int = 200, **extra: str) -> dict[str, str]:
    """The environment of a CLI run: no inherited NAMESRV_ADDR, a private state dir, a fixed width."""
    env = {k: v for k, v in os.environ.items() if k not in ("NAMESRV_ADDR", "COLUMNS", "XDG_STATE_HOME")}
    env["COLUMNS"] = str(columns)
    if state_home is not None:
        env["XDG_STATE_HOME"] = str(state_home)
    env.update(extra)
    return env


def mqadmin(*args: str, env: dict[str, str] | None = None, in_process: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = env if env is not None else cli_env()
    if not in_process:
        return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False, env=env)
    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess([*CLI, *args], code, out.getvalue(), err.getvalue())


#: Colour and cursor escapes a terminal gets (stripped from what a terminal run returns).
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def mqadmin_on_terminal(*args: str, env: dict[str, str] | None = None, columns: int = 200, rows: int = 60,
                        timeout: float = 60, raw: bool = False) -> subprocess.CompletedProcess[str]:
    """``mqadmin args`` as a subprocess whose stdout is a real terminal (a pseudo-terminal of ``columns``
    x ``rows``); stdout comes back with plain newlines and, unless ``raw``, without its escape codes.
    $COLUMNS is unset so that the terminal's own size is what mqadmin sees."""
    env = {k: v for k, v in (env if env is not None else cli_env()).items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm"
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    try:
        proc = subprocess.Popen([*CLI, *args], stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=env, close_fds=True)
        os.close(slave)
        slave = -1
        chunks = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        try:
            _, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
        text = text if raw else ANSI.sub("", text)
        return subprocess.CompletedProcess([*CLI, *args], proc.returncode, text, err.decode("utf-8", "replace"))
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)


def mqadmin_script(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
                   cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``.venv/bin/mqadmin args`` as a user runs it: the console script, a real process, stdout a pipe."""
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False,
                          env=env if env is not None else cli_env(), cwd=cwd)


def plain_tables(text: str, header_starts: tuple[str, ...] = ("#",)) -> list[tuple[list[int], list[str]]]:
    """The plain (piped) tables in ``text``: for each header line (starting with one of ``header_starts``),
    where its headers start and the rows under it. A header starts at column 0 or after two spaces; a row
    is a line with a space before every such column it reaches (a line of prose, or a blank one, ends it)."""
    lines = text.splitlines()
    tables = []
    for i, line in enumerate(lines):
        if not line.startswith(header_starts):
            continue
        starts = [0] + [j for j in range(2, len(line)) if line[j - 2:j] == "  " and line[j] != " "]
        rows = []
        for row in lines[i + 1:]:
            if not row.strip() or row.startswith(header_starts) or any(
                    p < len(row) and row[p - 1] != " " for p in starts[1:]):
                break
            rows.append(row)
        tables.append((starts, rows))
    return tables


def assert_headers_start_at_values(text: str, header_starts: tuple[str, ...] = ("#",), min_rows: int = 1) -> None:
    """Apache's layout off a terminal: every header starts at the column where each of its values starts."""
    tables = plain_tables(text, header_starts)
    assert tables, f"no table in:\n{text}"
    for starts, rows in tables:
        assert len(rows) >= min_rows, f"a table without rows in:\n{text}"
        for row in rows:
            for k, p in enumerate(starts):
                cell = row[p:starts[k + 1] if k + 1 < len(starts) else None].rstrip()
                assert not cell or row[p] != " ", f"a value not under its header (column {p}):\n{row}\nin:\n{text}"


def mqadmin_json(*args: str, env: dict[str, str] | None = None) -> Any:
    done = mqadmin(*args, "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def procs_mentioning(text: str) -> list[psutil.Process]:
    """Live processes whose command line mentions ``text`` (a cluster's state dir)."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and any(text in arg for arg in p.info["cmdline"] or []):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def stop_all(directory: Path) -> None:
    """Whatever a test did, nothing started in ``directory`` may outlive it."""
    try:
        state = ClusterState.load(directory)
    except ClusterError:
        state = None
    if state is not None:
        java.kill_java(state.procs)  # their graceful stops are test_java_local_cluster's to check
        processes.stop_procs(state.procs, grace=2.0)
    for p in procs_mentioning(str(directory)):
        try:
            p.kill()
            p.wait(5)
        except psutil.NoSuchProcess:
            pass


@contextmanager
def running_cluster(directory: Path, *start_args: str, env: dict[str, str] | None = None,
                    use_dir: bool = True) -> Iterator[dict[str, Any]]:
    """``mqadmin start [--dir directory] ... --json``; stopped on exit even when the test failed."""
    args = ["start", *start_args, "--json"] + (["--dir", str(directory)] if use_dir else [])
    try:
        done = mqadmin(*args, env=env)
        assert done.returncode == 0, done.stderr
        yield json.loads(done.stdout)
    finally:
        stop_all(directory)
