"""The topic table on disk: ``${storePathRootDir}/config/topics.json``, as a Java broker keeps it.

A Java broker (TopicConfigManager) rewrites this file after every topic
change and reads it back on start, so a restarted broker registers the
topics it had. The stub does the same when ``storePathRootDir`` is set,
with the file in Java's shape (``topicConfigTable`` and ``dataVersion``),
written atomically and durably by :class:`TopicSaver`, off the event loop.
Messages stay in memory either way.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator

import trio

from namesrv.durable import remove_stale_temp_files, write_atomic
from remoting import fastjson
from remoting.bodies import DataVersion, TopicConfig
from server_runtime.regular_file import RefusedFile, read_regular_file

log = logging.getLogger("broker_stub")


#: Largest topics file read back: MAX_TOPICS (100,000) topics of up to ~600 bytes each as a Java
#: broker writes them (pretty-printed, long names, attributes), with room to spare.
TOPICS_FILE_MAX_BYTES = 128 * 1024 * 1024


class TopicStoreError(Exception):
    """The topics file exists but cannot be used; the text names the file and the problem."""


def topics_path(store_root: str) -> str:
    return os.path.join(os.path.expanduser(store_root), "config", "topics.json")


def load(path: str) -> tuple[list[TopicConfig], DataVersion | None]:
    """The saved topics and data version; nothing if the file does not exist yet."""
    remove_stale_temp_files(path)
    try:
        raw = read_regular_file(path, TOPICS_FILE_MAX_BYTES)
    except FileNotFoundError:
        return [], None
    except RefusedFile as exc:  # a FIFO, a device, a directory or too large: nothing was read
        raise TopicStoreError(f"{path} {exc}") from None
    except OSError as exc:
        raise TopicStoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not raw.strip():
        return [], None  # Java treats an empty file as no topics yet
    try:
        doc = fastjson.loads(raw)
        table = doc.get("topicConfigTable") or {}
        if not isinstance(table, dict):
            raise TypeError("topicConfigTable is not an object")
        topics = [TopicConfig.from_obj(name, obj) for name, obj in table.items()]
        version = DataVersion.from_obj(doc["dataVersion"]) if isinstance(doc.get("dataVersion"), dict) else None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # BodyError is a ValueError
        raise TopicStoreError(f"{path} is not a topics file: {exc}") from None
    return topics, version


#: Topics encoded per step when the writer encodes on the event loop (~0.2 ms each).
ENCODE_STEP = 256


def encode_pieces(topics: list[TopicConfig], version: DataVersion, step: int = ENCODE_STEP) -> Iterator[bytes]:
    """The file's bytes in pieces of at most ``step`` topics each: ``{"dataVersion":..,"topicConfigTable":{..}}``,
    compact and in table order (byte for byte what one ``dumps_fast`` of the whole document gives)."""
    yield b'{"dataVersion":' + fastjson.dumps_fast(version.to_obj()) + b',"topicConfigTable":{'
    first = True
    for i in range(0, len(topics), step):
        chunk = fastjson.dumps_fast({tc.topic_name: tc.to_obj() for tc in topics[i : i + step]})[1:-1]
        if chunk:
            yield chunk if first else b"," + chunk
            first = False
    yield b"}}"


def encode(topics: list[TopicConfig], version: DataVersion) -> bytes:
    return b"".join(encode_pieces(topics, version))


async def encode_on_loop(topics: list[TopicConfig], version: DataVersion) -> bytes:
    """:func:`encode` in steps that yield to the loop in between.

    Not in the writer thread: encoding holds the GIL in long C calls, which
    at 10,000 topics stalled the loop for tens of ms; in steps, no step
    holds it for more than a fraction of a ms and the thread only writes
    and fsyncs, which release the GIL.
    """
    parts = []
    for piece in encode_pieces(topics, version):
        parts.append(piece)
        await trio.lowlevel.checkpoint()
    return b"".join(parts)


class TopicSaver:
    """Keeps ``topics.json`` up to date without ever writing on the event loop.

    Why: a Java-shaped file is rewritten whole, with an fsync, after every
    change; at 3,000 topics that is milliseconds per change, and a broker
    that auto-creates a topic per send would spend its loop on disk writes.
    So the file is encoded in small steps on the loop (:func:`encode_on_loop`)
    and written and fsynced in a worker thread, one write at a time, and
    writes coalesce: changes made while a write is in flight are all carried
    by the next one.

    Order guarantee: every change gets a generation number; a caller that
    must not answer before its change is durable (UPDATE_AND_CREATE_TOPIC)
    awaits :meth:`durable` with it, and a write starts at once for it.
    Auto-created topics are answered at once, as Java answers them, and
    reach the disk with the next write: at most ``min_interval`` after the
    previous one ended (so a flood of new topics costs a whole-table write
    every ``min_interval``, not one per topic), or at the latest when the
    broker stops (:meth:`flush`).
    A failed write is logged, reported to its waiters, and retried after
    ``retry_seconds`` while changes are pending.
    """

    def __init__(
        self,
        path: str,
        snapshot: Callable[[], tuple[list[TopicConfig], DataVersion]],
        *,
        retry_seconds: float = 1.0,
        min_interval: float = 0.1,
    ) -> None:
        self.path = path
        self.snapshot = snapshot
        self.retry_seconds = retry_seconds
        self.min_interval = min_interval
        self.changed_gen = 0  # the latest change
        self.durable_gen = 0  # the latest change known to be on disk
        self.failed_gen = 0  # the latest change whose write failed (0: none since the last success)
        self.error: OSError | None = None
        self.writes = 0
        self._wake = trio.Event()
        self._done = trio.Event()  # set (and replaced) after every write attempt
        self._waiting = 0  # callers in durable(): their write must not wait for min_interval
        self._urgent = trio.Event()
        self._last_end = -float("inf")

    def changed(self) -> int:
        """Note a change (sync code, on the loop); returns its generation."""
        self.changed_gen += 1
        self._wake.set()
        return self.changed_gen

    async def durable(self, gen: int | None = None) -> None:
        """Wait until generation ``gen`` (default: every change so far) is on disk; OSError if its write failed."""
        gen = self.changed_gen if gen is None else gen
        self._waiting += 1
        self._urgent.set()
        try:
            while self.durable_gen < gen:
                if self.failed_gen >= gen and self.error is not None:
                    raise self.error
                await self._done.wait()
        finally:
            self._waiting -= 1

    async def run(self) -> None:
        """The writer task: one write in flight, each one carrying every change made before it starts."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            while self.durable_gen < self.changed_gen:
                self._urgent = trio.Event()
                if not self._waiting:  # only auto-created topics: let them gather a little
                    with trio.move_on_at(self._last_end + self.min_interval):
                        await self._urgent.wait()
                gen = self.changed_gen
                topics, version = self.snapshot()  # a consistent copy: later changes replace, never edit, configs
                data = await encode_on_loop(topics, version)
                try:
                    await trio.to_thread.run_sync(write_atomic, self.path, data)
                except OSError as exc:
                    self.error, self.failed_gen = exc, gen
                    log.error("cannot write %s: %s (retrying in %.1f s)", self.path, exc.strerror or exc, self.retry_seconds)
                    self._notify()
                    await trio.sleep(self.retry_seconds)
                    continue
                finally:
                    self._last_end = trio.current_time()
                self.writes += 1
                self.durable_gen, self.failed_gen, self.error = gen, 0, None
                self._notify()

    async def flush(self) -> None:
        """Wait for every change so far to be written (on an orderly stop)."""
        if self.durable_gen < self.changed_gen:
            self._wake.set()
            await self.durable()

    def _notify(self) -> None:
        self._done.set()
        self._done = trio.Event()
