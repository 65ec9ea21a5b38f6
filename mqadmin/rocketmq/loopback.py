"""The LD_PRELOAD shim that keeps Java servers' listening sockets on 127.0.0.1.

Java RocketMQ binds some ports to every interface whatever its config says (every port of 4.9.7; a 5.x
broker's HA and fast ports). ``loopback_bind.c`` (beside this module) turns a wildcard bind into a
loopback bind. It is compiled with the system's C compiler on first use into the cache
(``~/.cache/mqadmin/rocketmq/loopback/``), named by a hash of its source so an edited source is built
again, and reused from there.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from mqadmin.rocketmq.artifacts import cache_root

SOURCE = Path(__file__).with_name("loopback_bind.c")
COMPILE_TIMEOUT = 120.0


class LoopbackError(Exception):
    """The shim could not be built; the message is one line naming why."""


def build(target: Path, cc: str | None = None) -> Path:
    """Compile :data:`SOURCE` into ``target`` unless it is there and newer than the source."""
    if target.exists() and target.stat().st_mtime >= SOURCE.stat().st_mtime:
        return target
    compiler = cc or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise LoopbackError("no C compiler (cc) on PATH to build the loopback shim (e.g. Debian's gcc)")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".shim-", suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", tmp, str(SOURCE), "-ldl"],
                              capture_output=True, text=True, timeout=COMPILE_TIMEOUT, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            raise LoopbackError(f"{compiler} could not build the loopback shim: {last}")
        os.replace(tmp, target)
    except subprocess.TimeoutExpired:
        raise LoopbackError(f"{compiler} took over {COMPILE_TIMEOUT:.0f} s to build the loopback shim") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def shim() -> Path:
    """The shim in the cache, compiled now if needed; :class:`LoopbackError` when it cannot be."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return build(cache_root() / "loopback" / f"libloopback_bind-{digest}.so")
