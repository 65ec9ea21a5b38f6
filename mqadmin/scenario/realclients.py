"""Real Java and Go clients as a scenario's load and consumers.

A producer group with ``client: java:VERSION`` or ``client: go`` is one client program
(:mod:`mqadmin.rocketmq.harness`) running the group's producers, each a client instance of its own;
each consumer of such a consumer group is a program of its own, so that ``kill_consumer`` is a kill -9
of a real process whose connections the brokers see close, and ``stop_consumer`` is the client's own
``shutdown()``.

JVMs take seconds to start on a busy machine, so every program a run will need is started before
time zero, up to its ``ready`` line: each producer group's, each consumer started at the beginning,
and one more per consumer a ``start_consumer`` action will start. ``go`` on its stdin then starts
the sends, or the consumer, at the moment the scenario says. Their lines become the records simulated
clients make (:mod:`mqadmin.scenario.client_lines`), so the same verdicts judge them.

Every program is stopped at the end of the run, and :meth:`RealClients.kill_all` (plain SIGKILL,
callable outside trio) is the runner's last word whatever happened.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from mqadmin.rocketmq import harness
from mqadmin.rocketmq.artifacts import Progress
from mqadmin.rocketmq.jvm import java_command, java_env
from mqadmin.scenario import client_lines, grpc_clients
from mqadmin.scenario.client_procs import ClientProcess
from mqadmin.scenario.client_schema import GRPC_PYTHON, family, grpc_java_version, is_grpc, is_real, java_version
from mqadmin.scenario.model import ConsumerGroupSpec
from mqadmin.scenario.model import ProducerGroup, Scenario
from remoting.acl import Credentials
from simclient import ConsumeRecord, ConsumeStats, LoadSummary, OwnershipEvent, SendRecord

#: How long a client program may take to print ``ready`` (a JVM on a busy 2-core machine).
READY_TIMEOUT = 180.0
#: How long a real consumer's shutdown may take (commit offsets, unregister, stop its threads).
STOP_TIMEOUT = 15.0
#: Beyond a group's last send: how long its last sends may still take to answer before it is stopped.
SEND_GRACE = 5.0
CLIENT_HEAP = "96m"


class ClientStartError(Exception):
    """A client program did not start; one line."""


@dataclass
class Programs:
    """What :func:`prepare` built: the Java programs per RocketMQ version, the Go program, the gRPC ones
    (Java per rocketmq-client-java version, the Python script)."""

    java: dict[str, harness.JavaPrograms] = field(default_factory=dict)
    go: Path | None = None
    grpc_java: dict[str, harness.JavaPrograms] = field(default_factory=dict)
    grpc_python: Path | None = None


def clients_of(scn: Scenario) -> set[str]:
    """The real client kinds a scenario uses."""
    return {c for c in [g.client for g in scn.groups] + [s.client for s in scn.consumers] if is_real(c)}


def prepare(scn: Scenario, progress: Progress | None = None) -> Programs:
    """Build (or find in the cache) every program the scenario's real clients need (HarnessError)."""
    programs = Programs()
    for client in sorted(clients_of(scn)):
        version, grpc_version = java_version(client), grpc_java_version(client)
        if version is not None:
            programs.java[version] = harness.java_programs(version, progress=progress)
        elif grpc_version is not None:
            programs.grpc_java[grpc_version] = harness.grpc_java_programs(grpc_version, progress=progress)
        elif family(client) == GRPC_PYTHON:
            programs.grpc_python = harness.grpc_python_program()
        else:
            programs.go = harness.go_program(progress=progress)
    return programs


def consumers_needed(scn: Scenario) -> dict[str, int]:
    """Per consumer group with a real client: consumers started at its start plus by start_consumer."""
    out = {s.name: s.count for s in scn.consumers if is_real(s.client)}
    for a in scn.timeline:
        if a.kind == "start_consumer" and a.args["group"] in out:
            out[a.args["group"]] += a.args.get("count", 1)
    return out


