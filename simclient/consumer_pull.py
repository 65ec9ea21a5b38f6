"""Pulling and consuming: one long-polling pull loop per owned queue, and the consume service.

A helper a :class:`simclient.consumer.SimConsumer` holds, after
``DefaultMQPushConsumerImpl.pullMessage`` and
``ConsumeMessageConcurrentlyService``: flow control at
``pullThresholdForQueue`` waiting messages, PULL_MESSAGE with the suspend
flag (and the commit offset when the node is the master), the answer's
``suggestWhichBrokerId`` for the next pull, client-side tag filtering,
OFFSET_ILLEGAL dropping the queue; consumption where pulled (no delay, no
failures) or ``consume_threads`` at a time, a failed one sent back
(CONSUMER_SEND_MSG_BACK) or retried locally 5 s later. It owns which node
each queue is pulled from and the consume threads; offsets are the offset
store's (:mod:`simclient.consumer_offsets`), and the consumer's own state
changes only through the callbacks it hands over (start a task, a queue
whose offset moved).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

import trio

from remoting.codes import MASTER_ID, ResponseCode
from simclient import consumer_wire as cw
from simclient.consume_records import ConsumeRecord
from simclient.consume_stats import ConsumeStats
from simclient.consumer_offsets import OffsetStore
from simclient.consumer_options import ConsumerOptions
from simclient.consumer_wire import Subscription
from simclient.decode import DecodeError, Pulled, decode_pulled
from simclient.pool import ClientPool, RemotingError
from simclient.process_queue import ProcessQueue
from simclient.rebalance import MessageQueue
from simclient.ticker import sleep_until

log = logging.getLogger("simclient.consumer")

FLOW_CONTROL_DELAY = 0.05  # PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL
BROKER_FLOW_CONTROL_DELAY = 0.02  # PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL
LOCAL_RETRY_DELAY = 5.0  # ConsumeMessageConcurrentlyService.submitConsumeRequestLater
CONSUME_CONCURRENTLY_MAX_SPAN = 2000
SEND_BACK_TIMEOUT = 5.0
FLOW_CONTROL_CODE = 215  # ResponseCode.FLOW_CONTROL


class PullService:
    def __init__(
        self,
        options: ConsumerOptions,
        pool: ClientPool,
        stats: ConsumeStats,
        offsets: OffsetStore,
        subs: dict[str, Subscription],
        broker_addrs: dict[str, dict[int, str]],
        *,
        consumer_id: int,
        rng: random.Random,
        clock: Callable[[], float],
        now: Callable[[], float],
        emit: Callable[[ConsumeRecord], None],
        spawn: Callable[..., None],
        offset_moved: Callable[[MessageQueue, ProcessQueue], None],
    ) -> None:
        self.options = options
        self.pool = pool
        self.stats = stats
        self.offsets = offsets
        self.subs = subs  # the consumer's subscriptions, by topic (read only)
        self.broker_addrs = broker_addrs  # the consumer's, by broker name (read only)
        self.consumer_id = consumer_id
        self.rng = rng
        self.clock = clock
        self.now = now  # seconds since the consumer's t0, for records
        self.emit = emit
        self.spawn = spawn  # start a task in the consumer's nursery
        self.offset_moved = offset_moved  # OFFSET_ILLEGAL: the consumer gives the queue up and rebalances
        #: The node each queue is pulled from next (``suggestWhichBrokerId``).
        self.pull_from: dict[MessageQueue, int] = {}
        self.consume_limiter = trio.CapacityLimiter(options.consume_threads)

    async def pull_loop(self, pq: ProcessQueue, delay: float) -> None:
        """Pull ``pq``'s queue until it is dropped (started by the consumer for each queue it takes)."""
        while not pq.dropped:
            if delay > 0:
                await sleep_until(self.clock() + delay)
                if pq.dropped:
                    return
            delay = await self._pull_once(pq)

    async def _pull_once(self, pq: ProcessQueue) -> float:
        """One pull and what its answer asks for; the delay before the next one."""
        opts = self.options
        mq = pq.mq
        if pq.count > opts.pull_threshold_for_queue or pq.span > CONSUME_CONCURRENTLY_MAX_SPAN:
            return FLOW_CONTROL_DELAY
        sub = self.subs.get(mq[0])
        if sub is None:
            return opts.pull_delay_on_exception
        found = await self.offsets.subscribe_addr(mq, self.pull_from.get(mq, MASTER_ID), False)
        if found is None:
            self.stats.pull_errors += 1
            return opts.pull_delay_on_exception
        addr, is_slave, node = found
        commit = self.offsets.get(mq) or 0
        flag = cw.PULL_FLAG_SUSPEND | (cw.PULL_FLAG_COMMIT_OFFSET if commit > 0 and not is_slave else 0)
        cmd = cw.pull_message(
            group=opts.group, topic=mq[0], broker_name=mq[1], queue_id=mq[2], offset=pq.next_offset,
            max_nums=opts.pull_batch_size, sys_flag=flag, commit_offset=commit if commit > 0 else 0,
            suspend_ms=opts.broker_suspend_max_ms, sub_version=sub.version,
        )
        self.stats.pulls += 1
        self.stats.pulls_from_slave += is_slave
        pq.last_pull_ms = int(time.time() * 1000)
        try:
            resp = await self.pool.invoke(addr, cmd, opts.consumer_timeout_when_suspend)
        except RemotingError:
            self.stats.pull_errors += 1
            return opts.pull_delay_on_exception
        if pq.dropped:
            return 0.0
        code = resp.code
        if code not in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
                        ResponseCode.PULL_OFFSET_MOVED):
            self.stats.pull_refused += 1
            log.debug("consumer %d: pull of %s refused by %s: %s %s", self.consumer_id, mq, addr, code, resp.remark)
            return BROKER_FLOW_CONTROL_DELAY if code == FLOW_CONTROL_CODE else opts.pull_delay_on_exception
        try:
            next_begin = int(resp.ext("nextBeginOffset") or "")
            suggest = int(resp.ext("suggestWhichBrokerId") or "0")
        except ValueError:
            self.stats.pull_refused += 1
            return opts.pull_delay_on_exception
        self.pull_from[mq] = suggest  # updatePullFromWhichNode
        if code == ResponseCode.SUCCESS:
            try:
                msgs = decode_pulled(resp.body)
            except DecodeError as exc:
                log.warning("consumer %d: bad pull answer from %s: %s", self.consumer_id, addr, exc)
                self.stats.pull_refused += 1
                return opts.pull_delay_on_exception
            self.stats.pulls_found += 1
            tags = sub.tags
            if tags:
                msgs = [m for m in msgs if m.tags is not None and m.tags in tags]
            pq.next_offset = next_begin
            if msgs:
                pq.put(msgs)
                self._dispatch(pq, msgs, node)
            return 0.0
        if code == ResponseCode.PULL_OFFSET_MOVED:  # OFFSET_ILLEGAL
            pq.next_offset = next_begin
            pq.dropped = True
            self.offsets.update_offset(mq, next_begin, increase_only=False)
            await self.offsets.commit(mq, next_begin)
            self.offset_moved(mq, pq)
            return 0.0
        pq.next_offset = next_begin  # NO_NEW_MSG / NO_MATCHED_MSG
        if pq.count == 0:  # correctTagsOffset
            self.offsets.update_offset(mq, next_begin, increase_only=True)
        return 0.0

    def _dispatch(self, pq: ProcessQueue, msgs: list[Pulled], node: int) -> None:
        if self.options.inline:
            for m in msgs:
                self._record(pq, m, node, "ok")
            offset = pq.remove([m.queue_offset for m in msgs])
            if offset >= 0:
                self.offsets.update_offset(pq.mq, offset, increase_only=True)
            return
        for m in msgs:
            self.spawn(self._consume_one, pq, m, node, 0.0)

    def _record(self, pq: ProcessQueue, m: Pulled, node: int, outcome: str) -> None:
        latency = max(0.0, time.time() * 1000.0 - m.store_ms)
        st = self.stats
        if outcome == "ok":
            st.consumed += 1
            st.latency.record(latency)
        else:
            st.retried += 1
        mq = pq.mq
        self.emit(ConsumeRecord(
            self.now(), self.consumer_id, self.options.group, m.retry_topic or m.topic, mq[1], node, mq[2],
            m.queue_offset, m.msg_id, latency, outcome, m.reconsume_times,
        ))

    async def _consume_one(self, pq: ProcessQueue, m: Pulled, node: int, delay: float) -> None:
        """``ConsumeRequest.run`` for one message, then ``processConsumeResult``."""
        opts = self.options
        if delay > 0:
            await sleep_until(self.clock() + delay)
        async with self.consume_limiter:
            if pq.dropped:
                self.stats.discarded += 1
                return
            if opts.consume_delay > 0:
                await sleep_until(self.clock() + opts.consume_delay)
            failed = opts.consume_failure_rate > 0 and self.rng.random() < opts.consume_failure_rate
            self._record(pq, m, node, "retry" if failed else "ok")
        if pq.dropped:
            return  # consumed, but the queue was given away meanwhile: the offset is not committed
        if failed and not await self._send_back(pq.mq, m):
            self.stats.send_back_failed += 1
            retried = Pulled(m.topic, m.queue_id, m.queue_offset, m.phys, m.store_ms, m.born_ms, m.reconsume_times + 1,
                             m.body_len, m.msg_id, m.tags, m.retry_topic)
            pq.msgs[m.queue_offset] = retried
            self.spawn(self._consume_one, pq, retried, node, LOCAL_RETRY_DELAY)
            return
        offset = pq.remove([m.queue_offset])
        if offset >= 0 and not pq.dropped:
            self.offsets.update_offset(pq.mq, offset, increase_only=True)

    async def _send_back(self, mq: MessageQueue, m: Pulled) -> bool:
        """CONSUMER_SEND_MSG_BACK to the master of the queue's broker; whether it was accepted."""
        addr = self.broker_addrs.get(mq[1], {}).get(MASTER_ID)
        if addr is None:
            return False
        cmd = cw.send_back(
            group=self.options.group, phys=m.phys, delay_level=0, origin_msg_id=m.msg_id,
            origin_topic=m.retry_topic or m.topic, broker_name=mq[1], max_reconsume_times=self.options.max_reconsume_times,
        )
        try:
            resp = await self.pool.invoke(addr, cmd, SEND_BACK_TIMEOUT)
        except RemotingError:
            return False
        return resp.code == ResponseCode.SUCCESS


__all__ = ["PullService"]
