"""A broker's messages and consumer offsets on disk, when ``storePathRootDir`` is set.

Ties :mod:`broker_stub.queue_files` (messages, per queue, written by a
thread) and :mod:`broker_stub.offset_store` (consumerOffset.json) to the
in-memory store and the consumer table: read both back on start, then
keep writing. Without ``storePathRootDir``, or with ``persistMessages``
off, the broker stays memory-only and a ``kill -9`` loses its messages.

Every second the files are trimmed to what memory still holds; every
``flushConsumerOffsetInterval`` the offsets file is rewritten if an offset
moved (in a worker thread); an orderly stop writes both out before exit.

A producer's answer waits until its message was handed to the OS
(:meth:`Persistence.hold_answer`): the writer thread reports how far it
has written (:class:`broker_stub.queue_files.BatchReport`), the records
become readable and the held answers go out then, so an acknowledged
message survives a ``kill -9`` as with Java's ASYNC_FLUSH (its put copies
into the page cache before answering). Other requests on the connection
are not held behind them (answers are matched by opaque).

When a write fails (a full disk, EIO, a read-only file system), the
answers still held are refused with Java's SERVICE_NOT_AVAILABLE and its
disk-full remark plus the error, the store forgets what was not written
(:meth:`MessageStore.roll_back`, so no offset is ever handed out twice),
and the broker refuses sends until a probe write succeeds (tried every
``PROBE_INTERVAL``); then it takes sends again. One log line when it
stops taking sends, one when it starts again.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Hashable

import trio

from broker_stub import offset_store
from broker_stub.config import BrokerConfig
from broker_stub.consuming import Consuming
from broker_stub.queue_files import BatchReport, QueueFiles
from broker_stub.runtime import disk_used_ratio
from broker_stub.segments import RECORD_OVERHEAD
from broker_stub.store import MessageStore, StoreFullError
from broker_stub.topic_store import TopicStoreError
from remoting.clip import clip
from remoting.codec import encode
from remoting.codes import FLAG_RESPONSE, ResponseCode, SerializeType
from remoting.command import RemotingCommand

log = logging.getLogger("broker_stub")

TRIM_INTERVAL = 1.0  # s
PROBE_INTERVAL = 1.0  # s between probe writes while the disk refuses writes

#: A producer's answer held until its message is written: (append number, connection, the success
#: answer, the request's opaque and serialization, for an error answer instead).
Held = tuple[int, Hashable, bytes, int, SerializeType]


class MessageFilesError(TopicStoreError):
    """The message files cannot be read back; one line at start (exit 1)."""


def load_offsets(config: BrokerConfig) -> dict[tuple[str, str, int], int]:
    """The saved consumer offsets (read before serving, so a bad file is a start-up error)."""
    return offset_store.load(offset_store.offsets_path(config.storePathRootDir)) if config.storePathRootDir else {}


def unwritable_remark(store_root: str, error: OSError) -> str:
    """SendMessageProcessor's SERVICE_NOT_AVAILABLE remark (with its disk-usage ratios, one partition
    here), then what actually failed."""
    ratio = disk_used_ratio(store_root)
    return (
        "service not available now. It may be caused by one of the following reasons: the broker's disk is full "
        f"[CL: {ratio:5.2f} CQ: {ratio:5.2f} INDEX: {ratio:5.2f}], messages are put to the slave, message store has "
        f"been shut down, etc. (the message files cannot be written: {error.strerror or error}; sends are refused "
        "until a write succeeds again)"
    )


class Persistence:
    def __init__(self, config: BrokerConfig, store: MessageStore, consuming: Consuming) -> None:
        self.config = config
        self.store = store
        self.consuming = consuming
        max_record = config.maxMessageSize + RECORD_OVERHEAD
        self.files = QueueFiles(config.storePathRootDir, max_record=max_record) if config.persistMessages else None
        self.offsets_file = offset_store.offsets_path(config.storePathRootDir)
        self._saved_version = -1
        self.restored_messages = 0
        self.skipped_messages = 0  # read back but too big for the byte budget (maxStoreBytes)
        self.restored_offsets = 0
        self._held: deque[Held] = deque()
        self._ok_through = 0  # every append up to this one is written (the writer's reports, on the loop)
        self._reports: deque[BatchReport] = deque()  # filled by the writer thread, drained on the loop
        self._write_to: Callable[[Hashable, bytes], bool] = lambda conn, data: False
        self._token: trio.lowlevel.TrioToken | None = None
        self._probing = False
        self._probe_key: tuple[str, int] | None = None
        self.write_failures = 0
        #: A topic whose records just became readable (the key index reads them then: touched at the put,
        #: they were not readable yet).
        self.on_readable: Callable[[str], None] = lambda topic: None

    @classmethod
    def open(
        cls, config: BrokerConfig, store: MessageStore, consuming: Consuming, offsets: dict[tuple[str, str, int], int]
    ) -> Persistence | None:
        """Read back what is on disk and start writing; None when the broker keeps nothing on disk."""
        if not config.storePathRootDir:
            return None
        p = cls(config, store, consuming)
        try:
            p.restore(offsets)
        except OSError as exc:
            raise MessageFilesError(f"cannot read back messages in {config.storePathRootDir}: {exc}") from None
        return p

    def restore(self, offsets: dict[tuple[str, str, int], int]) -> None:
        """Messages into the store (offsets continue), offsets into the consumer table; then start writing."""
        for (group, topic, queue_id), offset in offsets.items():
            self.consuming.set_offset(group, topic, queue_id, offset)
        self.restored_offsets = len(offsets)
        self._saved_version = self.consuming.offsets_changed
        if self.files is not None:
            store = self.store
            for topic, queue_id, record in self.files.replay():
                try:
                    self.restored_messages += store.append_stored(topic, queue_id, record, journal=False)
                except StoreFullError:  # a record bigger than maxStoreBytes allows now: left on disk only
                    self.skipped_messages += 1
            self.files.start()
            store.journal = self.files
        if self.skipped_messages:
            log.warning("%d messages read back do not fit in maxStoreBytes: not kept", self.skipped_messages)
        if self.restored_messages or self.restored_offsets:
            log.info("read back %d messages and %d consumer offsets from %s", self.restored_messages,
                     self.restored_offsets, self.config.storePathRootDir)

    @property
    def busy(self) -> bool:
        return self.files is not None and self.files.busy

    # ------------------------------------------------------------------
    # answers held until written

    def hold_answers(self, write_to: Callable[[Hashable, bytes], bool]) -> None:
        """Hold producers' answers until their messages are written (call from the event loop)."""
        if self.files is None:
            return
        self._write_to = write_to
        self._token = trio.lowlevel.current_trio_token()
        self.files.on_report = self._report_from_thread

    def hold_answer(self, conn: Hashable, answer: bytes, opaque: int, serialize_type: SerializeType) -> None:
        """Send ``answer`` once every message stored so far is written; if a write fails first, an
        error answer with this opaque instead."""
        files = self.files
        if files is None or files.appended_seq <= self._ok_through:
            self._write_to(conn, answer)
            return
        self._held.append((files.appended_seq, conn, answer, opaque, serialize_type))

    def _report_from_thread(self, report: BatchReport) -> None:
        self._reports.append(report)
        token = self._token
        if token is not None:
            try:
                token.run_sync_soon(self._drain)
            except trio.RunFinishedError:
                pass

    def _drain(self) -> None:
        """Apply the writer's reports, oldest first (on the loop, outside any task: nothing may escape)."""
        while self._reports:
            report = self._reports.popleft()
            try:
                self._apply(report)
            except Exception as exc:
                log.error("message files: a write report could not be applied: %s: %s", type(exc).__name__, clip(exc))

    def _apply(self, report: BatchReport) -> None:
        store = self.store
        woken = []
        for token, upto in report.written.items():
            key = store.confirm(token, upto)
            if key is not None:
                woken.append(key)
        if report.ok_through > self._ok_through:
            self._ok_through = report.ok_through
        held, write_to = self._held, self._write_to
        while held and held[0][0] <= self._ok_through:
            write_to(held[0][1], held.popleft()[2])
        if report.error is not None:
            self._failed(report)
        if report.probe is not None:
            self._probed(report.probe)
        for topic in {topic for topic, _ in woken}:
            self.on_readable(topic)
        consuming = self.consuming
        if consuming.waiting:
            for topic, queue_id in woken:  # now readable: answer the pulls waiting for them
                consuming.arrived(topic, queue_id)

    def _failed(self, report: BatchReport) -> None:
        """A write failed: refuse what is held, forget what is not written, refuse sends until a probe works."""
        assert self.files is not None and report.error is not None
        self.write_failures += 1
        store = self.store
        remark = unwritable_remark(self.config.storePathRootDir, report.error)
        first = store.unwritable is None
        store.unwritable = remark
        dropped = store.roll_back()
        self._ok_through = self.files.appended_seq  # settled: written, or refused now
        self.files.resume()
        held, write_to = self._held, self._write_to
        refused = len(held)
        while held:
            _, conn, _, opaque, serialize_type = held.popleft()
            write_to(conn, encode(RemotingCommand(ResponseCode.SERVICE_NOT_AVAILABLE, opaque=opaque, flag=FLAG_RESPONSE,
                                                  remark=remark, serialize_type=serialize_type)))
        self._probe_key = report.error_key
        if first:
            log.error("message files: a write failed (%s): %d messages not written were refused or taken back; "
                      "refusing sends until a write succeeds again", report.error.strerror or report.error,
                      max(refused, dropped))

    def _probed(self, result: str) -> None:
        self._probing = False
        if result == "" and self.store.unwritable is not None:
            self.store.unwritable = None
            log.warning("message files: writes succeed again: taking sends")

    # ------------------------------------------------------------------
    # periodic work

    async def run(self) -> None:
        """Trim files every second; probe the disk while it refuses writes; save offsets every
        flushConsumerOffsetInterval when they moved."""
        next_flush = trio.current_time() + self.config.flushConsumerOffsetInterval / 1000.0
        while True:
            await trio.sleep(min(TRIM_INTERVAL, PROBE_INTERVAL))
            self.trim()
            if self.files is not None and self.store.unwritable is not None and not self._probing:
                self._probing = True
                self.files.probe(self._probe_key)
            if trio.current_time() >= next_flush:
                next_flush = trio.current_time() + self.config.flushConsumerOffsetInterval / 1000.0
                await self.save_offsets()

    def trim(self) -> None:
        if self.files is None:
            return
        store = self.store
        for topic, queue_id in store.queue_keys():
            if self.files.segment_count(topic, queue_id) > 1:
                self.files.trim(topic, queue_id, store.min_offset(topic, queue_id))

    async def save_offsets(self) -> None:
        version = self.consuming.offsets_changed
        if version == self._saved_version:
            return
        snapshot = dict(self.consuming.offsets)
        try:
            await trio.to_thread.run_sync(offset_store.save, self.offsets_file, snapshot)
            self._saved_version = version
        except OSError as exc:
            log.error("cannot write %s: %s", self.offsets_file, exc)

    async def close(self) -> None:
        """An orderly stop: offsets saved, queued messages written and synced, their answers sent."""
        with trio.CancelScope(shield=True):
            await self.save_offsets()
            if self.files is not None:
                await trio.to_thread.run_sync(self.files.close)
            self._drain()


__all__ = ["Persistence", "unwritable_remark"]
