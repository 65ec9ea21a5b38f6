"""PULL_MESSAGE: what the store answers for an offset, and held (long-polling) pulls.

:func:`read_queue` is Java's ``DefaultMessageStore.getMessage`` status
logic over the in-memory store: the same statuses (they become the
response remark), the same next-offset corrections, tag filtering that
skips non-matching messages (a scan that matches nothing answers
PULL_RETRY_IMMEDIATELY past them).

:class:`PullHold` is Java's ``PullRequestHoldService``: a push consumer
sends its pulls with the suspend flag and a ``suspendTimeoutMillis``
(15 s by default) and expects the broker to keep a pull that found nothing
until a message arrives in that queue or the time is up. Held pulls are
bounded in number and in time; they are answered out of order on their
connection, so one held pull never delays the other requests a client
sends over the same connection (Java answers by opaque, too).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from dataclasses import dataclass, field

from broker_stub.store import MessageStore
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand

PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4
MAX_TRANSFER_MSGS = 32  # Java's maxTransferCountOnMessageInMemory
MAX_TRANSFER_BYTES = 256 * 1024  # Java's maxTransferBytesOnMessageInMemory
MAX_FILTER_SCAN = 16000  # Java's maxFilterMessageCount
SUSPEND_CAP_MS = 60_000  # no client asks for more (Java: 15 s, C++: 15 s, ali-ons: 15 s)


@dataclass(slots=True)
class PullRead:
    """What the store found: response code, status name (the remark) and offsets."""

    code: int
    status: str
    next_begin: int
    min_offset: int
    max_offset: int
    records: list[bytes]


def read_queue(
    store: MessageStore,
    topic: str,
    queue_id: int,
    offset: int,
    max_nums: int,
    tags: frozenset[str],
    *,
    is_master: bool = True,
) -> PullRead:
    """One pull's result, with Java's statuses and offset corrections (a slave keeps the offset)."""

    def correct(new: int) -> int:
        return new if is_master else offset

    lo, hi = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
    if hi == 0:
        code = ResponseCode.PULL_NOT_FOUND if offset == 0 else ResponseCode.PULL_OFFSET_MOVED
        return PullRead(code, "NO_MESSAGE_IN_QUEUE", correct(0), lo, hi, [])
    if offset < lo:
        return PullRead(ResponseCode.PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL", correct(lo), lo, hi, [])
    if offset == hi:
        return PullRead(ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE", correct(offset), lo, hi, [])
    if offset > hi:
        return PullRead(ResponseCode.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY", correct(hi), lo, hi, [])
    nums = min(max(1, max_nums), MAX_TRANSFER_MSGS)
    records, next_begin = store.get(topic, queue_id, offset, nums, MAX_TRANSFER_BYTES, tags, MAX_FILTER_SCAN)
    if records:
        return PullRead(ResponseCode.SUCCESS, "FOUND", next_begin, lo, hi, records)
    return PullRead(ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE", next_begin, lo, hi, [])


@dataclass(order=True, slots=True)
class HeldPull:
    """A pull waiting for a message (ordered by deadline for the expiry heap)."""

    deadline: float
    seq: int
    conn: Hashable = field(compare=False)
    request: RemotingCommand = field(compare=False)
    topic: str = field(compare=False)
    queue_id: int = field(compare=False)
    offset: int = field(compare=False)
    done: bool = field(default=False, compare=False)


class PullHold:
    """Held pulls by queue, with an expiry heap; at most ``max_held`` at once."""

    def __init__(self, max_held: int) -> None:
        self.max_held = max_held
        self._by_queue: dict[tuple[str, int], list[HeldPull]] = {}
        self._heap: list[HeldPull] = []
        self._seq = itertools.count()
        self.count = 0

    def hold(self, conn: Hashable, request: RemotingCommand, topic: str, queue_id: int, offset: int, deadline: float) -> bool:
        """Keep a pull; False when the bound is reached (the caller answers it now)."""
        if self.count >= self.max_held:
            return False
        entry = HeldPull(deadline, next(self._seq), conn, request, topic, queue_id, offset)
        self._by_queue.setdefault((topic, queue_id), []).append(entry)
        heapq.heappush(self._heap, entry)
        self.count += 1
        return True

    def arrived(self, topic: str, queue_id: int, max_offset: int) -> list[HeldPull]:
        """Remove and return the pulls of this queue that a new message (below ``max_offset``) can serve."""
        waiting = self._by_queue.get((topic, queue_id))
        if not waiting:
            return []
        ready = [e for e in waiting if e.offset < max_offset]
        if not ready:
            return []
        keep = [e for e in waiting if e.offset >= max_offset]
        if keep:
            self._by_queue[(topic, queue_id)] = keep
        else:
            del self._by_queue[(topic, queue_id)]
        for entry in ready:
            entry.done = True
        self.count -= len(ready)
        self._compact()
        return ready

    def expired(self, now: float) -> list[HeldPull]:
        """Remove and return every pull whose time is up."""
        out: list[HeldPull] = []
        heap = self._heap
        while heap and heap[0].deadline <= now:
            entry = heapq.heappop(heap)
            if not entry.done:
                self._forget(entry)
                out.append(entry)
        return out

    def drop_connection(self, conn: Hashable) -> int:
        """Forget the pulls of a closed connection; returns how many."""
        dropped = 0
        for key in list(self._by_queue):
            entries = self._by_queue[key]
            keep = [e for e in entries if e.conn != conn]
            for e in entries:
                if e.conn == conn:
                    e.done = True
                    dropped += 1
            if keep:
                self._by_queue[key] = keep
            else:
                del self._by_queue[key]
        self.count -= dropped
        self._compact()
        return dropped

    def _forget(self, entry: HeldPull) -> None:
        entry.done = True
        key = (entry.topic, entry.queue_id)
        entries = self._by_queue.get(key)
        if entries is not None:
            entries.remove(entry)
            if not entries:
                del self._by_queue[key]
        self.count -= 1

    def _compact(self) -> None:
        """Drop finished entries from the heap once they dominate it (keeps it bounded)."""
        if len(self._heap) > 2 * self.count + 64:
            self._heap = [e for e in self._heap if not e.done]
            heapq.heapify(self._heap)
