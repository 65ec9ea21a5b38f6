"""Where a server's log goes: stderr, or a file that rotates by size.

With ``logFile`` empty (the default) both servers log to stderr, as they
always did: a supervisor, a test or a shell redirect owns the output. With
``logFile`` set, the server writes the file itself and rotates it when the
next line would take it past ``logFileMaxSize`` bytes: ``namesrv.log``
becomes ``namesrv.log.1``, the older ones shift up, and at most
``logFileMaxIndex`` of them are kept (the names of RocketMQ's own client
logging settings, ``rocketmq.client.logFileMaxSize`` / ``logFileMaxIndex``).
A log then never holds more than ``(logFileMaxIndex + 1) x logFileMaxSize``
bytes on disk, whatever the server is sent.

Under ``mqadmin start`` the process's stdout and stderr are redirected to
that same file (the boot line and anything printed outside the logging
module land there). A redirected descriptor would keep writing into the
renamed file, so when it names the log file, it is moved onto the new file
at each rotation.

The log file must be a regular file (or missing): it is opened with
``O_NONBLOCK`` and checked with ``fstat``, so a FIFO at that path is refused
with one line instead of blocking the start (:mod:`server_runtime.regular_file`).
"""

from __future__ import annotations

import errno
import logging
import logging.handlers
import os
import stat
import sys
from typing import IO, Any

from server_runtime.regular_file import RefusedFile, describe

FORMAT = "%(asctime)s %(levelname)s %(name)s - %(message)s"
DEFAULT_MAX_SIZE = 50 * 1024 * 1024
DEFAULT_MAX_INDEX = 5
#: Bounds of the two keys (Java ints; a log file under 4 KiB would rotate on every few lines).
MAX_SIZE_RANGE = (4096, 2**31 - 1)
MAX_INDEX_RANGE = (1, 1000)


class RotatingLog(logging.handlers.RotatingFileHandler):
    """A RotatingFileHandler that opens only regular files and carries redirected stdout/stderr along."""

    def __init__(self, path: str, max_bytes: int, backups: int) -> None:
        self._follow: tuple[int, ...] = ()
        super().__init__(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
        assert self.stream is not None
        mine = os.fstat(self.stream.fileno())
        self._follow = tuple(fd for fd in (1, 2) if _same_file(fd, mine))

    def _open(self) -> IO[Any]:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY
        try:
            fd = os.open(self.baseFilename, flags, 0o644)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: a FIFO with no reader (or a socket) refuses a non-blocking open
                raise
            raise RefusedFile(f"is {describe(os.stat(self.baseFilename).st_mode)}, not a regular file") from None
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise RefusedFile(f"is {describe(mode)}, not a regular file")
            os.set_blocking(fd, True)
            return open(fd, "a", encoding=self.encoding, errors=self.errors)
        except BaseException:
            os.close(fd)
            raise

    def doRollover(self) -> None:
        super().doRollover()
        if self._follow and self.stream is not None:
            for out in (sys.stdout, sys.stderr):
                if out is not None:
                    out.flush()
            for fd in self._follow:
                os.dup2(self.stream.fileno(), fd)


def _same_file(fd: int, info: os.stat_result) -> bool:
    try:
        other = os.fstat(fd)
    except OSError:
        return False
    return (other.st_dev, other.st_ino) == (info.st_dev, info.st_ino)


def configure(log_file: str, max_size: int = DEFAULT_MAX_SIZE, max_index: int = DEFAULT_MAX_INDEX) -> None:
    """Send the root logger's INFO and above to stderr (``log_file`` empty) or to a rotating file.

    Raises OSError (a :class:`RefusedFile` for a FIFO, a device or a
    directory) when the file cannot be opened; the caller makes it one line.
    """
    handler: logging.Handler
    if log_file:
        directory = os.path.dirname(os.path.abspath(log_file))
        os.makedirs(directory, exist_ok=True)
        handler = RotatingLog(log_file, max_size, max_index)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO)


__all__ = ["DEFAULT_MAX_INDEX", "DEFAULT_MAX_SIZE", "MAX_INDEX_RANGE", "MAX_SIZE_RANGE", "RotatingLog", "configure"]
