"""POP consumption, what Apache's Proxy (and so every RocketMQ 5 gRPC client) consumes with.

POP_MESSAGE (200050) hands out up to ``maxMsgNums`` messages of a topic's
queues (``queueId=-1``: every queue, from a random one on, as
PopMessageProcessor does) and makes them invisible for ``invisibleTime``;
ACK_MESSAGE (200051) and CHANGE_MESSAGE_INVISIBLETIME (200053) name one by
its receipt handle's fields (:mod:`broker_stub.pop_wire`). What is popped
and not acked comes again once its time is up: it is put on the group's
POP retry topic (``%RETRY%<group>_<topic>``) with its reconsume count
raised, and later POPs read that topic too (first, one time in five;
otherwise when the topic itself did not fill the answer), handing its
messages out under the topic asked for. Dead-lettering is the client's
(the Proxy forwards a message past the group's ``retryMaxTimes`` with
CONSUMER_SEND_MSG_BACK, ``delayLevel=-1``), as with a Java broker.

The group's position in each queue is its consumer offset (what
consumerProgress shows), moved at the POP as a Java broker's moves shortly
after it. A new group starts as Java's ``getInitOffset`` says: a retry
topic, or ``initMode=MIN``, at the first message held; otherwise at 0 while
the queue still holds its first message, else at its last message.

Every answer carries popTime, invisibleTime, reviveQid and restNum (also
"no new message", POLLING_TIMEOUT, whose header the client decodes too). A
POP that finds nothing is held until a message arrives in the topic (or its
retry topic) or its ``pollTime`` (counted from its ``bornTime``) is up;
at most ``maxHeldPops`` at once (beyond, POLLING_FULL). Orderly (FIFO) POP
is refused with SYSTEM_ERROR: the stub does not block a queue per group.

The in-flight table (:mod:`broker_stub.pop_inflight`) is bounded by
``maxPopInFlight``; with ``storePathRootDir`` it and the groups' POP
positions are kept in ``config/popInFlight.json``
(:mod:`broker_stub.pop_state`), and no POP, ACK or change is answered
before the state holding it is on disk.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from broker_stub.clients import parse_subscription
from broker_stub.common import (
    FAQ_APPLY_TOPIC,
    RETRY_GROUP_TOPIC_PREFIX,
    Reject,
    ext_int,
    format_properties,
    parse_properties,
)
from broker_stub.config import BrokerConfig
from broker_stub.consuming import Consuming
from broker_stub.pop_inflight import InFlight, InFlightTable
from broker_stub.pop_wire import (
    FIRST_POP_TIME,
    ORDER_REVIVE_QUEUE,
    Handle,
    HandleError,
    build_handle,
    handed_out_as,
    msg_offset_info,
    parse_handle,
    pop_retry_topic,
    queue_offset_of,
    start_offset_info,
)
from broker_stub.pulls import MAX_TRANSFER_BYTES, SUSPEND_CAP_MS, PullHold
from broker_stub.store import MessageStore, StoreUnavailableError, parse_record
from broker_stub.subgroups import SubscriptionGroups
from broker_stub.topics import TopicTable
from remoting.codec import encode
from remoting.codes import PERM_READ, RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to
from server_runtime.ratelog import clip

log = logging.getLogger("broker_stub")

MAX_POP_NUMS = 32  # PopMessageProcessor: "pop message's num is greater than 32"
REVIVE_QUEUE_NUM = 8  # BrokerConfig.reviveQueueNum
POP_FROM_RETRY_PERCENT = 20  # BrokerConfig.popFromRetryProbability
TIMEOUT_TOO_MUCH_MS = 500  # PopMessageRequestHeader.isTimeoutTooMuch
INIT_MODE_MIN = 0  # ConsumeInitMode.MIN
MAX_RETRY_ORIGINS = 10_000
REVIVE_LATER_MS = 1000  # a revive the store cannot take now (disk refusing writes) is tried again this much later

Handler = Callable[[RemotingCommand, Hashable], RemotingCommand | None]


@dataclass
class _Popped:
    """What one POP found so far."""

    pop_time: int
    revive_qid: int
    room: int  # messages it may still hand out (the request's count and the in-flight bound)
    records: list[bytes] = field(default_factory=list)
    start_infos: list[str] = field(default_factory=list)
    msg_infos: list[str] = field(default_factory=list)
    rest: int = 0


class PopService:
    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicTable,
        store: MessageStore,
        consuming: Consuming,
        subgroups: SubscriptionGroups,
        *,
        write_to: Callable[[Hashable, bytes], bool],
        clock: Callable[[], float] = time.monotonic,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        self.consuming = consuming
        self.subgroups = subgroups
        self.write_to = write_to
        self.clock = clock
        self.now_ms = now_ms
        self.inflight = InFlightTable(config.maxPopInFlight)
        self.hold = PullHold(config.maxHeldPops)
        self.cursor_keys: set[tuple[str, str, int]] = set()  # (group, topic, queue) positions POP moved
        self.changes = 0  # bumped by every change of the in-flight table or a POP position (state file)
        #: With the state on disk: send an answer once the change it reports is written (broker_stub.pop_state).
        self.hold_answer: Callable[[Hashable, bytes, int], None] | None = None
        self._retry_origin: dict[str, str] = {}  # POP retry topic -> the topic whose held POPs it wakes
        self._revive_qids = itertools.count()
        self._random = random.Random()
        self.revived = 0  # messages put on a retry topic since start

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.POP_MESSAGE: self.pop,
            RequestCode.ACK_MESSAGE: self.ack,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: self.change_invisible,
        }

    # ------------------------------------------------------------------
    # POP_MESSAGE

    def pop(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand | None:
        return self._pop(req, conn, held_until=None)

    def _pop(self, req: RemotingCommand, conn: Hashable, *, held_until: float | None) -> RemotingCommand | None:
        """PopMessageProcessor.processRequest; None when the request is held (or its answer waits for the disk)."""
        topic, group = req.ext("topic") or "", req.ext("consumerGroup") or ""
        queue_id = ext_int(req, "queueId", -1)
        invisible = ext_int(req, "invisibleTime", 60_000)
        wall = self.now_ms()
        born, poll = ext_int(req, "bornTime", 0) or wall, ext_int(req, "pollTime", 0)
        if wall - born - poll > TIMEOUT_TOO_MUCH_MS:
            return _answer(req, ResponseCode.POLLING_TIMEOUT, _Popped(0, 0, 0), 0,
                           f"the broker[{self.config.brokerIP1}] pop message is timeout too much")
        tags = self._check(req, topic, group, queue_id)
        popped = _Popped(wall, next(self._revive_qids) % REVIVE_QUEUE_NUM,
                         min(ext_int(req, "maxMsgNums", MAX_POP_NUMS), self.inflight.room()))
        retry = pop_retry_topic(topic, group)
        retry_first = self._random.randrange(100) < POP_FROM_RETRY_PERCENT
        init_mode = ext_int(req, "initMode", 1)
        if retry_first:
            self._pop_topic(retry, group, -1, invisible, tags, popped, init_mode)
        self._pop_topic(topic, group, queue_id, invisible, tags, popped, init_mode)
        if not retry_first:
            self._pop_topic(retry, group, -1, invisible, tags, popped, init_mode)
        if popped.records:
            self.changes += 1
            resp = _answer(req, ResponseCode.SUCCESS, popped, invisible, "FOUND")
            return self._after_change(req, conn, resp)
        until = held_until if held_until is not None else self.clock() + min(max(born + poll - wall, 0), SUSPEND_CAP_MS) / 1000
        if poll > 0 and self.clock() < until:
            if self.hold.hold(conn, req, topic, -1, -1, until):
                return None
            return _answer(req, ResponseCode.POLLING_FULL, popped, invisible, "NO_MESSAGE_IN_QUEUE")
        return _answer(req, ResponseCode.POLLING_TIMEOUT, popped, invisible, "NO_MESSAGE_IN_QUEUE")

    def _check(self, req: RemotingCommand, topic: str, group: str, queue_id: int) -> frozenset[str]:
        """Java's refusals, in its order; the subscription's tags (empty: all)."""
        ip = self.config.brokerIP1
        if not self.config.brokerPermission & PERM_READ:
            raise Reject(ResponseCode.NO_PERMISSION, f"the broker[{ip}] pop message is forbidden")
        if ext_int(req, "maxMsgNums", MAX_POP_NUMS) > MAX_POP_NUMS:
            raise Reject(ResponseCode.INVALID_PARAMETER, f"the broker[{ip}] pop message's num is greater than 32")
        tc = self.topics.get(topic)
        if tc is None:
            raise Reject(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {FAQ_APPLY_TOPIC}")
        if not tc.perm & PERM_READ:
            raise Reject(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= tc.read_queue_nums:
            raise Reject(ResponseCode.INVALID_PARAMETER, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                                         f"topicConfig.readQueueNums:[{tc.read_queue_nums}]")
        cfg = self.subgroups.find(group)
        if cfg is None:
            raise Reject(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                         f"subscription group [{group}] does not exist, {FAQ_APPLY_TOPIC}")
        if cfg.get("consumeEnable") is False:
            raise Reject(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        if (req.ext("order") or "").strip().lower() == "true":
            raise Reject(ResponseCode.SYSTEM_ERROR, "orderly (FIFO) POP is not supported by the broker stub")
        sub = parse_subscription(topic, req.ext("exp"), req.ext("expType"))
        if not sub.is_tag_type:
            raise Reject(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        return sub.tags

    def _pop_topic(self, topic: str, group: str, queue_id: int, invisible: int, tags: frozenset[str],
                   popped: _Popped, init_mode: int) -> None:
        """popMsgFromTopic: every read queue from a random one (``queue_id`` -1), else the one queue."""
        tc = self.topics.get(topic)
        if tc is None:
            return
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            self._remember_retry(topic, group)
        nums = tc.read_queue_nums
        start = self._random.randrange(nums) if nums > 0 else 0
        queues = [queue_id] if queue_id >= 0 else [(start + i) % nums for i in range(nums)]
        for q in queues:
            self._pop_queue(topic, group, q, invisible, tags, popped, init_mode)

    def _pop_queue(self, topic: str, group: str, queue_id: int, invisible: int, tags: frozenset[str],
                   popped: _Popped, init_mode: int) -> None:
        """popMsgFromQueue: from the group's position, up to what the answer still takes."""
        store = self.store
        offset = self._position(group, topic, queue_id, init_mode)
        lo, hi = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
        offset = min(max(offset, lo), hi)  # a position the store no longer (or not yet) has: Java corrects it
        want = popped.room - len(popped.records)
        if want <= 0:
            popped.rest += hi - offset
            return
        counted = store.get_total
        records, next_begin = store.get(topic, queue_id, offset, want, MAX_TRANSFER_BYTES, tags)
        store.get_total = counted + len(records)
        if next_begin != offset:
            self._move(group, topic, queue_id, next_begin)
        popped.rest += hi - next_begin
        if not records:
            return
        offsets = [queue_offset_of(r) for r in records]
        for queue_offset in offsets:
            self.inflight.add(InFlight(group, topic, queue_id, queue_offset, popped.pop_time, invisible))
        popped.start_infos.append(start_offset_info(topic, queue_id, offset))
        popped.msg_infos.append(msg_offset_info(topic, queue_id, offsets))
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            origin = self._retry_origin.get(topic, topic)
            name = self.config.brokerName
            records = [handed_out_as(r, origin, build_handle(offset, popped.pop_time, invisible, popped.revive_qid,
                                                             topic, name, queue_id, o))
                       for r, o in zip(records, offsets)]
        popped.records.extend(records)
        self.consuming.on_pulled(group, topic, records)

    def _position(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        """The group's next offset in the queue; a new group's as getInitOffset chooses it (and kept)."""
        offset = self.consuming.offsets.get((group, topic, queue_id))
        if offset is not None:
            return offset
        store = self.store
        lo, hi = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
        if init_mode == INIT_MODE_MIN or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            offset = lo
        elif lo <= 0 and hi > 0:
            offset = 0  # the queue still holds its first message (Java: "checkInMemByConsumeOffset")
        else:
            offset = max(hi - 1, 0)  # "pop last one"
        self._move(group, topic, queue_id, offset)
        return offset

    def _move(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.consuming.set_offset(group, topic, queue_id, offset)
        self.cursor_keys.add((group, topic, queue_id))
        self.changes += 1

    def _remember_retry(self, retry: str, group: str) -> None:
        if retry not in self._retry_origin:
            if len(self._retry_origin) >= MAX_RETRY_ORIGINS:
                self._retry_origin.clear()
            prefix = f"{RETRY_GROUP_TOPIC_PREFIX}{group}_"
            self._retry_origin[retry] = retry[len(prefix):] if retry.startswith(prefix) else retry

    # ------------------------------------------------------------------
    # ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME

    def ack(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand | None:
        """AckMessageProcessor: the message of the handle is done (a stale handle changes nothing)."""
        group, topic, queue_id, offset = self._checked_message(req, end_inclusive=True)
        handle = _handle(req)
        if handle.revive_qid == ORDER_REVIVE_QUEUE:
            raise Reject(ResponseCode.SYSTEM_ERROR, "orderly (FIFO) POP is not supported by the broker stub")
        if self.inflight.ack((group, topic, queue_id, offset), handle.pop_time):
            self.changes += 1
        return self._after_change(req, conn, response_to(req, ResponseCode.SUCCESS))

    def change_invisible(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand | None:
        """ChangeInvisibleTimeProcessor: invisible again from now for ``invisibleTime``; the answer's popTime
        makes the new handle (the old one acks nothing from now on)."""
        group, topic, queue_id, offset = self._checked_message(req, end_inclusive=False)
        handle = _handle(req)
        if handle.revive_qid == ORDER_REVIVE_QUEUE:
            raise Reject(ResponseCode.SYSTEM_ERROR, "orderly (FIFO) POP is not supported by the broker stub")
        invisible = ext_int(req, "invisibleTime", 0)
        entry = self.inflight.change((group, topic, queue_id, offset), handle.pop_time, self.now_ms(), invisible)
        self.changes += 1
        resp = response_to(req, ResponseCode.SUCCESS, ext_fields={
            "popTime": entry.pop_time, "invisibleTime": invisible, "reviveQid": handle.revive_qid})
        return self._after_change(req, conn, resp)

    def _checked_message(self, req: RemotingCommand, *, end_inclusive: bool) -> tuple[str, str, int, int]:
        """The message an ack or change names, checked as Java checks it: (group, topic, queue, offset)."""
        topic, group = req.ext("topic") or "", req.ext("consumerGroup") or ""
        queue_id, offset = ext_int(req, "queueId", -1), ext_int(req, "offset", -1)
        tc = self.topics.get(topic)
        if tc is None:
            raise Reject(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {FAQ_APPLY_TOPIC}")
        if not 0 <= queue_id < tc.read_queue_nums:
            raise Reject(ResponseCode.MESSAGE_ILLEGAL, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                                       f"topicConfig.readQueueNums:[{tc.read_queue_nums}]")
        lo, hi = self.store.min_offset(topic, queue_id), self.store.max_offset(topic, queue_id)
        if offset < lo or offset > hi or (offset == hi and not end_inclusive):
            raise Reject(ResponseCode.NO_MESSAGE, f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, "
                                                  f"store:{lo}~{hi}")
        return group, topic, queue_id, offset

    def _after_change(self, req: RemotingCommand, conn: Hashable, resp: RemotingCommand) -> RemotingCommand | None:
        """The answer now, or (state on disk) once the state holding this change is written."""
        hold = self.hold_answer
        if hold is None or req.flag & 2:
            return resp
        hold(conn, encode(resp), req.opaque)
        return None

    # ------------------------------------------------------------------
    # held POPs, revives

    def busy(self) -> bool:
        """Whether the timers must run often: POPs held, or a revive due within a second."""
        due = self.inflight.next_deadline()
        return bool(self.hold.count) or (due is not None and due - self.now_ms() < 1000)

    def arrived(self, topic: str) -> None:
        """A message became readable in ``topic``: answer the POPs held on it (or on the topic it retries)."""
        for name in (topic, self._retry_origin.get(topic)):
            if name is None or not self.hold.count:
                continue
            for entry in self.hold.arrived(name, -1, 1 << 62):
                self._answer_held(entry.conn, entry.request, entry.deadline)

    def timers(self) -> None:
        """Often: answer held POPs whose poll time is over; revive what is due."""
        for entry in self.hold.expired(self.clock()):
            self._answer_held(entry.conn, entry.request, entry.deadline)
        now = self.now_ms()
        due = self.inflight.next_deadline()
        if due is not None and due <= now:
            for item in self.inflight.due(now):
                self._revive(item, now)
            self.changes += 1

    def _answer_held(self, conn: Hashable, req: RemotingCommand, deadline: float) -> None:
        """Run a held POP again (outside any request: nothing may escape); it may be held again."""
        try:
            try:
                resp = self._pop(req, conn, held_until=deadline)
            except Reject as rej:
                resp = response_to(req, rej.code, rej.remark)
            if resp is not None:
                self.write_to(conn, encode(resp))
        except Exception as exc:
            log.warning("held POP of %s failed: %s: %s", req.ext("topic"), type(exc).__name__, clip(exc))

    def _revive(self, item: InFlight, now: int) -> None:
        """PopReviveService.reviveRetry: the message again, on the group's retry topic, reconsumed once more."""
        records, _ = self.store.get(item.topic, item.queue_id, item.offset, 1, 1 << 30)
        if not records or queue_offset_of(records[0]) != item.offset:
            return  # no longer held (the queue dropped it): nothing to revive, as Java finds nothing either
        retry = item.topic if item.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else pop_retry_topic(item.topic, item.group)
        self._remember_retry(retry, item.group)
        msg = parse_record(records[0])
        props = parse_properties(msg.properties)
        if msg.reconsume_times == 0 or FIRST_POP_TIME not in props:
            props[FIRST_POP_TIME] = str(item.pop_time)
        try:
            self.consuming.ensure_topic(retry)
            self.consuming.put_message(retry, 0, msg.body, msg.flag, format_properties(props), msg.sys_flag,
                                       msg.born_timestamp, self.store.store_ip, self.store.store_port,
                                       msg.reconsume_times + 1)
        except StoreUnavailableError as exc:  # the disk refuses writes now: the same entry, due a little later
            self.inflight.add(InFlight(item.group, item.topic, item.queue_id, item.offset, item.pop_time,
                                       now + REVIVE_LATER_MS - item.pop_time))
            log.warning("revive of %s@%d:%d waits for the disk: %s", item.topic, item.queue_id, item.offset, clip(exc))
            return
        except (Reject, ValueError) as exc:  # the retry topic cannot be made, or the message not stored again
            log.warning("revive of %s@%d:%d dropped: %s", item.topic, item.queue_id, item.offset, clip(exc))
            return
        self.revived += 1

    def connection_closed(self, conn: Hashable) -> None:
        self.hold.drop_connection(conn)

    def topic_deleted(self, topic: str) -> None:
        self.inflight.forget_topic(topic)
        self.changes += 1


def _handle(req: RemotingCommand) -> Handle:
    try:
        return parse_handle(req.ext("extraInfo") or "")
    except HandleError as exc:
        raise Reject(ResponseCode.SYSTEM_ERROR, str(exc)) from None


def _answer(req: RemotingCommand, code: int, popped: _Popped, invisible: int, remark: str) -> RemotingCommand:
    """A POP answer: the four fields always (the client decodes them whatever the code), the offset infos
    and the messages when found."""
    ext: dict[str, object] = {
        "popTime": popped.pop_time, "invisibleTime": invisible, "reviveQid": popped.revive_qid,
        "restNum": popped.rest, "startOffsetInfo": ";".join(popped.start_infos),
        "msgOffsetInfo": ";".join(popped.msg_infos),
    }
    return response_to(req, code, remark, ext_fields=ext, body=b"".join(popped.records) if popped.records else b"")
