"""One fan-out partition: thousands of simulated producers on one trio loop, one metrics blob out.

This is the function Spark (or multiprocessing) runs once per partition. It
waits for the run's start barrier, runs its share of producers with
:func:`simclient.load.run_load` on one shared :class:`~simclient.pool.ClientPool`
(a few connections for thousands of producers), and returns
:class:`~mqadmin.fanout.metrics.FanoutMetrics` as msgpack bytes. It never
raises for a failed run: the error travels back in the blob so the driver
can name it in one line. Importing it needs no Spark.
"""

from __future__ import annotations

import os
import random
import socket
import time
from collections.abc import Callable

import trio

from mqadmin.fanout.consume import end_of_consumers, run_consumers
from mqadmin.fanout.consume_metrics import ConsumeMetrics
from mqadmin.fanout.metrics import (
    BROKER_TIMELINE_FIELDS,
    TIMELINE_FIELDS,
    FanoutMetrics,
    PartInfo,
    bump,
)
from mqadmin.fanout.plan import FanoutPlan
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from simclient.load import run_load
from simclient.pool import ClientPool, RemotingError
from simclient.producer import SimProducer
from simclient.records import SendRecord
from simclient.route import RouteSnapshot
from simclient.wire import STORED_CODES

SEND_CODES = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})
#: A partition that reaches the barrier this late (s) still runs, and says so in its PartInfo.
MAX_EARLY_WAIT = 120.0


