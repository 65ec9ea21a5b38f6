"""Reading one queue's segment files back at start: whole records only, in bounded memory.

A segment (``messages/<topic>/<queueId>/<first offset, 20 digits>``) is a
run of stored records in the commit-log layout, written by
:mod:`broker_stub.queue_files`. What can be found at its end after a
``kill -9``, a full disk or an OS crash: a record cut in its header or its
body, zeroes (blocks the file system allocated but never filled), or bytes
that are no record at all. :class:`SegmentScan` yields each whole record
and stops at the first thing that is not one; :attr:`SegmentScan.good_end`
is then where the last whole record ends, and the caller cuts the file
there (one log line with the bytes dropped).

A record counts as whole only if everything in it agrees: the magic code,
a total size between the smallest record and ``max_record``, the body,
topic and properties lengths adding up to that total, the topic and queue
id of the directory it is in, the queue offset that follows the previous
record's (the first one is the file name's), and the body's CRC (so a
header followed by zeroes is not taken for a message).

Memory: the file is read in blocks of ``READ_BLOCK``; at most one block
plus one record (``max_record``, about the broker's ``maxMessageSize``) is
held at once, whatever the file's size or what a corrupt header claims.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from remoting.names import PathOutsideError, is_legal_topic, resolve_inside

log = logging.getLogger("broker_stub")

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7, MessageDecoder V1
HEAD_BYTES = 88  # totalSize .. preparedTransactionOffset (84) + bodyLength (4)
MIN_RECORD = 91  # head + topic length byte + properties length
#: A record's bytes beside its body: the head, the longest topic, the longest properties.
RECORD_OVERHEAD = HEAD_BYTES + 1 + 127 + 2 + 32767
READ_BLOCK = 1024 * 1024
_HEAD = struct.Struct(">iiiii")  # totalSize, magicCode, bodyCRC, queueId, flag
_QUEUE_OFFSET = struct.Struct(">q")  # at byte 20
_BODY_LEN = struct.Struct(">i")  # at byte 84
_PROPS_LEN = struct.Struct(">h")
NAME_DIGITS = 20
PROBE_NAME = ".write-probe"  # the writer's probe file (broker_stub.queue_files), never a topic
MAX_CUT_LINES = 20  # torn segments named one by one at start; beyond, one summary line


def segment_name(first_offset: int) -> str:
    return f"{first_offset:0{NAME_DIGITS}d}"


def is_segment_name(name: str) -> bool:
    return len(name) == NAME_DIGITS and name.isdigit()


def record_problem(rec: bytes, topic: bytes, queue_id: int, expected_offset: int) -> str | None:
    """Why ``rec`` (exactly one record's bytes) is not a whole record of this queue, or None."""
    total, magic, crc, rec_queue, _flag = _HEAD.unpack_from(rec, 0)
    if magic != MESSAGE_MAGIC_CODE:
        return "no record magic code"
    if rec_queue != queue_id:
        return f"a record of queue {rec_queue}"
    (offset,) = _QUEUE_OFFSET.unpack_from(rec, 20)
    if offset != expected_offset:
        return f"queue offset {offset} where {expected_offset} was due"
    (body_len,) = _BODY_LEN.unpack_from(rec, 84)
    at = HEAD_BYTES + body_len
    if body_len < 0 or at + 3 > total:
        return "body length beyond the record"
    topic_len = rec[at]
    if at + 1 + topic_len + 2 > total or rec[at + 1 : at + 1 + topic_len] != topic:
        return "not this queue's topic"
    (props_len,) = _PROPS_LEN.unpack_from(rec, at + 1 + topic_len)
    if props_len < 0 or at + 3 + topic_len + props_len != total:
        return "lengths do not add up to the record size"
    if zlib.crc32(rec[HEAD_BYTES:at]) & 0x7FFFFFFF != crc:
        return "body CRC mismatch"
    return None


class SegmentScan:
    """The whole records of one segment file, oldest first; see the module doc.

    After :meth:`records` is exhausted: ``good_end`` (bytes up to the end of
    the last whole record), ``size`` (bytes in the file), ``next_offset``
    (the queue offset after the last whole record) and ``problem`` (why the
    scan stopped before the end, or None).
    """

    def __init__(self, fh: BinaryIO, topic: str, queue_id: int, first_offset: int, max_record: int,
                 *, block: int = READ_BLOCK) -> None:
        self.fh = fh
        self.topic = topic.encode()
        self.queue_id = queue_id
        self.next_offset = first_offset
        self.max_record = max(max_record, MIN_RECORD)
        self.block = block
        self.good_end = 0
        self.size = 0
        self.problem: str | None = None

    def records(self) -> Iterator[bytes]:
        buf = b""
        start = 0  # where buf begins in the file
        eof = False
        while True:
            pos = self.good_end - start
            if len(buf) - pos < HEAD_BYTES and not eof:
                buf, start, eof = self._more(buf, pos, start, HEAD_BYTES)
                continue
            if len(buf) - pos < HEAD_BYTES:
                if len(buf) > pos:
                    self.problem = "a record cut in its header"
                break
            total, magic = _HEAD.unpack_from(buf, pos)[:2]
            if magic != MESSAGE_MAGIC_CODE:
                self.problem = "zeroes" if not any(buf[pos : pos + HEAD_BYTES]) else "no record magic code"
                break
            if not MIN_RECORD <= total <= self.max_record:
                self.problem = f"a record size of {total} bytes"
                break
            if len(buf) - pos < total:
                if eof:
                    self.problem = "a record cut in its body"
                    break
                buf, start, eof = self._more(buf, pos, start, total)
                continue
            rec = buf[pos : pos + total]
            problem = record_problem(rec, self.topic, self.queue_id, self.next_offset)
            if problem is not None:
                self.problem = problem
                break
            self.good_end += total
            self.next_offset += 1
            yield rec
        self.size = max(self.size, start + len(buf))
        if not eof:  # stopped early: the rest of the file counts as dropped too
            self.fh.seek(0, 2)
            self.size = self.fh.tell()

    def _more(self, buf: bytes, pos: int, start: int, need: int) -> tuple[bytes, int, bool]:
        """Keep ``buf[pos:]`` and read until it holds ``need`` bytes (or the file ends)."""
        rest = buf[pos:]
        start += pos
        chunks = [rest]
        have = len(rest)
        eof = False
        while have < need or have - len(rest) == 0:
            data = self.fh.read(max(self.block, need - have))
            if not data:
                eof = True
                break
            chunks.append(data)
            have += len(data)
            if have >= need:
                break
        return b"".join(chunks), start, eof


@dataclass
class QueueTail:
    """Where a queue's files end after replay: what the writer needs to go on appending."""

    firsts: list[int]  # first offsets of its segments, ascending
    size: int  # bytes in the last segment
    next_offset: int  # the queue offset due next in the last segment
    sealed: bool  # the last segment's torn tail could not be cut off: the next record starts a new one


class StoreReplay:
    """Every queue under ``messages/`` read back: :meth:`records`, then :attr:`tails`.

    Skipped with one log line each: a directory whose name is no legal
    topic name, or that leads (through a link) out of ``messages/``.
    A segment with a torn tail is cut back to its last whole record, one
    line each (the first ``MAX_CUT_LINES``, then one summary line); an
    older segment with no whole record at all is removed.
    """

    def __init__(self, messages_dir: str, max_record: int) -> None:
        self.dir = messages_dir
        self.max_record = max_record
        self.tails: dict[tuple[str, int], QueueTail] = {}
        self.cuts = 0
        self.cut_bytes = 0

    def records(self) -> Iterator[tuple[str, int, bytes]]:
        try:
            topics = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return
        for topic in topics:
            tdir = os.path.join(self.dir, topic)
            if topic == PROBE_NAME or not os.path.isdir(tdir):
                continue
            if not is_legal_topic(topic):
                log.warning("message files: skipped %r: not a legal topic name", tdir)
                continue
            try:
                resolve_inside(self.dir, topic)
                qnames = sorted(os.listdir(tdir))
            except (PathOutsideError, OSError) as exc:
                log.warning("message files: skipped %s: %s", tdir, exc)
                continue
            for qname in qnames:
                if not qname.isdigit() or len(qname) > 10:
                    continue
                try:
                    qdir = resolve_inside(self.dir, topic, qname)
                except PathOutsideError as exc:
                    log.warning("message files: skipped %s: %s", os.path.join(tdir, qname), exc)
                    continue
                yield from self._queue(topic, int(qname), qdir)
        if self.cuts > MAX_CUT_LINES:
            log.warning("message files: %d more torn segments cut back (%d bytes in all)",
                        self.cuts - MAX_CUT_LINES, self.cut_bytes)

    def _queue(self, topic: str, queue_id: int, qdir: str) -> Iterator[tuple[str, int, bytes]]:
        names = sorted(n for n in os.listdir(qdir) if is_segment_name(n))
        firsts: list[int] = []
        for i, name in enumerate(names):
            path = os.path.join(qdir, name)
            last = i == len(names) - 1
            with open(path, "rb") as fh:
                scan = SegmentScan(fh, topic, queue_id, int(name), self.max_record)
                for record in scan.records():
                    yield topic, queue_id, record
            sealed = scan.good_end < scan.size and not self._cut(path, scan)
            if scan.good_end == 0 and not last:
                try:
                    os.unlink(path)
                except OSError:
                    pass
                continue
            firsts.append(int(name))
            if last:
                self.tails[(topic, queue_id)] = QueueTail(firsts, scan.good_end, scan.next_offset, sealed)

    def _cut(self, path: str, scan: SegmentScan) -> bool:
        """Cut a segment back to its last whole record (one log line); False if the file could not be cut."""
        dropped = scan.size - scan.good_end
        self.cuts += 1
        self.cut_bytes += dropped
        done = True
        how = "cut off"
        try:
            with open(path, "r+b") as fh:
                fh.truncate(scan.good_end)
        except OSError as exc:  # a read-only or failing disk: leave it, and never append after it
            done = False
            how = f"left in place: {exc.strerror or exc}"
        if self.cuts <= MAX_CUT_LINES:
            log.warning("message files: %s: dropped %d bytes after the last whole record (%s; %s)",
                        path, dropped, scan.problem or "torn", how)
        return done


__all__ = ["MIN_RECORD", "PROBE_NAME", "RECORD_OVERHEAD", "QueueTail", "SegmentScan", "StoreReplay",
           "is_segment_name", "record_problem", "segment_name"]
