"""One REGISTER_BROKER decided, without changing the route table: the plan the table commits.

A registration is read and judged first, then written: this module reads
the body (:mod:`namesrv.registration.body`) and the table, decides who the
broker is for its topics (the writer of its queue data, or a slave that
only counts them), whether its body is the one it sent last time, what its
topics change (:mod:`namesrv.registration.topics`), and whether 5.x
refuses it, and returns all of it as a :class:`RegistrationPlan`. It
yields between slices of that work and changes nothing (the two table
methods it calls share immutable values, they change no route), so route
queries are answered meanwhile. :meth:`namesrv.routes.RouteTable.commit`
then writes the plan, the only place a registration changes the table, so
a route query sees a broker either before or after a registration, never
half of one.

Every path works in slices: a compressed body is scanned or refused as
malformed, never parsed whole; a JSON body the scan cannot cut is parsed
whole only within ``registerBodyMaxWholeParseBytes``, and its topics are
planned in slices like any chunk's. The total topic table is bounded by
``maxTopics`` (:class:`namesrv.route_model.TopicTableFull`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol

from namesrv.registration.body import RawBody
from namesrv.registration.scan import Scan
from namesrv.registration.topics import AppliedTable, ChunkParseFailed, Parsed, TopicPlan, TopicReads, plan_topics
from namesrv.route_model import BrokerEntry, LiveBroker, Registration, RouteOptions
from namesrv.slices import Steps
from remoting.bodies import DataVersion
from remoting.codes import MASTER_ID, PERM_WRITE
from remoting.register_body import RegisterBody


class Verdict(enum.Enum):
    APPLY = "apply"
    #: 5.x: a one-topic table before the broker's first full registration is an
    #: incremental update that overtook it (answered "not registered").
    REFUSED = "refused"
    #: 5.x: another address holds this broker id with a newer state version
    #: (answered "registered"; this address's entries under other ids are dropped).
    SUPERSEDED = "superseded"


@dataclass(slots=True)
class RegistrationPlan:
    """One REGISTER_BROKER, decided: everything :meth:`namesrv.routes.RouteTable.commit` writes."""

    reg: Registration
    conn: Hashable
    now: float
    body_digest: bytes | None
    verdict: Verdict
    acting: bool  # enableActingMaster as the table keeps it (False for a pre-5.x broker)
    is_writer: bool  # this registration writes the broker name's queue data (its master, or the acting one)
    sent_version: DataVersion
    topic_count: int
    changed: bool  # the data version differs from the one this address registered last
    rest: RegisterBody | None  # the body but its topics (None: the same body as last time, not read)
    topics: TopicPlan | None  # the topic changes to write (a writer whose body was read)


class BodySource(Protocol):
    """A body to plan from: cut into chunks (or parsed, when it came parsed or cannot be cut)."""

    def scan(self, applied: AppliedTable | None) -> Steps[Scan | Parsed]: ...

    def whole(self) -> RegisterBody: ...


class LoadedBody:
    """A body the caller parses itself (the loader API of :meth:`namesrv.routes.RouteTable.register_broker`)."""

    def __init__(self, load_body: Callable[[], RegisterBody]) -> None:
        self.load_body = load_body

    def scan(self, applied: AppliedTable | None) -> Steps[Scan | Parsed]:
        return Parsed(self.load_body())
        yield  # a generator that never yields

    def whole(self) -> RegisterBody:
        return self.load_body()


class ReceivedBody:
    """A body's bytes as they arrived, cut again where the broker's last cut says."""

    def __init__(self, raw: RawBody) -> None:
        self.raw = raw

    def scan(self, applied: AppliedTable | None) -> Steps[Scan | Parsed]:
        raw = self.raw
        anchors: list[bytes] = []
        known: dict[int, int] = {}
        if applied is not None and applied.form == raw.form:
            anchors = applied.anchors
            if raw.compressed:
                known = {d: rec.items for d, rec in applied.chunks.items()}
        scan = yield from raw.scan(anchors, known)
        return Parsed(raw.whole()) if scan is None else scan

    def whole(self) -> RegisterBody:
        return self.raw.whole()


class TableReads(TopicReads, Protocol):
    """What a registration's plan reads of the route table (:class:`namesrv.routes.RouteTable`)."""

    @property
    def options(self) -> RouteOptions: ...

    @property
    def live(self) -> dict[tuple[str, str], LiveBroker]: ...

    @property
    def brokers(self) -> dict[str, BrokerEntry]: ...

    def applied(self, name: str) -> AppliedTable | None: ...

    def epoch(self, name: str) -> int: ...

    def removal_epoch(self, name: str) -> int: ...


@dataclass(slots=True)
class _Role:
    """Who the registering broker is, as the table stands (RouteInfoManager.registerBroker, 5.x)."""

    cached: LiveBroker | None  # this address's live entry
    prev_addr: str | None  # the address the table holds for this broker id (None: a first registration)
    is_writer: bool
    acting: bool
    mask: int  # the perm mask its queue data gets (a slave under acting master: no write)
    delete: bool  # deleteTopicWithBrokerRegistration applies to this registration


