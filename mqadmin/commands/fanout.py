"""`mqadmin fanout`: thousands of simulated producers on PySpark (or plain processes).

Exit codes are mqadmin's (README, "Exit status and errors"): 0 the run
completed and the brokers' counts agree with the producers', 1 the run
could not be set up or did not finish, or it completed but the counts
disagree, a scenario expectation failed or a consumer group's messages do
not reconcile (one line on stderr), 2 a bad option value (checked before
anything starts: output files, the master URL, option combinations), 130
interrupted. Every process the run started is stopped first.

Order matters for a careless user: nothing is started (no cluster, no JVM,
no temporary directory) before the options, the output paths and the
optional extras have been checked.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from mqadmin.client.security import current_security
from mqadmin.commands.options import check_output, has_module, state_dir_option
from mqadmin.output.console import make_console, out, print_json
from mqadmin.output.plotmarks import PLOT_INSTALL, PLOT_SUFFIXES

DirOpt = typer.Option(None, "--dir", help="State directory of the local cluster (default: a temporary one with --start).")
KillOpt = typer.Option(None, "--kill-broker", metavar="BROKER@S", help="SIGKILL a local master S s into the load (repeatable).")
ConfOpt = typer.Option(None, "--conf", metavar="KEY=VALUE", help="Extra Spark setting (repeatable).")
ReportOpt = typer.Option(None, "--report", metavar="OUT.json", help="Write the full result as JSON.")
PlotOpt = typer.Option(None, "--plot", metavar="OUT.png", help="Draw sends, broker attempts and route queries per second.")


def _fail(message: str, code: int = 1) -> typer.Exit:
    print(f"mqadmin: {message}", file=sys.stderr)  # every mqadmin error's prefix
    return typer.Exit(code)


def failed_check(doc: dict[str, Any]) -> str | None:
    """Why a finished run failed its checks (exit 1), or None: counts that disagree, a failed
    scenario expectation, or consumer groups whose acknowledged messages do not reconcile."""
    agreement = doc["agreement"]
    if not (agreement["agree"] or agreement["explained"]):
        return f"the brokers' counts disagree with the producers': {agreement['note']}"
    failed = [v["expectation"] for v in doc["scenarioVerdicts"] if v["passed"] is False]
    if failed:
        return f"{len(failed)} scenario expectation(s) failed: {'; '.join(failed)}"
    consumers = doc.get("consumers")
    if consumers is not None and not consumers["reconciled"]:
        unread = [r["group"] for r in consumers["byGroup"] if not r["offsetsRead"]]
        why = (f"{consumers['total']['unexplained']:,} acknowledged message(s) unexplained" if not unread
               else f"the committed offsets of {len(unread)} group(s) could not be read")
        return f"the consumer groups do not reconcile: {why}"
    return None


def _kill(spec: str) -> tuple[str, float]:
    name, sep, at = spec.rpartition("@")
    try:
        seconds = float(at)
    except ValueError:
        seconds = -1.0
    if not sep or not name or not 0 <= seconds <= 3600:
        raise _fail(f"--kill-broker {spec!r}: expected BROKER@SECONDS, e.g. broker-a@8", 2)
    return name, seconds


def _conf(items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise _fail(f"--conf {item!r}: expected KEY=VALUE", 2)
        conf[key.strip()] = value
    return conf


def fanout_cmd(
    producers: int = typer.Option(1000, "--producers", min=1, max=1_000_000, help="Simulated producers in all."),
    topics: int = typer.Option(4, "--topics", min=1, max=10_000, help="Topics (FanoutTopic0..K-1); every producer sends to all."),
    messages: int | None = typer.Option(None, "--messages-per-producer", min=1, help="Stop each producer after M sends."),
    duration: float | None = typer.Option(None, "--duration", min=0.1, max=600, help="Seconds of load (default 20, or the scenario's)."),
    rate: float | None = typer.Option(None, "--rate", min=0, help="Sends/s per producer (default 1; 0: as fast as each can)."),
    namesrv: str | None = typer.Option(None, "-n", "--namesrv", metavar="ADDR",
                                       help="NameServer(s) 'host:port;host:port' (default: $NAMESRV_ADDR, else the local cluster)."),
    start: bool = typer.Option(False, "--start", help="Start a 2-NameServer, 2-broker local cluster for the run, stop it after."),
    directory: Path | None = DirOpt,
    scenario: str | None = typer.Option(None, "--scenario", metavar="FILE",
                                        help="Run the load as this scenario's traffic: its cluster, timeline and route checks."),
    master: str = typer.Option("local[*]", "--master", help="Spark master URL (local[N], spark://HOST:PORT, yarn, k8s://...)."),
    partitions: int | None = typer.Option(None, "--partitions", min=1, help="Partitions (one trio loop each; default: the task slots)."),
    engine: str = typer.Option("spark", "--engine", help="spark, or multiprocessing (the same run without Spark)."),
    no_spark: bool = typer.Option(False, "--no-spark", help="Same as --engine multiprocessing."),
    workers: int | None = typer.Option(None, "--workers", min=1, help="multiprocessing: processes (default: CPU count)."),
    message_size: int | None = typer.Option(None, "--message-size", min=0, max=4 * 1024 * 1024, help="Body bytes (default 256)."),
    poll_interval: float | None = typer.Option(None, "--poll-interval", min=0.05, help="Route poll interval, s (default 30, like Java)."),
    send_timeout: float | None = typer.Option(None, "--send-timeout", min=0.05, help="sendMsgTimeout, s (default 3)."),
    retries: int | None = typer.Option(None, "--retries", min=0, max=16, help="retryTimesWhenSendFailed (default 2)."),
    latency_fault: bool | None = typer.Option(None, "--latency-fault/--no-latency-fault", help="sendLatencyFaultEnable (default off, as in 5.x)."),
    ramp_up: float | None = typer.Option(None, "--ramp-up", min=0, help="Spread producer starts over this many s (default: one send interval)."),
    kills: list[str] | None = KillOpt,
    start_delay: float = typer.Option(2.0, "--start-delay", min=0, max=120, help="Seconds from submission to the common start of every partition."),
    create_topics: bool = typer.Option(True, "--create-topics/--no-create-topics", help="Create missing topics on every master first."),
    queues: int = typer.Option(8, "--queues", min=1, max=1024, help="Queues of topics created by the run."),
    conf: list[str] | None = ConfOpt,
    spark_timeout: float = typer.Option(60.0, "--spark-timeout", min=1, help="Non-local masters: seconds to wait for an executor."),
    consumers: int = typer.Option(0, "--consumers", min=0, max=1_000_000,
                                  help="Simulated push consumers, in the same partitions as the producers."),
    consumer_groups: int | None = typer.Option(None, "--consumer-groups", min=1,
                                               help="Consumer groups (default: one per topic, each on its topic)."),
    drain: float = typer.Option(5.0, "--drain", min=0, max=300, help="Seconds consumers keep consuming after the load."),
    report: Path | None = ReportOpt,
    plot: Path | None = PlotOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the JSON result instead of tables."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No progress or status lines."),
) -> None:
    """Check everything that can be checked before anything starts, run, then print and write the result."""
    from mqadmin.fanout import FanoutUsageError, runner

    engine = "multiprocessing" if no_spark else engine
    scenario_path = _check_before_start(report=report, plot=plot, engine=engine, scenario=scenario,
                                        directory=directory, start=start)
    opts = runner.FanoutOptions(
        producers=producers, topics=topics, rate=rate, duration=duration, messages_per_producer=messages,
        message_size=message_size, namesrv=namesrv, start=start, cluster_dir=directory, scenario=scenario_path,
        master=master, partitions=partitions, engine=engine, workers=workers,
        poll_interval=poll_interval, send_timeout=send_timeout, retries=retries, latency_fault=latency_fault,
        ramp_up=ramp_up, start_delay=start_delay, kills=tuple(_kill(k) for k in kills or ()),
        create_topics=create_topics, queues=queues, spark_conf=_conf(conf or []), spark_timeout=spark_timeout,
        consumers=consumers, consumer_groups=consumer_groups, drain=drain,
        security=current_security(),  # --access-key, or the local cluster's keys (mqadmin.commands.options.signing)
    )
    try:
        opts.validate()
    except FanoutUsageError as exc:
        raise _fail(str(exc), 2) from None
    result = _run(opts, show=not quiet and not as_json)
    _finish(result, as_json=as_json, report=report, plot=plot)


def _check_before_start(*, report: Path | None, plot: Path | None, engine: str, scenario: str | None,
                        directory: Path | None, start: bool) -> Path | None:
    """Output paths, optional extras, the scenario file and the state directory, checked before anything
    starts (exit 2 or 1 with one line); the scenario's path, if one was named."""
    from mqadmin.fanout import report as reporting
    from mqadmin.fanout.spark import SPARK_INSTALL

    check_output("--report", report)
    check_output("--plot", plot, PLOT_SUFFIXES)
    if plot is not None and not reporting.plot_available():
        raise _fail(f"--plot needs matplotlib, which is not installed: {PLOT_INSTALL}")
    if engine == "spark" and not has_module("pyspark"):
        raise _fail(f"the Spark engine needs pyspark, which is not installed: {SPARK_INSTALL}, "
                    "or use --engine multiprocessing")
    scenario_path = None
    if scenario is not None:
        from mqadmin.scenario import schema
        from mqadmin.scenario.shipped import resolve

        try:
            scenario_path = resolve(scenario)
            schema.load(scenario_path)  # an invalid file is a usage error, as for `scenario run`
        except schema.ScenarioError as exc:
            raise _fail(str(exc), 2) from None
    if directory is not None and (start or scenario is not None):
        state_dir_option(directory)
    return scenario_path


