"""The key index behind QUERY_MESSAGE: (topic, key) -> the stored messages that carry the key.

A Java broker indexes every message it stores under its ``UNIQ_KEY`` (the
client's message id) and under each word of its ``KEYS`` property
(IndexService, fed by the dispatcher a few milliseconds after the put), in
hash-slot files with a chain per slot. ``queryMsgByKey`` and
``queryMsgByUniqueKey`` read it. This is the same structure in memory:

* **Fixed-size columns.** Each entry is a key hash, the message's queue
  offset and queue id packed in one long, and the sequence number of the
  previous entry in its slot, in three ``array`` columns used as a ring of
  ``capacity`` entries (24 bytes each, no Python object per entry); a slot
  table of ``capacity / 2`` rounded up to a power of two holds each slot's
  newest entry. When the ring is full the oldest entries are overwritten:
  the index covers the newest ``capacity`` keys (``maxKeyIndexEntries``,
  1,000,000 by default, about 28 MB when full; the columns grow as entries
  come, the slot table is allocated at the first entry).
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
  those of the queues read last rather than strictly the newest. With
  Java's ``messageIndexEnable=false`` nothing is indexed (the catch-up
  skips what was stored meanwhile), as a Java broker builds no index then.
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
from collections.abc import Callable

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
QUEUE_OFFSET_AT, PHYS_AT, SYS_FLAG_AT, STORE_TS_AT, BODY_LEN_AT = 20, 28, 36, 56, 84
QUEUE_ID_BITS = 16  # an entry packs its queue offset and queue id in one long
QUEUE_ID_MAX = (1 << QUEUE_ID_BITS) - 1
_UNIQ = b"UNIQ_KEY\x01"
_KEYS = b"KEYS\x01"


def _property(data: bytes, key: bytes, start: int, end: int) -> str | None:
    """One property of the properties bytes at ``data[start:end]`` (the pair must begin them or follow \\x02)."""
    i = data.find(key, start, end)
    while i > start and data[i - 1] != 2:
        i = data.find(key, i + 1, end)
    if i < 0:
        return None
    value = i + len(key)
    stop = data.find(b"\x02", value, end)
    return data[value : stop if stop >= 0 else end].decode("utf-8", "replace")


def _keys_between(data: bytes, start: int, end: int) -> list[str]:
    """A record's index keys from its properties bytes: UNIQ_KEY, then each word of KEYS."""
    uniq = _property(data, _UNIQ, start, end)
    out = [uniq] if uniq else []
    keys = _property(data, _KEYS, start, end)
    if keys:
        out.extend(k for k in keys.split(KEY_SEPARATOR) if k)
    return out


def record_fields(record: bytes) -> tuple[str, list[str]] | None:
    """(topic, index keys) of a stored record in the stub's IPv4 layout; None if it is not one."""
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
    return topic, _keys_between(record, pos + 2, pos + 2 + props_len)


def record_keys(record: bytes) -> list[str]:
    """The keys a record is indexed under: its UNIQ_KEY, then each word of its KEYS."""
    fields = record_fields(record)
    return fields[1] if fields is not None else []


def store_timestamp(record: bytes) -> int:
    return int(_I64.unpack_from(record, STORE_TS_AT)[0])


def phys_offset(record: bytes) -> int:
    return int(_I64.unpack_from(record, PHYS_AT)[0])


