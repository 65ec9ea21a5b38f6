"""GET_BROKER_CONSUME_STATS (317): every consumer group's progress on this broker (``brokerConsumeStats``).

Answered as a 5.3.3 broker's fetchAllConsumeStatsInBroker does: for each
subscription group (in the order Java's ConcurrentHashMap of groups
iterates them), a ConsumeStats per topic the group has committed offsets
on (in HashSet order), skipping topics that no longer exist, topics its
online consumers do not subscribe to, and with ``isOrder=true`` topics that
are not ordered; each lists every write queue's broker offset, committed
offset and the store time of the last consumed message, with
``pullOffset`` 0 (so ``totalInflightDiff`` is minus the committed total, as
5.3.3 answers). ``mqadmin brokerConsumeStats`` prints a row per queue whose
last consumed message has a store time, then ``Diff Total``.

The answer can be large (up to the 100,000 committed offsets the broker
keeps, times the queues of their topics), so it is built in a system task
that yields to the event loop every ``ROWS_PER_STEP`` queues and sent when
done (the connection's other requests go on meanwhile: answers are matched
by opaque). At most ``MAX_RUNNING`` are built at once; beyond, SYSTEM_BUSY.
One answer lists at most ``MAX_ROWS`` queues (Java has no such bound):
beyond, SYSTEM_ERROR saying so, rather than a total that leaves some out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable

import trio

from broker_stub.common import Reject, ext_bool
from broker_stub.config import BrokerConfig
from broker_stub.consuming import Consuming
from broker_stub.stats import GROUP_GET_NUMS, BrokerStats
from broker_stub.store import MessageStore
from broker_stub.subgroups import SubscriptionGroups
from broker_stub.topics import TopicTable
from remoting.admin_bodies import ConsumeStats, OffsetWrapper
from remoting.clip import clip
from remoting.codec import encode
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.javahash import concurrent_table_size, hash_order, table_size
from remoting.mqjson import MessageQueue, dumps

log = logging.getLogger("broker_stub")

ROWS_PER_STEP = 500
MAX_RUNNING = 4
#: Queues one answer lists at most (about 150 bytes each); beyond, SYSTEM_ERROR rather than a partial total.
MAX_ROWS = 500_000
#: SubscriptionGroupManager's table: new ConcurrentHashMap<>(1024).
GROUP_TABLE_CAPACITY = 1024

Handler = Callable[[RemotingCommand, Hashable], RemotingCommand | None]


class TooManyRows(Exception):
    """The answer would list more than ``MAX_ROWS`` queues."""


class BrokerConsumeStats:
    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicTable,
        store: MessageStore,
        consuming: Consuming,
        subgroups: SubscriptionGroups,
        stats: BrokerStats,
        *,
        broker_addr: Callable[[], str],
        store_timestamp: Callable[[str, int, int], int],
        write_to: Callable[[Hashable, bytes], bool],
        now: Callable[[], int],
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        self.consuming = consuming
        self.subgroups = subgroups
        self.stats = stats
        self.broker_addr = broker_addr
        self.store_timestamp = store_timestamp
        self.write_to = write_to
        self.now = now
        self.running = 0

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.GET_BROKER_CONSUME_STATS: self.request}

    def request(self, req: RemotingCommand, conn: Hashable) -> None:
        if self.running >= MAX_RUNNING:
            raise Reject(ResponseCode.SYSTEM_BUSY, f"{MAX_RUNNING} consume stats are being collected; try again")
        self.running += 1
        trio.lowlevel.spawn_system_task(self._answer, req, conn, name="broker-consume-stats")

    async def _answer(self, req: RemotingCommand, conn: Hashable) -> None:
        try:
            try:
                resp = response_to(req, ResponseCode.SUCCESS, body=await self.build(ext_bool(req, "isOrder")))
            except TooManyRows as exc:
                resp = response_to(req, ResponseCode.SYSTEM_ERROR, str(exc))
            except Exception as exc:  # a bug must not end the broker: this request fails, one line logged
                log.warning("GET_BROKER_CONSUME_STATS failed: %s: %s", type(exc).__name__, clip(exc))
                resp = response_to(req, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {clip(exc)}")
            if not req.flag & 2:
                self.write_to(conn, encode(resp))
        finally:
            self.running -= 1

    async def build(self, is_order: bool) -> bytes:
        """The ConsumeStatsList body (fastjson's field order), built a step at a time."""
        by_group: dict[str, dict[str, None]] = {}  # group -> its topics, in the offset table's order
        for group, topic, _queue in list(self.consuming.offsets):
            by_group.setdefault(group, {})[topic] = None
        groups = hash_order(list(self.subgroups.table), concurrent_table_size(GROUP_TABLE_CAPACITY))
        parts: list[str] = []
        total_diff = total_inflight = 0
        rows = listed = 0
        for group in groups:
            topics = list(by_group.get(group, ()))
            stats_texts: list[str] = []
            for topic in hash_order(topics, table_size(len(topics))):
                stats = self._topic_stats(group, topic, is_order)
                if stats is None:
                    continue
                total_diff += stats.total_diff()
                total_inflight += sum(o.pull_offset - o.consumer_offset for o in stats.offset_table.values())
                stats_texts.append(stats.encode().decode())
                rows += len(stats.offset_table)
                listed += len(stats.offset_table)
                if listed > MAX_ROWS:
                    raise TooManyRows(f"the consume stats of this broker list more than {MAX_ROWS} queues")
                if rows >= ROWS_PER_STEP:
                    rows = 0
                    await trio.sleep(0)
            parts.append(f"{{{dumps(group).decode()}:[{','.join(stats_texts)}]}}")
        return (f'{{"brokerAddr":{dumps(self.broker_addr()).decode()},"consumeStatsList":[{",".join(parts)}],'
                f'"totalDiff":{total_diff},"totalInflightDiff":{total_inflight}}}').encode()

    def _topic_stats(self, group: str, topic: str, is_order: bool) -> ConsumeStats | None:
        tc = self.topics.get(topic)
        if tc is None or (is_order and not tc.order):
            return None
        info = self.consuming.clients.group(group)
        if info is not None and info.subscriptions and topic not in info.subscriptions:
            return None  # the group's consumers subscribe to other topics
        stats = ConsumeStats()
        name = self.config.brokerName
        offsets = self.consuming.offsets
        for queue_id in range(tc.write_queue_nums):
            broker_offset = max(self.store.max_offset(topic, queue_id), 0)
            consumer_offset = max(offsets.get((group, topic, queue_id), -1), 0)
            last = self.store_timestamp(topic, queue_id, consumer_offset - 1) if consumer_offset > 0 else 0
            stats.offset_table[MessageQueue(topic, name, queue_id)] = OffsetWrapper(
                broker_offset, consumer_offset, 0, max(last, 0))
        stats.consume_tps = self.stats.minute_tps(GROUP_GET_NUMS, f"{topic}@{group}", self.now())
        return stats


__all__ = ["BrokerConsumeStats"]
