"""Producers and consumers known to the broker, from their HEART_BEATs.

What a Java broker's ProducerManager/ConsumerManager keep and what the
stub needs of it: which client ids belong to a consumer group
(GET_CONSUMER_LIST_BY_GROUP), each group's subscriptions (tag filtering of
pulls that do not carry their own subscription), and the queue locks of
orderly consumers (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ). A client disappears
with the connection its heartbeats came over, as in Java. Pure state: no
sockets, the clock is injected.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from remoting.names import is_legal_group

MAX_CLIENTS = 10_000
MAX_GROUPS = 10_000  # consumer groups known at once; a heartbeat naming more new ones is cut short
MAX_LOCKS = 100_000
LOCK_MAX_LIVE_MS = 60_000  # Java: rocketmq.broker.rebalance.lockMaxLiveTime
SUB_ALL = "*"
TAG_TYPE = "TAG"


@dataclass(frozen=True, slots=True)
class Subscription:
    """A consumer's subscription to one topic (SubscriptionData, tag type only)."""

    topic: str
    sub_string: str = SUB_ALL
    tags: frozenset[str] = frozenset()  # empty: every message
    expression_type: str = TAG_TYPE
    sub_version: int = 0

    @property
    def is_tag_type(self) -> bool:
        return self.expression_type in ("", TAG_TYPE)


def parse_subscription(topic: str, sub_string: str | None, expression_type: str | None = None, sub_version: int = 0) -> Subscription:
    """FilterAPI.build: ``*`` or empty means all, else tags split on ``||``."""
    kind = expression_type or TAG_TYPE
    text = (sub_string or "").strip()
    if kind != TAG_TYPE or not text or text == SUB_ALL:
        return Subscription(topic, text or SUB_ALL, frozenset(), kind, sub_version)
    tags = frozenset(t.strip() for t in text.split("||") if t.strip())
    return Subscription(topic, text, tags, kind, sub_version)


def _subscription_from_json(item: Any) -> Subscription | None:
    if not isinstance(item, dict) or not item.get("topic"):
        return None
    try:
        version = int(item.get("subVersion") or 0)
    except (TypeError, ValueError):
        version = 0
    return parse_subscription(str(item["topic"]), item.get("subString"), item.get("expressionType"), version)


@dataclass
class ConsumerGroup:
    """One consumer group: its clients (id -> connection) and merged subscriptions."""

    name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    clients: OrderedDict[str, Hashable] = field(default_factory=OrderedDict)
    subscriptions: dict[str, Subscription] = field(default_factory=dict)


@dataclass
class Client:
    conn: Hashable
    producer_groups: set[str] = field(default_factory=set)
    consumer_groups: set[str] = field(default_factory=set)
    language: str = "JAVA"  # of its latest heartbeat's header: what connection lists report
    version: int = 0
    last_update: int = 0  # ms, its latest heartbeat (the producer table's lastUpdateTimestamp)


