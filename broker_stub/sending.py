"""The producer side of the broker: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320).

The send path is the hot path (the benchmark wants 20,000 sends/s on one
core): it reads header fields by their wire names without copying the
header, touches the properties string only where it must, and builds the
usual JSON success answer from a byte template instead of a command object
(byte-identical to the generic encoding; a test checks).

Stored properties are what a Java 5.3 broker stores (SendMessageProcessor):
the client's own pairs, without ``POP_CK``, plus ``UNIQ_KEY`` when the
client sent none, plus ``CLUSTER`` (the broker's, replacing any the client
set). A Java 4.9 client ends its properties without the ``\\x02`` a 5.x
client writes after the last pair, so the separator is added before
anything is appended; otherwise the last pair would swallow the addition
(``TAGS=TagACLUSTER...``) and tag filtering would miss the message.
:mod:`broker_stub.properties_form` does the text work.
"""

from __future__ import annotations

import logging
import random
import re
import struct
import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from broker_stub.common import FAQ_APPLY_TOPIC, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Reject, UniqIds
from broker_stub.config import BrokerConfig
from broker_stub.delays import parse_levels
from broker_stub.faults import Faults
from broker_stub.headers import INT, LONG, number_error
from broker_stub.properties_form import batch_properties, batch_tail, cluster_pair, single_properties, stored_tag
from broker_stub.store import MessageStore, StoreFullError, StoreUnavailableError, ipv4_bytes
from broker_stub.timers import Timers, transform
from broker_stub.topics import OFFSET_MOVED_EVENT, SCHEDULE_TOPIC, SELF_TEST_TOPIC, TopicLimitError, TopicTable
from remoting.bodies import TopicConfig
from remoting.codes import CURRENT_VERSION, PERM_INHERIT, PERM_WRITE, RequestCode, ResponseCode, SerializeType
from remoting.codec import encode
from remoting.command import RemotingCommand, response_to
from remoting.names import PathOutsideError, topic_problem

if TYPE_CHECKING:
    from broker_stub.consuming import Consuming

log = logging.getLogger("broker_stub")

SEND_MESSAGE = int(RequestCode.SEND_MESSAGE)
SEND_BATCH = int(RequestCode.SEND_BATCH_MESSAGE)
SEND_CODES = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})
#: Why a send was refused, by the response code it got (metrics labels; any other code is ``other``).
REFUSAL_REASONS: dict[int, str] = {
    ResponseCode.SERVICE_NOT_AVAILABLE: "service_not_available",  # a slave, a full store, a disk that refused
    ResponseCode.NO_PERMISSION: "not_writable",  # the broker's or the topic's permission, a forbidden topic
    ResponseCode.SYSTEM_BUSY: "busy",  # the disk is behind: flow control
    ResponseCode.TOPIC_NOT_EXIST: "topic_not_exist",
    ResponseCode.MESSAGE_ILLEGAL: "message_illegal",
    ResponseCode.INVALID_PARAMETER: "invalid",
    ResponseCode.SYSTEM_ERROR: "error",
}
#: Every reason label: the above, ``fault_reject`` (the fault switchboard's reject) and ``other``.
SEND_REFUSALS = (*REFUSAL_REASONS.values(), "fault_reject", "other")
NOT_ALLOWED_SEND_TOPICS = frozenset({SCHEDULE_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT})
#: Text that goes into a JSON string unchanged (printable ASCII without '"' and '\').
JSON_PLAIN = re.compile(r'[ !#-\[\]-~]*\Z')

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
    """A header number; missing keeps the default (malformed or out-of-range text was refused before)."""
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


def check_topic_name(topic: str) -> None:
    """TopicValidator.validateTopic as a 5.3.3 broker answers it (INVALID_PARAMETER and its remark):
    every topic a request names is checked, whether it exists or not, before anything is looked up."""
    problem = topic_problem(topic)
    if problem is not None:
        raise Reject(ResponseCode.INVALID_PARAMETER, problem)


def _check_send_numbers(get: Callable[[str], str | None], keys: tuple[str, ...]) -> None:
    """Find the send header field that is no number or beyond its Java type, and refuse the
    request naming it (an absent one keeps its default)."""
    for key, bounds in zip(keys, (INT, INT, INT, LONG, INT, INT, INT)):
        text = get(key)
        if text is not None:
            error = number_error(key, text, bounds)
            if error is not None:
                raise error


