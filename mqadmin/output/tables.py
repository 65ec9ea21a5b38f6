"""Tables that fit the terminal, and Apache's plain columns everywhere else.

On a terminal a table never cuts the values an operator reads first (cluster,
broker, address, status): those columns do not wrap, and when the terminal is
too narrow, low-value columns are dropped (highest ``drop`` rank first) before
anything is squeezed. Off a terminal (a pipe, a file) the layout is Apache
mqadmin's: a ``#Header`` line and one line per row, columns two spaces apart,
no rule lines, every column, nothing wrapped, whatever $COLUMNS says.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from mqadmin.output.console import current_console

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
    if not console.is_terminal:
        return _plain(columns, rows, footer_rows, title)
    width = width or console.width
    table = _fit_dropping(console, columns, rows, footer_rows, title, width, floor=1, measure=_min_width)
    if table is not None:
        return say_hidden(table, columns, width)
    keep = [i for i, c in enumerate(columns) if c.drop == 0]
    cols = [columns[i] for i in keep]
    body = [[r[i] for i in keep] for r in rows]
    foot = [[r[i] for i in keep] for r in footer_rows]
    # Nothing left to drop: free text wraps down to its longest word, then folds inside words, while
    # identities (topic, broker, address) stay whole; only if they alone are too wide does anything else fold.
    table = _build(cols, body, foot, title, "squeeze")
    if _min_width(console, table) > width:
        text_widths = _share_of_text(cols, body, width)
        if text_widths is not None:
            table = _build(cols, body, foot, title, "fold-text", text_widths)
        else:
            table = _build(cols, body, foot, title, "fold")  # every value folds onto more lines, none is cut
    return say_hidden(table, columns, width)


def say_hidden(table: Table, columns: Sequence[Col], width: int) -> Table:
    """A caption under ``table`` naming the ``columns`` it does not show, so a narrow terminal never
    drops a column silently (a column shown under a shorter header, ``#InTPS`` for ``#InTPS(LOAD)``,
    is named with it). Nothing when every column is shown."""
    shown = [str(c.header) for c in table.columns]
    hidden = []
    for col in columns:
        if col.header in shown:
            continue
        short = next((h for h in shown if col.header.startswith(h)), None)
        hidden.append(col.header if short is None else f"{col.header} (as {short})")
    if hidden:
        note = f"not shown, {width} columns too narrow: {', '.join(hidden)} (--json or a pipe shows all)"
        table.caption = "\n".join(textwrap.wrap(note, max(20, width)))  # wrapped here: the console does not wrap
        table.caption_justify = "left"
    return table


#: Narrowest a free-text column is folded to while identities stay whole.
FOLD_MIN_WIDTH = 8


def _share_of_text(columns: Sequence[Col], rows: Sequence[Sequence[Cell]], width: int) -> dict[int, int] | None:
    """Widths for the free-text columns once every identity column has its whole width (None if the
    identities leave less than FOLD_MIN_WIDTH each). Rich's own measure cannot express "may fold"."""
    text = [i for i, c in enumerate(columns) if c.wrap]
    if not text:
        return None
    fixed = sum(max([len(c.header), *(len(_text_of(r[i])) for r in rows)]) for i, c in enumerate(columns) if not c.wrap)
    left = width - fixed - 2 * (len(columns) - 1)  # one pad and one divider between columns
    share = left // len(text)
    if share < FOLD_MIN_WIDTH:
        return None
    return {i: share for i in text}


def _fit_dropping(
    console: Console, columns: Sequence[Col], rows: Sequence[Sequence[Cell]], footer_rows: Sequence[Sequence[Cell]],
    title: str | None, width: int, *, floor: int, measure: Any,
) -> Table | None:
    """The table without as few columns as needed (highest ``drop`` first, only ranks >= ``floor``)
    that ``measure``s within ``width``; None if dropping all of those is not enough."""
    keep = list(range(len(columns)))
    while True:
        table = _build([columns[i] for i in keep], [[r[i] for i in keep] for r in rows],
                       [[r[i] for i in keep] for r in footer_rows], title, "normal")
        if measure(console, table) <= width:  # free-text columns may wrap, the others fit whole
            return table
        droppable = [i for i in keep if columns[i].drop >= floor]
        if not droppable:
            return None
        keep.remove(max(droppable, key=lambda i: (columns[i].drop, i)))


