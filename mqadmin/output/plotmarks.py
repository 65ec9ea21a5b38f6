"""What the two ``--plot`` figures (scenario runs, fan-out runs) share: action marks and legends.

Readability rules learnt the hard way: text drawn on top of bars is unreadable, so actions are
numbered markers above the plot with their words in a list under it; legends sit outside the
axes, right of them, never on a line; per-second values are drawn as flat steps over the whole
second they count (never as points at the middle of it, which makes a drop appear half a second
early). matplotlib is imported by the callers only, with the Agg backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: How to get matplotlib, which ``--plot`` needs (the project is not on any package index).
PLOT_INSTALL = "run pip install -e '.[plot]' in the project directory"
#: Image formats ``--plot`` writes (matplotlib picks the format from the suffix).
PLOT_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".webp")
#: Actions closer than this (s) share one numbered mark.
MERGE_WITHIN = 0.4
#: Longest action text in the list under the plot.
MAX_TEXT = 70


@dataclass
class Mark:
    t: float
    texts: list[tuple[str, bool]]  # (what, whether it took effect)

    @property
    def ok(self) -> bool:
        return all(ok for _, ok in self.texts)


def merge_marks(actions: Sequence[tuple[float, str, bool]]) -> list[Mark]:
    """(time, text, ok) in time order -> marks; near-simultaneous actions share one."""
    marks: list[Mark] = []
    for t, text, ok in sorted(actions, key=lambda a: a[0]):
        text = text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"
        if marks and t - marks[-1].t < MERGE_WITHIN:
            marks[-1].texts.append((text, ok))
        else:
            marks.append(Mark(t, [(text, ok)]))
    return marks


def draw_marks(fig: Any, top: Any, axes: Sequence[Any], marks: Sequence[Mark]) -> int:
    """Dashed lines on every axis, a number above ``top`` at each, and the numbered list under the
    figure; returns how many text lines the list takes (the caller leaves that much room)."""
    lines = []
    for n, m in enumerate(marks, 1):
        colour = "black" if m.ok else "red"
        for ax in axes:
            ax.axvline(m.t, color=colour, linestyle="--", linewidth=0.8)
        top.annotate(str(n), xy=(m.t, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                     textcoords="offset points", ha="center", va="bottom", fontsize="small", color=colour,
                     fontweight="bold")
        for i, (text, ok) in enumerate(m.texts):
            head = f"{n:>2}  t={m.t:6.2f} s  " if i == 0 else " " * 16
            lines.append(head + text + ("" if ok else "  (FAILED)"))
    if lines:
        fig.text(0.01, 0.01, "\n".join(lines), fontsize="small", family="monospace", va="bottom", ha="left")
    return len(lines)


def legend_outside(ax: Any, **kw: Any) -> None:
    """The legend right of the axes, so it never covers a line or a bar."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize="small", **kw)


def layout(fig: Any, list_lines: int, height_in: float) -> None:
    """Room on the right for the legends and under the plots for the action list."""
    line_in = 0.17  # a small monospace line, inches
    bottom = min(0.45, (0.45 + list_lines * line_in + 0.15) / height_in)
    fig.subplots_adjust(left=0.1, right=0.80, top=0.90, bottom=bottom, hspace=0.12)


def seconds_edges(n: int) -> list[int]:
    """Bucket edges 0..n for ``stairs``: second i is drawn over [i, i+1]."""
    return list(range(n + 1))
