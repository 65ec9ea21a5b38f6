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
has written and the held answers go out then, so an acknowledged message
survives a ``kill -9`` as with Java's ASYNC_FLUSH (its put copies into the
page cache before answering). The answers leave in batches, a fraction of
a millisecond later on an idle broker; other requests on the connection
are not held behind them (answers are matched by opaque).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Hashable

import trio

from broker_stub import offset_store
from broker_stub.config import BrokerConfig
from broker_stub.consuming import Consuming
from broker_stub.queue_files import QueueFiles
from broker_stub.store import MessageStore, StoreFullError
from broker_stub.topic_store import TopicStoreError

log = logging.getLogger("broker_stub")

TRIM_INTERVAL = 1.0  # s


class MessageFilesError(TopicStoreError):
    """The message files cannot be read back; one line at start (exit 1)."""


def load_offsets(config: BrokerConfig) -> dict[tuple[str, str, int], int]:
    """The saved consumer offsets (read before serving, so a bad file is a start-up error)."""
    return offset_store.load(offset_store.offsets_path(config.storePathRootDir)) if config.storePathRootDir else {}


class Persistence:
    def __init__(self, config: BrokerConfig, store: MessageStore, consuming: Consuming) -> None:
        self.config = config
        self.store = store
        self.consuming = consuming
        self.files = QueueFiles(config.storePathRootDir) if config.persistMessages else None
        self.offsets_file = offset_store.offsets_path(config.storePathRootDir)
        self._saved_version = -1
        self.restored_messages = 0
        self.skipped_messages = 0  # read back but too big for the byte budget (maxStoreBytes)
        self.restored_offsets = 0
        self._held: deque[tuple[int, Hashable, bytes]] = deque()  # (append seq, connection, answer)
        self._write_to: Callable[[Hashable, bytes], bool] = lambda conn, data: False
        self._token: trio.lowlevel.TrioToken | None = None

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

    def hold_answers(self, write_to: Callable[[Hashable, bytes], bool]) -> None:
        """Hold producers' answers until their messages are written (call from the event loop)."""
        if self.files is None:
            return
        self._write_to = write_to
        self._token = trio.lowlevel.current_trio_token()
        self.files.on_written = self._written_from_thread

    def hold_answer(self, conn: Hashable, answer: bytes) -> None:
        """Send ``answer`` once every message stored so far is in the OS."""
        files = self.files
        if files is None or files.written_seq >= files.appended_seq:
            self._write_to(conn, answer)
            return
        self._held.append((files.appended_seq, conn, answer))
        if files.written_seq >= files.appended_seq:  # written meanwhile (its report may have found nothing held)
            self._release(files.written_seq)

    def _written_from_thread(self, seq: int) -> None:
        token = self._token
        if token is not None:  # always: an answer may be held right after this batch was written
            try:
                token.run_sync_soon(self._release, seq)
            except trio.RunFinishedError:
                pass

    def _release(self, seq: int) -> None:
        held = self._held
        write_to = self._write_to
        while held and held[0][0] <= seq:
            _, conn, answer = held.popleft()
            write_to(conn, answer)

    async def run(self) -> None:
        """Trim files every second; save offsets every flushConsumerOffsetInterval when they moved."""
        next_flush = trio.current_time() + self.config.flushConsumerOffsetInterval / 1000.0
        while True:
            await trio.sleep(TRIM_INTERVAL)
            self.trim()
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
        """An orderly stop: offsets saved, queued messages written and synced."""
        with trio.CancelScope(shield=True):
            await self.save_offsets()
            if self.files is not None:
                await trio.to_thread.run_sync(self.files.close)
            self._release(self.files.written_seq if self.files is not None else 0)


__all__ = ["Persistence"]
