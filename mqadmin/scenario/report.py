"""What a run shows: a Rich report for people, a JSON document for scripts.

Both tell the same story: the actions with their times, every route change
each NameServer showed, the sends cut into phases at each action (so the
effect of an action is one row), a per-second strip of sends by outcome,
and each expectation with its target, measured value and verdict.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from mqadmin.output.jsonkeys import camel_keys
from mqadmin.output.tables import Col, fit_table, status_text
from mqadmin.scenario import consumer_report, metrics_watch
from mqadmin.scenario.expectations import percentile
from mqadmin.scenario.observer import diff_text, summary_text
from mqadmin.scenario.runner import RunResult
from simclient import OUTCOMES, SendRecord

MAX_ROUTE_ROWS = 60
BARS = " ▁▂▃▄▅▆▇█"


def per_second(records: Sequence[SendRecord], end: float) -> list[dict[str, int]]:
    """Sends begun in each whole second since time zero, by outcome."""
    seconds = max(1, math.ceil(end))
    rows = [dict.fromkeys(OUTCOMES, 0) for _ in range(seconds)]
    for r in records:
        i = min(seconds - 1, max(0, int(r.t)))
        rows[i][r.outcome] = rows[i].get(r.outcome, 0) + 1
    return rows


def phases(result: RunResult, min_len: float = 0.05) -> list[tuple[str, float, float]]:
    """Windows between actions: (name, start, end); actions closer than ``min_len`` share one window."""
    out: list[tuple[str, float, float]] = []
    start, names = 0.0, ["before any action"]
    for a in result.actions:
        if a.start - start >= min_len:
            out.append((" + ".join(names), start, a.start))
            start, names = a.start, []
        elif names == ["before any action"]:
            names = []
        names.append(f"after {a.text}" if not names else a.text)
    out.append((" + ".join(names), start, max(result.end, start)))
    return out


def phase_stats(records: Sequence[SendRecord], lo: float, hi: float) -> dict[str, Any]:
    chosen = [r for r in records if lo <= r.t < hi]
    lat = [r.latency_ms for r in chosen]
    failed = Counter(r.outcome for r in chosen if r.outcome != "ok")
    stored = Counter(r.broker for r in chosen if r.outcome == "ok")
    return {
        "sends": len(chosen),
        "ok": len(chosen) - sum(failed.values()),
        "failed": dict(failed),
        "retried": sum(1 for r in chosen if r.attempts > 1),
        "p50Ms": round(percentile(lat, 50), 3) if lat else None,
        "p99Ms": round(percentile(lat, 99), 3) if lat else None,
        "maxMs": round(max(lat), 3) if lat else None,
        "storedByBroker": dict(sorted((str(k), v) for k, v in stored.items())),
    }


def to_json(result: RunResult) -> dict[str, Any]:
    scn = result.scenario
    obs = result.observer
    return {
        "scenario": scn.name,
        "file": scn.path,
        "description": scn.description,
        "passed": result.passed,
        "interrupted": result.interrupted,
        "duration": scn.duration,
        "end": round(result.end, 4),
        "setupSeconds": round(result.setup_seconds, 3),
        "teardownSeconds": round(result.teardown_seconds, 3),
        "cluster": {
            "namesrvs": result.namesrvs,
            "brokers": result.brokers,
            "impls": result.impls,
            "registerPeriodMs": scn.cluster.register_period_ms,
            "brokerExpiredMs": scn.cluster.broker_expired_ms,
            "scanIntervalMs": scn.cluster.scan_interval_ms,
            "namesrvConfig": dict(scn.cluster.namesrv_config),
            "topics": list(scn.cluster.topics),
        },
        "load": [
            {"name": g.name, "client": g.client, "producers": g.producers, "rate": g.rate, "start": g.start, "duration": g.duration,
             "pollInterval": g.poll_interval, "sendTimeout": g.send_timeout, "retries": g.retries,
             "latencyFault": g.latency_fault, "summary": camel_keys(result.summaries[g.name].to_obj(), ("outcomes", "by_broker"))
             if g.name in result.summaries else None}
            for g in scn.groups
        ],
        "actions": [a.to_json() for a in result.actions],
        "routeEvents": [e.to_json() for e in obs.events] if obs else [],
        "observer": {"interval": scn.observe_interval, "polls": obs.polls if obs else 0},
        "sends": {
            "total": len(result.records),
            "outcomes": dict(Counter(r.outcome for r in result.records)),
            "phases": [{"phase": name, "from": round(lo, 4), "to": round(hi, 4), **phase_stats(result.records, lo, hi)}
                       for name, lo, hi in phases(result)],
            "perSecond": per_second(result.records, result.end),
        },
        "consumers": consumer_report.to_json(result, phases(result)),
        "expectations": [v.to_json() for v in result.verdicts],
        "clientProblems": result.client_problems,
        "forceKilled": result.leftover,
        "stateDir": result.state_dir,
        "metrics": result.metrics.to_json() if result.metrics is not None else None,
    }


def _bar_line(values: list[int], top: int) -> str:
    if top <= 0:
        return " " * len(values)
    return "".join(BARS[0] if v == 0 else BARS[max(1, min(8, math.ceil(v / top * 8)))] for v in values)


def _impls(specs: tuple[str, ...]) -> str:
    """`` (java 5.5.0)`` or `` (toolkit, java 5.5.0)``: what runs them, when it is not only ours."""
    if all(not s.startswith("java:") for s in specs):
        return ""
    return f" ({', '.join(s.replace(':', ' ') for s in specs)})"


def render(result: RunResult, console: Console) -> None:
    """The report on the terminal: what ran, then each part of the run, then the verdicts."""
    _render_setup(result, console)
    _render_timeline(result, console)
    _render_routes(result, console)
    _render_sends(result, console)
    consumer_report.render(result, phases(result), console)
    metrics_watch.render(result.metrics, console)
    _render_verdicts(result, console)


def _render_setup(result: RunResult, console: Console) -> None:
    """The scenario, its cluster and load, and how long setup, run and teardown took."""
    scn = result.scenario
    c = scn.cluster
    console.print(Text(f"Scenario {scn.name}", style="bold") + Text(f"  ({scn.path})"))
    console.print(scn.description)
    console.print(
        f"cluster: {c.namesrvs} NameServer(s){_impls(c.namesrv_impl)}, {c.brokers} broker group(s)"
        f"{_impls(c.broker_impl)} x {c.slaves + 1} "
        f"(registerNameServerPeriod {c.register_period_ms} ms, brokerChannelExpiredTime {c.broker_expired_ms} ms, "
        f"scan every {c.scan_interval_ms} ms); topics {', '.join(c.topics)}"
        + "".join(f"; {k}={v}" for k, v in c.namesrv_config)
    )
    for g in scn.groups:
        who = "" if g.client == "sim" else f" ({g.client} client)"
        console.print(
            f"load {g.name}{who}: {g.producers} producer(s) x {g.rate:g}/s for {g.duration:g} s from t={g.start:g} "
            f"(pollNameServerInterval {g.poll_interval:g} s, sendMsgTimeout {g.send_timeout:g} s, "
            f"retries {g.retries}, latency fault {'on' if g.latency_fault else 'off'})"
        )
    console.print(f"setup {result.setup_seconds:.1f} s, run {result.end:.1f} s, teardown {result.teardown_seconds:.1f} s"
                  + (f"; logs kept in {result.state_dir}" if result.state_dir else ""))


def _render_timeline(result: RunResult, console: Console) -> None:
    """Each action: when it started, how long it took, how it ended."""
    if not result.actions:
        return
    rows = [[f"{a.start:.2f}", f"{(a.end - a.start) * 1000:.0f} ms", a.text, status_text(a.ok, "ok" if a.ok else "FAILED"),
             a.detail] for a in result.actions]
    console.print()
    console.print(fit_table([Col("t (s)", justify="right"), Col("took", justify="right"), Col("action"),
                             Col("result"), Col("detail", wrap=True, drop=1)], rows, title="Timeline", console=console))


def _render_routes(result: RunResult, console: Console) -> None:
    """The route changes the observer saw on each NameServer (the first MAX_ROUTE_ROWS)."""
    obs = result.observer
    if obs is None:
        return
    rows = []
    for e in obs.events:
        change = f"initial: {summary_text(e.after)}" if e.first else diff_text(e.before, e.after)
        rows.append([f"{max(e.t, 0.0) if e.first else e.t:.2f}", f"namesrv-{e.namesrv}", e.topic, change])
    more = len(rows) - MAX_ROUTE_ROWS
    rows = rows[:MAX_ROUTE_ROWS] + ([["", "", "", f"... {more} more (see --report)"]] if more > 0 else [])
    console.print()
    console.print(fit_table([Col("t (s)", justify="right"), Col("namesrv"), Col("topic", drop=1), Col("route change", wrap=True)],
                            rows, title=f"Route changes (polled every {result.scenario.observe_interval:g} s)", console=console))


def _render_sends(result: RunResult, console: Console) -> None:
    """Sends by phase, and one bar per second of ok and failed sends under the actions' marks."""
    if not result.records:
        return
    rows = []
    for name, lo, hi in phases(result):
        st = phase_stats(result.records, lo, hi)
        fails = ", ".join(f"{k} {v}" for k, v in sorted(st["failed"].items())) or "-"
        ok_pct = f"{st['ok'] / st['sends'] * 100:.2f}%" if st["sends"] else "-"
        ms = (lambda x: "-" if x is None else f"{x:.1f}")
        brokers = " ".join(f"{k}:{v}" for k, v in st["storedByBroker"].items()) or "-"
        rows.append([f"{lo:.1f}-{hi:.1f}", name, str(st["sends"]), ok_pct, fails, str(st["retried"]),
                     ms(st["p50Ms"]), ms(st["p99Ms"]), ms(st["maxMs"]), brokers])
    console.print()
    console.print(fit_table(
        [Col("t (s)"), Col("phase", wrap=True), Col("sends", justify="right"), Col("ok", justify="right"),
         Col("failed", wrap=True), Col("retried", justify="right", drop=3), Col("p50 ms", justify="right", drop=2),
         Col("p99 ms", justify="right"), Col("max ms", justify="right", drop=2), Col("stored on", wrap=True, drop=1)],
        rows, title="Sends by phase", console=console))
    secs = per_second(result.records, result.end)
    ok = [s["ok"] for s in secs]
    bad = [sum(v for k, v in s.items() if k != "ok") for s in secs]
    top = max(ok + bad + [1])
    marks = [" "] * len(secs)
    for a in result.actions:
        i = min(len(secs) - 1, int(a.start))
        marks[i] = "^"
    console.print()
    console.print(f"sends per second (one column per second, full bar = {top}/s; ^ = action)")
    console.print(f"  ok     |{_bar_line(ok, top)}|")
    console.print(Text(f"  failed |{_bar_line(bad, top)}|", style="red" if any(bad) else ""))
    console.print(f"         |{''.join(marks)}|")


