"""Consumer-facing requests: what a real push or pull consumer sends to a broker.

At start a Java/C++/Node push consumer heartbeats (HEART_BEAT 34 with its
consumer data and subscriptions), asks who else is in its group
(GET_CONSUMER_LIST_BY_GROUP 38), where to start in each queue
(QUERY_CONSUMER_OFFSET 14; QUERY_NOT_FOUND makes it fall back to
GET_MAX_OFFSET 30 or SEARCH_OFFSET_BY_TIMESTAMP 29), locks queues when
orderly (LOCK_BATCH_MQ 41), then long-polls PULL_MESSAGE (11), commits
progress (UPDATE_CONSUMER_OFFSET 15, often oneway) and sends failed
messages back for a later retry (CONSUMER_SEND_MSG_BACK 36). This module
answers all of them the way a Java broker does, over the in-memory store.
"""

from __future__ import annotations

import logging
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from broker_stub.clients import ClientTable, Subscription, parse_subscription
from broker_stub.common import (
    DLQ_GROUP_TOPIC_PREFIX,
    FAQ_APPLY_TOPIC,
    RETRY_GROUP_TOPIC_PREFIX,
    Reject,
    ext_int,
    format_properties,
    parse_properties,
)
from broker_stub.config import BrokerConfig
from broker_stub.delays import DelayQueue, parse_levels
from broker_stub.pulls import (
    PULL_FLAG_COMMIT_OFFSET,
    PULL_FLAG_SUBSCRIPTION,
    PULL_FLAG_SUSPEND,
    SUSPEND_CAP_MS,
    HeldPull,
    PullHold,
    read_queue,
)
from broker_stub.store import (
    STORED_PROPERTIES_MAX_BYTES,
    STORED_TOPIC_MAX_BYTES,
    MessageStore,
    StoreUnavailableError,
    parse_record,
)
from broker_stub.topics import TopicTable
from remoting import fastjson
from remoting.bodies import BodyError, TopicConfig
from remoting.clip import clip
from remoting.codec import encode
from remoting.codes import PERM_READ, PERM_WRITE, RequestCode, ResponseCode
from remoting.command import RemotingCommand, request, response_to
from remoting.names import is_legal_group, topic_problem

log = logging.getLogger("broker_stub")

MAX_CONSUMER_OFFSETS = 100_000
DEFAULT_MAX_RECONSUME_TIMES = 16  # SubscriptionGroupConfig.retryMaxTimes
V3_4_9 = 121  # MQVersion ordinal from which maxReconsumeTimes is read from the header
RW = PERM_READ | PERM_WRITE
#: Store a message: (topic, queue id, body, flag, properties, sys flag, born ts, born ip, born port, reconsume times).
PutMessage = Callable[[str, int, bytes, int, str, int, int, bytes, int, int], Any]


