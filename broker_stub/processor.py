"""Request handlers of the broker stub: request code -> function of the state.

No sockets here. The server's reactor hands in decoded requests with an
opaque connection id and writes back whatever :meth:`handle` returns
(encoded bytes, or None: oneway, or a pull held for later, whose answer goes
out through ``write_to``). This module serves producers (sends) and
admin tools; consumers are served by :mod:`broker_stub.consuming`; the
topic table, the message store and the fault switchboard are injected so
each stays one small module.

Everything is answered synchronously except while a fault asks for delay
(send latency, hang): then :attr:`async_codes` reports the affected codes
and the reactor routes them through :meth:`handle_async`.

The send path is the hot path (the benchmark wants 20,000 sends/s on one
core): it reads header fields by their wire names without copying the
header, finds the few properties it needs without parsing all of them,
and builds the usual JSON success answer from a byte template instead of
a command object (byte-identical to the generic encoding; a test checks).
"""

from __future__ import annotations

import logging
import random
import re
import struct
import time
from collections.abc import Callable, Hashable

import trio

from broker_stub.admin import BrokerAdmin
from broker_stub.common import (
    FAQ_APPLY_TOPIC,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    Reject,
    ext_bool,
    ext_int,
    find_property,
)
from broker_stub.config import RUNTIME_KEYS, BrokerConfig, ConfigError
from broker_stub.consuming import Consuming
from broker_stub.faults import FAULT_CODE, FaultError, Faults
from broker_stub.runtime import DayTotals, Rates, runtime_table
from broker_stub.store import MessageStore, ipv4_bytes
from broker_stub.subgroups import SubscriptionGroups
from broker_stub.topics import (
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TopicTable,
)
from remoting import properties
from remoting.bodies import DataVersion, TopicConfig, encode_kv_table
from remoting.codec import encode
from remoting.codes import (
    CURRENT_VERSION,
    DEFAULT_TOPIC,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from remoting.command import RemotingCommand, response_to

log = logging.getLogger("broker_stub")

SEND_MESSAGE = int(RequestCode.SEND_MESSAGE)
SEND_CODES = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})
NOT_ALLOWED_SEND_TOPICS = frozenset({SCHEDULE_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT})
TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH = 127
#: Text that goes into a JSON string unchanged (printable ASCII without '"' and '\').
JSON_PLAIN = re.compile(r'[ !#-\[\]-~]*\Z')
CLUSTER_PROPERTY = "CLUSTER"

#: Header keys of a send, in this order: SEND_MESSAGE's full names, SEND_MESSAGE_V2's letters.
SEND_FIELDS = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
               "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch")
SEND_FIELDS_V2 = tuple("abcdefghijklm")

_FRAME_PREFIX = struct.Struct(">II")



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
        raise Reject(ResponseCode.MESSAGE_ILLEGAL, f"malformed batch body at byte {pos}: {exc}") from None
    if not out:
        raise Reject(ResponseCode.MESSAGE_ILLEGAL, "empty batch")
    return out


def _num(text: str | None, default: int) -> int:
    """Java's per-field parse of a header value: missing or malformed keeps the default."""
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        return default


def send_ok_frame(opaque: int, msg_id: str, queue_id: int, queue_offset: int, region: str, trace_on: str,
                  transaction_id: str | None) -> bytes:
    """The JSON SUCCESS answer of a send, as ``encode(response_to(...))`` would write it."""
    tx = f',"transactionId":"{transaction_id}"' if transaction_id else ""
    header = (
        f'{{"code":0,"extFields":{{"msgId":"{msg_id}","queueId":"{queue_id}","queueOffset":"{queue_offset}",'
        f'"MSG_REGION":"{region}","TRACE_ON":"{trace_on}"{tx}}},"flag":1,"language":"JAVA","opaque":{opaque},'
        f'"serializeTypeCurrentRPC":"JSON","version":{CURRENT_VERSION}}}'
    ).encode()
    return _FRAME_PREFIX.pack(4 + len(header), len(header)) + header