def _render_verdicts(result: RunResult, console: Console) -> None:
    """The expectations' verdicts and the run's PASS or FAIL line."""
    if result.verdicts:
        rows = [[str(v.index), v.text, v.target, v.measured_text, status_text(v.passed, "PASS" if v.passed else "FAIL"), v.detail]
                for v in result.verdicts]
        console.print()
        console.print(fit_table([Col("#", justify="right"), Col("expectation", wrap=True), Col("target"), Col("measured"),
                                 Col("verdict"), Col("detail", wrap=True, drop=1)], rows, title="Expectations", console=console))
    for problem in result.client_problems:
        console.print(Text(f"client problem: {problem}", style="red"))
    console.print()
    failed_actions = [a for a in result.actions if not a.ok]
    failed = [v for v in result.verdicts if not v.passed]
    if result.passed:
        console.print(Text(f"PASS: all {len(result.verdicts)} expectations hold", style="bold green"))
    else:
        why = []
        if failed:
            why.append(f"{len(failed)} of {len(result.verdicts)} expectations failed")
        if failed_actions:
            why.append(f"{len(failed_actions)} action(s) failed")
        if result.client_problems:
            why.append(f"{len(result.client_problems)} client problem(s)")
        console.print(Text("FAIL: " + "; ".join(why or ["nothing was judged"]), style="bold red"))
