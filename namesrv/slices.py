"""Work in slices: how the route table does a long job without holding the event loop.

A long table operation (a registration planned and committed, a large set
freed) is a generator that yields between slices of a few milliseconds and
changes the table only where its docstring says. Whoever drives it decides
what runs between the slices: the request handler awaits a trio checkpoint
(:func:`namesrv.register_requests.run_in_slices`), a test or a synchronous
caller runs it to its end (:func:`run_to_end`). Nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

T = TypeVar("T")
#: A sliced operation: it yields None between slices and returns its result.
Steps = Generator[None, None, T]

#: Entries dropped between two yields of :func:`drain` (about a millisecond).
DRAIN_SLICE = 1024


def run_to_end(steps: Steps[T]) -> T:
    """Drive a sliced operation without yielding to anyone (tests, sync callers)."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def drain(items: set[Any] | dict[Any, Any]) -> Steps[None]:
    """Empty a large set or dict a slice at a time: dropping one of 200,000 entries at once
    (the references of every entry) holds the loop for several ms."""
    pop = items.pop if isinstance(items, set) else items.popitem
    while items:
        for _ in range(min(len(items), DRAIN_SLICE)):
            pop()
        yield
