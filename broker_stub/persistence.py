"""A broker's messages and consumer offsets on disk, when ``storePathRootDir`` is set.

Ties :mod:`broker_stub.queue_files` (messages, per queue, written by a
thread) and :mod:`broker_stub.offset_store` (consumerOffset.json) to the
in-memory store and the consumer table: read both back on start, then
keep writing. Without ``storePathRootDir``, or with ``persistMessages``
off, the broker stays memory-only and a ``kill -9`` loses its messages.

Every second the files are trimmed to what memory still holds; every
``flushConsumerOffsetInterval`` the offsets file is rewritten if an offset
moved (in a worker thread); an orderly stop writes both out before exit.
"""

from __future__ import annotations

import logging

import trio

from broker_stub import offset_store
from broker_stub.config import BrokerConfig
from broker_stub.consuming import Consuming
from broker_stub.queue_files import QueueFiles
from broker_stub.store import MessageStore
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
        self.restored_offsets = 0

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
                self.restored_messages += store.append_stored(topic, queue_id, record, journal=False)
            self.files.start()
            store.journal = self.files
        if self.restored_messages or self.restored_offsets:
            log.info("read back %d messages and %d consumer offsets from %s", self.restored_messages,
                     self.restored_offsets, self.config.storePathRootDir)

    @property
    def busy(self) -> bool:
        return self.files is not None and self.files.busy

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


__all__ = ["Persistence"]
