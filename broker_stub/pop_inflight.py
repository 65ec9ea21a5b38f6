"""POP consumption's in-flight table: which popped messages are invisible until when. Pure state.

A RocketMQ 5 consumer (through the Proxy) pops messages instead of pulling
them: the broker hands a message out, and it stays invisible for the
request's ``invisibleTime``. An ACK_MESSAGE removes it for good; a
CHANGE_MESSAGE_INVISIBLETIME gives it a new deadline (and a new receipt
handle); once a deadline passes, the broker "revives" it: it is put again on
the group's POP retry topic with its reconsume count raised.

A Java broker keeps this as checkpoint and ack messages on its revive topic.
Here it is one table keyed by (group, topic, queue id, queue offset), where
``topic`` is the topic the message was read from (the group's retry topic
for a redelivered one). Each entry remembers its ``pop_time``: an ack or a
change carries the pop time of its receipt handle, and one whose pop time
is not the entry's (an old handle: the message was since given a new one)
changes nothing, as a Java broker pairs acks with checkpoints by pop time.

No sockets and no clock: every method that needs the time takes ``now_ms``
(epoch milliseconds, the unit of the wire's popTime). At most ``capacity``
entries: :meth:`room` tells the POP handler how many more it may hand out,
so the table never grows past its bound (docs/limits.md).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

#: (consumer group, topic read, queue id, queue offset)
Key = tuple[str, str, int, int]


@dataclass(slots=True)
class InFlight:
    """One popped message that is neither acked nor revived yet."""

    group: str
    topic: str
    queue_id: int
    offset: int
    pop_time: int  # ms, the pop (or the last change) that made it invisible
    invisible_ms: int

    @property
    def key(self) -> Key:
        return (self.group, self.topic, self.queue_id, self.offset)

    @property
    def deadline(self) -> int:
        return self.pop_time + self.invisible_ms

    def to_list(self) -> list[object]:
        return [self.group, self.topic, self.queue_id, self.offset, self.pop_time, self.invisible_ms]

    @classmethod
    def from_list(cls, item: object) -> InFlight:
        """The form :meth:`to_list` writes; ValueError for anything else."""
        if not isinstance(item, list) or len(item) != 6:
            raise ValueError(f"not an in-flight entry: {str(item)[:80]}")
        group, topic, queue_id, offset, pop_time, invisible = item
        if not (isinstance(group, str) and isinstance(topic, str)
                and all(isinstance(n, int) and not isinstance(n, bool) for n in (queue_id, offset, pop_time, invisible))):
            raise ValueError(f"not an in-flight entry: {str(item)[:80]}")
        return cls(group, topic, queue_id, offset, pop_time, invisible)


class InFlightTable:
    """Key -> :class:`InFlight`, with a deadline heap (lazy deletion, compacted) and a bound."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.entries: dict[Key, InFlight] = {}
        self._heap: list[tuple[int, int, Key]] = []  # (deadline, pop time, key); stale ones skipped
        self.version = 0  # bumped on every change (the state file is rewritten when it moved)

    def __len__(self) -> int:
        return len(self.entries)

    def room(self) -> int:
        """How many more messages may be handed out now."""
        return max(0, self.capacity - len(self.entries))

    def add(self, entry: InFlight) -> None:
        """Make a message invisible until ``entry.deadline`` (replacing an entry of the same key)."""
        self.entries[entry.key] = entry
        heapq.heappush(self._heap, (entry.deadline, entry.pop_time, entry.key))
        self.version += 1
        self._compact()

    def ack(self, key: Key, pop_time: int) -> bool:
        """Remove the entry if ``pop_time`` is its handle's; whether it was removed."""
        entry = self.entries.get(key)
        if entry is None or entry.pop_time != pop_time:
            return False
        del self.entries[key]
        self.version += 1
        return True

    def change(self, key: Key, old_pop_time: int, now_ms: int, invisible_ms: int) -> InFlight:
        """CHANGE_MESSAGE_INVISIBLETIME: the entry of the old handle is acked and a new one made
        invisible from ``now_ms`` (made even when the old handle matches nothing, as Java's new
        checkpoint is: the message then comes again once the new time is up)."""
        self.ack(key, old_pop_time)
        entry = InFlight(key[0], key[1], key[2], key[3], now_ms, invisible_ms)
        self.add(entry)
        return entry

    def due(self, now_ms: int) -> list[InFlight]:
        """Remove and return the entries whose invisible time is over at ``now_ms``, oldest first."""
        out: list[InFlight] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            _, pop_time, key = heapq.heappop(heap)
            entry = self.entries.get(key)
            if entry is not None and entry.pop_time == pop_time:
                del self.entries[key]
                out.append(entry)
        if out:
            self.version += 1
        return out

    def next_deadline(self) -> int | None:
        """The earliest deadline still in the heap (maybe of a stale entry), None when empty."""
        return self._heap[0][0] if self._heap else None

    def in_flight(self, group: str, topic: str) -> int:
        """How many of a group's messages of a topic are invisible now (consumer progress views)."""
        return sum(1 for k in self.entries if k[0] == group and k[1] == topic)

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self.entries if k[1] == topic]:
            del self.entries[key]
        self.version += 1

    def snapshot(self) -> list[list[object]]:
        return [e.to_list() for e in self.entries.values()]

    def restore(self, items: Iterable[object]) -> int:
        """Entries read back from the state file (at most ``capacity``); returns how many."""
        for item in items:
            if len(self.entries) >= self.capacity:
                break
            self.add(InFlight.from_list(item))
        return len(self.entries)

    def _compact(self) -> None:
        """Drop stale heap items once they dominate (the heap stays within twice the table)."""
        if len(self._heap) > 2 * len(self.entries) + 64:
            self._heap = [(e.deadline, e.pop_time, e.key) for e in self.entries.values()]
            heapq.heapify(self._heap)
