"""``--plot`` for runs with consumers: consumption beside production, and each group's lag over time.

Drawn into axes :mod:`mqadmin.scenario.plot` made (matplotlib is imported
there, only when a plot is asked for): a line of messages consumed per
second over the bars of sends per second, and a panel of lag (messages
acknowledged to a producer and not consumed yet) per consumer group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mqadmin.output.plotmarks import legend_outside
from mqadmin.scenario.consumer_eval import account
from mqadmin.scenario.consumer_report import per_second

if TYPE_CHECKING:
    from mqadmin.scenario.runner import RunResult


def draw(top: Any, routes_ax: Any, lag_ax: Any, result: RunResult) -> None:
    """Consumption on ``top`` (sends per second), lag on ``lag_ax`` (the new bottom panel; the
    caller draws the action marks on it and the legend of ``top``)."""
    run = result.consumers
    if run is None:
        return
    routes_ax.set_xlabel("")
    lag_ax.set_xlabel("seconds since time zero")
    top.set_ylabel("per second: sends begun (bars), consumed (line)")
    consumed = per_second(result)
    xs = [i + 0.5 for i in range(len(consumed))]
    top.plot(xs, consumed, color="#1f77b4", linewidth=1.8, marker=".", label="consumed")
    accounts = account(result.records, run)
    # exact steps, not per-second samples: a lag that lasted a fraction of a second still shows
    for name, acc in accounts.items():
        steps = acc.lag_steps
        if steps:
            lag_ax.step([0.0] + [t for t, _ in steps] + [result.end], [0] + [v for _, v in steps] + [steps[-1][1]],
                        where="post", linewidth=1.5, label=f"lag {name}")
        else:
            lag_ax.plot([0, result.end], [0, 0], linewidth=1.5, label=f"lag {name}")
    lag_ax.set_ylabel("messages not yet consumed")
    legend_outside(lag_ax)


__all__ = ["draw"]
