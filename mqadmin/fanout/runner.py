"""The fan-out driver: cluster, topics, engine, timeline, progress, the brokers' own counts.

Order matters for clear failures: options are checked first, then the
NameServer is asked for its brokers (an unreachable one fails in one line
before a JVM is started), then Spark starts, a warm-up job proves the
workers can import the fan-out code, and only then is the run submitted.
Every partition starts its load at one wall-clock instant (the start
barrier, ``start_delay`` after submission) so that kills, timelines and the
partitions' per-second counters share one time axis.

Whatever ends the run (success, an error, Ctrl-C, SIGTERM) the Spark job
is cancelled, a session we created is stopped and a cluster we started is
stopped.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mqadmin.client.errors import AdminError
from mqadmin.fanout import FanoutError
from mqadmin.fanout.brokers import ClusterView, Counter, StoredCount, probe
from mqadmin.fanout.metrics import FanoutMetrics, merge_blobs
from mqadmin.fanout.options import FanoutOptions
from mqadmin.fanout.plan import FanoutPlan
from mqadmin.fanout.timeline import Event, KillTimeline, ScenarioTimeline, Timeline
from mqadmin.localcluster import processes
from mqadmin.localcluster.accounts import admin_security
from mqadmin.localcluster.namesrvs import namesrv_addrs
from mqadmin.localcluster.state import STATE_FILE, ClusterError, ClusterState, default_dir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mqadmin.scenario.model import Scenario

#: Slack (s) on top of the load's own bounds before the driver gives up on a run.
WATCHDOG_SLACK = 60.0
#: Seconds between the driver's readings of the brokers' counts during a run.
POLL_EVERY = 1.0


class Job(Protocol):
    def start(self) -> None: ...
    def done(self) -> bool: ...
    def progress(self) -> tuple[int, int]: ...
    def cancel(self) -> None: ...
    def result(self, timeout: float) -> list[bytes]: ...


@dataclass
class FanoutResult:
    plan: FanoutPlan
    engine: str  # "spark" or "multiprocessing"
    master: str | None
    parallelism: int
    metrics: FanoutMetrics
    counts: dict[str, StoredCount]
    events: list[Event] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    cluster_dir: str | None = None
    scenario: str | None = None
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: with consumers: each group's reconciliation rows (mqadmin.fanout.consume_metrics.reconcile)
    consumer_rows: list[dict[str, Any]] | None = None

    @property
    def engine_text(self) -> str:
        if self.engine == "spark":
            return f"Spark {self.master}"
        return f"multiprocessing ({self.parallelism} processes)"


Status = Callable[[str], None]


def _interrupt(signum: int) -> KeyboardInterrupt:
    """Ctrl-C as Python raises it; SIGTERM/SIGHUP named (the command's one line says which)."""
    return KeyboardInterrupt() if signum == signal.SIGINT else KeyboardInterrupt(f"received {signal.Signals(signum).name}")


@contextmanager
def _signals_as_interrupt(received: list[int]) -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP end the run (so the cleanup below runs), and are noted in ``received``.

    Why noted: the handler's KeyboardInterrupt is raised wherever the main thread is, and when that
    is a finalizer (a garbage-collected trio nursery of a load thread, seen in CI) Python prints
    "Exception ignored" and goes on: the run would not stop. The wait loop raises it again.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        received.append(signum)
        raise _interrupt(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _topic_names(opts: FanoutOptions) -> tuple[str, ...]:
    return tuple(f"{opts.topic_prefix}{i}" for i in range(opts.topics))


def _resolve_load(opts: FanoutOptions, scn: Scenario | None) -> FanoutOptions:
    """Fill the Nones: from the scenario's first producer group, else the defaults."""
    g = scn.groups[0] if scn is not None else None
    pick = lambda mine, theirs, default: mine if mine is not None else theirs if g is not None else default
    return replace(
        opts,
        rate=pick(opts.rate, g.rate if g else None, 1.0),
        message_size=pick(opts.message_size, g.message_size if g else None, 256),
        poll_interval=pick(opts.poll_interval, g.poll_interval if g else None, 30.0),
        send_timeout=pick(opts.send_timeout, g.send_timeout if g else None, 3.0),
        retries=pick(opts.retries, g.retries if g else None, 2),
        latency_fault=pick(opts.latency_fault, g.latency_fault if g else None, False),
        duration=opts.duration if opts.duration is not None or opts.messages_per_producer is not None else (
            scn.duration if scn is not None else 20.0),
    )


def make_plan(opts: FanoutOptions, namesrvs: list[str], topics: tuple[str, ...], partitions: int) -> FanoutPlan:
    rate = opts.rate if opts.rate is not None else 1.0
    ramp = opts.ramp_up
    if ramp is None:
        ramp = min(1.0 / rate, 5.0) if rate > 0 else 0.0
    groups = opts.consumer_groups or (min(len(topics), opts.consumers) if opts.consumers else 1)
    return FanoutPlan(
        consumers=opts.consumers, consumer_groups=max(1, groups), drain=opts.drain,
        namesrv_addrs=tuple(namesrvs), topics=topics, producers=opts.producers, partitions=partitions, rate=rate,
        duration=opts.duration, messages_per_producer=opts.messages_per_producer,
        message_size=opts.message_size if opts.message_size is not None else 256,
        poll_interval=opts.poll_interval or 30.0, send_timeout=opts.send_timeout or 3.0,
        retries=opts.retries if opts.retries is not None else 2, latency_fault=bool(opts.latency_fault),
        ramp_up=ramp, max_duration=opts.max_duration,
    )


class _Poller(threading.Thread):
    """Reads the brokers' counts every POLL_EVERY s during the run (a killed broker's last word)."""

    def __init__(self, counter: Counter, start_wall: float) -> None:
        super().__init__(name="fanout-broker-poller", daemon=True)
        self.counter = counter
        self.start_wall = start_wall
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(POLL_EVERY):
            with contextlib.suppress(Exception):  # best effort: the final reading decides
                self.counter.poll(time.time() - self.start_wall)


class Driver:
    """One run, with everything it started, so that ``close`` can stop it all."""

    def __init__(self, opts: FanoutOptions, *, session: SparkSession | None = None, status: Status = lambda s: None,
                 progress: Any = None) -> None:
        opts.validate()
        self.opts = opts
        self.session = session
        self.own_session = False
        self.status = status
        self.progress = progress  # a rich.progress.Progress, or None
        self.state: ClusterState | None = None
        self.own_cluster_dir: Path | None = None
        self.spark_dir: Path | None = None  # the session's work dir (log, code zip, spark.local.dir)
        self.timings: dict[str, float] = {}
        self.notes: list[str] = []
        self.signals: list[int] = []  # the signals that asked the run to end (see _signals_as_interrupt)
        self.scenario: Scenario | None = None

    # ------------------------------------------------------------------ cluster

    def _start_cluster(self, topics: tuple[str, ...]) -> None:
        opts = self.opts
        if self.scenario is not None:
            from mqadmin.scenario.runner import start_options

            start_opts = start_options(self.scenario)
        else:
            start_opts = processes.StartOptions(namesrvs=2, brokers=2, topics=topics, topic_queues=opts.queues)
        directory = opts.cluster_dir
        if directory is None:
            directory = self.own_cluster_dir = Path(tempfile.mkdtemp(prefix="mqadmin-fanout-cluster-"))
        self.status(f"starting {start_opts.namesrvs} NameServer(s) and {start_opts.brokers} broker(s) in {directory}")
        begin = time.monotonic()
        try:
            self.state = processes.start(directory, start_opts)
        except ClusterError as exc:
            raise FanoutError(f"local cluster did not start: {exc}") from None
        self.timings["cluster_start_s"] = time.monotonic() - begin

    def _namesrvs(self) -> list[str]:
        if self.state is not None:
            return [p.addr for p in self.state.namesrvs]
        try:
            return namesrv_addrs(self.opts.namesrv, self.opts.cluster_dir, "--namesrv")
        except AdminError as exc:
            raise FanoutError(str(exc)) from None

    def _local_state(self) -> ClusterState | None:
        try:
            return ClusterState.load(self.opts.cluster_dir or default_dir())
        except ClusterError:
            return None

    def _stop_cluster(self) -> None:
        if self.state is None:
            return
        _, left = processes.stop_cluster(self.state)
        if left:
            self.notes.append(f"could not stop {', '.join(left)} (state in {self.state.dir})")

    # ------------------------------------------------------------------ engines

    def _spark(self) -> SparkSession:
        from mqadmin.fanout import spark

        if self.session is None:
            self.status(f"starting Spark ({self.opts.master})")
            begin = time.monotonic()
            self.spark_dir = Path(tempfile.mkdtemp(prefix="mqadmin-fanout-spark-"))
            self.session = spark.start_session(self.opts.master, conf=self.opts.spark_conf, work_dir=self.spark_dir,
                                               executor_timeout=self.opts.spark_timeout)
            self.own_session = True
            self.timings["spark_start_s"] = time.monotonic() - begin
        return self.session

    def _job(self, plan: FanoutPlan) -> Job:
        if self.opts.engine == "spark":
            from mqadmin.fanout.spark import SparkJob

            return SparkJob(self._spark(), plan)
        from mqadmin.fanout.multiproc import ProcessJob

        return ProcessJob(plan, self.opts.workers)

    def _parallelism(self) -> int:
        if self.opts.engine == "spark":
            from mqadmin.fanout import spark

            return spark.parallelism(self._spark())
        from mqadmin.fanout import multiproc

        return max(1, min(self.opts.workers or multiproc.parallelism(), self.opts.producers))

    def _warm_up(self, partitions: int) -> None:
        if self.opts.engine != "spark":
            return
        from mqadmin.fanout import spark

        begin = time.monotonic()
        spark.warm_up(self._spark(), partitions)
        self.timings["warmup_s"] = time.monotonic() - begin

    # ------------------------------------------------------------------ the run

    def run(self) -> FanoutResult:
        began = time.monotonic()
        try:
            with _signals_as_interrupt(self.signals):
                result = self._run()
                self._raise_if_signalled()  # lost in a finalizer after the wait: still an interrupted run
        except FanoutError as exc:
            self.close()
            # A log the error names is kept (the message says where); nothing else is left behind.
            self._remove_temp_dirs(keep_named_in=str(exc))
            raise
        except BaseException:
            self.close()
            self._remove_temp_dirs()
            raise
        self.close()
        self._remove_temp_dirs()
        result.notes.extend(n for n in self.notes if n not in result.notes)
        result.timings["total_s"] = time.monotonic() - began
        return result

    def _raise_if_signalled(self) -> None:
        """A signal noted by _signals_as_interrupt whose KeyboardInterrupt a finalizer swallowed: raise it again."""
        if self.signals:
            raise _interrupt(self.signals[0])

    def _temp_dirs(self) -> list[Path]:
        return [d for d in (self.own_cluster_dir, self.spark_dir) if d is not None and d.exists()]

    def _remove_temp_dirs(self, keep_named_in: str = "") -> None:
        """The temporary directories this run made (cluster state, Spark's work dir): gone at the end,
        unless ``keep_named_in`` (an error message) points into one."""
        for d in self._temp_dirs():
            if d == self.own_cluster_dir and (d / STATE_FILE).exists():
                continue  # processes it could not stop: their state stays (the notes say so)
            if str(d) in keep_named_in:
                continue
            shutil.rmtree(d, ignore_errors=True)

    def close(self) -> None:
        """Stop what this run started (idempotent)."""
        with _ignore_signals():
            if self.own_session and self.session is not None:
                with contextlib.suppress(Exception):  # the JVM may be gone already
                    self.session.stop()
                self.session = None
            self._stop_cluster()
            self.state = None

    def _run(self) -> FanoutResult:
        opts = self.opts
        if opts.engine == "spark" and self.session is None:
            from mqadmin.fanout import spark

            spark.probe_master(opts.master)  # an unreachable master fails before a cluster or a JVM starts
        if opts.scenario is not None:
            from mqadmin.scenario import schema

            try:
                self.scenario = schema.load(opts.scenario)
            except schema.ScenarioError as exc:
                raise FanoutError(str(exc)) from None
        opts = self.opts = _resolve_load(opts, self.scenario)
        scn = self.scenario
        topics = scn.groups[0].topics if scn is not None else _topic_names(opts)
        if scn is not None or opts.start:
            self._start_cluster(topics)
        namesrvs = self._namesrvs()
        self.status(f"asking {';'.join(namesrvs)} for brokers")
        security = admin_security(self.state) if self.state is not None else opts.security
        view = probe(namesrvs, topics, create=opts.create_topics, queues=opts.queues, security=security)
        kill_state = self._kill_state(view)
        counter = Counter(view, topics)
        counter.before()

        parallelism = self._parallelism()
        partitions = opts.partitions or parallelism
        if partitions > parallelism and opts.messages_per_producer is None:
            self.notes.append(f"{partitions} partitions on {parallelism} task slots: partitions run in waves, "
                              "so not all producers are live at once")
        self._warm_up(min(partitions, parallelism))
        submitted = time.time()
        plan = replace(make_plan(opts, namesrvs, topics, partitions), security=security,
                       start_wall=submitted + opts.start_delay)
        job = self._job(plan)
        timeline = self._timeline(plan.start_wall, namesrvs, kill_state)
        poller = _Poller(counter, plan.start_wall)
        self.status(f"{plan.producers} producers in {partitions} partitions on {self._engine_text(parallelism)}; "
                    f"load starts in {opts.start_delay:g} s")
        job.start()
        timeline.start()
        if counter.pollable:
            poller.start()
        try:
            blobs = self._wait(job, plan, timeline)
        finally:
            poller.stop.set()
            timeline.stop()
            if poller.is_alive():
                poller.join(10)
        done_wall = time.time()
        metrics = merge_blobs(blobs)
        counter.after(done_wall - plan.start_wall)
        errors = metrics.errors
        if errors and len(errors) == metrics.partitions:
            raise FanoutError(f"every partition failed; {errors[0]}")
        result = FanoutResult(
            plan=plan, engine=opts.engine, master=opts.master if opts.engine == "spark" else None,
            parallelism=parallelism, metrics=metrics, counts=counter.counts, events=timeline.events,
            timings=self.timings, cluster_dir=self.state.dir if self.state is not None else None,
            scenario=scn.name if scn is not None else None, notes=list(self.notes),
        )
        result.notes.extend(errors)
        if metrics.consume is not None:
            result.consumer_rows = self._reconcile(view, metrics)
        parts = [p for p in metrics.parts if p.error is None]
        if parts:
            result.timings["first_task_s"] = min(p.entered for p in parts) + opts.start_delay
            result.timings["last_task_s"] = max(p.entered for p in parts) + opts.start_delay
            result.timings["late_start_s"] = max(0.0, max(p.started for p in parts))
            result.timings["collect_s"] = max(0.0, done_wall - (plan.start_wall + max(p.ended for p in parts)))
        result.timings["job_s"] = done_wall - submitted
        if result.timings.get("late_start_s", 0.0) > 0.5:
            result.notes.append(f"some partitions started {result.timings['late_start_s']:.1f} s after the start "
                                f"barrier (raise --start-delay on a slow or busy machine)")
        if scn is not None and isinstance(timeline, ScenarioTimeline):
            result.verdicts = timeline.verdicts(scn, metrics)
        return result

    def _reconcile(self, view: ClusterView, metrics: FanoutMetrics) -> list[dict[str, Any]]:
        """Each consumer group's acknowledged messages: consumed, lag or unexplained (reads committed offsets)."""
        from mqadmin.fanout.consume import read_offsets
        from mqadmin.fanout.consume_metrics import reconcile

        assert metrics.consume is not None
        self.status("reading the consumer groups' committed offsets")
        read = read_offsets(view, metrics.consume)
        if read is None:
            self.notes.append("could not read every committed consumer offset: lag and unexplained are not split")
        rows = reconcile(metrics.consume, read[0] if read else None, read[1] if read else None)
        return [r.to_obj() for r in rows]

    def _engine_text(self, parallelism: int) -> str:
        return f"Spark {self.opts.master}" if self.opts.engine == "spark" else f"{parallelism} processes"

    def _kill_state(self, view: ClusterView) -> ClusterState | None:
        if not self.opts.kills:
            return None
        state = self.state or self._local_state()
        if state is None:
            raise FanoutError("--kill-broker needs a local cluster (use --start, or run mqadmin start)")
        for name, _ in self.opts.kills:
            if name not in view.masters:
                raise FanoutError(f"--kill-broker {name}: no such master (brokers: {', '.join(view.masters)})")
            try:
                state.find_broker(name, 0)
            except ClusterError as exc:
                raise FanoutError(f"--kill-broker: {exc}") from None
        return state

    def _timeline(self, start_wall: float, namesrvs: list[str], kill_state: ClusterState | None) -> Timeline:
        if self.scenario is not None:
            assert self.state is not None
            return ScenarioTimeline(self.scenario, self.state, namesrvs, start_wall)
        return KillTimeline(kill_state, self.opts.kills, start_wall)

    def _wait(self, job: Job, plan: FanoutPlan, timeline: Timeline) -> list[bytes]:
        """Until the job ends: progress, watchdog; Ctrl-C cancels the job."""
        hard = plan.time_limit + plan.send_timeout * 2 + 3.0 + 2.0  # run_load's own bounds
        if plan.consumers:
            from mqadmin.fanout.consume import STOP_TIMEOUT

            hard = max(hard, plan.time_limit + plan.drain + STOP_TIMEOUT + 2.0)
        deadline = plan.start_wall + hard + WATCHDOG_SLACK
        task = None
        total = plan.time_limit + self.opts.start_delay if plan.duration is not None else plan.partitions
        if self.progress is not None:
            task = self.progress.add_task("starting", total=total)
        try:
            while not job.done():
                self._raise_if_signalled()  # an interrupt lost in a finalizer: raised again here
                now = time.time()
                if now > deadline:
                    job.cancel()
                    raise FanoutError(f"the run did not finish within {deadline - plan.start_wall:.0f} s of its start")
                if task is not None:
                    finished, running = job.progress()
                    t = now - plan.start_wall
                    phase = "waiting for the start barrier" if t < 0 else "load" if t < plan.time_limit else "draining"
                    desc = f"{phase}: {running} running, {finished}/{plan.partitions} partitions done"
                    if timeline.events:
                        desc += f"; {timeline.events[-1].what} at {timeline.events[-1].t:.1f} s"
                    done = min(now - (plan.start_wall - self.opts.start_delay), total) if plan.duration is not None else finished
                    self.progress.update(task, completed=done, description=desc)
                time.sleep(0.2)
        except KeyboardInterrupt:
            job.cancel()
            with contextlib.suppress(Exception):  # cancelled on purpose
                job.result(30.0)
            raise
        if task is not None:
            self.progress.update(task, completed=total, description="collected")
        return job.result(60.0)


@contextmanager
def _ignore_signals() -> Iterator[None]:
    """A second Ctrl-C must not cut the cleanup short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run(opts: FanoutOptions, *, session: SparkSession | None = None, status: Status = lambda s: None,
        progress: Any = None) -> FanoutResult:
    """Run a fan-out; raises FanoutError (one line) when it cannot, KeyboardInterrupt when interrupted."""
    return Driver(opts, session=session, status=status, progress=progress).run()
