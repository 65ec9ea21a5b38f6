"""POP consumption's state on disk: ``config/popInFlight.json`` under ``storePathRootDir``.

What a restart must not lose is which popped messages are still invisible
(so an unacked one still comes again) and how far each group has popped in
each queue (so nothing is handed out twice or skipped). Both are in one
file, one consistent snapshot: the in-flight entries
(:mod:`broker_stub.pop_inflight`) and the POP positions, written atomically
and durably (:func:`namesrv.durable.write_atomic`) by a worker thread
whenever they changed. Read back on start, the file's positions override
those of ``consumerOffset.json``, which is written on its own schedule and
may be ahead of them.

Nothing is acknowledged before it is stored: a POP, ACK or change answer
waits (:meth:`PopState.hold_answer`) until a snapshot holding its change is
on disk. Changes made while a snapshot is being written go into the next
one, so answers wait at most about two writes. A write that fails answers
what it held with SYSTEM_ERROR (the change stays in memory; a popped
message not handed out comes again when its invisible time is up) and the
next change tries again. The file is bounded by ``maxPopInFlight`` entries
(about 80 bytes each) and one position per (group, queue) POP has read.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

import orjson
import trio

from broker_stub.consuming import Consuming
from broker_stub.pop import PopService
from broker_stub.timers import Timers
from namesrv.durable import remove_stale_temp_files, write_atomic
from remoting.codec import encode
from remoting.codes import FLAG_RESPONSE, ResponseCode
from remoting.command import RemotingCommand
from server_runtime.regular_file import RefusedFile, read_regular_file

log = logging.getLogger("broker_stub")


def now_ms() -> int:
    return int(time.time() * 1000)

STATE_FILE_MAX_BYTES = 64 * 1024 * 1024  # far beyond maxPopInFlight's largest snapshot


class PopStateError(Exception):
    """The state file exists but cannot be read back; one line at start."""


def state_path(store_root: str) -> str:
    return os.path.join(os.path.expanduser(store_root), "config", "popInFlight.json")


def read(path: str) -> dict[str, Any]:
    """The state file's document ({} when there is none); PopStateError if it cannot be used."""
    remove_stale_temp_files(path)
    try:
        raw = read_regular_file(path, STATE_FILE_MAX_BYTES)
    except FileNotFoundError:
        return {}
    except (RefusedFile, OSError) as exc:
        raise PopStateError(f"cannot read {path}: {exc}") from None
    try:
        doc = orjson.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise PopStateError(f"{path} is not a POP state file: {exc}") from None
    if not isinstance(doc, dict):
        raise PopStateError(f"{path} is not a POP state file: not a JSON object")
    return doc


class PopState:
    def __init__(self, path: str, pop: PopService, consuming: Consuming, timers: Timers) -> None:
        self.path = path
        self.pop = pop
        self.consuming = consuming
        self.timers = timers
        self._held: deque[tuple[int, Hashable, bytes, int]] = deque()  # (change number, conn, answer, opaque)
        self._written = self._changes()  # every change up to this one is on disk
        self._wake = trio.Event()
        self._write_to: Callable[[Hashable, bytes], bool] = lambda conn, data: False

    def _changes(self) -> int:
        return self.pop.changes + self.timers.changes

    def restore(self, doc: dict[str, Any]) -> None:
        """What :func:`read` found, into the POP service and the offsets (before serving)."""
        if not doc:
            self.timers.restore([], now_ms())
            return
        try:
            entries = self.pop.inflight.restore(doc.get("inflight") or [])
            positions = doc.get("positions") or []
            for group, topic, queue_id, offset in positions:
                if not (isinstance(group, str) and isinstance(topic, str) and isinstance(queue_id, int)
                        and isinstance(offset, int)):
                    raise ValueError(f"bad position {[group, topic, queue_id, offset]!r:.80}")
                self.consuming.set_offset(group, topic, queue_id, offset)
                self.pop.cursor_keys.add((group, topic, queue_id))
            pending = self.timers.restore(doc.get("timersDelivered") or [], now_ms())
        except (ValueError, TypeError, AttributeError) as exc:  # orjson.JSONDecodeError is a ValueError
            raise PopStateError(f"{self.path} is not a POP state file: {exc}") from None
        self._written = self._changes()
        if pending:
            log.info("%d timer messages wait for their time", pending)
        log.info("read back %d in-flight POP messages and %d POP positions from %s", entries, len(positions), self.path)

    def hold_answer(self, conn: Hashable, answer: bytes, opaque: int) -> None:
        """Send ``answer`` once every change made so far is on disk."""
        changes = self._changes()
        if changes <= self._written:
            self._write_to(conn, answer)
            return
        self._held.append((changes, conn, answer, opaque))
        self._wake.set()

    def _snapshot(self) -> tuple[int, bytes]:
        offsets = self.consuming.offsets
        positions = [[g, t, q, offsets[(g, t, q)]] for (g, t, q) in self.pop.cursor_keys if (g, t, q) in offsets]
        return self._changes(), orjson.dumps({"inflight": self.pop.inflight.snapshot(), "positions": positions,
                                              "timersDelivered": self.timers.snapshot()})

    async def run(self, write_to: Callable[[Hashable, bytes], bool]) -> None:
        """Write a snapshot whenever answers wait for one (and after revives moved the table)."""
        self._write_to = write_to
        while True:
            if not self._held and self._changes() == self._written:
                self._wake = trio.Event()
                with trio.move_on_after(1.0):  # revives change the table without an answer waiting
                    await self._wake.wait()
                continue
            await self.flush()

    async def flush(self) -> None:
        changes, data = self._snapshot()
        try:
            await trio.to_thread.run_sync(write_atomic, self.path, data)
        except OSError as exc:
            log.error("cannot write %s: %s", self.path, exc.strerror or exc)
            self._refuse_held(changes, f"the POP state is not on disk: {exc.strerror or exc}")
            self._written = changes
            return
        self._written = changes
        held = self._held
        while held and held[0][0] <= changes:
            _, conn, answer, _ = held.popleft()
            self._write_to(conn, answer)

    def _refuse_held(self, changes: int, remark: str) -> None:
        held = self._held
        while held and held[0][0] <= changes:
            _, conn, _, opaque = held.popleft()
            self._write_to(conn, encode(RemotingCommand(ResponseCode.SYSTEM_ERROR, opaque=opaque, flag=FLAG_RESPONSE,
                                                        remark=remark)))
