"""The key index behind QUERY_MESSAGE: ``topic#key`` -> the stored messages that carry the key.

A Java broker indexes every message it stores under its ``UNIQ_KEY`` (the
client's message id) and under each word of its ``KEYS`` property
(IndexService, fed by the dispatcher a few milliseconds after the put), in
hash-slot files with a chain per slot. ``queryMsgByKey`` and
``queryMsgByUniqueKey`` read it. This is the same structure in memory:

* **Fixed-size columns.** Each entry is a key hash, a queue id, a queue
  offset and the sequence number of the previous entry in its slot, in four
  ``array`` columns used as a ring of ``capacity`` entries (28 bytes each,
  no Python object per entry); a slot table of ``capacity / 2`` rounded up
  to a power of two holds each slot's newest entry. When the ring is full
  the oldest entries are overwritten: the index covers the newest
  ``capacity`` keys (``maxKeyIndexEntries``, 1,000,000 by default, about
  32 MB when full; the columns grow as entries come, the slot table is
  allocated at the first entry).
* **Fed from the store, not from the put path.** :meth:`KeyIndex.catch_up`
  reads the records stored since its last pass, queue by queue, for the
  topics marked with :meth:`KeyIndex.touch` (a put, a replicated record),
  at most ``SLICE_RECORDS`` per call, so it never holds the event loop for
  long; :meth:`KeyIndex.run` calls it until it has caught up. The first
  pass reads every queue, so messages read back from disk at start (or
  held by a slave) are indexed as the broker comes up, as Java rebuilds its
  index on recovery. Within one pass the queues are read one after
  another, so when a single pass offers more keys than the capacity (a
  start with more stored keys than the index holds) the entries kept are
  those of the queues read last rather than strictly the newest.
* **Exact answers.** A lookup walks the slot's chain (at most ``MAX_WALK``
  entries), fetches each candidate from the store and keeps it only if it
  is still held, belongs to the topic, carries the key (as its ``UNIQ_KEY``
  or one of its ``KEYS``) and was stored within the time range; of those,
  the ``maxNum`` newest by commit-log offset, oldest first, as Java answers.
  Java returns hash matches and leaves the check to the client.
"""

from __future__ import annotations

import struct
from array import array
import trio

from broker_stub.store import MessageStore

DEFAULT_MAX_ENTRIES = 1_000_000
#: Records one catch-up call reads at most (about a millisecond of work each 300).
SLICE_RECORDS = 1024
#: How often the catch-up looks for new records once it has caught up (s).
IDLE_INTERVAL = 0.05
#: Entries one lookup walks at most along its slot's chain.
MAX_WALK = 4096
KEY_SEPARATOR = " "  # MessageConst.KEY_SEPARATOR
TRANSACTION_TYPE_MASK = 0xC  # MessageSysFlag: bits 2-3
TRANSACTION_ROLLBACK = 0xC  # rolled-back half messages are not indexed (IndexService.buildIndex)
HOSTS_ARE_IPV6 = 0x30

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
QUEUE_ID_AT, QUEUE_OFFSET_AT, PHYS_AT, SYS_FLAG_AT, STORE_TS_AT, BODY_LEN_AT = 12, 20, 28, 36, 56, 84
_UNIQ = b"UNIQ_KEY\x01"
_KEYS = b"KEYS\x01"


def _property(props: bytes, key: bytes) -> str | None:
    """One property of a stored record's properties bytes (the pair must start the text or follow \\x02)."""
    i = props.find(key)
    while i > 0 and props[i - 1] != 2:
        i = props.find(key, i + 1)
    if i < 0:
        return None
    start = i + len(key)
    end = props.find(b"\x02", start)
    return props[start : end if end >= 0 else len(props)].decode("utf-8", "replace")


