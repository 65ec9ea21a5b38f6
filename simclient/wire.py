"""The requests a Java 5.x producer sends to brokers, and the send answer.

``remoting/requests.py`` builds what brokers and admin tools send a
NameServer; the producer-to-broker requests live here because only the
simulated producer needs them. Shapes follow §10 of the protocol reference
and Apache RocketMQ 5.3.3's ``DefaultMQProducerImpl.sendKernelImpl`` /
``MQClientAPIImpl``: SEND_MESSAGE_V2 with one-letter header keys, every
value a string, properties as ``name\\x01value\\x02`` pairs.
"""

from __future__ import annotations

import os
import time
import zlib
from dataclasses import dataclass

from remoting import fastjson
from remoting.codes import DEFAULT_TOPIC, RequestCode, ResponseCode
from remoting.command import RemotingCommand, request

#: Answers that mean "stored" (SendStatus SEND_OK / FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE).
STORED_CODES = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)
#: ``DefaultMQProducer.retryResponseCodes`` in 5.3.3: refused sends that are retried on another broker.
GO_AWAY = 1500
RETRY_RESPONSE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NO_PERMISSION,
        204,  # NO_BUYER_ID
        205,  # NOT_IN_CURRENT_UNIT
        GO_AWAY,
    }
)

#: Message sys flags (MessageSysFlag): body compressed, compression type ZLIB in bits 8-10.
SYSFLAG_COMPRESSED = 0x1
SYSFLAG_COMPRESSION_ZLIB = 0x3 << 8
#: DefaultMQProducer.compressMsgBodyOverHowmuch and the default zlib level.
COMPRESS_OVER = 4 * 1024
COMPRESS_LEVEL = 5
DEFAULT_TOPIC_QUEUE_NUMS = 4

NAME_VALUE = "\x01"
PROPERTY_SEP = "\x02"


def month_start_ms(now: float | None = None) -> int:
    """Epoch ms of the start of the current month, local time (MessageClientIDSetter)."""
    t = time.localtime(now if now is not None else time.time())
    return int(time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1)) * 1000)


_MONTH_START_MS = month_start_ms()
_PID16 = os.getpid() & 0xFFFF


class UniqIdMaker:
    """Client-side message ids (``UNIQ_KEY``) in Java's layout: 32 upper-case hex chars.

    Fixed part: IPv4 (4 bytes) + pid (2) + a per-client "class loader hash"
    (4, here derived from the producer id so producers differ); per message:
    ms since the start of the month (int32) + a 16-bit counter.
    """

    __slots__ = ("counter", "prefix")

    def __init__(self, client_hash: int, ip: tuple[int, int, int, int] = (127, 0, 0, 1)) -> None:
        fixed = bytes(ip) + _PID16.to_bytes(2, "big") + (client_hash & 0xFFFFFFFF).to_bytes(4, "big")
        self.prefix = fixed.hex().upper()
        self.counter = 0

    def next(self, now_ms: int) -> str:
        self.counter = (self.counter + 1) & 0xFFFF
        return f"{self.prefix}{(now_ms - _MONTH_START_MS) & 0xFFFFFFFF:08X}{self.counter:04X}"


def message_properties(uniq_key: str, tags: str | None = None, keys: str | None = None) -> str:
    """``MessageDecoder.messageProperties2String`` of a plain ``new Message(topic, tags, keys, body)``."""
    parts = []
    if keys:
        parts.append(f"KEYS{NAME_VALUE}{keys}{PROPERTY_SEP}")
    parts.append(f"UNIQ_KEY{NAME_VALUE}{uniq_key}{PROPERTY_SEP}")
    parts.append(f"WAIT{NAME_VALUE}true{PROPERTY_SEP}")
    if tags:
        parts.append(f"TAGS{NAME_VALUE}{tags}{PROPERTY_SEP}")
    return "".join(parts)


_compressed: dict[bytes, bytes] = {}


