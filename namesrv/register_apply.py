"""Writing a large registration's topic changes into the route table, in slices, seen whole.

Part of :mod:`namesrv.registration`. A plan (:mod:`namesrv.register_plan`)
is complete and checked before anything is written. A plan of at most
APPLY_SLICE topic writes -- nearly every registration -- is written in the
registration's one synchronous commit, in place. A larger one cannot be:
inserting 200,000 new topics into the table's dict took 125-185 ms of CPU
here (hashing into a dict of hundreds of thousands of keys, cache misses, a
resize), and changing 200,000 topics' queue data in place about as long,
far past what a route query may wait.

So a large plan is written in slices of APPLY_SLICE topics, yielding
between them, and hidden until the commit: each topic written gets a new
queue-data map (the old one is never changed in place) and its old map is
kept in ``RouteTable.before``, which every reader consults first
(:meth:`RouteTable.queues`). Queries therefore see the table as it was
until the registration's synchronous commit, which only swaps ``before``
for an empty dict: the whole registration appears at once, as before.
Cached answers of the topics written are dropped as they are written (and
not cached again meanwhile), without bumping the table's generation: the
answers have not changed yet, so the route snapshot is not rewritten for
them; the commit bumps it once. The
old maps are freed afterwards, in slices too (freeing 200,000 small dicts
at once is another stall).

Nothing can fail once writing has begun, and the server's stop waits for
it and for the freeing after it (``RouteTable.must_finish``), so a stop never leaves
half a registration, nor answers "not applied" to one that was.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Protocol, TypeVar

from namesrv.register_plan import Steps, TopicPlan
from namesrv.route_model import QueueData

#: Topic writes between two yields of an apply (a few ms), and the most a
#: registration writes in place in its synchronous commit.
APPLY_SLICE = 2048

T = TypeVar("T")
QueueMap = dict[str, QueueData]


class ApplyTable(Protocol):
    """What an apply writes of the route table."""

    topic_queues: dict[str, QueueMap]
    before: dict[str, QueueMap | None]
    _mutations: int

    def _drop_cached_routes(self, topics: dict[str, object] | list[str]) -> None: ...


def topic_writes(plan: TopicPlan) -> int:
    return len(plan.added) + len(plan.sets) + len(plan.gone)


def _slices(items: Iterable[T]) -> Iterator[list[T]]:
    it = iter(items)
    while part := list(islice(it, APPLY_SLICE)):
        yield part


def apply_topics(table: ApplyTable, name: str, plan: TopicPlan) -> Steps[None]:
    """Write ``plan``'s topic changes for broker ``name`` behind ``table.before``, a slice at a time.

    The caller commits by emptying ``table.before`` (and then frees what it
    held in slices, :func:`namesrv.register_plan.drain`).
    """
    tq = table.topic_queues
    before = table.before
    for part in _slices(plan.added.items()):
        topics = [t for t, _ in part]
        for t in topics:
            if t not in before:
                before[t] = tq.get(t)  # None: the plan found none of them in the table
        tq.update(part)
        table._drop_cached_routes(topics)
        table._mutations += 1
        yield
    for sets in _slices(plan.sets.items()):
        for t, qd in sets:
            old = tq.get(t)
            if t not in before:
                before[t] = old
            new = dict(old) if old else {}
            new[name] = qd
            tq[t] = new
        table._drop_cached_routes([t for t, _ in sets])
        table._mutations += 1
        yield
    for gone in _slices(plan.gone):
        for t in gone:
            old = tq.get(t)
            if old is None or name not in old:
                continue
            if t not in before:
                before[t] = old
            if len(old) == 1:
                del tq[t]
            else:
                new = dict(old)
                del new[name]
                tq[t] = new
        table._drop_cached_routes(gone)
        table._mutations += 1
        yield
