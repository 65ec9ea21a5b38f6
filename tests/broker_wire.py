"""Requests a producer or consumer sends to a broker, and an independent reading of its answers.

Shared by the broker stub's hardening and properties tests. The decoders
here are written from Apache's layouts (MessageDecoder), not from the
stub's code, so a test compares the stub with Java's rules, not with itself.
"""

from __future__ import annotations

import socket
import struct
import time
import zlib

from remoting.codec import FrameDecoder, encode
from remoting.codes import RequestCode, SerializeType
from remoting.command import RemotingCommand, request
from remoting.transport import connect

UNIQ = "7F0000010A2B18B4AAC2476FE7A60000"


def socket_call(sock: socket.socket, req: RemotingCommand | bytes, timeout: float = 10.0) -> RemotingCommand:
    """Send a request (or raw bytes that complete one) on a blocking socket (plain or TLS) and read
    its answer."""
    sock.settimeout(timeout)
    sock.sendall(req if isinstance(req, bytes) else encode(req))
    decoder = FrameDecoder()
    while True:
        data = sock.recv(1 << 20)
        assert data, "closed by the server"
        got = decoder.feed(data)
        if got:
            return got[0]


async def call(addr: str, req: RemotingCommand, timeout: float = 5.0) -> RemotingCommand:
    async with connect(addr) as client:
        return await client.invoke(req, timeout)


def java_properties(text: str) -> dict[str, str]:
    """MessageDecoder.string2messageProperties, as Java 4.9/5.x read a properties string."""
    out: dict[str, str] = {}
    index, length = 0, len(text)
    while index < length:
        end = text.find("\x02", index)
        if end < 0:
            end = length
        if end - index >= 3:
            sep = text.find("\x01", index)
            if index < sep < end - 1:
                out[text[index:sep]] = text[sep + 1 : end]
        index = end + 1
    return out


def props_49(**props: str) -> str:
    """A Java 4.9 client's properties string: no separator after the last pair."""
    return "\x02".join(f"{k}\x01{v}" for k, v in props.items())


def props_5x(**props: str) -> str:
    """A Java 5.x client's properties string: every pair ends with \\x02."""
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items())


def send_v2(topic: str, body: bytes, props: str, *, queue_id: object = 0, serialize: SerializeType = SerializeType.JSON,
            **overrides: object) -> RemotingCommand:
    fields: dict[str, object] = {
        "a": "PG", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0, "g": int(time.time() * 1000), "h": 0,
        "i": props, "j": 0, "k": "false", "l": 16, "m": "false",
    }
    fields.update(overrides)
    return request(RequestCode.SEND_MESSAGE_V2, fields, body, serialize_type=serialize)


def send_v1(topic: str, body: bytes, props: str, *, queue_id: object = 0, serialize: SerializeType = SerializeType.JSON,
            **overrides: object) -> RemotingCommand:
    fields: dict[str, object] = {
        "producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": queue_id, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": 0, "properties": props,
        "reconsumeTimes": 0, "unitMode": "false", "batch": "false", "maxReconsumeTimes": 16,
    }
    fields.update(overrides)
    return request(RequestCode.SEND_MESSAGE, fields, body, serialize_type=serialize)


def batch_body(messages: list[tuple[bytes, str]]) -> bytes:
    """MessageDecoder.encodeMessages: each message as (total, magic, crc, flag, body, properties)."""
    out = b""
    for body, props in messages:
        p = props.encode()
        total = 20 + len(body) + 2 + len(p)
        out += struct.pack(">iiiii", total, 0, 0, 0, len(body)) + body + struct.pack(">h", len(p)) + p
    return out


def send_batch(topic: str, messages: list[tuple[bytes, str]], header_props: str, *, queue_id: int = 0,
               **overrides: object) -> RemotingCommand:
    fields: dict[str, object] = {
        "a": "PG", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0, "g": int(time.time() * 1000), "h": 0,
        "i": header_props, "j": 0, "k": "false", "m": "true",
    }
    fields.update(overrides)
    return request(RequestCode.SEND_BATCH_MESSAGE, fields, batch_body(messages))


def pull(topic: str, queue_id: int, offset: int, *, subscription: str = "*", max_nums: int = 32,
         **overrides: object) -> RemotingCommand:
    """A pull as Java's pull consumer sends it, with its own subscription (sys flag 0x4)."""
    fields: dict[str, object] = {
        "consumerGroup": "CG", "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": max_nums,
        "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": subscription, "subVersion": 0,
        "expressionType": "TAG",
    }
    fields.update(overrides)
    return request(RequestCode.PULL_MESSAGE, fields)


def create_topic(topic: str, queues: int = 4, **overrides: object) -> RemotingCommand:
    fields: dict[str, object] = {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false",
    }
    fields.update(overrides)
    return request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)


def decode_stored(body: bytes) -> list[dict[str, object]]:
    """Stored messages as a Java client decodes a pull answer (MessageDecoder, IPv4 hosts)."""
    out = []
    pos = 0
    while pos < len(body):
        (total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_ip, _born_port, store_ts,
         store_ip, store_port, reconsume, _prepared) = struct.unpack_from(">iiiiiqqiq4siq4siiq", body, pos)
        p = pos + 84
        (blen,) = struct.unpack_from(">i", body, p)
        msg_body = body[p + 4 : p + 4 + blen]
        p += 4 + blen
        tlen = body[p]
        topic = body[p + 1 : p + 1 + tlen].decode()
        p += 1 + tlen
        (plen,) = struct.unpack_from(">h", body, p)
        props = body[p + 2 : p + 2 + plen].decode()
        assert p + 2 + plen - pos == total
        assert magic == -626843481 and crc == zlib.crc32(msg_body) & 0x7FFFFFFF
        out.append({"queueId": queue_id, "queueOffset": queue_offset, "phys": phys, "body": msg_body, "topic": topic,
                    "props": props, "flag": flag, "sysFlag": sys_flag, "bornTimestamp": born_ts,
                    "reconsumeTimes": reconsume, "storeHost": f"{socket.inet_ntoa(store_ip)}:{store_port}",
                    "bornHost": socket.inet_ntoa(born_ip), "storeTs": store_ts})
        pos += total
    return out