def _send_numbers(get: Callable[[str], str | None], keys: tuple[str, ...]) -> tuple[int, int, int, int, int]:
    """(queueId, flag, bornTimestamp, sysFlag, reconsumeTimes) of a send header, every number field checked:
    one try for the usual case (all present and well-formed), a field-by-field check otherwise."""
    (_k_group, _k_topic, _k_default, k_default_nums, k_queue, k_sys_flag, k_born, k_flag, _k_props, k_reconsume,
     _k_unit, k_max_reconsume, _k_batch) = keys
    try:
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
        slow = True  # a field missing, malformed, or too many digits for int()
    else:
        slow = False
    default_nums_text, max_reconsume_text = get(k_default_nums), get(k_max_reconsume)
    if slow or not (
        INT32_MIN <= queue_id <= INT32_MAX
        and INT32_MIN <= flag <= INT32_MAX
        and INT32_MIN <= sys_flag <= INT32_MAX
        and INT32_MIN <= reconsume <= INT32_MAX
        and INT64_MIN <= born_ts <= INT64_MAX
        and (default_nums_text is None or (len(default_nums_text) < 10 and default_nums_text.isdigit()))
        and (max_reconsume_text is None or (len(max_reconsume_text) < 10 and max_reconsume_text.isdigit()))
    ):
        _check_send_numbers(get, (k_default_nums, k_queue, k_sys_flag, k_born, k_flag, k_reconsume, k_max_reconsume))
    return queue_id, flag, born_ts, sys_flag, reconsume