class ClientTable:
    def __init__(self, clock_ms: Callable[[], int] | None = None) -> None:
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.clients: OrderedDict[str, Client] = OrderedDict()
        self.groups: dict[str, ConsumerGroup] = {}
        self._heartbeat_fingerprints: dict[str, int] = {}
        # (group, topic, brokerName, queueId) -> (clientId, last lock time ms)
        self.locks: OrderedDict[tuple[str, str, str, int], tuple[str, int]] = OrderedDict()

    # ------------------------------------------------------------------
    # heartbeats

    def heartbeat(
        self, data: dict[str, Any], conn: Hashable, *, language: str = "JAVA", version: int = 0
    ) -> tuple[list[str], bool, set[str]]:
        """Apply one HeartbeatData; returns (consumer groups in it, subscriptions changed,
        groups whose membership changed: joined or left by this client)."""
        client_id = str(data["clientID"])
        client = self.clients.pop(client_id, None) or Client(conn)
        client.conn = conn  # a reconnected client: only its newest connection counts
        client.language, client.version = language, version
        client.last_update = self.clock_ms()
        client.producer_groups = {  # a name that is no legal group name is not registered (Validators.checkGroup)
            str(p["groupName"]) for p in _list(data.get("producerDataSet"))
            if isinstance(p, dict) and is_legal_group(p.get("groupName"))
        }
        fingerprint = _int(data.get("heartbeatFingerprint"))
        without_sub = data.get("withoutSub") is True
        groups: list[str] = []
        changed: set[str] = set()
        sub_changed = False
        for item in _list(data.get("consumerDataSet")):
            if not isinstance(item, dict) or not is_legal_group(item.get("groupName")):
                continue  # as 5.3.3: no subscription group for an illegal name, so the consumer is skipped
            name = str(item["groupName"])
            if name not in self.groups and len(self.groups) >= MAX_GROUPS:
                continue
            groups.append(name)
            group = self.groups.get(name) or ConsumerGroup(name)
            self.groups[name] = group
            group.consume_type = str(item.get("consumeType") or group.consume_type)
            group.message_model = str(item.get("messageModel") or group.message_model)
            group.consume_from_where = str(item.get("consumeFromWhere") or group.consume_from_where)
            if group.clients.get(client_id) != conn:
                changed.add(name)
            group.clients[client_id] = conn
            if fingerprint:
                previous = self._heartbeat_fingerprints.get(name)
                sub_changed |= previous is not None and previous != fingerprint
                self._heartbeat_fingerprints[name] = fingerprint
            if not without_sub:
                subs = [s for s in map(_subscription_from_json, _list(item.get("subscriptionDataSet"))) if s]
                group.subscriptions = _merge_subscriptions(group.subscriptions, subs)
        for name in client.consumer_groups - set(groups):
            self._leave(name, client_id)
            changed.add(name)
        client.consumer_groups = set(groups)
        self.clients[client_id] = client
        while len(self.clients) > MAX_CLIENTS:
            old_id, old = self.clients.popitem(last=False)
            for name in old.consumer_groups:
                self._leave(name, old_id)
        return groups, sub_changed if fingerprint else True, changed

    def unregister(self, client_id: str, producer_group: str | None, consumer_group: str | None) -> set[str]:
        """UNREGISTER_CLIENT; returns the consumer groups the client left."""
        client = self.clients.get(client_id)
        if client is None:
            return set()
        left: set[str] = set()
        if producer_group:
            client.producer_groups.discard(producer_group)
        if consumer_group and consumer_group in client.consumer_groups:
            client.consumer_groups.discard(consumer_group)
            self._leave(consumer_group, client_id)
            left.add(consumer_group)
        if not producer_group and not consumer_group or not client.producer_groups and not client.consumer_groups:
            for name in client.consumer_groups:
                self._leave(name, client_id)
            left |= client.consumer_groups
            del self.clients[client_id]
        return left

    def connection_closed(self, conn: Hashable) -> set[str]:
        """Forget the clients whose heartbeats came over a closed connection (Java does the same);
        returns the consumer groups they were in."""
        left: set[str] = set()
        for client_id in [cid for cid, c in self.clients.items() if c.conn == conn]:
            for name in self.clients.pop(client_id).consumer_groups:
                self._leave(name, client_id)
                left.add(name)
        return left

    def _leave(self, group_name: str, client_id: str) -> None:
        group = self.groups.get(group_name)
        if group is None:
            return
        group.clients.pop(client_id, None)
        if not group.clients:
            del self.groups[group_name]
            self._heartbeat_fingerprints.pop(group_name, None)

    # ------------------------------------------------------------------
    # queries

    def consumer_ids(self, group: str) -> list[str]:
        info = self.groups.get(group)
        return list(info.clients) if info else []

    def connections_of(self, group: str) -> list[Hashable]:
        info = self.groups.get(group)
        return list(dict.fromkeys(info.clients.values())) if info else []

    def subscription(self, group: str, topic: str) -> Subscription | None:
        info = self.groups.get(group)
        return info.subscriptions.get(topic) if info else None

    def has_group(self, group: str) -> bool:
        return group in self.groups

    def groups_of_topic(self, topic: str) -> set[str]:
        return {name for name, g in self.groups.items() if topic in g.subscriptions}

    def group(self, name: str) -> ConsumerGroup | None:
        return self.groups.get(name)

    def producers_of(self, group: str) -> list[tuple[str, Client]]:
        """(client id, client) of every live producer that heartbeated ``group`` (ProducerManager's table)."""
        return [(cid, c) for cid, c in self.clients.items() if group in c.producer_groups]

    # ------------------------------------------------------------------
    # orderly consumption: queue locks (RebalanceLockManager)

    def try_lock(self, group: str, client_id: str, queues: Iterable[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
        """Lock each (topic, brokerName, queueId) for ``client_id`` unless another live client holds it."""
        now = self.clock_ms()
        locked = []
        for topic, broker, queue_id in queues:
            key = (group, topic, broker, queue_id)
            holder = self.locks.get(key)
            if holder is None or holder[0] == client_id or now - holder[1] > LOCK_MAX_LIVE_MS:
                self.locks[key] = (client_id, now)
                self.locks.move_to_end(key)
                locked.append((topic, broker, queue_id))
        while len(self.locks) > MAX_LOCKS:
            self.locks.popitem(last=False)
        return locked

    def unlock(self, group: str, client_id: str, queues: Iterable[tuple[str, str, int]]) -> None:
        for topic, broker, queue_id in queues:
            key = (group, topic, broker, queue_id)
            holder = self.locks.get(key)
            if holder is not None and holder[0] == client_id:
                del self.locks[key]


def _merge_subscriptions(old: dict[str, Subscription], subs: list[Subscription]) -> dict[str, Subscription]:
    """ConsumerGroupInfo.updateSubscription: a topic's subscription is replaced only by a newer version
    (members of a group heartbeat their own subVersions; the newest wins, so none is told its
    subscription is not the latest), and topics the heartbeat no longer lists are dropped."""
    merged: dict[str, Subscription] = {}
    for sub in subs:
        prev = old.get(sub.topic)
        merged[sub.topic] = sub if prev is None or sub.sub_version > prev.sub_version else prev
    return merged


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
