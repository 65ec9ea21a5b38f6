"""The route snapshot: the file behind a warm restart, and the task that keeps it current.

A RocketMQ NameServer keeps routes in memory only, so after a restart it
answers "no route" until every broker registers again (up to one
``registerNameServerPeriod``, 30 s by default). Ours writes the routing
state (see :mod:`namesrv.route_state`) to ``routeSnapshotPath`` and reads it
back before it listens, so it answers routes at once.

File format (version 1): a fixed header, then one msgpack map::

    "RMQROUTE"   8 bytes, magic
    version      uint16, FORMAT_VERSION
    flags        uint16, 0
    stateMillis  uint64, wall-clock time the state was captured
    length       uint64, bytes of msgpack that follow
    crc32        uint32, of those bytes

A file that is truncated, corrupt (CRC), of another format version, larger
than ``MAX_SNAPSHOT_BYTES`` or older than ``routeSnapshotMaxAgeMillis`` is
ignored with one log line; it is never fatal. So is a path that is not a
regular file (a FIFO, a device, a directory): it is opened without blocking
and its kind and size are checked before a byte is read
(:mod:`server_runtime.regular_file`).

How old is a snapshot? The state is rewritten only when it changes, so its
capture time can be long past while it is still exactly what the server
holds. While nothing changes the writer refreshes the file's mtime once per
interval instead (a metadata update, no rewrite), and the age is counted
from the later of the two. A crash loses at most that refresh: the file then
looks older than it is, which errs towards ignoring it.

Writes are atomic and durable (:func:`namesrv.durable.write_atomic`), so a
``kill -9`` at any instant leaves the previous snapshot or the new one.
"""

from __future__ import annotations

import logging
import os
import struct
import time
import zlib
from collections.abc import Callable
from typing import Any

import msgpack
import trio

from namesrv import route_state
from namesrv.config import NamesrvConfig
from namesrv.durable import remove_stale_temp_files, write_atomic
from namesrv.route_state import Restored
from namesrv.routes import RouteTable
from server_runtime.regular_file import RefusedFile, read_regular_file_stat

log = logging.getLogger("namesrv")

MAGIC = b"RMQROUTE"
FORMAT_VERSION = 1
_HEADER = struct.Struct(">8sHHQQI")
#: Largest snapshot read back (a 100,000-topic table writes about 2 MB).
MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024
#: A capture step holding the loop longer than this is logged (once per new maximum).
SLOW_CAPTURE_MS = 50.0


class SnapshotError(Exception):
    """A snapshot file that cannot be used; the text says why in a few words."""


def encode(state: dict[str, Any], state_millis: int) -> bytes:
    payload = msgpack.packb(state, use_bin_type=True)
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, state_millis, len(payload), zlib.crc32(payload))
    return header + payload


def decode(data: bytes) -> tuple[int, dict[str, Any]]:
    """(stateMillis, state) of a snapshot's bytes; SnapshotError if they are not a usable one."""
    if len(data) < _HEADER.size:
        raise SnapshotError(f"truncated ({len(data)} bytes, no complete header)")
    magic, version, _flags, state_millis, length, crc = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SnapshotError("not a route snapshot (bad magic)")
    if version != FORMAT_VERSION:
        raise SnapshotError(f"format version {version}, this NameServer reads version {FORMAT_VERSION}")
    payload = memoryview(data)[_HEADER.size:]
    if len(payload) != length:
        raise SnapshotError(f"truncated ({len(payload)} of {length} payload bytes)")
    if zlib.crc32(payload) != crc:
        raise SnapshotError("corrupt (CRC32 mismatch)")
    try:
        state = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise SnapshotError(f"corrupt (msgpack: {exc})") from None
    if not isinstance(state, dict):
        raise SnapshotError("corrupt (payload is not a map)")
    return state_millis, state


def read(path: str) -> tuple[int, float, dict[str, Any]] | None:
    """(stateMillis, mtime in ms, state), or None when there is no file."""
    try:
        data, info = read_regular_file_stat(path, MAX_SNAPSHOT_BYTES)
    except FileNotFoundError:
        return None
    except RefusedFile as exc:  # a FIFO, a device, a directory, or too large: nothing was read
        raise SnapshotError(str(exc)) from None
    except OSError as exc:
        raise SnapshotError(f"cannot read it: {exc.strerror or exc}") from None
    mtime_ms = info.st_mtime * 1000.0
    state_millis, state = decode(data)
    return state_millis, mtime_ms, state


def _stamp(ms: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000.0)) + f".{int(ms) % 1000:03d}"


