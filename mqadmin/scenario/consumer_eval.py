"""Judge the consumer expectations of a run, and the accounting they and the report share.

A message is identified by the id its producer gave it (``UNIQ_KEY``),
which the send record and every consume record carry. For each consumer
group, against the messages acknowledged to a producer on the group's
topics:

* **consumed**: a consumption ended ``ok`` (a failed one that was sent back
  counts once its retry is consumed); **duplicates**: ``ok`` consumptions
  of a message the group had consumed already;
* **lag** at time *t*: acknowledged by *t* (send start + latency) and not
  consumed by *t*;
* **lost**: acknowledged and never consumed by the end of the run;
  **lost with the broker** among them: stored on a memory-only broker that
  was killed or stopped after storing it (``cluster.message_store:
  memory``), as opposed to lost by anything else (routing, consumers);
* **balanced** (``rebalance_within``): every queue of the group's topics,
  as the live consumers see the routes, has exactly one owner among them,
  and their shares differ by at most one (what
  ``AllocateMessageQueueAveragely`` gives once all agree).
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mqadmin.scenario.verdict import Verdict
from simclient import SendRecord
from simclient.consume_records import ConsumeRecord

if TYPE_CHECKING:
    from mqadmin.scenario.consumers import ConsumerRun
    from mqadmin.scenario.model import Expectation, Scenario


@dataclass
class GroupAccount:
    """One consumer group's view of the run's messages."""

    name: str  # scenario group name
    acked: dict[str, tuple[float, str]] = field(default_factory=dict)  # msg id -> (ack time, broker)
    first: dict[str, float] = field(default_factory=dict)  # msg id -> first ok consumption time (acked or not)
    duplicate_times: list[float] = field(default_factory=list)
    consumed_times: list[float] = field(default_factory=list)  # every ok consumption
    lost: list[str] = field(default_factory=list)
    lost_with_broker: list[str] = field(default_factory=list)
    lag_steps: list[tuple[float, int]] = field(default_factory=list)  # (time, lag from then on), ascending

    def lag_at(self, t: float) -> int:
        """Acknowledged by ``t`` and not consumed by ``t``."""
        i = bisect.bisect_right(self.lag_steps, (t, math.inf))
        return self.lag_steps[i - 1][1] if i else 0

    def max_lag(self, lo: float, hi: float) -> tuple[int, float]:
        """The largest lag in [lo, hi] and when it was reached."""
        best, when = self.lag_at(lo), lo
        for t, lag in self.lag_steps:
            if lo < t <= hi and lag > best:
                best, when = lag, t
        return best, when


def account(records: Sequence[SendRecord], run: ConsumerRun) -> dict[str, GroupAccount]:
    """Every group's accounting (see the module doc)."""
    out: dict[str, GroupAccount] = {}
    ok_sends = [r for r in records if r.outcome == "ok" and r.msg_id]
    by_group: dict[str, list[ConsumeRecord]] = {}
    for rec in run.records:
        by_group.setdefault(rec.group, []).append(rec)
    for spec in run.specs:
        acc = GroupAccount(spec.name)
        topics = set(spec.topics)
        for r in ok_sends:
            if r.topic in topics:
                acc.acked[r.msg_id] = (r.t + r.latency_ms / 1000.0, r.broker or "")
        for rec in sorted(by_group.get(spec.group, []), key=lambda c: c.t):
            if rec.outcome != "ok":
                continue
            acc.consumed_times.append(rec.t)
            if rec.msg_id in acc.first:
                acc.duplicate_times.append(rec.t)
            else:
                acc.first[rec.msg_id] = rec.t
        steps = [(t, 1) for t, _ in acc.acked.values()]
        # consumed before its producer got the answer: never lagging
        steps += [(max(acc.first[m], t_ack), -1) for m, (t_ack, _) in acc.acked.items() if m in acc.first]
        steps.sort(key=lambda s: (s[0], -s[1]))  # at one instant the ack counts before its consumption
        lag = 0
        for t, d in steps:
            lag += d
            acc.lag_steps.append((t, lag))
        for m, (t_ack, broker) in acc.acked.items():
            if m in acc.first:
                continue
            acc.lost.append(m)
            if any(b == broker and t_ack <= tk for b, tk in run.broker_losses):
                acc.lost_with_broker.append(m)
        out[spec.name] = acc
    return out


def still_to_consume(records: Sequence[SendRecord], run: ConsumerRun) -> int:
    """Acknowledged messages that a consuming group has not consumed yet, for the runner's end-of-run drain.

    Only groups with a live consumer that has consumed something count (a group that cannot consume, such
    as one started without a route, would only hold the run open), and a message lost with a memory-only
    broker is not waited for: it will never come.
    """
    live: dict[str, set[int]] = {}
    for e in sorted(run.events, key=lambda e: e.t):
        if e.kind == "start":
            live.setdefault(e.group, set()).add(e.consumer)
        elif e.kind in ("stop", "kill"):
            live.get(e.group, set()).discard(e.consumer)
    accounts = account(records, run)
    return sum(len(accounts[s.name].lost) - len(accounts[s.name].lost_with_broker)
               for s in run.specs if live.get(s.group) and accounts[s.name].first)


