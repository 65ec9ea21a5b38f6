"""The consumer side of a scenario report: per group, per phase, per second, and lag over time.

Called by :mod:`mqadmin.scenario.report` when a run had consumers. The
numbers come from :mod:`mqadmin.scenario.consumer_eval`'s accounting, so
the report and the verdicts never disagree. "Lost with the broker" are
messages a memory-only broker took with it when it was killed or stopped;
"lost" without that are the ones anything else lost.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any

from rich.console import Console

from mqadmin.output.jsonkeys import camel_keys
from mqadmin.output.tables import Col, fit_table
from mqadmin.scenario.consumer_eval import GroupAccount, account
from mqadmin.scenario.expectations import percentile

if TYPE_CHECKING:
    from mqadmin.scenario.runner import RunResult

BARS = " ▁▂▃▄▅▆▇█"


def _node(broker: str, broker_id: int) -> str:
    """A broker group's node; a real client does not say which node served it (broker_id -1)."""
    return broker if broker_id <= 0 else f"{broker} (slave {broker_id})"


def per_second(result: RunResult, group: str | None = None) -> list[int]:
    """Consumptions (ok) ended in each whole second since time zero, of every group or of one (its
    RocketMQ group name)."""
    seconds = max(1, math.ceil(result.end))
    out = [0] * seconds
    assert result.consumers is not None
    for r in result.consumers.records:
        if r.outcome == "ok" and (group is None or r.group == group):
            out[min(seconds - 1, max(0, int(r.t)))] += 1
    return out


def lag_per_second(result: RunResult, accounts: dict[str, GroupAccount]) -> dict[str, list[int]]:
    """Each group's largest lag within every second (the phase table's "max lag" is the largest of these)."""
    seconds = max(1, math.ceil(result.end))
    return {g: [a.max_lag(float(i), float(i + 1))[0] for i in range(seconds)] for g, a in accounts.items()}


def group_rows(result: RunResult, accounts: dict[str, GroupAccount]) -> list[dict[str, Any]]:
    run = result.consumers
    assert run is not None
    rows = []
    for spec in run.specs:
        a = accounts[spec.name]
        recs = [r for r in run.records if r.group == spec.group]
        ok = [r for r in recs if r.outcome == "ok"]
        lat = [r.latency_ms for r in ok]
        nodes = Counter(_node(r.broker, r.broker_id) for r in ok)
        started = len({e.consumer for e in run.events if e.group == spec.group and e.kind == "start"})
        st = run.stats.get(spec.name)
        rows.append({
            "name": spec.name,
            "group": spec.group,
            "client": spec.client,
            "consumers": started,
            "acknowledged": len(a.acked),
            "consumed": len(ok),
            "distinct": sum(1 for m in a.acked if m in a.first),
            "duplicates": len(a.duplicate_times),
            "retried": sum(1 for r in recs if r.outcome == "retry"),
            "lost": len(a.lost),
            "lostWithBroker": len(a.lost_with_broker),
            "lagAtEnd": a.lag_at(result.end),
            "p50Ms": round(percentile(lat, 50), 3) if lat else None,
            "p99Ms": round(percentile(lat, 99), 3) if lat else None,
            "maxMs": round(max(lat), 3) if lat else None,
            "consumedFrom": dict(sorted(nodes.items())),
            "stats": camel_keys(st.to_obj()) if st is not None else None,
        })
    return rows


def phase_rows(result: RunResult, phases: list[tuple[str, float, float]], accounts: dict[str, GroupAccount]) -> list[dict[str, Any]]:
    run = result.consumers
    assert run is not None
    rows = []
    for name, lo, hi in phases:
        ok = [r for r in run.records if r.outcome == "ok" and lo <= r.t < hi]
        lat = [r.latency_ms for r in ok]
        dups = sum(1 for a in accounts.values() for t in a.duplicate_times if lo <= t < hi)
        rows.append({
            "phase": name, "from": round(lo, 4), "to": round(hi, 4), "consumed": len(ok), "duplicates": dups,
            "maxLag": {g: a.max_lag(lo, hi)[0] for g, a in accounts.items()},
            "p50Ms": round(percentile(lat, 50), 3) if lat else None,
            "p99Ms": round(percentile(lat, 99), 3) if lat else None,
            "consumedFrom": dict(sorted(Counter(_node(r.broker, r.broker_id) for r in ok).items())),
        })
    return rows


