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
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from remoting import fastjson
from remoting.bodies import DataVersion, RegisterBody
from remoting.codes import FLAG_UNIT, FLAG_UNIT_SUB, MASTER_ID, PERM_READ, PERM_WRITE

#: (brokerName, readQueueNums, writeQueueNums, perm, topicSysFlag). Tuples are
#: interned so 320,000 (topic, broker) pairs cost a pointer each.
QueueData = tuple[str, int, int, int, int]

DEFAULT_BROKER_CHANNEL_EXPIRED_MS = 120_000
SYNC_BROKER_MEMBER_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"


@dataclass(slots=True)
class BrokerEntry:
    """BrokerData: one master/slave set, by brokerName."""

    cluster: str
    name: str
    addrs: dict[int, str]
    enable_acting_master: bool = False
    zone_name: str | None = None

    def to_obj(self, addrs: dict[int, str] | None = None) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "brokerAddrs": dict(sorted((addrs if addrs is not None else self.addrs).items())),
            "brokerName": self.name,
            "cluster": self.cluster,
            "enableActingMaster": self.enable_acting_master,
        }
        if self.zone_name is not None:
            obj["zoneName"] = self.zone_name
        return obj


@dataclass(slots=True)
class LiveBroker:
    """BrokerLiveInfo, plus what lets an unchanged re-registration skip work."""

    cluster: str
    addr: str
    name: str
    broker_id: int
    last_update_ms: float
    timeout_ms: int
    data_version: DataVersion
    conn: Hashable
    ha_server_addr: str | None
    body_digest: bytes | None = None
    topic_count: int = 0
    applied_as_writer: bool = False
    applied_epoch: int = -1


@dataclass(slots=True)
class Registration:
    """The header of a REGISTER_BROKER request."""

    cluster: str
    addr: str
    name: str
    broker_id: int
    ha_server_addr: str | None = None
    zone_name: str | None = None
    heartbeat_timeout_ms: int | None = None
    enable_acting_master: bool | None = None  # None: a pre-5.x broker


@dataclass(slots=True)
class RegisterOutcome:
    ok: bool
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(slots=True)
class Removed:
    """A broker address dropped from the table (for logging and closing)."""

    cluster: str
    name: str
    addr: str
    conn: Hashable | None
    reason: str


@dataclass
class RouteOptions:
    """NameServer options that change what the table answers."""

    support_acting_master: bool = False
    delete_topic_with_broker_registration: bool = False
    default_timeout_ms: int = DEFAULT_BROKER_CHANNEL_EXPIRED_MS