class RealConsumer:
    """One consumer of a group with a real client, as :class:`~mqadmin.scenario.consumers.ConsumerFleet`
    drives it (``client_id``, ``state``, ``shutdown``, ``kill``, like a simulated one)."""

    def __init__(self, owner: RealClients, proc: ClientProcess, spec: ConsumerGroupSpec, consumer_id: int,
                 emit: Callable[[ConsumeRecord], None], on_event: Callable[[OwnershipEvent], None],
                 stats: ConsumeStats) -> None:
        self.owner = owner
        self.proc = proc
        self.spec = spec
        self.consumer_id = consumer_id
        self.client_id = f"{spec.client}#{consumer_id} (pid {proc.pid})"
        self.emit = emit
        self.on_event = on_event
        self.stats = stats
        self.state = "new"
        self.owned: set[tuple[str, str, int]] = set()
        self.stopped = trio.Event()
        proc.on_line = self._line

    def _event(self, kind: str) -> None:
        self.on_event(OwnershipEvent(self.owner.now(), self.consumer_id, self.spec.group, kind))

    def _line(self, line: dict) -> None:
        event = line.get("event")
        if event == "stopped":
            self.stopped.set()
        if self.state not in ("running", "stopping"):
            return
        wall_t0 = self.owner.wall_t0
        if event == "receive":
            grpc_clients.count_receive(line, self.stats)
        elif event == "consumed":
            read = grpc_clients.consume_record if is_grpc(self.spec.client) else client_lines.consume_record
            rec = read(line, self.consumer_id, self.spec.group, wall_t0)
            self.stats.consumed += 1
            self.stats.retried += rec.outcome == "retry"
            self.emit(rec)
        elif event == "allocate" and line.get("topic") in self.spec.topics:
            for e in client_lines.allocation_events(line, self.consumer_id, self.spec.group, wall_t0, self.owned):
                self.stats.queue_acquired += e.kind == "acquire"
                self.stats.queue_released += e.kind == "release"
                self.on_event(e)

    def go(self) -> None:
        self.state = "running"
        self.stats.consumers += 1
        self._event("start")
        if not self.proc.tell("go"):
            self.owner.problem(f"consumer {self.client_id} of {self.spec.name} was gone before it started")

    async def watch(self) -> None:
        """Report a consumer that exits while it should be running (the broker sees it die)."""
        await self.proc.ended.wait()
        if self.state == "running":
            self.state = "killed"
            self._event("kill")
            await self.proc.wait_exit(2.0)
            code = self.proc.returncode()
            self.owner.problem(f"consumer {self.client_id} of {self.spec.name} exited by itself"
                               f"{'' if code is None else f' (status {code})'}: {self.proc.stderr_tail()}")

    async def shutdown(self, timeout: float = STOP_TIMEOUT) -> None:
        """The client's own shutdown(): offsets committed, unregistered (a kill if it takes too long)."""
        if self.state != "running":
            return
        self.state = "stopping"
        self.proc.tell("stop")
        with trio.move_on_after(max(timeout, STOP_TIMEOUT)):
            await self.stopped.wait()
        if not self.stopped.is_set():
            self.owner.problem(f"consumer {self.client_id} of {self.spec.name} did not stop within "
                               f"{STOP_TIMEOUT:g} s; killed")
        self.proc.kill()
        self.state = "stopped"
        for q in sorted(self.owned):
            self.on_event(OwnershipEvent(self.owner.now(), self.consumer_id, self.spec.group, "release", *q))
        self.owned.clear()
        self._event("stop")

    def kill(self) -> None:
        """kill -9: no unregister; its connections close with the process."""
        if self.state != "running":
            return
        self.state = "killed"
        self.proc.kill()
        self._event("kill")


