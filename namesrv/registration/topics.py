"""Planning a registration's topic changes without changing the route table.

Given a body cut into chunks (:mod:`namesrv.registration.scan`) and the
record of what the broker's last registration wrote (:class:`AppliedTable`),
work out which topics' QueueData maps change, as a generator that yields
between slices of work. It changes no route, so the table may be queried
(not changed) while a plan is suspended; the table writes the plan in
:meth:`namesrv.routes.RouteTable.commit`.

Why chunks: a broker re-sends its whole topic table on every registration,
and a new data version makes 5.3.3 re-apply every topic of it. Applying that
literally is O(topics) per registration (10,000 topics: ~13 ms of loop
time, 32 registrations/s fill a core). The table remembers, per broker
name, the digests of the chunks its last apply wrote; while nothing else
has touched that broker's queue data since (its epoch is unchanged), a
chunk with a known digest is known to be in the table already, value for
value, so it is skipped: only chunks that differ are parsed, compared and
planned. Topics a broker stops reporting (``deleteTopicWithBrokerRegistration``)
are found from the chunks that disappeared. The outcome is the same as
applying the whole body, which the unit tests check against a full apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from sys import intern as intern_name
from typing import Any, Protocol

from namesrv.registration.scan import Chunk, Scan
from namesrv.route_model import QueueData, TopicTableFull
from namesrv.slices import Steps, drain
from remoting.bodies import BodyError
from remoting.fastjson import BodyLimitError
from remoting.register_body import RegisterBody

#: Topics parsed and compared between two yields of a plan (a few ms of CPU
#: here); steps that only look things up go four times as many per yield.
PLAN_SLICE_TOPICS = 256
#: Steps that only look things up, between two yields.
LIGHT_STEPS = 4 * PLAN_SLICE_TOPICS


@dataclass(slots=True)
class ChunkRecord:
    """One chunk of a broker's last applied body."""

    topics: tuple[str, ...]
    items: int  # compact form: topic items in it (lets the next scan skip walking it)
    verified: bool  # right after the apply the table held exactly this chunk's values


@dataclass(slots=True, frozen=True)
class ChunkContent:
    """A chunk's topics as parsed once, shared by every broker that sends the same bytes.

    The brokers of a cluster usually serve the same topics with the same
    settings, so their bodies hold byte-identical chunks: a broker joining a
    cluster of 10,000 topics finds every chunk here and parses none of them
    (such a broker's first registration: 87-111 -> 52-56 ms, p50 of 24 in
    bench/namesrv_vs_java.py, BENCHMARKS.md).
    """

    form: str  # "json" or "compact"
    version: int  # compact chunks parse by the body's version
    names: tuple[str, ...]  # interned
    values: tuple[tuple[int, int, int, int], ...]  # (read, write, perm, sysflag) per name

    def fits(self, scanned: Scan, chunk: Chunk) -> bool:
        """A digest names bytes, and the same bytes in another form or body version parse differently."""
        return self.form == scanned.form and self.version == scanned.version and (
            scanned.form == "json" or len(self.names) == chunk.items)


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

    @property
    def writes(self) -> int:
        """Topic writes the commit makes (more than APPLY_SLICE: written in slices)."""
        return len(self.added) + len(self.sets) + len(self.gone)


class ChunkParseFailed(Exception):
    """A JSON chunk did not parse: the cut is doubtful, so the whole body is parsed instead."""


@dataclass(slots=True)
class Parsed:
    """A body that arrived parsed (the loader API): one chunk without a digest."""

    body: RegisterBody


class TopicReads(Protocol):
    """What a topic plan reads of the route table (:class:`namesrv.routes.RouteTable`).

    The methods share immutable values the table keeps (one tuple per
    distinct QueueData, one content per chunk digest); none changes a route.
    """

    @property
    def topic_queues(self) -> dict[str, dict[str, QueueData]]: ...

    def interned(self, qd: QueueData) -> QueueData: ...

    def known_chunk(self, digest: int) -> ChunkContent | None: ...

    def shared_chunk(self, digest: int, content: ChunkContent) -> ChunkContent: ...


@dataclass(slots=True)
class _Compared:
    """The topics of the chunks that had to be read, compared with the table."""

    added: dict[str, dict[str, QueueData]]
    sets: dict[str, QueueData]
    seen: set[str]
    records: list[tuple[int, int, tuple[str, ...], bool]]  # (digest, items, topic names, verified) per chunk
    repeated: bool  # one topic in two chunks: the later one wins, and no chunk record is kept
    budget: int  # steps since the last yield