class Sender:
    """Stores what producers send, with a Java 5.x broker's checks, properties and answers."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicTable,
        store: MessageStore,
        faults: Faults,
        *,
        broker_addr: str,
        peer_of: Callable[[Hashable], str | None],
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        self.faults = faults
        self.broker_addr = broker_addr
        self.peer_of = peer_of
        self.consuming: Consuming | None = None  # set by the processor: held pulls to wake
        self.on_put: Callable[[str, int], None] | None = None  # set by the processor: put statistics
        #: True while stored messages wait too long for the disk (broker_stub.queue_files): refuse sends.
        self.store_busy: Callable[[], bool] = lambda: False
        #: With messages on disk: send a stored message's answer once it is written (broker_stub.persistence):
        #: (connection, answer, the request's opaque and serialization for an error answer instead).
        self.hold_answer: Callable[[Hashable, bytes, int, SerializeType], None] | None = None
        self._queue_pick = random.Random()
        self._born: dict[Hashable, tuple[bytes, int]] = {}
        self._uniq = UniqIds(ipv4_bytes(config.brokerIP1))
        self._region_plain = bool(JSON_PLAIN.match(config.regionId))  # regionId is fixed at start
        self._cluster_pair = cluster_pair(config.brokerClusterName)  # so is the cluster
        self.refusals = dict.fromkeys(SEND_REFUSALS, 0)  # sends refused, by reason (metrics)
        self.delay_levels = parse_levels(config.messageDelayLevel)
        self.timers = Timers(store, self.put_message, self.delay_levels)  # messages delivered later

    def refused(self, code: int) -> None:
        """Count a send refused with ``code`` (the processor calls this for every Reject of a send)."""
        self.refusals[REFUSAL_REASONS.get(code, "other")] += 1

    def connection_closed(self, conn: Hashable) -> None:
        self._born.pop(conn, None)

    def _new_topic_for_send(self, topic: str, default_topic: str | None, client_queue_nums: int) -> TopicConfig:
        """A topic not in the table (its name already checked): auto-created from the default topic
        (TBW102) when allowed."""
        default = self.topics.get(default_topic) if default_topic else None
        if default is not None and self.config.autoCreateTopicEnable and default.perm & PERM_INHERIT:
            nums = max(1, min(client_queue_nums if client_queue_nums > 0 else default.write_queue_nums, default.write_queue_nums))
            tc = TopicConfig(topic, nums, nums, default.perm & ~PERM_INHERIT)
            try:
                self.topics.put_auto(tc)  # bumps the DataVersion, has it written and kicks the registrar
            except TopicLimitError as exc:
                raise Reject(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist: {exc}") from None
            log.info("auto-created topic %s from %s (%d queues)", topic, default_topic, nums)
            return tc
        raise Reject(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{FAQ_APPLY_TOPIC}")

    def send_message(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand | bytes | None:
        """Check, store and answer one send (or one batch): the steps are the methods below, in order."""
        faults = self.faults
        if faults.reject_code is not None:
            self.refusals["fault_reject"] += 1
            return response_to(req, faults.reject_code, faults.reject_remark)
        self._check_broker_writable()
        get = (req.ext_fields or {}).get
        keys = SEND_FIELDS if req.code == SEND_MESSAGE else SEND_FIELDS_V2
        queue_id, flag, born_ts, sys_flag, reconsume = _send_numbers(get, keys)
        topic = get(keys[1]) or ""
        tc = self._topic_for_send(topic, get, keys)
        if queue_id >= tc.read_queue_nums and queue_id >= tc.write_queue_nums:
            raise Reject(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, {tc} Producer: {self.peer_of(conn)}",
            )
        if queue_id < 0:
            queue_id = self._queue_pick.randrange(max(1, tc.write_queue_nums))
        parts, size, transaction_id = self._messages(req, get(keys[8]) or "", flag)
        if req.code != SEND_BATCH and ("TIMER_" in parts[0][2] or "DELAY\x01" in parts[0][2]):
            timer = transform(topic, queue_id, parts[0][2], int(time.time() * 1000), self.delay_levels)
            if timer is not None:  # stored on the timer topic, put on its queue when due (broker_stub.timers)
                return self._send_later(req, conn, timer, flag, req.body, sys_flag, born_ts, reconsume, queue_id)
        config = self.config
        if size > config.maxMessageSize:
            raise Reject(ResponseCode.MESSAGE_ILLEGAL, f"the message body size over max value, MAX: {config.maxMessageSize}")
        unwritable = self.store.unwritable
        if unwritable is not None:  # the disk refused a write: Java's PutMessageStatus.SERVICE_NOT_AVAILABLE
            raise Reject(ResponseCode.SERVICE_NOT_AVAILABLE, unwritable)
        first_offset, msg_id = self._store_parts(topic, queue_id, parts, sys_flag, born_ts, reconsume, conn)
        return self._sent(req, conn, msg_id, queue_id, first_offset, transaction_id)

    def _check_broker_writable(self) -> None:
        """Refuse every send on a slave, a broker without write permission, or a disk that is behind."""
        config = self.config
        if config.brokerId != 0:
            raise Reject(ResponseCode.SERVICE_NOT_AVAILABLE, f"the broker[{self.broker_addr}] is a slave, sending is forbidden")
        if not config.brokerPermission & PERM_WRITE:
            raise Reject(ResponseCode.NO_PERMISSION, f"the broker[{self.broker_addr}] sending message is forbidden")
        if self.store_busy():
            raise Reject(ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy, start flow control for a while")

    def _topic_for_send(self, topic: str, get: Callable[[str], str | None], keys: tuple[str, ...]) -> TopicConfig:
        """The writable topic a send names: its name checked, auto-created when allowed."""
        if topic_problem(topic) is not None:  # AbstractSendMessageProcessor.msgCheck: every topic, new or not
            check_topic_name(topic)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise Reject(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        tc = self.topics.get(topic)
        if tc is None:
            tc = self._new_topic_for_send(topic, get(keys[2]), _num(get(keys[3]), 4))
        if not tc.perm & PERM_WRITE:
            raise Reject(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        return tc

    def _messages(self, req: RemotingCommand, header_props: str, flag: int) -> tuple[list[tuple[int, bytes, str]], int, str | None]:
        """([(flag, body, stored properties)], the bodies' size, the transaction id) of a send or a batch."""
        body = req.body
        cluster = self._cluster_pair
        if req.code == SEND_BATCH:
            parts = decode_batch(body)
            size = sum(len(p[1]) for p in parts)
            tail = batch_tail(header_props)
            return [(f, b, batch_properties(p, tail, cluster)) for f, b, p in parts], size, tail.uniq_key
        props_text, transaction_id = single_properties(header_props, cluster, self._uniq.next)
        return [(flag, body, props_text)], len(body), transaction_id

    def _store_parts(self, topic: str, queue_id: int, parts: list[tuple[int, bytes, str]], sys_flag: int,
                     born_ts: int, reconsume: int, conn: Hashable) -> tuple[int, str]:
        """Store each message of a send; (the first one's queue offset, the message id(s) to answer)."""
        born = self._born.get(conn) or self._born_host(conn)
        if not born_ts:
            born_ts = int(time.time() * 1000)
        put = self.put_message
        ids: list[str] = []
        first_offset = -1
        for flag, msg_body, props_text in parts:
            try:
                offset, phys = put(topic, queue_id, msg_body, flag, props_text, sys_flag, born_ts, born[0], born[1], reconsume)
            except StoreFullError as exc:
                raise Reject(ResponseCode.SERVICE_NOT_AVAILABLE, str(exc)) from None
            except StoreUnavailableError as exc:
                raise Reject(ResponseCode.SERVICE_NOT_AVAILABLE, str(exc)) from None
            except PathOutsideError as exc:
                raise Reject(ResponseCode.SYSTEM_ERROR, str(exc)) from None
            except ValueError as exc:
                raise Reject(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from None
            if first_offset < 0:
                first_offset = offset
            ids.append(self.store.msg_id(phys))
        return first_offset, ids[0] if len(ids) == 1 else ",".join(ids)

    def _sent(self, req: RemotingCommand, conn: Hashable, msg_id: str, queue_id: int, first_offset: int,
              transaction_id: str | None) -> RemotingCommand | bytes | None:
        """The SUCCESS answer of a stored send: from the byte template when its text needs no escaping."""
        config = self.config
        region = config.regionId
        trace = "true" if config.traceOn else "false"
        if (
            req.serialize_type is SerializeType.JSON
            and self._region_plain
            and (transaction_id is None or JSON_PLAIN.match(transaction_id))
        ):
            frame = send_ok_frame(req.opaque, msg_id, queue_id, first_offset, region, trace, transaction_id)
            return self._answer_stored(req, conn, frame)
        ext: dict[str, object] = {
            "msgId": msg_id,
            "queueId": queue_id,
            "queueOffset": first_offset,
            "MSG_REGION": region,
            "TRACE_ON": trace,
        }
        if transaction_id:
            ext["transactionId"] = transaction_id
        return self._answer_stored(req, conn, response_to(req, ResponseCode.SUCCESS, ext_fields=ext))

    def _send_later(self, req: RemotingCommand, conn: Hashable, timer: tuple[str, int, str, int], flag: int,
                    body: bytes, sys_flag: int, born_ts: int, reconsume: int, queue_id: int) -> RemotingCommand | bytes | None:
        """A timer or delay-level message: stored where :func:`broker_stub.timers.transform` says, answered
        as Java answers it (the queue asked for, the timer queue's offset), delivered when due."""
        topic, timer_queue, props_text, deliver_ms = timer
        if len(body) > self.config.maxMessageSize:
            raise Reject(ResponseCode.MESSAGE_ILLEGAL, f"the message body size over max value, MAX: {self.config.maxMessageSize}")
        if self.store.unwritable is not None:
            raise Reject(ResponseCode.SERVICE_NOT_AVAILABLE, self.store.unwritable)
        born = self._born.get(conn) or self._born_host(conn)
        try:
            offset, phys = self.put_message(topic, timer_queue, body, flag, props_text, sys_flag,
                                            born_ts or int(time.time() * 1000), born[0], born[1], reconsume)
        except (StoreFullError, StoreUnavailableError) as exc:
            raise Reject(ResponseCode.SERVICE_NOT_AVAILABLE, str(exc)) from None
        except ValueError as exc:
            raise Reject(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from None
        self.timers.schedule(deliver_ms, topic, timer_queue, offset)
        ext = {"msgId": self.store.msg_id(phys), "queueId": queue_id, "queueOffset": offset,
               "MSG_REGION": self.config.regionId, "TRACE_ON": "true" if self.config.traceOn else "false"}
        return self._answer_stored(req, conn, response_to(req, ResponseCode.SUCCESS, ext_fields=ext))

    def _answer_stored(self, req: RemotingCommand, conn: Hashable, answer: RemotingCommand | bytes) -> RemotingCommand | bytes | None:
        """The answer now, or (messages on disk) None and the answer once the message is written."""
        hold = self.hold_answer
        if hold is None or req.flag & 2:
            return answer
        hold(conn, answer if type(answer) is bytes else encode(answer), req.opaque, req.serialize_type)  # type: ignore[arg-type]
        return None

    def put_message(
        self, topic: str, queue_id: int, body: bytes, flag: int, props_text: str, sys_flag: int, born_ts: int,
        born_ip: bytes, born_port: int, reconsume: int,
    ) -> tuple[int, int]:
        """Store one message and wake the pulls held on its queue; returns (queue offset, physical offset)."""
        result = self.store.put(
            topic, queue_id, body, flag, props_text, sys_flag, born_ts, born_ip, born_port, reconsume,
            stored_tag(props_text),
        )
        if self.on_put is not None:
            self.on_put(topic, len(body))
        consuming = self.consuming
        if consuming is not None and consuming.waiting and self.store.journal is None:
            consuming.arrived(topic, queue_id)  # readable now (on disk: once written, broker_stub.persistence)
        return result

    def _born_host(self, conn: Hashable) -> tuple[bytes, int]:
        peer = self.peer_of(conn) or "127.0.0.1:0"
        host, _, port = peer.rpartition(":")
        born = ipv4_bytes(host if host and ":" not in host else "127.0.0.1"), int(port) if port.isdigit() else 0
        if self.peer_of(conn) is not None:
            self._born[conn] = born
        return born
