"""Terminal output for mqadmin: one console, JSON, and tables that fit the terminal.

A table never cuts the values an operator reads first (cluster, broker,
address, status): those columns do not wrap, and when the terminal is too
narrow, low-value columns are dropped (highest ``drop`` rank first) before
anything is squeezed. Colours appear only when stdout is a terminal (Rich's
own detection, which also honours ``NO_COLOR``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

#: Apache-like plain columns: a rule under the header and above a footer section, no vertical lines.
PLAIN = box.Box(
    "    \n"
    "    \n"
    " ── \n"
    "    \n"
    " ── \n"
    " ── \n"
    "    \n"
    "    \n",
    ascii=False,
)

#: A free-text column is not squeezed below this many characters while other columns can be dropped.
WRAP_MIN_WIDTH = 30

#: Width used when stdout is not a terminal and $COLUMNS is unset: scripts get every column.
PIPE_WIDTH = 250


def make_console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    width = None
    if not stream.isatty() and not os.environ.get("COLUMNS"):
        width = PIPE_WIDTH
    return Console(file=stream, width=width, highlight=False, markup=False, soft_wrap=True, emoji=False)


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


@dataclass(frozen=True)
class Col:
    """A table column; ``drop`` 0 = always shown, else dropped (highest first) when narrow."""

    header: str
    drop: int = 0
    justify: str = "left"
    wrap: bool = False  # long free text (errors) may wrap; identities never do while they fit


Cell = str | Text


def fit_table(
    columns: Sequence[Col],
    rows: Sequence[Sequence[Cell]],
    *,
    width: int | None = None,
    title: str | None = None,
    console: Console | None = None,
    footer_rows: Sequence[Sequence[Cell]] = (),
) -> Table:
    """A table of ``rows`` that fits ``width`` (default: the console's).

    Free-text (``wrap``) columns wrap first; if the rest still does not fit,
    columns are dropped, highest ``drop`` rank first.
    """
    console = console or current_console()
    width = width or console.width
    keep = list(range(len(columns)))
    while True:
        def build(fold_all: bool) -> Table:
            return _build([columns[i] for i in keep], [[r[i] for i in keep] for r in rows],
                          [[r[i] for i in keep] for r in footer_rows], title, fold_all)

        table = build(False)
        if _min_width(console, table) <= width:  # free-text columns may wrap, the others fit whole
            return table
        droppable = [i for i in keep if columns[i].drop > 0]
        if not droppable:
            return build(True)  # still too wide: fold every value onto more lines, never cut one
        worst = max(droppable, key=lambda i: (columns[i].drop, i))
        keep.remove(worst)


def _build(
    columns: Sequence[Col], rows: Sequence[Sequence[Cell]], footer: Sequence[Sequence[Cell]], title: str | None,
    fold_all: bool,
) -> Table:
    table = Table(box=PLAIN, title=title, title_justify="left", pad_edge=False, show_edge=False, padding=(0, 1, 0, 0))
    for i, col in enumerate(columns):
        no_wrap = not (fold_all or col.wrap)
        min_width = None
        if not fold_all:  # headers never wrap; free text keeps a readable width before columns are dropped
            longest = max((len(r[i].plain if isinstance(r[i], Text) else r[i]) for r in rows), default=0)
            min_width = max(len(col.header), min(WRAP_MIN_WIDTH, longest) if col.wrap else 0)
        table.add_column(col.header, justify=col.justify, no_wrap=no_wrap, overflow="fold",  # type: ignore[arg-type]
                         min_width=min_width)
    for row in rows:
        table.add_row(*row)
    if footer:
        table.add_section()
        for row in footer:
            table.add_row(*row)
    return table


def _min_width(console: Console, renderable: RenderableType) -> int:
    return console.measure(renderable, options=console.options.update_width(100_000)).minimum


def _natural_width(console: Console, renderable: RenderableType) -> int:
    return console.measure(renderable, options=console.options.update_width(100_000)).maximum


def status_text(ok: bool, text: str) -> Text:
    return Text(text, style="green" if ok else "red")


def fit_variants(
    variants: Sequence[tuple[Sequence[Col], Sequence[Sequence[Cell]]]],
    *,
    width: int | None = None,
    title: str | None = None,
    console: Console | None = None,
) -> Table:
    """The first variant (fullest first) that fits whole; else the last one, fitted by dropping columns."""
    console = console or current_console()
    width = width or console.width
    for columns, rows in variants[:-1]:
        table = _build(columns, rows, (), title, False)
        if _natural_width(console, table) <= width:
            return table
    columns, rows = variants[-1]
    return fit_table(columns, rows, width=width, title=title, console=console)
