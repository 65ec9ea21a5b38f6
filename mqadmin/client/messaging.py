"""The admin client's message calls: send as a producer does, pull and read as a consumer does.

What ``sendMessage``/``consumeMessage`` and the scenarios and fan-out need:
route lookup with the TBW102 fallback, queue choice with retry on another
broker, and bounded reads. Every loop here is bounded by a count.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

from mqadmin.client import messages
from mqadmin.client.broker import BrokerClient
from mqadmin.client.core import DEFAULT_TIMEOUT
from mqadmin.client.errors import AdminError, NotFound, check_answer, parse_answer
from mqadmin.client.security import ClientSecurity
from remoting.bodies import TopicRouteData
from remoting.codes import (
    DEFAULT_TOPIC,
    PERM_READ,
    PERM_WRITE,
    RequestCode,
    ResponseCode,
)
from remoting.command import request

TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"  # MixAll.TOOLS_CONSUMER_GROUP
PULL_BATCH = 32  # the broker's per-pull cap (maxTransferCountOnMessageInMemory)
SEND_ATTEMPTS = 3  # Java: 1 + retryTimesWhenSendFailed (2)
DEFAULT_TOPIC_QUEUE_NUMS = 4  # DefaultMQProducer.defaultTopicQueueNums
PULL_SYS_FLAG_SUBSCRIPTION = 0x4
#: Stored-but statuses of a send (the client returns a result, no error).
SEND_STATUS = {
    ResponseCode.SUCCESS: "SEND_OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}
PULL_STATUS = {
    ResponseCode.SUCCESS: "FOUND",
    ResponseCode.PULL_NOT_FOUND: "NO_NEW_MSG",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MSG",
    ResponseCode.PULL_OFFSET_MOVED: "OFFSET_ILLEGAL",
}


@dataclass
class SendResult:
    """What a send returns (SendResult.java)."""

    status: str
    msg_id: str  # the client's UNIQ_KEY
    offset_msg_id: str  # the broker's id: store host + commit-log offset
    broker_name: str
    broker_addr: str
    queue_id: int
    queue_offset: int
    region: str | None = None
    transaction_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "sendStatus": self.status, "msgId": self.msg_id, "offsetMsgId": self.offset_msg_id,
            "brokerName": self.broker_name, "brokerAddr": self.broker_addr, "queueId": self.queue_id,
            "queueOffset": self.queue_offset, "regionId": self.region, "transactionId": self.transaction_id,
        }


@dataclass
class PullResult:
    """One PULL_MESSAGE answer (PullResult.java)."""

    status: str  # FOUND, NO_NEW_MSG, NO_MATCHED_MSG, OFFSET_ILLEGAL
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[messages.Message] = field(default_factory=list)
    suggest_broker_id: int = 0


@dataclass
class QueueRead:
    """What ``consume`` read from one queue."""

    broker_name: str
    queue_id: int
    broker_addr: str | None
    min_offset: int = 0
    max_offset: int = 0
    start_offset: int = 0
    next_offset: int = 0
    messages: list[messages.Message] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name, "queueId": self.queue_id, "brokerAddr": self.broker_addr,
            "minOffset": self.min_offset, "maxOffset": self.max_offset, "startOffset": self.start_offset,
            "nextOffset": self.next_offset, "count": len(self.messages), "error": self.error,
        }


class MessagingClient(BrokerClient):
    """Sending and pulling messages, on top of the NameServer and broker calls."""

    def __init__(
        self, namesrv_addrs: list[str], *, timeout: float = DEFAULT_TIMEOUT, security: ClientSecurity | None = None
    ) -> None:
        """Message ids and the producer group are per client, as a Java producer's are."""
        super().__init__(namesrv_addrs, timeout=timeout, security=security)
        self._uniq = messages.UniqIdGenerator()
        self._producer_group = f"mqadmin-{os.getpid()}"

    # ------------------------------------------------------------------
    # brokers: producing

    async def send_to(
        self,
        broker_addr: str,
        broker_name: str,
        topic: str,
        queue_id: int,
        body: bytes,
        props: dict[str, str],
        *,
        producer_group: str | None = None,
        default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
    ) -> SendResult:
        """One SEND_MESSAGE_V2 (310) to one broker and queue, header as a Java 5.x producer sends it."""
        props = dict(props)
        uniq = props.setdefault(messages.UNIQ_KEY, self._uniq.next())
        ext: dict[str, object] = {
            "a": producer_group or self._producer_group,
            "b": topic,
            "c": DEFAULT_TOPIC,
            "d": default_topic_queue_nums,
            "e": queue_id,
            "f": 0,
            "g": int(time.time() * 1000),
            "h": 0,
            "i": messages.format_properties(props),
            "j": 0,
            "k": False,
            "m": False,
            "n": broker_name,
        }
        req = request(RequestCode.SEND_MESSAGE_V2, ext, body)
        resp = check_answer(broker_addr, await self.invoke(broker_addr, req), f"send to {topic}", tuple(SEND_STATUS))
        fields = resp.ext_fields or {}
        try:
            qid, offset = int(fields["queueId"]), int(fields["queueOffset"])
        except (KeyError, ValueError):
            raise AdminError(f"{broker_addr}: send answer without queueId/queueOffset: {fields}") from None
        return SendResult(
            status=SEND_STATUS[ResponseCode(resp.code)], msg_id=uniq, offset_msg_id=fields.get("msgId", ""),
            broker_name=broker_name, broker_addr=broker_addr, queue_id=qid, queue_offset=offset,
            region=fields.get("MSG_REGION"), transaction_id=fields.get("transactionId"),
        )

    async def send_message(
        self,
        topic: str,
        body: bytes,
        *,
        keys: str | None = None,
        tags: str | None = None,
        broker_name: str | None = None,
        queue_id: int | None = None,
        extra_properties: dict[str, str] | None = None,
        producer_group: str | None = None,
        route: TopicRouteData | None = None,
    ) -> SendResult:
        """Send like DefaultMQProducer.send: route (or TBW102's), pick a writable queue, retry elsewhere.

        ``broker_name`` restricts the choice to that broker group; with
        ``queue_id`` too the message goes to exactly that queue, no retry.
        """
        route, default_nums = await self._publish_route(topic, route)
        if broker_name is not None and all(b.broker_name != broker_name for b in route.broker_datas):
            route = await self.route_with_broker(topic, broker_name)  # the NameServer asked first may not know it
        targets = _writable_queues(route, default_nums)
        if broker_name is not None:
            targets = [t for t in targets if t[0] == broker_name]
            if not targets:
                known = ", ".join(sorted({q.broker_name for q in route.queue_datas})) or "none"
                raise AdminError(f"topic {topic} has no writable queue on broker {broker_name} (brokers: {known})")
        if queue_id is not None:
            targets = [t for t in targets if t[1] == queue_id]
            if not targets:
                raise AdminError(f"topic {topic} has no writable queue {queue_id} on broker {broker_name}")
        if not targets:
            raise AdminError(f"topic {topic} has no writable queue with a master broker")
        props = messages.message_properties(keys=keys, tags=tags, uniq_key=self._uniq.next(), extra=extra_properties)
        masters = {b.broker_name: b.master_addr for b in route.broker_datas}
        errors: list[str] = []
        start = random.randrange(len(targets))
        last_failed: str | None = None
        for attempt in range(1 if queue_id is not None else SEND_ATTEMPTS):
            candidates = [t for t in targets if t[0] != last_failed] or targets
            name, qid = candidates[(start + attempt) % len(candidates)]
            addr = masters[name]
            assert addr is not None  # _writable_queues keeps only brokers with a master
            try:
                return await self.send_to(addr, name, topic, qid, body, props, producer_group=producer_group,
                                          default_topic_queue_nums=default_nums)
            except AdminError as exc:
                errors.append(str(exc))
                last_failed = name
        raise AdminError("; ".join(errors))

    async def _publish_route(self, topic: str, route: TopicRouteData | None) -> tuple[TopicRouteData, int]:
        """The topic's route, or TBW102's when the topic has none yet (the producer's fallback)."""
        if route is not None:
            return route, DEFAULT_TOPIC_QUEUE_NUMS
        try:
            return await self.topic_route(topic), DEFAULT_TOPIC_QUEUE_NUMS
        except NotFound as missing:
            try:
                default = await self.topic_route(DEFAULT_TOPIC)
            except NotFound:
                raise missing from None
            nums = DEFAULT_TOPIC_QUEUE_NUMS
            capped = [
                type(q)(q.broker_name, min(nums, q.read_queue_nums), min(nums, q.write_queue_nums), q.perm, q.topic_sys_flag)
                for q in default.queue_datas
            ]
            return TopicRouteData(capped, default.broker_datas), nums

    # ------------------------------------------------------------------
    # brokers: consuming

    async def pull(
        self,
        broker_addr: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int = PULL_BATCH,
        *,
        group: str = TOOLS_CONSUMER_GROUP,
        broker_name: str = "",
    ) -> PullResult:
        """One non-blocking PULL_MESSAGE (11) with the header DefaultMQPullConsumer sends."""
        ext: dict[str, object] = {
            "consumerGroup": group,
            "topic": topic,
            "queueId": queue_id,
            "queueOffset": offset,
            "maxMsgNums": max_nums,
            "sysFlag": PULL_SYS_FLAG_SUBSCRIPTION,
            "commitOffset": 0,
            "suspendTimeoutMillis": 0,
            "subscription": "*",
            "subVersion": 0,
            "expressionType": "TAG",
        }
        resp = check_answer(broker_addr, await self.invoke(broker_addr, request(RequestCode.PULL_MESSAGE, ext)),
                       f"pull {topic}:{queue_id}", tuple(PULL_STATUS))
        fields = resp.ext_fields or {}
        try:
            nxt, lo, hi = int(fields["nextBeginOffset"]), int(fields["minOffset"]), int(fields["maxOffset"])
        except (KeyError, ValueError):
            raise AdminError(f"{broker_addr}: pull answer without offsets: {fields}") from None
        msgs = parse_answer(broker_addr, lambda b: messages.decode_messages(b, broker_name), resp.body) if resp.code == 0 else []
        return PullResult(PULL_STATUS[ResponseCode(resp.code)], nxt, lo, hi, msgs,
                          int(fields.get("suggestWhichBrokerId", "0") or 0))

    async def consume(
        self,
        topic: str,
        *,
        broker_name: str | None = None,
        queue_id: int | None = None,
        offset: int | None = None,
        count: int = 128,
        group: str = TOOLS_CONSUMER_GROUP,
        begin_ms: int | None = None,
        end_ms: int | None = None,
    ) -> list[QueueRead]:
        """Read up to ``count`` messages, oldest first, queue after queue (ConsumeMessageCommand).

        ``begin_ms``/``end_ms`` keep to messages stored in [begin, end), found
        per queue with SEARCH_OFFSET_BY_TIMESTAMP as Java's command does.
        Bounded: at most ``count`` messages, and every pull must advance the
        offset or the queue is left.
        """
        if count <= 0:
            raise AdminError("the message count must be positive")
        if queue_id is not None and broker_name is None:
            raise AdminError("a queue id needs a broker name (-b) as well")
        route = await self.topic_route(topic)
        if broker_name is not None and all(b.broker_name != broker_name for b in route.broker_datas):
            route = await self.route_with_broker(topic, broker_name)  # the NameServer asked first may not know it
        addrs = {b.broker_name: _read_addr(b.broker_addrs) for b in route.broker_datas}
        queues = sorted((q.broker_name, i) for q in route.queue_datas if q.perm & PERM_READ for i in range(q.read_queue_nums))
        if broker_name is not None:
            if broker_name not in addrs:
                raise AdminError(f"topic {topic} has no broker {broker_name} (brokers: {', '.join(sorted(addrs)) or 'none'})")
            queues = [q for q in queues if q[0] == broker_name]
        if queue_id is not None:
            queues = [q for q in queues if q[1] == queue_id]
            if not queues:
                raise AdminError(f"topic {topic} has no readable queue {queue_id} on broker {broker_name}")
        left = count
        reads: list[QueueRead] = []
        for name, qid in queues:
            if left <= 0:
                break
            read = QueueRead(name, qid, addrs.get(name))
            reads.append(read)
            if read.broker_addr is None:
                read.error = f"broker {name} has no address in the route"
                continue
            try:
                await self._read_queue(read, topic, offset, left, group, begin_ms, end_ms)
            except AdminError as exc:
                read.error = str(exc)
            left -= len(read.messages)
        return reads

    async def _read_queue(self, read: QueueRead, topic: str, offset: int | None, limit: int, group: str,
                          begin_ms: int | None = None, end_ms: int | None = None) -> None:
        addr = read.broker_addr
        assert addr is not None
        read.min_offset = await self.min_offset(addr, topic, read.queue_id)
        read.max_offset = await self.max_offset(addr, topic, read.queue_id)
        pos = max(read.min_offset, offset if offset is not None else read.min_offset)
        if begin_ms is not None:
            pos = max(pos, await self.search_offset(addr, topic, read.queue_id, begin_ms))
        stop = read.max_offset
        if end_ms is not None:
            stop = min(stop, await self.search_offset(addr, topic, read.queue_id, end_ms))
        read.start_offset = read.next_offset = pos
        while pos < stop and len(read.messages) < limit:
            want = min(PULL_BATCH, limit - len(read.messages), stop - pos)
            result = await self.pull(addr, topic, read.queue_id, pos, want, group=group, broker_name=read.broker_name)
            read.messages.extend(result.messages[: limit - len(read.messages)])
            if result.status != "FOUND" or result.next_begin_offset <= pos:
                break
            pos = result.next_begin_offset
        read.next_offset = read.start_offset + len(read.messages) if read.messages else pos


def _read_addr(addrs: dict[int, str]) -> str | None:
    """Where a pull consumer reads: the master, else the lowest-id slave."""
    return addrs.get(0) or next((a for _, a in sorted(addrs.items())), None)


def _writable_queues(route: TopicRouteData, default_nums: int) -> list[tuple[str, int]]:
    """(brokerName, queueId) of every writable queue whose broker has a master (TopicPublishInfo)."""
    masters = {b.broker_name for b in route.broker_datas if b.master_addr}
    return [
        (q.broker_name, i)
        for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
        if q.perm & PERM_WRITE and q.broker_name in masters
        for i in range(q.write_queue_nums)
    ]
