"""The NameServer's routing table: pure state, no sockets, no clock, and the only writer of it.

Every call that depends on time takes ``now`` (milliseconds on a monotonic
clock) and connections are opaque hashable tokens, so the whole table is
driven directly by unit tests and by the request handlers alike. Semantics
follow Apache RocketMQ 5.3.3's RouteInfoManager (see the protocol reference,
section 6); where they differ from Java the docstring says why.

Every change to the table's state is made by a method of :class:`RouteTable`,
in this module, as every change of h11's connection state is made in its
``_state.py``. Its helpers read and never write: a registration is planned
by :mod:`namesrv.registration` (the body read, compared, decided) and the
plan is written by :meth:`RouteTable.commit`; encoded answers are cached by
:class:`namesrv.route_answers.RouteAnswers`, which the table tells what
changed; a snapshot restore hands the table its new state
(:meth:`RouteTable.replace_state`). The records are in
:mod:`namesrv.route_model`. The module is longer than most on purpose:
it is every write of the route state and nothing else, so that a reader
finds all of them, and the order they happen in, in one place.

The state is plain dicts: ``topic_queues`` (topic -> broker name ->
QueueData tuple; the maps are shared between topics and replaced, never
changed in place: :mod:`namesrv.queue_maps`), ``brokers``, ``clusters``,
``live``, ``filter_servers``, ``mappings``; besides them, ``_applied`` (broker name -> what its last
registration wrote, :class:`namesrv.registration.topics.AppliedTable`) and
``_epoch`` (broker name -> a counter every change to its QueueData bumps)
let an unchanged part of a re-registration be skipped.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Hashable, Iterable, Iterator
from itertools import islice
from typing import Any, TypeVar

from namesrv.queue_maps import QueueMap, Successors
from namesrv.registration.body import QuietGC, RawBody
from namesrv.registration.plan import (
    LoadedBody,
    ReceivedBody,
    RegistrationPlan,
    Verdict,
    plan_registration,
)
from namesrv.registration.topics import AppliedTable, ChunkContent, TopicPlan
from namesrv.route_answers import RouteAnswers
from namesrv.route_model import (
    DEFAULT_BROKER_CHANNEL_EXPIRED_MS,
    BrokerEntry,
    LiveBroker,
    QueueData,
    RegisterOutcome,
    Registration,
    Removed,
    RouteOptions,
    TopicTableFull,
)
from namesrv.slices import Steps, drain, run_to_end
from remoting.bodies import BodyError, DataVersion
from remoting.codes import FLAG_UNIT, FLAG_UNIT_SUB, MASTER_ID, PERM_READ, PERM_WRITE
from remoting.register_body import RegisterBody

#: Departed broker names tolerated before their bookkeeping is dropped (see RouteTable._forget_departed).
FORGET_SLACK = 1024
#: Shared chunk contents kept beyond twice those in use before a prune.
CHUNK_CONTENTS_SLACK = 4096
#: Plans of one registration redone because the table changed under it, before it is refused.
MAX_ATTEMPTS = 3
#: Topic writes between two yields of a sliced commit (a few ms), and the most a
#: registration writes in place in its synchronous step.
APPLY_SLICE = 2048

T = TypeVar("T")

__all__ = [
    "APPLY_SLICE",
    "DEFAULT_BROKER_CHANNEL_EXPIRED_MS",
    "UNIT_TOPIC_FLAGS",
    "BrokerEntry",
    "LiveBroker",
    "QueueData",
    "RegisterOutcome",
    "Registration",
    "Removed",
    "RouteOptions",
    "RouteTable",
]


def _slices(items: Iterable[T]) -> Iterator[list[T]]:
    it = iter(items)
    while part := list(islice(it, APPLY_SLICE)):
        yield part


class RouteTable:
    def __init__(self, options: RouteOptions | None = None) -> None:
        self.options = options or RouteOptions()
        self.topic_queues: dict[str, QueueMap] = {}
        self.brokers: dict[str, BrokerEntry] = {}
        self.clusters: dict[str, dict[str, None]] = {}  # ordered sets of broker names
        self.live: dict[tuple[str, str], LiveBroker] = {}
        self.filter_servers: dict[tuple[str, str], list[str]] = {}
        self.mappings: dict[str, dict[str, dict[str, Any]]] = {}
        self._by_conn: dict[Hashable, set[tuple[str, str]]] = {}
        self._interned: dict[QueueData, QueueData] = {}
        self._removal_epoch: dict[str, int] = {}
        #: Per broker name, bumped by every change to its QueueData.
        self._epoch: dict[str, int] = {}
        #: Per broker name, what its last topic apply wrote.
        self._applied: dict[str, AppliedTable] = {}
        #: Chunk digest -> its parsed topics, shared by the records of brokers that
        #: sent the same bytes (pruned to what records use when it doubles).
        self._chunk_contents: dict[int, ChunkContent] = {}
        self._chunk_contents_limit = CHUNK_CONTENTS_SLACK
        #: Bumped by every change to topics, live entries or addresses.
        self._mutations = 0
        #: True while a registration writes its topics in slices (see commit).
        self.applying = False
        #: True from a sliced registration's first write to its last step (the old state freed
        #: after its commit): it is no longer abandoned then, not even by a stop, so its answer
        #: never says "not applied" of a registration that was.
        self.must_finish = False
        #: While it does: each topic it wrote, with its queue-data map as it was before (None:
        #: absent). Queries see these instead, until its commit empties this in one step.
        self.before: dict[str, QueueMap | None] = {}
        #: Registrations written in slices since the start (each freezes the heap after it).
        self.large_writes = 0
        #: Registrations (and REGISTER_TOPIC_IN_NAMESRV) refused by maxTopics since the start.
        self.topic_table_refusals = 0
        #: Bumped whenever an answer may change (every cache invalidation):
        #: the route snapshot writer compares it to know whether to write.
        self.generation = 0
        #: Broker names gone from the table since :meth:`_forget_departed` last ran, and how many may be.
        self._departed = 0
        self._forget_slack = FORGET_SLACK
        #: The encoded answers (the processor asks them directly on the route-query path). Its
        #: answering methods are the table's too, for callers that hold only the table.
        self.answers = RouteAnswers(
            queues=self.queues, settled=self.settled, brokers=self.brokers, clusters=self.clusters,
            filter_servers=self.filter_servers, mappings=self.mappings, options=self.options,
        )
        self.route_body = self.answers.route_body
        self.encode_route = self.answers.encode_route
        self.route_obj = self.answers.route_obj
        self.cluster_info_body = self.answers.cluster_info_body

    # ------------------------------------------------------------------
    # what the registration plan and the answers read

    def queues(self, topic: str) -> QueueMap | None:
        """``topic``'s queue-data map as queries see it (as it was, while a registration writes it)."""
        before = self.before
        if before and topic in before:
            return before[topic]
        return self.topic_queues.get(topic)

    def settled(self, topic: str) -> bool:
        """False while a registration written in slices holds ``topic`` (its answer is the old state's)."""
        before = self.before
        return not (before and topic in before)

    def visible_topics(self) -> Iterator[tuple[str, QueueMap]]:
        """(topic, queue-data map) of every topic as queries see them (see :meth:`queues`)."""
        before = self.before
        if not before:
            yield from self.topic_queues.items()
            return
        tq = self.topic_queues
        for topic, qmap in tq.items():
            if topic in before:
                old = before[topic]
                if old is None:
                    continue  # new in the registration being written
                qmap = old
            yield topic, qmap
        for topic, old in before.items():
            if old is not None and topic not in tq:
                yield topic, old  # removed by the registration being written

    def applied(self, name: str) -> AppliedTable | None:
        """What broker ``name``'s last topic apply wrote (valid while its epoch is :meth:`epoch`)."""
        return self._applied.get(name)

    def epoch(self, name: str) -> int:
        return self._epoch.get(name, 0)

    def removal_epoch(self, name: str) -> int:
        """Bumped whenever queue data of ``name`` is removed: its next registration re-applies its body."""
        return self._removal_epoch.get(name, 0)

    def interned(self, qd: QueueData) -> QueueData:
        """The one shared tuple equal to ``qd``.

        A new one is handed to a young-generation collection first, which
        stops the GC tracking it (it holds only a string and ints). Why: a
        QueueData map holding a tracked tuple is tracked itself until the next
        full collection, and a registration of 100,000 topics would leave
        100,000 of them for that collection to walk (tens of ms on the loop).
        """
        got = self._interned.get(qd)
        if got is None:
            self._interned[qd] = got = qd
            gc.collect(0)
        return got

    def known_chunk(self, digest: int) -> ChunkContent | None:
        """The content of a chunk some broker sent, by its digest (see ChunkContent)."""
        return self._chunk_contents.get(digest)

    def shared_chunk(self, digest: int, content: ChunkContent) -> ChunkContent:
        """The one content of this chunk that the records of every broker sending it share."""
        shared = self._chunk_contents.get(digest)
        if shared is None or (shared is not content and (shared.form, shared.version, shared.names) != (
                content.form, content.version, content.names)):
            shared = self._chunk_contents[digest] = content
        return shared

    # ------------------------------------------------------------------
    # cache maintenance

    def invalidate_all(self) -> None:
        """Forget every encoded answer; called when broker membership changes."""
        self.generation += 1
        self.answers.forget_all()

    def _invalidate_topic(self, topic: str) -> None:
        self.generation += 1
        self.answers.forget(topic)

    def _invalidate_topics(self, topics: dict[str, Any] | list[str]) -> None:
        """Forget the encoded answers of many topics (only the cached ones cost)."""
        self.generation += 1
        self.answers.forget_topics(topics)

    # ------------------------------------------------------------------
    # the writes every change is made of

    def _touch(self, name: str) -> None:
        """Note a change to ``name``'s QueueData: what its last registration wrote no longer holds."""
        self._epoch[name] = self._epoch.get(name, 0) + 1
        self._mutations += 1

    def _note_removal(self, name: str) -> None:
        self._removal_epoch[name] = self._removal_epoch.get(name, 0) + 1
        self._touch(name)

    def _set_queue(self, topic: str, name: str, qd: QueueData, successors: Successors | None = None) -> None:
        """Set one topic's QueueData of ``name`` (``successors``: of a change to many topics of ``name``)."""
        qmap = self.topic_queues.get(topic)
        qd = self.interned(qd)
        if qmap is not None and qmap.get(name) is qd:
            return
        self.topic_queues[topic] = (successors or Successors(name)).with_queue(qmap, qd)
        self._invalidate_topic(topic)
        self._touch(name)

    def _remove_broker_queues(self, name: str) -> None:
        """Drop ``name``'s QueueData from every topic."""
        tq, successors = self.topic_queues, Successors(name)
        changed = [(topic, successors.without(qmap)) for topic, qmap in tq.items() if name in qmap]
        for topic, rest in changed:
            if rest:
                tq[topic] = rest
            else:
                del tq[topic]
                self.mappings.pop(topic, None)
        self._invalidate_topics([topic for topic, _ in changed])
        self._note_removal(name)

    def _drop_mappings(self, name: str) -> None:
        """Forget the static-topic mappings a departed broker registered."""
        for topic in [t for t, by_broker in self.mappings.items() if name in by_broker]:
            by_broker = self.mappings[topic]
            del by_broker[name]
            if not by_broker:
                del self.mappings[topic]
            self._invalidate_topic(topic)

    def _set_live(self, key: tuple[str, str], info: LiveBroker) -> None:
        self._mutations += 1
        old = self.live.get(key)
        if old is not None and old.conn != info.conn:
            self._unindex(key, old.conn)
        self.live[key] = info
        self._by_conn.setdefault(info.conn, set()).add(key)

    def _unindex(self, key: tuple[str, str], conn: Hashable) -> None:
        keys = self._by_conn.get(conn)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_conn[conn]

    def _drop_live(self, key: tuple[str, str]) -> LiveBroker | None:
        self._mutations += 1
        info = self.live.pop(key, None)
        if info is not None:
            self._unindex(key, info.conn)
        if self.filter_servers.pop(key, None) is not None:
            self.invalidate_all()
        return info

    # ------------------------------------------------------------------
    # registration: planned by namesrv.registration, committed here

    def register_broker(
        self,
        reg: Registration,
        load_body: Callable[[], RegisterBody],
        *,
        body_digest: bytes | None,
        conn: Hashable,
        now: float,
    ) -> RegisterOutcome:
        """Apply a REGISTER_BROKER whose body comes parsed (RouteInfoManager.registerBroker, 5.x), in one go.

        ``load_body`` is called at most once, before anything changes, so a
        body that fails to parse leaves the table untouched; not at all when
        the plan can tell the body is the one this broker sent last time
        (see :func:`namesrv.registration.plan.plan_registration`).
        """
        return run_to_end(self._register(reg, LoadedBody(load_body), body_digest=body_digest, conn=conn, now=now))

    def register_raw(self, reg: Registration, raw: RawBody, *, conn: Hashable, now: float) -> Steps[RegisterOutcome]:
        """The same from the body's bytes, in slices and in proportion to what changed.

        While a large body is registered, Python's cyclic GC is paused (see
        :class:`namesrv.registration.body.QuietGC`), and after one that wrote
        many topics what lives is frozen out of the full collections' reach.
        """
        large_writes = self.large_writes
        with QuietGC(len(raw.body), lambda: self.large_writes != large_writes):
            try:
                digest = yield from raw.digest()
                return (yield from self._register(reg, ReceivedBody(raw), body_digest=digest, conn=conn, now=now))
            finally:
                self.must_finish = False  # (also when it failed)

    def _register(
        self, reg: Registration, source: LoadedBody | ReceivedBody, *, body_digest: bytes | None, conn: Hashable,
        now: float,
    ) -> Steps[RegisterOutcome]:
        """Plan, then commit. The caller keeps other writers out while the plan is suspended (the
        processor's table lock); if one got in anyway, the plan is made again, in slices as well."""
        for _ in range(MAX_ATTEMPTS):
            start = self._mutations
            try:
                plan = yield from plan_registration(self, reg, source, body_digest=body_digest, conn=conn, now=now)
            except TopicTableFull:
                # Refused whole. The broker is alive though: its live entry is
                # refreshed as a heartbeat would, so the routes it already has
                # do not expire while it keeps retrying with too many topics.
                self.topic_table_refusals += 1
                cached = self.live.get((reg.cluster, reg.addr))
                if cached is not None and cached.name == reg.name and self._mutations == start:
                    cached.last_update_ms = now
                raise
            if self._mutations == start:
                return (yield from self.commit(plan))
        raise BodyError(f"the route table changed under this registration {MAX_ATTEMPTS} times in a row; register again")

    def commit(self, plan: RegistrationPlan) -> Steps[RegisterOutcome]:
        """Write a planned registration: the broker, its topics, mappings, filter servers and live entry.

        Everything from the broker entry on is one synchronous step, so a
        route query sees the registration whole or not at all. A plan with
        more than APPLY_SLICE topic writes first writes its topics in slices
        behind ``before`` (:meth:`_write_behind`); the step after them only
        swaps ``before`` out. Nothing can fail once writing has begun, and
        the server's stop waits for it and for the freeing after it
        (``must_finish``), so a stop never leaves half a registration, nor
        answers "not applied" to one that was.
        """
        reg, topics = plan.reg, plan.topics
        if plan.verdict is Verdict.REFUSED:
            return RegisterOutcome(False)
        if plan.verdict is Verdict.SUPERSEDED:
            self._retire_address(reg)
            return RegisterOutcome(True)
        retired: dict[str, QueueMap | None] = {}
        if topics is not None and topics.writes > APPLY_SLICE:
            self.applying = self.must_finish = True
            yield  # the plan's last slice ends here
            yield from self._write_behind(reg.name, topics)
            # The commit: from here to the end is one step, so no stop comes between.
            retired, self.before = self.before, {}
            self.applying = False
            self.large_writes += 1
        self._mutations += 1
        broker = self._commit_broker(reg, plan.acting)
        if topics is not None:
            assert plan.rest is not None
            self._commit_topics(reg.name, topics, written=retired or None)
            if plan.changed:
                self._commit_mappings(reg.name, plan.rest.mapping_infos)
        if plan.rest is not None:
            self._commit_filter_servers((reg.cluster, reg.addr), plan.rest.filter_servers)
        self._set_live((reg.cluster, reg.addr), self._live_entry(plan))
        outcome = self._outcome(reg, broker)
        if retired:  # the old queue-data maps, and the plan's large dicts: a stall if freed at once
            yield from drain(retired)
            assert topics is not None
            yield from drain(topics.added)
            yield from drain(topics.sets)
        self.must_finish = False
        return outcome

    def _write_behind(self, name: str, plan: TopicPlan) -> Steps[None]:
        """Write a large plan's topic changes for broker ``name`` behind ``before``, a slice at a time.

        Inserting 200,000 new topics into the table's dict took 125-185 ms of
        CPU here (hashing into a dict of hundreds of thousands of keys, cache
        misses, a resize), and changing 200,000 topics' queue data in place
        about as long, far past what a route query may wait. So each topic
        written gets a new queue-data map (one per distinct old map, shared:
        :mod:`namesrv.queue_maps`) and its old map is kept in ``before``, which every reader
        consults first (:meth:`queues`): queries see the table as it was
        until the commit swaps ``before`` for an empty dict. Cached answers
        of the topics written are dropped as they are written (and not
        cached again meanwhile), without bumping the generation: the answers
        have not changed yet, so the route snapshot is not rewritten for
        them; the commit bumps it once.
        """
        tq, before, forget = self.topic_queues, self.before, self.answers.forget_topics
        successors = Successors(name)
        for part in _slices(plan.added.items()):
            topics = [t for t, _ in part]
            for t in topics:
                if t not in before:
                    before[t] = tq.get(t)  # None: the plan found none of them in the table
            tq.update(part)
            forget(topics)
            self._mutations += 1
            yield
        latest = successors.latest
        for sets in _slices(plan.sets.items()):
            for t, qd in sets:
                old = tq.get(t)
                if t not in before:
                    before[t] = old
                made = latest.get(id(old))
                tq[t] = made[2] if made is not None and made[1] is qd else successors.with_queue(old, qd)
            forget([t for t, _ in sets])
            self._mutations += 1
            yield
        for gone in _slices(plan.gone):
            for t in gone:
                old = tq.get(t)
                if old is None or name not in old:
                    continue
                if t not in before:
                    before[t] = old
                rest = successors.without(old)
                if rest:
                    tq[t] = rest
                else:
                    del tq[t]
            forget(gone)
            self._mutations += 1
            yield

    def _commit_broker(self, reg: Registration, acting: bool) -> BrokerEntry:
        """The broker's cluster membership and its entry (created, or its flags and address updated)."""
        members = self.clusters.setdefault(reg.cluster, {})
        if reg.name not in members:
            # A known broker name can join another cluster without any other
            # change; the cached ClusterInfo must still show the membership.
            members[reg.name] = None
            self.answers.forget_cluster_info()
        broker = self.brokers.get(reg.name)  # (a writer without the table lock may have removed it)
        if broker is None:
            broker = BrokerEntry(reg.cluster, reg.name, {}, acting, reg.zone_name)
            self.brokers[reg.name] = broker
            self.invalidate_all()
        elif broker.enable_acting_master != acting or broker.zone_name != reg.zone_name:
            broker.enable_acting_master = acting
            broker.zone_name = reg.zone_name
            self.invalidate_all()
        prev_addr = broker.addrs.get(reg.broker_id)
        stale = [i for i, a in broker.addrs.items() if a == reg.addr and i != reg.broker_id]
        for i in stale:
            del broker.addrs[i]
        if stale or prev_addr != reg.addr:
            broker.addrs[reg.broker_id] = reg.addr
            self.invalidate_all()
        return broker

    def _commit_topics(self, name: str, plan: TopicPlan, *, written: dict[str, Any] | None) -> None:
        """Apply a topic plan in one step (what route queries see changes at once), or, when
        :meth:`_write_behind` ``written`` it (these topics), record it."""
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
                successors = Successors(name)
                for t, qd in plan.sets.items():
                    tq[t] = successors.with_queue(tq[t], qd)
                for t in plan.gone:
                    rest = successors.without(tq[t])
                    if rest:
                        tq[t] = rest
                    else:
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
        if len(self._chunk_contents) > self._chunk_contents_limit:
            self._prune_chunk_contents()

    def _prune_chunk_contents(self) -> None:
        """Keep only the shared chunk contents some broker's record still uses."""
        known = self._chunk_contents
        live = {d: known[d] for rec in self._applied.values() for d in rec.chunks if d in known}
        self._chunk_contents = live
        self._chunk_contents_limit = 2 * len(live) + CHUNK_CONTENTS_SLACK

    def _commit_mappings(self, name: str, infos: dict[str, dict[str, Any]]) -> None:
        for topic, info in infos.items():
            bname = info.get("bname") or name
            self.mappings.setdefault(topic, {})[str(bname)] = info
            self._invalidate_topic(topic)

    def _commit_filter_servers(self, key: tuple[str, str], servers: list[str]) -> None:
        if servers:
            if self.filter_servers.get(key) != servers:
                self.filter_servers[key] = list(servers)
                self.invalidate_all()
        elif self.filter_servers.pop(key, None) is not None:
            self.invalidate_all()

    def _live_entry(self, plan: RegistrationPlan) -> LiveBroker:
        reg = plan.reg
        return LiveBroker(
            cluster=reg.cluster,
            addr=reg.addr,
            name=reg.name,
            broker_id=reg.broker_id,
            last_update_ms=plan.now,
            timeout_ms=reg.heartbeat_timeout_ms or self.options.default_timeout_ms,
            data_version=plan.sent_version,
            conn=plan.conn,
            ha_server_addr=reg.ha_server_addr,
            body_digest=plan.body_digest,
            topic_count=plan.topic_count,
            applied_as_writer=plan.is_writer,
            applied_epoch=self._removal_epoch.get(reg.name, 0),
        )

    def _outcome(self, reg: Registration, broker: BrokerEntry) -> RegisterOutcome:
        """Success, with the master's HA address for a slave whose master is live."""
        if reg.broker_id != MASTER_ID:
            master_addr = broker.addrs.get(MASTER_ID)
            if master_addr is not None:
                master = self.live.get((reg.cluster, master_addr))
                if master is not None:
                    return RegisterOutcome(True, master.ha_server_addr, master_addr)
        return RegisterOutcome(True)

    def _retire_address(self, reg: Registration) -> None:
        """A superseded registration: Java drops this address's entries under other ids (the
        slave-to-master switch) before it rejects; keeping them would leave an address without a
        live entry, which nothing ever expires."""
        broker = self.brokers[reg.name]  # (the plan found the other address under this name)
        stale = [i for i, a in broker.addrs.items() if a == reg.addr and i != reg.broker_id]
        for i in stale:
            del broker.addrs[i]
        if stale:
            self.invalidate_all()
        self._drop_live((reg.cluster, reg.addr))

    # ------------------------------------------------------------------
    # a snapshot restore

    def replace_state(
        self,
        *,
        brokers: dict[str, BrokerEntry],
        clusters: dict[str, dict[str, None]],
        live: dict[tuple[str, str], LiveBroker],
        topic_queues: dict[str, QueueMap],
        filter_servers: dict[tuple[str, str], list[str]],
        mappings: dict[str, dict[str, dict[str, Any]]],
        interned: dict[QueueData, QueueData],
    ) -> None:
        """Replace the table's contents with a restored state (:func:`namesrv.route_state.restore`).

        The same dict objects are kept, so no holder (the answer cache) keeps
        a stale one. Restored entries have no connection (conn None, not
        indexed), and what registrations wrote no longer describes the table.
        """
        for target, source in ((self.brokers, brokers), (self.clusters, clusters), (self.live, live),
                               (self.topic_queues, topic_queues), (self.filter_servers, filter_servers),
                               (self.mappings, mappings), (self._interned, interned)):
            target.clear()
            target.update(source)  # type: ignore[attr-defined]
        self._by_conn.clear()
        self._removal_epoch.clear()
        self._applied.clear()
        self._chunk_contents.clear()
        self.invalidate_all()

    # ------------------------------------------------------------------
    # brokers leaving, liveness

    def unregister_broker(self, cluster: str, addr: str, name: str, reason: str = "unregister") -> Removed | None:
        """Remove one broker address (5.x: every id that holds ``addr``)."""
        info = self._drop_live((cluster, addr))
        broker = self.brokers.get(name)
        if broker is None:
            return Removed(cluster, name, addr, info.conn, reason) if info else None
        gone = [i for i, a in broker.addrs.items() if a == addr]
        for i in gone:
            del broker.addrs[i]
        if gone:
            self._mutations += 1
            self.invalidate_all()
        if not broker.addrs:
            self._remove_broker(cluster, name)
        elif broker.enable_acting_master and min(broker.addrs) > MASTER_ID:
            self._rewrite_perm(name, lambda perm: perm & ~PERM_WRITE)
        if info is None and not gone:
            return None
        return Removed(cluster, name, addr, info.conn if info else None, reason)

    def _remove_broker(self, cluster: str, name: str) -> None:
        """The last address of broker ``name`` left: the name leaves the table with its queue data."""
        del self.brokers[name]
        self._applied.pop(name, None)
        members = self.clusters.get(cluster)
        if members is not None:
            members.pop(name, None)
            if not members:
                del self.clusters[cluster]
        self._remove_broker_queues(name)
        self._drop_mappings(name)
        self.invalidate_all()
        self._departed += 1
        if self._departed > max(self._forget_slack, len(self.brokers)):
            self._forget_departed()

    def _forget_departed(self) -> None:
        """Drop the bookkeeping kept per broker name for names gone from the table.

        The epochs, the applied-topics records and the interned QueueData of a
        broker outlive it (its name may come back). Without this, every
        broker name ever seen left them behind: a soak of 37,336 unique
        brokers grew the NameServer by about 30 MB. Run once as many names
        have departed as remain (at least ``FORGET_SLACK``), so its cost, linear in
        those tables, is constant per departure.

        Safe because a name kept by no BrokerEntry and no live entry has
        nothing that remembers its epochs: its next registration is a first
        one (its whole body applied), and from then on its epochs count anew.
        """
        self._departed = 0
        keep = self.brokers.keys() | {b.name for b in self.live.values()}
        for per_name in (self._epoch, self._removal_epoch, self._applied):
            for name in [n for n in per_name if n not in keep]:
                del per_name[name]  # type: ignore[attr-defined]
        for qd in [qd for qd in self._interned if qd[0] not in keep]:
            del self._interned[qd]

    def connection_closed(self, conn: Hashable) -> list[Removed]:
        """Drop every broker whose live entry came over ``conn``."""
        removed = []
        for key in list(self._by_conn.get(conn, ())):
            info = self.live.get(key)
            if info is not None and info.conn == conn:
                r = self.unregister_broker(info.cluster, info.addr, info.name, "connection closed")
                if r is not None:
                    removed.append(r)
        self._by_conn.pop(conn, None)
        return removed

    def scan_not_active(self, now: float) -> list[Removed]:
        """Expire brokers silent for longer than their heartbeat timeout."""
        expired = [info for info in self.live.values() if info.last_update_ms + info.timeout_ms < now]
        removed = []
        for info in expired:
            r = self.unregister_broker(info.cluster, info.addr, info.name, "heartbeat timeout")
            if r is not None:
                removed.append(r)
        return removed

    def live_brokers(self) -> list[LiveBroker]:
        """Every registered broker's liveness record (a copy of the list; entries are the table's own)."""
        return list(self.live.values())

    def heartbeat(self, cluster: str, addr: str, now: float) -> bool:
        info = self.live.get((cluster, addr))
        if info is None:
            return False
        info.last_update_ms = now
        return True

    def query_data_version(
        self, cluster: str, addr: str, version: DataVersion, now: float
    ) -> tuple[bool, DataVersion | None]:
        """(changed, stored version); refreshes liveness as 5.x does."""
        info = self.live.get((cluster, addr))
        if info is None:
            return True, None
        info.last_update_ms = now
        return info.data_version != version, info.data_version

    # ------------------------------------------------------------------
    # admin changes

    def _rewrite_perm(self, name: str, perm_of: Callable[[int], int]) -> int:
        """Change the perm of every QueueData of ``name``; the number of topics it has."""
        count, successors = 0, Successors(name)
        for topic, qmap in list(self.topic_queues.items()):
            qd = qmap.get(name)
            if qd is not None:
                count += 1
                new = perm_of(qd[3])
                if new != qd[3]:
                    self._set_queue(topic, name, (qd[0], qd[1], qd[2], new, qd[4]), successors)
        return count

    def wipe_write_perm(self, name: str) -> int:
        return self._rewrite_perm(name, lambda perm: perm & ~PERM_WRITE)

    def add_write_perm(self, name: str) -> int:
        return self._rewrite_perm(name, lambda perm: PERM_READ | PERM_WRITE)

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        qmap = self.topic_queues.get(topic)
        if qmap is None:
            return
        if cluster:
            members = self.clusters.get(cluster, {})
            rest = {name: qd for name, qd in qmap.items() if name not in members}
            if rest:
                for name in qmap.keys() - rest.keys():
                    self._note_removal(name)
                if len(rest) < len(qmap):
                    self.topic_queues[topic] = rest
                self._invalidate_topic(topic)
                return
        for name in qmap:
            self._note_removal(name)
        del self.topic_queues[topic]
        self.mappings.pop(topic, None)
        self._invalidate_topic(topic)

    def register_topic(self, topic: str, queue_datas: Iterable[QueueData]) -> None:
        """REGISTER_TOPIC_IN_NAMESRV: add queue data for known brokers only."""
        qds = list(queue_datas)
        if not qds:
            return
        if topic not in self.topic_queues:
            if any(qd[0] not in self.brokers for qd in qds):
                return
            limit = self.options.max_topics
            if limit is not None and len(self.topic_queues) >= limit:
                self.topic_table_refusals += 1
                raise TopicTableFull(len(self.topic_queues), 1, limit, exact=True)
        for qd in qds:
            if qd[0] not in self.brokers:
                return
            self._set_queue(topic, qd[0], qd)

    # ------------------------------------------------------------------
    # lists

    def all_topics(self) -> list[str]:
        if self.before:
            return [t for t, _ in self.visible_topics()]
        return list(self.topic_queues)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.clusters.get(cluster)
        if not names:
            return []
        return [t for t, qmap in self.visible_topics() if any(n in qmap for n in names)]

    def system_topics(self) -> tuple[list[str], str | None]:
        topics: list[str] = []
        for cluster, names in self.clusters.items():
            topics.append(cluster)
            topics.extend(names)
        addr = None
        for broker in self.brokers.values():
            if broker.addrs:
                addr = broker.addrs[min(broker.addrs)]
                break
        return topics, addr

    def unit_topics(self, want: int, exclude: int = 0) -> list[str]:
        """Topics whose first QueueData has all ``want`` flags and no ``exclude`` flag."""
        out = []
        for topic, qmap in self.visible_topics():
            first = next(iter(qmap.values()))
            if first[4] & want == want and not first[4] & exclude:
                out.append(topic)
        return out

    def broker_member_group(self, name: str) -> dict[int, str]:
        broker = self.brokers.get(name)
        return dict(sorted(broker.addrs.items())) if broker is not None else {}


UNIT_TOPIC_FLAGS = {
    "unit": (FLAG_UNIT, 0),
    "unit_sub": (FLAG_UNIT_SUB, 0),
    "unit_sub_ununit": (FLAG_UNIT_SUB, FLAG_UNIT),
}
