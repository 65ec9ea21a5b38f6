"""Where a consumer reads from and what it has consumed: Java's ``RemoteBrokerOffsetStore``.

A helper a :class:`simclient.consumer.SimConsumer` holds, and the only
writer of the offset table: the node of a broker group a request goes to
(``findBrokerAddressInSubscribe``: the asked id, else the next one up for a
slave, else any node of the group), the in-memory offset table, commits
(oneway UPDATE_CONSUMER_OFFSET to the master, or to a slave when the group
has none), reading a group's offset back (QUERY_CONSUMER_OFFSET: -1 when
the broker has none) and where a new queue starts (``computePullFromWhere``
with ``consumeFromWhere``). It reads the consumer's broker addresses and
asks it for a route through the callback it is handed.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Container

from remoting.codes import MASTER_ID, ResponseCode
from remoting.command import RemotingCommand
from simclient import consumer_wire as cw
from simclient.consume_stats import ConsumeStats
from simclient.consumer_options import ConsumerOptions
from simclient.pool import ClientPool, RemotingError
from simclient.rebalance import MessageQueue

OFFSET_TIMEOUT = 5.0  # s, as RemoteBrokerOffsetStore's 1000 * 5


class OffsetStore:
    def __init__(
        self,
        options: ConsumerOptions,
        pool: ClientPool,
        stats: ConsumeStats,
        broker_addrs: dict[str, dict[int, str]],
        update_route: Callable[[str], Awaitable[bool]],
    ) -> None:
        self.options = options
        self.pool = pool
        self.stats = stats
        self.broker_addrs = broker_addrs  # the consumer's, by broker name (read only)
        self.update_route = update_route
        self.offsets: dict[MessageQueue, int] = {}

    def find_subscribe_addr(self, broker: str, broker_id: int, only_this: bool) -> tuple[str, bool, int] | None:
        """``findBrokerAddressInSubscribe``: (address, is a slave, node id) or None."""
        addrs = self.broker_addrs.get(broker)
        if not addrs:
            return None
        if broker_id in addrs:
            return addrs[broker_id], broker_id != MASTER_ID, broker_id
        if broker_id != MASTER_ID and broker_id + 1 in addrs:
            return addrs[broker_id + 1], True, broker_id + 1
        if not only_this:
            first = min(addrs)
            return addrs[first], first != MASTER_ID, first
        return None

    async def subscribe_addr(self, mq: MessageQueue, broker_id: int, only_this: bool) -> tuple[str, bool, int] | None:
        """:meth:`find_subscribe_addr`, after a route update when the group has no such node."""
        found = self.find_subscribe_addr(mq[1], broker_id, only_this)
        if found is None:
            await self.update_route(mq[0])
            found = self.find_subscribe_addr(mq[1], broker_id, False)
        return found

    def get(self, mq: MessageQueue) -> int | None:
        """``mq``'s offset in memory (None: none yet)."""
        return self.offsets.get(mq)

    def forget(self, mq: MessageQueue) -> int | None:
        """Drop ``mq``'s offset (``removeOffset``); what it was."""
        return self.offsets.pop(mq, None)

    def update_offset(self, mq: MessageQueue, offset: int, *, increase_only: bool) -> None:
        old = self.offsets.get(mq)
        if old is None or not increase_only or offset > old:
            self.offsets[mq] = offset

    async def commit(self, mq: MessageQueue, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET oneway to the master (or any node of the group)."""
        found = await self.subscribe_addr(mq, MASTER_ID, False)
        if found is None:
            return
        cmd = cw.update_consumer_offset(self.options.group, mq[0], mq[1], mq[2], offset)
        try:
            await self.pool.invoke_oneway(found[0], cmd, OFFSET_TIMEOUT)
            self.stats.offset_commits += 1
        except RemotingError:
            pass

    async def persist_all(self, owned: Container[MessageQueue]) -> None:
        """``persistAll``: commit each owned queue's offset; forget offsets of queues no longer owned."""
        for mq in list(self.offsets):
            offset = self.offsets.get(mq)
            if offset is None:
                continue
            if mq in owned:
                await self.commit(mq, offset)
            else:
                self.offsets.pop(mq, None)

    async def _read_offset_from_store(self, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET: the committed offset, -1 when the broker has none, -2 on failure."""
        found = await self.subscribe_addr(mq, MASTER_ID, True)
        if found is None:
            return -2
        cmd = cw.query_consumer_offset(self.options.group, mq[0], mq[1], mq[2])
        try:
            resp = await self.pool.invoke(found[0], cmd, OFFSET_TIMEOUT)
        except RemotingError:
            return -2
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        if resp.code != ResponseCode.SUCCESS:
            return -2
        try:
            offset = int(resp.ext("offset") or "")
        except ValueError:
            return -2
        self.update_offset(mq, offset, increase_only=False)
        return offset

    async def _admin_offset(self, mq: MessageQueue, cmd: RemotingCommand) -> int:
        """GET_MAX_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP to the master (``findBrokerAddressInPublish``); -1 on failure."""
        addr = self.broker_addrs.get(mq[1], {}).get(MASTER_ID)
        if addr is None:
            await self.update_route(mq[0])
            addr = self.broker_addrs.get(mq[1], {}).get(MASTER_ID)
        if addr is None:
            return -1
        try:
            resp = await self.pool.invoke(addr, cmd, self.options.mq_client_api_timeout)
        except RemotingError:
            return -1
        if resp.code != ResponseCode.SUCCESS:
            return -1
        try:
            return int(resp.ext("offset") or "")
        except ValueError:
            return -1

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """``RebalancePushImpl.computePullFromWhereWithException``; -1 when it cannot be known now."""
        last = await self._read_offset_from_store(mq)
        if last >= 0:
            return last
        if last != -1:
            return -1
        topic, broker, qid = mq
        retry = topic.startswith(cw.RETRY_GROUP_TOPIC_PREFIX)
        how = self.options.consume_from
        if how == "first_offset":
            return 0
        if how == "last_offset":
            return 0 if retry else await self._admin_offset(mq, cw.get_max_offset(topic, broker, qid))
        if retry:
            return await self._admin_offset(mq, cw.get_max_offset(topic, broker, qid))
        stamp = self.options.consume_timestamp_ms
        if stamp is None:
            stamp = int((time.time() - 1800) * 1000)
        return await self._admin_offset(mq, cw.search_offset(topic, broker, qid, stamp))


__all__ = ["OFFSET_TIMEOUT", "OffsetStore"]