def record_fields(record: bytes) -> tuple[str, str | None, str | None] | None:
    """(topic, UNIQ_KEY, KEYS) of a stored record in the stub's IPv4 layout; None if it is not one."""
    if len(record) < BODY_LEN_AT + 4:
        return None
    (sys_flag,) = _I32.unpack_from(record, SYS_FLAG_AT)
    if sys_flag & HOSTS_ARE_IPV6:
        return None
    (body_len,) = _I32.unpack_from(record, BODY_LEN_AT)
    pos = BODY_LEN_AT + 4 + body_len
    if body_len < 0 or pos + 3 > len(record):
        return None
    topic_len = record[pos]
    topic = record[pos + 1 : pos + 1 + topic_len].decode("utf-8", "replace")
    pos += 1 + topic_len
    (props_len,) = _I16.unpack_from(record, pos)
    props = record[pos + 2 : pos + 2 + props_len]
    return topic, _property(props, _UNIQ), _property(props, _KEYS)


def record_keys(record: bytes) -> list[str]:
    """The keys a record is indexed under: its UNIQ_KEY, then each word of its KEYS."""
    fields = record_fields(record)
    if fields is None:
        return []
    _, uniq, keys = fields
    out = [uniq] if uniq else []
    if keys:
        out.extend(k for k in keys.split(KEY_SEPARATOR) if k)
    return out


def store_timestamp(record: bytes) -> int:
    return int(_I64.unpack_from(record, STORE_TS_AT)[0])


def phys_offset(record: bytes) -> int:
    return int(_I64.unpack_from(record, PHYS_AT)[0])


