"""Messages on the wire, client side: properties, unique ids, stored-message decoding.

Pure functions and small value types, no sockets. ``sendMessage`` builds
the properties string and ``UNIQ_KEY`` a Java producer would; a pull answer's
body is a run of stored messages in the broker's commit-log layout
(``MessageDecoder``), which :func:`decode_messages` reads back.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

MAGIC_V1 = -626843481  # MessageDecoder.MESSAGE_MAGIC_CODE: 1-byte topic length
MAGIC_V2 = -626843477  # MESSAGE_MAGIC_CODE_V2: 2-byte topic length
FLAG_COMPRESSED = 0x1
FLAG_BORNHOST_V6 = 0x10
FLAG_STOREHOST_V6 = 0x20
COMPRESSION_MASK = 0x700
COMPRESSION_ZLIB = 0x300
NAME_VALUE = "\x01"
PROPERTY_END = "\x02"
MAX_INFLATED = 64 * 1024 * 1024  # a compressed body never inflates beyond this

# property names (MessageConst)
KEYS = "KEYS"
TAGS = "TAGS"
WAIT = "WAIT"
UNIQ_KEY = "UNIQ_KEY"


class MessageFormatError(ValueError):
    """A pull answer's body is not a run of stored messages."""


def format_properties(props: dict[str, str]) -> str:
    """``name\\x01value\\x02`` for each property (MessageDecoder.messageProperties2String)."""
    return "".join(f"{k}{NAME_VALUE}{v}{PROPERTY_END}" for k, v in props.items())


def parse_properties(text: str) -> dict[str, str]:
    """The reverse; malformed pairs are skipped, as Java does."""
    out: dict[str, str] = {}
    for pair in text.split(PROPERTY_END):
        name, sep, value = pair.partition(NAME_VALUE)
        if sep and name:
            out[name] = value
    return out


class UniqIdGenerator:
    """Client message ids shaped like Java's MessageClientIDSetter: 32 upper-case hex chars.

    Fixed part: IPv4 address, low 16 bits of the pid, 4 random bytes (Java
    uses a class-loader hash there); then milliseconds since the start of the
    month and a 16-bit counter. Unique enough for a tool; opaque to brokers.
    """

    def __init__(self, host_ip: str | None = None) -> None:
        ip = _local_ipv4() if host_ip is None else socket.inet_aton(host_ip)
        self._prefix = (ip + struct.pack(">H", os.getpid() & 0xFFFF) + random.randbytes(4)).hex().upper()
        self._counter = random.randrange(0x10000)
        self._lock = threading.Lock()

    def next(self, now: float | None = None) -> str:
        t = time.localtime(now if now is not None else time.time())
        month_start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
        millis = int(((now if now is not None else time.time()) - month_start) * 1000) & 0x7FFFFFFF
        with self._lock:
            self._counter = (self._counter + 1) & 0xFFFF
            counter = self._counter
        return self._prefix + struct.pack(">iH", millis, counter).hex().upper()


def _local_ipv4() -> bytes:
    try:
        return socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        return socket.inet_aton("127.0.0.1")