class KeyIndex:
    def __init__(self, store: MessageStore, capacity: int = DEFAULT_MAX_ENTRIES,
                 enabled: Callable[[], bool] = lambda: True) -> None:
        self.store = store
        self.enabled = enabled  # Java's messageIndexEnable: while off, what is stored is not indexed
        self.capacity = max(16, capacity)
        slots = 1
        while slots < self.capacity // 2:
            slots *= 2
        self._slot_count = slots
        self._slots: array[int] | None = None  # seq + 1 of each slot's newest entry (0: none)
        self._hashes: array[int] = array("q")  # hash((topic, key))
        self._locs: array[int] = array("q")  # queue offset << QUEUE_ID_BITS | queue id
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
                self._work = store.queue_keys()
            elif self._dirty:
                dirty, self._dirty = self._dirty, set()
                keys = store.queue_keys()
                self._work = [k for k in keys if k[0] in dirty]
                if len(self._next) > len(keys) + 1024:  # queues of deleted topics: forget them
                    held = set(keys)
                    self._next = {k: v for k, v in self._next.items() if k in held}
            else:
                return 0
        if not self.enabled():  # skip what was stored meanwhile, as Java's dispatcher does
            for topic, queue_id in self._work:
                self._next[(topic, queue_id)] = store.max_offset(topic, queue_id)
            self._work = []
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
                    self._index(topic, queue_id, records)
                    done += len(records)
                self._next[key] = start
                if start >= hi:
                    work.pop()
        finally:
            store.get_total = counted  # indexing is not consumption
        return done

    def _index(self, topic: str, queue_id: int, records: list[bytes]) -> None:
        """Add the keys of one queue's records (the hot loop of the catch-up: kept in one function)."""
        if not 0 <= queue_id <= QUEUE_ID_MAX:
            return
        slots = self._slots
        if slots is None:
            slots = self._slots = array("q", bytes(8 * self._slot_count))
        hashes, locs, prevs = self._hashes, self._locs, self._prevs
        mask, capacity = self._slot_count - 1, self.capacity
        seq = self.total
        unpack_i32, unpack_i16 = _I32.unpack_from, _I16.unpack_from
        newest: bytes | None = None
        for record in records:
            if len(record) < BODY_LEN_AT + 4:
                continue
            (sys_flag,) = unpack_i32(record, SYS_FLAG_AT)
            if sys_flag & HOSTS_ARE_IPV6 or sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK:
                continue
            (body_len,) = unpack_i32(record, BODY_LEN_AT)
            pos = BODY_LEN_AT + 4 + body_len
            pos += 1 + record[pos]  # the topic (we know it)
            (props_len,) = unpack_i16(record, pos)
            start, end = pos + 2, pos + 2 + props_len
            # _keys_between inlined for the usual case: each name once, UNIQ_KEY and KEYS found directly
            i = record.find(_UNIQ, start, end)
            j = record.find(_KEYS, start, end)
            if (i > start and record[i - 1] != 2) or (j > start and record[j - 1] != 2):
                keys = _keys_between(record, start, end)  # a name inside another pair: the careful way
                if not keys:
                    continue
            else:
                keys = []
                if i >= 0:
                    i += 9
                    stop = record.find(b"\x02", i, end)
                    if stop < 0:
                        stop = end
                    if stop > i:
                        keys.append(record[i:stop].decode("utf-8", "replace"))
                if j >= 0:
                    j += 5
                    stop = record.find(b"\x02", j, end)
                    if stop < 0:
                        stop = end
                    keys.extend(k for k in record[j:stop].decode("utf-8", "replace").split(KEY_SEPARATOR) if k)
                if not keys:
                    continue
            (offset,) = _I64.unpack_from(record, QUEUE_OFFSET_AT)
            loc = offset << QUEUE_ID_BITS | queue_id
            for key in keys:
                key_hash = hash((topic, key))
                slot = key_hash & mask
                pos = seq % capacity
                if pos == len(hashes):
                    hashes.append(key_hash)
                    locs.append(loc)
                    prevs.append(slots[slot] - 1)
                else:
                    hashes[pos] = key_hash
                    locs[pos] = loc
                    prevs[pos] = slots[slot] - 1
                seq += 1
                slots[slot] = seq
            newest = record
        self.indexed_records += len(records)
        self.total = seq
        if newest is not None:  # a queue's records come in commit-log order: its last is its newest
            phys = phys_offset(newest)
            if phys >= self.last_phys:  # queues are read in any order: keep the newest of all
                self.last_phys = phys
                self.last_timestamp = store_timestamp(newest)

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
        key_hash = hash((topic, key))
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
                    loc = self._locs[pos]
                    ident = (loc & QUEUE_ID_MAX, loc >> QUEUE_ID_BITS)
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
        return fields is not None and fields[0] == topic and begin <= store_timestamp(record) <= end and key in fields[1]


__all__ = ["DEFAULT_MAX_ENTRIES", "KeyIndex", "record_fields", "record_keys"]
