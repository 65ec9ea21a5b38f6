"""Bounded in-memory message queues in RocketMQ's stored-message layout.

Each message is encoded once, at put time, exactly as a Java broker writes
it to its commit log (MessageDecoder's layout, magic code V1, IPv4 hosts),
so a pull answer is just the concatenation of stored records and any
RocketMQ client can decode it. Two bounds keep memory fixed: each queue
keeps at most ``max_per_queue`` messages, and all queues together at most
``max_bytes`` (:class:`ByteBudget`, oldest first across queues). Either
way the oldest messages are dropped and the queue's min offset moves,
which is what a consumer sees when a real broker deletes old commit-log
files.

Beside each record the queue keeps its store time, its tag (for tag
filtering, as Java's consume queue keeps the tag hash) and its physical
offset (for lookups by commit-log offset: VIEW_MESSAGE_BY_ID and
CONSUMER_SEND_MSG_BACK name a message that way).

With messages on disk (a :class:`Journal`), a record is readable only once
it is written: each queue has a ``visible`` end that
:mod:`broker_stub.persistence` moves forward as the writer reports
(:meth:`MessageStore.confirm`), so no consumer reads a message that a full
disk later takes back. When a write fails, every queue is rolled back to
its visible end (:meth:`MessageStore.roll_back`): the offsets of records
that never reached the disk are handed out again, those of records that
did, never. Without a journal, a record is readable as soon as it is put.
"""

from __future__ import annotations

import bisect
import socket
import struct
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from broker_stub.store_queues import MESSAGE_OVERHEAD, QUEUE_OVERHEAD, ByteBudget, StoredQueue, StoreFullError
from remoting.msgprops import find_property

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7, MessageDecoder V1
_HEAD = struct.Struct(">iiiiiqqiq4siq4siiq")  # totalSize .. preparedTransactionOffset, 84 bytes
_HEAD_AND_BODY_LEN = struct.Struct(">iiiiiqqiq4siq4siiqi")  # the same + bodyLength, 88 bytes
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
HOSTS_ARE_IPV6 = 0x30  # sys flag bits: born host / store host are IPv6
#: The stored record's layout holds a topic's length in a byte and the properties' in a short.
STORED_TOPIC_MAX_BYTES = 127
STORED_PROPERTIES_MAX_BYTES = 32767
def ipv4_bytes(host: str) -> bytes:
    """The 4 address bytes of an IPv4 host (names resolved once, at start)."""
    try:
        return socket.inet_aton(host)
    except OSError:
        try:
            return socket.inet_aton(socket.gethostbyname(host))
        except OSError:
            return socket.inet_aton("127.0.0.1")


class Journal(Protocol):
    """Where stored records also go when messages persist (:mod:`broker_stub.queue_files`)."""

    def admit(self, topic: str, queue_id: int) -> None: ...

    def check_topic(self, topic: str) -> None: ...

    def append(self, topic: str, queue_id: int, offset: int, record: bytes, token: object = None) -> None: ...

    def delete_topic(self, topic: str) -> None: ...


class StoreUnavailableError(Exception):
    """The disk refused a write: no message is taken until a write succeeds again (the text says why)."""


