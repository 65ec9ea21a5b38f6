"""The consumers of a scenario run: started, stopped and killed on the timeline, every consumption kept.

Each consumer is a :class:`simclient.consumer.SimConsumer` with a
connection pool of its own, like a real client process (or, with ``client:
java:VERSION`` or ``go``, a real client process:
:class:`~mqadmin.scenario.realclients.RealConsumer`): when a
``kill_consumer`` action kills it, its connections close and the brokers
notice at once (and notify the rest of its group), while ``stop_consumer``
commits its offsets and unregisters first. Consumption records and
ownership events go to :class:`ConsumerRun`, which the expectations, the
report and the plot read.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from mqadmin.scenario.client_schema import is_real
from mqadmin.scenario.model import Action, ConsumerGroupSpec, Scenario
from mqadmin.scenario.realclients import STOP_TIMEOUT as REAL_STOP_TIMEOUT
from mqadmin.scenario.realclients import RealClients, RealConsumer
from remoting.acl import Credentials
from simclient import ClientPool, ConsumeRecord, ConsumerOptions, ConsumeStats, OwnershipEvent, SimConsumer

STOP_TIMEOUT = 3.0  # s a graceful stop may take (commit offsets, unregister)


class ConsumerActionError(Exception):
    """A consumer action could not be carried out (no such group or consumer)."""


@dataclass
class ConsumerRun:
    """What the consumers of a run did: every consumption and every change of what they owned."""

    specs: tuple[ConsumerGroupSpec, ...]
    records: list[ConsumeRecord] = field(default_factory=list)
    events: list[OwnershipEvent] = field(default_factory=list)
    stats: dict[str, ConsumeStats] = field(default_factory=dict)  # by scenario group name
    #: (broker name, seconds since time zero) when a memory-only broker lost its messages (kill/stop)
    broker_losses: list[tuple[str, float]] = field(default_factory=list)
    message_store: str = "disk"


def consumer_options(spec: ConsumerGroupSpec, namesrvs: list[str]) -> ConsumerOptions:
    return ConsumerOptions(
        namesrv_addrs=tuple(namesrvs),
        group=spec.group,
        subscriptions=tuple((t, spec.subscription) for t in spec.topics),
        consume_from=spec.consume_from,
        poll_name_server_interval=spec.poll_interval,
        heartbeat_broker_interval=spec.heartbeat_interval,
        rebalance_interval=spec.rebalance_interval,
        persist_consumer_offset_interval=spec.persist_interval,
        persist_initial_delay=spec.persist_interval,  # Java waits 10 s for the first commit; here one interval
        broker_suspend_max_ms=spec.suspend_ms,
        consume_delay=spec.consume_delay_ms / 1000.0,
        consume_threads=spec.consume_threads,
        consume_failure_rate=spec.failure_rate,
        pull_batch_size=spec.pull_batch_size,
        pull_threshold_for_queue=spec.pull_threshold,
    )


class ConsumerFleet:
    """Runs a scenario's consumer groups in one nursery; ``run`` with ``nursery.start``, ``close`` at the end."""

    def __init__(
        self,
        scn: Scenario,
        namesrvs: list[str],
        t0: float,
        *,
        sink: Callable[[ConsumeRecord], None] | None = None,
        credentials: Credentials | None = None,
        tls: ssl.SSLContext | None = None,
        real: RealClients | None = None,
    ) -> None:
        self.scn = scn
        self.real = real  # the real client programs, for groups with `client: java:...` or `go`
        self.credentials = credentials  # every consumer's requests are signed (the cluster has accounts)
        self.tls = tls  # and go over TLS (the cluster enforces it)
        self.namesrvs = namesrvs
        self.t0 = t0
        self.run_data = ConsumerRun(scn.consumers, message_store=scn.cluster.message_store)
        self.members: dict[str, list[SimConsumer | RealConsumer]] = {spec.name: [] for spec in scn.consumers}
        self._sink = sink
        self._next_id = 0
        self._nursery: trio.Nursery | None = None

    def _emit(self, rec: ConsumeRecord) -> None:
        self.run_data.records.append(rec)
        if self._sink is not None:
            self._sink(rec)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for spec in self.scn.consumers:
                nursery.start_soon(self._start_group, spec)
            task_status.started()
            await trio.sleep_forever()

    async def _start_group(self, spec: ConsumerGroupSpec) -> None:
        await trio.sleep_until(self.t0 + spec.start)
        for _ in range(spec.count):
            await self.start_one(spec)

    async def start_one(self, spec: ConsumerGroupSpec) -> SimConsumer | RealConsumer:
        """One more consumer in ``spec``'s group, with a pool of its own (a process of its own for a real
        client); returns once it has started."""
        assert self._nursery is not None
        stats = self.run_data.stats.setdefault(spec.name, ConsumeStats())
        consumer_id = self._next_id
        self._next_id += 1
        if is_real(spec.client):
            assert self.real is not None
            real = await self.real.start_consumer(spec, consumer_id, self._emit, self.run_data.events.append, stats)
            self.members[spec.name].append(real)
            return real
        made: list[SimConsumer] = []

        async def hold(task_status: trio.TaskStatus[None]) -> None:
            async with ClientPool(credentials=self.credentials, tls=self.tls) as pool:
                c = SimConsumer(consumer_options(spec, self.namesrvs), pool, consumer_id=consumer_id, emit=self._emit,
                                on_event=self.run_data.events.append, stats=stats, t0=self.t0)
                made.append(c)
                self.members[spec.name].append(c)
                await c.run(task_status=task_status)

        await self._nursery.start(hold)
        return made[0]

    def _pick(self, action: Action) -> SimConsumer | RealConsumer:
        group = action.args["group"]
        members = self.members.get(group, [])
        index = action.args.get("consumer")
        if index is None:
            running = [c for c in members if c.state == "running"]
            if not running:
                raise ConsumerActionError(f"no running consumer in group {group}")
            return running[-1]
        if index >= len(members):
            raise ConsumerActionError(f"group {group} has {len(members)} consumer(s); no #{index}")
        if members[index].state != "running":
            raise ConsumerActionError(f"consumer #{index} of {group} is not running ({members[index].state})")
        return members[index]

    async def action(self, action: Action) -> str:
        """Carry out start_consumer / stop_consumer / kill_consumer; a one-line detail."""
        spec = next(s for s in self.scn.consumers if s.name == action.args["group"])
        if action.kind == "start_consumer":
            started = [await self.start_one(spec) for _ in range(action.args.get("count", 1))]
            return "started " + ", ".join(c.client_id for c in started)
        c = self._pick(action)
        if action.kind == "stop_consumer":
            await c.shutdown(STOP_TIMEOUT)
            return f"{c.client_id} stopped (offsets committed, unregistered)"
        c.kill()
        return f"{c.client_id} killed (no unregister; its connections closed)"

    async def close(self) -> None:
        """Stop every running consumer gracefully (bounded), then the fleet."""
        real = any(is_real(spec.client) for spec in self.scn.consumers)
        with trio.move_on_after((REAL_STOP_TIMEOUT if real else STOP_TIMEOUT) + 1.0):
            async with trio.open_nursery() as stoppers:
                for members in self.members.values():
                    for c in members:
                        if c.state == "running":
                            stoppers.start_soon(c.shutdown, STOP_TIMEOUT)
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()


__all__ = ["ConsumerActionError", "ConsumerFleet", "ConsumerRun", "consumer_options"]
