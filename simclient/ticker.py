"""One timer task for every sleep and request deadline of a trio run.

``trio.sleep_until`` and ``trio.move_on_at`` cost a cancel scope, and when
the deadline fires, a ``Cancelled`` exception raised and caught: tens of
microseconds each. Ten thousand paced producers sleep thousands of times a
second and every request has a deadline, so on one loop that overhead alone
can eat the CPU. Here sleepers park directly and deadlines are plain
callbacks on one heap, run by one system task that wakes at most every
``RESOLUTION`` seconds (times are rounded up to that; fine for load
simulation, and every wake serves all entries due by then).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from collections.abc import Callable

import trio
from trio.lowlevel import (
    Abort,
    RunVar,
    current_task,
    reschedule,
    spawn_system_task,
    wait_task_rescheduled,
)

log = logging.getLogger("simclient.ticker")

RESOLUTION = 0.002  # s

#: A scheduled entry: [when, sequence, callback or None once run/cancelled].
Handle = list


class Ticker:
    """Use :func:`ticker` to get the one of the current run."""

    def __init__(self) -> None:
        self._heap: list[Handle] = []
        self._seq = itertools.count()
        self._next = math.inf  # when the task will look next
        self._wake = trio.Event()

    def call_at(self, when: float, fn: Callable[[], None]) -> Handle:
        """Run ``fn()`` (synchronously, in the ticker task) once trio time reaches ``when``."""
        entry: Handle = [when, next(self._seq), fn]
        heapq.heappush(self._heap, entry)
        if when < self._next:
            self._next = when
            self._wake.set()
        return entry

    @staticmethod
    def cancel(handle: Handle) -> None:
        handle[2] = None

    async def sleep_until(self, when: float) -> None:
        """Like ``trio.sleep_until`` (cancellable too), without a cancel scope of its own."""
        if when <= trio.current_time():
            await trio.lowlevel.checkpoint()
            return
        task = current_task()
        entry = self.call_at(when, lambda: reschedule(task))

        def abort(_: object) -> Abort:
            entry[2] = None
            return Abort.SUCCEEDED

        await wait_task_rescheduled(abort)

    async def _run(self) -> None:
        heap = self._heap
        while True:
            now = trio.current_time()
            if heap and heap[0][0] <= now:
                # answers already received should win over their deadlines: let readers
                # scheduled in this pass run first (trio shuffles each batch)
                await trio.lowlevel.checkpoint()
                await trio.lowlevel.checkpoint()
                while heap and heap[0][0] <= now:
                    entry = heapq.heappop(heap)
                    fn = entry[2]
                    if fn is not None:
                        entry[2] = None
                        try:
                            fn()
                        except Exception:  # a broken callback must not stop every timer of the run
                            log.exception("ticker callback failed")
            self._next = max(heap[0][0] if heap else math.inf, trio.current_time() + RESOLUTION)
            wake = self._wake
            with trio.move_on_at(self._next):
                await wake.wait()
            if wake.is_set():
                self._wake = trio.Event()


_TICKER: RunVar[Ticker] = RunVar("simclient_ticker")


def ticker() -> Ticker:
    """The ticker of the current trio run, started on first use (a system task, ends with the run)."""
    try:
        return _TICKER.get()
    except LookupError:
        t = Ticker()
        _TICKER.set(t)
        spawn_system_task(t._run, name="simclient.ticker")
        return t


async def sleep_until(when: float) -> None:
    await ticker().sleep_until(when)


__all__ = ["RESOLUTION", "Ticker", "sleep_until", "ticker"]
