"""`mqadmin scenario ...`: YAML outage scenarios (run, list).

Exit codes of ``run`` are mqadmin's (see :mod:`mqadmin.commands.results`): 0 every
expectation holds, 1 an expectation or an action failed, or the run itself
failed (cluster did not start, timeout: the line says which), 2 the scenario
file or an option is invalid (an output file that cannot be written is
refused before the run) or a Java version it names cannot be had (no
``java`` or ``mvn``, not published), 130 interrupted. Every process a run starts is
stopped before it exits, whichever way it exits.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from mqadmin.commands.options import check_output, command_group
from mqadmin.commands.results import write_output
from mqadmin.output.console import make_console, out, print_json
from mqadmin.output.plotmarks import PLOT_INSTALL, PLOT_SUFFIXES
from mqadmin.rocketmq.artifacts import ArtifactError
from mqadmin.scenario import schema
from mqadmin.scenario.shipped import resolve, shipped_dir
from mqadmin.scenario.values import ScenarioError
from server_runtime.climain import first_of

if TYPE_CHECKING:
    from mqadmin.scenario.runner import RunResult

ReportOpt = typer.Option(None, "--report", metavar="OUT.json", help="Write the full result as JSON.")
PlotOpt = typer.Option(None, "--plot", metavar="OUT.png", help="Draw sends per second and route changes.")
RecordsOpt = typer.Option(None, "--records", metavar="OUT.msgpack",
                          help="Keep every send record (msgpack); consume records go beside it (OUT.consumed.msgpack).")
ListDirOpt = typer.Option(None, "--dir", help="Directory of scenario files (default: the shipped ones).")


def _fail(code: int, message: str) -> typer.Exit:
    print(f"mqadmin: {message}", file=sys.stderr)  # every mqadmin error's prefix
    return typer.Exit(code)


def run_cmd(
    file: str = typer.Argument(..., metavar="FILE", help="Scenario YAML (or the name of a shipped one)."),
    report: Path | None = ReportOpt,
    plot: Path | None = PlotOpt,
    records: Path | None = RecordsOpt,
    keep_dir: bool = typer.Option(False, "--keep-dir", help="Keep the cluster's state directory (logs) after the run."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Only the verdict line and failures."),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON result instead of the report."),
    metrics: bool = typer.Option(False, "--metrics", help="Serve /metrics on every process; the report gains "
                                 "each NameServer's brokers, removals, registrations and route queries, once a second."),
    compare: list[str] = typer.Option([], "--compare", metavar="KEY=VALUE",
                                      help="Run it twice, as written and with this cluster field changed (repeatable), "
                                           "and compare: e.g. --compare namesrv_impl=java:5.5.0."),
) -> None:
    from mqadmin.scenario import runner

    try:
        scn = schema.load(resolve(file))
    except ScenarioError as exc:
        raise _fail(2, str(exc)) from None
    if compare:
        _compare(file, compare, report=report, plot=plot, records=records, keep_dir=keep_dir, quiet=quiet,
                 as_json=as_json, metrics=metrics)
        return
    check_output("--report", report)
    check_output("--plot", plot, PLOT_SUFFIXES)
    check_output("--records", records)
    if plot is not None:
        from mqadmin.scenario import plot as plotting

        if not plotting.available():
            raise _fail(1, f"--plot needs matplotlib, which is not installed: {PLOT_INSTALL}")
    err = make_console(stderr=True)
    progress = (lambda line: None) if (quiet or as_json) else (lambda line: err.print(f"[{scn.name}] {line}"))
    consumed = records.with_name(f"{records.stem}.consumed{records.suffix}") if records is not None else None
    result = _run(lambda: runner.run(scn, records_path=records, keep_dir=keep_dir, progress=progress,
                                     consume_records_path=consumed, metrics=metrics), "", report)
    from mqadmin.scenario import report as reporting

    doc = reporting.to_json(result)
    if as_json:
        print_json(doc)
    elif quiet:
        for v in result.verdicts:
            if not v.passed:
                out.print(f"FAIL {v.text}: measured {v.measured_text} (target {v.target})")
        for a in result.actions:
            if not a.ok:
                out.print(f"FAIL action {a.text}: {a.detail}")
        for problem in result.client_problems:
            out.print(f"FAIL client: {problem}")
        out.print(f"{'PASS' if result.passed else 'FAIL'} {scn.name}")
    else:
        reporting.render(result, out)
    # Files last: the verdict is on the screen whatever happens to them.
    if report is not None:
        write_output(report, json.dumps(doc, indent=2) + "\n")
    if plot is not None:
        from mqadmin.scenario import plot as plotting

        try:
            plotting.draw(result, plot)
        except OSError as exc:
            raise _fail(1, f"cannot write {plot}: {exc.strerror or exc}") from None
    if not result.passed:  # the report says which; stderr says why the status is 1
        failed = [v for v in result.verdicts if not v.passed]
        broken = [a for a in result.actions if not a.ok]
        why = [f"{len(failed)} of {len(result.verdicts)} expectations did not hold"] if failed else []
        why += [f"{len(broken)} of {len(result.actions)} actions failed"] if broken else []
        raise _fail(1, f"scenario {scn.name} failed: {', '.join(why) or 'no expectation was judged'}")


def _compare(file: str, given: list[str], *, report: Path | None, plot: Path | None, records: Path | None,
             keep_dir: bool, quiet: bool, as_json: bool, metrics: bool) -> None:
    """``run --compare``: both runs, one after the other, then the side-by-side report (exit 0 iff both pass)."""
    from mqadmin.localcluster import java
    from mqadmin.scenario import compare, runner
    from mqadmin.scenario.overrides import parse_override

    if plot is not None or records is not None:
        raise _fail(2, "--plot and --records show one run: with --compare, --report keeps both runs")
    try:
        overrides = [parse_override(text) for text in given]
        scenarios = [schema.load(resolve(file)), schema.load(resolve(file), overrides)]
    except schema.ScenarioError as exc:
        raise _fail(2, f"{exc}" if str(exc).startswith("--compare") else f"--compare {' '.join(given)}: {exc}") from None
    check_output("--report", report)
    err = make_console(stderr=True)
    try:  # every Java version either run names, before the first run: an unpublished one costs no run
        for scn in scenarios:
            java.resolve(runner.start_options(scn).java_versions(), None if quiet or as_json else err.print)
    except ArtifactError as exc:
        raise _fail(2, str(exc)) from None
    cmp = compare.Comparison(overrides)
    for label, scn in zip(cmp.labels, scenarios):
        progress = (lambda line: None) if (quiet or as_json) else (
            lambda line, label=label: err.print(f"[{scn.name}: {label}] {line}"))
        cmp.runs.append(_run(lambda scn=scn, progress=progress: runner.run(
            scn, keep_dir=keep_dir, progress=progress, metrics=metrics), f" {label}", None))
    doc = compare.to_json(cmp)
    if as_json:
        print_json(doc)
    elif quiet:
        for label, r in zip(cmp.labels, cmp.runs):
            out.print(f"{'PASS' if r.passed else 'FAIL'} {r.scenario.name} ({label})")
    else:
        compare.render(cmp, out)
    if report is not None:
        write_output(report, json.dumps(doc, indent=2) + "\n")
    if not cmp.passed:
        raise typer.Exit(1)


def _run(run: Callable[[], RunResult], label: str, report: Path | None) -> RunResult:
    """``run()``, its failures turned into one line and mqadmin's exit status (``label`` names which run)."""
    from mqadmin.scenario import runner

    try:
        return run()
    except runner.ClientProgramsError as exc:
        raise _fail(2, f"the scenario's clients: {exc}") from None
    except runner.ScenarioRunError as exc:
        raise _fail(1, f"the run{label} failed: {exc}") from None
    except ArtifactError as exc:  # a Java version that cannot be had: what is missing is the user's to fix
        raise _fail(2, str(exc)) from None
    except BaseException as exc:
        interrupt = first_of(exc, KeyboardInterrupt)
        if interrupt is None:
            raise
        why = (str(interrupt) or "interrupted") + (f" (run{label})" if label else "")
        partial = getattr(interrupt, "result", None)
        raise _fail(130, f"{why}; every process the run started was stopped{_partial_report(partial, report)}") from None