def compress_body(body: bytes) -> tuple[bytes, int]:
    """(body to send, sys flag): zlib level 5 at 4 KiB and above, as the Java producer does.

    Load runs send the same body over and over, so results are cached (bounded).
    """
    if len(body) < COMPRESS_OVER:
        return body, 0
    data = _compressed.get(body)
    if data is None:
        data = zlib.compress(body, COMPRESS_LEVEL)
        if len(_compressed) >= 16:
            _compressed.clear()
        _compressed[body] = data
    return data, SYSFLAG_COMPRESSED | SYSFLAG_COMPRESSION_ZLIB


def send_message_v2(
    *,
    group: str,
    topic: str,
    queue_id: int,
    broker_name: str,
    body: bytes,
    properties: str,
    sys_flag: int = 0,
    born_timestamp_ms: int | None = None,
    default_topic: str = DEFAULT_TOPIC,
    default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
    flag: int = 0,
) -> RemotingCommand:
    """SEND_MESSAGE_V2 (310) exactly as ``SendMessageRequestHeaderV2`` puts it on the wire (``l`` is
    only set for retry topics, so absent)."""
    ext = {
        "a": group,
        "b": topic,
        "c": default_topic,
        "d": str(default_topic_queue_nums),
        "e": str(queue_id),
        "f": str(sys_flag),
        "g": str(born_timestamp_ms if born_timestamp_ms is not None else int(time.time() * 1000)),
        "h": str(flag),
        "i": properties,
        "j": "0",
        "k": "false",
        "m": "false",
        "n": broker_name,
    }
    return RemotingCommand(int(RequestCode.SEND_MESSAGE_V2), ext_fields=ext, body=body)


def heartbeat(client_id: str, group: str) -> RemotingCommand:
    """HEART_BEAT (34) of a producer-only 5.x client (HeartbeatData JSON body)."""
    body = fastjson.dumps_fast(
        {
            "clientID": client_id,
            "consumerDataSet": [],
            "heartbeatFingerprint": 0,
            "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}, {"groupName": group}],
            "withoutSub": False,
        }
    )
    return request(RequestCode.HEART_BEAT, {}, body)


def unregister_client(client_id: str, group: str) -> RemotingCommand:
    """UNREGISTER_CLIENT (35) sent on shutdown to every known broker."""
    return request(RequestCode.UNREGISTER_CLIENT, {"clientID": client_id, "producerGroup": group})


class BadSendResponse(Exception):
    """A SUCCESS-like answer without the header fields a client needs."""


@dataclass(frozen=True, slots=True)
class SendResult:
    """``SendResult`` of the Java client: the status code and where the message went."""

    code: int
    msg_id: str  # the producer's UNIQ_KEY
    offset_msg_id: str  # the broker's msgId
    queue_id: int
    queue_offset: int
    region: str
    trace_on: bool


def parse_send_response(resp: RemotingCommand, uniq_key: str) -> SendResult:
    """``MQClientAPIImpl.processSendResponse`` for a stored-code answer; raises BadSendResponse
    when the header is unusable (Java fails the attempt with a RemotingCommandException)."""
    ext = resp.ext_fields or {}
    try:
        queue_id = int(ext["queueId"])
        queue_offset = int(ext["queueOffset"])
    except (KeyError, ValueError):
        raise BadSendResponse(f"send answer without usable queueId/queueOffset: {ext!r}") from None
    return SendResult(
        code=resp.code,
        msg_id=uniq_key,
        offset_msg_id=ext.get("msgId", ""),
        queue_id=queue_id,
        queue_offset=queue_offset,
        region=ext.get("MSG_REGION") or "DefaultRegion",
        trace_on=ext.get("TRACE_ON") != "false",
    )


__all__ = [
    "RETRY_RESPONSE_CODES",
    "STORED_CODES",
    "BadSendResponse",
    "SendResult",
    "UniqIdMaker",
    "compress_body",
    "heartbeat",
    "message_properties",
    "parse_send_response",
    "send_message_v2",
    "unregister_client",
]
