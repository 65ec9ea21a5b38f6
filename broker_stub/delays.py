"""Delay levels: messages that become visible later (consumer retries).

A Java broker parks a message with a delay level in SCHEDULE_TOPIC_XXXX and
moves it to its real topic when the level's time is up; that is how a
consumer's CONSUMER_SEND_MSG_BACK turns into a redelivery on the group's
``%RETRY%`` topic 10 s, 30 s, 1 min... later. The stub keeps such messages
in a bounded heap and puts them when due (no schedule topic offsets).
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable
from typing import Any

from broker_stub.store import StoreUnavailableError
from remoting.clip import clip

log = logging.getLogger("broker_stub")

#: Java's MessageStoreConfig.messageDelayLevel default.
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
MAX_DELAYED = 100_000
RETRY_LATER = 1.0  # s: a due message the store cannot take now (its disk refuses writes) waits this long


def parse_levels(text: str) -> list[float]:
    """``"1s 5s 1m"`` -> seconds per level (level 1 first); ValueError names a bad item."""
    out = []
    for item in text.split():
        unit = _UNITS.get(item[-1:])
        try:
            value = float(item[:-1]) if unit else None
        except ValueError:
            value = None
        if unit is None or value is None or value < 0:
            raise ValueError(f"bad delay level {item!r} (expected a number followed by s, m, h or d)")
        out.append(value * unit)
    if not out:
        raise ValueError("no delay levels")
    return out


class DelayQueue:
    """Due time -> deferred action; at most ``MAX_DELAYED`` waiting (beyond: run at once)."""

    def __init__(self, levels: list[float], clock: Callable[[], float]) -> None:
        self.levels = levels
        self.clock = clock
        self._heap: list[tuple[float, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = itertools.count()

    def seconds(self, level: int) -> float:
        """The delay of a level (clamped to the table, as Java does)."""
        return self.levels[min(max(level, 1), len(self.levels)) - 1]

    def defer(self, level: int, action: Callable[..., Any], *args: Any) -> None:
        if len(self._heap) >= MAX_DELAYED:
            action(*args)
            return
        heapq.heappush(self._heap, (self.clock() + self.seconds(level), next(self._seq), action, args))

    def run_due(self) -> int:
        """Run every action whose time has come; returns how many ran.

        They run on the broker's timer, outside any request: one that fails is logged in one
        line and the rest still run (an exception here would stop the timer task, and the broker).
        """
        now = self.clock()
        ran = 0
        later: list[tuple[float, int, Callable[..., Any], tuple[Any, ...]]] = []
        while self._heap and self._heap[0][0] <= now:
            _, seq, action, args = heapq.heappop(self._heap)
            try:
                action(*args)
            except StoreUnavailableError:  # the disk refuses writes: keep it, try again in a while
                later.append((now + RETRY_LATER, seq, action, args))
                continue
            except Exception as exc:
                log.warning("a deferred put failed: %s: %s", type(exc).__name__, clip(exc))
            ran += 1
        for item in later:
            heapq.heappush(self._heap, item)
        return ran

    def __len__(self) -> int:
        return len(self._heap)
