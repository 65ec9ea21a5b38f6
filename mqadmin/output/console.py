"""mqadmin's terminal: one console for stdout, and JSON.

Colours appear only when stdout is a terminal (Rich's own detection, which
also honours ``NO_COLOR``). Off a terminal the width is fixed (scripts get
every column) and the padding Rich adds at line ends is dropped.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO, cast

from rich.console import Console

#: Width used when stdout is not a terminal and $COLUMNS is unset: scripts get every column.
PIPE_WIDTH = 250


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


def make_console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    width = None
    tty = stream.isatty()
    if not tty and not os.environ.get("COLUMNS"):
        width = PIPE_WIDTH
    file: Any = stream if tty else _TrimmedLines(stream)
    return Console(file=file, width=width, highlight=False, markup=False, soft_wrap=True, emoji=False)


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


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")
    sys.stdout.flush()