def _role(table: TableReads, reg: Registration) -> _Role:
    broker = table.brokers.get(reg.name)
    prev_addr = broker.addrs.get(reg.broker_id) if broker is not None else None
    old_broker = reg.enable_acting_master is None
    ids = {reg.broker_id}
    if broker is not None:
        ids.update(i for i, a in broker.addrs.items() if a != reg.addr or i == reg.broker_id)
    is_writer = reg.broker_id == MASTER_ID or (not old_broker and reg.broker_id == min(ids))
    acting = False if old_broker else bool(reg.enable_acting_master)
    mask = ~PERM_WRITE if (reg.broker_id != MASTER_ID and acting) else ~0
    delete = table.options.delete_topic_with_broker_registration and is_writer
    return _Role(table.live.get((reg.cluster, reg.addr)), prev_addr, is_writer, acting, mask, delete)


def plan_registration(
    table: TableReads,
    reg: Registration,
    source: BodySource,
    *,
    body_digest: bytes | None,
    conn: Hashable,
    now: float,
) -> Steps[RegistrationPlan]:
    """Decide ``reg`` (RouteInfoManager.registerBroker, 5.x), reading the body only where it may change something.

    The body is not read at all for the common case of a broker re-sending
    the very body it sent last time (same ``body_digest``) when nothing it
    registered has been removed since and, with
    deleteTopicWithBrokerRegistration, the table holds no topic of it that
    the body lacks: that registration can only refresh liveness.
    """
    role = _role(table, reg)
    cached = role.cached
    same_body = (
        cached is not None and body_digest is not None and cached.body_digest == body_digest
        and cached.name == reg.name
    )
    register_first = role.prev_addr is None
    applied = table.applied(reg.name)
    applied_valid = applied is not None and applied.epoch == table.epoch(reg.name) and applied.mask == role.mask
    skip_topics = (
        same_body
        and not register_first
        and cached is not None
        and cached.applied_as_writer == role.is_writer
        and cached.applied_epoch == table.removal_epoch(reg.name)
        # with the delete option, only if the table holds exactly the body's topics
        and not (role.delete and not (applied_valid and applied is not None and applied.deleted))
    )
    plan = RegistrationPlan(reg, conn, now, body_digest, Verdict.APPLY, role.acting, role.is_writer,
                            DataVersion(), 0, False, None, None)
    if not same_body or (role.is_writer and not skip_topics):
        scanned = yield from source.scan(applied)
        yield from _read_topics(table, plan, role, source, scanned, applied if applied_valid else None)
    else:
        assert cached is not None
        plan.sent_version = cached.data_version
        plan.topic_count = cached.topic_count
    plan.verdict = _verdict(table, reg, role, plan)
    return plan


def _read_topics(
    table: TableReads,
    plan: RegistrationPlan,
    role: _Role,
    source: BodySource,
    scanned: Scan | Parsed,
    applied: AppliedTable | None,
) -> Steps[None]:
    """The body's version and rest, and its topics planned (a writer's, or a first registration's count)."""
    cached = role.cached
    register_first = role.prev_addr is None
    rest = plan.rest = scanned.body if isinstance(scanned, Parsed) else scanned.rest
    plan.sent_version = rest.data_version
    plan.changed = register_first or cached is None or cached.data_version != plan.sent_version
    if role.is_writer or register_first:
        def topic_plan(scanned: Scan | Parsed, applied: AppliedTable | None) -> Steps[TopicPlan]:
            return plan_topics(
                table, plan.reg.name, scanned, changed=plan.changed, mask=role.mask,
                delete=role.delete and not rest.mapping_infos, applied=applied, write=role.is_writer,
                max_total=table.options.max_topics,
            )

        try:
            topics = yield from topic_plan(scanned, applied)
        except ChunkParseFailed:  # a JSON cut went wrong: parse whole (registerBodyMaxWholeParseBytes)
            rest = plan.rest = source.whole()
            topics = yield from topic_plan(Parsed(rest), None)
        plan.topic_count = topics.topic_count
        plan.topics = topics if role.is_writer else None
    elif isinstance(scanned, Parsed):
        plan.topic_count = len(scanned.body.topics)
    else:
        plan.topic_count = scanned.declared_topics if scanned.declared_topics >= 0 else (
            cached.topic_count if cached is not None else 0)


def _verdict(table: TableReads, reg: Registration, role: _Role, plan: RegistrationPlan) -> Verdict:
    """Whether 5.x applies this registration at all (see :class:`Verdict`)."""
    if role.prev_addr is None and plan.topic_count == 1:
        return Verdict.REFUSED
    if role.prev_addr is not None and role.prev_addr != reg.addr:
        holder = table.live.get((reg.cluster, role.prev_addr))
        if holder is not None and holder.data_version.state_version > plan.sent_version.state_version:
            return Verdict.SUPERSEDED
    return Verdict.APPLY