class TrackingPool(ClientPool):
    """The shared pool, also noting every send attempt per broker address (when, and whether it failed).

    A SendRecord names only the broker of a send's last attempt; a failover
    (first attempt on a dead broker, retry elsewhere) shows up only here.
    """

    def __init__(self, clock: Callable[[], float], metrics: FanoutMetrics, by_addr: dict[str, str], **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self._clock = clock
        self._metrics = metrics
        self._by_addr = by_addr  # address -> broker name, filled by the sampler from producers' routes

    def _use(self, addr: str):
        use = self._metrics.broker(self._by_addr.get(addr, addr))
        if addr not in use.addrs:
            use.addrs.append(addr)
        return use

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        if cmd.code not in SEND_CODES:
            return await super().invoke(addr, cmd, timeout)
        t = self._clock()
        try:
            resp = await super().invoke(addr, cmd, timeout)
        except RemotingError:
            self._use(addr).attempt(t, failed=True)
            raise
        self._use(addr).attempt(t, refused=resp.code not in STORED_CODES)
        return resp


def _rss_mb() -> float:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def _fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


class Sampler:
    """Once per ``interval``: route-query counts per second, producers routing to each broker,
    which address belongs to which broker, memory and file descriptors."""

    def __init__(self, plan: FanoutPlan, metrics: FanoutMetrics, part: PartInfo, by_addr: dict[str, str],
                 clock: Callable[[], float]) -> None:
        self.plan = plan
        self.metrics = metrics
        self.part = part
        self.by_addr = by_addr
        self.clock = clock
        self.producers: list[SimProducer] = []
        self._queries = 0
        self._failures = 0
        self._last = clock()  # route queries since the last sample are counted in that sample's second
        self._names: dict[RouteSnapshot, frozenset[str]] = {}  # broker names of each (shared) route snapshot

    def sample(self) -> None:
        now = self.clock()
        sec = max(0, int(now))
        width = len(TIMELINE_FIELDS)
        if self.producers:
            stats = self.producers[0].route_stats  # one RouteStats shared by the partition's producers
            since = max(0, int(self._last))
            bump(self.metrics.timeline, since, 2, width, stats.queries - self._queries)
            bump(self.metrics.timeline, since, 3, width, stats.failures - self._failures)
            self._queries, self._failures = stats.queries, stats.failures
        self._last = now
        routing: dict[str, int] = {}
        for p in self.producers:
            names: set[str] = set()
            for topic in self.plan.topics:
                snap = p.route_of(topic)
                if snap is None:
                    continue
                cached = self._names.get(snap)
                if cached is None:
                    if len(self._names) > 4096:
                        self._names.clear()
                    cached = self._names[snap] = frozenset(q[0] for q in snap.queues)
                    for name, addrs in snap.broker_addrs.items():
                        for addr in addrs.values():
                            self.by_addr[addr] = name
                names |= cached
            for name in names:
                routing[name] = routing.get(name, 0) + 1
        for name, use in self.metrics.brokers.items():
            if name not in routing:
                use.routing = 0
        for name, count in routing.items():
            use = self.metrics.broker(name)
            use.routing = count
            use.last_routed = now
            row = use.timeline.setdefault(sec, [0] * len(BROKER_TIMELINE_FIELDS))
            row[2] = count  # a gauge: the partition's latest value for that second
        self.part.max_rss_mb = max(self.part.max_rss_mb, _rss_mb())
        self.part.max_fds = max(self.part.max_fds, _fds())

    async def run(self) -> None:
        while True:
            await trio.sleep(self.plan.sample_interval)
            self.sample()


def _rename_addrs(metrics: FanoutMetrics, by_addr: dict[str, str]) -> None:
    """Attempts noted before the sampler learnt an address's broker name move to that name."""
    for key in [k for k in metrics.brokers if k in by_addr]:
        use = metrics.brokers.pop(key)
        metrics.broker(by_addr[key]).merge(use)


async def _run(index: int, plan: FanoutPlan, part: PartInfo) -> FanoutMetrics:
    metrics = FanoutMetrics(parts=[part])
    first, count = plan.share(index)
    part.producers = count
    if count == 0:
        return metrics
    wait = plan.start_wall - time.time()
    if wait > 0:
        await trio.sleep(min(wait, MAX_EARLY_WAIT))
    t0 = trio.current_time()
    offset = time.time() - plan.start_wall

    def clock() -> float:
        return offset + (trio.current_time() - t0)

    part.started = offset
    by_addr: dict[str, str] = {}
    sampler = Sampler(plan, metrics, part, by_addr, clock)
    timeline = metrics.timeline
    width = len(TIMELINE_FIELDS)
    consume = metrics.consume = ConsumeMetrics() if plan.consumers else None

    def sink(rec: SendRecord) -> None:
        t = offset + rec.t
        ok = rec.outcome == "ok"
        bump(timeline, max(0, int(t)), 0 if ok else 1, width)
        if ok and rec.broker is not None:
            if consume is not None and rec.queue_offset >= 0:
                consume.acked.add((rec.topic, rec.broker, rec.queue_id), rec.queue_offset)
            use = metrics.broker(rec.broker)
            use.stored += 1
            if use.last_stored is None or t > use.last_stored:
                use.last_stored = t

    async with TrackingPool(clock, metrics, by_addr, credentials=plan.security.credentials,
                            tls=plan.security.ssl_context()) as pool:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sampler.run)
            consumers_done, load_done = trio.Event(), trio.Event()
            if consume is not None:
                async def consumers() -> None:
                    try:
                        await run_consumers(plan, index, pool, consume, t0=t0, offset=offset,
                                            end_at=t0 + end_of_consumers(plan), rng=random.Random(),
                                            load_done=load_done)
                    finally:
                        consumers_done.set()

                nursery.start_soon(consumers)
            else:
                consumers_done.set()
            summary = await run_load(
                plan.producer_options(), plan.load_spec(count), sink, pool=pool, first_producer_id=first, t0=t0,
                on_start=sampler.producers.extend,
            )
            load_done.set()
            await consumers_done.wait()  # they drain what is left, then commit and unregister (bounded)
            nursery.cancel_scope.cancel()
        sampler.sample()
        part.connects = pool.connects
        part.connect_failures = pool.connect_failures
    _rename_addrs(metrics, by_addr)
    metrics.load = summary
    part.ended = clock()
    return metrics


def describe(exc: BaseException) -> str:
    """One line naming an error (the first leaf of an exception group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:500] if text else type(exc).__name__


def run_partition(index: int, plan: FanoutPlan) -> bytes:
    """Run partition ``index`` of ``plan`` to the end and return its metrics blob (never raises
    for a failed run: the error is in the blob)."""
    cpu0 = time.process_time()
    part = PartInfo(index, entered=time.time() - plan.start_wall, host=socket.gethostname(), pid=os.getpid())
    try:
        metrics = trio.run(_run, index, plan, part)
    except Exception as exc:  # noqa: BLE001 (reported to the driver, which prints one line)
        part.error = describe(exc)
        metrics = FanoutMetrics(parts=[part])
    part.cpu_s = time.process_time() - cpu0
    return metrics.encode()
