"""A simulated RocketMQ producer speaking the real protocol.

It behaves like Apache RocketMQ 5.3.3's ``DefaultMQProducer`` with one
``MQClientInstance`` of its own, in the parts that decide where messages go
and how an outage looks from the client:

* **Routes** (``MQClientInstance.updateTopicRouteInfoFromNameServer``):
  GET_ROUTEINFO_BY_TOPIC to one NameServer, chosen at random and kept while
  its connection lives; after a connect error, a timeout or a broken
  connection the next one is used (``NettyRemotingClient``). A route is
  replaced only when it differs from the one held; TOPIC_NOT_EXIST or an
  unreachable NameServer keeps the old route, so cached routes keep working
  when every NameServer is down. The first send to a topic without a route
  falls back to the route of ``TBW102`` (``createTopicKey``) with
  ``min(4, readQueueNums)`` queues per broker and lets the broker
  auto-create the topic. Every ``pollNameServerInterval`` each topic in use
  is queried again.
* **Sends** (``DefaultMQProducerImpl.sendDefaultImpl``): SEND_MESSAGE_V2 to
  the master of a queue picked round-robin; up to
  ``retryTimesWhenSendFailed`` more attempts on another broker after a
  connect error, a lost connection, a timeout (all within one total
  ``sendMsgTimeout``, so a timed-out attempt usually leaves no time for a
  retry) or a refused send whose code is in ``retryResponseCodes``; any
  other refusal ends the send at once.
* **Fault avoidance** (``sendLatencyEnable``, off by default in 5.x): see
  :mod:`simclient.fault`.
* **Heartbeats**: HEART_BEAT to every known master every
  ``heartbeatBrokerInterval``; UNREGISTER_CLIENT to every known broker on close.

Deliberate differences, for scale: connections come from a shared
:class:`~simclient.pool.ClientPool`; the periodic tasks of one producer run
on one trio task and start at random offsets (independent clients are not
started in the same millisecond); with ``namesrv_failover_in_call`` (default)
a failed route query is retried on the next NameServer within the same
lookup, where Java fails that lookup and only uses the next NameServer on
its next one.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import trio

from remoting import requests as rq
from remoting.bodies import BodyError
from remoting.codes import MASTER_ID, ResponseCode
from remoting.command import RemotingCommand
from simclient.fault import LatencyFaultTolerance
from simclient.pool import ClientPool, ConnectError, RemotingError, RemotingTimeout
from simclient.producer_options import ProducerOptions, message_problem
from simclient.records import SendRecord
from simclient.route import RouteSnapshot, TopicPublish, decode_snapshot, select_queue
from simclient.stats import RouteStats
from simclient.ticker import sleep_until
from simclient.wire import (
    RETRY_RESPONSE_CODES,
    STORED_CODES,
    BadSendResponse,
    SendResult,
    UniqIdMaker,
    compress_body,
    heartbeat,
    message_properties,
    parse_send_response,
    send_message_v2,
    unregister_client,
)

log = logging.getLogger("simclient.producer")

#: Shared by producers that are not given their own (a Random is ~5 KB; thousands add up).
_shared_rng = random.Random()
class RouteUnavailable(Exception):
    """No NameServer answered a route query (connect error or timeout on each one tried)."""


# _fetch results other than a body
_NOT_FOUND = "not_found"
_REFUSED = "refused"


#: What one attempt of a send ends in (SimProducer._attempt).
_RETRY, _STOP, _STORED = "retry", "stop", "stored"


@dataclass(slots=True)
class _Send:
    """One send across its attempts (``sendDefaultImpl``'s locals)."""

    topic: str
    begin: float
    payload: bytes
    sys_flag: int
    tags: str | None
    keys: str | None
    mq: tuple[str, int] | None = None  # the queue picked last (the next pick avoids its broker)
    tried: tuple[str, int] | None = None  # the queue of the last attempt actually made
    outcome: str = "error"
    code: int = -1
    attempts: int = 0
    result: SendResult | None = None
    result_broker: str | None = None  # where ``result`` was stored (a later retry may go elsewhere)


class SimProducer:
    """One simulated producer (one client instance): its own route table, fault table and poller."""

    __slots__ = (
        "_ids",
        "_ns_conn",
        "_ns_index",
        "broker_addrs",
        "client_id",
        "clock",
        "fault",
        "options",
        "pool",
        "producer_id",
        "publish",
        "rng",
        "route_stats",
        "t0",
    )

    def __init__(
        self,
        options: ProducerOptions,
        pool: ClientPool,
        *,
        producer_id: int = 0,
        clock: Callable[[], float] = trio.current_time,
        rng: random.Random | None = None,
        t0: float | None = None,
        route_stats: RouteStats | None = None,
    ) -> None:
        self.options = options
        self.pool = pool
        self.producer_id = producer_id
        self.clock = clock
        self.rng = rng or _shared_rng
        self.t0 = clock() if t0 is None else t0
        self.route_stats = route_stats if route_stats is not None else RouteStats()
        self.publish: dict[str, TopicPublish] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self.fault: LatencyFaultTolerance | None = (
            LatencyFaultTolerance(
                clock, latency_max=options.latency_max_ms, not_available=options.not_available_duration_ms
            )
            if options.send_latency_fault_enable
            else None
        )
        self.client_id = f"127.0.0.1@{os.getpid()}#{producer_id}"
        self._ids = UniqIdMaker(hash((os.getpid(), producer_id)))
        self._ns_index = self.rng.randrange(len(options.namesrv_addrs))
        # the connection the chosen NameServer last answered on: Java keeps its choice
        # while that channel lives and moves to the next NameServer once it broke
        self._ns_conn: object | None = None

    # ------------------------------------------------------------------
    # routes

    async def _fetch(self, topic: str, deadline: float | None) -> bytes | str:
        """A route body, or _NOT_FOUND / _REFUSED; RouteUnavailable when no NameServer answered."""
        opts = self.options
        addrs = opts.namesrv_addrs
        tries = len(addrs) if opts.namesrv_failover_in_call else 1
        stats = self.route_stats
        last = "no NameServer tried"
        for _ in range(tries):
            if self._ns_conn is None or self.pool.connection_of(addrs[self._ns_index]) is not self._ns_conn:
                self._ns_index = (self._ns_index + 1) % len(addrs)
            addr = addrs[self._ns_index]
            timeout = opts.mq_client_api_timeout
            if deadline is not None:
                timeout = min(timeout, deadline - self.clock())
                if timeout <= 0:
                    break
            stats.queries += 1
            begin = self.clock()
            try:
                resp = await self.pool.invoke(addr, rq.get_route(topic), timeout)
            except RemotingError as exc:
                stats.failures += 1
                self._ns_conn = None
                last = str(exc)
                continue
            stats.latency.record((self.clock() - begin) * 1000.0)
            self._ns_conn = self.pool.connection_of(addr)
            if resp.code == ResponseCode.SUCCESS and resp.body:
                return resp.body
            if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                stats.not_found += 1
                return _NOT_FOUND
            return _REFUSED
        raise RouteUnavailable(last)

    @property
    def namesrv(self) -> str | None:
        """The NameServer this producer queries now (None before its first answer or after a failure)."""
        return self.options.namesrv_addrs[self._ns_index] if self._ns_conn is not None else None

    async def update_route(self, topic: str, *, is_default: bool = False, deadline: float | None = None) -> bool:
        """``updateTopicRouteInfoFromNameServer``: fetch and install a topic's route if it changed.

        With ``is_default`` the TBW102 route is fetched and installed for
        ``topic``. Returns whether a route was installed; raises
        RouteUnavailable when no NameServer answered.
        """
        opts = self.options
        result = await self._fetch(opts.default_topic if is_default else topic, deadline)
        if not isinstance(result, bytes):
            return False
        try:
            snap = decode_snapshot(result, default_topic_queue_nums=opts.default_topic_queue_nums if is_default else 0)
        except BodyError as exc:
            log.warning("producer %d: malformed route for %s: %s", self.producer_id, topic, exc)
            return False
        tp = self.publish.get(topic)
        old = tp.snapshot if tp is not None else None
        changed = not snap.same_as(old)
        if not changed and tp is not None and tp.ok():
            return False
        self._install(topic, snap, replaced=old is not None and changed)
        return True

    def _install(self, topic: str, snap: RouteSnapshot, *, replaced: bool) -> None:
        for name, addrs in snap.broker_addrs.items():
            self.broker_addrs[name] = addrs
        self.publish[topic] = TopicPublish(snap, rng=self.rng)
        if replaced:
            self.route_stats.changes += 1

    async def refresh_routes(self) -> None:
        """Fetch the routes of every topic in use (one poll of the route poller)."""
        for topic in list(self.publish):
            try:
                await self.update_route(topic)
            except RouteUnavailable as exc:
                log.debug("producer %d: route of %s not refreshed: %s", self.producer_id, topic, exc)

    async def _find(self, topic: str, deadline: float) -> TopicPublish:
        """``tryToFindTopicPublishInfo``: the held route, else the topic's, else TBW102's."""
        tp = self.publish.get(topic)
        if tp is None or not tp.ok():
            if tp is None:
                self.publish[topic] = TopicPublish(None, rng=self.rng)
            await self.update_route(topic, deadline=deadline)
            tp = self.publish[topic]
        if tp.have_route or tp.ok():
            return tp
        await self.update_route(topic, is_default=True, deadline=deadline)
        return self.publish[topic]

    def route_of(self, topic: str) -> RouteSnapshot | None:
        tp = self.publish.get(topic)
        return tp.snapshot if tp is not None else None

    def brokers_in_route(self, topic: str) -> list[str]:
        """Broker names this producer would send ``topic`` to right now."""
        tp = self.publish.get(topic)
        return sorted({q[0] for q in tp.queues}) if tp is not None else []

    def clean_offline_brokers(self) -> None:
        """``cleanOfflineBroker``: forget brokers no held route mentions."""
        used: set[str] = set()
        for tp in self.publish.values():
            if tp.snapshot is not None:
                used.update(tp.snapshot.broker_addrs)
        for name in [n for n in self.broker_addrs if n not in used]:
            del self.broker_addrs[name]

    # ------------------------------------------------------------------
    # sending

    def _record(
        self, begin: float, topic: str, broker: str | None, queue_id: int, outcome: str, attempts: int,
        queue_offset: int = -1, code: int = -1, msg_id: str = "",
    ) -> SendRecord:
        return SendRecord(
            begin - self.t0,
            self.producer_id,
            topic,
            broker,
            queue_id,
            outcome,
            (self.clock() - begin) * 1000.0,
            attempts,
            queue_offset,
            code,
            msg_id,
        )

    def _penalize(self, broker: str, latency_s: float, *, isolation: bool, reachable: bool) -> None:
        if self.fault is not None:
            self.fault.update(broker, latency_s * 1000.0, isolation=isolation, reachable=reachable)

    async def send(self, topic: str, body: bytes, *, tags: str | None = None, keys: str | None = None) -> SendRecord:
        """One synchronous send with the Java producer's retries; never raises for send failures."""
        rec, _ = await self.send_detailed(topic, body, tags=tags, keys=keys)
        return rec

    async def send_detailed(
        self, topic: str, body: bytes, *, tags: str | None = None, keys: str | None = None
    ) -> tuple[SendRecord, SendResult | None]:
        """Like :meth:`send`, also returning the SendResult of a stored message.

        ``DefaultMQProducerImpl.sendDefaultImpl``: the route, then up to
        ``1 + retryTimesWhenSendFailed`` attempts (:meth:`_attempt`), each on
        the queue :func:`simclient.route.select_queue` picks.
        """
        opts = self.options
        begin = self.clock()
        if message_problem(topic, body) is not None:
            return self._record(begin, topic, None, -1, "error", 0), None  # refused by the client itself
        try:
            tp = await self._find(topic, begin + opts.send_timeout)
        except RouteUnavailable:
            tp = None
        if tp is None or not tp.ok():
            return self._record(begin, topic, None, -1, "no_route", 0), None
        payload, sys_flag = compress_body(body) if opts.compress_over else (body, 0)
        send = _Send(topic, begin, payload, sys_flag, tags, keys)
        fault = self.fault
        is_available = fault.is_available if fault is not None else None
        is_reachable = fault.is_reachable if fault is not None else None
        times_total = 1 + opts.retry_times_when_send_failed
        for times in range(times_total):
            selected = select_queue(
                tp,
                last_broker=send.mq[0] if send.mq is not None else None,
                is_available=is_available,
                is_reachable=is_reachable,
                reset_index=times > 0,
                rng=self.rng,
            )
            if selected is None:
                break
            send.mq = selected
            step = await self._attempt(send, last=times + 1 == times_total)
            if step is _STORED:
                result = send.result
                assert result is not None
                return self._record(begin, topic, send.result_broker, result.queue_id, "ok", send.attempts,
                                    result.queue_offset, send.code, result.msg_id), result
            if step is _STOP:
                break
        return self._sent(send)

    async def _attempt(self, send: _Send, *, last: bool) -> str:
        """One attempt on ``send.mq``: _RETRY (the next queue), _STOP, or _STORED (the answer is final)."""
        opts, clock = self.options, self.clock
        assert send.mq is not None
        broker, queue_id = send.mq
        attempt_begin = clock()
        cost = attempt_begin - send.begin
        if opts.send_timeout < cost:
            send.outcome = "timeout"  # Java: RemotingTooMuchRequestException("sendDefaultImpl call timeout")
            return _STOP
        cur_timeout = opts.send_timeout - cost
        per_request = opts.send_msg_max_timeout_per_request
        if per_request is not None and not last and cur_timeout > per_request:
            cur_timeout = per_request
        send.attempts += 1
        send.tried = send.mq
        addrs = self.broker_addrs.get(broker)
        addr = addrs.get(MASTER_ID) if addrs else None
        if addr is None:
            send.outcome = "error"  # MQClientException("The broker[...] not exist")
            self._penalize(broker, clock() - attempt_begin, isolation=False, reachable=True)
            return _RETRY
        uniq = self._ids.next(int(time.time() * 1000))
        cmd = send_message_v2(
            group=opts.group,
            topic=send.topic,
            queue_id=queue_id,
            broker_name=broker,
            body=send.payload,
            properties=message_properties(uniq, send.tags, send.keys),
            sys_flag=send.sys_flag,
            default_topic=opts.default_topic,
            default_topic_queue_nums=opts.default_topic_queue_nums,
        )
        try:
            resp = await self.pool.invoke(addr, cmd, cur_timeout)
        except RemotingTimeout:
            send.outcome = "timeout"
            self._penalize(broker, clock() - attempt_begin, isolation=True, reachable=True)
            return _RETRY
        except (ConnectError, RemotingError):
            send.outcome = "conn_error"
            self._penalize(broker, clock() - attempt_begin, isolation=True, reachable=True)
            return _RETRY
        return self._answered(send, broker, resp, uniq, clock() - attempt_begin)

    def _answered(self, send: _Send, broker: str, resp: RemotingCommand, uniq: str, latency: float) -> str:
        """What a broker's answer to one attempt means for the send (see :meth:`_attempt`)."""
        code = send.code = resp.code
        if code in STORED_CODES:
            try:
                send.result = parse_send_response(resp, uniq)
                send.result_broker = broker
            except BadSendResponse:
                send.outcome = "error"  # a RemotingCommandException: isolated like a remoting error
                self._penalize(broker, latency, isolation=True, reachable=True)
                return _RETRY
            self._penalize(broker, latency, isolation=False, reachable=True)
            send.outcome = "ok"
            if code != ResponseCode.SUCCESS and self.options.retry_another_broker_when_not_store_ok:
                return _RETRY
            return _STORED
        self._penalize(broker, latency, isolation=True, reachable=False)
        send.outcome = "rejected"
        return _RETRY if code in RETRY_RESPONSE_CODES else _STOP

    def _sent(self, send: _Send) -> tuple[SendRecord, SendResult | None]:
        """The record of a send whose attempts ended without a final answer."""
        result = send.result
        if result is not None:  # stored, then retried elsewhere (retryAnotherBrokerWhenNotStoreOK) in vain
            return self._record(send.begin, send.topic, send.result_broker, result.queue_id, "ok", send.attempts,
                                result.queue_offset, result.code, result.msg_id), result
        tried = send.tried
        if tried is None:
            return self._record(send.begin, send.topic, None, -1, send.outcome, send.attempts, -1, send.code), None
        return self._record(send.begin, send.topic, tried[0], tried[1], send.outcome, send.attempts, -1,
                            send.code), None

    # ------------------------------------------------------------------
    # background work

    async def heartbeat_once(self) -> int:
        """HEART_BEAT to every known master (after dropping brokers no route uses); returns how many answered."""
        self.clean_offline_brokers()
        answered = 0
        for addrs in list(self.broker_addrs.values()):
            addr = addrs.get(MASTER_ID)
            if addr is None:
                continue
            try:
                resp = await self.pool.invoke(
                    addr, heartbeat(self.client_id, self.options.group), self.options.mq_client_api_timeout
                )
            except RemotingError:
                continue
            answered += resp.code == ResponseCode.SUCCESS
        return answered

    async def maintain_forever(self, *, stagger: bool = True) -> None:
        """Route polling and broker heartbeats on one task (cheaper than two per producer)."""
        opts = self.options
        now = trio.current_time()
        poll_every = opts.poll_name_server_interval
        hb_every = opts.heartbeat_broker_interval
        next_poll = now + (self.rng.uniform(0, poll_every) if stagger else 0.01)
        next_hb = now + (self.rng.uniform(0, hb_every) if stagger else 1.0) if hb_every > 0 else float("inf")
        while True:
            await sleep_until(min(next_poll, next_hb))
            now = trio.current_time()
            if now >= next_poll:
                next_poll = now + poll_every
                await self.refresh_routes()
            if now >= next_hb:
                next_hb = now + hb_every
                await self.heartbeat_once()

    async def close(self, timeout: float = 1.0) -> None:
        """UNREGISTER_CLIENT to every known broker address (best effort, bounded by ``timeout``)."""
        if not self.options.unregister_on_close:
            return
        with trio.move_on_after(timeout):
            for addrs in list(self.broker_addrs.values()):
                for addr in addrs.values():
                    try:
                        await self.pool.invoke(addr, unregister_client(self.client_id, self.options.group), timeout)
                    except RemotingError:
                        pass


__all__ = ["RouteUnavailable", "SimProducer"]
