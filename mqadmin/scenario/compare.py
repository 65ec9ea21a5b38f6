"""``scenario run FILE --compare KEY=VALUE``: the scenario as written, then with cluster overrides, side by side.

Both runs are ordinary runs (:func:`mqadmin.scenario.runner.run`), one after the other, each on a fresh
cluster. The comparison is every expectation's measured value and verdict in both, and what the
NameServers believed (:mod:`mqadmin.scenario.beliefs`): when routes settled after each action and
whether the NameServers agreed, which brokers each dropped and took back, and which it kept. The JSON
document holds both runs' full reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.text import Text

from mqadmin.output.tables import Col, fit_table, status_text
from mqadmin.scenario import report
from mqadmin.scenario.beliefs import AfterAction, TopicBeliefs, beliefs
from mqadmin.scenario.verdict import Verdict
from mqadmin.scenario.overrides import Override, describe
from mqadmin.scenario.runner import RunResult


@dataclass
class Comparison:
    """Two runs of one scenario: as written (``runs[0]``) and with ``overrides`` (``runs[1]``)."""

    overrides: list[Override]
    runs: list[RunResult] = field(default_factory=list)

    @property
    def labels(self) -> list[str]:
        return ["as written", describe(self.overrides)]

    @property
    def passed(self) -> bool:
        return len(self.runs) == 2 and all(r.passed for r in self.runs)


def expectation_rows(cmp: Comparison) -> list[dict[str, Any]]:
    """One row per expectation: its text and target, and each run's measured value and verdict."""
    rows = []
    for i, exp in enumerate(cmp.runs[0].scenario.expectations):
        verdicts = [next((v for v in r.verdicts if v.index == i + 1), None) for r in cmp.runs]
        first = next((v for v in verdicts if v is not None), None)
        rows.append({
            "index": i + 1,
            "expectation": first.text if first is not None else exp.describe(),
            "target": first.target if first is not None else "-",
            "runs": [None if v is None else {"measured": v.measured, "measuredText": v.measured_text,
                                             "passed": v.passed, "detail": v.detail} for v in verdicts],
            "difference": _difference(verdicts),
        })
    return rows


def _difference(verdicts: list[Verdict | None]) -> float | None:
    """The second run's measured value minus the first's, when both measured a number."""
    a, b = verdicts
    if a is None or b is None or a.measured is None or b.measured is None:
        return None
    return round(b.measured - a.measured, 6)


def _difference_text(row: dict[str, Any]) -> str:
    diff = row["difference"]
    if diff is None:
        return "-"
    unit = next((u for u in (" ms", " s") if row["runs"][0]["measuredText"].endswith(u)), "")
    return f"{diff:+.4g}{unit}"


def to_json(cmp: Comparison) -> dict[str, Any]:
    return {
        "compare": {
            "overrides": {k: v for k, v in cmp.overrides},
            "labels": cmp.labels,
            "passed": cmp.passed,
            "expectations": expectation_rows(cmp),
            "beliefs": [[b.to_json() for b in beliefs(r)] for r in cmp.runs],
        },
        "runs": [report.to_json(r) for r in cmp.runs],
    }


def _after_text(a: AfterAction | None) -> str:
    if a is None:
        return "-"
    if a.settled is None:
        return "no route change" + ("" if a.agree else "; NameServers disagree")
    firsts = "; ".join(f"ns{ns} +{dt:.2f} s {what}" for ns, (dt, what) in sorted(a.first_change.items()))
    return f"settled +{a.settled:.2f} s, {'agree' if a.agree else 'DISAGREE'} ({firsts})"


def _brokers_text(items: list[tuple[int, str, float]]) -> str:
    return "; ".join(f"ns{ns} {b} at {t:.2f} s" for ns, b, t in items) or "none"


def _settled_difference(a: AfterAction | None, b: AfterAction | None) -> str:
    if a is None or b is None:
        return "-"
    if a.settled is None or b.settled is None:
        return "same" if a.settled == b.settled else "one changed, one did not"
    text = f"{b.settled - a.settled:+.2f} s"
    return text if a.agree == b.agree else f"{text}; agreement differs"


