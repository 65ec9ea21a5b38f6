"""A simulated RocketMQ push consumer (clustering) speaking the real protocol.

It behaves like Apache RocketMQ 5.3.3's ``DefaultMQPushConsumer`` with one
``MQClientInstance`` of its own, in the parts that decide what an outage
looks like from the consuming side:

* **Routes** every ``pollNameServerInterval`` for each subscribed topic and
  the group's ``%RETRY%`` topic (:mod:`simclient.consumer_routes`); a
  failed query keeps the route held, so consumers go on with cached routes
  while every NameServer is down.
* **Heartbeats** (HEART_BEAT with the subscriptions) to every broker of
  those routes, masters and slaves, every ``heartbeatBrokerInterval``, and
  at once to a broker whose connection has just been (re)opened, followed
  by a rebalance (``onChannelActive``).
* **Rebalance** (``RebalanceService``) every ``rebalanceInterval`` (20 s),
  at once on NOTIFY_CONSUMER_IDS_CHANGED from a broker, again after one
  second while the result is not balanced, never more often than once a
  second; GET_CONSUMER_LIST_BY_GROUP to a random broker of the route, then
  ``AllocateMessageQueueAveragely`` (:mod:`simclient.rebalance`). A queue
  given away has its offset committed and its waiting messages dropped; a
  new one starts where ``consumeFromWhere`` says (the group's committed
  offset, else the queue's max offset, its first one or a timestamp).
* **Pulls**: one loop per owned queue, PULL_MESSAGE with the suspend flag
  and ``brokerSuspendMaxTimeMillis`` (15 s) so the broker holds it until a
  message arrives; from the node the last answer suggested
  (``suggestWhichBrokerId``), else the master, else, when the route lists
  no master for that group, a slave (``findBrokerAddressInSubscribe``).
  Commit offsets ride on pulls to the master. Flow control at
  ``pullThresholdForQueue`` waiting messages, a 3 s pause after a failed
  pull.
* **Consumption**: ``consume_threads`` at a time, each taking
  ``consume_delay`` seconds (a slow consumer); a failed one (share
  ``consume_failure_rate``) is sent back with CONSUMER_SEND_MSG_BACK and
  comes again from ``%RETRY%group``; when the send-back fails it is
  consumed again locally 5 s later. Every consumption becomes a
  :class:`~simclient.consume_records.ConsumeRecord`.
* **Offsets** (``RemoteBrokerOffsetStore``): committed oneway every
  ``persistConsumerOffsetInterval`` (5 s, first after 10 s) and when a
  queue is given away; read from the master (or a slave when the group has
  no master) when a queue is taken.
* **Stop** (``shutdown``): offsets committed, UNREGISTER_CLIENT to every
  broker. **Kill**: everything stops at once and nothing is sent; with a
  pool of its own its connections close, which is how a broker notices a
  dead client.

The offset store and the pull/consume loops are helpers the consumer holds
(:class:`~simclient.consumer_offsets.OffsetStore`,
:class:`~simclient.consumer_pull.PullService`), each the only writer of its
own state; options and ownership events live in
:mod:`simclient.consumer_options`, the answer to a broker's
GET_CONSUMER_RUNNING_INFO in :mod:`simclient.running_info`.

Deliberate differences: a consumer may share a :class:`ClientPool` with
others (the Spark fan-out does; a scenario gives each its own, so that
killing one closes its connections); when the send-back fails the message
is retried locally instead of being re-sent through the client's inner
producer.
"""

from __future__ import annotations

import logging
import os
import random
import time
import weakref
from collections.abc import Awaitable, Callable

import trio

from remoting.bodies import BodyError
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to
from simclient import consumer_wire as cw
from simclient import running_info
from simclient.consume_records import ConsumeRecord
from simclient.consume_stats import ConsumeStats
from simclient.consumer_offsets import OffsetStore
from simclient.consumer_options import CONSUME_FROM_WHERE, ConsumerOptions, OwnershipEvent
from simclient.consumer_pull import PullService
from simclient.consumer_routes import RouteFetcher, SubscribeRoute, decode_route
from simclient.direct_consume import direct_consume_response
from simclient.pool import ClientPool, RemotingError
from simclient.process_queue import ProcessQueue
from simclient.producer import RouteUnavailable
from simclient.rebalance import MessageQueue, allocate_averagely, sort_queues
from simclient.ticker import sleep_until

