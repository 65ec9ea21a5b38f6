"""One owned queue's pulled-but-not-yet-consumed messages (Java's ``ProcessQueue``).

A push consumer pulls ahead of its consumption; what it pulled waits here
until a consume task took it. The offset it may commit is the smallest
offset still waiting (or one past the largest pulled, when nothing
waits), so a message is never skipped however consumption interleaves.
``dropped`` is set when a rebalance gives the queue away: waiting messages
are then discarded and an offset from a consumption that ends afterwards
is not committed, exactly what makes RocketMQ redeliver (and so count
duplicates) after a rebalance.
"""

from __future__ import annotations

import time

from simclient.decode import Pulled
from simclient.rebalance import MessageQueue


class ProcessQueue:
    __slots__ = ("created_ms", "dropped", "last_consume_ms", "last_pull_ms", "max_offset", "mq", "msgs", "next_offset")

    def __init__(self, mq: MessageQueue, next_offset: int) -> None:
        self.mq = mq
        self.next_offset = next_offset  # where the next pull starts
        self.dropped = False
        # epoch ms, as Java's ProcessQueue keeps them (GET_CONSUMER_RUNNING_INFO reports them)
        self.created_ms = self.last_pull_ms = self.last_consume_ms = int(time.time() * 1000)
        # offset -> message, inserted in ascending offset order (pulls of one queue come in order),
        # so the first key is the smallest still waiting
        self.msgs: dict[int, Pulled] = {}
        self.max_offset = -1

    @property
    def count(self) -> int:
        return len(self.msgs)

    @property
    def span(self) -> int:
        """Largest minus smallest waiting offset (``getMaxSpan``: a flow-control bound)."""
        if not self.msgs:
            return 0
        return self.max_offset - next(iter(self.msgs))

    def put(self, msgs: list[Pulled]) -> None:
        for m in msgs:
            if m.queue_offset not in self.msgs:
                self.msgs[m.queue_offset] = m
            if m.queue_offset > self.max_offset:
                self.max_offset = m.queue_offset

    def remove(self, offsets: list[int]) -> int:
        """Forget consumed messages; the offset to commit now (-1 when nothing was waiting)."""
        if not self.msgs:
            return -1
        self.last_consume_ms = int(time.time() * 1000)
        for off in offsets:
            self.msgs.pop(off, None)
        if self.msgs:
            return next(iter(self.msgs))
        return self.max_offset + 1

    def clear(self) -> None:
        self.msgs.clear()


__all__ = ["ProcessQueue"]
