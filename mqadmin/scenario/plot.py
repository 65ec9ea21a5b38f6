"""``--plot``: sends per second by outcome above, writable brokers per NameServer below (and, with
consumers, each group's lag under that: :mod:`mqadmin.scenario.consumer_plot`).

matplotlib is an optional extra (``[plot]``), imported only here and only
when a plot is asked for, with the non-interactive Agg backend.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from mqadmin.output.plotmarks import draw_marks, layout, legend_outside, merge_marks
from mqadmin.scenario.observer import writable
from mqadmin.scenario.report import per_second
from mqadmin.scenario.runner import RunResult
from simclient import OUTCOMES

COLOURS = {"ok": "#2ca02c", "timeout": "#d62728", "no_route": "#9467bd", "rejected": "#ff7f0e",
           "conn_error": "#8c564b", "error": "#7f7f7f"}


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def draw(result: RunResult, path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scn = result.scenario
    if result.consumers is not None:  # a third panel: each consumer group's lag
        height = 9.5
        fig, (top, bottom, lag_ax) = plt.subplots(3, 1, sharex=True, figsize=(12, height), height_ratios=(3, 2, 2))
        panels: tuple[Any, ...] = (top, bottom, lag_ax)
    else:
        height = 7.5
        fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(12, height), height_ratios=(3, 2))
        panels = (top, bottom)
    secs = per_second(result.records, result.end)
    base = [0] * len(secs)
    for outcome in OUTCOMES:
        ys = [s.get(outcome, 0) for s in secs]
        if not any(ys):
            continue
        # one bar per whole second [i, i+1): a failure in second 3 is drawn from t=3, not before
        top.bar(range(len(secs)), ys, width=1.0, align="edge", bottom=base, color=COLOURS.get(outcome), label=outcome,
                edgecolor="white", linewidth=0.3)
        base = [b + y for b, y in zip(base, ys)]
    top.set_ylabel("sends begun per second")
    fig.suptitle(f"{scn.name}: {scn.description}" if scn.description else scn.name, fontsize="medium", x=0.1,
                 ha="left")

    obs = result.observer
    topic = scn.observe_topics[0] if scn.observe_topics else None
    if obs is not None and topic is not None:
        for ns in range(len(result.namesrvs)):
            points = [(e.t, e.after) for e in obs.events if e.namesrv == ns and e.topic == topic]
            if not points:
                continue
            ts = [t for t, _ in points] + [result.end]
            counts = [(-0.5 if s is None else sum(1 for v in s.values() if writable(v))) for _, s in points]
            counts.append(counts[-1])
            bottom.step(ts, [c + ns * 0.06 for c in counts], where="post", label=f"namesrv-{ns}", linewidth=1.8)
        bottom.set_ylabel("writable brokers")
        bottom.set_ylim(-0.8, scn.cluster.brokers + 0.6)
        bottom.set_yticks([-0.5, *range(scn.cluster.brokers + 1)], ["no answer", *map(str, range(scn.cluster.brokers + 1))])
        legend_outside(bottom, title=f"route of\n{topic}", title_fontsize="small")
    actions = []
    for a in result.actions:
        text = a.text if a.action.kind != "wait_until" else "reached: " + a.text.removeprefix("wait_until ")
        actions.append((a.effect, text, a.ok))
    listed = draw_marks(fig, top, panels, merge_marks(actions))
    bottom.set_xlabel("seconds since time zero")
    if result.consumers is not None:
        from mqadmin.scenario import consumer_plot

        consumer_plot.draw(top, bottom, lag_ax, result)
    legend_outside(top)
    bottom.set_xlim(0, max(result.end, 1.0))
    layout(fig, listed, height)
    fig.savefig(path, dpi=110)
    plt.close(fig)
