"""Read a file that a setting names, as a regular file of bounded size.

Both servers read files at start whose paths come from configuration: the
NameServer's route snapshot, KV table and config file, the broker's topics,
subscription groups, consumer offsets and config file, and either server's
accounts file (``aclConfigPath``, also re-read while it runs). A plain ``open()``
trusts the path: a FIFO there blocks the open until some writer appears, so
the server never starts, and a symlink to ``/dev/zero`` reads until the
caller's size bound, holding hundreds of MB before the content is refused.

So the file is opened with ``O_NONBLOCK`` (a FIFO opens at once, with no
writer), checked with ``fstat`` on the open descriptor (no window for a
rename between the check and the open), refused unless it is a regular file
no larger than the caller's bound, and only then read, never past that
bound (a file that grows meanwhile is refused too).

The refusal is an ``OSError`` whose ``strerror`` says why in a few words,
so callers that already turn an ``OSError`` into one log line keep doing so.
"""

from __future__ import annotations

import errno
import os
import stat

from remoting import properties

#: Largest config file either server reads with ``-c`` (a Java one is a few KB).
CONFIG_FILE_MAX_BYTES = 1024 * 1024

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class RefusedFile(OSError):
    """A path that exists but is not a regular file within the size bound.

    ``oversize`` tells a file refused for its size from one of the wrong kind,
    so a caller can name the setting that raises the bound.
    """

    def __init__(self, reason: str, *, oversize: bool = False) -> None:
        super().__init__(errno.EINVAL, reason)
        self.oversize = oversize

    def __str__(self) -> str:
        return str(self.strerror)


def describe(mode: int) -> str:
    """What kind of file ``mode`` (an ``st_mode``) names, in a few words."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "of an unknown kind"


def read_regular_file_stat(path: str, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """The bytes of ``path`` and its ``fstat``.

    Raises FileNotFoundError when nothing is there, :class:`RefusedFile`
    when it is not a regular file or is larger than ``max_bytes``, and any
    other ``OSError`` the system gives (permissions, I/O errors).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RefusedFile(f"is {describe(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise RefusedFile(f"is {info.st_size} bytes, larger than the {max_bytes}-byte bound", oversize=True)
        chunks = []
        got = 0
        request = info.st_size + 1  # one read for the whole file, one more to see its end
        while got <= max_bytes:
            chunk = os.read(fd, min(request, max_bytes + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            request = 1024 * 1024  # it grew since the fstat: read on in pieces, up to the bound
        if got > max_bytes:
            raise RefusedFile(f"grew past the {max_bytes}-byte bound while it was read", oversize=True)
    finally:
        os.close(fd)
    return b"".join(chunks), info


def read_regular_file(path: str, max_bytes: int) -> bytes:
    """:func:`read_regular_file_stat` without the stat."""
    return read_regular_file_stat(path, max_bytes)[0]


def read_regular_text(path: str, max_bytes: int = CONFIG_FILE_MAX_BYTES) -> str:
    """A UTF-8 text file (a config file), read as :func:`read_regular_file` does."""
    return read_regular_file(path, max_bytes).decode("utf-8")


def load_text(path: str, error: type[Exception], *, what: str = "config file",
              max_bytes: int = CONFIG_FILE_MAX_BYTES, missing: str | None = None) -> str:
    """The text of the file a setting or an option names, or ``error`` with one line saying what is wrong
    (``missing``, when given, is the line for a file that does not exist).

    The one loader of the files a program is told to read at start (a
    server's ``-c`` file, the local cluster's record): bounded and safe
    against FIFOs and devices as :func:`read_regular_file` is, and every
    failure one line that names the file.
    """
    try:
        return read_regular_text(path, max_bytes)
    except FileNotFoundError:
        raise error(missing or f"{what} {path} does not exist") from None
    except RefusedFile as exc:  # a FIFO, a device, a directory or too large: nothing was read
        raise error(f"{what} {path} {exc}") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise error(f"cannot read {what} {path}: {exc}") from None


def load_properties(path: str, error: type[Exception], *, what: str = "config file") -> dict[str, str]:
    """A Java ``.properties`` file, loaded as :func:`load_text` loads it."""
    text = load_text(path, error, what=what)
    try:
        return properties.loads(text)
    except properties.PropertiesError as exc:
        raise error(f"{what} {path}: {exc}") from None


__all__ = [
    "CONFIG_FILE_MAX_BYTES",
    "load_properties",
    "load_text",
    "RefusedFile",
    "describe",
    "read_regular_file",
    "read_regular_file_stat",
    "read_regular_text",
]