def to_json(result: RunResult, phases: list[tuple[str, float, float]]) -> dict[str, Any] | None:
    run = result.consumers
    if run is None:
        return None
    accounts = account(result.records, run)
    return {
        "messageStore": run.message_store,
        "brokerLosses": [{"broker": b, "t": round(t, 4)} for b, t in run.broker_losses],
        "groups": group_rows(result, accounts),
        "phases": phase_rows(result, phases, accounts),
        "perSecond": per_second(result),
        "lagPerSecond": lag_per_second(result, accounts),
        "ownership": [{"t": round(e.t, 4), "consumer": e.consumer, "group": e.group, "kind": e.kind,
                       "queue": f"{e.topic}:{e.broker}:{e.queue_id}" if e.queue_id >= 0 else None}
                      for e in run.events if e.kind != "queues"],
    }


def _bars(values: list[int], top: int) -> str:
    if top <= 0:
        return " " * len(values)
    return "".join(BARS[0] if v == 0 else BARS[max(1, min(8, math.ceil(v / top * 8)))] for v in values)


def render(result: RunResult, phases: list[tuple[str, float, float]], console: Console) -> None:
    run = result.consumers
    if run is None:
        return
    accounts = account(result.records, run)
    ms = (lambda x: "-" if x is None else f"{x:.1f}")  # noqa: E731
    rows = []
    for g in group_rows(result, accounts):
        lost = str(g["lost"]) + (f" ({g['lostWithBroker']} with the broker)" if g["lostWithBroker"] else "")
        rows.append([g["name"] + ("" if g["client"] == "sim" else f" ({g['client']})"), str(g["consumers"]), str(g["acknowledged"]), str(g["consumed"]), str(g["duplicates"]),
                     lost, str(g["lagAtEnd"]), ms(g["p50Ms"]), ms(g["p99Ms"]),
                     " ".join(f"{k}:{v}" for k, v in g["consumedFrom"].items()) or "-"])
    console.print()
    console.print(fit_table(
        [Col("group"), Col("consumers", justify="right"), Col("acked", justify="right"), Col("consumed", justify="right"),
         Col("dups", justify="right"), Col("lost", wrap=True), Col("lag at end", justify="right"),
         Col("p50 ms", justify="right", drop=2), Col("p99 ms", justify="right"), Col("consumed from", wrap=True, drop=1)],
        rows, title=f"Consumers (messages on {run.message_store}; latency from store time to consumed)", console=console))
    rows = []
    for p in phase_rows(result, phases, accounts):
        lag = " ".join(f"{g}:{v}" for g, v in p["maxLag"].items()) if len(p["maxLag"]) > 1 else str(
            next(iter(p["maxLag"].values()), 0))
        rows.append([f"{p['from']:.1f}-{p['to']:.1f}", p["phase"], str(p["consumed"]), str(p["duplicates"]), lag,
                     ms(p["p99Ms"]), " ".join(f"{k}:{v}" for k, v in p["consumedFrom"].items()) or "-"])
    console.print()
    console.print(fit_table(
        [Col("t (s)"), Col("phase", wrap=True), Col("consumed", justify="right"), Col("dups", justify="right"),
         Col("max lag", wrap=True), Col("p99 ms", justify="right", drop=2), Col("consumed from", wrap=True, drop=1)],
        rows, title="Consumption by phase", console=console))
    consumed = per_second(result)
    lags = lag_per_second(result, accounts)
    top = max(consumed + [1])
    console.print()
    console.print(f"consumed per second (full bar = {top}/s) and each group's largest lag in each second "
                  "(full bar = its max lag)")
    console.print(f"  consumed   |{_bars(consumed, top)}|")
    for g, values in lags.items():
        console.print(f"  lag {g[:6]:<6} |{_bars(values, max(values + [1]))}| max {max(values + [0])}")


__all__ = ["lag_per_second", "per_second", "render", "to_json"]