class _AsyncCodes:
    """The codes that must await while a delaying fault is on (the reactor asks per request;
    otherwise :attr:`BrokerProcessor.async_codes` is an empty frozenset, a C-level check)."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    def __contains__(self, code: object) -> bool:
        if self.faults.hung:
            return code != FAULT_CODE
        return bool(self.faults.send_latency_ms) and code in SEND_CODES


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
        write_to: Callable[[Hashable, bytes], bool] = lambda conn, data: False,
        clock: Callable[[], float] = time.monotonic,
        subgroups: SubscriptionGroups | None = None,
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
        self.rates = Rates()
        self.days = DayTotals()
        self.clock = clock
        self.async_codes: frozenset[int] | _AsyncCodes = frozenset()
        self.consuming = Consuming(
            config, topics, store, broker_addr=broker_addr, put_message=self.put_message, write_to=write_to, clock=clock
        )
        self.admin = BrokerAdmin(config, topics, store, self.consuming, subgroups or SubscriptionGroups(),
                                 peer_of=peer_of, write_to=write_to, clock=clock)
        self._queue_pick = random.Random()
        self._born: dict[Hashable, tuple[bytes, int]] = {}
        # the CLUSTER property a Java broker adds to every message it stores
        self._cluster_pair = f"{CLUSTER_PROPERTY}{NAME_VALUE_SEPARATOR}{config.brokerClusterName}{PROPERTY_SEPARATOR}"
        self._region_plain = bool(JSON_PLAIN.match(config.regionId))  # regionId is fixed at start
        self._handlers: dict[int, Callable[[RemotingCommand, Hashable], RemotingCommand | bytes | None]] = {
            RequestCode.SEND_MESSAGE: self.send_message,
            RequestCode.SEND_MESSAGE_V2: self.send_message,
            RequestCode.SEND_BATCH_MESSAGE: self.send_message,
            **self.consuming.handlers(),
            **self.admin.handlers(),  # after consuming's: it wraps HEART_BEAT
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topic_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info,
            RequestCode.GET_MAX_OFFSET: self.max_offset,
            RequestCode.GET_MIN_OFFSET: self.min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.earliest_store_time,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            FAULT_CODE: self.fault,
        }

    # ------------------------------------------------------------------
    # dispatch

    def handle(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        """The encoded answer to ``req`` (None for a oneway request or a held pull)."""
        handler = self._handlers.get(req.code)
        try:
            if handler is None:
                resp = response_to(req, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {req.code} not supported")
            else:
                resp = handler(req, conn)
        except Reject as rej:
            resp = response_to(req, rej.code, rej.remark)
        except Exception as exc:  # a handler bug must not take the connection down
            log.exception("request code %s failed", req.code)
            resp = response_to(req, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if resp is None or req.flag & 2:  # held, or oneway
            return None
        return resp if type(resp) is bytes else encode(resp)  # type: ignore[arg-type]

    async def handle_async(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        """Same as :meth:`handle`, after the delay the active faults ask for."""
        await self.faults.wait_resumed()
        if req.code in SEND_CODES and self.faults.send_latency_ms:
            await trio.sleep(self.faults.send_latency_ms / 1000.0)
        return self.handle(req, conn)

    def connection_closed(self, conn: Hashable) -> None:
        self._born.pop(conn, None)
        self.consuming.connection_closed(conn)

    def tick(self) -> None:
        """Once a second: sample the totals for the runtime-info rates and day counters."""
        store = self.store
        self.rates.sample(self.clock(), store.put_total, store.get_total)
        self.days.update(store.put_total, store.get_total)
        self.admin.tick()

    def timers(self) -> None:
        """Often (every few ms while anything waits): held pulls that timed out, retries that are due."""
        if self.faults.hung:
            return
        self.consuming.expire_held()
        self.consuming.delays.run_due()

    # ------------------------------------------------------------------
    # sending

    def _check_topic_name(self, topic: str) -> None:
        if not topic.strip():
            raise Reject(ResponseCode.SYSTEM_ERROR, "The specified topic is blank.")
        if len(topic) > TOPIC_MAX_LENGTH:
            raise Reject(ResponseCode.SYSTEM_ERROR, "The specified topic is longer than topic max length.")
        if not TOPIC_PATTERN.match(topic):
            raise Reject(
                ResponseCode.SYSTEM_ERROR,
                f"The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
            )

    def _new_topic_for_send(self, topic: str, default_topic: str | None, client_queue_nums: int) -> TopicConfig:
        """A topic not in the table: validated, then auto-created from the default topic (TBW102) when allowed."""
        self._check_topic_name(topic)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise Reject(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        default = self.topics.get(default_topic) if default_topic else None
        if default is not None and self.config.autoCreateTopicEnable and default.perm & PERM_INHERIT:
            nums = max(1, min(client_queue_nums if client_queue_nums > 0 else default.write_queue_nums, default.write_queue_nums))
            tc = TopicConfig(topic, nums, nums, default.perm & ~PERM_INHERIT)
            try:
                self.topics.put(tc)  # bumps the DataVersion and kicks the registrar
            except ValueError as exc:
                raise Reject(ResponseCode.SYSTEM_ERROR, str(exc)) from None
            log.info("auto-created topic %s from %s (%d queues)", topic, default_topic, nums)
            return tc
        raise Reject(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{FAQ_APPLY_TOPIC}")

    def send_message(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand | bytes:
        faults = self.faults
        if faults.reject_code is not None:
            return response_to(req, faults.reject_code, faults.reject_remark)
        config = self.config
        if config.brokerId != 0:
            raise Reject(ResponseCode.SERVICE_NOT_AVAILABLE, f"the broker[{self.broker_addr}] is a slave, sending is forbidden")
        if not config.brokerPermission & PERM_WRITE:
            raise Reject(ResponseCode.NO_PERMISSION, f"the broker[{self.broker_addr}] sending message is forbidden")
        get = (req.ext_fields or {}).get
        (_k_group, k_topic, k_default, k_default_nums, k_queue, k_sys_flag, k_born, k_flag, k_props, k_reconsume,
         _k_unit, _k_max_reconsume, _k_batch) = SEND_FIELDS if req.code == SEND_MESSAGE else SEND_FIELDS_V2
        topic = get(k_topic) or ""
        tc = self.topics.get(topic)
        if tc is None:
            tc = self._new_topic_for_send(topic, get(k_default), _num(get(k_default_nums), 4))
        elif topic in NOT_ALLOWED_SEND_TOPICS:
            raise Reject(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        if not tc.perm & PERM_WRITE:
            raise Reject(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        try:  # the usual case: every number present and well-formed (one try instead of five calls)
            queue_id = int(get(k_queue))  # type: ignore[arg-type]
            flag = int(get(k_flag))  # type: ignore[arg-type]
            born_ts = int(get(k_born))  # type: ignore[arg-type]
            sys_flag = int(get(k_sys_flag))  # type: ignore[arg-type]
            reconsume = int(get(k_reconsume))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            queue_id = _num(get(k_queue), -1)
            flag = _num(get(k_flag), 0)
            born_ts = _num(get(k_born), 0)
            sys_flag = _num(get(k_sys_flag), 0)
            reconsume = _num(get(k_reconsume), 0)
        if queue_id >= tc.read_queue_nums and queue_id >= tc.write_queue_nums:
            raise Reject(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, {tc} Producer: {self.peer_of(conn)}",
            )
        if queue_id < 0:
            queue_id = self._queue_pick.randrange(max(1, tc.write_queue_nums))
        header_props = get(k_props) or ""
        body = req.body
        if req.code == RequestCode.SEND_BATCH_MESSAGE:
            parts = decode_batch(body)
            size = sum(len(p[1]) for p in parts)
        else:
            parts = [(flag, body, header_props)]
            size = len(body)
        if size > config.maxMessageSize:
            raise Reject(ResponseCode.MESSAGE_ILLEGAL, f"the message body size over max value, MAX: {config.maxMessageSize}")
        born = self._born.get(conn) or self._born_host(conn)
        if not born_ts:
            born_ts = int(time.time() * 1000)
        cluster_pair = self._cluster_pair
        put = self.put_message
        ids: list[str] = []
        first_offset = -1
        for flag, msg_body, props_text in parts:
            if cluster_pair not in props_text:
                props_text = f"{props_text}{cluster_pair}"
            try:
                offset, phys = put(topic, queue_id, msg_body, flag, props_text, sys_flag, born_ts, born[0], born[1], reconsume)
            except ValueError as exc:
                raise Reject(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from None
            if first_offset < 0:
                first_offset = offset
            ids.append(self.store.msg_id(phys))
        msg_id = ids[0] if len(ids) == 1 else ",".join(ids)
        transaction_id = find_property(header_props, "UNIQ_KEY") if header_props else None
        region = config.regionId
        trace = "true" if config.traceOn else "false"
        if (
            req.serialize_type is SerializeType.JSON
            and self._region_plain
            and (transaction_id is None or JSON_PLAIN.match(transaction_id))
        ):
            return send_ok_frame(req.opaque, msg_id, queue_id, first_offset, region, trace, transaction_id)
        ext: dict[str, object] = {
            "msgId": msg_id,
            "queueId": queue_id,
            "queueOffset": first_offset,
            "MSG_REGION": region,
            "TRACE_ON": trace,
        }
        if transaction_id:
            ext["transactionId"] = transaction_id
        return response_to(req, ResponseCode.SUCCESS, ext_fields=ext)

    def put_message(
        self, topic: str, queue_id: int, body: bytes, flag: int, props_text: str, sys_flag: int, born_ts: int,
        born_ip: bytes, born_port: int, reconsume: int,
    ) -> tuple[int, int]:
        """Store one message and wake the pulls held on its queue; returns (queue offset, physical offset)."""
        result = self.store.put(
            topic, queue_id, body, flag, props_text, sys_flag, born_ts, born_ip, born_port, reconsume,
            find_property(props_text, "TAGS"),
        )
        self.admin.stats.put(topic, len(body))
        if self.consuming.hold.count:
            self.consuming.arrived(topic, queue_id)
        return result

    def _born_host(self, conn: Hashable) -> tuple[bytes, int]:
        peer = self.peer_of(conn) or "127.0.0.1:0"
        host, _, port = peer.rpartition(":")
        born = ipv4_bytes(host if host and ":" not in host else "127.0.0.1"), int(port) if port.isdigit() else 0
        if self.peer_of(conn) is not None:
            self._born[conn] = born
        return born

    # ------------------------------------------------------------------
    # admin

    def update_and_create_topic(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        topic = req.ext("topic") or ""
        self._check_topic_name(topic)
        if topic == DEFAULT_TOPIC and self.topics.get(DEFAULT_TOPIC) is not None:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with AUTO_CREATE_TOPIC_KEY_TOPIC.")
        read, write = ext_int(req, "readQueueNums", 16), ext_int(req, "writeQueueNums", 16)
        perm = ext_int(req, "perm", PERM_READ | PERM_WRITE)
        if not (1 <= read <= 1024 and 1 <= write <= 1024 and 0 <= perm <= 15):
            raise Reject(ResponseCode.SYSTEM_ERROR, f"invalid queue numbers or perm: read={read} write={write} perm={perm}")
        tc = TopicConfig(
            topic,
            read,
            write,
            perm,
            topic_filter_type=req.ext("topicFilterType") or "SINGLE_TAG",
            topic_sys_flag=ext_int(req, "topicSysFlag", 0),
            order=ext_bool(req, "order"),
            attributes=_attributes(req.ext("attributes")),
        )
        try:
            self.topics.put(tc)
        except ValueError as exc:
            raise Reject(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        log.info("topic %s created/updated: read=%d write=%d perm=%d", topic, read, write, perm)
        return response_to(req, ResponseCode.SUCCESS)

    def delete_topic(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        topic = req.ext("topic") or ""
        if self.topics.delete(topic):
            self.store.delete_topic(topic)
            offsets = self.consuming.offsets
            for key in [k for k in offsets if k[1] == topic]:
                del offsets[key]
            self.admin.topic_deleted(topic)
            log.info("topic %s deleted", topic)
        return response_to(req, ResponseCode.SUCCESS)

    def all_topic_config(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        return response_to(req, ResponseCode.SUCCESS, body=self.topics.wrapper_body())

    def max_offset(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        offset = self.store.max_offset(req.ext("topic") or "", ext_int(req, "queueId", 0))
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def min_offset(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        offset = self.store.min_offset(req.ext("topic") or "", ext_int(req, "queueId", 0))
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def search_offset(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """SEARCH_OFFSET_BY_TIMESTAMP: ``boundaryType`` LOWER (default) or UPPER (5.x)."""
        upper = (req.ext("boundaryType") or "").strip().upper() == "UPPER"
        offset = self.store.offset_by_time(
            req.ext("topic") or "", ext_int(req, "queueId", 0), ext_int(req, "timestamp", 0), upper=upper
        )
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def earliest_store_time(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        stamp = self.store.earliest_timestamp(req.ext("topic") or "", ext_int(req, "queueId", 0))
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"timestamp": stamp})

    def view_message(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """VIEW_MESSAGE_BY_ID: the stored record at a commit-log offset (mqadmin queryMsgById)."""
        phys = ext_int(req, "offset", -1)
        record = self.store.find_by_phys(phys)
        if record is None:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {phys}")
        return response_to(req, ResponseCode.SUCCESS, body=record)

    def runtime_info(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        return response_to(req, ResponseCode.SUCCESS, body=encode_kv_table(self.runtime_table()))

    def runtime_table(self) -> dict[str, str]:
        """Java 5.3.3's runtime keys (see :mod:`broker_stub.runtime` for the few of ours)."""
        store = self.store
        return runtime_table(
            boot_ms=self.boot_ms,
            now_ms=int(time.time() * 1000),
            rates=self.rates,
            days=self.days,
            put_total=store.put_total,
            get_total=store.get_total,
            earliest_ms=store.earliest_timestamp(),
            commit_offset=store.commit_offset,
            is_master=self.config.is_master,
            held_pulls=self.consuming.hold.count,
            store_root=self.config.storePathRootDir or ".",
            minute_puts=self.admin.stats.minute_puts(int(self.clock() * 1000)),
            master_addr=self.registration_info().get("masterAddr"),
        )

    def update_broker_config(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        try:
            props = properties.loads(req.body.decode("utf-8")) if req.body else {}
        except (UnicodeDecodeError, properties.PropertiesError) as exc:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"bad properties body: {exc}") from None
        refused = sorted(k for k in props if k not in RUNTIME_KEYS)
        if refused:
            raise Reject(
                ResponseCode.NO_PERMISSION,
                f"Can not update config: {', '.join(refused)} (updatable at runtime: {', '.join(sorted(RUNTIME_KEYS))})",
            )
        try:
            values = self.config.parse_values(props)
            self.config.validate_runtime(values)
        except ConfigError as exc:
            raise Reject(ResponseCode.SYSTEM_ERROR, str(exc)) from None
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
            raise Reject(ResponseCode.INVALID_PARAMETER, str(exc)) from None
        log.warning("fault switchboard: %s", self.faults.state())
        delaying = self.faults.hung or self.faults.send_latency_ms
        self.async_codes = _AsyncCodes(self.faults) if delaying else frozenset()
        self.kick()  # a healed partition registers at once
        return response_to(req, ResponseCode.SUCCESS, body=self.faults.state_body())


def _attributes(text: str | None) -> dict[str, str]:
    """5.x ``attributes`` header: ``+key=value,+key2=value2`` (a ``-key`` removes; ignored here)."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if item.startswith("+") and "=" in item:
            key, _, value = item[1:].partition("=")
            out[key] = value
    return out
