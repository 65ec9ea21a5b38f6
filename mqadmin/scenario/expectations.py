"""Judge a finished run: each expectation becomes a measured value and a verdict.

Route conditions are evaluated on the observer's stored changes (the state
is constant between two changes, so looking at the reference time and at
every later change is exact up to the polling interval). Send expectations
count the producers' send records in a window.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from mqadmin.scenario import consumer_eval
from mqadmin.scenario.model import CONSUMER_EXPECT_KINDS, Condition, Expectation, Scenario
from mqadmin.scenario.observer import Observer, present, writable
from mqadmin.scenario.verdict import Verdict
from simclient import SendRecord


def holds(cond: Condition, obs: Observer, t: float, namesrv_count: int) -> bool:
    """Whether ``cond`` is true of the routes as seen at time ``t``."""
    selected = cond.namesrvs if cond.namesrvs is not None else tuple(range(namesrv_count))
    states = [obs.state_at(ns, cond.topic, t) for ns in selected]
    answered = [s for s in states if s is not None]
    if cond.kind in ("route_excludes", "route_includes"):
        if not answered:
            return False
        test = writable if cond.mode == "writable" else present
        inside = [test(s.get(cond.broker or "")) for s in answered]
        return not any(inside) if cond.kind == "route_excludes" else all(inside)
    if cond.kind == "namesrvs_agree":
        return len(answered) == len(states) and all(s == answered[0] for s in answered)
    return len(answered) >= 2 and any(s != answered[0] for s in answered)


def holds_through(cond: Condition, obs: Observer, t: float, until: float, namesrv_count: int) -> bool:
    """``cond`` holds at ``t`` and at every change seen in (t, until]."""
    if not holds(cond, obs, t, namesrv_count):
        return False
    return all(holds(cond, obs, c, namesrv_count) for c in obs.change_times(cond.topic, cond.namesrvs, t) if c <= until)


def first_true(cond: Condition, obs: Observer, ref: float, end: float, namesrv_count: int, hold: float = 0.0) -> float | None:
    """The first time at or after ``ref`` (up to ``end``) from which ``cond`` holds for ``hold`` seconds
    (or until ``end``), or None.

    ``hold`` filters what polling invents: NameServers are polled at
    different instants, so a change that reached both at once can look
    like a disagreement lasting up to one polling interval.
    """
    for t in [ref, *obs.change_times(cond.topic, cond.namesrvs, ref)]:
        if t > end:
            break
        if holds_through(cond, obs, t, min(t + hold, end), namesrv_count):
            return t
    return None


def stable_hold(interval: float) -> float:
    """How long a route condition must last to count: longer than one polling interval."""
    return 1.5 * interval


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (the value at least ``p`` % of samples do not exceed)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[rank - 1]


def _outcome_text(records: Iterable[SendRecord]) -> str:
    counts = Counter(r.outcome for r in records if r.outcome != "ok")
    return ", ".join(f"{k} {v}" for k, v in counts.most_common())


def evaluate(
    scn: Scenario,
    exp: Expectation,
    index: int,
    *,
    obs: Observer,
    records: Sequence[SendRecord],
    label_times: dict[str, float],
    end: float,
    consumers: Any = None,
    accounts: Any = None,
) -> Verdict:
    """One expectation against the run's observations and send records (and consume records)."""
    if exp.kind in CONSUMER_EXPECT_KINDS:
        return consumer_eval.evaluate(scn, exp, index, records=records, run=consumers, label_times=label_times,
                                      end=end, accounts=accounts)
    ref = label_times.get(exp.after, math.nan) if exp.after else 0.0

    def verdict(passed: bool, measured: float | None, measured_text: str, target: str, detail: str = "") -> Verdict:
        return Verdict(index, exp.kind, exp.describe(), exp.line, passed, measured, measured_text, target, detail)

    if exp.after and math.isnan(ref):
        return verdict(False, None, "not measured", "-", f"action {exp.after!r} did not run")

    if exp.condition is not None:
        assert exp.within is not None
        target = f"≤ {exp.within:g} s" if exp.not_before is None else f"{exp.not_before:g}-{exp.within:g} s"
        t = first_true(exp.condition, obs, ref, end, scn.cluster.namesrvs, stable_hold(scn.observe_interval))
        if t is None:
            return verdict(False, None, f"never (watched {max(0.0, end - ref):.2f} s)", target)
        took = t - ref
        ok = took <= exp.within and (exp.not_before is None or took >= exp.not_before)
        detail = f"at t={t:.2f} s; routes polled every {scn.observe_interval:g} s"
        return verdict(ok, round(took, 4), f"{took:.2f} s", target, detail)

    lo = ref + (exp.window.start if exp.window.start is not None else (0.0 if exp.after else -math.inf))
    hi = ref + exp.window.end if exp.window.end is not None else math.inf
    ids = scn.group(exp.producers).ids if exp.producers else None
    chosen = [r for r in records if lo <= r.t < hi and (ids is None or r.producer in ids)]
    span = f"{len(chosen)} sends in [{max(lo, 0.0):.2f}, {min(hi, end):.2f}] s"
    failed = [r for r in chosen if r.outcome != "ok"]
    thr = exp.threshold
    assert thr is not None
    if exp.kind == "send_success_rate":
        up = exp.upper
        target = f"≥ {thr:g}" if up is None else (f"≤ {up:g}" if not thr else f"{thr:g}..{up:g}")
        if not chosen:
            return verdict(False, None, "no sends", target, span)
        rate = 1.0 - len(failed) / len(chosen)
        detail = span + (f"; failed: {_outcome_text(failed)}" if failed else "")
        ok = rate >= thr and (up is None or rate <= up)
        return verdict(ok, round(rate, 6), f"{rate:.4f} ({len(chosen) - len(failed)}/{len(chosen)})", target, detail)
    if exp.kind == "max_failed_sends":
        detail = span + (f"; {_outcome_text(failed)}" if failed else "")
        return verdict(len(failed) <= thr, float(len(failed)), str(len(failed)), f"≤ {thr:g}", detail)
    if exp.kind == "p99_send_latency":
        pool = chosen if exp.outcome == "all" else [r for r in chosen if r.outcome == "ok"]
        if not pool:
            return verdict(False, None, "no sends", f"≤ {thr:g} ms", span)
        p99 = percentile([r.latency_ms for r in pool], 99)
        detail = f"{span}; p50 {percentile([r.latency_ms for r in pool], 50):.1f} ms, max {max(r.latency_ms for r in pool):.1f} ms"
        return verdict(p99 <= thr, round(p99, 3), f"{p99:.1f} ms", f"≤ {thr:g} ms", detail)
    stored = sum(1 for r in chosen if r.outcome == "ok" and r.broker == exp.broker)
    if exp.kind == "max_sends_to":
        return verdict(stored <= thr, float(stored), str(stored), f"≤ {thr:g}", span)
    return verdict(stored >= thr, float(stored), str(stored), f"≥ {thr:g}", span)


def evaluate_all(
    scn: Scenario, *, obs: Observer, records: Sequence[SendRecord], label_times: dict[str, float], end: float,
    consumers: Any = None,
) -> list[Verdict]:
    """Every expectation; ``consumers`` is the run's :class:`~mqadmin.scenario.consumers.ConsumerRun`, if any."""
    accounts = consumer_eval.account(records, consumers) if consumers is not None else None
    return [
        evaluate(scn, exp, i + 1, obs=obs, records=records, label_times=label_times, end=end, consumers=consumers,
                 accounts=accounts)
        for i, exp in enumerate(scn.expectations)
    ]
