"""The memory bounds of the message store: one queue's columns, and the byte budget over all queues.

Split from :mod:`broker_stub.store` because they are one job, keeping the
store's memory fixed whatever is sent: a queue is parallel lists with a
moving head, and :class:`ByteBudget` drops the oldest messages across all
queues once ``maxStoreBytes`` is reached, as a Java broker's oldest
commit-log file goes.
"""

from __future__ import annotations

import heapq

#: Bytes a held message costs beside its record: the record's object header, its slots in the
#: queue's four lists, its store-time and physical-offset ints and its tag string (measured).
MESSAGE_OVERHEAD = 200
#: Bytes one queue costs while it exists (its object, four lists, its key in the queue table).
QUEUE_OVERHEAD = 640


class StoreFullError(ValueError):
    """A message the store cannot take even after dropping every older one."""


class StoredQueue:
    """One consume queue: parallel lists of records, tags, store times and physical offsets.

    Lists with a moving head rather than deques: an idle queue costs a few
    hundred bytes (a deque costs ~600 each), bisect works on them directly,
    and the dropped head is cut off in one step once it is half the list.
    """

    __slots__ = ("head", "in_heap", "key", "next_offset", "phys", "records", "stamps", "tags", "visible")

    def __init__(self, key: tuple[str, int]) -> None:
        self.key = key
        self.records: list[bytes | None] = []
        self.tags: list[str | None] = []
        self.stamps: list[int] = []
        self.phys: list[int] = []
        self.head = 0  # index of the oldest message still held
        self.next_offset = 0  # the offset the next message gets
        self.visible = 0  # readers see offsets below this: written to disk (or put, memory only)
        self.in_heap = False  # has an entry in the byte budget's heap

    def __len__(self) -> int:
        return len(self.records) - self.head

    @property
    def min_offset(self) -> int:
        return self.next_offset - len(self)

    def drop_oldest(self) -> int:
        """Forget the oldest message; returns its record's size."""
        head = self.head
        record = self.records[head]
        self.records[head] = None  # the objects go now, the slots with the next cut
        self.tags[head] = None
        self.stamps[head] = self.phys[head] = 0
        self.head = head = head + 1
        if head == len(self.records) or (head >= 64 and 2 * head >= len(self.records)):
            for column in (self.records, self.tags, self.stamps, self.phys):
                del column[:head]
            self.head = 0
        return len(record) if record is not None else 0

    def drop_newest(self) -> int:
        """Forget the newest message (a write that failed); returns its record's size."""
        record = self.records.pop()
        self.tags.pop()
        self.stamps.pop()
        self.phys.pop()
        self.next_offset -= 1
        if self.head == len(self.records):
            for column in (self.records, self.tags, self.stamps, self.phys):
                column.clear()
            self.head = 0
        return len(record) if record is not None else 0


class ByteBudget:
    """``maxStoreBytes``: the store's bytes, with the oldest messages of all queues dropped first.

    Oldest across queues, not per queue, because that is what a Java broker
    does when it deletes its oldest commit-log file: every queue loses its
    oldest messages and its min offset moves. Physical offsets grow with
    every put, so the oldest message held is the head with the smallest
    physical offset: a heap holds one entry per non-empty queue, keyed by
    its head's physical offset (refreshed lazily when the per-queue bound
    or a topic deletion moved the head).

    What counts: each record's bytes plus ``MESSAGE_OVERHEAD`` (its index
    entries and Python object headers) and ``QUEUE_OVERHEAD`` per queue, so
    the budget tracks the process's memory rather than the payload alone.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.used = 0  # bytes counted: messages and queues
        self.fixed = 0  # of which queues' bookkeeping, which dropping messages cannot free
        self._heap: list[tuple[int, StoredQueue]] = []
        self._dead = 0  # heap entries of removed queues, swept once they are half the heap

    def add_queue(self) -> None:
        self.used += QUEUE_OVERHEAD
        self.fixed += QUEUE_OVERHEAD

    def remove_queue(self, queue: StoredQueue) -> None:
        """A queue is gone (its topic deleted): its messages and bookkeeping no longer count."""
        held = sum(len(r) + MESSAGE_OVERHEAD for r in queue.records[queue.head :] if r is not None)
        self.used -= QUEUE_OVERHEAD + held
        self.fixed -= QUEUE_OVERHEAD
        if queue.in_heap:
            queue.in_heap = False
            queue.key = ("", -1)  # no longer in the table: make_room skips it
            self._dead += 1
            if 2 * self._dead > len(self._heap) + 64:
                self._heap = [(p, q) for p, q in self._heap if q.in_heap]
                heapq.heapify(self._heap)
                self._dead = 0

    def check(self, need: int) -> None:
        """StoreFullError when ``need`` bytes would not fit even with every message dropped."""
        if self.fixed + need > self.max_bytes:
            raise StoreFullError(
                f"the in-memory store is full: {need} more bytes do not fit in maxStoreBytes={self.max_bytes} "
                f"beside the {self.fixed} bytes of its {self.fixed // QUEUE_OVERHEAD} queues"
            )

    def track(self, queue: StoredQueue, phys: int) -> None:
        """``queue`` just got a message at ``phys``: make sure the heap knows the queue."""
        if not queue.in_heap:
            heapq.heappush(self._heap, (phys, queue))
            queue.in_heap = True

    def make_room(self, need: int, queues: dict[tuple[str, int], StoredQueue]) -> None:
        """Drop the oldest messages until ``need`` more bytes fit (or none is left)."""
        heap = self._heap
        while self.used + need > self.max_bytes and heap:
            phys, queue = heap[0]
            if not len(queue) or queues.get(queue.key) is not queue:  # emptied, or its topic deleted
                heapq.heappop(heap)
                if queue.in_heap:
                    queue.in_heap = False
                else:
                    self._dead -= 1
                continue
            head_phys = queue.phys[queue.head]
            if head_phys != phys:  # the head moved since: re-file under the current one
                heapq.heapreplace(heap, (head_phys, queue))
                continue
            self.used -= queue.drop_oldest() + MESSAGE_OVERHEAD
            if len(queue):
                heapq.heapreplace(heap, (queue.phys[queue.head], queue))
            else:
                heapq.heappop(heap)
                queue.in_heap = False


