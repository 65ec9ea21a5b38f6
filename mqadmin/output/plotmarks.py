"""What the two ``--plot`` figures (scenario runs, fan-out runs) share: action marks, legends, rates.

Readability rules learnt the hard way: text drawn on top of bars is unreadable, so actions are
numbered markers above the plot with their words in a list under it; an action that takes time
(a restart) is marked where it began and shaded until it took effect; legends sit outside the
axes, right of them, never on a line; lines that may lie on top of each other (NameServers that
agree, groups with the same lag) are told apart by their dashes, never moved off their values;
per-second values are drawn as flat steps over the whole second they count (never as points at the
middle of it, which makes a drop appear half a second early), and a second only partly inside the
run (its first or its last) is drawn over that part only, as a rate, never as a whole second's bar
that looks like a collapse. matplotlib is imported by the callers only, with the Agg backend.
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
#: A second covered less than this (s) by the run is drawn as zero: too short a time to give a rate.
MIN_PARTIAL = 0.1
#: (dashes, width) for lines that may coincide, first to last: the first solid and widest, each next one
#: narrower and dashed, so that where they overlap every one of them still shows.
OVERLAP_STYLES: tuple[tuple[Any, float], ...] = (
    ("-", 3.2), ((0, (5, 2)), 2.0), ((0, (2, 2)), 1.4), ((0, (1, 1.5)), 1.0))

#: An action to mark: (when it began, its words, whether it worked[, when it took effect]).
Action = tuple[float, str, bool] | tuple[float, str, bool, float | None]


@dataclass
class Mark:
    t: float
    texts: list[tuple[str, bool]]  # (what, whether it took effect)
    until: float | None = None  # an action that took time: when it took effect (shaded from t to here)

    @property
    def ok(self) -> bool:
        return all(ok for _, ok in self.texts)


def merge_marks(actions: Sequence[Action]) -> list[Mark]:
    """Actions in time order -> marks; near-simultaneous actions share one."""
    marks: list[Mark] = []
    for action in sorted(actions, key=lambda a: a[0]):
        t, text, ok = action[0], action[1], action[2]
        until = action[3] if len(action) > 3 else None
        text = text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"
        if marks and t - marks[-1].t < MERGE_WITHIN:
            marks[-1].texts.append((text, ok))
            if until is not None:
                marks[-1].until = max(until, marks[-1].until or until)
        else:
            marks.append(Mark(t, [(text, ok)], until))
    return marks


def draw_marks(fig: Any, top: Any, axes: Sequence[Any], marks: Sequence[Mark]) -> int:
    """Dashed lines on every axis (and a shade while an action was under way), a number above ``top``
    at each, and the numbered list under the figure; returns how many text lines the list takes (the
    caller leaves that much room)."""
    lines = []
    for n, m in enumerate(marks, 1):
        colour = "black" if m.ok else "red"
        for ax in axes:
            ax.axvline(m.t, color=colour, linestyle="--", linewidth=0.8)
            if m.until is not None and m.until > m.t:
                ax.axvspan(m.t, m.until, color=colour, alpha=0.07, linewidth=0)
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


def rate_pieces(counts: Sequence[float], start: float, end: float) -> list[tuple[float, float, float]]:
    """Counts per whole second i (over [i, i+1)) -> contiguous pieces (from, to, rate per second).

    ``[start, end]`` is when the counted thing could happen (a load, a run). A second wholly inside it
    is one piece of its count; a second it covers in part is drawn over that part only, at the rate
    the count gives there (count / covered seconds), and as zero for the rest of the second; a part
    shorter than MIN_PARTIAL is drawn as zero. Seconds wholly outside keep their counts (a straggler
    is shown, not hidden). Bars and ``stairs`` both take pieces.
    """
    pieces: list[tuple[float, float, float]] = []
    for i, n in enumerate(counts):
        lo, hi = max(float(i), start), min(float(i + 1), end)
        covered = hi - lo
        if covered >= 1.0 - 1e-9 or covered <= 0:
            pieces.append((float(i), float(i + 1), float(n)))
            continue
        if lo > i:
            pieces.append((float(i), lo, 0.0))
        pieces.append((lo, hi, n / covered if covered >= MIN_PARTIAL else 0.0))
        if hi < i + 1:
            pieces.append((hi, float(i + 1), 0.0))
    return pieces


def stairs_of(pieces: Sequence[tuple[float, float, float]]) -> tuple[list[float], list[float]]:
    """(values, edges) for matplotlib's ``stairs``, from contiguous pieces."""
    if not pieces:
        return [], [0.0]
    return [p[2] for p in pieces], [pieces[0][0], *(p[1] for p in pieces)]


def bars(ax: Any, pieces: Sequence[tuple[float, float, float]], bottom: Sequence[float] | None = None,
         **kw: Any) -> list[float]:
    """One bar per piece (from its start, its width, its rate), stacked on ``bottom``; returns the new tops."""
    base = list(bottom) if bottom is not None else [0.0] * len(pieces)
    ax.bar([p[0] for p in pieces], [p[2] for p in pieces], width=[p[1] - p[0] for p in pieces], align="edge",
           bottom=base, **kw)
    return [b + p[2] for b, p in zip(base, pieces)]
