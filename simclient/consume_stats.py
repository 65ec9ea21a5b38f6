"""Mergeable counters of simulated consumers (shared by many, merged across partitions).

Like :class:`~simclient.load.LoadSummary` for producers: plain counts and
log-bucket latency histograms, so a Spark partition ships a few hundred
bytes and the driver adds them up exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from simclient.stats import Histogram, RouteStats

_COUNTERS = (
    "consumers",
    "consumed",
    "retried",
    "send_back_failed",
    "discarded",
    "pulls",
    "pulls_found",
    "pull_errors",
    "pull_refused",
    "pulls_from_slave",
    "rebalances",
    "queue_acquired",
    "queue_released",
    "offset_commits",
    "heartbeats",
    "heartbeat_failures",
)


@dataclass(slots=True)
class ConsumeStats:
    """What consumers did: ``consumed`` messages (first or repeated deliveries alike), ``retried``
    (answered RECONSUME_LATER and sent back), ``discarded`` (pulled, then dropped with a released
    queue), pulls by result, rebalances run, queues taken and given away, offset commits sent."""

    consumers: int = 0
    consumed: int = 0
    retried: int = 0
    send_back_failed: int = 0
    discarded: int = 0
    pulls: int = 0
    pulls_found: int = 0
    pull_errors: int = 0  # no answer (connect error, timeout, broken connection)
    pull_refused: int = 0  # answered with an error code (SUBSCRIPTION_NOT_EXIST, SYSTEM_BUSY, ...)
    pulls_from_slave: int = 0
    rebalances: int = 0
    queue_acquired: int = 0
    queue_released: int = 0
    offset_commits: int = 0
    heartbeats: int = 0
    heartbeat_failures: int = 0
    latency: Histogram = field(default_factory=Histogram)  # end to end, store time -> consumed, ms
    route: RouteStats = field(default_factory=RouteStats)

    def merge(self, other: ConsumeStats) -> None:
        for name in _COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.latency.merge(other.latency)
        self.route.merge(other.route)

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {name: getattr(self, name) for name in _COUNTERS}
        obj["latency"] = self.latency.to_obj()
        obj["route"] = self.route.to_obj()
        return obj

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> ConsumeStats:
        s = cls(**{name: int(obj.get(name, 0)) for name in _COUNTERS})
        s.latency = Histogram.from_obj(obj.get("latency", {}))
        s.route = RouteStats.from_obj(obj.get("route", {}))
        return s


assert set(_COUNTERS) == {f.name for f in fields(ConsumeStats)} - {"latency", "route"}

__all__ = ["ConsumeStats"]
