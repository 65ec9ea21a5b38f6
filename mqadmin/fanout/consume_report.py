"""The fan-out report's consumers part: a table, its JSON section, its line on the plot.

The table has one row per consumer group (the first ``MAX_GROUP_ROWS``, then
a total): acknowledged messages of the group's topics, consumed, lag (not
consumed yet, at or past the offset the group committed, as the brokers
count lag), unexplained (not consumed although the committed offset is past
it), consumed-but-not-acknowledged (earlier messages, or sends that timed
out after being stored) and duplicates; above it, deliveries (distinct and
re-delivered), consumed/s and the end-to-end latency (broker store time to
consumption); under it, when there were re-deliveries, when they came and why
they do not fail the run.

Re-deliveries are RocketMQ's at-least-once delivery at work: when a rebalance
moves a queue to another consumer of the group, the new owner reads it from the
group's committed offset, so the messages consumed since the last commit are
delivered again. The fan-out reports them and does not fail on them (a
scenario can bound them with ``max_duplicates``); a message never consumed is
what fails it (``unexplained``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console, RenderableType
from rich.text import Text

from mqadmin.fanout.consume import consumers_doc
from mqadmin.output.tables import Col, fit_table

if TYPE_CHECKING:
    from mqadmin.fanout.runner import FanoutResult

MAX_GROUP_ROWS = 20


def to_json(result: FanoutResult, window: float) -> dict[str, Any] | None:
    consume = result.metrics.consume
    if consume is None or result.consumer_rows is None:
        return None
    return consumers_doc(consume, result.consumer_rows, window)


def render(doc: dict[str, Any] | None, console: Console | None = None) -> list[RenderableType]:
    if doc is None:
        return []
    lat = doc["latencyMs"]
    head = Text(f"{doc['consumers']:,} consumers in {doc['groups']} group(s): {doc['consumptions']:,} deliveries "
                f"({doc['distinct']:,} distinct, {doc['redeliveries']:,} re-deliveries), "
                f"{doc['perSecond'] or 0:,.1f}/s, end-to-end p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms, "
                f"max {lat['max']:.0f} ms; {doc['pulls']:,} pulls, {doc['rebalances']:,} rebalances")
    cols = [Col("#Group"), Col("#Consumers", justify="right"), Col("#Acked", justify="right"),
            Col("#Consumed", justify="right"), Col("#Lag", justify="right"), Col("#Unexplained", justify="right"),
            Col("#Not acked", 2, "right"), Col("#Dups", justify="right"), Col("#Broker lag", 1, "right")]

    def row(r: dict[str, Any], name: str) -> list[Any]:
        bad = r["unexplained"]
        return [name, f"{r.get('members', ''):,}" if isinstance(r.get("members"), int) else "", f"{r['acknowledged']:,}",
                f"{r['consumed']:,}", f"{r['lag']:,}", Text(f"{bad:,}", style="red" if bad else "green"),
                f"{r['other']:,}", f"{r['duplicates']:,}",
                "-" if r.get("brokerLag") is None else f"{r['brokerLag']:,}"]

    groups = doc["byGroup"]
    rows = [row(r, r["group"]) for r in groups[:MAX_GROUP_ROWS]]
    if len(groups) > MAX_GROUP_ROWS:
        rows.append([f"... {len(groups) - MAX_GROUP_ROWS} more groups", "", "", "", "", "", "", "", ""])
    total = {**doc["total"], "members": doc["consumers"],
             "brokerLag": None if any(r.get("brokerLag") is None for r in groups) else sum(r["brokerLag"] for r in groups)}
    verdict = "reconciled: every acknowledged message consumed or lagging" if doc["reconciled"] else "NOT reconciled"
    table = fit_table(cols, rows, footer_rows=[row(total, "total")], console=console,
                      title=f"consumers ({verdict})")
    return [head, table, *([Text(redelivery_note(doc), style="dim")] if doc["redeliveries"] else [])]


#: Share of the re-deliveries the note places in time ("380 of them in the first 3 s").
NOTE_SHARE = 0.8


def redelivery_note(doc: dict[str, Any]) -> str:
    """When the re-deliveries came, why, and why they do not fail the run (see the module doc)."""
    n = doc["redeliveries"]
    when = " (when they came was not kept: too many delivery runs)"
    firsts = doc.get("firstPerSecondSeries")
    if firsts is not None:
        when = ""
        extra = [max(0, a - b) for a, b in zip(doc["perSecondSeries"], firsts)]
        start = next((i for i, c in enumerate(doc["perSecondSeries"]) if c), 0)
        got = 0
        for i in range(start, len(extra)):
            got += extra[i]
            if got >= NOTE_SHARE * n:
                when = f", {got:,} of them in the first {i - start + 1} s of consumption"
                break
    return (f"{n:,} re-deliveries{when}: a rebalance moves a queue to another consumer, which reads it again from "
            "the group's committed offset. RocketMQ delivers at least once, so they are expected and do not fail "
            "the run; a message never consumed does (#Unexplained).")


def plot_line(doc: dict[str, Any] | None, ax: Any, span: tuple[float, float]) -> None:
    """Consumed per second over the sends-per-second bars: steps over whole seconds, the partial first and
    last seconds of ``span`` (when the consumers ran) over their part, as a rate."""
    from mqadmin.output.plotmarks import rate_pieces, stairs_of

    if doc is None or not doc["perSecondSeries"]:
        return
    values, edges = stairs_of(rate_pieces(doc["perSecondSeries"], *span))
    ax.stairs(values, edges, color="#1f77b4", linewidth=1.6,
              label=f"delivered ({doc['consumptions']:,}, {doc['redeliveries']:,} of them re-deliveries)")
    if doc.get("firstPerSecondSeries") is not None and doc["redeliveries"]:  # else the same line
        values, edges = stairs_of(rate_pieces(doc["firstPerSecondSeries"], *span))
        ax.stairs(values, edges, color="#9467bd", linewidth=1.6, linestyle=(0, (4, 2)),
                  label=f"first deliveries ({doc['distinct']:,} distinct)")


__all__ = ["plot_line", "render", "to_json"]
