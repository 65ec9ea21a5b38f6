"""Latency fault tolerance: how long a producer avoids a slow or failing broker.

The rules of Apache RocketMQ 5.x's ``MQFaultStrategy`` and
``LatencyFaultToleranceImpl`` (client module), as plain state with an
injected clock so they can be tested without waiting:

* after every send attempt, when ``sendLatencyFaultEnable`` is on, the
  broker gets a penalty: the attempt's latency is looked up in
  ``LATENCY_MAX_MS`` (the last threshold it reaches) and the broker is
  "not available" for the matching ``NOT_AVAILABLE_MS`` from now;
* a failed attempt (no answer: connect error, timeout; or a refused send)
  counts as ``ISOLATION_LATENCY_MS`` (10 s), which maps to a 10 s penalty;
* a refused send (an error response code) also marks the broker
  "unreachable"; only a later successful send marks it reachable again (the
  active detector that could do it sooner is off by default in Java);
* a penalty only ever extends the time a broker is unavailable, never
  shortens it (``updateNotAvailableDuration``).

The 5.x tables (since 5.1.4, RIP-63) are much shorter than 4.x's, whose
penalties reached 10 minutes; both are here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: RocketMQ 5.1.4+ ``MQFaultStrategy.latencyMax`` / ``notAvailableDuration`` (ms).
LATENCY_MAX_MS: tuple[int, ...] = (50, 100, 550, 1800, 3000, 5000, 15000)
NOT_AVAILABLE_MS: tuple[int, ...] = (0, 0, 2000, 5000, 6000, 10000, 30000)
#: RocketMQ 4.x / 5.0-5.1.3 tables, for comparison runs.
LATENCY_MAX_MS_4X: tuple[int, ...] = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_MS_4X: tuple[int, ...] = (0, 0, 30000, 60000, 120000, 180000, 600000)
#: The latency a failed attempt is charged with (``isolation`` in Java).
ISOLATION_LATENCY_MS = 10000


def not_available_duration_ms(
    latency_ms: float,
    latency_max: tuple[int, ...] = LATENCY_MAX_MS,
    not_available: tuple[int, ...] = NOT_AVAILABLE_MS,
) -> int:
    """Penalty for an attempt that took ``latency_ms``: the entry of the highest threshold reached."""
    for i in range(len(latency_max) - 1, -1, -1):
        if latency_ms >= latency_max[i]:
            return not_available[i]
    return 0


@dataclass(slots=True)
class FaultItem:
    latency_ms: float
    available_at_ms: float  # "startTimestamp" in Java: unavailable until then
    reachable: bool


class LatencyFaultTolerance:
    """Broker name -> fault item, judged against an injected clock (seconds)."""

    __slots__ = ("clock", "items", "latency_max", "not_available")

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        latency_max: tuple[int, ...] = LATENCY_MAX_MS,
        not_available: tuple[int, ...] = NOT_AVAILABLE_MS,
    ) -> None:
        if len(latency_max) != len(not_available) or not latency_max:
            raise ValueError("latency_max and not_available must be non-empty and of equal length")
        self.clock = clock
        self.latency_max = latency_max
        self.not_available = not_available
        self.items: dict[str, FaultItem] = {}

    def _now_ms(self) -> float:
        return self.clock() * 1000.0

    def update(self, broker: str, latency_ms: float, *, isolation: bool, reachable: bool) -> int:
        """Record one attempt's result (``updateFaultItem``); returns the penalty in ms."""
        duration = not_available_duration_ms(
            ISOLATION_LATENCY_MS if isolation else latency_ms, self.latency_max, self.not_available
        )
        now = self._now_ms()
        item = self.items.get(broker)
        if item is None:
            item = self.items[broker] = FaultItem(latency_ms, 0.0, reachable)
        item.latency_ms = latency_ms
        if duration > 0 and now + duration > item.available_at_ms:
            item.available_at_ms = now + duration
        item.reachable = reachable
        return duration

    def is_available(self, broker: str) -> bool:
        item = self.items.get(broker)
        return item is None or self._now_ms() >= item.available_at_ms

    def is_reachable(self, broker: str) -> bool:
        item = self.items.get(broker)
        return item is None or item.reachable

    def remove(self, broker: str) -> None:
        self.items.pop(broker, None)

    def isolated(self) -> list[str]:
        """Brokers currently not available (for reports)."""
        now = self._now_ms()
        return sorted(name for name, item in self.items.items() if now < item.available_at_ms)