def _set_difference(a: set[tuple[int, str]], b: set[tuple[int, str]]) -> str:
    if a == b:
        return "same"
    parts = []
    if a - b:
        parts.append("only in the first: " + ", ".join(f"ns{ns} {br}" for ns, br in sorted(a - b)))
    if b - a:
        parts.append("only in the second: " + ", ".join(f"ns{ns} {br}" for ns, br in sorted(b - a)))
    return "; ".join(parts)


def belief_rows(cmp: Comparison) -> dict[str, list[list[str]]]:
    """Per topic, the rows of the beliefs table: one per action, then dropped, back and kept."""
    per_run = [{b.topic: b for b in beliefs(r)} for r in cmp.runs]
    out: dict[str, list[list[str]]] = {}
    for topic in per_run[0]:
        runs: list[TopicBeliefs | None] = [p.get(topic) for p in per_run]
        rows = []
        count = max(len(b.after) if b else 0 for b in runs)
        for i in range(count):
            afters = [b.after[i] if b and i < len(b.after) else None for b in runs]
            name = next(a for a in afters if a is not None)
            rows.append([f"after {name.action} (t={name.t:.2f} s)", *(_after_text(a) for a in afters),
                         _settled_difference(*afters)])
        for what, pick in (("dropped", lambda b: b.dropped), ("taken back", lambda b: b.back)):
            sets = [{(ns, br) for ns, br, _ in pick(b)} if b else set() for b in runs]
            rows.append([what, *(_brokers_text(pick(b)) if b else "-" for b in runs), _set_difference(*sets)])
        kept = [{(ns, br) for ns, bs in b.kept.items() for br in bs} if b else set() for b in runs]
        rows.append(["kept at the end", *("; ".join(f"ns{ns} {', '.join(bs) or 'none'}" for ns, bs in b.kept.items())
                                          if b else "-" for b in runs), _set_difference(*kept)])
        out[topic] = rows
    return out


def render(cmp: Comparison, console: Console) -> None:
    a, b = cmp.labels
    scn = cmp.runs[0].scenario
    console.print(Text(f"Scenario {scn.name}, compared", style="bold") + Text(f"  ({scn.path})"))
    for label, r in zip(cmp.labels, cmp.runs):
        sends = len(r.records)
        ok = sum(1 for x in r.records if x.outcome == "ok")
        console.print(f"{label}: {'PASS' if r.passed else 'FAIL'}; setup {r.setup_seconds:.1f} s, run {r.end:.1f} s; "
                      f"{ok}/{sends} sends ok" + "".join(f"; client problem: {p}" for p in r.client_problems))
    rows = []
    for row in expectation_rows(cmp):
        cells = []
        for run in row["runs"]:
            if run is None:
                cells += ["-", "-"]
            else:
                cells += [run["measuredText"], status_text(run["passed"], "PASS" if run["passed"] else "FAIL")]
        rows.append([str(row["index"]), row["expectation"], row["target"], *cells, _difference_text(row)])
    console.print()
    console.print(fit_table([Col("#", justify="right"), Col("expectation", wrap=True), Col("target"),
                             Col(f"{a}", wrap=True), Col("verdict"), Col(f"{b}", wrap=True), Col("verdict"),
                             Col("difference", justify="right", drop=1)],
                            rows, title="Expectations, side by side", console=console))
    for topic, brows in belief_rows(cmp).items():
        console.print()
        console.print(fit_table([Col("what the NameServers believed", wrap=True), Col(a, wrap=True), Col(b, wrap=True),
                                 Col("difference", wrap=True)],
                                brows, title=f"Routes of {topic} (polled every {scn.observe_interval:g} s)",
                                console=console))
    console.print()
    verdicts = ", ".join(f"{label} {'PASS' if r.passed else 'FAIL'}" for label, r in zip(cmp.labels, cmp.runs))
    style = "bold green" if cmp.passed else "bold red"
    console.print(Text(f"{'PASS' if cmp.passed else 'FAIL'}: {verdicts}", style=style))


__all__ = ["Comparison", "belief_rows", "expectation_rows", "render", "to_json"]