class MessageStore:
    def __init__(
        self,
        store_host: str,
        store_port: int,
        max_per_queue: int,
        *,
        max_bytes: int = 128 * 1024 * 1024,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.store_ip = ipv4_bytes(store_host)
        self.store_port = store_port
        self.max_per_queue = max_per_queue
        self.budget = ByteBudget(max_bytes)
        self.clock_ms = clock_ms  # None: wall clock (the hot path calls time.time() directly)
        self._topic_parts: dict[str, bytes] = {}  # topic -> its length byte + UTF-8 bytes
        self._queues: dict[tuple[str, int], StoredQueue] = {}
        self.commit_offset = 0  # the "physical" offset: total bytes ever stored
        self.put_total = 0
        self.get_total = 0
        # the 8 address+port bytes every message id starts with
        self._id_prefix = (self.store_ip + _I32.pack(store_port)).hex().upper()
        self.journal: Journal | None = None  # set when messages persist (storePathRootDir)
        #: Why the disk cannot take messages now (None: it can); set and cleared by broker_stub.persistence.
        self.unwritable: str | None = None

    def put(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        flag: int,
        properties: str,
        sys_flag: int,
        born_timestamp: int,
        born_ip: bytes,
        born_port: int,
        reconsume_times: int,
        tag: str | None,
    ) -> tuple[int, int]:
        """Store one message; returns (queue offset, physical offset).

        ValueError if it cannot be laid out; StoreFullError (a ValueError) if
        it does not fit in the byte budget even after dropping older messages;
        PathOutsideError (a ValueError) if its queue's directory would not be
        in the store; StoreUnavailableError while the disk refuses writes.
        """
        if self.unwritable is not None:
            raise StoreUnavailableError(self.unwritable)
        topic_part = self._topic_part(topic)
        props = properties.encode()
        if len(props) > STORED_PROPERTIES_MAX_BYTES:
            raise ValueError("properties too long for the stored-message layout")
        body_len = len(body)
        total = 90 + body_len + len(topic_part) + len(props)  # 88 (head + body length) + 2 (properties length)
        cost = total + MESSAGE_OVERHEAD
        queue = self._admit(topic, queue_id, cost)
        store_ts = int(time.time() * 1000) if self.clock_ms is None else self.clock_ms()
        phys = self.commit_offset
        offset = queue.next_offset
        head = _HEAD_AND_BODY_LEN.pack(
            total,
            MESSAGE_MAGIC_CODE,
            zlib.crc32(body) & 0x7FFFFFFF,  # UtilAll.crc32
            queue_id,
            flag,
            offset,
            phys,
            sys_flag & ~HOSTS_ARE_IPV6,  # hosts are stored as IPv4
            born_timestamp,
            born_ip,
            born_port,
            store_ts,
            self.store_ip,
            self.store_port,
            reconsume_times,
            0,  # preparedTransactionOffset
            body_len,
        )
        record = b"".join((head, body, topic_part, len(props).to_bytes(2, "big"), props))
        queue.records.append(record)  # the four columns grow together (inline: the hot path)
        queue.tags.append(tag)
        queue.stamps.append(store_ts)
        queue.phys.append(phys)
        queue.next_offset = offset + 1
        self.budget.used += cost
        if not queue.in_heap:
            self.budget.track(queue, phys)
        self.commit_offset = phys + total
        self.put_total += 1
        if self.journal is not None:
            self.journal.append(topic, queue_id, offset, record, queue)
        else:
            queue.visible = offset + 1
        return offset, phys

    def _topic_part(self, topic: str) -> bytes:
        """The stored form of a topic (its length byte and UTF-8), cached for the topics in use."""
        topic_part = self._topic_parts.get(topic)
        if topic_part is None:
            topic_b = topic.encode()
            if len(topic_b) > STORED_TOPIC_MAX_BYTES:
                raise ValueError("topic too long for the stored-message layout")
            if len(self._topic_parts) > 10_000:
                self._topic_parts.clear()
            topic_part = self._topic_parts[topic] = bytes((len(topic_b),)) + topic_b
        return topic_part

    def _admit(self, topic: str, queue_id: int, cost: int) -> StoredQueue:
        """The queue a message of ``cost`` bytes goes to, with room made for it (StoreFullError: none)."""
        key = (topic, queue_id)
        queue = self._queues.get(key)
        budget = self.budget
        if queue is None:
            if self.journal is not None:
                self.journal.admit(topic, queue_id)
            budget.check(QUEUE_OVERHEAD + cost)  # before anything is dropped
            budget.make_room(QUEUE_OVERHEAD + cost, self._queues)
            queue = self._queues[key] = StoredQueue(key)
            budget.add_queue()
        else:
            if budget.fixed + cost > budget.max_bytes:
                budget.check(cost)
            if len(queue.records) - queue.head >= self.max_per_queue:
                budget.used -= queue.drop_oldest() + MESSAGE_OVERHEAD
            if budget.used + cost > budget.max_bytes:
                budget.make_room(cost, self._queues)
        return queue

    def append_stored(self, topic: str, queue_id: int, record: bytes, *, journal: bool = True) -> bool:
        """Keep a record laid out elsewhere at its own queue offset: read back from this broker's
        files, or replicated from the master. Offsets must grow; an empty queue starts at the
        record's offset. Returns False (nothing kept) for a record at or below the queue's end.

        The bounds hold as for :meth:`put`: the per-queue count drops this queue's oldest, the
        byte budget the oldest of all queues (StoreFullError if it cannot fit at all).
        """
        journal = self.journal if journal else None
        if journal is not None and self.unwritable is not None:
            raise StoreUnavailableError(self.unwritable)
        msg = parse_record(record)
        (offset,) = _QUEUE_OFFSET.unpack_from(record, 20)
        (store_ts,) = _STORE_TS.unpack_from(record, 56)
        cost = len(record) + MESSAGE_OVERHEAD
        key = (topic, queue_id)
        queue = self._queues.get(key)
        budget = self.budget
        if queue is None:
            if journal is not None:
                journal.admit(topic, queue_id)
            budget.check(QUEUE_OVERHEAD + cost)  # before anything is dropped
            budget.make_room(QUEUE_OVERHEAD + cost, self._queues)
            queue = self._queues[key] = StoredQueue(key)
            budget.add_queue()
        elif offset < queue.next_offset:
            return False
        else:
            budget.check(cost)
            if offset > queue.next_offset:  # a gap (the source dropped older messages): start over there
                while len(queue):
                    budget.used -= queue.drop_oldest() + MESSAGE_OVERHEAD
            elif len(queue) >= self.max_per_queue:
                budget.used -= queue.drop_oldest() + MESSAGE_OVERHEAD
            if budget.used + cost > budget.max_bytes:
                budget.make_room(cost, self._queues)
        queue.records.append(record)
        queue.tags.append(find_property(msg.properties, "TAGS"))
        queue.stamps.append(store_ts)
        queue.phys.append(msg.phys)
        queue.next_offset = offset + 1
        budget.used += cost
        if not queue.in_heap:
            budget.track(queue, msg.phys)
        self.commit_offset = max(self.commit_offset, msg.phys + len(record))
        if journal is not None:
            journal.append(topic, queue_id, offset, record, queue)
        else:
            queue.visible = offset + 1
        return True

    # ------------------------------------------------------------------
    # what the disk holds (broker_stub.persistence)

    def confirm(self, token: object, upto: int) -> tuple[str, int] | None:
        """The writer wrote a queue up to offset ``upto`` (``token`` is the queue object its records
        were journaled with): make them readable. Returns the queue's key, None if it is gone."""
        queue: StoredQueue = token  # type: ignore[assignment]
        if upto > queue.visible:
            queue.visible = min(upto, queue.next_offset)
        return queue.key if self._queues.get(queue.key) is queue else None

    def roll_back(self) -> int:
        """A write failed: forget every record not yet written, so each queue ends where its files end
        and the next message gets the first offset the disk does not hold. Returns how many went."""
        dropped = 0
        budget = self.budget
        for queue in self._queues.values():
            while queue.next_offset > queue.visible and len(queue):
                budget.used -= queue.drop_newest() + MESSAGE_OVERHEAD
                dropped += 1
            if queue.next_offset > queue.visible:  # emptied (the byte budget had dropped its head too)
                queue.next_offset = queue.visible
        return dropped

    def next_offset(self, topic: str, queue_id: int) -> int:
        """The offset the next record of a queue gets (ahead of :meth:`max_offset` while records are written)."""
        queue = self._queues.get((topic, queue_id))
        return queue.next_offset if queue is not None else 0

    def check_topic_path(self, topic: str) -> None:
        """PathOutsideError unless the topic's files would be deleted inside the store (before a delete)."""
        if self.journal is not None:
            self.journal.check_topic(topic)

    def queues(self) -> list[StoredQueue]:
        """Every queue holding or having held messages (a copy of the list: the metrics sum their offsets)."""
        return list(self._queues.values())

    def queue_keys(self) -> list[tuple[str, int]]:
        """Every (topic, queue id) holding or having held messages."""
        return list(self._queues)

    def msg_id(self, phys: int) -> str:
        """MessageDecoder.createMessageId: store IPv4 + port + commit-log offset, 32 upper-case hex chars."""
        return self._id_prefix + format(phys, "016X")

    # ------------------------------------------------------------------
    # reading

    def min_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get((topic, queue_id))
        return queue.min_offset if queue is not None else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """The end of what readers see (Java's getMaxOffsetInQueue): the offset the next message gets,
        once everything before it is written."""
        queue = self._queues.get((topic, queue_id))
        return max(queue.visible, queue.min_offset) if queue is not None else 0

    def get(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        max_bytes: int,
        tags: frozenset[str] = frozenset(),
        max_scan: int = 16000,
    ) -> tuple[list[bytes], int]:
        """Up to ``max_nums`` records from ``offset`` whose tag is in ``tags`` (empty: all).

        Returns (records, next offset to read). Scans at most ``max_scan``
        entries (Java's maxFilterMessageCount) and stops before
        ``max_bytes`` (at least one record is always returned when found).
        """
        queue = self._queues.get((topic, queue_id))
        if queue is None or not queue.min_offset <= offset < queue.visible:
            return [], offset
        base = queue.min_offset - queue.head  # the offset of list index 0
        start = offset - base
        end = min(queue.visible - base, start + max(1, max_scan))
        records = queue.records
        out: list[bytes] = []
        size = 0
        i = start
        if not tags:
            end = min(end, start + max(1, max_nums))
            while i < end:
                record = records[i]
                assert record is not None
                if out and size + len(record) > max_bytes:
                    break
                out.append(record)
                size += len(record)
                i += 1
        else:
            qtags = queue.tags
            while i < end and len(out) < max_nums:
                if qtags[i] in tags:
                    record = records[i]
                    assert record is not None
                    if out and size + len(record) > max_bytes:
                        break
                    out.append(record)
                    size += len(record)
                i += 1
        self.get_total += len(out)
        return out, base + i

    def find_by_phys(self, phys: int) -> bytes | None:
        """The record stored at commit-log offset ``phys``, if it is still held."""
        for queue in self._queues.values():
            offsets = queue.phys
            if not len(queue) or not offsets[queue.head] <= phys <= offsets[-1]:
                continue
            i = bisect.bisect_left(offsets, phys, queue.head)
            if i < len(offsets) and offsets[i] == phys and queue.min_offset - queue.head + i < queue.visible:
                return queue.records[i]
        return None

    def offset_by_time(self, topic: str, queue_id: int, timestamp: int, upper: bool = False) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after ``timestamp`` (LOWER,
        the default), or the last one stored at or before it (UPPER); clamped to the queue."""
        queue = self._queues.get((topic, queue_id))
        if queue is None or not len(queue):
            return queue.next_offset if queue is not None else 0
        stamps, head = queue.stamps, queue.head
        end = max(queue.visible, queue.min_offset)  # never past what readers see
        if upper:
            i = bisect.bisect_right(stamps, timestamp, head) - 1 - head
            return min(queue.min_offset + max(i, 0), end)
        return min(queue.min_offset + bisect.bisect_left(stamps, timestamp, head) - head, end)

    def earliest_timestamp(self, topic: str | None = None, queue_id: int = 0) -> int:
        """Store time of the oldest message held (of one queue, or of all); -1 if none, as Java."""
        if topic is not None:
            queue = self._queues.get((topic, queue_id))
            return queue.stamps[queue.head] if queue is not None and len(queue) else -1
        stamps = [q.stamps[q.head] for q in self._queues.values() if len(q)]
        return min(stamps) if stamps else -1

    def delete_topic(self, topic: str) -> None:
        for key in [k for k in self._queues if k[0] == topic]:
            self.budget.remove_queue(self._queues.pop(key))
        if self.journal is not None:
            self.journal.delete_topic(topic)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """The fields of a stored record that a re-put (send-back) needs."""

    topic: str
    queue_id: int
    flag: int
    sys_flag: int
    born_timestamp: int
    born_ip: bytes
    born_port: int
    reconsume_times: int
    phys: int
    body: bytes
    properties: str


_QUEUE_OFFSET = struct.Struct(">q")  # at byte 20 of a record
_STORE_TS = struct.Struct(">q")  # at byte 56 of an IPv4 record


def parse_record(record: bytes) -> StoredMessage:
    """Read back one record written by :meth:`MessageStore.put` (IPv4 layout); ValueError if it is cut short."""
    try:
        return _parse_record(record)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed stored record ({len(record)} bytes): {exc}") from None


def _parse_record(record: bytes) -> StoredMessage:
    (_total, _magic, _crc, queue_id, flag, _qoff, phys, sys_flag, born_ts, born_ip, born_port, _store_ts, _sip, _sport,
     reconsume, _prep) = _HEAD.unpack_from(record, 0)
    pos = _HEAD.size
    (body_len,) = _I32.unpack_from(record, pos)
    body = record[pos + 4 : pos + 4 + body_len]
    pos += 4 + body_len
    topic_len = record[pos]
    topic = record[pos + 1 : pos + 1 + topic_len].decode()
    pos += 1 + topic_len
    (props_len,) = _I16.unpack_from(record, pos)
    props = record[pos + 2 : pos + 2 + props_len].decode()
    return StoredMessage(topic, queue_id, flag, sys_flag, born_ts, born_ip, born_port, reconsume, phys, body, props)


__all__ = [
    "MESSAGE_OVERHEAD",
    "QUEUE_OVERHEAD",
    "STORED_PROPERTIES_MAX_BYTES",
    "STORED_TOPIC_MAX_BYTES",
    "Journal",
    "MessageStore",
    "StoreFullError",
    "StoreUnavailableError",
    "StoredMessage",
    "ipv4_bytes",
    "parse_record",
]