def _plain(columns: Sequence[Col], rows: Sequence[Sequence[Cell]], footer: Sequence[Sequence[Cell]],
           title: str | None) -> Table:
    """Apache's plain columns (off a terminal): no box, no rules, nothing wrapped or dropped, and every
    column left-aligned, so each header starts where its values start (``awk``, ``cut -c`` and an eye
    reading down a column all find them there)."""
    table = Table(box=None, title=title, title_justify="left", pad_edge=False, show_edge=False, padding=(0, 2, 0, 0))
    for col in columns:
        table.add_column(col.header, justify="left", no_wrap=True)
    for row in [*rows, *footer]:
        table.add_row(*row)
    return table


def _text_of(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _build(
    columns: Sequence[Col], rows: Sequence[Sequence[Cell]], footer: Sequence[Sequence[Cell]], title: str | None,
    mode: str, widths: dict[int, int] | None = None,
) -> Table:
    """``normal``: identities whole, free text at least WRAP_MIN_WIDTH wide; ``squeeze``: free text down
    to its longest word; ``fold-text``: free text folds anywhere; ``fold``: anything may fold (the last resort)."""
    table = Table(box=PLAIN, title=title, title_justify="left", pad_edge=False, show_edge=False, padding=(0, 1, 0, 0))
    for i, col in enumerate(columns):
        no_wrap = mode != "fold" and not col.wrap
        min_width = None
        if mode != "fold":  # headers never wrap; free text keeps a readable width before columns are dropped
            cells = [_text_of(r[i]) for r in rows]
            if not col.wrap:
                min_width = max([len(col.header), *map(len, cells)])
            elif mode == "normal":
                min_width = max(len(col.header), min(WRAP_MIN_WIDTH, max(map(len, cells), default=0)))
            elif mode == "squeeze":
                min_width = max([len(col.header), *(len(w) for c in cells for w in c.split())])
        width = (widths or {}).get(i)
        header = col.header if width is None else Text(col.header, overflow="fold")
        table.add_column(header, justify=col.justify, no_wrap=no_wrap, overflow="fold",  # type: ignore[arg-type]
                         min_width=None if width is not None else min_width, width=width)
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


#: A table variant: its columns and rows, and optionally the lowest drop rank it may give up to fit.
Variant = tuple[Sequence[Col], Sequence[Sequence[Cell]]] | tuple[Sequence[Col], Sequence[Sequence[Cell]], int]


def fit_variants(
    variants: Sequence[Variant],
    *,
    width: int | None = None,
    title: str | None = None,
    console: Console | None = None,
) -> Table:
    """The first variant (fullest first) that fits whole; else the last one, fitted by dropping columns.

    A variant may name a drop rank (third element): its columns of that rank or higher may be dropped
    to make it fit before the next variant is tried (``clusterList`` gives up the timer column before
    the thread-pool load details).
    """
    console = console or current_console()
    if not console.is_terminal:  # the fullest variant: a script gets every column
        return _plain(variants[0][0], variants[0][1], (), title)
    width = width or console.width
    for variant in variants[:-1]:
        columns, rows = variant[0], variant[1]
        floor = variant[2] if len(variant) > 2 else None  # type: ignore[misc]
        if floor is None:
            table = _build(columns, rows, (), title, "normal")
            if _natural_width(console, table) <= width:
                return say_hidden(table, variants[0][0], width)
            continue
        fitted = _fit_dropping(console, columns, rows, (), title, width, floor=floor, measure=_natural_width)
        if fitted is not None:
            return say_hidden(fitted, variants[0][0], width)
    columns, rows = variants[-1][0], variants[-1][1]
    return say_hidden(fit_table(columns, rows, width=width, title=title, console=console), variants[0][0], width)
