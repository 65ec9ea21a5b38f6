"""Memory and descriptor bounds of a remoting server, kept apart from the I/O.

Why a global budget at all: every connection may hold one partial frame of
up to ``frameMaxLength`` (16 MiB), so 200 slow senders are 3.2 GB without
one. The budget admits a partial frame only once its whole declared length
fits (a reservation, taken when its length prefix arrives), so every
admitted frame can complete and nothing deadlocks on half-filled buffers;
a connection whose frame does not fit stops being read until room frees
up, and its peer's kernel buffers (not our memory) absorb the rest.

Frames up to :data:`SMALL_FRAME` may use the whole budget, larger ones all
but :data:`SMALL_RESERVE`, so a flood of big frames cannot hold up the
small requests ordinary clients send when TCP splits them. A frame larger
than what big frames may take is still admitted when nothing else is held,
so a frame within ``frameMaxLength`` always gets through eventually.
"""

from __future__ import annotations

import resource

#: Default of ``serverTotalReadBufferBytes``: all partial frames together.
DEFAULT_TOTAL_READ_BUFFER = 64 * 1024 * 1024
#: Frames up to this size draw on the part of the budget big frames cannot.
SMALL_FRAME = 64 * 1024
#: Part of the budget only small frames may use (capped at an eighth of it).
SMALL_RESERVE = 8 * 1024 * 1024

#: Netty's WriteBufferWaterMark defaults, used when a water-mark key is 0 (Java's default).
NETTY_HIGH_WATER_MARK = 64 * 1024
NETTY_LOW_WATER_MARK = 32 * 1024

#: Descriptors kept for everything but client connections (listeners, the
#: selector, trio's wakeup pipe and worker threads, KV/config writes, logs,
#: a broker's own NameServer connections).
FD_RESERVE = 128
MAX_CONNECTIONS_CAP = 10000


def default_max_connections() -> int:
    """``serverMaxConnections`` sized from RLIMIT_NOFILE, so the limit is met before EMFILE."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return MAX_CONNECTIONS_CAP
    if soft == resource.RLIM_INFINITY or soft < 0:
        return MAX_CONNECTIONS_CAP
    return max(16, min(MAX_CONNECTIONS_CAP, soft - FD_RESERVE))


def water_marks(high: int, low: int) -> tuple[int, int]:
    """The (high, low) marks in force for config values where 0 means Netty's default."""
    if high < 0 or low < 0:
        raise ValueError("writeBufferHighWaterMark and writeBufferLowWaterMark must be >= 0")
    high = high or NETTY_HIGH_WATER_MARK
    low = low or min(NETTY_LOW_WATER_MARK, high)
    if low > high:
        raise ValueError(f"writeBufferLowWaterMark {low} is above writeBufferHighWaterMark {high}")
    return high, low


class ReadBudget:
    """Bytes held for partially received frames across all connections.

    Pure bookkeeping: each connection tells how much it holds and wants,
    and learns whether it may have it. ``used`` may exceed ``total`` by the
    bytes a connection had already read when it was refused (at most one
    read each, and reads shrink while the budget is tight).

    ``waiting`` counts the bytes held by refused connections. They are not
    progress: if only waiting connections hold the budget, the oldest of
    them is admitted anyway, or many refused first reads together would
    keep every big frame out for good (the budget would never free up).
    """

    __slots__ = ("big_limit", "total", "used", "waiting")

    def __init__(self, total: int = DEFAULT_TOTAL_READ_BUFFER) -> None:
        if total <= 0:
            raise ValueError("serverTotalReadBufferBytes must be positive")
        self.total = total
        self.big_limit = total - min(SMALL_RESERVE, total // 8)
        self.used = 0
        self.waiting = 0

    @property
    def tight(self) -> bool:
        """True when big frames can no longer be admitted (reads should be small)."""
        return self.used >= self.big_limit

    def resize(self, held: int, want: int, waiting: bool = False) -> bool:
        """Move a connection's charge from ``held`` to ``want``; False (nothing changed) if it
        does not fit. ``waiting``: the connection's ``held`` bytes are counted in :attr:`waiting`."""
        extra = want - held
        if extra <= 0:
            self.used += extra
            return True
        limit = self.total if want <= SMALL_FRAME else self.big_limit
        admitted_elsewhere = self.used - self.waiting - (0 if waiting else held)
        if self.used + extra <= limit or admitted_elsewhere <= 0:
            self.used += extra
            return True
        return False

    def overdraw(self, held: int, actual: int) -> int:
        """Charge bytes already read by a refused connection; returns its new charge."""
        if actual > held:
            self.used += actual - held
            return actual
        return held

    def release(self, held: int) -> None:
        self.used -= held
