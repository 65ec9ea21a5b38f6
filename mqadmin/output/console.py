"""mqadmin's terminal: one console for stdout, and JSON.

Colours appear only when stdout is a terminal (Rich's own detection, which
also honours ``NO_COLOR``). Off a terminal the output does not depend on the
terminal at all: $COLUMNS is ignored, the width is unbounded (scripts get every
column, whole), and the padding Rich adds at line ends is dropped.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO, cast

from rich.console import Console

#: Width used when stdout is not a terminal, whatever $COLUMNS says: wide enough that nothing is ever
#: wrapped or dropped, so a script sees the same columns on every machine.
PIPE_WIDTH = 100_000


class _TrimmedLines:
    """A text stream that drops the spaces Rich pads table rows with before each newline.

    Off a terminal the padding is invisible but not harmless: ``grep 'OK$'``, diffs and
    copy-paste all see it. Partial lines are held until their newline (or ``flush``).
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._pending = ""

    def write(self, text: str) -> int:
        data = self._pending + text
        head, sep, self._pending = data.rpartition("\n")
        if sep:
            self.stream.write("\n".join(line.rstrip(" ") for line in head.split("\n")) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self.stream.write(self._pending)
            self._pending = ""
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", None) or "utf-8"


class ReaderGone(Exception):
    """stdout's reader closed the pipe (``mqadmin ... | head -1``). Not an OSError on purpose: Click
    turns an EPIPE OSError into exit 1; this one goes up to the entry point, which ends the command
    quietly (:func:`mqadmin.commands.results.reader_gone`)."""


class _Console(Console):
    """Rich's console, but a reader that went away is :class:`ReaderGone` (Rich would exit 1)."""

    def on_broken_pipe(self) -> None:
        raise ReaderGone


def make_console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    width = None if tty else PIPE_WIDTH
    file: Any = stream if tty else _TrimmedLines(stream)
    return _Console(file=file, width=width, highlight=False, markup=False, soft_wrap=True, emoji=False)


class _CurrentConsole:
    """Stands for the console of the *current* stdout and $COLUMNS, so a command run
    in-process with redirected output (tests, Typer's CliRunner) renders like a real one."""

    def __init__(self) -> None:
        self._key: tuple[int, str | None] | None = None
        self._console: Console | None = None

    def current(self) -> Console:
        key = (id(sys.stdout), os.environ.get("COLUMNS"))
        if self._console is None or key != self._key:
            self._key, self._console = key, make_console()
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.current(), name)


out: Console = cast(Console, _CurrentConsole())


def current_console() -> Console:
    """The real Console behind :data:`out` right now (for Rich Live, which needs the object itself)."""
    return out.current()  # type: ignore[attr-defined]


def print_json(value: Any, indent: int | None = 2) -> None:
    write_out(json.dumps(value, indent=indent) + "\n")


def write_out(text: str) -> None:
    """Plain text to stdout, flushed (a line of a long-running command is seen at once)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise ReaderGone from None