log = logging.getLogger("simclient.consumer")

HEARTBEAT_INITIAL_DELAY = 1.0
NEW_QUEUE_PULL_DELAY = 0.5  # RebalanceImpl.dispatchPullRequest(pullRequestList, 500)


class _Hub:
    """Routes a pool's server requests and new connections to the consumers using that pool."""

    def __init__(self, pool: ClientPool) -> None:
        self.groups: dict[str, set[SimConsumer]] = {}
        self.members: set[SimConsumer] = set()
        self.pool = weakref.ref(pool)  # weak: the pool is the key of the hubs' weak table
        pool.request_listeners.append(self.on_request)
        pool.connect_listeners.append(self.on_connect)

    def add(self, c: SimConsumer) -> None:
        self.members.add(c)
        self.groups.setdefault(c.options.group, set()).add(c)

    def remove(self, c: SimConsumer) -> None:
        self.members.discard(c)
        group = self.groups.get(c.options.group)
        if group is not None:
            group.discard(c)
            if not group:
                del self.groups[c.options.group]

    def on_request(self, addr: str, cmd: RemotingCommand) -> None:
        if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            for c in list(self.groups.get(cmd.ext("consumerGroup") or "", ())):
                c.rebalance_now()
        elif cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            self._relayed(addr, cmd, SimConsumer.running_info_response)
        elif cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            self._relayed(addr, cmd, SimConsumer.direct_consume_response)

    def _relayed(self, addr: str, cmd: RemotingCommand,
                 answer: Callable[[SimConsumer, RemotingCommand], RemotingCommand]) -> None:
        """A broker relays ``consumerStatus`` (307) or a direct consumption (309): the named consumer answers."""
        group, client_id = cmd.ext("consumerGroup") or "", cmd.ext("clientId") or ""
        pool = self.pool()
        conn = pool.connection_of(addr) if pool is not None else None
        if conn is None or cmd.flag & 2:
            return
        for c in list(self.groups.get(group, ())):
            if c.client_id == client_id:
                conn.send_response(answer(c, cmd))
                return
        # ClientRemotingProcessor's answer when the client has no consumer of that group
        conn.send_response(response_to(cmd, ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer"))

    def on_connect(self, addr: str) -> None:
        for c in list(self.members):
            c.channel_active(addr)


_hubs: weakref.WeakKeyDictionary[ClientPool, _Hub] = weakref.WeakKeyDictionary()


def _hub(pool: ClientPool) -> _Hub:
    hub = _hubs.get(pool)
    if hub is None:
        hub = _hubs[pool] = _Hub(pool)
    return hub


_shared_rng = random.Random()


class SimConsumer:
    """One simulated push consumer (one client instance). Run :meth:`run` in a nursery; stop it with
    :meth:`shutdown` (graceful) or :meth:`kill`."""

    def __init__(
        self,
        options: ConsumerOptions,
        pool: ClientPool,
        *,
        consumer_id: int = 0,
        emit: Callable[[ConsumeRecord], None] = lambda rec: None,
        on_event: Callable[[OwnershipEvent], None] | None = None,
        stats: ConsumeStats | None = None,
        t0: float | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.options = options
        self.pool = pool
        self.consumer_id = consumer_id
        self.emit = emit
        self.on_event = on_event
        self.stats = stats if stats is not None else ConsumeStats()
        self.clock = clock
        self.t0 = clock() if t0 is None else t0
        self.rng = rng or _shared_rng
        self.client_id = f"127.0.0.1@{os.getpid()}#c{consumer_id}"
        group = options.group
        subs = {topic: cw.subscription(topic, expr) for topic, expr in options.subscriptions}
        subs.setdefault(cw.retry_topic(group), cw.subscription(cw.retry_topic(group)))  # copySubscription
        self.subs = subs
        self.routes: dict[str, SubscribeRoute] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.fetcher = RouteFetcher(
            options.namesrv_addrs, pool, timeout=options.mq_client_api_timeout, stats=self.stats.route,
            rng=self.rng, failover_in_call=options.namesrv_failover_in_call, clock=clock,
        )
        self.offsets = OffsetStore(options, pool, self.stats, self.broker_addrs, self.update_route)
        self.pulls = PullService(
            options, pool, self.stats, self.offsets, subs, self.broker_addrs, consumer_id=consumer_id, rng=self.rng,
            clock=clock, now=self.now, emit=emit, spawn=self._spawn, offset_moved=self._offset_moved,
        )
        self._rebalance_wake = trio.Event()
        self._nursery: trio.Nursery | None = None
        self.state = "new"  # new, running, stopped, killed
        self.started_at = 0.0

    # ------------------------------------------------------------------
    # life cycle

    def now(self) -> float:
        return self.clock() - self.t0

    def _event(self, kind: str, mq: MessageQueue | None = None, queues: tuple[MessageQueue, ...] = ()) -> None:
        if self.on_event is not None:
            topic, broker, qid = mq if mq is not None else ("", "", -1)
            self.on_event(OwnershipEvent(self.now(), self.consumer_id, self.options.group, kind, topic, broker, qid, queues))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """``start()`` then serve until :meth:`shutdown` or :meth:`kill` (or cancellation)."""
        hub = _hub(self.pool)
        hub.add(self)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self.state = "running"
                self.started_at = self.now()
                self.stats.consumers += 1
                self._event("start")
                for topic in list(self.subs):  # updateTopicSubscribeInfoWhenSubscriptionChanged
                    await self.update_route(topic)
                await self.heartbeat_all()
                nursery.start_soon(self._scheduled)
                nursery.start_soon(self._rebalance_service)
                task_status.started()
        finally:
            hub.remove(self)
            self._nursery = None
            if self.state == "running":
                self.state = "stopped"

    def kill(self) -> None:
        """Stop at once without a word to anybody (a crashed process; close its own pool too)."""
        if self.state != "running":
            return
        self.state = "killed"
        self._event("kill")
        for pq in self.process_queues.values():
            pq.dropped = True
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def shutdown(self, timeout: float = 3.0) -> None:
        """``DefaultMQPushConsumer.shutdown``: commit offsets, UNREGISTER_CLIENT everywhere, stop."""
        if self.state != "running":
            return
        self.state = "stopping"
        for pq in self.process_queues.values():
            pq.dropped = True  # no new consumption; what was consumed is committed below
        with trio.move_on_after(timeout):
            await self.offsets.persist_all(self.process_queues)
            if self.options.unregister_on_close:
                await self._unregister_all(timeout)
        self.state = "stopped"
        for mq in list(self.process_queues):
            self._event("release", mq)
        self.process_queues.clear()
        self._event("stop")
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def _unregister_all(self, timeout: float) -> None:
        cmd_for = lambda: cw.unregister_consumer(self.client_id, self.options.group)  # noqa: E731
        for addrs in list(self.broker_addrs.values()):
            for addr in addrs.values():
                try:
                    await self.pool.invoke(addr, cmd_for(), timeout)
                except RemotingError:
                    pass

    def rebalance_now(self) -> None:
        """``rebalanceImmediately``: wake the rebalance service (coalesced, at most once a second)."""
        self._rebalance_wake.set()

    def channel_active(self, addr: str) -> None:
        """A connection to ``addr`` was just opened: heartbeat that broker, then rebalance."""
        if self.state != "running" or self._nursery is None:
            return
        for name, addrs in self.broker_addrs.items():
            for broker_id, a in addrs.items():
                if a == addr:
                    self._nursery.start_soon(self._heartbeat_then_rebalance, name, broker_id, addr)
                    return

    async def _heartbeat_then_rebalance(self, name: str, broker_id: int, addr: str) -> None:
        if await self._heartbeat_one(addr):
            self.rebalance_now()

    # ------------------------------------------------------------------
    # routes and heartbeats

    async def update_route(self, topic: str) -> bool:
        """Fetch and install ``topic``'s route if it changed; False when none could be had."""
        try:
            body = await self.fetcher.fetch(topic)
        except RouteUnavailable:
            return False
        if not isinstance(body, bytes):
            return False
        try:
            route = decode_route(topic, body)
        except BodyError as exc:
            log.warning("consumer %d: malformed route for %s: %s", self.consumer_id, topic, exc)
            return False
        old = self.routes.get(topic)
        if old is not None and old.key == route.key:
            return True
        self.routes[topic] = route
        for name, addrs in route.broker_addrs.items():
            self.broker_addrs[name] = addrs
        if old is not None:
            self.stats.route.changes += 1
        if topic in self.subs and (old is None or old.queues != route.queues):
            self._event("queues", None, tuple(sort_queues(route.queues)))
        return True

    async def refresh_routes(self) -> None:
        for topic in list(self.subs):
            await self.update_route(topic)

    def _clean_offline_brokers(self) -> None:
        used: set[str] = set()
        for route in self.routes.values():
            used.update(route.broker_addrs)
        for name in [n for n in self.broker_addrs if n not in used]:
            del self.broker_addrs[name]

    async def _heartbeat_one(self, addr: str) -> bool:
        cmd = cw.consumer_heartbeat(
            self.client_id, self.options.group, self.subs.values(),
            consume_from_where=CONSUME_FROM_WHERE[self.options.consume_from],
        )
        try:
            resp = await self.pool.invoke(addr, cmd, self.options.mq_client_api_timeout)
        except RemotingError:
            self.stats.heartbeat_failures += 1
            return False
        ok = resp.code == ResponseCode.SUCCESS
        self.stats.heartbeats += ok
        self.stats.heartbeat_failures += not ok
        return ok

    async def heartbeat_all(self) -> int:
        """HEART_BEAT to every broker, masters and slaves alike (a consumer has data for slaves too)."""
        self._clean_offline_brokers()
        answered = 0
        for addrs in list(self.broker_addrs.values()):
            for addr in list(addrs.values()):
                answered += await self._heartbeat_one(addr)
        return answered

    async def _scheduled(self) -> None:
        """MQClientInstance's scheduled thread: route polls, heartbeats, offset commits."""
        opts = self.options
        now = self.clock()
        next_poll = now + opts.poll_name_server_interval
        next_hb = now + HEARTBEAT_INITIAL_DELAY
        next_persist = now + opts.persist_initial_delay
        while True:
            await sleep_until(min(next_poll, next_hb, next_persist))
            now = self.clock()
            if now >= next_poll:
                next_poll = now + opts.poll_name_server_interval
                await self.refresh_routes()
            if now >= next_hb:
                next_hb = now + opts.heartbeat_broker_interval
                await self.heartbeat_all()
            if now >= next_persist:
                next_persist = now + opts.persist_consumer_offset_interval
                await self.offsets.persist_all(self.process_queues)

    # ------------------------------------------------------------------
    # rebalance

    async def _rebalance_service(self) -> None:
        opts = self.options
        wait = 0.0
        last = -float("inf")
        while True:
            if wait > 0:
                with trio.move_on_after(wait):
                    await self._rebalance_wake.wait()
            self._rebalance_wake = trio.Event()
            since = self.clock() - last
            if since < opts.rebalance_min_interval:
                wait = opts.rebalance_min_interval - since
                continue
            balanced = await self.do_rebalance()
            wait = opts.rebalance_interval if balanced else opts.rebalance_min_interval
            last = self.clock()

    async def find_consumer_ids(self, topic: str) -> list[str] | None:
        """GET_CONSUMER_LIST_BY_GROUP to a random broker of the topic's route; None on failure."""
        route = self.routes.get(topic)
        addr = route.any_broker_addr(self.rng) if route is not None else None
        if addr is None:
            await self.update_route(topic)
            route = self.routes.get(topic)
            addr = route.any_broker_addr(self.rng) if route is not None else None
        if addr is None:
            return None
        try:
            resp = await self.pool.invoke(addr, cw.consumer_list(self.options.group), self.options.mq_client_api_timeout)
        except RemotingError:
            return None
        if resp.code != ResponseCode.SUCCESS:
            return None
        return cw.parse_consumer_list(resp.body)

    def working_queues(self, topic: str) -> set[MessageQueue]:
        return {mq for mq, pq in self.process_queues.items() if mq[0] == topic and not pq.dropped}

    async def do_rebalance(self) -> bool:
        """One rebalance of every subscribed topic; whether the result matches what is owned."""
        if self.state != "running":
            return True  # stopping: its queues are being given up, not taken
        self.stats.rebalances += 1
        balanced = True
        for topic in list(self.subs):
            route = self.routes.get(topic)
            cid_all = await self.find_consumer_ids(topic)
            if route is None or cid_all is None:
                continue
            mine = set(allocate_averagely(sort_queues(route.queues), sorted(cid_all), self.client_id))
            await self._update_process_queues(topic, mine)
            if mine != self.working_queues(topic):
                balanced = False
        return balanced

    async def _update_process_queues(self, topic: str, mine: set[MessageQueue]) -> None:
        for mq in [mq for mq in self.process_queues if mq[0] == topic and mq not in mine]:
            await self._release(mq)
        for mq in sort_queues(mine):
            if mq in self.process_queues or self.state != "running":
                continue
            self.offsets.forget(mq)  # removeDirtyOffset
            next_offset = await self.offsets.compute_pull_from_where(mq)
            if next_offset < 0 or mq in self.process_queues or self.state != "running":
                continue
            pq = ProcessQueue(mq, next_offset)
            self.process_queues[mq] = pq
            self.stats.queue_acquired += 1
            self._event("acquire", mq)
            if self._nursery is not None:
                self._nursery.start_soon(self.pulls.pull_loop, pq, NEW_QUEUE_PULL_DELAY)

    async def _release(self, mq: MessageQueue) -> None:
        """``removeUnnecessaryMessageQueue``: drop it, commit its offset, forget it."""
        pq = self.process_queues.get(mq)
        if pq is None:
            return
        pq.dropped = True
        self.stats.discarded += pq.count
        pq.clear()
        del self.process_queues[mq]
        self.stats.queue_released += 1
        self._event("release", mq)
        offset = self.offsets.get(mq)
        if offset is not None:
            await self.offsets.commit(mq, offset)
        self.offsets.forget(mq)

    # ------------------------------------------------------------------

    def owned(self) -> list[MessageQueue]:
        return sort_queues(mq for mq, pq in self.process_queues.items() if not pq.dropped)

    def running_info_response(self, req: RemotingCommand) -> RemotingCommand:
        """The answer to a broker's GET_CONSUMER_RUNNING_INFO (ConsumerRunningInfo)."""
        started_ms = int(time.time() * 1000) - int((self.now() - self.started_at) * 1000)
        info = running_info.running_info(
            self.options, self.subs, self.process_queues, self.offsets.offsets, started_ms=started_ms)
        return running_info.response(req, info)

    def direct_consume_response(self, req: RemotingCommand) -> RemotingCommand:
        """The answer to a broker's CONSUME_MESSAGE_DIRECTLY (a ConsumeMessageDirectlyResult)."""
        return direct_consume_response(req, self.options.consume_failure_rate, self.rng)

    # ------------------------------------------------------------------
    # what the helpers hand back

    def _spawn(self, fn: Callable[..., Awaitable[None]], *args: object) -> None:
        assert self._nursery is not None  # (helpers start tasks only while the consumer runs)
        self._nursery.start_soon(fn, *args)

    def _offset_moved(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """OFFSET_ILLEGAL on ``pq``'s queue: it is given up (its offset was committed), then a rebalance."""
        if self.process_queues.get(mq) is pq:
            del self.process_queues[mq]
            self.stats.queue_released += 1
            self._event("release", mq)
        self.rebalance_now()


__all__ = ["CONSUME_FROM_WHERE", "ConsumerOptions", "OwnershipEvent", "SimConsumer"]
