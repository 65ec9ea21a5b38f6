"""``--plot``: sends per second by outcome above, writable brokers per NameServer below.

matplotlib is an optional extra (``[plot]``), imported only here and only
when a plot is asked for, with the non-interactive Agg backend.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

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
        fig, (top, bottom, lag_ax) = plt.subplots(3, 1, sharex=True, figsize=(11, 8.5), height_ratios=(3, 2, 2))
    else:
        fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(11, 6.5), height_ratios=(3, 2))
    secs = per_second(result.records, result.end)
    xs = [i + 0.5 for i in range(len(secs))]
    base = [0] * len(secs)
    for outcome in OUTCOMES:
        ys = [s.get(outcome, 0) for s in secs]
        if not any(ys):
            continue
        top.bar(xs, ys, width=0.9, bottom=base, color=COLOURS.get(outcome), label=outcome)
        base = [b + y for b, y in zip(base, ys)]
    top.set_ylabel("sends begun per second")
    top.legend(loc="upper right", fontsize="small")
    top.set_title(f"{scn.name}: {scn.description}", fontsize="medium", loc="left", wrap=True)

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
        bottom.legend(loc="upper right", fontsize="small", title=f"route of {topic}", title_fontsize="small")
    marks: list[tuple[float, list[str], bool]] = []  # actions closer than 0.4 s share one mark
    for a in result.actions:
        text = a.text if a.action.kind != "wait_until" else "reached: " + a.text.removeprefix("wait_until ")
        text = text if len(text) <= 48 else text[:47] + "…"
        if marks and a.effect - marks[-1][0] < 0.4:
            marks[-1][1].append(text)
            marks[-1] = (marks[-1][0], marks[-1][1], marks[-1][2] and a.ok)
        else:
            marks.append((a.effect, [text], a.ok))
    for t, texts, ok in marks:
        for ax in (top, bottom):
            ax.axvline(t, color="black" if ok else "red", linestyle="--", linewidth=0.8)
        top.annotate("\n".join(texts), xy=(t, 0.98), xycoords=("data", "axes fraction"), rotation=90, va="top",
                     ha="right", fontsize="x-small")
    bottom.set_xlabel("seconds since time zero")
    if result.consumers is not None:
        from mqadmin.scenario import consumer_plot

        consumer_plot.draw(top, bottom, lag_ax, result)
    bottom.set_xlim(0, max(result.end, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
