"""A real ``mqfaultproxy`` process and a real echo server for the fault proxy's tests (loopback only).

:class:`FaultProxyProcess` is started and always stopped by a ``with`` block; :class:`EchoServer`
answers every byte it reads with the same byte (or, ``echo=False``, only records it) on threads of
the test process, and remembers what each connection saw: its bytes, and whether it ended with a
close (EOF) or a reset.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from faultproxy.client import FaultProxyClient

BOOT = re.compile(rb"The fault proxy boot success\. control ([\d.]+):(\d+)")
PROXY = [sys.executable, "-m", "faultproxy.cli"]


class FaultProxyProcess:
    def __init__(self, workdir: Path, *args: str) -> None:
        self.workdir = workdir
        self.log_path = workdir / "faultproxy.log"
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None
        self.addr = ""

    def start(self, timeout: float = 60.0) -> FaultProxyProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([*PROXY, "--control", "127.0.0.1:0", *self.args], stdout=subprocess.PIPE,
                                         stderr=log, stdin=subprocess.DEVNULL)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        seen = b""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            seen += line
            match = BOOT.search(seen)
            if match:
                self.addr = f"{match.group(1).decode()}:{match.group(2).decode()}"
                return self
        self.stop()
        raise RuntimeError(f"mqfaultproxy did not boot: {seen!r} {self.log()!r}")

    @property
    def client(self) -> FaultProxyClient:
        return FaultProxyClient(self.addr, timeout=10.0)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextmanager
def fault_proxy(workdir: Path, *args: str) -> Iterator[FaultProxyProcess]:
    proxy = FaultProxyProcess(workdir, *args)
    try:
        yield proxy.start()
    finally:
        proxy.stop()


@dataclass
class Seen:
    """What one connection of the echo server saw."""

    data: bytearray = field(default_factory=bytearray)
    end: str | None = None  # "eof" or "reset", once it ended


class EchoServer:
    def __init__(self, echo: bool = True) -> None:
        self.echo = echo
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns: list[Seen] = []
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            seen = Seen()
            with self._lock:
                self.conns.append(seen)
                self._open.append(conn)
            threading.Thread(target=self._serve, args=(conn, seen), daemon=True).start()

    def _serve(self, conn: socket.socket, seen: Seen) -> None:
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    seen.end = "eof"
                    conn.shutdown(socket.SHUT_WR)
                    return
                seen.data += data
                if self.echo:
                    conn.sendall(data)
        except OSError:
            seen.end = "reset"

    def close(self) -> None:
        self.sock.close()
        with self._lock:
            for conn in self._open:
                conn.close()


@contextmanager
def echo_server(echo: bool = True) -> Iterator[EchoServer]:
    server = EchoServer(echo)
    try:
        yield server
    finally:
        server.close()


def wait_for(predicate, timeout: float = 10.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.01)