def _run(opts: Any, *, show: bool) -> Any:
    """The run, with status lines (and a progress bar on a terminal) on stderr when ``show``."""
    from mqadmin.fanout import FanoutError, runner

    err = make_console(stderr=True)
    status = (lambda line: err.print(f"[fanout] {line}", style="dim")) if show else (lambda line: None)
    progress = None
    if show and err.is_terminal:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=err,
                            transient=True)
    try:
        if progress is not None:
            with progress:
                return runner.run(opts, status=status, progress=progress)
        return runner.run(opts, status=status)
    except FanoutError as exc:
        raise _fail(str(exc)) from None
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (the runner raises it with the signal's name)
        why = str(exc) or "interrupted"
        raise _fail(f"{why}; every process the run started was stopped", 130) from None


def _finish(result: Any, *, as_json: bool, report: Path | None, plot: Path | None) -> None:
    """The tables (or JSON) on the screen, then the files; exit 1 when a check failed."""
    from mqadmin.fanout import report as reporting

    doc = reporting.to_json(result)
    if as_json:
        print_json(doc)
    else:
        out.print(reporting.render(doc))
    # Files last: the tables are on the screen whatever happens to them.
    try:
        if report is not None:
            report.write_text(json.dumps(doc, indent=2) + "\n")
        if plot is not None:
            reporting.plot(doc, plot)
    except OSError as exc:
        raise _fail(f"cannot write {exc.filename or report or plot}: {exc.strerror or exc}") from None
    failure = failed_check(doc)
    if failure is not None:
        raise _fail(failure)  # a failed check: exit 1, as every mqadmin check


def register(app: typer.Typer) -> None:
    app.command("fanout", help="Thousands of simulated producers on Spark (default local[*]) against a cluster; "
                               "client-observed routes and sends vs the brokers' own counts.")(fanout_cmd)