class KeyIndex:
    def __init__(self, store: MessageStore, capacity: int = DEFAULT_MAX_ENTRIES) -> None:
        self.store = store
        self.capacity = max(16, capacity)
        slots = 1
        while slots < self.capacity // 2:
            slots *= 2
        self._slot_count = slots
        self._slots: array[int] | None = None  # seq + 1 of each slot's newest entry (0: none)
        self._hashes: array[int] = array("q")
        self._queue_ids: array[int] = array("i")
        self._offsets: array[int] = array("q")
        self._prevs: array[int] = array("q")  # seq of the previous entry in the same slot (-1: none)
        self.total = 0  # entries ever added: the next entry's sequence number
        self._next: dict[tuple[str, int], int] = {}  # per queue: the next queue offset to read
        self._dirty: set[str] = set()
        self._everything = True  # the first pass reads every queue (messages read back from disk)
        self._work: list[tuple[str, int]] = []  # queues left in the current pass
        self.last_phys = 0  # the newest indexed message (QueryMessageResponseHeader's indexLastUpdate*)
        self.last_timestamp = 0
        self.indexed_records = 0

    # ------------------------------------------------------------------
    # feeding

    def touch(self, topic: str) -> None:
        """``topic`` got a record: read its queues in the next pass (cheap: the put path calls it)."""
        self._dirty.add(topic)

    def forget_topic(self, topic: str) -> None:
        """``topic`` was deleted: if it comes back, its queues start over at offset 0. (Its entries
        stay until overwritten; a lookup checks the record it finds, so they match nothing.)"""
        self._next = {k: v for k, v in self._next.items() if k[0] != topic}
        self._work = [k for k in self._work if k[0] != topic]

    @property
    def behind(self) -> bool:
        return bool(self._work or self._dirty or self._everything)

    def catch_up(self, budget: int = SLICE_RECORDS) -> int:
        """Index up to ``budget`` records stored since the last pass; returns how many were read."""
        store = self.store
        if not self._work:
            if self._everything:
                self._everything = False
                self._dirty.clear()
                keys = store.queue_keys()
                held = set(keys)
                self._next = {k: v for k, v in self._next.items() if k in held}  # queues deleted since
                self._work = keys
            elif self._dirty:
                dirty, self._dirty = self._dirty, set()
                keys = store.queue_keys()
                self._work = [k for k in keys if k[0] in dirty]
                if len(self._next) > len(keys) + 1024:  # queues of deleted topics: forget them
                    held = set(keys)
                    self._next = {k: v for k, v in self._next.items() if k in held}
            else:
                return 0
        done = 0
        work = self._work
        counted = store.get_total
        try:
            while work and done < budget:
                key = work[-1]
                topic, queue_id = key
                lo, hi = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
                start = max(self._next.get(key, 0), lo)
                if start < hi:
                    records, start = store.get(topic, queue_id, start, budget - done, 1 << 62)
                    for record in records:
                        self._add_record(topic, queue_id, record)
                    done += len(records)
                self._next[key] = start
                if start >= hi:
                    work.pop()
        finally:
            store.get_total = counted  # indexing is not consumption
        return done

    def _add_record(self, topic: str, queue_id: int, record: bytes) -> None:
        fields = record_fields(record)
        if fields is None:
            return
        (sys_flag,) = _I32.unpack_from(record, SYS_FLAG_AT)
        if sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK:
            return
        _, uniq, keys = fields
        (offset,) = _I64.unpack_from(record, QUEUE_OFFSET_AT)
        added = False
        if uniq:
            self._add(hash(f"{topic}#{uniq}"), queue_id, offset)
            added = True
        if keys:
            for key in keys.split(KEY_SEPARATOR):
                if key:
                    self._add(hash(f"{topic}#{key}"), queue_id, offset)
                    added = True
        self.indexed_records += 1
        phys = phys_offset(record)
        if added and phys >= self.last_phys:  # queues are read in any order: keep the newest
            self.last_phys = phys
            self.last_timestamp = store_timestamp(record)

    def _add(self, key_hash: int, queue_id: int, offset: int) -> None:
        slots = self._slots
        if slots is None:
            slots = self._slots = array("q", bytes(8 * self._slot_count))
        seq = self.total
        slot = key_hash & (self._slot_count - 1)
        prev = slots[slot] - 1
        pos = seq % self.capacity
        if pos == len(self._hashes):
            self._hashes.append(key_hash)
            self._queue_ids.append(queue_id)
            self._offsets.append(offset)
            self._prevs.append(prev)
        else:
            self._hashes[pos] = key_hash
            self._queue_ids[pos] = queue_id
            self._offsets[pos] = offset
            self._prevs[pos] = prev
        slots[slot] = seq + 1
        self.total = seq + 1

    async def run(self) -> None:
        """Keep the index caught up for as long as the broker runs (yielding between slices)."""
        while True:
            if self.catch_up() >= SLICE_RECORDS or self._work:
                await trio.sleep(0)
            else:
                await trio.sleep(IDLE_INTERVAL)

    # ------------------------------------------------------------------
    # lookups

    def find(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[bytes]:
        """The newest ``max_num`` records of ``topic`` carrying ``key`` stored within [begin, end],
        in commit-log order (as Java's queryMessage sorts them)."""
        slots = self._slots
        if slots is None or max_num <= 0:
            return []
        key_hash = hash(f"{topic}#{key}")
        seq = slots[key_hash & (self._slot_count - 1)] - 1
        oldest = self.total - self.capacity
        found: list[tuple[int, bytes]] = []
        seen: set[tuple[int, int]] = set()
        steps = 0
        store = self.store
        counted = store.get_total
        try:
            while seq >= 0 and seq >= oldest and steps < MAX_WALK:
                pos = seq % self.capacity
                if self._hashes[pos] == key_hash:
                    ident = (self._queue_ids[pos], self._offsets[pos])
                    if ident not in seen:
                        seen.add(ident)
                        records, _ = store.get(topic, ident[0], ident[1], 1, 1 << 62)
                        if records and self._matches(records[0], topic, key, begin, end):
                            found.append((phys_offset(records[0]), records[0]))
                seq = self._prevs[pos]
                steps += 1
        finally:
            store.get_total = counted  # a lookup is not consumption
        found.sort(key=lambda item: item[0])  # queues are indexed in any order: the newest by commit-log offset
        return [record for _, record in found[-max_num:]]

    @staticmethod
    def _matches(record: bytes, topic: str, key: str, begin: int, end: int) -> bool:
        fields = record_fields(record)
        if fields is None or fields[0] != topic:
            return False
        if not begin <= store_timestamp(record) <= end:
            return False
        return key in record_keys(record)


__all__ = ["DEFAULT_MAX_ENTRIES", "KeyIndex", "record_fields", "record_keys"]
