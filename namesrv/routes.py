"""The NameServer's routing table: pure state, no sockets, no clock.

Every call that depends on time takes ``now`` (milliseconds on a monotonic
clock) and connections are opaque hashable tokens, so the whole table is
driven directly by unit tests and by the request handlers alike. Semantics
follow Apache RocketMQ 5.3.3's RouteInfoManager (see the protocol reference,
section 6); where they differ from Java the docstring says why.

Route answers are cached in their encoded form, per topic, and most topics
of one cluster share one bytes object: a route body does not mention its
topic, so topics with equal queue data encode to equal bytes. A route query
is then two dict lookups.

REGISTER_BROKER lives in :mod:`namesrv.registration` (mixed in here) and
the records in :mod:`namesrv.route_model`. The state is plain dicts:
``topic_queues`` (topic -> broker name -> QueueData tuple), ``brokers``,
``clusters``, ``live``, ``filter_servers``, ``mappings``; besides them,
``_applied`` (broker name -> what its last registration wrote, see
registration.AppliedTable) and ``_epoch`` (broker name -> a counter every
change to its QueueData bumps) let an unchanged part of a re-registration
be skipped.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any

from namesrv.register_plan import TopicTableFull
from namesrv.registration import CHUNK_NAMES_SLACK, AppliedTable, RegistrationMixin
from namesrv.route_model import (
    DEFAULT_BROKER_CHANNEL_EXPIRED_MS,
    SYNC_BROKER_MEMBER_PREFIX,
    BrokerEntry,
    LiveBroker,
    QueueData,
    RegisterOutcome,
    Registration,
    Removed,
    RouteOptions,
)
from remoting import fastjson
from remoting.bodies import DataVersion
from remoting.codes import FLAG_UNIT, FLAG_UNIT_SUB, MASTER_ID, PERM_READ, PERM_WRITE

#: Departed broker names tolerated before their bookkeeping is dropped (see RouteTable._forget_departed).
FORGET_SLACK = 1024

__all__ = [
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


class RouteTable(RegistrationMixin):
    def __init__(self, options: RouteOptions | None = None) -> None:
        self.options = options or RouteOptions()
        self.topic_queues: dict[str, dict[str, QueueData]] = {}
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
        #: Per broker name, what its last topic apply wrote (registration.AppliedTable).
        self._applied: dict[str, AppliedTable] = {}
        #: Chunk digest -> its topic names, shared by the records of brokers that
        #: sent the same bytes (pruned to what records use when it doubles).
        self._chunk_names: dict[int, tuple[str, ...]] = {}
        self._chunk_names_limit = CHUNK_NAMES_SLACK
        #: Bumped by every change to topics, live entries or addresses.
        self._mutations = 0
        self._route_cache: tuple[dict[str, bytes], dict[str, bytes]] = ({}, {})
        self._shared_bodies: tuple[dict[tuple, bytes], dict[tuple, bytes]] = ({}, {})
        self._cluster_info: bytes | None = None
        #: True while a registration writes its topics in slices (namesrv.register_apply).
        self.applying = False
        #: True from a sliced registration's first write to its last step (the old state freed
        #: after its commit): it is no longer abandoned then, not even by a stop, so its answer
        #: never says "not applied" of a registration that was.
        self.must_finish = False
        #: While it does: each topic it wrote, with its queue-data map as it was before (None:
        #: absent). Queries see these instead, until its commit empties this in one step.
        self.before: dict[str, dict[str, QueueData] | None] = {}
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
        #: Route answers encoded afresh (not served from the per-topic or shared caches), for metrics.
        self.route_encodes = 0

    # ------------------------------------------------------------------
    # cache maintenance

    def invalidate_all(self) -> None:
        """Forget every encoded answer; called when broker membership changes."""
        self.generation += 1
        for d in self._route_cache:
            d.clear()
        for d in self._shared_bodies:
            d.clear()
        self._cluster_info = None

    def _invalidate_topic(self, topic: str) -> None:
        self.generation += 1
        self._route_cache[0].pop(topic, None)
        self._route_cache[1].pop(topic, None)

    def _invalidate_topics(self, topics: dict[str, Any] | list[str]) -> None:
        """Forget the encoded answers of many topics (only the cached ones cost)."""
        self.generation += 1
        self._drop_cached_routes(topics)

    def _drop_cached_routes(self, topics: dict[str, Any] | list[str]) -> None:
        """Drop cached answers without saying the answers changed (a registration writing
        behind ``before``: its commit bumps the generation once)."""
        keys = topics.keys() if isinstance(topics, dict) else set(topics)
        for cache in self._route_cache:
            for topic in cache.keys() & keys:
                del cache[topic]

    def _intern(self, qd: QueueData) -> QueueData:
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

    def _touch(self, name: str) -> None:
        """Note a change to ``name``'s QueueData: what its last registration wrote no longer holds."""
        self._epoch[name] = self._epoch.get(name, 0) + 1
        self._mutations += 1

    def _note_removal(self, name: str) -> None:
        self._removal_epoch[name] = self._removal_epoch.get(name, 0) + 1
        self._touch(name)

    def _set_queue(self, topic: str, name: str, qd: QueueData) -> None:
        qmap = self.topic_queues.get(topic)
        qd = self._intern(qd)
        if qmap is None:
            self.topic_queues[topic] = {name: qd}
        elif qmap.get(name) is not qd:
            qmap[name] = qd
        else:
            return
        self._invalidate_topic(topic)
        self._touch(name)

    def _remove_broker_queues(self, name: str) -> None:
        """Drop ``name``'s QueueData from every topic."""
        empty = []
        for topic, qmap in self.topic_queues.items():
            if name in qmap:
                del qmap[name]
                self._invalidate_topic(topic)
                if not qmap:
                    empty.append(topic)
        for topic in empty:
            del self.topic_queues[topic]
            self.mappings.pop(topic, None)
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
    # registration: see namesrv.registration

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
        elif broker.enable_acting_master and min(broker.addrs) > MASTER_ID:
            for topic, qmap in self.topic_queues.items():
                qd = qmap.get(name)
                if qd is not None and qd[3] & PERM_WRITE:
                    self._set_queue(topic, name, (qd[0], qd[1], qd[2], qd[3] & ~PERM_WRITE, qd[4]))
        if info is None and not gone:
            return None
        return Removed(cluster, name, addr, info.conn if info else None, reason)

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
                del per_name[name]
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
        count = 0
        for topic, qmap in self.topic_queues.items():
            qd = qmap.get(name)
            if qd is not None:
                count += 1
                new = perm_of(qd[3])
                if new != qd[3]:
                    self._set_queue(topic, name, (qd[0], qd[1], qd[2], new, qd[4]))
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
            for name in self.clusters.get(cluster, {}):
                if qmap.pop(name, None) is not None:
                    self._note_removal(name)
            if qmap:
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
    # queries

    def queues(self, topic: str) -> dict[str, QueueData] | None:
        """``topic``'s queue-data map as queries see it (as it was, while a registration writes it)."""
        before = self.before
        if before and topic in before:
            return before[topic]
        return self.topic_queues.get(topic)

    def visible_topics(self) -> Iterator[tuple[str, dict[str, QueueData]]]:
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

    def route_body(self, topic: str, standard: bool) -> bytes | None:
        """The encoded TopicRouteData for ``topic``, or None if it has no route."""
        body = self._route_cache[standard].get(topic)
        if body is None:
            body = self._encode_route(topic, standard, None, shared=True)
            if body is not None and not (self.before and topic in self.before):  # (an answer of the old state)
                self._route_cache[standard][topic] = body
        return body

    def route_obj(self, topic: str, order_topic_conf: str | None = None) -> dict[str, Any] | None:
        """The route as fastjson-ordered objects (for uncached variants)."""
        qmap = self.queues(topic)
        if not qmap:
            return None
        names = list(qmap)
        broker_objs = []
        for name in names:
            broker = self.brokers.get(name)
            if broker is not None:
                broker_objs.append(self._broker_route_obj(topic, broker, qmap[name]))
        if not broker_objs:
            return None
        filter_table: dict[str, list[str]] = {}
        if self.filter_servers:
            for name in names:
                broker = self.brokers.get(name)
                if broker is None:
                    continue
                for addr in broker.addrs.values():
                    servers = self.filter_servers.get((broker.cluster, addr))
                    if servers:
                        filter_table[addr] = servers
        obj: dict[str, Any] = {"brokerDatas": broker_objs, "filterServerTable": filter_table}
        if order_topic_conf is not None:
            obj["orderTopicConf"] = order_topic_conf
        obj["queueDatas"] = [
            {"brokerName": q[0], "perm": q[3], "readQueueNums": q[1], "topicSysFlag": q[4], "writeQueueNums": q[2]}
            for q in qmap.values()
        ]
        mapping = self.mappings.get(topic)
        if mapping:
            obj["topicQueueMappingByBroker"] = dict(sorted(mapping.items()))
        return obj

    def _broker_route_obj(self, topic: str, broker: BrokerEntry, qd: QueueData) -> dict[str, Any]:
        addrs = broker.addrs
        if (
            self.options.support_acting_master
            and MASTER_ID not in addrs
            and addrs
            and broker.enable_acting_master
            and not qd[3] & PERM_WRITE
            and not topic.startswith(SYNC_BROKER_MEMBER_PREFIX)
        ):
            addrs = dict(addrs)
            addrs[MASTER_ID] = addrs.pop(min(addrs))
        return broker.to_obj(addrs)

    def _encode_route(self, topic: str, standard: bool, order_topic_conf: str | None, shared: bool) -> bytes | None:
        qmap = self.queues(topic)
        if not qmap:
            return None
        signature: tuple | None = None
        if shared and topic not in self.mappings and not (
            self.options.support_acting_master and topic.startswith(SYNC_BROKER_MEMBER_PREFIX)
        ):
            signature = tuple(qmap.values())
            body = self._shared_bodies[standard].get(signature)
            if body is not None:
                return body
        obj = self.route_obj(topic, order_topic_conf)
        if obj is None:
            return None
        body = fastjson.dumps(obj, standard=standard)
        self.route_encodes += 1
        if signature is not None:
            self._shared_bodies[standard][signature] = body
        return body

    def encode_route(self, topic: str, standard: bool, order_topic_conf: str | None) -> bytes | None:
        """An uncached route (with an order conf, which is per topic)."""
        return self._encode_route(topic, standard, order_topic_conf, shared=False)

    def cluster_info_body(self) -> bytes:
        """ClusterInfo in fastjson's default (bare integer key) encoding."""
        if self._cluster_info is None:
            obj = {
                "brokerAddrTable": {name: b.to_obj() for name, b in self.brokers.items()},
                "clusterAddrTable": {c: list(names) for c, names in self.clusters.items()},
            }
            self._cluster_info = fastjson.dumps(obj)
        return self._cluster_info

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
