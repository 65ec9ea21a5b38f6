"""Planning a registration's topic changes without touching the route table.

Part of :mod:`namesrv.registration`: given a body cut into chunks
(:mod:`namesrv.register_scan`) and the record of what the broker's last
registration wrote (:class:`AppliedTable`), work out which topics' QueueData
maps change, as a generator that yields between slices of work. Reading
only, so the table may be queried (not changed) while a plan is suspended.
"""

from __future__ import annotations

from collections.abc import Generator
from sys import intern as intern_name
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from namesrv.register_scan import Chunk, Scan
from namesrv.route_model import QueueData
from remoting.bodies import BodyError, RegisterBody
from remoting.fastjson import BodyLimitError

T = TypeVar("T")
Steps = Generator[None, None, T]

#: Topics parsed and compared between two yields of a plan (a few ms of CPU
#: here); steps that only look things up go four times as many per yield.
PLAN_SLICE_TOPICS = 256


def run_to_end(steps: Steps[T]) -> T:
    """Drive a registration generator without yielding to anyone (tests, sync callers)."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


@dataclass(slots=True)
class ChunkRecord:
    """One chunk of a broker's last applied body."""

    topics: tuple[str, ...]
    items: int  # compact form: topic items in it (lets the next scan skip walking it)
    verified: bool  # right after the apply the table held exactly this chunk's values


@dataclass(slots=True)
class AppliedTable:
    """What the last topic apply of one broker name left in the table.

    Valid while ``epoch`` equals the table's epoch of that name (any other
    change to the name's queue data bumps it) and the perm mask is the
    same. ``deleted``: that apply removed every topic the body lacked, so
    the table held exactly the body's topics for the name. ``form`` None:
    the body came parsed, without chunks (only ``deleted`` is of use).
    """

    epoch: int
    mask: int
    deleted: bool
    form: str | None = None
    chunks: dict[int, ChunkRecord] = field(default_factory=dict)
    anchors: list[bytes] = field(default_factory=list)


@dataclass(slots=True)
class TopicPlan:
    """The topic changes of one registration, computed without touching the table."""

    topic_count: int
    added: dict[str, dict[str, QueueData]]  # topics new to the table, with their QueueData map
    sets: dict[str, QueueData]  # topics the table has whose QueueData of this broker becomes this
    gone: list[str]  # topics that lose this broker's QueueData (deleteTopicWithBrokerRegistration)
    applied: AppliedTable | None  # the record to keep (its epoch is set at commit)


class ChunkParseFailed(Exception):
    """A JSON chunk did not parse: the cut is doubtful, so the whole body is parsed instead."""


class TopicTableFull(BodyError):
    """A registration would take the route table past maxTopics: refused whole, nothing changes."""

    def __init__(self, held: int, new: int, limit: int, *, exact: bool) -> None:
        more = f"{new}" if exact else f"at least {new}"
        super().__init__(
            f"topic table full: the NameServer holds {held} topics and this registration would add {more}"
            f" new ones, past maxTopics ({limit}); nothing was changed"
        )


@dataclass(slots=True)
class Parsed:
    """A body that arrived parsed (the loader API): one chunk without a digest."""

    body: RegisterBody


class PlanTable(Protocol):
    """What a plan reads of the route table."""

    topic_queues: dict[str, dict[str, QueueData]]
    _chunk_names: dict[int, tuple[str, ...]]

    def _intern(self, qd: QueueData) -> QueueData: ...


