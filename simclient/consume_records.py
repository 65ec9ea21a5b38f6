"""One record per consumed message, in the same msgpack form as the send records.

A consumed message is stored as a msgpack array of the fields below, in
order, exactly like :class:`~simclient.records.SendRecord` (a reader fills
missing trailing fields with their defaults). The send record's
``msg_id`` and this record's ``msg_id`` are the same producer-made id
(``UNIQ_KEY``), which is how a run matches every acknowledged send with
its consumptions: offsets are not enough, a memory-only broker that was
killed starts its queues at offset 0 again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

import msgpack

from simclient.records import RecordWriter

#: What a consumption can end in: consumed, or answered RECONSUME_LATER (sent back for a retry).
CONSUME_OUTCOMES = ("ok", "retry")


@dataclass(frozen=True, slots=True)
class ConsumeRecord:
    t: float  # seconds since the run's start (monotonic), when consumption ended
    consumer: int  # consumer index
    group: str  # consumer group
    topic: str  # the message's own topic (a retried message's original topic)
    broker: str  # broker name the message was pulled from
    broker_id: int  # 0: the master, else the slave it was pulled from
    queue_id: int
    queue_offset: int  # offset in the queue it was pulled from (the %RETRY% queue for a retry)
    msg_id: str  # UNIQ_KEY: matches SendRecord.msg_id
    latency_ms: float  # end to end: from the broker's store time to the end of consumption (wall clock)
    outcome: str = "ok"  # one of CONSUME_OUTCOMES
    reconsume_times: int = 0  # 0 for a first delivery


_FIELD_NAMES = tuple(f.name for f in fields(ConsumeRecord))
_FIELD_COUNT = len(_FIELD_NAMES)
_MIN_FIELDS = sum(1 for f in fields(ConsumeRecord) if f.default is MISSING)


def consume_record_to_array(rec: ConsumeRecord) -> tuple:
    return tuple(getattr(rec, name) for name in _FIELD_NAMES)


def consume_record_from_array(arr: list | tuple) -> ConsumeRecord:
    if not _MIN_FIELDS <= len(arr) <= _FIELD_COUNT:
        raise ValueError(f"not a consume record: array of {len(arr)} items")
    return ConsumeRecord(*arr)


def consume_record_writer(path: str | Path, *, buffer_bytes: int = 256 * 1024) -> RecordWriter:
    """A bounded-buffer msgpack writer of ConsumeRecords (close it to flush the tail)."""
    return RecordWriter(path, buffer_bytes=buffer_bytes, to_array=consume_record_to_array)


def read_consume_records(path: str | Path) -> Iterator[ConsumeRecord]:
    """Every record of a file written by :func:`consume_record_writer`; a truncated tail ends it."""
    with open(path, "rb") as fh:
        unpacker = msgpack.Unpacker(fh, raw=False, use_list=False, max_buffer_size=16 * 1024 * 1024)
        for arr in unpacker:
            yield consume_record_from_array(arr)


__all__ = [
    "CONSUME_OUTCOMES",
    "ConsumeRecord",
    "consume_record_from_array",
    "consume_record_to_array",
    "consume_record_writer",
    "read_consume_records",
]
