"""``--plot`` for runs with consumers: each group's consumption beside production, and each group's lag.

Drawn into axes :mod:`mqadmin.scenario.plot` made (matplotlib is imported
there, only when a plot is asked for): one line per consumer group of the
messages it consumed per second, over the bars of sends per second (every
group reads every message, so a sum of groups would read as duplicates),
and a panel of lag (messages acknowledged to a producer and not consumed
yet) per group. A group's line has the same colour in both panels; lines
that may coincide are told apart by their dashes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mqadmin.output.plotmarks import OVERLAP_STYLES, legend_outside, rate_pieces, stairs_of
from mqadmin.scenario.consumer_eval import account
from mqadmin.scenario.consumer_report import per_second

if TYPE_CHECKING:
    from mqadmin.scenario.runner import RunResult

#: One colour per consumer group (then round again), apart from the bars' greens and reds.
GROUP_COLOURS = ("#1f77b4", "#ff7f0e", "#9467bd", "#17becf", "#e377c2", "#8c564b")


def draw(top: Any, routes_ax: Any, lag_ax: Any, result: RunResult) -> None:
    """Consumption on ``top`` (sends per second), lag on ``lag_ax`` (the new bottom panel; the
    caller draws the action marks on it and the legend of ``top``)."""
    run = result.consumers
    if run is None:
        return
    routes_ax.set_xlabel("")
    lag_ax.set_xlabel("seconds since time zero")
    top.set_ylabel("per second: sends begun (bars),\nconsumed by each group (lines)")
    accounts = account(result.records, run)
    for i, spec in enumerate(run.specs):
        colour = GROUP_COLOURS[i % len(GROUP_COLOURS)]
        dashes, width = OVERLAP_STYLES[i % len(OVERLAP_STYLES)]
        # consumers run from time zero to the end: only the last, partial second is drawn as a part
        values, edges = stairs_of(rate_pieces(per_second(result, spec.group), 0.0, result.end))
        top.stairs(values, edges, color=colour, linewidth=min(width, 2.0), linestyle=dashes,
                   label=f"consumed by {spec.name}")
        # exact steps, not per-second samples: a lag that lasted a fraction of a second still shows
        steps = accounts[spec.name].lag_steps
        ts = [0.0] + [t for t, _ in steps] + [result.end]
        lags = [0] + [v for _, v in steps] + [steps[-1][1] if steps else 0]
        lag_ax.step(ts, lags, where="post", color=colour, linewidth=width, linestyle=dashes, label=f"lag {spec.name}")
    lag_ax.set_ylabel("messages not yet consumed")
    legend_outside(lag_ax, title="(lines overlap\nwhere equal)", title_fontsize="small")


__all__ = ["draw"]
