"""Run many simulated producers on one trio loop, bounded in count and time.

Each producer is a trio task sending synchronously (one send at a time, as
a thread calling ``DefaultMQProducer.send`` does), either as fast as it can
(closed loop, ``rate_per_producer == 0``) or on a fixed schedule whose phase
is random per producer (so the load is smooth, not a burst every period);
a second task per producer polls routes and heartbeats brokers. Producers share one
connection pool and one set of counters, so thousands fit in one process.
"""

from __future__ import annotations

import gc
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from security.tls_context import client_context
from simclient.pool import ClientPool
from simclient.producer import SimProducer
from simclient.producer_options import ProducerOptions
from simclient.records import OUTCOMES, SendRecord
from simclient.stats import Histogram, RouteStats
from simclient.ticker import sleep_until

#: Longest a load may run whatever the spec says (a guard against unbounded loops).
MAX_DURATION = 24 * 3600.0
#: A producer that fell this far behind its schedule (s) starts over instead of bursting.
MAX_LAG = 1.0


@dataclass(frozen=True)
class LoadSpec:
    producers: int
    topics: tuple[str, ...]
    rate_per_producer: float  # sends/s per producer (0 = closed loop as fast as possible)
    message_size: int = 1024
    duration: float | None = None  # seconds, or
    messages_per_producer: int | None = None
    # --- additions beyond the shared contract ---
    topics_per_producer: int = 0  # 0: every producer sends to every topic, else to this many (spread)
    ramp_up: float = 0.0  # s over which producers start (at random offsets)
    tags: str | None = None
    max_duration: float = 3600.0  # hard time bound when only a message count is given

    def __post_init__(self) -> None:
        if self.producers < 1:
            raise ValueError(f"producers must be >= 1, got {self.producers}")
        if not self.topics:
            raise ValueError("at least one topic is needed")
        if isinstance(self.topics, str):
            raise TypeError("topics must be a tuple of names, not one string")
        if not math.isfinite(self.rate_per_producer) or self.rate_per_producer < 0:
            raise ValueError(f"rate_per_producer must be >= 0, got {self.rate_per_producer}")
        if self.message_size < 0:
            raise ValueError(f"message_size must be >= 0, got {self.message_size}")
        if self.duration is None and self.messages_per_producer is None:
            raise ValueError("a load needs a duration or messages_per_producer (or both)")
        if self.duration is not None and not 0 < self.duration <= MAX_DURATION:
            raise ValueError(f"duration must be in (0, {MAX_DURATION:g}] s, got {self.duration}")
        if self.messages_per_producer is not None and self.messages_per_producer < 0:
            raise ValueError(f"messages_per_producer must be >= 0, got {self.messages_per_producer}")
        if self.topics_per_producer < 0:
            raise ValueError("topics_per_producer must be >= 0")
        if self.ramp_up < 0:
            raise ValueError("ramp_up must be >= 0")
        if not 0 < self.max_duration <= MAX_DURATION:
            raise ValueError(f"max_duration must be in (0, {MAX_DURATION:g}] s")

    @property
    def time_limit(self) -> float:
        return self.duration if self.duration is not None else self.max_duration

    def topics_of(self, index: int) -> tuple[str, ...]:
        """The topics producer ``index`` sends to (round-robin over them)."""
        k = self.topics_per_producer
        if k <= 0 or k >= len(self.topics):
            return self.topics
        n = len(self.topics)
        return tuple(self.topics[(index + j) % n] for j in range(k))