def plan_topics(
    table: TopicReads,
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
    matched, todo = yield from _skip_known(scanned, skippable, write)
    vanished: set[str] = set()
    if incremental:
        yield from _vanished(known, matched, vanished)
    already = sum(len(r.topics) for r in matched.values())
    compared = yield from _compare(
        table, name, scanned, todo, vanished if incremental else None,
        changed=changed, mask=mask, write=write, already=already, delete=delete, max_total=max_total)
    if compared is None:
        # This broker's topic outside the chunks that went away: it may also be
        # in a skipped chunk (a repeated key). Plan it all instead.
        return (yield from plan_topics(
            table, name, scanned, changed=changed, mask=mask, delete=delete, applied=None, write=write,
            max_total=max_total))
    count = len(compared.seen) + already
    if not write:
        return TopicPlan(count, {}, {}, [], None)
    gone, emptied = [], 0
    if delete:
        gone, emptied = yield from _gone(table.topic_queues, name, compared, vanished if incremental else None)
    tq_len, added = len(table.topic_queues), compared.added
    if max_total is not None and added and tq_len - emptied + len(added) > max_total:
        raise TopicTableFull(tq_len, len(added) - emptied, max_total, exact=True)
    yield from drain(compared.seen)  # 200,000 names freed at once are a stall of their own
    yield from drain(vanished)
    return TopicPlan(count, added, compared.sets, gone, _record(mask, delete, scanned, matched, compared))


def _skip_known(
    scanned: Scan | Parsed, skippable: dict[int, ChunkRecord], write: bool
) -> Steps[tuple[dict[int, ChunkRecord], list[Chunk | None]]]:
    """(chunks already in the table, by digest; chunks to read). A parsed body is one chunk, None."""
    matched: dict[int, ChunkRecord] = {}
    todo: list[Chunk | None] = []
    if not isinstance(scanned, Scan):
        return matched, [None]
    budget = 0
    for chunk in scanned.chunks:
        rec = skippable.get(chunk.digest)
        if rec is not None and (rec.verified or not write) and chunk.digest not in matched:
            matched[chunk.digest] = rec
        else:
            todo.append(chunk)
        budget += 1
        if budget >= LIGHT_STEPS:
            budget = 0
            yield
    return matched, todo


def _vanished(known: dict[int, ChunkRecord], matched: dict[int, ChunkRecord], vanished: set[str]) -> Steps[None]:
    """Fill ``vanished`` with the topics of the chunks of the last apply that did not come again."""
    budget = 0
    for digest, rec in known.items():
        if digest not in matched:
            vanished.update(rec.topics)
            budget += len(rec.topics)
            if budget >= LIGHT_STEPS:
                budget = 0
                yield


def _compare(
    table: TopicReads,
    name: str,
    scanned: Scan | Parsed,
    todo: list[Chunk | None],
    vanished: set[str] | None,
    *,
    changed: bool,
    mask: int,
    write: bool,
    already: int,
    delete: bool,
    max_total: int | None,
) -> Steps[_Compared | None]:
    """Parse the chunks to read and compare their topics with the table (None: plan it all instead).

    ``vanished`` None: every chunk is read (no record of the last apply is used).
    """
    tq = table.topic_queues
    intern = table.interned
    added: dict[str, dict[str, QueueData]] = {}
    sets: dict[str, QueueData] = {}
    seen: set[str] = set()
    records: list[tuple[int, int, tuple[str, ...], bool]] = []
    repeated = False
    budget = 0
    limit = scanned.max_topics if isinstance(scanned, Scan) else None
    # This broker's QueueData per value tuple of a chunk (the chunk's equal values are one object), and
    # the one map of a new topic per QueueData: the new topics share it (see namesrv.queue_maps).
    qd_of: dict[int, tuple[tuple[int, int, int, int], QueueData]] = {}
    new_map_of: dict[int, dict[str, QueueData]] = {}  # by id: the QueueData are the table's interned ones
    for chunk in todo:
        content = table.known_chunk(chunk.digest) if chunk is not None else None
        if content is None or not (isinstance(scanned, Scan) and chunk is not None and content.fits(scanned, chunk)):
            content = _read_chunk(scanned, chunk)
            budget += len(content.names) // 2  # parsing the chunk cost about half as much as planning it
        verified = True
        distinct = len(seen)
        seen.update(content.names)
        if len(seen) - distinct < len(content.names):
            repeated = True  # the same topic twice: the later one wins
        if limit is not None and len(seen) + already > limit:
            raise BodyLimitError(f"register body has more than {limit} topics, the limit")
        for t, v in zip(content.names, content.values):
            budget += 1
            if budget >= PLAN_SLICE_TOPICS:
                budget = 0
                _check_total(tq, added, max_total, delete)  # refuse early: do not build a million topics first
                yield
            if not write:
                continue
            qmap = tq.get(t)
            cur = qmap.get(name) if qmap is not None else None
            if vanished is not None and cur is not None and t not in vanished:
                return None
            known = qd_of.get(id(v))
            if known is None:
                known = qd_of[id(v)] = (v, intern((name, v[0], v[1], v[2] & mask, v[3])))  # (v kept alive: its id)
            qd = known[1]
            if qmap is None:
                fresh = new_map_of.get(id(qd))
                if fresh is None:
                    fresh = new_map_of[id(qd)] = {name: qd}
                added[t] = fresh
            elif cur is qd:
                sets.pop(t, None)  # (an earlier duplicate of this topic may have set it)
            elif changed or cur is None:
                sets[t] = qd
            else:
                verified = False  # same version: an existing value is left alone
                sets.pop(t, None)
        if chunk is not None:
            records.append((chunk.digest, chunk.items, table.shared_chunk(chunk.digest, content).names, verified))
    count = len(seen) + already
    if limit is not None and count > limit:
        raise BodyLimitError(f"register body has {count} topics, more than the limit of {limit}")
    return _Compared(added, sets, seen, records, repeated, budget)


def _read_chunk(scanned: Scan | Parsed, chunk: Chunk | None) -> ChunkContent:
    """The topics of one chunk (of a parsed body: all of them); ChunkParseFailed if a JSON cut looks wrong.

    One string object per topic name, whoever sent it: the table's key and
    every broker's chunk record share it (else 32 brokers of a cluster would
    keep 32 copies of each name alive); likewise one tuple per distinct value.
    """
    if chunk is None:
        assert isinstance(scanned, Parsed)
        topics = scanned.body.topics
        form, version = "parsed", 0
    else:
        assert isinstance(scanned, Scan)
        form, version = scanned.form, scanned.version
        try:
            topics = scanned.parse_chunk(chunk)
        except BodyError:
            if scanned.form == "compact":
                raise  # a bad item: a full parse would fail on it too
            raise ChunkParseFailed from None  # a JSON cut may be wrong: parse the body whole
    values: dict[tuple[int, int, int, int], tuple[int, int, int, int]] = {}
    return ChunkContent(form, version, tuple([intern_name(t) for t in topics]),
                        tuple([values.setdefault(v, v) for v in topics.values()]))


def _gone(
    tq: dict[str, dict[str, QueueData]], name: str, compared: _Compared, vanished: set[str] | None
) -> Steps[tuple[list[str], int]]:
    """Topics the broker stopped reporting (deleteTopicWithBrokerRegistration), and how many leave the table.

    Only the topics of chunks that went away (``vanished``), or, without a
    record of the last apply, every topic of the table.
    """
    seen = compared.seen
    gone: list[str] = []
    emptied = 0  # topics gone that no other broker serves: they leave the table
    budget = compared.budget
    pairs = ((t, tq.get(t)) for t in vanished) if vanished is not None else iter(tq.items())
    for t, qmap in pairs:
        if qmap is not None and name in qmap and t not in seen:
            gone.append(t)
            emptied += len(qmap) == 1
        budget += 1
        if budget >= LIGHT_STEPS:
            budget = 0
            yield
    return gone, emptied


def _record(
    mask: int, delete: bool, scanned: Scan | Parsed, matched: dict[int, ChunkRecord], compared: _Compared
) -> AppliedTable:
    """The record for the next registration (no chunks if one topic sits in two)."""
    record = AppliedTable(0, mask, delete)
    if isinstance(scanned, Scan) and not compared.repeated:
        record.form = scanned.form
        record.anchors = scanned.anchors
        record.chunks.update(matched)
        for digest, items, names, verified in compared.records:
            if digest not in record.chunks:  # the same bytes twice add nothing
                record.chunks[digest] = ChunkRecord(names, items, verified)
    return record


def _check_total(tq: dict[str, dict[str, QueueData]], added: dict[str, Any], max_total: int | None, delete: bool) -> None:
    """Refuse as soon as the new topics alone take the table past maxTopics (nothing can leave without delete)."""
    if max_total is not None and not delete and len(tq) + len(added) > max_total:
        raise TopicTableFull(len(tq), len(added), max_total, exact=False)