def message_properties(*, keys: str | None = None, tags: str | None = None, uniq_key: str | None = None,
                       wait: bool = True, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The properties a Java producer sets for ``new Message(topic, tags, keys, body)``."""
    props: dict[str, str] = {}
    if keys:
        props[KEYS] = keys
    if tags:
        props[TAGS] = tags
    props[WAIT] = "true" if wait else "false"
    if uniq_key:
        props[UNIQ_KEY] = uniq_key
    if extra:
        props.update(extra)
    return props


def offset_msg_id(store_host: str, phys_offset: int) -> str:
    """MessageDecoder.createMessageId for an IPv4 ``host:port``."""
    host, _, port = store_host.rpartition(":")
    try:
        ip = socket.inet_aton(host)
    except OSError:
        ip = bytes(4)
    return (ip + struct.pack(">iq", int(port or 0), phys_offset)).hex().upper()


@dataclass
class Message:
    """One stored message as a consumer sees it (MessageExt)."""

    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: str = ""
    store_timestamp: int = 0
    store_host: str = ""
    commit_log_offset: int = 0
    reconsume_times: int = 0
    store_size: int = 0
    body_crc: int = 0
    broker_name: str = ""
    prepared_offset: int = 0  # preparedTransactionOffset

    @property
    def offset_msg_id(self) -> str:
        return offset_msg_id(self.store_host, self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """The client's id (UNIQ_KEY) when set, else the broker's offset id (MessageClientExt)."""
        return self.properties.get(UNIQ_KEY) or self.offset_msg_id

    @property
    def tags(self) -> str | None:
        return self.properties.get(TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(KEYS)

    def to_json(self) -> dict[str, Any]:
        """The documented ``consumeMessage --json`` shape of one message."""
        return {
            "msgId": self.msg_id,
            "offsetMsgId": self.offset_msg_id,
            "topic": self.topic,
            "brokerName": self.broker_name,
            "queueId": self.queue_id,
            "queueOffset": self.queue_offset,
            "tags": self.tags,
            "keys": self.keys,
            "body": self.body.decode("utf-8", "replace"),
            "properties": self.properties,
            "bornTimestamp": self.born_timestamp,
            "bornHost": self.born_host,
            "storeTimestamp": self.store_timestamp,
            "storeHost": self.store_host,
            "commitLogOffset": self.commit_log_offset,
            "reconsumeTimes": self.reconsume_times,
        }


def message_ext_text(m: Message) -> str:
    """Java's ``MessageExt.toString()`` of a pulled message (what Apache's consumeMessage prints after
    ``MSGID:``): hosts as ``InetSocketAddress`` prints them, the body as ``Arrays.toString(byte[])``
    (signed bytes), the properties in the order they were stored (Java's HashMap order is its own)."""
    props = "{" + ", ".join(f"{k}={v}" for k, v in m.properties.items()) + "}"
    body = "[" + ", ".join(str(b - 256 if b > 127 else b) for b in m.body) + "]"
    return (f"MessageExt [brokerName={m.broker_name}, queueId={m.queue_id}, storeSize={m.store_size}, "
            f"queueOffset={m.queue_offset}, sysFlag={m.sys_flag}, bornTimestamp={m.born_timestamp}, "
            f"bornHost=/{m.born_host}, storeTimestamp={m.store_timestamp}, storeHost=/{m.store_host}, "
            f"msgId={m.offset_msg_id}, commitLogOffset={m.commit_log_offset}, bodyCRC={m.body_crc}, "
            f"reconsumeTimes={m.reconsume_times}, preparedTransactionOffset={m.prepared_offset}, "
            f"toString()=Message{{topic='{m.topic}', flag={m.flag}, properties={props}, body={body}, "
            "transactionId='null'}]")


def message_queue_text(topic: str, broker_name: str, queue_id: int) -> str:
    """Java's ``MessageQueue.toString()``."""
    return f"MessageQueue [topic={topic}, brokerName={broker_name}, queueId={queue_id}]"


def _host(data: bytes, pos: int, v6: bool) -> tuple[str, int]:
    size = 16 if v6 else 4
    ip = data[pos : pos + size]
    (port,) = struct.unpack_from(">i", data, pos + size)
    text = socket.inet_ntop(socket.AF_INET6 if v6 else socket.AF_INET, ip)
    return (f"[{text}]:{port}" if v6 else f"{text}:{port}"), pos + size + 4


def _inflate(body: bytes) -> bytes:
    d = zlib.decompressobj()
    out = d.decompress(body, MAX_INFLATED)
    if d.unconsumed_tail:
        raise MessageFormatError(f"compressed body inflates beyond {MAX_INFLATED} bytes")
    return out


def decode_messages(data: bytes, broker_name: str = "") -> list[Message]:
    """Every stored message in ``data`` (a PULL_MESSAGE answer's body)."""
    out: list[Message] = []
    pos = 0
    try:
        while pos < len(data):
            msg, size = _decode_one(data, pos)
            msg.broker_name = broker_name
            out.append(msg)
            pos += size
    except (struct.error, IndexError, ValueError, zlib.error) as exc:
        if isinstance(exc, MessageFormatError):
            raise
        raise MessageFormatError(f"malformed stored message at byte {pos}: {exc}") from None
    return out


def _decode_one(data: bytes, start: int) -> tuple[Message, int]:
    total, magic, body_crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts = struct.unpack_from(
        ">iiiiiqqiq", data, start
    )
    if magic not in (MAGIC_V1, MAGIC_V2):
        raise MessageFormatError(f"bad magic code {magic} at byte {start}")
    if total <= 0 or start + total > len(data):
        raise MessageFormatError(f"message at byte {start} claims {total} bytes, {len(data) - start} left")
    pos = start + 48
    born_host, pos = _host(data, pos, bool(sys_flag & FLAG_BORNHOST_V6))
    (store_ts,) = struct.unpack_from(">q", data, pos)
    store_host, pos = _host(data, pos + 8, bool(sys_flag & FLAG_STOREHOST_V6))
    reconsume, prepared, body_len = struct.unpack_from(">iqi", data, pos)
    pos += 16
    body = data[pos : pos + body_len]
    pos += body_len
    if magic == MAGIC_V1:
        topic_len = data[pos]
        pos += 1
    else:
        (topic_len,) = struct.unpack_from(">h", data, pos)
        pos += 2
    topic = data[pos : pos + topic_len].decode("utf-8")
    pos += topic_len
    (props_len,) = struct.unpack_from(">h", data, pos)
    props = parse_properties(data[pos + 2 : pos + 2 + props_len].decode("utf-8"))
    if pos + 2 + props_len > start + total:
        raise MessageFormatError(f"message at byte {start} overruns its size {total}")
    if sys_flag & FLAG_COMPRESSED and sys_flag & COMPRESSION_MASK in (0, COMPRESSION_ZLIB):
        body = _inflate(body)
    msg = Message(
        topic=topic, queue_id=queue_id, queue_offset=queue_offset, body=body, properties=props, flag=flag,
        sys_flag=sys_flag, born_timestamp=born_ts, born_host=born_host, store_timestamp=store_ts,
        store_host=store_host, commit_log_offset=phys, reconsume_times=reconsume, store_size=total, body_crc=body_crc,
        prepared_offset=prepared,
    )
    return msg, total