# ---------------------------------------------------------------------------
# rebalance


def balanced_times(run: ConsumerRun, group: str) -> list[tuple[float, bool]]:
    """After each ownership event of the group: (time, balanced)."""
    spec = next(s for s in run.specs if s.name == group)
    topics = set(spec.topics)
    live: set[int] = set()
    owned: dict[int, set[tuple[str, str, int]]] = {}
    views: dict[tuple[int, str], tuple[tuple[str, str, int], ...]] = {}
    out: list[tuple[float, bool]] = []
    for e in sorted((e for e in run.events if e.group == spec.group), key=lambda e: e.t):
        if e.kind == "start":
            live.add(e.consumer)
            owned[e.consumer] = set()
        elif e.kind in ("stop", "kill"):
            live.discard(e.consumer)
            owned.pop(e.consumer, None)
        elif e.kind == "acquire" and e.topic in topics and e.consumer in live:
            owned[e.consumer].add((e.topic, e.broker, e.queue_id))
        elif e.kind == "release" and e.consumer in owned:
            owned[e.consumer].discard((e.topic, e.broker, e.queue_id))
        elif e.kind == "queues" and e.queues and e.queues[0][0] in topics:
            views[(e.consumer, e.queues[0][0])] = e.queues
        out.append((e.t, _balanced(live, owned, views)))
    return out


def _balanced(live: set[int], owned: dict[int, set[tuple[str, str, int]]], views: dict) -> bool:
    if not live:
        return False
    queues = {q for (c, _), qs in views.items() if c in live for q in qs}
    if not queues:
        return False
    owners = Counter(q for c in live for q in owned.get(c, ()) if q in queues)
    if any(owners[q] != 1 for q in queues):
        return False
    shares = [sum(1 for q in owned.get(c, ()) if q in queues) for c in live]
    return max(shares) - min(shares) <= 1


def rebalance_time(run: ConsumerRun, group: str, ref: float, end: float) -> float | None:
    """Seconds from ``ref`` until the group is balanced again after its first change at or after ``ref``."""
    states = [(t, ok) for t, ok in balanced_times(run, group) if t >= ref - 1e-9 and t <= end]
    if not states:
        before = [ok for t, ok in balanced_times(run, group) if t < ref]
        return 0.0 if before and before[-1] else None
    for t, ok in states:
        if ok:
            return max(0.0, t - ref)
    return None


# ---------------------------------------------------------------------------
# verdicts


def _groups(exp: Expectation, run: ConsumerRun) -> list[str]:
    only = exp.extra.get("consumers")
    return [only] if only else [s.name for s in run.specs]


def load_end(scn: Scenario) -> float:
    return max((g.start + g.duration for g in scn.groups), default=0.0)


def evaluate(
    scn: Scenario,
    exp: Expectation,
    index: int,
    *,
    records: Sequence[SendRecord],
    run: ConsumerRun | None,
    label_times: dict[str, float],
    end: float,
    accounts: dict[str, GroupAccount] | None = None,
) -> Verdict:
    """One consumer expectation: its window and groups worked out here, its measure by its kind (_JUDGES)."""
    ref = label_times.get(exp.after, math.nan) if exp.after else 0.0
    if exp.after and math.isnan(ref):
        return Verdict(index, exp.kind, exp.describe(), exp.line, False, None, "not measured", "-",
                       f"action {exp.after!r} did not run")
    if run is None:
        return Verdict(index, exp.kind, exp.describe(), exp.line, False, None, "not measured", "-",
                       "this run had no consumers")
    lo = ref + (exp.window.start if exp.window.start is not None else (0.0 if exp.after else -math.inf))
    hi = ref + exp.window.end if exp.window.end is not None else math.inf
    judging = _Judging(scn, exp, index, run, accounts if accounts is not None else account(records, run),
                       _groups(exp, run), ref, lo, hi, end)
    return _JUDGES.get(exp.kind, _consumed_from)(judging)


@dataclass
class _Judging:
    """What every consumer expectation's judge reads: the run, the groups it is about, its window."""

    scn: Scenario
    exp: Expectation
    index: int
    run: ConsumerRun
    accounts: dict[str, GroupAccount]
    groups: list[str]
    ref: float  # when the `after` action took effect (0: time zero)
    lo: float
    hi: float
    end: float

    @property
    def thr(self) -> float:
        return self.exp.threshold or 0.0

    @property
    def span(self) -> str:
        return f"[{max(self.lo, 0.0):.2f}, {min(self.hi, self.end):.2f}] s"

    def verdict(self, passed: bool, measured: float | None, text: str, target: str, detail: str = "") -> Verdict:
        exp = self.exp
        return Verdict(self.index, exp.kind, exp.describe(), exp.line, passed, measured, text, target, detail)


