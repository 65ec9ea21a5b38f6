"""The admin requests Java mqadmin sends to a broker for topic, stats and connection views.

GET_TOPIC_STATS_INFO (202, ``topicStatus``), GET_TOPIC_CONFIG (351, which
5.x mqadmin asks before ``topicStatus`` and ``consumerProgress``),
VIEW_BROKER_STATS_DATA (315, ``statsAll``), GET_CONSUME_STATS (208,
``consumerProgress``, ``statsAll``'s accumulation), and the connection
lists (203, 204), answered as AdminBrokerProcessor does, bodies in Java's
shapes (:mod:`remoting.admin_bodies`). Subscription groups and offset
resets are in :mod:`broker_stub.admin_groups`; this module owns the stats
the answers are computed from and hands every handler to the processor.

Everything reads state the other modules keep (topic table, store,
consumer offsets, clients); nothing here blocks or does I/O, and every
answer is bounded by the topic's queue count or the group's members.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Hashable

from broker_stub.admin_groups import GroupAdmin
from broker_stub.clients import Subscription
from broker_stub.common import Reject
from broker_stub.config import BrokerConfig
from broker_stub.consume_stats import BrokerConsumeStats
from broker_stub.consumer_relay import ConsumerRelay
from broker_stub.consuming import Consuming
from broker_stub.message_query import MessageQuery
from broker_stub.producer_table import producer_table_body
from broker_stub.query_index import KeyIndex
from broker_stub.stats import GROUP_GET_NUMS, TOPIC_PUT_NUMS, BrokerStats
from broker_stub.store import MessageStore
from broker_stub.subgroups import SubscriptionGroups
from broker_stub.topics import SYSTEM_TOPIC_SET, TopicTable
from remoting.admin_bodies import (
    Connection,
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    TopicOffset,
    TopicStatsTable,
    encode_producer_connection,
)
from remoting.bodies import encode_topic_list
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.javahash import java_string_hash
from remoting.mqjson import MessageQueue, dumps

log = logging.getLogger("broker_stub")

_STORE_TIMESTAMP = struct.Struct(">q")
STORE_TIMESTAMP_AT = 56  # byte offset of storeTimestamp in a stored record (MessageDecoder layout)
MAX_TOPIC_LIST = 1000  # topics one GET_CONSUME_STATS may name in ``topicList``

Handler = Callable[[RemotingCommand, Hashable], RemotingCommand | None]


def phys_offset_of(msg_id: str) -> int | None:
    """The commit-log offset an offset message id names (its last 8 bytes; MessageDecoder.decodeMessageId
    reads IPv4 ids of 16 bytes and IPv6 ids of 28), or None if it is none."""
    if len(msg_id) not in (32, 56):
        return None
    try:
        return int(msg_id[-16:], 16)
    except ValueError:
        return None


def subscription_data(sub: Subscription) -> dict[str, object]:
    """SubscriptionData as fastjson writes it (filterClassSource is never serialized)."""
    tags = sorted(sub.tags)
    return {
        "classFilterMode": False,
        "codeSet": [java_string_hash(t) for t in tags],
        "expressionType": sub.expression_type,
        "subString": sub.sub_string,
        "subVersion": sub.sub_version,
        "tagsSet": tags,
        "topic": sub.topic,
    }


class BrokerAdmin:
    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicTable,
        store: MessageStore,
        consuming: Consuming,
        subgroups: SubscriptionGroups,
        *,
        peer_of: Callable[[Hashable], str | None],
        write_to: Callable[[Hashable, bytes], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        self.consuming = consuming
        self.peer_of = peer_of
        self.clock = clock
        self.stats = BrokerStats(config.brokerClusterName, self._now(), clock=self._now)
        self.groups = GroupAdmin(config, topics, store, consuming, subgroups, stats=self.stats, write_to=write_to)
        self.keys = KeyIndex(store, config.maxKeyIndexEntries,
                             enabled=lambda: config.java_settings.get("messageIndexEnable") != "false")
        self.queries = MessageQuery(self.keys, lambda key, default: int(config.java_settings.get(key, default)))
        self.broker_consume_stats = BrokerConsumeStats(
            config, topics, store, consuming, subgroups, self.stats,
            broker_addr=lambda: f"{config.brokerIP1}:{config.listenPort}", store_timestamp=self.store_timestamp,
            write_to=write_to, now=self._now)
        self.relay = ConsumerRelay(consuming.clients, write_to=write_to, peer_of=peer_of, clock=clock,
                                   prepare_direct=self._direct_request)
        consuming.on_pulled = self._pulled
        consuming.on_sent_back = self.stats.sent_back

    def _now(self) -> int:
        return int(self.clock() * 1000)

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.GET_TOPIC_STATS_INFO: self.topic_stats,
            RequestCode.GET_TOPIC_CONFIG: self.topic_config,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_stats,
            RequestCode.GET_CONSUME_STATS: self.consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.consumer_connections,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.producer_connections,
            RequestCode.GET_ALL_PRODUCER_INFO: self.all_producers,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.system_topics,
            **self.groups.handlers(),
            **self.queries.handlers(),
            **self.broker_consume_stats.handlers(),
            **self.relay.handlers(),
        }

    # ------------------------------------------------------------------
    # hooks

    def stored(self, topic: str, size: int) -> None:
        """A message was put (the put path's hook): its statistics, and its keys to index."""
        self.stats.put(topic, size)
        self.keys.touch(topic)

    def tick(self) -> None:
        """Once a second: fold the second's sends and pulls into the stats items."""
        self.stats.flush(self._now())
        self.relay.expire()

    def _pulled(self, group: str, topic: str, records: list[bytes]) -> None:
        self.stats.got(group, topic, len(records), sum(map(len, records)))

    def topic_deleted(self, topic: str) -> None:
        self.stats.topic_deleted(topic)
        self.keys.forget_topic(topic)

    def store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """getMessageStoreTimeStamp: when the message at ``offset`` was stored (-1 if it is not held)."""
        store = self.store
        if not store.min_offset(topic, queue_id) <= offset < store.max_offset(topic, queue_id):
            return -1
        counted = store.get_total
        records, _ = store.get(topic, queue_id, offset, 1, 1 << 30)
        store.get_total = counted  # a lookup, not a consumer's read
        if not records or len(records[0]) < STORE_TIMESTAMP_AT + 8:
            return -1
        return int(_STORE_TIMESTAMP.unpack_from(records[0], STORE_TIMESTAMP_AT)[0])

    # ------------------------------------------------------------------
    # topics

    def topic_stats(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """GET_TOPIC_STATS_INFO: min/max offset and last store time of every queue, and the put TPS."""
        topic = req.ext("topic") or ""
        tc = self.topics.get(topic)
        if tc is None:
            raise Reject(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        table = TopicStatsTable(topic_put_tps=self.stats.minute_tps(TOPIC_PUT_NUMS, topic, self._now()))
        name = self.config.brokerName
        for queue_id in range(max(tc.write_queue_nums, tc.read_queue_nums)):
            lo, hi = self.store.min_offset(topic, queue_id), self.store.max_offset(topic, queue_id)
            stamp = self.store_timestamp(topic, queue_id, hi - 1) if hi > 0 else 0
            table.offset_table[MessageQueue(topic, name, queue_id)] = TopicOffset(max(lo, 0), max(hi, 0), stamp)
        return response_to(req, ResponseCode.SUCCESS, body=table.encode())

    def system_topics(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305): TopicValidator's system topic set, as Java answers it
        (a fixed list, whether this broker has each topic or not; the dashboard's topic types read it)."""
        return response_to(req, ResponseCode.SUCCESS, body=encode_topic_list(SYSTEM_TOPIC_SET))

    def _direct_request(self, req: RemotingCommand) -> tuple[dict[str, str], bytes]:
        """What CONSUME_MESSAGE_DIRECTLY (309) carries to the consumer (broker_stub.consumer_relay)."""
        fields = {"brokerName": self.config.brokerName}
        tc = self.topics.get(req.ext("topic") or "")
        if tc is not None:
            fields["topicSysFlag"] = str(tc.topic_sys_flag)
        group = self.groups.subgroups.get(req.ext("consumerGroup") or "")
        if group is not None:
            fields["groupSysFlag"] = str(group.get("groupSysFlag") or 0)
        msg_id = req.ext("msgId") or ""
        phys = phys_offset_of(msg_id)
        record = self.store.find_by_phys(phys) if phys is not None else None
        if record is None:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"no message with the offset message id {msg_id[:64]} in this broker")
        return fields, record

    def topic_config(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """GET_TOPIC_CONFIG: a TopicConfigAndQueueMapping (no static-topic mapping here, so just the config)."""
        topic = req.ext("topic") or ""
        tc = self.topics.get(topic)
        if tc is None:
            raise Reject(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        return response_to(req, ResponseCode.SUCCESS, body=dumps(tc.to_obj()))

    # ------------------------------------------------------------------
    # stats

    def view_stats(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        name, key = req.ext("statsName") or "", req.ext("statsKey") or ""
        data = self.stats.view(name, key, self._now())
        if data is None:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        return response_to(req, ResponseCode.SUCCESS, body=data.encode())

    def consume_stats(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """GET_CONSUME_STATS: per queue of the group's topics, broker and consumer offsets, last consumed time."""
        group = req.ext("consumerGroup") or ""
        stats = ConsumeStats()
        now = self._now()
        name = self.config.brokerName
        offsets = self.consuming.offsets
        for topic in self._consume_stats_topics(group, req.ext("topic"), req.ext("topicList")):
            tc = self.topics.get(topic)
            if tc is None:
                continue
            for queue_id in range(tc.read_queue_nums):
                broker_offset = max(self.store.max_offset(topic, queue_id), 0)
                consumer_offset = max(offsets.get((group, topic, queue_id), -1), 0)
                last = self.store_timestamp(topic, queue_id, consumer_offset - 1) if consumer_offset > 0 else 0
                stats.offset_table[MessageQueue(topic, name, queue_id)] = OffsetWrapper(
                    broker_offset, consumer_offset, consumer_offset, max(last, 0)
                )
            stats.consume_tps += self.stats.minute_tps(GROUP_GET_NUMS, f"{topic}@{group}", now)
        return response_to(req, ResponseCode.SUCCESS, body=stats.encode())

    def _consume_stats_topics(self, group: str, topic: str | None, topic_list: str | None) -> list[str]:
        """getTopicsForCollectingConsumeStats: the listed topics; else the one given or every topic the group
        has offsets on, less those its online consumers do not subscribe to."""
        listed = [t for t in (topic_list or "").split(";") if t.strip()][:MAX_TOPIC_LIST]
        if listed:
            return listed
        if topic and topic.strip():
            topics = [topic]
        else:
            topics = sorted({t for (g, t, _q) in self.consuming.offsets if g == group})
        info = self.consuming.clients.group(group)
        if info is not None and info.subscriptions:
            topics = [t for t in topics if t in info.subscriptions]
        return topics

    # ------------------------------------------------------------------
    # connections

    def _connections(self, members: list[tuple[str, Hashable]]) -> list[Connection]:
        clients = self.consuming.clients.clients
        out = []
        for client_id, conn in members:
            client = clients.get(client_id)
            out.append(Connection(client_id, self.peer_of(conn) or "", client.language if client else "JAVA",
                                  client.version if client else 0))
        return out

    def consumer_connections(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        group = req.ext("consumerGroup") or ""
        info = self.consuming.clients.group(group)
        if info is None:
            raise Reject(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        body = ConsumerConnection(
            self._connections(list(info.clients.items())),
            {topic: subscription_data(sub) for topic, sub in info.subscriptions.items()},
            info.consume_type, info.message_model, info.consume_from_where,
        )
        return response_to(req, ResponseCode.SUCCESS, body=body.encode())

    def producer_connections(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        group = req.ext("producerGroup") or ""
        members = [(cid, c.conn) for cid, c in self.consuming.clients.producers_of(group)]
        if not members:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        return response_to(req, ResponseCode.SUCCESS, body=encode_producer_connection(self._connections(members)))

    def all_producers(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """GET_ALL_PRODUCER_INFO: every live producer, by group (:mod:`broker_stub.producer_table`)."""
        return response_to(req, ResponseCode.SUCCESS, body=producer_table_body(self.consuming.clients, self.peer_of))
