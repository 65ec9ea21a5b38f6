"""Route and cluster answers, encoded once and served as bytes until the table changes them.

A route query is the NameServer's hot path (tens of thousands a second), so
its answer is cached in its encoded form, per topic, and most topics of one
cluster share one bytes object: a route body does not mention its topic, so
topics with equal queue data encode to equal bytes. A cached route query is
then two dict lookups (:meth:`RouteAnswers.route_body`).

The cache is the route table's helper and the only writer of its own dicts:
:class:`namesrv.routes.RouteTable` holds one, hands it what it reads (the
table's dicts, which it never rebinds, and its ``queues`` view), and tells
it which answers a change makes stale (:meth:`RouteAnswers.forget` and the
like). It never changes the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from namesrv.route_model import SYNC_BROKER_MEMBER_PREFIX, BrokerEntry, QueueData, RouteOptions
from remoting import fastjson
from remoting.codes import MASTER_ID, PERM_WRITE


class RouteAnswers:
    def __init__(
        self,
        *,
        queues: Callable[[str], dict[str, QueueData] | None],
        settled: Callable[[str], bool],
        brokers: dict[str, BrokerEntry],
        clusters: dict[str, dict[str, None]],
        filter_servers: dict[tuple[str, str], list[str]],
        mappings: dict[str, dict[str, dict[str, Any]]],
        options: RouteOptions,
    ) -> None:
        #: A topic's queue-data map as queries see it, and whether that is its settled state
        #: (False while a registration written in slices holds it: its answer is not cached then).
        self.queues = queues
        self.settled = settled
        self.brokers = brokers
        self.clusters = clusters
        self.filter_servers = filter_servers
        self.mappings = mappings
        self.options = options
        #: Per topic, its encoded route: [0] fastjson's default form, [1] standard JSON.
        self._by_topic: tuple[dict[str, bytes], dict[str, bytes]] = ({}, {})
        #: Per distinct queue-data tuple, the route every topic with it shares.
        self._shared: tuple[dict[tuple[QueueData, ...], bytes], dict[tuple[QueueData, ...], bytes]] = ({}, {})
        self._cluster_info: bytes | None = None
        #: Route answers encoded afresh (not served from the per-topic or shared caches), for metrics.
        self.encodes = 0

    # ------------------------------------------------------------------
    # what the table tells it

    def forget_all(self) -> None:
        """Forget every encoded answer (broker membership or an option changed)."""
        for d in self._by_topic:
            d.clear()
        for d in self._shared:
            d.clear()
        self._cluster_info = None

    def forget(self, topic: str) -> None:
        self._by_topic[0].pop(topic, None)
        self._by_topic[1].pop(topic, None)

    def forget_topics(self, topics: dict[str, Any] | list[str]) -> None:
        """Forget the encoded answers of many topics (only the cached ones cost)."""
        keys = topics.keys() if isinstance(topics, dict) else set(topics)
        for cache in self._by_topic:
            for topic in cache.keys() & keys:
                del cache[topic]

    def forget_cluster_info(self) -> None:
        self._cluster_info = None

    # ------------------------------------------------------------------
    # answers

    def route_body(self, topic: str, standard: bool) -> bytes | None:
        """The encoded TopicRouteData for ``topic``, or None if it has no route."""
        body = self._by_topic[standard].get(topic)
        if body is None:
            body = self._encode(topic, standard, None, shared=True)
            if body is not None and self.settled(topic):  # (not an answer of the old state)
                self._by_topic[standard][topic] = body
        return body

    def encode_route(self, topic: str, standard: bool, order_topic_conf: str | None) -> bytes | None:
        """An uncached route (with an order conf, which is per topic)."""
        return self._encode(topic, standard, order_topic_conf, shared=False)

    def zone_route(self, topic: str, order_conf: str | None, zone: str) -> bytes | None:
        """5.x ZoneRouteRPCHook: keep brokers of the caller's zone (or without a master)."""
        obj = self.route_obj(topic, order_conf)
        if obj is None:
            return None
        keep, dropped = [], set()
        for bd in obj["brokerDatas"]:
            if (bd.get("zoneName") or "").lower() == zone.lower() or 0 not in bd["brokerAddrs"]:
                keep.append(bd)
            else:
                dropped.add(bd["brokerName"])
                for addr in bd["brokerAddrs"].values():
                    obj["filterServerTable"].pop(addr, None)
        obj["brokerDatas"] = keep
        obj["queueDatas"] = [q for q in obj["queueDatas"] if q["brokerName"] not in dropped]
        self.encodes += 1
        return fastjson.dumps(obj)

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
        obj: dict[str, Any] = {"brokerDatas": broker_objs, "filterServerTable": self._filter_table(names)}
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

    def cluster_info_body(self) -> bytes:
        """ClusterInfo in fastjson's default (bare integer key) encoding."""
        if self._cluster_info is None:
            obj = {
                "brokerAddrTable": {name: b.to_obj() for name, b in self.brokers.items()},
                "clusterAddrTable": {c: list(names) for c, names in self.clusters.items()},
            }
            self._cluster_info = fastjson.dumps(obj)
        return self._cluster_info

    # ------------------------------------------------------------------

    def _filter_table(self, names: list[str]) -> dict[str, list[str]]:
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
        return filter_table

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

    def _encode(self, topic: str, standard: bool, order_topic_conf: str | None, shared: bool) -> bytes | None:
        qmap = self.queues(topic)
        if not qmap:
            return None
        signature: tuple[QueueData, ...] | None = None
        if shared and topic not in self.mappings and not (
            self.options.support_acting_master and topic.startswith(SYNC_BROKER_MEMBER_PREFIX)
        ):
            signature = tuple(qmap.values())
            body = self._shared[standard].get(signature)
            if body is not None:
                return body
        obj = self.route_obj(topic, order_topic_conf)
        if obj is None:
            return None
        body = fastjson.dumps(obj, standard=standard)
        self.encodes += 1
        if signature is not None:
            self._shared[standard][signature] = body
        return body
