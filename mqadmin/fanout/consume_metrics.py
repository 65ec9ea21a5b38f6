"""What the fan-out's consumers did, in a form the driver adds up exactly, and the reconciliation.

A partition cannot send back a row per message, yet the driver must tell,
for every message a producer saw acknowledged, whether each consumer group
consumed it. Offsets make that compact: a message is (topic, broker, queue,
offset), so each partition keeps one bitmap per queue of the offsets its
producers got acknowledged, and one per consumer group and queue of the
offsets its consumers consumed (a bit already set is a duplicate in that
partition). Merging ORs the bitmaps; bits two partitions both set are
duplicates across partitions (a queue that moved between consumers of
different partitions). A few bytes per message, merged in any order to the
same result.

When each message was first delivered is kept as runs: per group and queue,
``[second, first offset, last offset]`` for consecutive offsets consumed in
one second (a handful per queue and second, merged by concatenation), so the
driver can tell first deliveries per second from re-deliveries exactly
(:meth:`ConsumeMetrics.first_per_second`): a consumer that takes over a queue
in a rebalance reads it again from the committed offset, RocketMQ's
at-least-once delivery.

Reconciliation (:func:`reconcile`), per group, for every acknowledged
message of the group's topics: **consumed**; or **lag**: not consumed and
at or past the offset the group has committed for its queue on the broker
(the broker counts it as lag too); or **unexplained**: not consumed although
the committed offset is past it (skipped). Offsets identify messages only
while the brokers keep them: the fan-out does not kill brokers with
consumers running in memory-only mode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simclient.consume_stats import ConsumeStats

#: (topic, broker name, queue id)
QueueKey = tuple[str, str, int]
#: Most delivery runs a partition keeps (a run: one queue, one second, consecutive offsets; about 100
#: bytes), and the driver once merged; past them the first-delivery series is not kept (the report says
#: so) rather than grow without bound. A 4-group, 32-queue, 60 s run keeps about 15,000.
MAX_RUNS, MAX_MERGED_RUNS = 100_000, 1_000_000


class OffsetBits:
    """Sets of queue offsets, one growable bitmap per queue."""

    __slots__ = ("maps",)

    def __init__(self) -> None:
        self.maps: dict[QueueKey, tuple[int, bytearray]] = {}  # key -> (base offset, bits from base)

    def add(self, key: QueueKey, offset: int) -> bool:
        """Set ``offset``; False when it was set already."""
        entry = self.maps.get(key)
        if entry is None:
            base = offset - offset % 8
            entry = self.maps[key] = (base, bytearray(64))
        base, bits = entry
        if offset < base:
            new_base = offset - offset % 8
            bits[0:0] = bytes((base - new_base) // 8)
            self.maps[key] = entry = (new_base, bits)
            base = new_base
        i = offset - base
        byte = i >> 3
        if byte >= len(bits):
            bits.extend(bytes(max(byte + 1 - len(bits), len(bits))))
        mask = 1 << (i & 7)
        if bits[byte] & mask:
            return False
        bits[byte] |= mask
        return True

    def as_int(self, key: QueueKey, base: int) -> int:
        """The set of ``key`` as an int whose bit ``o - base`` is offset ``o`` (offsets below base dropped)."""
        entry = self.maps.get(key)
        if entry is None:
            return 0
        b, bits = entry
        value = int.from_bytes(bits, "little")
        return value << (b - base) if b >= base else value >> (base - b)

    def base_of(self, key: QueueKey) -> int:
        entry = self.maps.get(key)
        return entry[0] if entry is not None else 0

    def count(self) -> int:
        return sum(int.from_bytes(bits, "little").bit_count() for _, bits in self.maps.values())

    def merge(self, other: OffsetBits) -> int:
        """OR ``other`` in; returns how many offsets both held (duplicates across partitions)."""
        both = 0
        for key, (ob, obits) in other.maps.items():
            mine = self.maps.get(key)
            if mine is None:
                self.maps[key] = (ob, bytearray(obits))
                continue
            base = min(mine[0], ob)
            a, b = self.as_int(key, base), int.from_bytes(obits, "little") << (ob - base)
            both += (a & b).bit_count()
            merged = a | b
            self.maps[key] = (base, bytearray(merged.to_bytes(max(1, (merged.bit_length() + 7) // 8), "little")))
        return both

    def to_obj(self) -> list[list[Any]]:
        return [[t, b, q, base, bytes(bits).rstrip(b"\0")] for (t, b, q), (base, bits) in sorted(self.maps.items())]

    @classmethod
    def from_obj(cls, rows: list[list[Any]]) -> OffsetBits:
        out = cls()
        for t, b, q, base, bits in rows:
            out.maps[(str(t), str(b), int(q))] = (int(base), bytearray(bits))
        return out


@dataclass
class ConsumeMetrics:
    """Every partition's consumers, merged: counters, acknowledged and consumed offsets, consumption per second."""

    stats: ConsumeStats = field(default_factory=ConsumeStats)
    acked: OffsetBits = field(default_factory=OffsetBits)  # what producers saw stored
    consumed: dict[str, OffsetBits] = field(default_factory=dict)  # group -> offsets consumed
    duplicates: dict[str, int] = field(default_factory=dict)  # group -> consumptions of a consumed offset
    members: dict[str, int] = field(default_factory=dict)  # group -> consumers
    topics: dict[str, list[str]] = field(default_factory=dict)  # group -> subscribed topics
    per_second: dict[int, int] = field(default_factory=dict)  # second since the start barrier -> deliveries
    #: (group, queue) -> runs [second, first offset, last offset] of deliveries; None past MAX_RUNS
    runs: dict[tuple[str, QueueKey], list[list[int]]] | None = field(default_factory=dict)
    run_count: int = 0

    def consumed_one(self, group: str, key: QueueKey, offset: int, sec: int) -> None:
        bits = self.consumed.get(group)
        if bits is None:
            bits = self.consumed[group] = OffsetBits()
        if not bits.add(key, offset):
            self.duplicates[group] = self.duplicates.get(group, 0) + 1
        self.per_second[sec] = self.per_second.get(sec, 0) + 1
        self._ran(group, key, offset, sec)

    def _ran(self, group: str, key: QueueKey, offset: int, sec: int) -> None:
        if self.runs is None:
            return
        runs = self.runs.setdefault((group, key), [])
        if runs and runs[-1][0] == sec and runs[-1][2] + 1 == offset:
            runs[-1][2] = offset
        elif self.run_count < MAX_RUNS:
            runs.append([sec, offset, offset])
            self.run_count += 1
        else:
            self.runs = None

    def first_per_second(self) -> dict[int, int] | None:
        """Second -> messages delivered for the first time in it (per group: a message two groups read
        counts in each), exact across partitions; None when the runs were not kept (past MAX_RUNS)."""
        if self.runs is None:
            return None
        firsts: dict[int, int] = {}
        for runs in self.runs.values():
            base = min(lo for _, lo, _ in runs)
            seen = 0
            for sec, lo, hi in sorted(runs):
                span = ((1 << (hi - lo + 1)) - 1) << (lo - base)
                new = span & ~seen
                if new:
                    firsts[sec] = firsts.get(sec, 0) + new.bit_count()
                    seen |= span
        return firsts

    def merge(self, other: ConsumeMetrics) -> None:
        self.stats.merge(other.stats)
        self.acked.merge(other.acked)
        for group, bits in other.consumed.items():
            mine = self.consumed.get(group)
            if mine is None:
                self.consumed[group] = bits
            else:
                self.duplicates[group] = self.duplicates.get(group, 0) + mine.merge(bits)
        for group, n in other.duplicates.items():
            self.duplicates[group] = self.duplicates.get(group, 0) + n
        for group, n in other.members.items():
            self.members[group] = self.members.get(group, 0) + n
        for group, topics in other.topics.items():
            self.topics[group] = sorted(set(self.topics.get(group, [])) | set(topics))
        for sec, n in other.per_second.items():
            self.per_second[sec] = self.per_second.get(sec, 0) + n
        if self.runs is None or other.runs is None or self.run_count + other.run_count > MAX_MERGED_RUNS:
            self.runs = None
        else:
            for key, runs in other.runs.items():
                self.runs.setdefault(key, []).extend(runs)
            self.run_count += other.run_count

    def to_obj(self) -> dict[str, Any]:
        return {
            "stats": self.stats.to_obj(),
            "acked": self.acked.to_obj(),
            "consumed": {g: bits.to_obj() for g, bits in sorted(self.consumed.items())},
            "duplicates": dict(self.duplicates),
            "members": dict(self.members),
            "topics": dict(self.topics),
            "per_second": [[s, n] for s, n in sorted(self.per_second.items())],
            "runs": None if self.runs is None else [[g, *key, runs] for (g, key), runs in self.runs.items()],
        }

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> ConsumeMetrics:
        return cls(
            stats=ConsumeStats.from_obj(obj.get("stats", {})),
            acked=OffsetBits.from_obj(obj.get("acked", [])),
            consumed={str(g): OffsetBits.from_obj(rows) for g, rows in obj.get("consumed", {}).items()},
            duplicates={str(g): int(n) for g, n in obj.get("duplicates", {}).items()},
            members={str(g): int(n) for g, n in obj.get("members", {}).items()},
            topics={str(g): [str(t) for t in ts] for g, ts in obj.get("topics", {}).items()},
            per_second={int(s): int(n) for s, n in obj.get("per_second", [])},
            runs=None if obj.get("runs", []) is None else {
                (str(g), (str(t), str(b), int(q))): [[int(v) for v in run] for run in runs]
                for g, t, b, q, runs in obj.get("runs", [])},
            run_count=sum(len(runs) for *_, runs in obj.get("runs") or []),
        )


