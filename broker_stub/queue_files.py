"""Messages on disk: one append-only file series per queue, written off the event loop.

With ``storePathRootDir`` set, every record the in-memory store keeps is
also appended to ``${storePathRootDir}/messages/<topic>/<queueId>/<first
offset, 20 digits>``: the same bytes a pull answer carries (the commit-log
layout), one after the other, a new segment every ``SEGMENT_BYTES``. It is
not Java's commit log plus consume queues, but it keeps what a consumer
scenario needs of them: messages and their offsets survive a restart.

* **ASYNC_FLUSH semantics.** The event loop only queues a record; one
  writer thread ``write()``s queued records to the files within
  milliseconds and ``fsync``s them every ``FLUSH_INTERVAL`` (Java's
  ``flushIntervalCommitLog``, 500 ms). What was written survives a
  ``kill -9`` of the process (the kernel holds it); only an OS crash can
  lose the last half second. Every append gets a sequence number and the
  thread reports (``on_written``) how far it has written, so the broker
  can hold a producer's answer until its message is in the OS, as a Java
  broker's put has copied it to the page cache before it answers.
* **Bounded.** At most ``MAX_PENDING_BYTES`` wait for the writer; beyond
  that :attr:`QueueFiles.busy` is true and the broker refuses sends with
  SYSTEM_BUSY (Java's ``[PC_SYNCHRONIZED]`` page-cache back-pressure).
  At most ``MAX_OPEN_FILES`` files are open. On disk the files follow the
  memory store: a segment is deleted once every record in it is below its
  queue's min offset (the store dropped them: its count or byte budget),
  so the files hold what memory holds plus at most one segment per queue.
* **Read back on start** (:meth:`QueueFiles.replay`), before the broker
  serves: queue offsets continue from the last record; a torn last record
  (a write cut by the kill) is cut off the file.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator

log = logging.getLogger("broker_stub")

SEGMENT_BYTES = 4 * 1024 * 1024
MAX_PENDING_BYTES = 64 * 1024 * 1024
MAX_OPEN_FILES = 256
FLUSH_INTERVAL = 0.5  # s
MESSAGE_MAGIC_CODE = -626843481
MIN_RECORD = 91  # head + body length + topic length byte + properties length
_HEAD = struct.Struct(">ii")  # totalSize, magicCode
_QUEUE_OFFSET = struct.Struct(">q")  # at byte 20
_NAME_DIGITS = 20

Key = tuple[str, int]


def messages_dir(store_root: str) -> str:
    return os.path.join(os.path.expanduser(store_root), "messages")


def _segment_name(first_offset: int) -> str:
    return f"{first_offset:0{_NAME_DIGITS}d}"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class QueueFiles:
    """The per-queue files of one broker; :meth:`replay` first, then :meth:`start` the writer."""

    def __init__(
        self,
        store_root: str,
        *,
        segment_bytes: int = SEGMENT_BYTES,
        max_pending_bytes: int = MAX_PENDING_BYTES,
        flush_interval: float = FLUSH_INTERVAL,
    ) -> None:
        self.dir = messages_dir(store_root)
        self.segment_bytes = segment_bytes
        self.max_pending_bytes = max_pending_bytes
        self.flush_interval = flush_interval
        self._cond = threading.Condition()
        self._pending: list[tuple[str, object, object]] = []  # ("append", key, (offset, record)) | ("trim", key, min) | ("delete", topic, None)
        self._pending_bytes = 0
        self._closing = False
        self.appended_seq = 0  # appends so far (the event loop's side)
        self.written_seq = 0  # appends handed to the OS so far (the writer's side)
        #: Called from the writer thread with ``written_seq`` after each batch (must be thread-safe).
        self.on_written: Callable[[int], None] | None = None
        self._thread: threading.Thread | None = None
        # writer-thread state (read back by replay before the thread starts)
        self._segments: dict[Key, list[int]] = {}  # first offsets of each queue's segments, ascending
        self._sizes: dict[Key, int] = {}  # bytes in each queue's last segment
        self._open: OrderedDict[Key, int] = OrderedDict()  # fds of last segments
        self._dirty: set[int] = set()
        self.written_bytes = 0
        self.write_errors = 0
        self.last_error: str | None = None

    # ------------------------------------------------------------------
    # start

    def _queue_dir(self, key: Key) -> str:
        return os.path.join(self.dir, key[0], str(key[1]))

    def replay(self) -> Iterator[tuple[str, int, bytes]]:
        """Every record on disk, queue by queue, oldest first: (topic, queue id, record)."""
        try:
            topics = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return
        for topic in topics:
            tdir = os.path.join(self.dir, topic)
            if not os.path.isdir(tdir):
                continue
            for qname in sorted(os.listdir(tdir)):
                if not qname.isdigit():
                    continue
                key = (topic, int(qname))
                yield from self._replay_queue(key)

    def _replay_queue(self, key: Key) -> Iterator[tuple[str, int, bytes]]:
        qdir = self._queue_dir(key)
        names = sorted(n for n in os.listdir(qdir) if n.isdigit() and len(n) == _NAME_DIGITS)
        firsts: list[int] = []
        expected = -1
        for i, name in enumerate(names):
            path = os.path.join(qdir, name)
            with open(path, "rb") as fh:
                data = fh.read()
            pos = 0
            last = i == len(names) - 1
            while pos + 24 <= len(data):
                total, magic = _HEAD.unpack_from(data, pos)
                if magic != MESSAGE_MAGIC_CODE or total < MIN_RECORD or pos + total > len(data):
                    break
                (offset,) = _QUEUE_OFFSET.unpack_from(data, pos + 20)
                if expected >= 0 and offset != expected and pos > 0:
                    break  # not the next offset inside one segment: the rest is not trustworthy
                expected = offset + 1
                yield key[0], key[1], data[pos : pos + total]
                pos += total
            if pos < len(data):
                log.warning("%s: %d bytes after the last whole record cut off", path, len(data) - pos)
                with open(path, "r+b") as fh:
                    fh.truncate(pos)
            if pos == 0 and not last:
                os.unlink(path)
                continue
            firsts.append(int(name))
            if last:
                self._sizes[key] = pos
        if firsts:
            self._segments[key] = firsts

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

    def append(self, topic: str, queue_id: int, offset: int, record: bytes) -> None:
        with self._cond:
            self._pending.append(("append", (topic, queue_id), (offset, record)))
            self._pending_bytes += len(record)
            self.appended_seq += 1
            self._cond.notify()

    def trim(self, topic: str, queue_id: int, min_offset: int) -> None:
        """Delete the segments all of whose records are below ``min_offset``."""
        with self._cond:
            self._pending.append(("trim", (topic, queue_id), min_offset))
            self._cond.notify()

    def delete_topic(self, topic: str) -> None:
        with self._cond:
            self._pending.append(("delete", topic, None))
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
                upto = self.appended_seq  # every append in ``batch`` (and none after it)
            queued = sum(len(arg[1]) for op, _, arg in batch if op == "append")  # type: ignore[index, arg-type]
            try:
                self._apply(batch)
            except Exception as exc:  # a disk error must not kill the writer: count it, log it, go on
                self.write_errors += 1
                if self.last_error != str(exc):
                    log.error("message files: %s", exc)
                self.last_error = str(exc)
            finally:
                with self._cond:
                    self._pending_bytes -= queued  # written or failed: no longer waiting either way
            if upto != self.written_seq:
                self.written_seq = upto
                if self.on_written is not None:
                    self.on_written(upto)
            now = time.monotonic()
            if closing or now - last_flush >= self.flush_interval:
                self._fsync()
                last_flush = now
            if closing:
                with self._cond:
                    if self._pending:
                        continue
                for fd in self._open.values():
                    os.close(fd)
                self._open.clear()
                return

    def _apply(self, batch: list[tuple[str, object, object]]) -> int:
        """Carry out a batch in order (appends to one queue become one write); returns the bytes written."""
        done = 0
        chunk: list[bytes] = []
        chunk_key: Key | None = None
        chunk_bytes = 0
        for op, target, arg in batch:
            if op != "append" or target != chunk_key:
                if chunk:
                    done += self._write(chunk_key, chunk)  # type: ignore[arg-type]
                chunk, chunk_key, chunk_bytes = [], None, 0
            if op == "append":
                key: Key = target  # type: ignore[assignment]
                offset, record = arg  # type: ignore[misc]
                size = self._sizes.get(key, 0) + chunk_bytes
                if key not in self._segments or (size > 0 and size + len(record) > self.segment_bytes):
                    if chunk:
                        done += self._write(key, chunk)
                        chunk, chunk_bytes = [], 0
                    self._roll(key, offset)
                chunk_key = key
                chunk.append(record)
                chunk_bytes += len(record)
            elif op == "trim":
                self._trim(target, arg)  # type: ignore[arg-type]
            else:
                self._delete_topic(target)  # type: ignore[arg-type]
        if chunk:
            done += self._write(chunk_key, chunk)  # type: ignore[arg-type]
        return done

    def _fd(self, key: Key) -> int:
        fd = self._open.get(key)
        if fd is not None:
            self._open.move_to_end(key)
            return fd
        path = os.path.join(self._queue_dir(key), _segment_name(self._segments[key][-1]))
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._open[key] = fd
        while len(self._open) > MAX_OPEN_FILES:
            _, old = self._open.popitem(last=False)
            if old in self._dirty:
                os.fsync(old)
                self._dirty.discard(old)
            os.close(old)
        return fd

    def _roll(self, key: Key, first_offset: int) -> None:
        """Start a new segment for ``key`` whose first record has ``first_offset``."""
        old = self._open.pop(key, None)
        if old is not None:
            if old in self._dirty:
                os.fsync(old)
                self._dirty.discard(old)
            os.close(old)
        os.makedirs(self._queue_dir(key), exist_ok=True)
        firsts = self._segments.setdefault(key, [])
        if not firsts or firsts[-1] != first_offset:
            firsts.append(first_offset)
        self._sizes[key] = 0

    def _write(self, key: Key, chunk: list[bytes]) -> int:
        data = b"".join(chunk)
        fd = self._fd(key)
        _write_all(fd, data)
        self._dirty.add(fd)
        self._sizes[key] = self._sizes.get(key, 0) + len(data)
        self.written_bytes += len(data)
        return len(data)

    def _fsync(self) -> None:
        for fd in list(self._dirty):
            try:
                os.fsync(fd)
            except OSError as exc:
                self.write_errors += 1
                self.last_error = str(exc)
        self._dirty.clear()

    def _trim(self, key: Key, min_offset: int) -> None:
        firsts = self._segments.get(key)
        while firsts and len(firsts) > 1 and firsts[1] <= min_offset:
            path = os.path.join(self._queue_dir(key), _segment_name(firsts.pop(0)))
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def _delete_topic(self, topic: str) -> None:
        for key in [k for k in self._segments if k[0] == topic]:
            fd = self._open.pop(key, None)
            if fd is not None:
                self._dirty.discard(fd)
                os.close(fd)
            del self._segments[key]
            self._sizes.pop(key, None)
        shutil.rmtree(os.path.join(self.dir, topic), ignore_errors=True)

    def segment_count(self, topic: str, queue_id: int) -> int:
        """How many segments a queue has (for tests and runtime info)."""
        return len(self._segments.get((topic, queue_id), ()))


__all__ = ["MAX_PENDING_BYTES", "SEGMENT_BYTES", "QueueFiles", "messages_dir"]