class RouteSnapshots:
    """Restore on start, then write the table at most once per interval when it changed.

    ``wall`` is seconds since the epoch (snapshot ages); ``now_ms`` is the
    table's monotonic clock (restored liveness).
    """

    def __init__(
        self,
        table: RouteTable,
        config: NamesrvConfig,
        *,
        now_ms: Callable[[], float],
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.table = table
        self.config = config
        self.now_ms = now_ms
        self.wall = wall
        self.restored: Restored | None = None
        self._lock = trio.Lock()
        self._written: tuple[int, list[route_state.LiveRecord]] | None = None  # what the file holds
        #: The last capture that saw no change while it ran, and the table's generation then: its
        #: topics are reused while the generation stays (see route_state.Capture's ``topics_of``).
        self._topics_of: tuple[int, route_state.Captured] | None = None
        self._failing = False
        self.slowest_capture_ms = 0.0
        self.writes = 0
        self.failed_writes = 0
        #: Wall time (s) the file was last brought up to date (written, or its mtime refreshed), and its size.
        self.current_at: float | None = None
        self.size = 0

    @property
    def path(self) -> str:
        return self.config.routeSnapshotPath

    # ------------------------------------------------------------------
    # restore

    def restore(self) -> Restored | None:
        """Load the snapshot into the (empty) table, before the server listens; logs one line."""
        if not self.config.warmRestartEnable:
            log.info("warm restart disabled (warmRestartEnable=false): starting with no routes")
            return None
        path = self.path
        remove_stale_temp_files(path)
        began = time.perf_counter()
        try:
            found = read(path)
            if found is None:
                log.info("no route snapshot at %s: starting with no routes", path)
                return None
            state_millis, mtime_ms, state = found
            age_ms = self.wall() * 1000.0 - max(state_millis, mtime_ms)
            limit = self.config.routeSnapshotMaxAgeMillis
            if age_ms > limit:
                raise SnapshotError(f"state of {_stamp(state_millis)} is {age_ms / 1000:.1f} s old "
                                    f"(routeSnapshotMaxAgeMillis {limit})")
            restored = route_state.restore(self.table, state, self.now_ms(), int(self.wall() * 1000))
        except (SnapshotError, route_state.StateError) as exc:
            log.warning("route snapshot %s ignored: %s; starting with no routes", path, exc)
            return None
        took = (time.perf_counter() - began) * 1000.0
        log.info(
            "restored %d brokers and %d topics from route snapshot %s (state of %s, %.1f s old) in %.0f ms; "
            "they are provisional until they register again",
            restored.brokers, restored.topics, path, _stamp(state_millis), max(age_ms, 0.0) / 1000.0, took,
        )
        self.restored = restored
        self.current_at = max(state_millis, mtime_ms) / 1000.0
        # the file holds exactly this state: no rewrite until something changes
        self._written = (self.table.generation, route_state.live_records(self.table, restored))
        return restored

    # ------------------------------------------------------------------
    # writing

    async def run(self) -> None:
        """Every routeSnapshotIntervalMillis: write if the table changed, else refresh the file's mtime."""
        while True:
            await trio.sleep(self.config.routeSnapshotIntervalMillis / 1000.0)
            if self.config.warmRestartEnable:
                await self.write_if_changed()

    async def write_if_changed(self) -> bool:
        """Write the table if it differs from the file; True if a write happened."""
        async with self._lock:
            table = self.table
            generation, live = table.generation, route_state.live_records(table, self.restored)
            if self._written is not None and self._written[0] == generation and self._written[1] == live:
                await trio.to_thread.run_sync(self._touch)
                return False
            captured = await self._capture(generation)
            state_millis = int(self.wall() * 1000)
            try:
                # abandon_on_cancel: a stop past its time limit leaves the thread to finish or die
                # with the process (the write is atomic: the file is the old one or the new one).
                await trio.to_thread.run_sync(self._write, captured, state_millis, abandon_on_cancel=True)
            except Exception as exc:  # noqa: BLE001 - a disk error, or a value msgpack cannot hold (an int past 64 bits)
                self.failed_writes += 1
                if not self._failing:
                    log.error("cannot write route snapshot %s: %s: %s (retrying every interval)",
                              self.path, type(exc).__name__, exc)
                self._failing = True
                return False
            if self._failing:
                log.info("route snapshot %s written again", self.path)
                self._failing = False
            self._written = (generation, live)
            self.writes += 1
            return True

    async def write_final(self) -> None:
        """The graceful stop's write: the table as it is now (or only a fresh mtime)."""
        if self.config.warmRestartEnable:
            await self.write_if_changed()

    async def _capture(self, generation: int) -> route_state.Captured:
        """Copy the table on the loop in steps, yielding between them (no encoding here).

        The topics are read again only when the table's ``generation`` moved since the last
        capture: under steady re-registrations (new data versions, the same topics) only the
        live entries change, and reading 40,000 topics again took 12 % of the server's CPU
        (py-spy, 32 brokers re-registering each second under 64 connections of route queries).
        """
        reuse = self._topics_of
        topics_of = reuse[1] if reuse is not None and reuse[0] == generation else None
        if topics_of is None:
            self._topics_of = None  # stale: its topics (departed brokers' among them) go now, not after this capture
        capture = route_state.Capture(self.table, restored=self.restored, topics_of=topics_of)
        while True:
            began = time.perf_counter()
            more = capture.step()
            took = (time.perf_counter() - began) * 1000.0
            if took > max(SLOW_CAPTURE_MS, self.slowest_capture_ms):
                log.warning("a route snapshot capture step held the loop %.0f ms", took)
            self.slowest_capture_ms = max(self.slowest_capture_ms, took)
            if not more:
                captured = capture.finish()
                if self.table.generation == generation:  # nothing changed while it was read
                    self._topics_of = (generation, captured)
                return captured
            await trio.sleep(0)

    def _write(self, captured: route_state.Captured, state_millis: int) -> None:
        data = encode(route_state.export(captured), state_millis)
        write_atomic(self.path, data)
        self.size = len(data)
        self.current_at = self.wall()

    def _touch(self) -> None:
        try:
            os.utime(self.path)
            self.current_at = self.wall()
        except OSError:
            self._written = None  # the file is gone or unwritable: write it in full next time