class RouteTable:
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
        self._route_cache: tuple[dict[str, bytes], dict[str, bytes]] = ({}, {})
        self._shared_bodies: tuple[dict[tuple, bytes], dict[tuple, bytes]] = ({}, {})
        self._cluster_info: bytes | None = None
        #: Bumped whenever an answer may change (every cache invalidation):
        #: the route snapshot writer compares it to know whether to write.
        self.generation = 0

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

    def _intern(self, qd: QueueData) -> QueueData:
        return self._interned.setdefault(qd, qd)

    def _note_removal(self, name: str) -> None:
        self._removal_epoch[name] = self._removal_epoch.get(name, 0) + 1

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

    def _remove_broker_queues(self, name: str, keep: Callable[[str], bool] | None = None) -> None:
        """Drop ``name``'s QueueData from every topic (unless ``keep(topic)``)."""
        empty = []
        for topic, qmap in self.topic_queues.items():
            if name in qmap and (keep is None or not keep(topic)):
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
        info = self.live.pop(key, None)
        if info is not None:
            self._unindex(key, info.conn)
        if self.filter_servers.pop(key, None) is not None:
            self.invalidate_all()
        return info

    # ------------------------------------------------------------------
    # registration

    def register_broker(
        self,
        reg: Registration,
        load_body: Callable[[], RegisterBody],
        *,
        body_digest: bytes | None,
        conn: Hashable,
        now: float,
    ) -> RegisterOutcome:
        """Apply a REGISTER_BROKER (RouteInfoManager.registerBroker, 5.x).

        ``load_body`` is called at most once, before anything changes, so a
        body that fails to parse leaves the table untouched. It is not called
        at all for the common case of a broker re-sending the very body it
        sent last time (same ``body_digest``) when nothing it registered has
        been removed since and, with deleteTopicWithBrokerRegistration, the
        table holds no topic of it that the body lacks: that registration can
        only refresh liveness.
        """
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
        skip_topics = (
            same_body
            and not register_first
            and cached is not None
            and cached.applied_as_writer == is_writer
            and cached.applied_epoch == self._removal_epoch.get(reg.name, 0)
            and not (
                self.options.delete_topic_with_broker_registration
                and is_writer
                and self._topic_count_of(reg.name) != cached.topic_count
            )
        )
        body: RegisterBody | None = None
        if not same_body or (is_writer and not skip_topics):
            body = load_body()
        if body is not None:
            sent_version = body.data_version
            topic_count = len(body.topics)
        else:
            assert cached is not None
            sent_version = cached.data_version
            topic_count = cached.topic_count

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

        members = self.clusters.setdefault(reg.cluster, {})
        if reg.name not in members:
            # A known broker name can join another cluster without any other
            # change; the cached ClusterInfo must still show the membership.
            members[reg.name] = None
            self._cluster_info = None
        acting = False if old_broker else bool(reg.enable_acting_master)
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

        if is_writer and body is not None:
            self._apply_topics(reg, broker, body, register_first, cached)

        if body is not None:
            servers = body.filter_servers
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

        if reg.broker_id != MASTER_ID:
            master_addr = broker.addrs.get(MASTER_ID)
            if master_addr is not None:
                master = self.live.get((reg.cluster, master_addr))
                if master is not None:
                    return RegisterOutcome(True, master.ha_server_addr, master_addr)
        return RegisterOutcome(True)

    def _topic_count_of(self, name: str) -> int:
        """How many topics have a QueueData for broker ``name``.

        With deleteTopicWithBrokerRegistration on, 5.x drops a writer's
        unreported topics on every registration. Every topic of an unchanged
        body is still in the table (a removal bumps the epoch), so the table
        holds topics the broker no longer reports exactly when it counts more
        of them than the body has (e.g. the option was turned on at run time,
        or REGISTER_TOPIC_IN_NAMESRV added one).
        """
        return sum(1 for qmap in self.topic_queues.values() if name in qmap)

    def _apply_topics(
        self,
        reg: Registration,
        broker: BrokerEntry,
        body: RegisterBody,
        register_first: bool,
        cached: LiveBroker | None,
    ) -> None:
        changed = register_first or cached is None or cached.data_version != body.data_version
        mask = ~PERM_WRITE if (reg.broker_id != MASTER_ID and broker.enable_acting_master) else ~0
        name = reg.name
        topic_queues = self.topic_queues
        for topic, (r, w, p, s) in body.topics.items():
            if not changed:
                qmap = topic_queues.get(topic)
                if qmap is not None and name in qmap:
                    continue
            self._set_queue(topic, name, (name, r, w, p & mask, s))
        if self.options.delete_topic_with_broker_registration and not body.mapping_infos:
            sent = body.topics
            if any(name in qmap and t not in sent for t, qmap in topic_queues.items()):
                self._remove_broker_queues(name, keep=sent.__contains__)
        if changed:
            for topic, info in body.mapping_infos.items():
                bname = info.get("bname") or name
                self.mappings.setdefault(topic, {})[str(bname)] = info
                self._invalidate_topic(topic)

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
            self.invalidate_all()
        if not broker.addrs:
            del self.brokers[name]
            members = self.clusters.get(cluster)
            if members is not None:
                members.pop(name, None)
                if not members:
                    del self.clusters[cluster]
            self._remove_broker_queues(name)
            self._drop_mappings(name)
            self.invalidate_all()
        elif broker.enable_acting_master and min(broker.addrs) > MASTER_ID:
            for topic, qmap in self.topic_queues.items():
                qd = qmap.get(name)
                if qd is not None and qd[3] & PERM_WRITE:
                    self._set_queue(topic, name, (qd[0], qd[1], qd[2], qd[3] & ~PERM_WRITE, qd[4]))
        if info is None and not gone:
            return None
        return Removed(cluster, name, addr, info.conn if info else None, reason)

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
        for qd in qds:
            if qd[0] not in self.brokers:
                return
            self._set_queue(topic, qd[0], qd)

    # ------------------------------------------------------------------
    # queries

    def route_body(self, topic: str, standard: bool) -> bytes | None:
        """The encoded TopicRouteData for ``topic``, or None if it has no route."""
        body = self._route_cache[standard].get(topic)
        if body is None:
            body = self._encode_route(topic, standard, None, shared=True)
            if body is not None:
                self._route_cache[standard][topic] = body
        return body

    def route_obj(self, topic: str, order_topic_conf: str | None = None) -> dict[str, Any] | None:
        """The route as fastjson-ordered objects (for uncached variants)."""
        qmap = self.topic_queues.get(topic)
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
        qmap = self.topic_queues.get(topic)
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
        return list(self.topic_queues)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.clusters.get(cluster)
        if not names:
            return []
        return [t for t, qmap in self.topic_queues.items() if any(n in qmap for n in names)]

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
        for topic, qmap in self.topic_queues.items():
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
