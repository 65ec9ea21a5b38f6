"""Request handlers of the broker stub: request code -> function of the state.

No sockets here. The server's reactor hands in decoded requests with an
opaque connection id and writes back whatever :meth:`handle` returns
(encoded bytes, or None for oneway requests). The processor owns the client
table and consumer offsets; the topic table, the message store and the
fault switchboard are injected so each stays one small module.

Everything is answered synchronously except while a fault asks for delay
(send latency, hang): then :attr:`async_codes` reports the affected codes
and the reactor routes them through :meth:`handle_async`.
"""

from __future__ import annotations

import logging
import random
import re
import struct
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import trio

from broker_stub.config import RUNTIME_KEYS, BrokerConfig, ConfigError
from broker_stub.faults import FAULT_CODE, FaultError, Faults
from broker_stub.store import Incoming, MessageStore, ipv4_bytes
from broker_stub.topics import (
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TopicTable,
)
from remoting import fastjson, properties
from remoting.bodies import BodyError, DataVersion, TopicConfig, encode_kv_table
from remoting.codec import encode
from remoting.codes import (
    CURRENT_VERSION,
    DEFAULT_TOPIC,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    RequestCode,
    ResponseCode,
)
from remoting.command import RemotingCommand, response_to

log = logging.getLogger("broker_stub")

FAQ_APPLY_TOPIC = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
SEND_CODES = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})
NOT_ALLOWED_SEND_TOPICS = frozenset({SCHEDULE_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT})
TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH = 127
MAX_CLIENTS = 10_000
MAX_CONSUMER_OFFSETS = 100_000
PULL_MAX_MSGS = 32  # Java's maxTransferCountOnMessageInMemory
PULL_MAX_BYTES = 256 * 1024  # Java's maxTransferBytesOnMessageInMemory
PULL_FLAG_COMMIT_OFFSET = 0x1
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

#: SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE one-letter keys -> SEND_MESSAGE names.
V2_KEYS = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "bname",
}


class _Reject(Exception):
    """A request refused with a response code and remark (not a bug)."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def parse_properties(text: str) -> dict[str, str]:
    """MessageDecoder.string2messageProperties: ``name\\x01value\\x02`` pairs, malformed ones skipped."""
    out: dict[str, str] = {}
    for pair in text.split(PROPERTY_SEPARATOR):
        name, sep, value = pair.partition(NAME_VALUE_SEPARATOR)
        if sep and name:
            out[name] = value
    return out


def format_properties(props: dict[str, str]) -> str:
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in props.items())


def _int(req: RemotingCommand, key: str, default: int) -> int:
    """Java's per-field parse: a missing or malformed value keeps the default."""
    text = req.ext(key)
    if text is None:
        return default
    try:
        return int(text.strip())
    except ValueError:
        return default


def _bool(req: RemotingCommand, key: str) -> bool:
    return (req.ext(key) or "").strip().lower() == "true"


def decode_batch(body: bytes) -> list[tuple[int, bytes, str]]:
    """SEND_BATCH_MESSAGE body -> [(flag, body, properties)] (MessageDecoder.encodeMessage layout)."""
    out: list[tuple[int, bytes, str]] = []
    pos = 0
    try:
        while pos < len(body):
            total, _magic, _crc, flag, body_len = struct.unpack_from(">iiiii", body, pos)
            start = pos + 20
            msg_body = body[start : start + body_len]
            (props_len,) = struct.unpack_from(">h", body, start + body_len)
            props_start = start + body_len + 2
            props = body[props_start : props_start + props_len].decode("utf-8")
            if total <= 0 or len(msg_body) != body_len or props_start + props_len > len(body):
                raise ValueError("truncated message")
            out.append((flag, msg_body, props))
            pos += total
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise _Reject(ResponseCode.MESSAGE_ILLEGAL, f"malformed batch body at byte {pos}: {exc}") from None
    if not out:
        raise _Reject(ResponseCode.MESSAGE_ILLEGAL, "empty batch")
    return out


@dataclass
class Client:
    conn: Hashable
    producer_groups: set[str] = field(default_factory=set)
    consumer_groups: set[str] = field(default_factory=set)


