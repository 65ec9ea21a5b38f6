"""One real client program of a scenario run: a child process told what to do on stdin, read line by line.

The programs (:mod:`mqadmin.rocketmq.harness`) print one JSON object per line on stdout and take
``go`` and ``stop`` on stdin; the end of their stdin stops them too, so a runner that died leaves
no client behind for long. Each runs in a session of its own (a Ctrl-C in the terminal reaches the
runner, which stops them itself) with its stderr in a file beside its logs, and its output lines in
``stdout.log`` too (up to :data:`MAX_LOG_BYTES`).

Output is bounded: a line longer than :data:`MAX_LINE` is dropped (and counted), and the programs
themselves send a bounded number of messages for a bounded time. :meth:`ClientProcess.kill` is plain
``SIGKILL`` + reap, usable from outside trio, so a run's last cleanup can stop every process.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

#: Longest output line kept (a send or consume line is ~300 bytes; an allocation lists every queue).
MAX_LINE = 256 * 1024
#: How long a killed process may take to be reaped.
REAP_TIMEOUT = 10.0
#: How much of its output a program's ``stdout.log`` keeps (what a kept run's directory shows of it).
MAX_LOG_BYTES = 16 * 1024 * 1024

LineHandler = Callable[[dict[str, Any]], None]


class ClientProcess:
    """A client program: :meth:`start`, :meth:`read` (a task), :meth:`tell`, :meth:`kill`."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], workdir: Path) -> None:
        self.name = name
        self.cmd = cmd
        self.env = env
        self.workdir = workdir
        self.on_line: LineHandler = lambda line: None
        self.ready = trio.Event()  # its {"event":"ready"} line came
        self.ended = trio.Event()  # its stdout closed (it exited, or is about to)
        self.dropped_lines = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._stdout: trio.lowlevel.FdStream | None = None
        self._log: Any = None
        self._logged = 0

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else 0

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.workdir / "stderr.log", "wb") as err:
            self._proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                          cwd=self.workdir, env=self.env, start_new_session=True)
        assert self._proc.stdout is not None
        self._stdout = trio.lowlevel.FdStream(os.dup(self._proc.stdout.fileno()))
        self._proc.stdout.close()
        self._log = open(self.workdir / "stdout.log", "wb")  # noqa: SIM115 - closed when the output ends

    async def read(self) -> None:
        """Read its stdout to the end, one JSON object per line to :attr:`on_line` (other lines ignored)."""
        assert self._stdout is not None
        buf = bytearray()
        try:
            async with self._stdout:
                while True:
                    try:
                        chunk = await self._stdout.receive_some(65536)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        break
                    if not chunk:
                        break
                    buf += chunk
                    *lines, rest = buf.split(b"\n")
                    buf = bytearray(rest)
                    if len(buf) > MAX_LINE:
                        buf.clear()
                        self.dropped_lines += 1
                    for raw in lines:
                        self._line(raw)
        finally:
            if self._log is not None:
                self._log.close()
            self.ended.set()

    def _line(self, raw: bytes) -> None:
        if self._log is not None and self._logged < MAX_LOG_BYTES:
            self._log.write(raw + b"\n")
            self._logged += len(raw) + 1
        if len(raw) > MAX_LINE:
            self.dropped_lines += 1
            return
        try:
            line = json.loads(raw)
        except ValueError:
            return  # not ours (a client library's own print): ignored
        if not isinstance(line, dict):
            return
        if line.get("event") == "ready":
            self.ready.set()
        self.on_line(line)

    def tell(self, word: str) -> bool:
        """Write one line to its stdin; False if it is gone."""
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdin.closed:
            return False
        try:
            proc.stdin.write(word.encode() + b"\n")
            proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    async def wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for it to exit by itself; whether it did."""
        with trio.move_on_after(timeout):
            while self.alive():
                await trio.sleep(0.05)
        return not self.alive()

    def kill(self) -> bool:
        """SIGKILL and reap (no-op if it already exited); whether it was still running."""
        proc = self._proc
        if proc is None:
            return False
        running = proc.poll() is None
        if running:
            proc.kill()
        try:
            proc.wait(REAP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
        if proc.stdin is not None and not proc.stdin.closed:
            try:
                proc.stdin.close()
            except OSError:
                pass
        return running

    def stderr_tail(self, limit: int = 600) -> str:
        """The end of its stderr, one line, for a report of why it failed."""
        try:
            with open(self.workdir / "stderr.log", "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - limit))
                text = fh.read().decode(errors="replace")
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text.splitlines() if line.strip())[-limit:]


__all__ = ["MAX_LINE", "ClientProcess"]
