"""Give freed buffer memory back to the OS after a connection held a lot.

Why: glibc raises its mmap threshold after the first big free, so later
multi-megabyte answers and frames come from the heap, and their pages stay
in the process after they are freed (a pipelining client's answers left
862 MB resident after it closed). ``malloc_trim(0)`` returns free heap
pages. It walks the heap, so it runs from a periodic task, at most once a
second and only after a connection holding at least :data:`TRIM_AFTER_BYTES`
closed; on a libc without it this is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

#: A closed connection that held at least this much asks for a trim.
TRIM_AFTER_BYTES = 1024 * 1024


def _load_trim() -> Callable[[], None] | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        func = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_size_t]
    func.restype = ctypes.c_int
    return lambda: func(0)  # type: ignore[no-any-return]


_TRIM = _load_trim()


class Trimmer:
    """Remembers that big buffers were freed; :meth:`maybe_trim` returns the pages."""

    __slots__ = ("freed",)

    def __init__(self) -> None:
        self.freed = 0

    def note_freed(self, nbytes: int) -> None:
        if nbytes >= TRIM_AFTER_BYTES:
            self.freed += nbytes

    def maybe_trim(self) -> bool:
        """Trim if big buffers were freed since the last call; True when it trimmed."""
        if not self.freed:
            return False
        self.freed = 0
        if _TRIM is None:
            return False
        _TRIM()
        return True