def _max_consume_lag(j: _Judging) -> Verdict:
    values: list[float] = []
    details: list[str] = []
    for g in j.groups:
        lag, when = j.accounts[g].max_lag(max(j.lo, 0.0), min(j.hi, j.end))
        values.append(float(lag))
        details.append(f"{g}: max {lag} at t={when:.2f} s")
    worst = max(values)
    return j.verdict(worst <= j.thr, worst, f"{worst:g}", f"≤ {j.thr:g}", f"{j.span}; " + "; ".join(details))


def _max_duplicates(j: _Judging) -> Verdict:
    values: list[float] = []
    details: list[str] = []
    for g in j.groups:
        n = sum(1 for t in j.accounts[g].duplicate_times if j.lo <= t < j.hi)
        values.append(float(n))
        details.append(f"{g}: {n} of {len(j.accounts[g].consumed_times)} consumptions")
    worst = max(values)
    return j.verdict(worst <= j.thr, worst, f"{worst:g}", f"≤ {j.thr:g}", f"{j.span}; " + "; ".join(details))


def _max_lost(j: _Judging) -> Verdict:
    include = j.exp.extra.get("include_broker_loss", True)
    values: list[float] = []
    details: list[str] = []
    for g in j.groups:
        a = j.accounts[g]
        n = len(a.lost) if include else len(a.lost) - len(a.lost_with_broker)
        values.append(float(n))
        details.append(f"{g}: {len(a.lost)} of {len(a.acked)} acknowledged never consumed, "
                       f"{len(a.lost_with_broker)} of them lost with a memory-only broker")
    worst = max(values)
    return j.verdict(worst <= j.thr, worst, f"{worst:g}", f"≤ {j.thr:g}", "; ".join(details))


def _all_consumed_within(j: _Judging) -> Verdict:
    # the load ends when it was planned to, or later when a starved producer's last send was answered later
    stop = max([load_end(j.scn)] + [t_ack for g in j.groups for t_ack, _ in j.accounts[g].acked.values()])
    values: list[float | None] = []
    details: list[str] = []
    for g in j.groups:
        a = j.accounts[g]
        missing = [m for m in a.acked if m not in a.first]
        if missing:
            values.append(None)
            details.append(f"{g}: {len(missing)} of {len(a.acked)} never consumed")
            continue
        last = max((a.first[m] for m in a.acked), default=stop)
        values.append(max(0.0, last - stop))
        details.append(f"{g}: last of {len(a.acked)} consumed at t={last:.2f} s")
    detail = f"load ends at t={stop:.2f} s; " + "; ".join(details)
    if any(v is None for v in values):
        return j.verdict(False, None, "never", f"≤ {j.thr:g} s", detail)
    worst = max(v for v in values if v is not None)
    return j.verdict(worst <= j.thr, round(worst, 4), f"{worst:.2f} s", f"≤ {j.thr:g} s", detail)


def _rebalance_within(j: _Judging) -> Verdict:
    values: list[float | None] = []
    details: list[str] = []
    for g in j.groups:
        took = rebalance_time(j.run, g, j.ref, j.end)
        values.append(took)
        details.append(f"{g}: " + ("never balanced" if took is None else f"balanced at t={j.ref + took:.2f} s"))
    if any(v is None for v in values):
        return j.verdict(False, None, f"never (watched {max(0.0, j.end - j.ref):.2f} s)", f"≤ {j.thr:g} s",
                         "; ".join(details))
    worst = max(v for v in values if v is not None)
    return j.verdict(worst <= j.thr, round(worst, 4), f"{worst:.2f} s", f"≤ {j.thr:g} s", "; ".join(details))


def _consumed_from(j: _Judging) -> Verdict:
    """min_consumed_from / max_consumed_from."""
    exp = j.exp
    node = exp.extra.get("broker_id")
    wire = {s.group for s in j.run.specs if s.name in j.groups}
    n = sum(1 for r in j.run.records if r.outcome == "ok" and r.group in wire and r.broker == exp.broker
            and (node is None or r.broker_id == node) and j.lo <= r.t < j.hi)
    ok = n >= j.thr if exp.kind == "min_consumed_from" else n <= j.thr
    target = f"≥ {j.thr:g}" if exp.kind == "min_consumed_from" else f"≤ {j.thr:g}"
    return j.verdict(ok, float(n), str(n), target, f"{j.span}; groups {', '.join(j.groups)}")


_JUDGES: dict[str, Callable[[_Judging], Verdict]] = {
    "max_consume_lag": _max_consume_lag,
    "max_duplicates": _max_duplicates,
    "max_lost": _max_lost,
    "all_consumed_within": _all_consumed_within,
    "rebalance_within": _rebalance_within,
}


__all__ = ["GroupAccount", "account", "balanced_times", "evaluate", "load_end", "rebalance_time"]
