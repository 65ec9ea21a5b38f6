"""One record per send, and a msgpack stream of them.

A run writes every send as a small msgpack array so a scenario or a fan-out
partition can keep millions of sends on disk with bounded memory, and read
them back later for percentiles and timelines. The array is the dataclass
fields in order; a reader fills trailing fields it does not find with their
defaults, so adding a field at the end keeps old files readable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any, BinaryIO, Self

import msgpack

#: Every outcome a send can have (the last attempt decides, as in Java's send()).
OUTCOMES = ("ok", "timeout", "no_route", "rejected", "conn_error", "error")


@dataclass(frozen=True, slots=True)
class SendRecord:
    t: float  # seconds since the run's start (monotonic), when the send began
    producer: int  # producer index
    topic: str
    broker: str | None  # broker NAME of the last attempt (None if no route)
    queue_id: int  # -1 if none
    outcome: str  # one of OUTCOMES
    latency_ms: float  # whole send() including retries
    attempts: int  # 1 + retries used (0 when no route was found: nothing was sent)
    queue_offset: int = -1  # the broker's queue offset of a stored message, else -1
    code: int = -1  # response code of the last answered attempt, -1 if none answered
    msg_id: str = ""  # the producer's message id (UNIQ_KEY) of a stored message: what consumers record


_FIELD_NAMES = tuple(f.name for f in fields(SendRecord))
_FIELD_COUNT = len(_FIELD_NAMES)
_MIN_FIELDS = sum(1 for f in fields(SendRecord) if f.default is MISSING)


class RecordWriter:
    """Appends SendRecords to a msgpack file through a bounded buffer.

    ``write`` packs at once (so the buffer is bytes, not objects) and flushes
    whenever ``buffer_bytes`` is reached, so memory stays bounded however
    long a run is. Use ``close`` (or ``with``) to flush the tail.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        buffer_bytes: int = 256 * 1024,
        append: bool = False,
        to_array: Callable[[Any], tuple] | None = None,
    ) -> None:
        self.path = Path(path)
        self._to_array = to_array or record_to_array  # another record type (consume records) packs its own fields
        self._fh: BinaryIO | None = open(self.path, "ab" if append else "wb")  # noqa: SIM115 (closed by close())
        self._packer = msgpack.Packer(use_bin_type=True)
        self._buf: list[bytes] = []
        self._buffered = 0
        self._limit = max(1, buffer_bytes)
        self.count = 0

    def write(self, rec: Any) -> None:
        if self._fh is None:
            raise ValueError(f"record writer for {self.path} is closed")
        data = self._packer.pack(self._to_array(rec))
        self._buf.append(data)
        self._buffered += len(data)
        self.count += 1
        if self._buffered >= self._limit:
            self.flush()

    def flush(self) -> None:
        if self._fh is None:
            return
        if self._buf:
            self._fh.write(b"".join(self._buf))
            self._buf.clear()
            self._buffered = 0
        self._fh.flush()

    def close(self) -> None:
        if self._fh is None:
            return
        try:
            self.flush()
            os.fsync(self._fh.fileno())
        finally:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def record_to_array(rec: SendRecord) -> tuple:
    """The stored form: the fields in declaration order (faster than dataclasses.astuple)."""
    return tuple(getattr(rec, name) for name in _FIELD_NAMES)


def record_from_array(arr: list | tuple) -> SendRecord:
    """A SendRecord from one stored array (shorter arrays from older writers get defaults)."""
    if not _MIN_FIELDS <= len(arr) <= _FIELD_COUNT:
        raise ValueError(f"not a send record: array of {len(arr)} items")
    return SendRecord(*arr)


def read_records(path: str | Path) -> Iterator[SendRecord]:
    """Every record of a file written by RecordWriter, in order.

    A truncated last record (a writer that was killed mid-write) ends the
    iteration instead of raising.
    """
    with open(path, "rb") as fh:
        unpacker = msgpack.Unpacker(fh, raw=False, use_list=False, max_buffer_size=16 * 1024 * 1024)
        for arr in unpacker:
            yield record_from_array(arr)
