"""Run a scenario: cluster up, load + timeline + observer, verdicts, cluster down.

Time zero is when every NameServer has been asked once and the producers
start; every time in a run (actions, route changes, send records) is in
seconds since then, on trio's clock. The cluster lives in a fresh temporary
state directory and every process it started is stopped on the way out,
whatever the way out is: success, a failed expectation, an exception,
Ctrl-C (SIGINT), SIGTERM or SIGHUP.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from mqadmin.localcluster import java, processes, prometheus_sd
from mqadmin.localcluster.accounts import admin_security, app_credentials
from mqadmin.localcluster.state import ClusterError, ClusterState, Proc
from mqadmin.rocketmq.artifacts import ArtifactError
from mqadmin.rocketmq.servers import Sizing
from mqadmin.scenario.actions import ActionError, Executor
from mqadmin.scenario.client_schema import is_real
from mqadmin.scenario.consumer_eval import still_to_consume
from mqadmin.scenario.consumers import ConsumerFleet, ConsumerRun
from mqadmin.scenario.expectations import evaluate_all
from mqadmin.scenario.metrics_watch import MetricsWatch
from mqadmin.scenario.model import Action, ProducerGroup, Scenario
from mqadmin.scenario.observer import Observer
from mqadmin.scenario.realclients import ClientStartError, RealClients, clients_of, prepare
from mqadmin.scenario.verdict import Verdict
from server_runtime.climain import first_of
from simclient import (
    ClientPool,
    ConsumeRecord,
    LoadSpec,
    LoadSummary,
    ProducerOptions,
    RecordWriter,
    SendRecord,
    consume_record_writer,
    run_load,
)

#: Actions whose effect is at their end (the others act when they start).
EFFECT_AT_END = ("restart_broker", "restart_namesrv", "wait_until")
#: How long after the last send the observer keeps watching (late route changes still count).
SETTLE = 0.5
#: The longest a run waits after its planned end for consumers to consume what was acknowledged: on a
#: starved machine the last sends are answered late, and ending the run under them would call them lost.
DRAIN_LIMIT = 3.0
#: Actions after which a memory-only broker has lost what it held.
LOSING_ACTIONS = ("kill_broker", "shutdown_broker", "restart_broker")


class ScenarioRunError(Exception):
    """The run itself failed (cluster did not start, run exceeded its timeout); one line."""


class ClientProgramsError(ScenarioRunError):
    """The real client programs the scenario names could not be had (no JDK, no Go, an unpublished version)."""


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP during a run: treated like Ctrl-C."""


class RunInterrupted(KeyboardInterrupt):
    """A run ended by Ctrl-C, SIGTERM or SIGHUP, after every process it started was stopped. ``result``
    holds what the run had gathered (marked ``interrupted``, no verdicts), for a report of it."""

    def __init__(self, why: str, result: RunResult) -> None:
        super().__init__(why)
        self.result = result


@dataclass
class ActionResult:
    index: int
    action: Action
    text: str
    planned: float | None
    start: float
    end: float
    ok: bool
    detail: str

    @property
    def effect(self) -> float:
        """When the action took effect, what ``after: LABEL`` counts from: a signal or request when it
        was sent; a restart when the process is up again; a wait when its condition was met."""
        return self.end if self.action.kind in EFFECT_AT_END else self.start

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.action.kind, "action": self.text, "label": self.action.label,
                "line": self.action.line, "planned": self.planned, "start": round(self.start, 4),
                "end": round(self.end, 4), "effect": round(self.effect, 4), "ok": self.ok, "detail": self.detail}