@dataclass
class LoadSummary:
    """Counts of one run (mergeable across partitions and processes)."""

    producers: int = 0
    elapsed: float = 0.0
    sends: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    by_broker: dict[str, int] = field(default_factory=dict)  # stored messages per broker name
    retried: int = 0  # sends that needed more than one attempt
    latency: Histogram = field(default_factory=Histogram)  # every send, ms
    ok_latency: Histogram = field(default_factory=Histogram)  # stored sends only, ms
    route: RouteStats = field(default_factory=RouteStats)
    #: How late the loop woke a 10 ms sleeper (ms). A high p99 means the client
    #: process, not the cluster, limited the run: read the other figures with care.
    loop_lag: Histogram = field(default_factory=Histogram)

    def add(self, rec: SendRecord) -> None:
        self.sends += 1
        self.outcomes[rec.outcome] = self.outcomes.get(rec.outcome, 0) + 1
        self.latency.record(rec.latency_ms)
        if rec.attempts > 1:
            self.retried += 1
        if rec.outcome == "ok":
            self.ok_latency.record(rec.latency_ms)
            if rec.broker is not None:
                self.by_broker[rec.broker] = self.by_broker.get(rec.broker, 0) + 1

    @property
    def ok(self) -> int:
        return self.outcomes.get("ok", 0)

    @property
    def failed(self) -> int:
        return self.sends - self.ok

    def merge(self, other: LoadSummary) -> None:
        self.producers += other.producers
        self.elapsed = max(self.elapsed, other.elapsed)
        self.sends += other.sends
        for k, v in other.outcomes.items():
            self.outcomes[k] = self.outcomes.get(k, 0) + v
        for k, v in other.by_broker.items():
            self.by_broker[k] = self.by_broker.get(k, 0) + v
        self.retried += other.retried
        self.latency.merge(other.latency)
        self.ok_latency.merge(other.ok_latency)
        self.route.merge(other.route)
        self.loop_lag.merge(other.loop_lag)

    def to_obj(self) -> dict[str, Any]:
        return {
            "producers": self.producers,
            "elapsed": self.elapsed,
            "sends": self.sends,
            "outcomes": dict(self.outcomes),
            "by_broker": dict(self.by_broker),
            "retried": self.retried,
            "latency": self.latency.to_obj(),
            "ok_latency": self.ok_latency.to_obj(),
            "route": self.route.to_obj(),
            "loop_lag": self.loop_lag.to_obj(),
        }

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> LoadSummary:
        s = cls(
            producers=int(obj.get("producers", 0)),
            elapsed=float(obj.get("elapsed", 0.0)),
            sends=int(obj.get("sends", 0)),
            by_broker={str(k): int(v) for k, v in obj.get("by_broker", {}).items()},
            retried=int(obj.get("retried", 0)),
            latency=Histogram.from_obj(obj.get("latency", {})),
            ok_latency=Histogram.from_obj(obj.get("ok_latency", {})),
            route=RouteStats.from_obj(obj.get("route", {})),
            loop_lag=Histogram.from_obj(obj.get("loop_lag", {})),
        )
        s.outcomes.update({str(k): int(v) for k, v in obj.get("outcomes", {}).items()})
        return s


LAG_PROBE_PERIOD = 0.01
#: gen2 threshold while loads run: full collections only when asked for.
_NO_FULL_GC = 1_000_000_000
_gc_holds = 0  # run_loads currently holding full collections off (they may overlap in one process)
_gc_saved: tuple[int, int, int] | None = None


def _hold_full_gc() -> bool:
    global _gc_holds, _gc_saved
    if _gc_holds == 0:
        _gc_saved = gc.get_threshold()
        gc.set_threshold(_gc_saved[0], _gc_saved[1], _NO_FULL_GC)
    _gc_holds += 1
    return True


def _release_full_gc() -> None:
    global _gc_holds, _gc_saved
    _gc_holds -= 1
    if _gc_holds == 0 and _gc_saved is not None:
        gc.set_threshold(*_gc_saved)
        _gc_saved = None


async def _probe_lag(hist: Histogram) -> None:
    """Sleep 10 ms over and over, recording how late each wake-up is."""
    while True:
        start = trio.current_time()
        await trio.sleep(LAG_PROBE_PERIOD)
        hist.record(max(0.0, (trio.current_time() - start - LAG_PROBE_PERIOD) * 1000.0))


