"""Messages on disk: one append-only file series per queue, written off the event loop.

With ``storePathRootDir`` set, every record the in-memory store keeps is
also appended to ``${storePathRootDir}/messages/<topic>/<queueId>/<first
offset, 20 digits>``: the same bytes a pull answer carries (the commit-log
layout), one after the other, a new segment every ``SEGMENT_BYTES``. It is
not Java's commit log plus consume queues, but it keeps what a consumer
scenario needs of them: messages and their offsets survive a restart.

* **Nothing is acknowledged before it is written.** The event loop only
  queues a record (:meth:`QueueFiles.append`); one writer thread
  ``write()``s queued records within milliseconds and ``fsync``s them every
  ``FLUSH_INTERVAL`` (Java's ASYNC_FLUSH: a ``kill -9`` loses nothing
  written, an OS crash the last half second). After each batch the thread
  reports (:class:`BatchReport`) which appends are in the OS and how far
  each queue got; :mod:`broker_stub.persistence` answers producers and
  makes records readable only then.
* **A failed write is undone and reported.** If a write fails (ENOSPC,
  EIO, a read-only file system), the file is cut back to the end of its
  last whole record (if even that fails, the queue's next append cuts it
  first), the report names the error, and every later append fails too,
  unwritten, until the event loop has rolled its queues back to what is on
  disk and sent :meth:`QueueFiles.resume`. So an offset is never on disk
  twice and never after a gap. The event loop then asks for a
  :meth:`probe` (a small write where the failure happened) about once a
  second and accepts sends again once one succeeds.
* **Bounded.** At most ``MAX_PENDING_BYTES`` wait for the writer; beyond
  that :attr:`QueueFiles.busy` is true and the broker refuses sends with
  SYSTEM_BUSY (Java's ``[PC_SYNCHRONIZED]`` back-pressure). At most
  ``MAX_OPEN_FILES`` files are open. A segment is deleted once every record
  in it is below its queue's min offset in memory, so the files hold what
  memory holds plus at most one segment per queue.
* **Inside the store, always.** Topic names were checked where they came
  in (:mod:`remoting.names`); every queue directory is also resolved, links
  and all, before it is created, written or deleted, and must stay under
  ``messages/`` (:meth:`admit`, :func:`remoting.names.resolve_inside`).
* **Read back on start** (:meth:`replay`, :mod:`broker_stub.segments`):
  whole records only, in bounded memory; a torn tail is cut off with one
  log line; directories whose names are no topic names, or that lead out
  of the store, are skipped with one line each.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from broker_stub.segments import RECORD_OVERHEAD, PROBE_NAME, StoreReplay, segment_name
from remoting.names import PathOutsideError, is_legal_topic, resolve_inside

log = logging.getLogger("broker_stub")

SEGMENT_BYTES = 4 * 1024 * 1024
MAX_PENDING_BYTES = 64 * 1024 * 1024
MAX_OPEN_FILES = 256
MAX_ADMITTED = 100_000  # queue directories remembered as checked (forgotten all at once beyond)
FLUSH_INTERVAL = 0.5  # s
PROBE_BYTES = 64 * 1024

Key = tuple[str, int]


def messages_dir(store_root: str) -> str:
    return os.path.join(os.path.expanduser(store_root), "messages")


class WriteFailed(Exception):
    """A write that failed after ``written`` bytes of it had reached the file."""

    def __init__(self, error: OSError, written: int) -> None:
        super().__init__(str(error))
        self.error = error
        self.written = written


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    done = 0
    while view:
        try:
            n = os.write(fd, view)
        except OSError as exc:  # ENOSPC typically comes after a short write: say how much went in
            raise WriteFailed(exc, done) from None
        done += n
        view = view[n:]


@dataclass
class BatchReport:
    """What one writer pass did, for the event loop (appends are numbered from 1 in append order).

    ``ok_through``: the last append written; every one before it was written too, or had failed before
    the event loop rolled back (:meth:`QueueFiles.resume`). ``done_through``: every append up to this
    number is settled, written or failed unwritten. ``written``: per queue
    token (whatever :meth:`QueueFiles.append` was given), the queue offset after its last record
    written. ``error``: the write error that began a failure (None when the failed appends only
    waited for :meth:`resume`). ``error_key``: the queue it happened on. ``probe``: the result of a
    probe (None: no probe ran; "": it succeeded; else the error).
    """

    ok_through: int
    done_through: int
    written: dict[object, int] = field(default_factory=dict)
    error: OSError | None = None
    error_key: Key | None = None
    probe: str | None = None


class QueueFiles:
    """The per-queue files of one broker; :meth:`replay` first, then :meth:`start` the writer."""

    def __init__(
        self,
        store_root: str,
        *,
        segment_bytes: int = SEGMENT_BYTES,
        max_pending_bytes: int = MAX_PENDING_BYTES,
        flush_interval: float = FLUSH_INTERVAL,
        max_record: int = 4 * 1024 * 1024 + RECORD_OVERHEAD,
    ) -> None:
        self.dir = messages_dir(store_root)
        self.segment_bytes = segment_bytes
        self.max_pending_bytes = max_pending_bytes
        self.flush_interval = flush_interval
        self.max_record = max_record
        self._cond = threading.Condition()
        # ("append", key, (offset, record, token)) | ("trim", key, min) | ("delete", topic, None)
        # | ("resume", None, None) | ("probe", key or None, None)
        self._pending: list[tuple[str, object, object]] = []
        self._pending_bytes = 0
        self._closing = False
        self.appended_seq = 0  # appends so far (the event loop's side)
        #: Called from the writer thread after each pass (must be thread-safe).
        self.on_report: Callable[[BatchReport], None] | None = None
        self._thread: threading.Thread | None = None
        self._admitted: set[Key] = set()  # queue directories checked to stay inside (event loop)
        # writer-thread state (read back by replay before the thread starts)
        self._segments: dict[Key, list[int]] = {}  # first offsets of each queue's segments, ascending
        self._sizes: dict[Key, int] = {}  # bytes in each queue's last segment
        self._next: dict[Key, int] = {}  # the queue offset due next in each queue's last segment
        self._sealed: set[Key] = set()  # last segment ends in bytes that could not be cut off yet: cut first
        self._open: OrderedDict[Key, int] = OrderedDict()  # fds of last segments
        self._dirty: set[int] = set()
        self._done_seq = 0  # appends settled, written or failed (writer side)
        self._ok_seq = 0  # the last append written
        self._failing = False  # a write failed: fail every append until resume()
        self.written_bytes = 0
        self.write_errors = 0
        self.last_error: str | None = None

    # ------------------------------------------------------------------
    # paths

    def _queue_dir(self, key: Key) -> str:
        """The queue's directory, resolved; PathOutsideError if it leads out of ``messages/``."""
        return resolve_inside(self.dir, key[0], str(key[1]))

    def admit(self, topic: str, queue_id: int) -> None:
        """Refuse (PathOutsideError) a queue whose directory would not be inside the store (event loop;
        called for every queue the store creates in memory, and remembered)."""
        key = (topic, queue_id)
        if key in self._admitted:
            return
        if not is_legal_topic(topic):
            raise PathOutsideError(f"topic {topic[:80]!r} is no legal topic name and never becomes a directory")
        self._queue_dir(key)
        if len(self._admitted) >= MAX_ADMITTED:
            self._admitted.clear()
        self._admitted.add(key)

    def check_topic(self, topic: str) -> None:
        """PathOutsideError unless the topic's directory stays inside the store (before a delete)."""
        resolve_inside(self.dir, topic)

    # ------------------------------------------------------------------
    # start

    def replay(self) -> Iterator[tuple[str, int, bytes]]:
        """Every whole record on disk, queue by queue, oldest first: (topic, queue id, record); torn
        tails cut back (:mod:`broker_stub.segments`). The writer continues where each queue ends."""
        replay = StoreReplay(self.dir, self.max_record)
        yield from replay.records()
        for key, tail in replay.tails.items():
            self._segments[key] = tail.firsts
            self._sizes[key] = tail.size
            self._next[key] = tail.next_offset
            if tail.sealed:
                self._sealed.add(key)

    def start(self) -> None:
        """Start the writer thread (after :meth:`replay`)."""
        os.makedirs(self.dir, exist_ok=True)
        self._thread = threading.Thread(target=self._run, name="queue-files-writer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------
    # called from the event loop: never blocks on disk

    @property
    def busy(self) -> bool:
        """More than ``max_pending_bytes`` wait for the writer: refuse new sends until it catches up."""
        return self._pending_bytes > self.max_pending_bytes

    def append(self, topic: str, queue_id: int, offset: int, record: bytes, token: object = None) -> None:
        """Queue one record; ``token`` comes back in the report with the queue offset written."""
        with self._cond:
            self._pending.append(("append", (topic, queue_id), (offset, record, token)))
            self._pending_bytes += len(record)
            self.appended_seq += 1
            self._cond.notify()

    def trim(self, topic: str, queue_id: int, min_offset: int) -> None:
        """Delete the segments all of whose records are below ``min_offset``."""
        self._enqueue("trim", (topic, queue_id), min_offset)

    def delete_topic(self, topic: str) -> None:
        self._enqueue("delete", topic, None)

    def resume(self) -> None:
        """The event loop rolled its queues back to what is on disk: appends queued from now on are written."""
        self._enqueue("resume", None, None)

    def probe(self, key: Key | None) -> None:
        """Try a small write (in ``key``'s directory, else in ``messages/``); the result comes in a report."""
        self._enqueue("probe", key, None)

    def _enqueue(self, op: str, target: object, arg: object) -> None:
        with self._cond:
            self._pending.append((op, target, arg))
            self._cond.notify()

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, fsync, stop the thread (an orderly stop; blocks up to ``timeout``)."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    # ------------------------------------------------------------------
    # the writer thread

    def _run(self) -> None:
        last_flush = time.monotonic()
        while True:
            with self._cond:
                if not self._pending and not self._closing:
                    self._cond.wait(self.flush_interval)
                batch, self._pending = self._pending, []
                closing = self._closing
            first = self._done_seq
            report = BatchReport(self._ok_seq, first)
            try:
                self._apply(batch, report)
            except Exception as exc:  # a bug here must not end the writer: fail what is left, carry on
                log.error("message files: %s: %s", type(exc).__name__, exc)
                self._failing = True
                report.error = report.error or OSError(f"{type(exc).__name__}: {exc}")
                self._done_seq = report.done_through = first + sum(op == "append" for op, _, _ in batch)
            queued = sum(len(arg[1]) for op, _, arg in batch if op == "append")  # type: ignore[index, arg-type]
            with self._cond:
                self._pending_bytes -= queued  # written or failed: no longer waiting either way
            now = time.monotonic()
            if closing or now - last_flush >= self.flush_interval:
                self._fsync(report)
                last_flush = now
            if (batch or report.error is not None) and self.on_report is not None:
                self.on_report(report)
            if closing:
                with self._cond:
                    if self._pending:
                        continue
                for fd in self._open.values():
                    os.close(fd)
                self._open.clear()
                return

    def _apply(self, batch: list[tuple[str, object, object]], report: BatchReport) -> None:
        """Carry out a batch in order; consecutive appends to one queue become one write (a chunk)."""
        chunk: list[bytes] = []
        chunk_bytes = 0
        chunk_key: Key | None = None
        chunk_last: tuple[int, object, int] = (0, None, 0)  # the chunk's last (offset, token, append number)
        for op, target, arg in batch:
            if chunk and (op != "append" or target != chunk_key):
                self._flush_chunk(chunk_key, chunk, chunk_last, report)  # type: ignore[arg-type]
                chunk, chunk_bytes = [], 0
            if op == "append":
                self._done_seq += 1
                if self._failing:
                    continue  # unwritten: the event loop rolls it back
                key: Key = target  # type: ignore[assignment]
                offset, record, token = arg  # type: ignore[misc]
                if key in self._sealed and not self._unseal(key, report):
                    continue
                size = self._sizes.get(key, 0) + chunk_bytes
                due = self._next[key] + len(chunk) if key in self._next else None
                if offset != due or (size > 0 and size + len(record) > self.segment_bytes):
                    if chunk:
                        self._flush_chunk(key, chunk, chunk_last, report)
                        chunk, chunk_bytes = [], 0
                    if self._failing or not self._roll(key, offset, report):
                        continue
                chunk_key = key
                chunk.append(record)
                chunk_bytes += len(record)
                chunk_last = (offset, token, self._done_seq)
            elif op == "trim":
                self._trim(target, arg)  # type: ignore[arg-type]
            elif op == "delete":
                self._delete_topic(target)  # type: ignore[arg-type]
            elif op == "resume":
                self._failing = False
            elif op == "probe":
                report.probe = self._probe(target)  # type: ignore[arg-type]
        if chunk:
            self._flush_chunk(chunk_key, chunk, chunk_last, report)  # type: ignore[arg-type]
        report.done_through = self._done_seq

    def _flush_chunk(self, key: Key, chunk: list[bytes], last: tuple[int, object, int], report: BatchReport) -> None:
        """Write one queue's run of records (consecutive offsets and append numbers, ``last`` the last's).
        If the write fails part-way, the records that reached the file whole are kept and count as
        written, the rest is cut off, and every later append fails."""
        kept, error = self._write(key, chunk)
        offset, token, seq = last
        if kept:
            first_offset = offset - len(chunk) + 1
            report.written[token] = self._next[key] = first_offset + kept
            report.ok_through = self._ok_seq = seq - len(chunk) + kept
        if error is not None:
            self._fail(key, error, report)

    def _fail(self, key: Key | None, exc: OSError, report: BatchReport) -> None:
        """Fail from here on, unwritten, until :meth:`resume`; the report carries the first error."""
        self._failing = True
        self.write_errors += 1
        self.last_error = str(exc)
        if report.error is None:
            report.error, report.error_key = exc, key

    def _fd(self, key: Key) -> int:
        fd = self._open.get(key)
        if fd is not None:
            self._open.move_to_end(key)
            return fd
        path = os.path.join(self._queue_dir(key), segment_name(self._segments[key][-1]))
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._open[key] = fd
        while len(self._open) > MAX_OPEN_FILES:
            _, old = self._open.popitem(last=False)
            self._close_fd(old)
        return fd

    def _close_fd(self, fd: int) -> None:
        try:
            if fd in self._dirty:
                self._dirty.discard(fd)
                os.fsync(fd)
        finally:
            os.close(fd)

    def _roll(self, key: Key, first_offset: int, report: BatchReport) -> bool:
        """Start a new segment for ``key`` whose first record has ``first_offset``; False if it failed."""
        try:
            old = self._open.pop(key, None)
            if old is not None:
                self._close_fd(old)
            os.makedirs(self._queue_dir(key), exist_ok=True)
        except (OSError, PathOutsideError) as exc:
            self._fail(key, exc if isinstance(exc, OSError) else OSError(str(exc)), report)
            return False
        firsts = self._segments.setdefault(key, [])
        if not firsts or firsts[-1] != first_offset:
            firsts.append(first_offset)
        self._sizes[key] = 0
        self._next[key] = first_offset
        return True

    def _unseal(self, key: Key, report: BatchReport) -> bool:
        """Cut the last segment back to its last whole record before anything is appended to it
        (an earlier cut failed); False, failing, if it still cannot be cut."""
        try:
            os.truncate(os.path.join(self._queue_dir(key), segment_name(self._segments[key][-1])), self._sizes[key])
        except (OSError, PathOutsideError) as exc:
            self._fail(key, exc if isinstance(exc, OSError) else OSError(str(exc)), report)
            return False
        self._sealed.discard(key)
        return True

    def _write(self, key: Key, chunk: list[bytes]) -> tuple[int, OSError | None]:
        """Append ``chunk``; returns how many of its records are in the file whole, and the error if
        not all are (the file is then cut back to the end of the last whole one)."""
        data = b"".join(chunk)
        before = self._sizes.get(key, 0)
        try:
            fd = self._fd(key)
            _write_all(fd, data)
        except (OSError, PathOutsideError, WriteFailed) as exc:
            written = exc.written if isinstance(exc, WriteFailed) else 0
            kept = kept_bytes = 0
            for record in chunk:
                if kept_bytes + len(record) > written:
                    break
                kept += 1
                kept_bytes += len(record)
            self._undo(key, before + kept_bytes)
            self._sizes[key] = before + kept_bytes
            self.written_bytes += kept_bytes
            if kept_bytes and key in self._open:
                self._dirty.add(self._open[key])
            error = exc.error if isinstance(exc, WriteFailed) else exc
            return kept, error if isinstance(error, OSError) else OSError(str(error))
        self._dirty.add(fd)
        self._sizes[key] = before + len(data)
        self.written_bytes += len(data)
        return len(chunk), None

    def _undo(self, key: Key, size: int) -> None:
        """A write failed part-way: cut the segment back to ``size`` (its last whole record); if that
        fails too, the queue is sealed: its next append cuts it first (:meth:`_unseal`)."""
        fd = self._open.get(key)
        if fd is None:
            return
        try:
            os.ftruncate(fd, size)
        except OSError:
            self._open.pop(key, None)
            self._dirty.discard(fd)
            try:
                os.close(fd)
            except OSError:
                pass
            self._sealed.add(key)

    def _probe(self, key: Key | None) -> str:
        """Write, sync and remove ``PROBE_BYTES`` where the failure was; "" if that worked, else the error."""
        try:
            where = self.dir
            if key is not None:
                where = self._queue_dir(key)
                os.makedirs(where, exist_ok=True)
            path = os.path.join(where, PROBE_NAME)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _write_all(fd, bytes(PROBE_BYTES))
                os.fsync(fd)
            finally:
                os.close(fd)
                os.unlink(path)
        except (OSError, PathOutsideError, WriteFailed) as exc:
            return str(exc)
        return ""

    def _fsync(self, report: BatchReport) -> None:
        for fd in list(self._dirty):
            try:
                os.fsync(fd)
            except OSError as exc:  # what was written may not reach the disk: stop taking sends
                self._fail(None, exc, report)
        self._dirty.clear()

    def _trim(self, key: Key, min_offset: int) -> None:
        firsts = self._segments.get(key)
        while firsts and len(firsts) > 1 and firsts[1] <= min_offset:
            try:
                os.unlink(os.path.join(self._queue_dir(key), segment_name(firsts.pop(0))))
            except (OSError, PathOutsideError):
                pass

    def _delete_topic(self, topic: str) -> None:
        for key in [k for k in self._segments if k[0] == topic]:
            fd = self._open.pop(key, None)
            if fd is not None:
                self._dirty.discard(fd)
                os.close(fd)
            del self._segments[key]
            self._sizes.pop(key, None)
            self._next.pop(key, None)
            self._sealed.discard(key)
        try:
            path = resolve_inside(self.dir, topic)
        except PathOutsideError as exc:
            log.error("message files: not deleted: %s", exc)
            return
        if path != os.path.realpath(self.dir):
            shutil.rmtree(path, ignore_errors=True)

    def segment_count(self, topic: str, queue_id: int) -> int:
        """How many segments a queue has (for tests and runtime info)."""
        return len(self._segments.get((topic, queue_id), ()))


__all__ = ["MAX_PENDING_BYTES", "SEGMENT_BYTES", "BatchReport", "QueueFiles", "messages_dir"]