@dataclass
class RunResult:
    scenario: Scenario
    namesrvs: list[str] = field(default_factory=list)
    brokers: dict[str, str] = field(default_factory=dict)  # proc name -> address
    impls: dict[str, str] = field(default_factory=dict)  # proc name -> what runs it ("toolkit", "java 5.3.3")
    actions: list[ActionResult] = field(default_factory=list)
    observer: Observer | None = None
    records: list[SendRecord] = field(default_factory=list)
    summaries: dict[str, LoadSummary] = field(default_factory=dict)
    verdicts: list[Verdict] = field(default_factory=list)
    end: float = 0.0  # s since time zero when the run ended
    setup_seconds: float = 0.0
    teardown_seconds: float = 0.0
    leftover: list[str] = field(default_factory=list)  # processes that needed SIGKILL at the end
    interrupted: str | None = None  # why the run was cut short (Ctrl-C, a signal); nothing was judged then
    state_dir: str | None = None  # the cluster's state directory (logs), when kept
    consumers: ConsumerRun | None = None  # consume records and ownership events, when the scenario has consumers
    metrics: MetricsWatch | None = None  # each NameServer's metrics over the run (run with metrics=True)
    clients: RealClients | None = None  # the real client programs (Java, Go), when the scenario has some
    client_problems: list[str] = field(default_factory=list)  # a real client that failed to do its part

    @property
    def passed(self) -> bool:
        return (self.interrupted is None and bool(self.verdicts) and all(v.passed for v in self.verdicts)
                and all(a.ok for a in self.actions) and not self.client_problems)

    @property
    def label_times(self) -> dict[str, float]:
        return {a.action.label: a.effect for a in self.actions if a.action.label and a.ok}


def start_options(scn: Scenario, metrics: bool = False) -> processes.StartOptions:
    c = scn.cluster
    return processes.StartOptions(
        namesrvs=c.namesrvs,
        brokers=c.brokers,
        slaves=c.slaves,
        register_period_ms=c.register_period_ms,
        broker_expired_ms=c.broker_expired_ms,
        scan_interval_ms=c.scan_interval_ms,
        namesrv_props=c.namesrv_config,
        topics=c.topics,
        topic_queues=c.queues,
        auth=c.auth,
        tls=c.tls,
        broker_props=(*c.broker_config, *((("persistMessages", "false"),) if c.message_store == "memory" else ())),
        metrics=metrics,
        namesrv_impl=c.namesrv_impl,
        broker_impl=c.broker_impl,
        java_sizing=Sizing(java_opts=c.java_opts),
        fault_proxy=bool(c.fault_proxy),
        client_proxy=c.client_proxy,
        proxy=c.proxy,
    )


def producer_options(g: ProducerGroup, namesrvs: list[str]) -> ProducerOptions:
    return ProducerOptions(
        namesrv_addrs=tuple(namesrvs),
        group=f"scenario_{g.name}",
        poll_name_server_interval=g.poll_interval,
        send_timeout=g.send_timeout,
        retry_times_when_send_failed=g.retries,
        send_latency_fault_enable=g.latency_fault,
    )


def _raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted(f"received {signal.Signals(signum).name}")