def _partial_report(result: object, path: Path | None) -> str:
    """Write what an interrupted run gathered to ``--report`` (marked ``"interrupted"``, nothing judged);
    the words the interruption line adds about it."""
    if path is None or result is None:
        return ""
    from mqadmin.scenario import report as reporting

    doc = reporting.to_json(result)  # type: ignore[arg-type]
    try:
        path.write_text(json.dumps(doc, indent=2) + "\n")
    except OSError as exc:
        return f"; cannot write the partial report {path}: {exc.strerror or exc}"
    return f"; the run so far (t={doc['end']:.1f} s, {doc['sends']['total']} sends, marked interrupted) is in {path}"


def list_cmd(
    directory: Path | None = ListDirOpt,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    where = directory or shipped_dir()
    files = sorted(where.glob("*.yaml"), key=lambda p: p.stem) if where.is_dir() else []  # by name: "a" before "a-b"
    if not files:
        raise _fail(1, f"no scenario files (*.yaml) in {where}")
    rows = []
    for f in files:
        try:
            scn = schema.load(f)
            rows.append({"name": scn.name, "file": str(f), "duration": scn.duration, "description": scn.description,
                         "valid": True})
        except schema.ScenarioError as exc:
            rows.append({"name": f.stem, "file": str(f), "duration": None, "description": str(exc), "valid": False})
    if as_json:
        print_json({"scenarios": rows})
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        dur = f"{r['duration']:>4g} s" if r["valid"] else "  ?  "
        line = f"{r['name']:<{width}}  {dur}  {r['description']}"
        out.print(line, style=None if r["valid"] else "red")


def register(app: typer.Typer) -> None:
    scenario = command_group("Stage outages on a local cluster from a YAML scenario and check expectations.")
    scenario.command("run", help="Run a scenario: start its cluster, load and timeline, print the verdict "
                                 "(exit 0 iff all hold).")(run_cmd)
    scenario.command("list", help="The shipped scenarios, one line each (or those in --dir).")(list_cmd)
    app.add_typer(scenario, name="scenario")
