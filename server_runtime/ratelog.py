"""Log lines a hostile peer cannot amplify.

Two rules, both because one client can otherwise fill the disk: a value
that came off the wire is cut to :data:`remoting.clip.CLIP_BYTES` before it is logged
(an 8 MiB garbage header field must not become an 8 MB log line), and a
warning that can repeat once per connection or per frame is logged once
per interval per kind, the rest counted into one summary line
("refused 431 connections at the limit in the last 10 s").

Nothing here owns a timer: :meth:`RateLimitedLog.flush` emits the summaries
that are due, and whoever owns a periodic task (the reactor's idle sweep)
calls it; a new occurrence after the interval also flushes its own kind.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from remoting.clip import CLIP_BYTES, clip

#: Default interval of the rate-limited warnings, seconds.
INTERVAL_SECONDS = 10.0


class ClipArgs(logging.Filter):
    """Cuts every text (or container) argument of a log record to :data:`CLIP_BYTES`.

    A safety net for log calls that pass a client's value straight through
    (a topic, a config key): attached to a server's logger, no such value
    can make a line longer than the format plus a few hundred bytes. Only
    ``%s``-style arguments of those types are touched, so numeric formats
    keep working.
    """

    _CLIPPED = (str, bytes, bytearray, list, tuple, dict, set, frozenset)

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and args:
            if any(isinstance(a, self._CLIPPED) and _long(a) for a in args):
                record.args = tuple(clip(a) if isinstance(a, self._CLIPPED) and _long(a) else a for a in args)
        return True


def _long(value: object) -> bool:
    if isinstance(value, (str, bytes, bytearray)):
        return len(value) > CLIP_BYTES
    return len(str(value)) > CLIP_BYTES


#: One shared instance: ``Logger.addFilter`` ignores a filter already attached.
CLIP_ARGS = ClipArgs()


class _Kind:
    __slots__ = ("count", "summary", "window_start")

    def __init__(self, summary: str, now: float) -> None:
        self.summary = summary
        self.count = 0
        self.window_start = now


class RateLimitedLog:
    """One line per kind per interval, then a count.

    ``summary`` is a format with ``{count}`` and ``{seconds}`` fields, e.g.
    ``"refused {count} connections at the limit in the last {seconds} s"``.
    The number of kinds is fixed by the code that calls it (kinds are
    literals, never client data), so the table is bounded.
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval: float = INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self._kinds: dict[str, _Kind] = {}

    def warning(self, kind: str, summary: str, msg: str, *args: object, level: int = logging.WARNING) -> None:
        """Log ``msg % args`` now if ``kind`` was quiet for an interval, else count it."""
        now = self.clock()
        entry = self._kinds.get(kind)
        if entry is not None and now - entry.window_start < self.interval:
            entry.count += 1
            return
        if entry is not None:
            self._emit(entry, now)
        else:
            entry = self._kinds[kind] = _Kind(summary, now)
        entry.summary = summary
        entry.window_start = now
        self.logger.log(level, msg, *args)

    def flush(self) -> None:
        """Emit the summary of every kind whose interval is over (call about once a second)."""
        now = self.clock()
        for kind, entry in list(self._kinds.items()):
            if now - entry.window_start >= self.interval:
                self._emit(entry, now)
                del self._kinds[kind]

    def _emit(self, entry: _Kind, now: float) -> None:
        if entry.count:
            seconds = max(1, round(now - entry.window_start))
            self.logger.warning(entry.summary.format(count=entry.count, seconds=seconds))
        entry.count = 0