@contextmanager
def _signals(handler: Any) -> Iterator[None]:
    """Install ``handler`` for SIGTERM/SIGHUP (and SIGINT when given SIG_IGN) in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = [signal.SIGTERM, signal.SIGHUP] + ([signal.SIGINT] if handler is signal.SIG_IGN else [])
    old = {s: signal.signal(s, handler) for s in sigs}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run(
    scn: Scenario,
    *,
    records_path: str | Path | None = None,
    keep_dir: bool = False,
    base_dir: str | Path | None = None,
    progress: Callable[[str], None] = lambda line: None,
    consume_records_path: str | Path | None = None,
    metrics: bool = False,
) -> RunResult:
    """Run ``scn`` to the end and judge it; every process started is stopped before returning or raising.

    With ``metrics`` every process serves /metrics and each NameServer is
    scraped once a second for the report (:mod:`mqadmin.scenario.metrics_watch`).

    The cluster's state directory is a new ``mqscenario-NAME-*`` directory in
    ``base_dir`` (default: the system temporary directory), removed at the end
    unless ``keep_dir``.
    """
    try:
        programs = prepare(scn, progress) if clients_of(scn) else None
    except ArtifactError as exc:
        raise ClientProgramsError(str(exc)) from None
    workdir = Path(tempfile.mkdtemp(prefix=f"mqscenario-{scn.name}-", dir=base_dir))
    result = RunResult(scn, state_dir=str(workdir) if keep_dir else None)
    state: ClusterState | None = None
    try:
        with _signals(_raise_interrupted):
            begin = time.monotonic()
            progress(f"starting {scn.cluster.namesrvs} NameServer(s) and {scn.cluster.brokers} broker group(s) in {workdir}")
            try:
                state = processes.start(workdir, start_options(scn, metrics), progress)
            except ClusterError as exc:
                raise ScenarioRunError(f"cluster did not start: {exc}") from None
            result.setup_seconds = time.monotonic() - begin
            result.namesrvs = [p.addr for p in state.namesrvs]
            result.brokers = {p.name: p.addr for p in state.brokers}
            result.impls = {p.name: p.label for p in [*state.namesrvs, *state.brokers]}
            if programs is not None:
                endpoint = next((p.addr for p in state.procs if p.kind == "proxy"), None)
                result.clients = RealClients(scn, programs, result.namesrvs, workdir, credentials=app_credentials(state),
                                             tls=state.tls, endpoint=endpoint, progress=progress)
            progress(f"cluster up in {result.setup_seconds:.1f} s; running {scn.duration:g} s of load and timeline")
            if state.metrics:
                progress(f"metrics: watch the run with {prometheus_sd.prometheus_command(workdir)}")
            # Ctrl-C at a checkpoint only: raised anywhere, it can land in a finalizer, where Python
            # prints "Exception ignored" and the run goes on (seen with the fan-out's load threads).
            trio.run(_run_async, scn, state, result, records_path, progress, consume_records_path,
                     restrict_keyboard_interrupt_to_checkpoints=True)
    except BaseException as exc:
        interrupt = first_of(exc, KeyboardInterrupt)
        if interrupt is None:
            failed = first_of(exc, ScenarioRunError)  # raised inside the run's nursery (a client did not start)
            if failed is not None and failed is not exc:
                raise failed from None
            raise
        result.interrupted = str(interrupt) or "interrupted"
        raise RunInterrupted(result.interrupted, result) from None
    finally:
        with _signals(signal.SIG_IGN):  # a second Ctrl-C must not cut the cleanup short
            begin = time.monotonic()
            if result.clients is not None:
                result.leftover += result.clients.kill_all()
                result.client_problems = result.clients.problems
            procs = state.procs if state is not None else _recorded_procs(workdir)
            java.kill_java(procs)  # nothing is measured after the run (see kill_java)
            result.leftover += processes.stop_procs(procs)
            still = [p.name for p in procs if p.alive()]
            result.teardown_seconds = time.monotonic() - begin
            if not keep_dir:
                shutil.rmtree(workdir, ignore_errors=True)
        if still:
            raise ScenarioRunError(f"could not stop {', '.join(still)} (state in {workdir})")
    if result.consumers is not None:
        result.consumers.broker_losses = _broker_losses(scn, result.actions)
    result.verdicts = evaluate_all(
        scn, obs=result.observer, records=result.records, label_times=result.label_times, end=result.end,
        consumers=result.consumers,
    ) if result.observer is not None else []
    return result


def _recorded_procs(workdir: Path) -> list[Proc]:
    """The processes :func:`processes.start` recorded before it was interrupted (it stops them itself on errors)."""
    try:
        return ClusterState.load(workdir).procs
    except ClusterError:
        return []


async def _watch_signals() -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async for signum in signals:
            raise Interrupted(f"received {signal.Signals(signum).name}")


async def _run_async(
    scn: Scenario,
    state: ClusterState,
    result: RunResult,
    records_path: str | Path | None,
    progress: Callable[[str], None],
    consume_records_path: str | Path | None = None,
) -> None:
    writer = RecordWriter(records_path) if records_path else None
    consume_writer = consume_record_writer(consume_records_path) if consume_records_path and scn.consumers else None
    try:
        with trio.fail_after(scn.timeout):
            await _main(scn, state, result, writer, progress, consume_writer)
    except trio.TooSlowError:
        raise ScenarioRunError(f"scenario {scn.name} ran longer than its timeout of {scn.timeout:g} s") from None
    finally:
        if result.observer is not None and not result.end:
            result.end = result.observer.now()  # cut short (interrupted, timed out): the run so far ends now
        if writer is not None:
            writer.close()
        if consume_writer is not None:
            consume_writer.close()


async def _main(
    scn: Scenario,
    state: ClusterState,
    result: RunResult,
    writer: RecordWriter | None,
    progress: Callable[[str], None],
    consume_writer: RecordWriter | None = None,
) -> None:
    namesrvs = [p.addr for p in state.namesrvs]
    t0 = trio.current_time()
    obs = Observer(namesrvs, scn.observe_topics, interval=scn.observe_interval, timeout=scn.observe_timeout, t0=t0,
                   security=admin_security(state))
    credentials = app_credentials(state)  # the simulated applications sign as the normal account
    tls = admin_security(state).ssl_context()  # ... and use TLS when the cluster enforces it
    result.observer = obs

    def sink(rec: SendRecord) -> None:
        result.records.append(rec)
        if writer is not None:
            writer.write(rec)

    clients = result.clients
    async with trio.open_nursery() as outer:
        if threading.current_thread() is threading.main_thread():
            outer.start_soon(_watch_signals)
        if clients is not None:
            try:
                await clients.launch(outer)  # JVMs take seconds: every client program is ready before time zero
            except ClientStartError as exc:
                raise ScenarioRunError(str(exc)) from None
        await outer.start(obs.run)
        t0 = trio.current_time()
        obs.rebase(t0)  # time zero: the observer has seen every NameServer once
        if clients is not None:
            clients.set_t0(t0)
        if state.metrics:
            result.metrics = MetricsWatch(state.namesrvs, t0)
            outer.start_soon(result.metrics.run)
        executor = Executor(state, obs)
        fleet = None
        if scn.consumers:
            consume_sink: Callable[[ConsumeRecord], None] | None = consume_writer.write if consume_writer else None
            fleet = ConsumerFleet(scn, namesrvs, t0, sink=consume_sink, credentials=credentials, tls=tls, real=clients)
            result.consumers = fleet.run_data
            await outer.start(fleet.run)
            executor.consumer_actions = fleet.action
        async with ClientPool(credentials=credentials, tls=tls) as pool, trio.open_nursery() as work:
            for g in scn.groups:
                work.start_soon(_run_group, g, namesrvs, pool, t0, sink, result)
            await _run_timeline(scn, executor, result, t0, progress)
        await trio.sleep_until(max(trio.current_time(), t0 + scn.duration) + SETTLE)
        if fleet is not None:
            fleet.run_data.broker_losses = _broker_losses(scn, result.actions)  # what the drain must not await
            await _drain(result.records, fleet.run_data)
        result.end = obs.now()
        if fleet is not None:
            await fleet.close()
        if clients is not None:
            clients.kill_all()  # the consumers a start_consumer never asked for
        outer.cancel_scope.cancel()


def _broker_losses(scn: Scenario, actions: list[ActionResult]) -> list[tuple[str, float]]:
    """When a memory-only master lost its messages: (broker name, seconds since time zero) per kill or stop.

    A kill or shutdown ends when the process is seen dead, and until then it may still store and
    acknowledge (on a busy machine the signal lands some milliseconds after the action began; an answer
    sent just before it arrives later still): its end is the instant. A restart's end is the new
    process's start, so there the action's start stands.
    """
    if scn.cluster.message_store != "memory":
        return []
    return [(a.action.args["broker"], a.start if a.action.kind == "restart_broker" else a.end) for a in actions
            if a.ok and a.action.kind in LOSING_ACTIONS and a.action.args.get("broker_id", 0) == 0]


async def _drain(records: list[SendRecord], run: ConsumerRun) -> None:
    """Wait, at most DRAIN_LIMIT, while live consumers still have acknowledged messages to consume."""
    with trio.move_on_after(DRAIN_LIMIT):
        while still_to_consume(records, run):
            await trio.sleep(0.1)


async def _run_group(
    g: ProducerGroup,
    namesrvs: list[str],
    pool: ClientPool,
    t0: float,
    sink: Callable[[SendRecord], None],
    result: RunResult,
) -> None:
    if result.clients is not None and is_real(g.client):
        result.summaries[g.name] = await result.clients.run_group(g, sink)
        return
    await trio.sleep_until(t0 + g.start)
    spec = LoadSpec(producers=g.producers, topics=g.topics, rate_per_producer=g.rate,
                    message_size=g.message_size, duration=g.duration)
    result.summaries[g.name] = await run_load(
        producer_options(g, namesrvs), spec, sink, pool=pool, first_producer_id=g.first_id, t0=t0
    )


async def _run_timeline(
    scn: Scenario, executor: Executor, result: RunResult, t0: float, progress: Callable[[str], None]
) -> None:
    for i, action in enumerate(scn.timeline):
        if action.at is not None:
            await trio.sleep_until(t0 + action.at)
        start = trio.current_time() - t0
        text = action.describe()
        try:
            detail = await executor.run(action)
            ok = True
        except ActionError as exc:
            detail, ok = str(exc), False
        end = trio.current_time() - t0
        result.actions.append(ActionResult(i + 1, action, text, action.at, start, end, ok, detail))
        progress(f"t={start:6.2f} s  {text}: {'ok' if ok else 'FAILED'} ({detail})")
