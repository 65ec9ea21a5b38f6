"""``--plot``: sends per second above (stored on each broker, failed by outcome, and the sends that were
retried), writable brokers per NameServer below (and, with consumers, each group's lag under that:
:mod:`mqadmin.scenario.consumer_plot`).

matplotlib is an optional extra (``[plot]``), imported only here and only
when a plot is asked for, with the non-interactive Agg backend.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mqadmin.output.plotmarks import (
    OVERLAP_STYLES,
    Action,
    bars,
    draw_marks,
    layout,
    legend_outside,
    merge_marks,
    rate_pieces,
    stairs_of,
)
from mqadmin.scenario.observer import writable
from mqadmin.scenario.report import per_second
from mqadmin.scenario.runner import EFFECT_AT_END, ActionResult, RunResult
from simclient import OUTCOMES, SendRecord

COLOURS = {"ok": "#2ca02c", "timeout": "#d62728", "no_route": "#9467bd", "rejected": "#ff7f0e",
           "conn_error": "#8c564b", "error": "#7f7f7f"}
#: Stored sends, one shade per broker (then round again): the shift of traffic between brokers shows.
BROKER_GREENS = ("#2ca02c", "#98df8a", "#006d2c", "#74c476", "#c7e9c0", "#31a354")


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def send_series(records: Sequence[SendRecord], end: float) -> dict[str, list[int]]:
    """Sends begun in each whole second, by what became of them: ``ok <broker>`` for each broker stored on,
    each failed outcome, and ``retried`` (sends that needed more than one attempt, whatever their end)."""
    seconds = len(per_second(records, end))
    series: dict[str, list[int]] = {}
    for r in records:
        i = min(seconds - 1, max(0, int(r.t)))
        keys = [f"ok {r.broker}" if r.outcome == "ok" else r.outcome] + (["retried"] if r.attempts > 1 else [])
        for key in keys:
            series.setdefault(key, [0] * seconds)[i] += 1
    return series


def load_span(result: RunResult) -> tuple[float, float]:
    """When the producers were sending: from the first group's start to the last group's end."""
    groups = result.scenario.groups
    return min(g.start for g in groups), max(g.start + g.duration for g in groups)


def action_marks(actions: Sequence[ActionResult]) -> list[Action]:
    """Each action where it began; one that takes time (a restart, a wait) shaded until it took effect."""
    marks: list[Action] = []
    for a in actions:
        if a.action.kind not in EFFECT_AT_END:
            marks.append((a.start, a.text, a.ok))
            continue
        if a.action.kind == "wait_until":
            what = a.text.removeprefix("wait_until ")
            text = f"wait until {what}: " + (f"reached at t={a.end:.2f} s" if a.ok else "not reached")
        else:
            text = a.text + (f" (up again at t={a.end:.2f} s)" if a.ok else "")
        marks.append((a.start, text, a.ok, a.end))
    return marks


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
    series = send_series(result.records, result.end)
    start, end = load_span(result)
    base: list[float] | None = None
    brokers = sorted(k for k in series if k.startswith("ok "))
    for i, key in enumerate([*brokers, *(o for o in OUTCOMES if o != "ok" and o in series)]):
        pieces = rate_pieces(series[key], start, end)
        colour = BROKER_GREENS[i % len(BROKER_GREENS)] if key.startswith("ok ") else COLOURS.get(key)
        label = f"ok, stored on {key[3:]}" if key.startswith("ok ") else key
        base = bars(top, pieces, base, color=colour, label=label, edgecolor="white", linewidth=0.3)
    if "retried" in series:
        values, edges = stairs_of(rate_pieces(series["retried"], start, end))
        top.stairs(values, edges, color="black", linewidth=1.5, label="retried (another attempt)")
    top.set_ylabel("sends begun per second")
    fig.suptitle(f"{scn.name}: {scn.description}" if scn.description else scn.name, fontsize="medium", x=0.1,
                 ha="left")
    _draw_routes(bottom, result)
    listed = draw_marks(fig, top, panels, merge_marks(action_marks(result.actions)))
    bottom.set_xlabel("seconds since time zero")
    if result.consumers is not None:
        from mqadmin.scenario import consumer_plot

        consumer_plot.draw(top, bottom, lag_ax, result)
    legend_outside(top)
    bottom.set_xlim(0, max(result.end, 1.0))
    layout(fig, listed, height)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _draw_routes(ax: Any, result: RunResult) -> None:
    """Writable brokers in the first observed topic's route, one step line per NameServer, on their true
    values: where the NameServers agree the lines lie on each other, told apart by their dashes."""
    scn = result.scenario
    obs = result.observer
    topic = scn.observe_topics[0] if scn.observe_topics else None
    if obs is None or topic is None:
        return
    for ns in range(len(result.namesrvs)):
        points = [(e.t, e.after) for e in obs.events if e.namesrv == ns and e.topic == topic]
        if not points:
            continue
        ts = [t for t, _ in points] + [result.end]
        counts = [(-0.5 if s is None else sum(1 for v in s.values() if writable(v))) for _, s in points]
        counts.append(counts[-1])
        dashes, width = OVERLAP_STYLES[ns % len(OVERLAP_STYLES)]
        ax.step(ts, counts, where="post", label=f"namesrv-{ns}", linewidth=width, linestyle=dashes)
    ax.set_ylabel("writable brokers")
    ax.set_ylim(-0.8, scn.cluster.brokers + 0.6)
    ax.set_yticks([-0.5, *range(scn.cluster.brokers + 1)], ["no answer", *map(str, range(scn.cluster.brokers + 1))])
    legend_outside(ax, title=f"route of\n{topic}\n(lines overlap\nwhere they agree)", title_fontsize="small")