def plan_topics(
    table: PlanTable,
    name: str,
    scanned: Scan | Parsed,
    *,
    changed: bool,
    mask: int,
    delete: bool,
    applied: AppliedTable | None,
    write: bool,
    max_total: int | None = None,
) -> Steps[TopicPlan]:
    """What applying this body's topics would change (5.x, section 6.3 d and e).

    A changed data version (or a first registration) writes every topic
    whose QueueData differs; an unchanged one writes only topics the
    broker has no QueueData for. ``applied`` (valid, or None) lets chunks
    already in the table be skipped; ``write`` False only counts topics.
    Chunks are parsed and compared one at a time and their parse
    dropped, so a large body leaves few objects behind for the GC.

    Every loop yields after PLAN_SLICE_TOPICS topics (or four times as many
    cheaper steps), whatever the chunks' sizes: a body parsed whole is one
    chunk of all its topics. ``max_total`` (maxTopics) bounds the table:
    a plan that would take it past the bound raises TopicTableFull, as soon
    as that is certain.
    """
    form = scanned.form if isinstance(scanned, Scan) else None
    known = applied.chunks if applied is not None and form is not None and applied.form == form else {}
    incremental = bool(known) and (not delete or (applied is not None and applied.deleted))
    skippable = known if (incremental or not write) else {}
    budget = 0
    light = 4 * PLAN_SLICE_TOPICS  # steps that only look things up

    # Chunks already in the table are skipped; what they held and no
    # longer do ("vanished") tells which topics may be gone.
    matched: dict[int, ChunkRecord] = {}
    todo: list[Chunk | None] = []
    if isinstance(scanned, Scan):
        for chunk in scanned.chunks:
            rec = skippable.get(chunk.digest)
            if rec is not None and (rec.verified or not write) and chunk.digest not in matched:
                matched[chunk.digest] = rec
            else:
                todo.append(chunk)
            budget += 1
            if budget >= light:
                budget = 0
                yield
    else:
        todo.append(None)
    vanished: set[str] = set()
    if incremental:
        for digest, rec in known.items():
            if digest not in matched:
                vanished.update(rec.topics)
                budget += len(rec.topics)
                if budget >= light:
                    budget = 0
                    yield

    tq = table.topic_queues
    intern = table._intern
    added: dict[str, dict[str, QueueData]] = {}
    sets: dict[str, QueueData] = {}
    seen: set[str] = set()
    records: list[tuple[int, int, tuple[str, ...], bool]] = []
    repeated = False
    budget = 0
    limit = scanned.max_topics if isinstance(scanned, Scan) else None
    already = sum(len(r.topics) for r in matched.values())
    for chunk in todo:
        if chunk is None:
            assert isinstance(scanned, Parsed)
            topics = scanned.body.topics
        else:
            assert isinstance(scanned, Scan)
            try:
                topics = scanned.parse_chunk(chunk)
            except BodyError:
                if scanned.form == "compact":
                    raise  # a bad item: a full parse would fail on it too
                raise ChunkParseFailed from None  # a JSON cut may be wrong: parse the body whole
            budget += len(topics) // 2  # parsing the chunk cost about half as much as planning it
        verified = True
        names: list[str] = []
        for t, (r, w, p, s) in topics.items():
            # One string object per topic name, whoever sent it: the table's key
            # and every broker's chunk record share it (else 32 brokers of a
            # cluster would keep 32 copies of each name alive).
            t = intern_name(t)
            names.append(t)
            if t in seen:
                repeated = True  # the same topic in two chunks: the later one wins
            seen.add(t)
            budget += 1
            if budget >= PLAN_SLICE_TOPICS:
                budget = 0
                if limit is not None and len(seen) + already > limit:  # refuse early: do not build a million topics first
                    raise BodyLimitError(f"register body has more than {limit} topics, the limit")
                _check_total(tq, added, max_total, delete)
                yield
            if not write:
                continue
            qmap = tq.get(t)
            cur = qmap.get(name) if qmap is not None else None
            if incremental and cur is not None and t not in vanished:
                # This broker's topic outside the chunks that went away: it may
                # also be in a skipped chunk (a repeated key). Plan it all instead.
                return (yield from plan_topics(
                    table, name, scanned, changed=changed, mask=mask, delete=delete, applied=None, write=write,
                    max_total=max_total))
            qd = intern((name, r, w, p & mask, s))
            if qmap is None:
                added[t] = {name: qd}
            elif cur is qd:
                sets.pop(t, None)  # (an earlier duplicate of this topic may have set it)
            elif changed or cur is None:
                sets[t] = qd
            else:
                verified = False  # same version: an existing value is left alone
                sets.pop(t, None)
        if chunk is not None:
            shared = table._chunk_names.get(chunk.digest)  # another broker sent the same bytes
            if shared is None or len(shared) != len(names):
                shared = table._chunk_names[chunk.digest] = tuple(names)
            records.append((chunk.digest, chunk.items, shared, verified))
        if limit is not None and len(seen) + already > limit:
            raise BodyLimitError(f"register body has more than {limit} topics, the limit")
    count = len(seen) + already
    if limit is not None and count > limit:
        raise BodyLimitError(f"register body has {count} topics, more than the limit of {limit}")
    if not write:
        return TopicPlan(count, {}, {}, [], None)

    # Topics the broker stopped reporting (deleteTopicWithBrokerRegistration).
    gone: list[str] = []
    emptied = 0  # topics gone that no other broker serves: they leave the table
    if delete:
        # Only the topics of chunks that went away, or (no record) every topic of the table.
        pairs = ((t, tq.get(t)) for t in vanished) if incremental else iter(tq.items())
        for t, qmap in pairs:
            if qmap is not None and name in qmap and t not in seen:
                gone.append(t)
                emptied += len(qmap) == 1
            budget += 1
            if budget >= light:
                budget = 0
                yield
    if max_total is not None and added and len(tq) - emptied + len(added) > max_total:
        raise TopicTableFull(len(tq), len(added) - emptied, max_total, exact=True)
    yield from drain(seen)  # 200,000 names freed at once are a stall of their own
    yield from drain(vanished)

    # The record for the next registration (no chunks if one topic sits in two).
    record = AppliedTable(0, mask, delete)
    if form is not None and not repeated:
        record.form = form
        record.anchors = scanned.anchors if isinstance(scanned, Scan) else []
        record.chunks.update(matched)
        for digest, items, names, verified in records:
            if digest not in record.chunks:  # the same bytes twice add nothing
                record.chunks[digest] = ChunkRecord(names, items, verified)
    return TopicPlan(count, added, sets, gone, record)


def drain(items: set[Any] | dict[Any, Any]) -> Steps[None]:
    """Empty a large set or dict a slice at a time: dropping one of 200,000 entries at once
    (the references of every entry) holds the loop for several ms."""
    pop = items.pop if isinstance(items, set) else items.popitem
    while items:
        for _ in range(min(len(items), 4 * PLAN_SLICE_TOPICS)):
            pop()
        yield


def _check_total(tq: dict[str, dict[str, QueueData]], added: dict[str, Any], max_total: int | None, delete: bool) -> None:
    """Refuse as soon as the new topics alone take the table past maxTopics (nothing can leave without delete)."""
    if max_total is not None and not delete and len(tq) + len(added) > max_total:
        raise TopicTableFull(len(tq), len(added), max_total, exact=False)