class RealClients:
    """The real client programs of one run: started before time zero, driven on its timeline, stopped."""

    def __init__(self, scn: Scenario, programs: Programs, namesrvs: list[str], workdir: Path, *,
                 credentials: Credentials | None = None, tls: bool = False, endpoint: str | None = None,
                 progress: Callable[[str], None] = lambda line: None) -> None:
        self.scn = scn
        self.programs = programs
        self.namesrvs = namesrvs
        self.endpoint = endpoint  # the Proxy's gRPC endpoint, for RocketMQ 5 clients
        self.workdir = workdir
        self.credentials = credentials
        self.tls = tls
        self.progress = progress
        self.procs: list[ClientProcess] = []  # every process started, for kill_all
        self.producers: dict[str, ClientProcess] = {}
        self.spares: dict[str, list[ClientProcess]] = {}
        self.problems: list[str] = []  # what went wrong with a client program (the run fails)
        self.t0 = 0.0
        self.wall_t0 = 0.0
        self._nursery: trio.Nursery | None = None

    def problem(self, text: str) -> None:
        self.problems.append(text)
        self.progress(f"client problem: {text}")

    def now(self) -> float:
        return trio.current_time() - self.t0

    def set_t0(self, t0: float) -> None:
        """Time zero, and the wall-clock time it was (the programs stamp their lines by the wall clock)."""
        self.t0 = t0
        self.wall_t0 = time.time() - (trio.current_time() - t0)

    # -- starting ------------------------------------------------------------------------------

    async def launch(self, nursery: trio.Nursery) -> None:
        """Start every program the run needs and wait until each is ready (ClientStartError if one is not)."""
        self._nursery = nursery
        for g in self.scn.groups:
            if is_real(g.client):
                self.producers[g.name] = self._spawn(f"producer-{g.name}", g.client, self._producer_args(g))
        for spec in self.scn.consumers:
            for _ in range(consumers_needed(self.scn).get(spec.name, 0)):
                self.spares.setdefault(spec.name, []).append(self._spawn_consumer(spec))
        if self.procs:
            begin = trio.current_time()
            kinds = Counter(p.name.rsplit("-", 1)[0] if p.name.startswith("consumer") else p.name for p in self.procs)
            self.progress(f"starting {len(self.procs)} client program(s): "
                          + ", ".join(name + (f" x{n}" if n > 1 else "") for name, n in kinds.items()))
            await self._wait_ready(self.procs)
            self.progress(f"client programs ready in {trio.current_time() - begin:.1f} s")

    def _spawn_consumer(self, spec: ConsumerGroupSpec) -> ClientProcess:
        index = sum(1 for p in self.procs if p.name.startswith(f"consumer-{spec.name}-"))
        return self._spawn(f"consumer-{spec.name}-{index}", spec.client, self._consumer_args(spec),
                           {"rocketmq.client.rebalance.waitInterval": str(int(spec.rebalance_interval * 1000))})

    async def _wait_ready(self, procs: list[ClientProcess]) -> None:
        async def ready(p: ClientProcess) -> None:
            with trio.move_on_after(READY_TIMEOUT):
                await first_of(p.ready, p.ended)
            if not p.ready.is_set():
                why = f"not ready after {READY_TIMEOUT:g} s"
                if p.ended.is_set():
                    await p.wait_exit(2.0)
                    why = f"exited (status {p.returncode()})"
                failed.append(f"client program {p.name} ({' '.join(p.cmd[:1])}) {why}: {p.stderr_tail()}")

        failed: list[str] = []
        async with trio.open_nursery() as waits:
            for p in procs:
                waits.start_soon(ready, p)
        if failed:
            raise ClientStartError(failed[0])

    def _spawn(self, name: str, client: str, args: list[str], props: dict[str, str] | None = None) -> ClientProcess:
        assert self._nursery is not None
        home = self.workdir / "clients" / name
        version = java_version(client)
        if is_grpc(client):
            cmd, env = grpc_clients.command(self.programs, name, client, args, home)
        elif version is not None:
            main = harness.PRODUCER_MAIN if name.startswith("producer") else harness.CONSUMER_MAIN
            jprops = {**(props or {}), **({"tls.enable": "true"} if self.tls else {})}
            cmd = java_command(self.programs.java[version], main, args, home, heap=CLIENT_HEAP, direct="64m",
                               props=jprops)
            env = java_env(home)
        else:
            assert self.programs.go is not None
            sub = "scenario-produce" if name.startswith("producer") else "scenario-consume"
            cmd = [str(self.programs.go), sub, *args, *(["--tls=true"] if self.tls else [])]
            env = {k: v for k, v in java_env(home).items() if k != "ROCKETMQ_HOME"}
        proc = ClientProcess(name, cmd, env, home)
        self.procs.append(proc)
        proc.start()
        self._nursery.start_soon(proc.read)
        return proc

    def _common_args(self, group: str) -> list[str]:
        args = ["--namesrv", ";".join(self.namesrvs), "--group", group]
        if self.credentials is not None:
            args += ["--access-key", self.credentials.access_key, "--secret-key", self.credentials.secret_key]
        return args

    def _producer_args(self, g: ProducerGroup) -> list[str]:
        if is_grpc(g.client):
            assert self.endpoint is not None, "a gRPC client's cluster has a Proxy"
            return grpc_clients.producer_args(g, self.endpoint)
        args = [*self._common_args(f"scenario_{g.name}"), "--producers", str(g.producers), "--rate", f"{g.rate:g}",
                "--seconds", f"{g.duration:g}", "--size", str(g.message_size),
                "--timeout-ms", str(int(g.send_timeout * 1000)), "--retries", str(g.retries)]
        for t in g.topics:
            args += ["--topic", t]
        if family(g.client) == "java":
            args += ["--poll-ms", str(int(g.poll_interval * 1000)), "--latency-fault", str(g.latency_fault).lower()]
        return args

    def _consumer_args(self, spec: ConsumerGroupSpec) -> list[str]:
        if is_grpc(spec.client):
            assert self.endpoint is not None, "a gRPC client's cluster has a Proxy"
            return grpc_clients.consumer_args(spec, self.endpoint)
        args = [*self._common_args(spec.group), "--expression", spec.subscription,
                "--from", spec.consume_from.split("_", 1)[0], "--threads", str(spec.consume_threads),
                "--batch", str(spec.pull_batch_size), "--threshold", str(spec.pull_threshold),
                "--delay-ms", f"{spec.consume_delay_ms:g}", "--failure-rate", f"{spec.failure_rate:g}"]
        for t in spec.topics:
            args += ["--topic", t]
        if family(spec.client) == "java":
            args += ["--poll-ms", str(int(spec.poll_interval * 1000)),
                     "--heartbeat-ms", str(int(spec.heartbeat_interval * 1000)),
                     "--persist-ms", str(int(spec.persist_interval * 1000))]
        return args

    # -- running -------------------------------------------------------------------------------

    async def run_group(self, g: ProducerGroup, sink: Callable[[SendRecord], None]) -> LoadSummary:
        """The group's sends from ``t0 + start`` for its duration; its program stopped after."""
        proc = self.producers[g.name]
        summary = LoadSummary(producers=g.producers)
        done = trio.Event()

        def line(data: dict) -> None:
            if data.get("event") == "send":
                rec = read(data, g.first_id, self.wall_t0)
                summary.add(rec)
                sink(rec)
            elif data.get("event") == "done":
                done.set()

        read = grpc_clients.send_record if is_grpc(g.client) else client_lines.send_record
        proc.on_line = line
        await trio.sleep_until(self.t0 + g.start)
        begin = trio.current_time()
        if not proc.tell("go"):
            self.problem(f"producer group {g.name} ({g.client}) was gone before its load began: {proc.stderr_tail()}")
            return summary
        last_answer = g.duration + (g.retries + 1) * g.send_timeout + SEND_GRACE
        with trio.move_on_at(begin + last_answer):
            await first_of(done, proc.ended)
        summary.elapsed = trio.current_time() - begin
        if not done.is_set():
            why = "exited" if proc.ended.is_set() else f"was still sending {last_answer:g} s after its load began"
            self.problem(f"producer group {g.name} ({g.client}) {why}: {proc.stderr_tail()}")
        proc.tell("stop")
        if not await proc.wait_exit(STOP_TIMEOUT):
            proc.kill()
        return summary

    async def start_consumer(self, spec: ConsumerGroupSpec, consumer_id: int, emit: Callable[[ConsumeRecord], None],
                             on_event: Callable[[OwnershipEvent], None], stats: ConsumeStats) -> RealConsumer:
        """One more consumer of ``spec``'s group: a ready program told ``go`` (started now if none is left)."""
        spares = self.spares.setdefault(spec.name, [])
        if not spares:
            proc = self._spawn_consumer(spec)
            await self._wait_ready([proc])
            spares.append(proc)
        c = RealConsumer(self, spares.pop(0), spec, consumer_id, emit, on_event, stats)
        c.go()
        assert self._nursery is not None
        self._nursery.start_soon(c.watch)
        return c

    def kill_all(self) -> list[str]:
        """SIGKILL every program still running (usable outside trio); the names of those that were."""
        return [p.name for p in self.procs if p.kill()]


async def first_of(*events: trio.Event) -> None:
    """Wait until one of ``events`` is set."""
    async with trio.open_nursery() as race:
        async def until(event: trio.Event) -> None:
            await event.wait()
            race.cancel_scope.cancel()

        for event in events:
            race.start_soon(until, event)


__all__ = ["ClientStartError", "Programs", "RealClients", "RealConsumer", "clients_of", "consumers_needed", "prepare"]