class Consuming:
    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicTable,
        store: MessageStore,
        *,
        broker_addr: str,
        put_message: PutMessage,
        write_to: Callable[[Hashable, bytes], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        self.broker_addr = broker_addr
        self.put_message = put_message
        self.write_to = write_to
        self.clock = clock
        self.clients = ClientTable()
        self.offsets: OrderedDict[tuple[str, str, int], int] = OrderedDict()
        self.hold = PullHold(config.maxHeldPulls)
        self.delays = DelayQueue(parse_levels(config.messageDelayLevel), clock)
        self._random = random.Random()
        #: A slave's view of its master (broker_stub.replication): while it lives, the slave sends
        #: consumers back to it; once gone, the slave answers pulls itself (Java's minBrokerIdInGroup).
        self.master_alive: Callable[[], bool] = lambda: True
        self.offsets_changed = 0  # bumped on every offset change (the offsets file is rewritten when it moved)
        #: (group, topic, records found): the broker's GROUP_GET stats (set by the admin module)
        self.on_pulled: Callable[[str, str, list[bytes]], None] = lambda group, topic, records: None
        #: (group, first topic) of each accepted send-back: SNDBCK_PUT_NUMS stats (set by the admin module)
        self.on_sent_back: Callable[[str, str], None] = lambda group, topic: None
        #: With messages on disk: answer a send-back to the DLQ once it is written (broker_stub.persistence).
        self.hold_answer: Callable[[Hashable, bytes, int, Any], None] | None = None
        #: POP consumption (broker_stub.pop): its held requests, and what wakes them (set by the processor).
        self.pops_held: Callable[[], int] = lambda: 0
        self.on_arrival: Callable[[str], None] | None = None

    @property
    def waiting(self) -> bool:
        """Whether a pull or a POP is held: only then must a stored message wake anyone."""
        return bool(self.hold.count or self.pops_held())

    def handlers(self) -> dict[int, Callable[[RemotingCommand, Hashable], RemotingCommand | None]]:
        return {
            RequestCode.PULL_MESSAGE: self.pull_message,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.consumer_list,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch,
            RequestCode.CONSUMER_SEND_MSG_BACK: self.send_back,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.consumed_by,
        }

    # ------------------------------------------------------------------
    # pulling

    def pull_message(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand | None:
        return self._pull(req, conn, allow_suspend=True)

    def _pull(self, req: RemotingCommand, conn: Hashable, *, allow_suspend: bool) -> RemotingCommand | None:
        """PullMessageProcessor.processRequest; None when the pull is held for later."""
        config = self.config
        if not config.is_master and not config.slaveReadEnable:  # PullMessageProcessor.rejectRequest (5.x)
            raise Reject(ResponseCode.SYSTEM_BUSY, "[REJECTREQUEST]system busy, start flow control for a while")
        topic = req.ext("topic") or ""
        group = req.ext("consumerGroup") or ""
        queue_id = ext_int(req, "queueId", -1)
        offset = ext_int(req, "queueOffset", 0)
        sys_flag = ext_int(req, "sysFlag", 0)
        if not config.brokerPermission & PERM_READ:
            raise Reject(ResponseCode.NO_PERMISSION, f"the broker[{config.brokerIP1}] pulling message is forbidden")
        if not is_legal_group(group):  # 5.3.3: an illegal name never has a subscription group
            raise Reject(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                         f"subscription group [{group}] does not exist, {FAQ_APPLY_TOPIC}")
        tc = self.topics.get(topic)
        if tc is None:
            raise Reject(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{FAQ_APPLY_TOPIC}")
        if not tc.perm & PERM_READ:
            raise Reject(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
        if not 0 <= queue_id < tc.read_queue_nums:
            raise Reject(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        sub = self._subscription(req, group, topic, sys_flag)
        if allow_suspend and sys_flag & PULL_FLAG_COMMIT_OFFSET and config.is_master:
            commit = ext_int(req, "commitOffset", -1)
            if commit >= 0 and group:
                self._set_offset(group, topic, queue_id, commit)
        max_nums = ext_int(req, "maxMsgNums", 32)
        read = read_queue(self.store, topic, queue_id, offset, max_nums, sub.tags, is_master=config.is_master)
        if read.records:
            self.on_pulled(group, topic, read.records)
        code = read.code
        if not config.is_master and code != ResponseCode.SUCCESS and self.master_alive():
            code = ResponseCode.PULL_RETRY_IMMEDIATELY  # a slave sends the consumer back to its live master
        elif code == ResponseCode.PULL_NOT_FOUND and allow_suspend and sys_flag & PULL_FLAG_SUSPEND:
            millis = ext_int(req, "suspendTimeoutMillis", 0) if config.longPollingEnable else config.shortPollingTimeMills
            millis = min(max(millis, 0), SUSPEND_CAP_MS)
            if millis > 0 and self.hold.hold(conn, req, topic, queue_id, offset, self.clock() + millis / 1000.0):
                return None
        ext = {
            "suggestWhichBrokerId": "0",
            "nextBeginOffset": str(read.next_begin),
            "minOffset": str(read.min_offset),
            "maxOffset": str(read.max_offset),
            "topicSysFlag": str(tc.topic_sys_flag),
            "groupSysFlag": "0",
        }
        return response_to(req, code, read.status, ext_fields=ext, body=b"".join(read.records))

    def _subscription(self, req: RemotingCommand, group: str, topic: str, sys_flag: int) -> Subscription:
        """The pull's own subscription (flag 0x4) or the one its group heartbeated, as Java checks them."""
        if sys_flag & PULL_FLAG_SUBSCRIPTION:
            sub = parse_subscription(topic, req.ext("subscription"), req.ext("expressionType"), ext_int(req, "subVersion", 0))
        else:
            if not self.clients.has_group(group):
                raise Reject(ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist")
            found = self.clients.subscription(group, topic)
            if found is None:
                raise Reject(ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist")
            if found.sub_version < ext_int(req, "subVersion", 0):
                raise Reject(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
            sub = found
        if not sub.is_tag_type:
            raise Reject(
                ResponseCode.SYSTEM_ERROR, f"The broker does not support consumer to filter message by {sub.expression_type}"
            )
        return sub

    def arrived(self, topic: str, queue_id: int) -> None:
        """A message was stored: answer the pulls held on that queue (PullRequestHoldService.notifyMessageArriving)."""
        ready = self.hold.arrived(topic, queue_id, self.store.max_offset(topic, queue_id))
        for entry in ready:
            self._answer_held(entry, expired=False)
        if self.on_arrival is not None:
            self.on_arrival(topic)

    def expire_held(self) -> int:
        """Answer the held pulls whose suspend time is over; returns how many."""
        due = self.hold.expired(self.clock())
        for entry in due:
            self._answer_held(entry, expired=True)
        return len(due)

    def _answer_held(self, entry: HeldPull, *, expired: bool) -> None:
        """Answer one held pull. It runs outside any request's handling (a timer, or another
        client's send), so nothing may escape: a failure is this pull's SYSTEM_ERROR, one
        log line, and the timer or the sender carries on."""
        try:
            try:
                resp = self._pull(entry.request, entry.conn, allow_suspend=False)
            except Reject as rej:
                resp = response_to(entry.request, rej.code, rej.remark)
            assert resp is not None
            # what arrived does not match the subscription: keep waiting, as Java does
            if (
                not expired
                and resp.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY)
                and self.hold.hold(entry.conn, entry.request, entry.topic, entry.queue_id, entry.offset, entry.deadline)
            ):
                return
            answer = encode(resp)
        except Exception as exc:
            what = f"{type(exc).__name__}: {clip(exc)}"
            log.warning("held pull of %s on %s failed: %s", entry.topic, entry.queue_id, what)
            try:
                answer = encode(response_to(entry.request, ResponseCode.SYSTEM_ERROR, what))
            except Exception:
                return  # not even an error can be encoded: the consumer's pull times out
        self.write_to(entry.conn, answer)

    def connection_closed(self, conn: Hashable) -> None:
        self.hold.drop_connection(conn)
        self._notify(self.clients.connection_closed(conn))

    def _notify(self, groups: set[str]) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED (40, oneway) to every consumer of groups whose members changed,
        so they rebalance now rather than at their next 20 s rebalance (Java's ConsumerManager does this)."""
        for group in groups:
            frame = encode(request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, oneway=True))
            for conn in self.clients.connections_of(group):
                self.write_to(conn, frame)

    # ------------------------------------------------------------------
    # offsets

    def set_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """A group's committed offset (kept, bounded, saved by broker_stub.persistence when on disk)."""
        self._set_offset(group, topic, queue_id, offset)

    def _set_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = (group, topic, queue_id)
        if self.offsets.get(key) != offset:
            self.offsets_changed += 1
        self.offsets[key] = offset
        self.offsets.move_to_end(key)
        while len(self.offsets) > MAX_CONSUMER_OFFSETS:
            self.offsets.popitem(last=False)

    def query_consumer_offset(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """ConsumerManageProcessor.queryConsumerOffset: a group's committed offset, or 0 when it has none
        and the queue still holds its first message, else QUERY_NOT_FOUND (the client then decides)."""
        group, topic = req.ext("consumerGroup") or "", req.ext("topic") or ""
        queue_id = ext_int(req, "queueId", 0)
        offset = self.offsets.get((group, topic, queue_id))
        if offset is not None:
            return response_to(req, ResponseCode.SUCCESS, ext_fields={"offset": offset})
        if (req.ext("setZeroIfNotFound") or "").strip().lower() == "false":
            return response_to(req, ResponseCode.QUERY_NOT_FOUND, "Not found, do not set to zero, maybe this group boot first")
        store = self.store
        if store.min_offset(topic, queue_id) <= 0 and store.max_offset(topic, queue_id) > 0:
            return response_to(req, ResponseCode.SUCCESS, ext_fields={"offset": 0})
        return response_to(req, ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    def update_consumer_offset(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        group, topic = req.ext("consumerGroup") or "", req.ext("topic") or ""
        if not is_legal_group(group):
            raise Reject(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} not exist!")
        if topic not in self.topics:
            raise Reject(ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} not exist!")
        queue_id, offset = ext_int(req, "queueId", -1), ext_int(req, "commitOffset", -1)
        if req.ext("queueId") is None or queue_id < 0:
            raise Reject(ResponseCode.INVALID_PARAMETER, f"QueueId is null, topic is {topic}")
        if req.ext("commitOffset") is None:
            raise Reject(ResponseCode.INVALID_PARAMETER, f"Offset is null, topic is {topic}")
        self._set_offset(group, topic, queue_id, offset)
        return response_to(req, ResponseCode.SUCCESS)

    # ------------------------------------------------------------------
    # clients

    def heart_beat(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        try:
            data = fastjson.loads_small(req.body) if req.body else {}
        except BodyError as exc:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"bad heartbeat body: {exc}") from None
        if not isinstance(data, dict) or not data.get("clientID"):
            raise Reject(ResponseCode.SYSTEM_ERROR, "heartbeat without clientID")
        language = req.language.name if req.language is not None else "OTHER"
        groups, sub_changed, changed = self.clients.heartbeat(data, conn, language=language, version=req.version)
        for group in groups:  # Java creates every group's retry topic on its heartbeat (legal groups only)
            retry = RETRY_GROUP_TOPIC_PREFIX + group
            if topic_problem(retry) is None:  # a 121+ character group has no storable retry topic
                self._ensure_topic(retry)
        self._notify(changed)
        return response_to(
            req, ResponseCode.SUCCESS, ext_fields={"IS_SUPPORT_HEART_BEAT_V2": True, "IS_SUB_CHANGE": sub_changed}
        )

    def _ensure_topic(self, name: str) -> TopicConfig:
        tc = self.topics.get(name)
        if tc is None:
            problem = topic_problem(name)
            if problem is not None:  # never created: a topic name becomes a directory
                raise Reject(ResponseCode.SYSTEM_ERROR, f"topic[{name[:140]}] not exist: {problem}")
            tc = TopicConfig(name, 1, 1, RW)
            try:
                self.topics.put_auto(tc)  # bounded (maxAutoCreatedTopics); bumps the data version, registers at once
            except ValueError as exc:
                raise Reject(ResponseCode.SYSTEM_ERROR, str(exc)) from None
            log.info("created topic %s", name)
        return tc

    def ensure_topic(self, name: str) -> TopicConfig:
        """The topic, auto-created (1 queue, RW, bounded) if it is new: retry and DLQ topics."""
        return self._ensure_topic(name)

    def unregister_client(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        self._notify(self.clients.unregister(req.ext("clientID") or "", req.ext("producerGroup"), req.ext("consumerGroup")))
        return response_to(req, ResponseCode.SUCCESS)

    def consumer_list(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        group = req.ext("consumerGroup") or ""
        ids = self.clients.consumer_ids(group)
        if not ids:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return response_to(req, ResponseCode.SUCCESS, body=fastjson.dumps_fast({"consumerIdList": ids}))

    def check_client_config(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG: tag subscriptions are fine; SQL92 needs enablePropertyFilter (we have none)."""
        body = _json_body(req)
        sub = body.get("subscriptionData") if isinstance(body, dict) else None
        if isinstance(sub, dict) and (sub.get("expressionType") or "TAG") != "TAG":
            raise Reject(
                ResponseCode.SYSTEM_ERROR, f"The broker does not support consumer to filter message by {sub['expressionType']}"
            )
        return response_to(req, ResponseCode.SUCCESS)

    def lock_batch(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        body = _json_body(req)
        group, client_id = str(body.get("consumerGroup") or ""), str(body.get("clientId") or "")
        locked = self.clients.try_lock(group, client_id, _queues(body.get("mqSet")))
        out = [{"brokerName": b, "queueId": q, "topic": t} for t, b, q in locked]
        return response_to(req, ResponseCode.SUCCESS, body=fastjson.dumps_fast({"lockOKMQSet": out}))

    def unlock_batch(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        body = _json_body(req)
        self.clients.unlock(str(body.get("consumerGroup") or ""), str(body.get("clientId") or ""), _queues(body.get("mqSet")))
        return response_to(req, ResponseCode.SUCCESS)

    def consumed_by(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """QUERY_TOPIC_CONSUME_BY_WHO: groups subscribed to, or with offsets on, a topic."""
        topic = req.ext("topic") or ""
        groups = self.clients.groups_of_topic(topic) | {g for (g, t, _q) in self.offsets if t == topic}
        return response_to(req, ResponseCode.SUCCESS, body=fastjson.dumps_fast({"groupList": sorted(groups)}))

    # ------------------------------------------------------------------
    # retries

    def send_back(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand | None:
        """CONSUMER_SEND_MSG_BACK: re-put a consumed message on ``%RETRY%group`` after its delay level,
        or on ``%DLQ%group`` once it was retried ``maxReconsumeTimes`` times (or delayLevel < 0)."""
        config = self.config
        group = req.ext("group") or ""
        if not is_legal_group(group):  # 5.3.3 finds no subscription group for it
            raise Reject(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group} {FAQ_APPLY_TOPIC}")
        if not config.brokerPermission & PERM_WRITE:
            raise Reject(ResponseCode.NO_PERMISSION, f"the broker[{config.brokerIP1}] sending message is forbidden")
        if self.store.unwritable is not None:  # Java answers a failed put this way (the status's name)
            raise Reject(ResponseCode.SYSTEM_ERROR, "SERVICE_NOT_AVAILABLE")
        phys = ext_int(req, "offset", -1)
        record = self.store.find_by_phys(phys)
        if record is None:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {phys}")
        msg = parse_record(record)
        props = parse_properties(msg.properties)
        props.setdefault("RETRY_TOPIC", msg.topic)
        props.pop("DELAY", None)
        delay_level = ext_int(req, "delayLevel", 0)
        max_times = DEFAULT_MAX_RECONSUME_TIMES
        if req.version >= V3_4_9 and req.ext("maxReconsumeTimes") is not None:
            max_times = ext_int(req, "maxReconsumeTimes", max_times)
        to_dlq = msg.reconsume_times >= max_times or delay_level < 0
        new_topic = (DLQ_GROUP_TOPIC_PREFIX if to_dlq else RETRY_GROUP_TOPIC_PREFIX) + group
        if not props.get("ORIGIN_MESSAGE_ID"):
            props["ORIGIN_MESSAGE_ID"] = req.ext("originMsgId") or self.store.msg_id(msg.phys)
        props_text = format_properties(props)
        # Checked now, as Java's put would refuse it (MESSAGE_ILLEGAL / PROPERTIES_SIZE_EXCEEDED):
        # a deferred put that cannot be stored would otherwise fail later, on the timer.
        if len(new_topic.encode()) > STORED_TOPIC_MAX_BYTES or len(props_text.encode()) > STORED_PROPERTIES_MAX_BYTES:
            raise Reject(
                ResponseCode.SYSTEM_ERROR,
                f"send back failed: MESSAGE_ILLEGAL (topic {clip(new_topic, 60)} or properties too long to store)",
            )
        tc = self._ensure_topic(new_topic)
        if not tc.perm & PERM_WRITE:
            raise Reject(ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden")
        args = (
            new_topic, self._random.randrange(max(1, tc.write_queue_nums)), msg.body, msg.flag, props_text,
            msg.sys_flag, msg.born_timestamp, msg.born_ip, msg.born_port, msg.reconsume_times + 1,
        )
        if not to_dlq:
            self.delays.defer(delay_level or 3 + msg.reconsume_times, self.put_message, *args)
            self.on_sent_back(group, props["RETRY_TOPIC"])  # Java counts it under the message's first topic
            return response_to(req, ResponseCode.SUCCESS)
        try:
            self.put_message(*args)
        except StoreUnavailableError:
            raise Reject(ResponseCode.SYSTEM_ERROR, "SERVICE_NOT_AVAILABLE") from None
        except ValueError as exc:  # the store's bounds (StoreFullError), or a path it will not make
            raise Reject(ResponseCode.SYSTEM_ERROR, f"send back failed: {exc}") from None
        self.on_sent_back(group, props["RETRY_TOPIC"])
        resp = response_to(req, ResponseCode.SUCCESS)
        if self.hold_answer is None or req.flag & 2:
            return resp
        self.hold_answer(conn, encode(resp), req.opaque, req.serialize_type)  # once the DLQ message is written
        return None


def _json_body(req: RemotingCommand) -> dict[str, Any]:
    try:
        body = fastjson.loads_small(req.body) if req.body else {}
    except BodyError as exc:
        raise Reject(ResponseCode.SYSTEM_ERROR, f"bad request body: {exc}") from None
    if not isinstance(body, dict):
        raise Reject(ResponseCode.SYSTEM_ERROR, "request body is not a JSON object")
    return body


def _queues(value: Any) -> list[tuple[str, str, int]]:
    """A JSON ``mqSet`` -> (topic, brokerName, queueId) triples; malformed entries skipped."""
    out = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict) and isinstance(item.get("queueId"), int):
            out.append((str(item.get("topic") or ""), str(item.get("brokerName") or ""), item["queueId"]))
    return out