class _AsyncCodes:
    """The codes that must await right now; asked by the reactor per request."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    def __contains__(self, code: object) -> bool:
        if self.faults.hung:
            return code != FAULT_CODE
        return bool(self.faults.send_latency_ms) and code in SEND_CODES


class _Rates:
    """Per-second samples of the put/get totals, for the *Tps runtime keys."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int, int]] = deque(maxlen=601)

    def sample(self, now: float, puts: int, gets: int) -> None:
        self.samples.append((now, puts, gets))

    def tps(self, index: int) -> str:
        """Java's ``"10s 60s 600s"`` rates over the samples we have."""
        if len(self.samples) < 2:
            return "0.00 0.00 0.00"
        last = self.samples[-1]
        parts = []
        for window in (10, 60, 600):
            first = self.samples[max(0, len(self.samples) - 1 - window)]
            span = last[0] - first[0]
            parts.append(f"{(last[index] - first[index]) / span if span > 0 else 0.0:.2f}")
        return " ".join(parts)


class BrokerProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicTable,
        store: MessageStore,
        faults: Faults,
        *,
        broker_addr: str,
        peer_of: Callable[[Hashable], str | None] = lambda conn: None,
        kick: Callable[[], None] = lambda: None,
        registration_info: Callable[[], dict[str, str]] = dict,
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        self.faults = faults
        self.broker_addr = broker_addr
        self.peer_of = peer_of
        self.kick = kick
        self.registration_info = registration_info
        self.boot_ms = int(time.time() * 1000)
        self.config_version = DataVersion(0, self.boot_ms, 0)
        self.clients: OrderedDict[str, Client] = OrderedDict()
        self.consumer_offsets: OrderedDict[tuple[str, str, int], int] = OrderedDict()
        self.rates = _Rates()
        self.async_codes = _AsyncCodes(faults)
        self._queue_pick = random.Random()
        self._handlers: dict[int, Callable[[RemotingCommand, Hashable], RemotingCommand | None]] = {
            RequestCode.SEND_MESSAGE: self.send_message,
            RequestCode.SEND_MESSAGE_V2: self.send_message,
            RequestCode.SEND_BATCH_MESSAGE: self.send_message,
            RequestCode.PULL_MESSAGE: self.pull_message,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.consumer_list,
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topic_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info,
            RequestCode.GET_MAX_OFFSET: self.max_offset,
            RequestCode.GET_MIN_OFFSET: self.min_offset,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            FAULT_CODE: self.fault,
        }

    # ------------------------------------------------------------------
    # dispatch

    def handle(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        """The encoded answer to ``req`` (None for a oneway request)."""
        handler = self._handlers.get(req.code)
        try:
            if handler is None:
                resp = response_to(req, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {req.code} not supported")
            else:
                resp = handler(req, conn)
        except _Reject as rej:
            resp = response_to(req, rej.code, rej.remark)
        except Exception as exc:  # a handler bug must not take the connection down
            log.exception("request code %s failed", req.code)
            resp = response_to(req, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if req.is_oneway or resp is None:
            return None
        return encode(resp)

    async def handle_async(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        """Same as :meth:`handle`, after the delay the active faults ask for."""
        await self.faults.wait_resumed()
        if req.code in SEND_CODES and self.faults.send_latency_ms:
            await trio.sleep(self.faults.send_latency_ms / 1000.0)
        return self.handle(req, conn)

    def connection_closed(self, conn: Hashable) -> None:
        """Forget the clients whose heartbeats came over a closed connection (Java does the same)."""
        for client_id in [cid for cid, c in self.clients.items() if c.conn == conn]:
            del self.clients[client_id]

    def sample_rates(self) -> None:
        self.rates.sample(time.monotonic(), self.store.put_total, self.store.get_total)

    # ------------------------------------------------------------------
    # sending

    def _check_topic_name(self, topic: str) -> None:
        if not topic.strip():
            raise _Reject(ResponseCode.SYSTEM_ERROR, "The specified topic is blank.")
        if len(topic) > TOPIC_MAX_LENGTH:
            raise _Reject(ResponseCode.SYSTEM_ERROR, "The specified topic is longer than topic max length.")
        if not TOPIC_PATTERN.match(topic):
            raise _Reject(
                ResponseCode.SYSTEM_ERROR,
                f"The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
            )

    def _topic_for_send(self, topic: str, default_topic: str | None, client_queue_nums: int, sys_flag: int) -> TopicConfig:
        """The topic's config, auto-created from the default topic (TBW102) when allowed."""
        tc = self.topics.get(topic)
        if tc is not None:
            return tc
        default = self.topics.get(default_topic) if default_topic else None
        if (
            default is not None
            and self.config.autoCreateTopicEnable
            and default.perm & PERM_INHERIT
        ):
            nums = max(1, min(client_queue_nums if client_queue_nums > 0 else default.write_queue_nums, default.write_queue_nums))
            tc = TopicConfig(topic, nums, nums, default.perm & ~PERM_INHERIT, topic_sys_flag=sys_flag)
            try:
                self.topics.put(tc)  # bumps the DataVersion and kicks the registrar
            except ValueError as exc:
                raise _Reject(ResponseCode.SYSTEM_ERROR, str(exc)) from None
            log.info("auto-created topic %s from %s (%d queues)", topic, default_topic, nums)
            return tc
        raise _Reject(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{FAQ_APPLY_TOPIC}")

    def send_message(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        faults = self.faults
        if faults.reject_code is not None:
            return response_to(req, faults.reject_code, faults.reject_remark)
        if req.code != RequestCode.SEND_MESSAGE and req.ext_fields is not None:
            fields = req.ext_fields
            for short, long in V2_KEYS.items():
                if short in fields and long not in fields:
                    fields[long] = fields[short]
        config = self.config
        if not config.is_master:
            raise _Reject(ResponseCode.SERVICE_NOT_AVAILABLE, f"the broker[{self.broker_addr}] is a slave, sending is forbidden")
        topic = req.ext("topic") or ""
        if not config.brokerPermission & PERM_WRITE:
            raise _Reject(ResponseCode.NO_PERMISSION, f"the broker[{self.broker_addr}] sending message is forbidden")
        self._check_topic_name(topic)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise _Reject(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        sys_flag = _int(req, "sysFlag", 0)
        tc = self._topic_for_send(topic, req.ext("defaultTopic"), _int(req, "defaultTopicQueueNums", 4), 0)
        if not tc.perm & PERM_WRITE:
            raise _Reject(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        queue_id = _int(req, "queueId", -1)
        if queue_id >= max(tc.read_queue_nums, tc.write_queue_nums):
            raise _Reject(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, {tc} Producer: {self.peer_of(conn)}",
            )
        if queue_id < 0:
            queue_id = self._queue_pick.randrange(max(1, tc.write_queue_nums))
        if req.code == RequestCode.SEND_BATCH_MESSAGE:
            parts = decode_batch(req.body)
        else:
            parts = [(_int(req, "flag", 0), req.body, req.ext("properties") or "")]
        if sum(len(p[1]) for p in parts) > config.maxMessageSize:
            raise _Reject(ResponseCode.MESSAGE_ILLEGAL, f"the message body size over max value, MAX: {config.maxMessageSize}")
        born_host = self._born_host(conn)
        born_ts = _int(req, "bornTimestamp", int(time.time() * 1000))
        reconsume = _int(req, "reconsumeTimes", 0)
        ids: list[str] = []
        uniq_keys: list[str] = []
        first_offset = -1
        region = "DefaultRegion"
        for flag, body, props_text in parts:
            props = parse_properties(props_text)
            props.setdefault("CLUSTER", config.brokerClusterName)
            if "UNIQ_KEY" in props:
                uniq_keys.append(props["UNIQ_KEY"])
            region = props.get("MSG_REGION") or region
            try:
                result = self.store.put(
                    Incoming(topic, queue_id, body, flag, format_properties(props), sys_flag, born_ts, born_host, reconsume)
                )
            except ValueError as exc:
                raise _Reject(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from None
            if first_offset < 0:
                first_offset = result.queue_offset
            ids.append(result.msg_id)
        outer_uniq = parse_properties(req.ext("properties") or "").get("UNIQ_KEY")
        ext: dict[str, object] = {
            "msgId": ",".join(ids),
            "queueId": queue_id,
            "queueOffset": first_offset,
            "MSG_REGION": region,
            "TRACE_ON": "true",
        }
        transaction_id = outer_uniq or ",".join(uniq_keys)
        if transaction_id:
            ext["transactionId"] = transaction_id
        return response_to(req, ResponseCode.SUCCESS, ext_fields=ext)

    def _born_host(self, conn: Hashable) -> tuple[bytes, int]:
        peer = self.peer_of(conn) or "127.0.0.1:0"
        host, _, port = peer.rpartition(":")
        return ipv4_bytes(host if host and ":" not in host else "127.0.0.1"), int(port) if port.isdigit() else 0

    # ------------------------------------------------------------------
    # consuming

    def pull_message(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        topic = req.ext("topic") or ""
        group = req.ext("consumerGroup") or ""
        queue_id = _int(req, "queueId", -1)
        offset = _int(req, "queueOffset", 0)
        if not self.config.brokerPermission & PERM_READ:
            raise _Reject(ResponseCode.NO_PERMISSION, f"the broker[{self.broker_addr}] pulling message is forbidden")
        tc = self.topics.get(topic)
        if tc is None:
            raise _Reject(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{FAQ_APPLY_TOPIC}")
        if not tc.perm & PERM_READ:
            raise _Reject(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
        if not 0 <= queue_id < tc.read_queue_nums:
            raise _Reject(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        if _int(req, "sysFlag", 0) & PULL_FLAG_COMMIT_OFFSET and self.config.is_master:
            commit = _int(req, "commitOffset", -1)
            if commit >= 0 and group:
                self._set_offset(group, topic, queue_id, commit)
        store = self.store
        lo, hi = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
        records: list[bytes] = []
        if hi == 0:  # NO_MESSAGE_IN_QUEUE
            code = ResponseCode.PULL_NOT_FOUND if offset == 0 else ResponseCode.PULL_OFFSET_MOVED
            next_begin = 0
        elif offset < lo:  # OFFSET_TOO_SMALL
            code, next_begin = ResponseCode.PULL_OFFSET_MOVED, lo
        elif offset == hi:  # OFFSET_OVERFLOW_ONE
            code, next_begin = ResponseCode.PULL_NOT_FOUND, offset
        elif offset > hi:  # OFFSET_OVERFLOW_BADLY
            code, next_begin = ResponseCode.PULL_OFFSET_MOVED, (lo if lo == 0 else hi)
        else:
            max_nums = min(max(1, _int(req, "maxMsgNums", PULL_MAX_MSGS)), PULL_MAX_MSGS)
            records = store.get(topic, queue_id, offset, max_nums, PULL_MAX_BYTES)
            code, next_begin = ResponseCode.SUCCESS, offset + len(records)
        ext = {
            "suggestWhichBrokerId": 0,
            "nextBeginOffset": next_begin,
            "minOffset": lo,
            "maxOffset": hi,
            "topicSysFlag": tc.topic_sys_flag,
            "groupSysFlag": 0,
        }
        remark = None if code == ResponseCode.SUCCESS else "no message" if code == ResponseCode.PULL_NOT_FOUND else "offset moved"
        return response_to(req, code, remark, ext_fields=ext, body=b"".join(records))

    def _set_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = (group, topic, queue_id)
        self.consumer_offsets[key] = offset
        self.consumer_offsets.move_to_end(key)
        while len(self.consumer_offsets) > MAX_CONSUMER_OFFSETS:
            self.consumer_offsets.popitem(last=False)

    def query_consumer_offset(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        group, topic = req.ext("consumerGroup") or "", req.ext("topic") or ""
        queue_id = _int(req, "queueId", 0)
        offset = self.consumer_offsets.get((group, topic, queue_id))
        if offset is None and self.store.min_offset(topic, queue_id) <= 0:
            offset = 0  # nothing ever dropped: start from the beginning, as Java does
        if offset is None:
            return response_to(req, ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def update_consumer_offset(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        group, topic = req.ext("consumerGroup") or "", req.ext("topic") or ""
        if not group or not topic:
            raise _Reject(ResponseCode.SYSTEM_ERROR, "consumerGroup and topic are required")
        self._set_offset(group, topic, _int(req, "queueId", 0), _int(req, "commitOffset", 0))
        return response_to(req, ResponseCode.SUCCESS)

    # ------------------------------------------------------------------
    # clients

    def heart_beat(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        try:
            data = fastjson.loads(req.body) if req.body else {}
        except BodyError as exc:
            raise _Reject(ResponseCode.SYSTEM_ERROR, f"bad heartbeat body: {exc}") from None
        if not isinstance(data, dict) or not data.get("clientID"):
            raise _Reject(ResponseCode.SYSTEM_ERROR, "heartbeat without clientID")
        client_id = str(data["clientID"])
        client = self.clients.pop(client_id, None) or Client(conn)
        client.conn = conn
        client.producer_groups = _groups(data.get("producerDataSet"))
        client.consumer_groups = _groups(data.get("consumerDataSet"))
        self.clients[client_id] = client
        while len(self.clients) > MAX_CLIENTS:
            self.clients.popitem(last=False)
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"IS_SUPPORT_HEART_BEAT_V2": True, "IS_SUB_CHANGE": True})

    def unregister_client(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        client_id = req.ext("clientID") or ""
        client = self.clients.get(client_id)
        if client is not None:
            producer, consumer = req.ext("producerGroup"), req.ext("consumerGroup")
            if producer:
                client.producer_groups.discard(producer)
            if consumer:
                client.consumer_groups.discard(consumer)
            if not producer and not consumer or not client.producer_groups and not client.consumer_groups:
                del self.clients[client_id]
        return response_to(req, ResponseCode.SUCCESS)

    def consumer_list(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        group = req.ext("consumerGroup") or ""
        ids = [cid for cid, c in self.clients.items() if group in c.consumer_groups]
        if not ids:
            raise _Reject(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return response_to(req, ResponseCode.SUCCESS, body=fastjson.dumps_fast({"consumerIdList": ids}))

    # ------------------------------------------------------------------
    # admin

    def update_and_create_topic(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        topic = req.ext("topic") or ""
        self._check_topic_name(topic)
        if topic == DEFAULT_TOPIC and self.topics.get(DEFAULT_TOPIC) is None:
            pass  # creating TBW102 on a broker that has none is allowed
        elif topic == DEFAULT_TOPIC:
            raise _Reject(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with AUTO_CREATE_TOPIC_KEY_TOPIC.")
        read, write = _int(req, "readQueueNums", 16), _int(req, "writeQueueNums", 16)
        perm = _int(req, "perm", PERM_READ | PERM_WRITE)
        if not (1 <= read <= 1024 and 1 <= write <= 1024 and 0 <= perm <= 15):
            raise _Reject(ResponseCode.SYSTEM_ERROR, f"invalid queue numbers or perm: read={read} write={write} perm={perm}")
        tc = TopicConfig(
            topic,
            read,
            write,
            perm,
            topic_filter_type=req.ext("topicFilterType") or "SINGLE_TAG",
            topic_sys_flag=_int(req, "topicSysFlag", 0),
            order=_bool(req, "order"),
            attributes=_attributes(req.ext("attributes")),
        )
        try:
            self.topics.put(tc)
        except ValueError as exc:
            raise _Reject(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        log.info("topic %s created/updated: read=%d write=%d perm=%d", topic, read, write, perm)
        return response_to(req, ResponseCode.SUCCESS)

    def delete_topic(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        topic = req.ext("topic") or ""
        if self.topics.delete(topic):
            self.store.delete_topic(topic)
            for key in [k for k in self.consumer_offsets if k[1] == topic]:
                del self.consumer_offsets[key]
            log.info("topic %s deleted", topic)
        return response_to(req, ResponseCode.SUCCESS)

    def all_topic_config(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        return response_to(req, ResponseCode.SUCCESS, body=self.topics.wrapper_body())

    def max_offset(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        offset = self.store.max_offset(req.ext("topic") or "", _int(req, "queueId", 0))
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def min_offset(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        offset = self.store.min_offset(req.ext("topic") or "", _int(req, "queueId", 0))
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def runtime_info(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        return response_to(req, ResponseCode.SUCCESS, body=encode_kv_table(self.runtime_table()))

    def runtime_table(self) -> dict[str, str]:
        """The keys mqadmin clusterList (4.9.x and 5.x) reads, plus the stub's identity."""
        store = self.store
        now = int(time.time() * 1000)
        put_tps, get_tps = self.rates.tps(1), self.rates.tps(2)
        uptime = (now - self.boot_ms) // 1000
        table = {
            "brokerVersionDesc": "V5_3_3",
            "brokerVersion": str(CURRENT_VERSION),
            "bootTimestamp": str(self.boot_ms),
            "runtime": f"[ {uptime // 86400} days, {uptime % 86400 // 3600} hours, {uptime % 3600 // 60} minutes, {uptime % 60} seconds ]",
            "putTps": put_tps,
            "getTransferredTps": get_tps,
            "getTransferedTps": get_tps,
            "getFoundTps": get_tps,
            "getMissTps": "0.00 0.00 0.00",
            "getTotalTps": get_tps,
            "msgPutTotalYesterdayMorning": "0",
            "msgPutTotalTodayMorning": "0",
            "msgPutTotalTodayNow": str(store.put_total),
            "msgGetTotalYesterdayMorning": "0",
            "msgGetTotalTodayMorning": "0",
            "msgGetTotalTodayNow": str(store.get_total),
            "earliestMessageTimeStamp": str(store.earliest_timestamp()),
            "commitLogDiskRatio": "0.0",
            "commitLogMinOffset": "0",
            "commitLogMaxOffset": str(store.commit_offset),
            "dispatchBehindBytes": "0",
            "pageCacheLockTimeMills": "0",
            "brokerActive": "true",
            "timerReadBehind": "0",
            "timerOffsetBehind": "0",
            "timerCongestNum": "0",
            "timerEnqueueTps": "0.0",
            "timerDequeueTps": "0.0",
            # extensions: who this stub is and what registration told it
            "brokerAddr": self.broker_addr,
            "brokerName": self.config.brokerName,
            "brokerId": str(self.config.brokerId),
            "brokerPermission": str(self.config.brokerPermission),
            "topicCount": str(len(self.topics)),
        }
        for pool in ("send", "pull", "query", "ack", "lite"):
            table[f"{pool}ThreadPoolQueueSize"] = "0"
            table[f"{pool}ThreadPoolQueueHeadWaitTimeMills"] = "0"
        table.update(self.registration_info())
        return table

    def update_broker_config(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        try:
            props = properties.loads(req.body.decode("utf-8")) if req.body else {}
        except (UnicodeDecodeError, properties.PropertiesError) as exc:
            raise _Reject(ResponseCode.SYSTEM_ERROR, f"bad properties body: {exc}") from None
        refused = sorted(k for k in props if k not in RUNTIME_KEYS)
        if refused:
            raise _Reject(
                ResponseCode.NO_PERMISSION,
                f"Can not update config: {', '.join(refused)} (updatable at runtime: {', '.join(sorted(RUNTIME_KEYS))})",
            )
        try:
            values = self.config.parse_values(props)
            self.config.validate_runtime(values)
        except ConfigError as exc:
            raise _Reject(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        changed = {k: v for k, v in values.items() if getattr(self.config, k) != v}
        for key, value in changed.items():
            setattr(self.config, key, value)
        if changed:
            self.config_version = self.config_version.next(int(time.time() * 1000))
            log.info("broker config updated: %s", changed)
        if "brokerPermission" in changed:
            self.topics.changed()  # re-register at once with masked perms
        elif changed:
            self.kick()  # a new period or timeout takes effect now
        return response_to(req, ResponseCode.SUCCESS)

    def get_broker_config(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        body = self.config.render().encode()
        return response_to(
            req, ResponseCode.SUCCESS, ext_fields={"version": self.config_version.encode().decode()}, body=body
        )

    def fault(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        try:
            self.faults.apply(req.ext("action"), dict(req.ext_fields or {}))
        except FaultError as exc:
            raise _Reject(ResponseCode.INVALID_PARAMETER, str(exc)) from None
        log.warning("fault switchboard: %s", self.faults.state())
        self.kick()  # a healed partition registers at once
        return response_to(req, ResponseCode.SUCCESS, body=self.faults.state_body())


def _groups(value: Any) -> set[str]:
    if not isinstance(value, list):
        return set()
    return {str(item["groupName"]) for item in value if isinstance(item, dict) and item.get("groupName")}


def _attributes(text: str | None) -> dict[str, str]:
    """5.x ``attributes`` header: ``+key=value,+key2=value2`` (a ``-key`` removes; ignored here)."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if item.startswith("+") and "=" in item:
            key, _, value = item[1:].partition("=")
            out[key] = value
    return out
