"""REGISTER_BROKER applied to the route table at a cost that follows what changed.

A broker re-sends its whole topic table on every registration, and a new
data version makes 5.3.3 re-apply every topic of it. Applying that
literally is O(topics) per registration (10,000 topics: ~13 ms of loop
time, 32 registrations/s fill a core). Here the body's topic table is cut
into chunks (:mod:`namesrv.register_scan`) and the table remembers, per
broker name, the digests of the chunks its last apply wrote
(:class:`AppliedTable`). While nothing else has touched that broker's
queue data since (its epoch is unchanged), a chunk with a known digest is
known to be in the table already, value for value, so it is skipped: only
chunks that differ are parsed, compared and written. Topics a broker stops
reporting (``deleteTopicWithBrokerRegistration``) are found from the
chunks that disappeared. The outcome is the same as applying the whole
body, which the unit tests check against a full apply.

A registration is a generator (:meth:`RegistrationMixin.register_steps`):
everything that reads the body runs first, yielding between slices of
work, and changes nothing; the table changes in one synchronous step at
the end, so a route query sees a broker either before or after a
registration, never half of one. The caller must keep other writers out
while the generator is suspended (the processor's table lock); if one
got in anyway, the commit notices and plans the registration again, in
slices as well (no path handles a large body in one go; after
MAX_ATTEMPTS it is refused).

Every path works in slices: a compressed body is scanned or refused as
malformed, never parsed whole; a JSON body the scan cannot cut is parsed
whole only within ``registerBodyMaxWholeParseBytes``, and its topics are
planned in slices like any chunk's. The total topic table is bounded by
``maxTopics`` (:class:`namesrv.register_plan.TopicTableFull`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from namesrv.register_apply import APPLY_SLICE, apply_topics, topic_writes
from namesrv.register_plan import (
    PLAN_SLICE_TOPICS,
    AppliedTable,
    ChunkParseFailed,
    ChunkRecord,
    Parsed,
    Steps,
    TopicPlan,
    TopicTableFull,
    drain,
    plan_topics,
    run_to_end,
)
from namesrv.register_scan import RawBody, Scan
from namesrv.route_model import (
    BrokerEntry,
    LiveBroker,
    QueueData,
    RegisterOutcome,
    Registration,
    RouteOptions,
)
from remoting.bodies import BodyError, RegisterBody
from remoting.codes import MASTER_ID, PERM_WRITE

#: Shared chunk name tuples kept beyond twice those in use before a prune.
CHUNK_NAMES_SLACK = 4096
#: Plans of one registration redone because the table changed under it, before it is refused.
MAX_ATTEMPTS = 3
#: Bodies from this size on are registered with the cyclic GC paused (see register_raw):
#: about 40,000 topics compressed, 2,000 as JSON.
GC_PAUSE_BODY_BYTES = 128 * 1024

__all__ = [
    "PLAN_SLICE_TOPICS",
    "AppliedTable",
    "ChunkRecord",
    "RegistrationMixin",
    "run_to_end",
]

class _Loader:
    def __init__(self, load_body: Callable[[], RegisterBody]) -> None:
        self.load_body = load_body

    def scan(self, applied: AppliedTable | None) -> Steps[Scan | Parsed]:
        return Parsed(self.load_body())
        yield  # a generator that never yields

    def whole(self) -> RegisterBody:
        return self.load_body()


class _Raw:
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


class RegistrationMixin:
    """REGISTER_BROKER for :class:`namesrv.routes.RouteTable` (state lives there)."""

    options: RouteOptions
    topic_queues: dict[str, dict[str, QueueData]]
    brokers: dict[str, BrokerEntry]
    clusters: dict[str, dict[str, None]]
    live: dict[tuple[str, str], LiveBroker]
    filter_servers: dict[tuple[str, str], list[str]]
    mappings: dict[str, dict[str, dict[str, Any]]]
    _interned: dict[QueueData, QueueData]
    _removal_epoch: dict[str, int]
    _epoch: dict[str, int]
    _applied: dict[str, AppliedTable]
    _chunk_names: dict[int, tuple[str, ...]]
    _chunk_names_limit: int
    _mutations: int
    _cluster_info: bytes | None
    topic_table_refusals: int
    applying: bool
    must_finish: bool
    before: dict[str, dict[str, QueueData] | None]
    generation: int
    large_writes: int

    if TYPE_CHECKING:  # provided by RouteTable

        def invalidate_all(self) -> None: ...
        def _intern(self, qd: QueueData) -> QueueData: ...
        def _invalidate_topic(self, topic: str) -> None: ...
        def _invalidate_topics(self, topics: dict[str, Any] | list[str]) -> None: ...
        def _touch(self, name: str) -> None: ...
        def _note_removal(self, name: str) -> None: ...
        def _set_live(self, key: tuple[str, str], info: LiveBroker) -> None: ...
        def _drop_live(self, key: tuple[str, str]) -> LiveBroker | None: ...

    # ------------------------------------------------------------------
    # entry points

    def register_broker(
        self,
        reg: Registration,
        load_body: Callable[[], RegisterBody],
        *,
        body_digest: bytes | None,
        conn: Hashable,
        now: float,
    ) -> RegisterOutcome:
        """Apply a REGISTER_BROKER whose body comes parsed (RouteInfoManager.registerBroker, 5.x).

        ``load_body`` is called at most once, before anything changes, so a
        body that fails to parse leaves the table untouched. It is not called
        at all for the common case of a broker re-sending the very body it
        sent last time (same ``body_digest``) when nothing it registered has
        been removed since and, with deleteTopicWithBrokerRegistration, the
        table holds no topic of it that the body lacks: that registration can
        only refresh liveness.
        """
        return run_to_end(self.register_steps(reg, _Loader(load_body), body_digest=body_digest, conn=conn, now=now))

    def register_raw(self, reg: Registration, raw: RawBody, *, conn: Hashable, now: float) -> Steps[RegisterOutcome]:
        """The same from the body's bytes, in slices and in proportion to what changed.

        While a large body is registered, Python's cyclic GC is paused: the
        registration allocates hundreds of thousands of small tuples, which
        trigger collections, and every collection walks the large sets and
        dicts the registration holds meanwhile (25-45 ms each here for a
        200,000-topic body, on the loop). Nothing of a registration forms
        reference cycles, so refcounting frees it all the same.

        After a registration that wrote many topics (in slices), what lives
        then is frozen (``gc.freeze``): full collections walk every entry of
        the route table's dicts, 25-45 ms with a million topics, and frozen
        objects are out of their reach. The young generations are collected
        first; only reference cycles that were already old garbage then stay
        uncollected (the NameServer makes few), a price paid once per large
        change of the table, not per registration.
        """
        pause_gc = len(raw.body) >= GC_PAUSE_BODY_BYTES and gc.isenabled()
        large_writes = self.large_writes
        if pause_gc:
            gc.disable()
        try:
            digest = yield from raw.digest()
            return (yield from self.register_steps(reg, _Raw(raw), body_digest=digest, conn=conn, now=now))
        finally:
            self.must_finish = False  # (also when it failed)
            if pause_gc:
                gc.collect(1)  # what was allocated meanwhile and is garbage now (young objects only: a few ms)
                if self.large_writes != large_writes:
                    gc.freeze()
                gc.enable()

    # ------------------------------------------------------------------
    # the registration

    def register_steps(
        self,
        reg: Registration,
        source: _Loader | _Raw,
        *,
        body_digest: bytes | None,
        conn: Hashable,
        now: float,
        attempt: int = 1,
    ) -> Steps[RegisterOutcome]:
        key = (reg.cluster, reg.addr)
        cached = self.live.get(key)
        same_body = (
            cached is not None
            and body_digest is not None
            and cached.body_digest == body_digest
            and cached.name == reg.name
        )
        broker = self.brokers.get(reg.name)
        prev_addr = broker.addrs.get(reg.broker_id) if broker is not None else None
        register_first = prev_addr is None
        old_broker = reg.enable_acting_master is None
        ids = {reg.broker_id}
        if broker is not None:
            ids.update(i for i, a in broker.addrs.items() if a != reg.addr or i == reg.broker_id)
        is_writer = reg.broker_id == MASTER_ID or (not old_broker and reg.broker_id == min(ids))
        acting = False if old_broker else bool(reg.enable_acting_master)
        mask = ~PERM_WRITE if (reg.broker_id != MASTER_ID and acting) else ~0
        delete = self.options.delete_topic_with_broker_registration and is_writer
        applied = self._applied.get(reg.name)
        applied_valid = applied is not None and applied.epoch == self._epoch.get(reg.name, 0) and applied.mask == mask
        skip_topics = (
            same_body
            and not register_first
            and cached is not None
            and cached.applied_as_writer == is_writer
            and cached.applied_epoch == self._removal_epoch.get(reg.name, 0)
            # with the delete option, only if the table holds exactly the body's topics
            and not (delete and not (applied_valid and applied is not None and applied.deleted))
        )
        start = self._mutations

        scanned: Scan | Parsed | None = None
        plan: TopicPlan | None = None
        if not same_body or (is_writer and not skip_topics):
            scanned = yield from source.scan(applied)
        if scanned is not None:
            rest = scanned.body if isinstance(scanned, Parsed) else scanned.rest
            sent_version = rest.data_version
            changed = register_first or cached is None or cached.data_version != sent_version
            if is_writer or register_first:
                try:
                    try:
                        plan = yield from plan_topics(
                            self,
                            reg.name,
                            scanned,
                            changed=changed,
                            mask=mask,
                            delete=delete and not rest.mapping_infos,
                            applied=applied if applied_valid else None,
                            write=is_writer,
                            max_total=self.options.max_topics,
                        )
                    except ChunkParseFailed:  # a JSON cut went wrong: parse whole (registerBodyMaxWholeParseBytes)
                        scanned = Parsed(source.whole())
                        rest = scanned.body
                        plan = yield from plan_topics(
                            self, reg.name, scanned, changed=changed, mask=mask,
                            delete=delete and not rest.mapping_infos, applied=None, write=is_writer,
                            max_total=self.options.max_topics,
                        )
                except TopicTableFull:
                    # Refused whole. The broker is alive though: its live entry is
                    # refreshed as a heartbeat would, so the routes it already has
                    # do not expire while it keeps retrying with too many topics.
                    self.topic_table_refusals += 1
                    if cached is not None and cached.name == reg.name and self._mutations == start:
                        cached.last_update_ms = now
                    raise
                topic_count = plan.topic_count
            elif isinstance(scanned, Parsed):
                topic_count = len(scanned.body.topics)
            else:
                topic_count = scanned.declared_topics if scanned.declared_topics >= 0 else (
                    cached.topic_count if cached is not None else 0)
        else:
            assert cached is not None
            rest = None
            sent_version = cached.data_version
            changed = False
            topic_count = cached.topic_count

        if self._mutations != start:
            # Someone changed the table while this registration was suspended
            # (a caller without the table lock): plan it again, in slices too.
            if attempt >= MAX_ATTEMPTS:
                raise BodyError(
                    f"the route table changed under this registration {attempt} times in a row; register again"
                )
            return (yield from self.register_steps(
                reg, source, body_digest=body_digest, conn=conn, now=now, attempt=attempt + 1))

        # 5.x: a one-topic table before the broker's first full registration
        # is an incremental update that overtook it; refuse it.
        if register_first and topic_count == 1:
            return RegisterOutcome(False)

        # 5.x: another address holds this id with a newer state version.
        if prev_addr is not None and prev_addr != reg.addr:
            holder = self.live.get((reg.cluster, prev_addr))
            if holder is not None and holder.data_version.state_version > sent_version.state_version:
                # Java drops this address's entries under other ids (the
                # slave-to-master switch) before it rejects; keeping them
                # would leave an address without a live entry, which nothing
                # ever expires.
                assert broker is not None
                stale = [i for i, a in broker.addrs.items() if a == reg.addr and i != reg.broker_id]
                for i in stale:
                    del broker.addrs[i]
                if stale:
                    self.invalidate_all()
                self._drop_live(key)
                return RegisterOutcome(True)

        retired: dict[str, Any] = {}
        if is_writer and plan is not None and rest is not None and topic_writes(plan) > APPLY_SLICE:
            # Too many topic writes for one synchronous step: written now in
            # slices, hidden behind self.before (namesrv.register_apply) until
            # the commit below shows them all at once.
            self.applying = self.must_finish = True
            yield  # the plan's last slice ends here
            yield from apply_topics(self, reg.name, plan)
            broker = self.brokers.get(reg.name)  # (a writer without the table lock may have removed it)
            # The commit: from here to the end is one step, so no stop comes between.
            retired, self.before = self.before, {}
            self.applying = False
            self.large_writes += 1

        self._mutations += 1
        members = self.clusters.setdefault(reg.cluster, {})
        if reg.name not in members:
            # A known broker name can join another cluster without any other
            # change; the cached ClusterInfo must still show the membership.
            members[reg.name] = None
            self._cluster_info = None
        if broker is None:
            broker = BrokerEntry(reg.cluster, reg.name, {}, acting, reg.zone_name)
            self.brokers[reg.name] = broker
            self.invalidate_all()
        elif broker.enable_acting_master != acting or broker.zone_name != reg.zone_name:
            broker.enable_acting_master = acting
            broker.zone_name = reg.zone_name
            self.invalidate_all()
        stale = [i for i, a in broker.addrs.items() if a == reg.addr and i != reg.broker_id]
        for i in stale:
            del broker.addrs[i]
        if stale or prev_addr != reg.addr:
            broker.addrs[reg.broker_id] = reg.addr
            self.invalidate_all()

        if is_writer and plan is not None and rest is not None:
            self._commit_topics(reg.name, plan, written=retired or None)
            if changed:
                for topic, info in rest.mapping_infos.items():
                    bname = info.get("bname") or reg.name
                    self.mappings.setdefault(topic, {})[str(bname)] = info
                    self._invalidate_topic(topic)

        if rest is not None:
            servers = rest.filter_servers
            if servers:
                if self.filter_servers.get(key) != servers:
                    self.filter_servers[key] = list(servers)
                    self.invalidate_all()
            elif self.filter_servers.pop(key, None) is not None:
                self.invalidate_all()

        self._set_live(
            key,
            LiveBroker(
                cluster=reg.cluster,
                addr=reg.addr,
                name=reg.name,
                broker_id=reg.broker_id,
                last_update_ms=now,
                timeout_ms=reg.heartbeat_timeout_ms or self.options.default_timeout_ms,
                data_version=sent_version,
                conn=conn,
                ha_server_addr=reg.ha_server_addr,
                body_digest=body_digest,
                topic_count=topic_count,
                applied_as_writer=is_writer,
                applied_epoch=self._removal_epoch.get(reg.name, 0),
            ),
        )

        outcome = RegisterOutcome(True)
        if reg.broker_id != MASTER_ID:
            master_addr = broker.addrs.get(MASTER_ID)
            if master_addr is not None:
                master = self.live.get((reg.cluster, master_addr))
                if master is not None:
                    outcome = RegisterOutcome(True, master.ha_server_addr, master_addr)
        if retired:  # the old queue-data maps, and the plan's large dicts: a stall if freed at once
            yield from drain(retired)
            if plan is not None:
                yield from drain(plan.added)
                yield from drain(plan.sets)
        self.must_finish = False
        return outcome

    def _commit_topics(self, name: str, plan: TopicPlan, *, written: dict[str, Any] | None) -> None:
        """Apply a plan in one step (what route queries see changes at once), or, when
        :func:`namesrv.register_apply.apply_topics` ``written`` it (these topics), record it."""
        tq = self.topic_queues
        if written is not None and plan.gone and self.mappings:
            # The slices left the mappings of topics they emptied to the commit
            # (a query of the old state still showed them); a few in practice.
            if len(self.mappings) < len(plan.gone):
                emptied = [t for t in self.mappings if t in written and t not in tq]
            else:
                emptied = [t for t in plan.gone if t in self.mappings and t not in tq]
            for t in emptied:
                del self.mappings[t]
        if plan.added or plan.sets or plan.gone:
            if written is not None:
                self.generation += 1  # the writes behind `before` are answers now
            else:
                tq.update(plan.added)  # one C-level step: at most APPLY_SLICE topics here
                for t, qd in plan.sets.items():
                    tq[t][name] = qd
                for t in plan.gone:
                    qmap = tq[t]
                    del qmap[name]
                    if not qmap:
                        del tq[t]
                        self.mappings.pop(t, None)
                self._invalidate_topics(plan.added)
                self._invalidate_topics(plan.sets)
                self._invalidate_topics(plan.gone)
            self._touch(name)
        if plan.gone:
            self._note_removal(name)
        if plan.applied is not None:
            plan.applied.epoch = self._epoch.get(name, 0)
            self._applied[name] = plan.applied
        else:
            self._applied.pop(name, None)
        if len(self._chunk_names) > self._chunk_names_limit:
            self._prune_chunk_names()

    def _prune_chunk_names(self) -> None:
        """Keep only the shared chunk name tuples some broker's record still uses."""
        live = {d: r.topics for rec in self._applied.values() for d, r in rec.chunks.items()}
        self._chunk_names = live
        self._chunk_names_limit = 2 * len(live) + CHUNK_NAMES_SLACK