async def _produce(
    p: SimProducer,
    spec: LoadSpec,
    body: bytes,
    start_at: float,
    end_at: float,
    emit: Callable[[SendRecord], None],
) -> None:
    topics = spec.topics_of(p.producer_id)
    limit = spec.messages_per_producer if spec.messages_per_producer is not None else -1
    interval = 1.0 / spec.rate_per_producer if spec.rate_per_producer > 0 else 0.0
    await sleep_until(start_at)
    next_at = start_at
    sent = 0
    i = p.producer_id
    while sent != limit:
        now = trio.current_time()
        if now >= end_at:
            return
        if interval:
            if next_at > now:
                if next_at >= end_at:
                    return
                await sleep_until(next_at)
            elif now - next_at > MAX_LAG:
                next_at = now
            next_at += interval
        elif not sent & 15:
            # a send usually awaits I/O, but one that fails without any (no broker
            # address) must not let a closed loop starve the others
            await trio.lowlevel.checkpoint()
        topic = topics[i % len(topics)]
        i += 1
        emit(await p.send(topic, body, tags=spec.tags))
        sent += 1


async def run_load(
    options: ProducerOptions,
    spec: LoadSpec,
    sink: Callable[[SendRecord], None],
    *,
    pool: ClientPool | None = None,
    first_producer_id: int = 0,
    t0: float | None = None,
    on_start: Callable[[list[SimProducer]], None] | None = None,
    rng: random.Random | None = None,
    tune_gc: bool = True,
) -> LoadSummary:
    """Run ``spec.producers`` SimProducers as trio tasks, each with its own route poller, bounded
    in time and count; every send goes to ``sink(record)``.

    New sends stop at ``spec.duration`` (or ``max_duration``); sends in flight
    then finish within their own ``send_timeout``. ``on_start`` receives the
    producers once created (to watch their routes during a scenario).

    ``tune_gc`` holds CPython's full (generation 2) collections off while
    the load runs; young-generation collections still run. Thousands of
    sleeping producers keep promoting short-lived coroutine frames to the
    old generation, which triggers a full collection every few seconds that
    scans every live object: with 20,000 producers that paused the loop for
    up to 0.8 s at a time (measured), long enough to time out sends the
    cluster had answered in a millisecond. Those collections found no
    garbage; the hold ends with the last concurrent run_load.
    """
    if pool is None:
        async with ClientPool(tls=client_context() if options.use_tls else None) as own_pool:
            return await run_load(
                options, spec, sink, pool=own_pool, first_producer_id=first_producer_id, t0=t0,
                on_start=on_start, rng=rng, tune_gc=tune_gc,
            )

    rng = rng or random.Random()
    now = trio.current_time()
    t0 = now if t0 is None else t0
    held = _hold_full_gc() if tune_gc else False
    try:
        summary = LoadSummary(producers=spec.producers)
        producers = [
            SimProducer(options, pool, producer_id=first_producer_id + i, t0=t0, route_stats=summary.route, rng=rng)
            for i in range(spec.producers)
        ]
        if on_start is not None:
            on_start(producers)
        body = rng.randbytes(spec.message_size)
        end_at = now + spec.time_limit
        hard_stop = end_at + options.send_timeout + options.mq_client_api_timeout + 2.0

        def emit(rec: SendRecord) -> None:
            summary.add(rec)
            sink(rec)

        with trio.move_on_at(hard_stop):
            async with trio.open_nursery() as background:
                background.start_soon(_probe_lag, summary.loop_lag)
                for p in producers:
                    background.start_soon(p.maintain_forever)
                async with trio.open_nursery() as senders:
                    for p in producers:
                        start_at = now + (rng.uniform(0, spec.ramp_up) if spec.ramp_up > 0 else 0.0)
                        if spec.rate_per_producer > 0:
                            # independent producers tick at independent phases: without this, N
                            # producers started together would send in bursts of N every period
                            start_at += rng.uniform(0, 1.0 / spec.rate_per_producer)
                        senders.start_soon(_produce, p, spec, body, start_at, end_at, emit)
                background.cancel_scope.cancel()
        summary.elapsed = trio.current_time() - now
        if options.unregister_on_close:
            with trio.move_on_after(2.0):
                async with trio.open_nursery() as closers:
                    for p in producers:
                        closers.start_soon(p.close)
    finally:
        if held:
            _release_full_gc()
    return summary


__all__ = ["LoadSpec", "LoadSummary", "run_load"]