@dataclass
class GroupReconciliation:
    group: str
    members: int
    acknowledged: int = 0
    consumed: int = 0  # acknowledged and consumed
    lag: int = 0  # acknowledged, not consumed, at or past the group's committed offset
    unexplained: int = 0  # acknowledged, not consumed, below the committed offset
    other: int = 0  # consumed, not acknowledged to this run's producers (earlier messages, timed-out sends)
    duplicates: int = 0
    broker_lag: int | None = None  # sum over queues of max offset - committed offset, as the brokers count it
    offsets_read: bool = True

    def to_obj(self) -> dict[str, Any]:
        """The report's ``consumers.byGroup`` row."""
        return {"group": self.group, "members": self.members, "acknowledged": self.acknowledged,
                "consumed": self.consumed, "lag": self.lag, "unexplained": self.unexplained, "other": self.other,
                "duplicates": self.duplicates, "brokerLag": self.broker_lag, "offsetsRead": self.offsets_read}


def reconcile(
    metrics: ConsumeMetrics,
    committed: dict[tuple[str, str, str, int], int] | None,
    max_offsets: dict[QueueKey, int] | None = None,
) -> list[GroupReconciliation]:
    """Every group's accounting of the acknowledged messages of its topics (see the module doc).

    ``committed``: (group, topic, broker, queue) -> the offset the broker has
    for it after the run (missing: none, i.e. 0); None when it could not be
    read, in which case everything not consumed counts as lag.
    """
    out = []
    for group in sorted(metrics.members):
        topics = set(metrics.topics.get(group, []))
        rec = GroupReconciliation(group, metrics.members[group], duplicates=metrics.duplicates.get(group, 0),
                                  offsets_read=committed is not None)
        consumed = metrics.consumed.get(group, OffsetBits())
        keys = {k for k in metrics.acked.maps if k[0] in topics} | {k for k in consumed.maps if k[0] in topics}
        for key in keys:
            base = min(metrics.acked.base_of(key), consumed.base_of(key))
            acked = metrics.acked.as_int(key, base)
            got = consumed.as_int(key, base)
            rec.acknowledged += acked.bit_count()
            rec.consumed += (acked & got).bit_count()
            rec.other += (got & ~acked).bit_count()
            missing = acked & ~got
            c = committed.get((group, *key), 0) if committed is not None else None
            if c is None:
                rec.lag += missing.bit_count()
            else:
                below = max(0, c - base)
                skipped = missing & ((1 << below) - 1)
                rec.unexplained += skipped.bit_count()
                rec.lag += missing.bit_count() - skipped.bit_count()
        if committed is not None and max_offsets is not None:
            rec.broker_lag = sum(max(0, top - committed.get((group, *key), 0))
                                 for key, top in max_offsets.items() if key[0] in topics)
        out.append(rec)
    return out


__all__ = ["ConsumeMetrics", "GroupReconciliation", "OffsetBits", "QueueKey", "reconcile"]
