"""Bounded in-memory message queues in RocketMQ's stored-message layout.

Each message is encoded once, at put time, exactly as a Java broker writes
it to its commit log (MessageDecoder's layout, magic code V1, IPv4 hosts),
so a pull answer is just the concatenation of stored records and any
RocketMQ client can decode it. Each queue keeps at most ``max_per_queue``
messages: the oldest is dropped and the queue's min offset moves, which is
what a consumer sees when a real broker deletes old commit-log files.
"""

from __future__ import annotations

import socket
import struct
import time
import zlib
from collections import deque
from dataclasses import dataclass

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7, MessageDecoder V1
_HEAD = struct.Struct(">iiiiiqqiq4siq4siiq")  # totalSize .. preparedTransactionOffset, 84 bytes


def ipv4_bytes(host: str) -> bytes:
    """The 4 address bytes of an IPv4 host (names resolved once, at start)."""
    try:
        return socket.inet_aton(host)
    except OSError:
        try:
            return socket.inet_aton(socket.gethostbyname(host))
        except OSError:
            return socket.inet_aton("127.0.0.1")


def offset_msg_id(store_ip: bytes, store_port: int, phys_offset: int) -> str:
    """MessageDecoder.createMessageId: IPv4 + port + commit-log offset, 32 upper-case hex chars."""
    return (store_ip + struct.pack(">iq", store_port, phys_offset)).hex().upper()


@dataclass(frozen=True, slots=True)
class Incoming:
    """One message as a producer sent it."""

    topic: str
    queue_id: int
    body: bytes
    flag: int
    properties: str
    sys_flag: int
    born_timestamp: int
    born_host: tuple[bytes, int]
    reconsume_times: int = 0


@dataclass(frozen=True, slots=True)
class PutResult:
    queue_offset: int
    phys_offset: int
    msg_id: str


class _Queue:
    __slots__ = ("next_offset", "records")

    def __init__(self, bound: int) -> None:
        self.records: deque[tuple[bytes, int]] = deque(maxlen=bound)  # (record, store timestamp)
        self.next_offset = 0

    @property
    def min_offset(self) -> int:
        return self.next_offset - len(self.records)


class MessageStore:
    def __init__(self, store_host: str, store_port: int, max_per_queue: int) -> None:
        self.store_ip = ipv4_bytes(store_host)
        self.store_port = store_port
        self.max_per_queue = max_per_queue
        self._queues: dict[tuple[str, int], _Queue] = {}
        self.commit_offset = 0  # the "physical" offset: total bytes ever stored
        self.put_total = 0
        self.get_total = 0

    def put(self, msg: Incoming) -> PutResult:
        queue = self._queues.get((msg.topic, msg.queue_id))
        if queue is None:
            queue = self._queues[(msg.topic, msg.queue_id)] = _Queue(self.max_per_queue)
        store_ts = int(time.time() * 1000)
        phys = self.commit_offset
        record = self._encode(msg, queue.next_offset, phys, store_ts)
        queue.records.append((record, store_ts))
        result = PutResult(queue.next_offset, phys, offset_msg_id(self.store_ip, self.store_port, phys))
        queue.next_offset += 1
        self.commit_offset += len(record)
        self.put_total += 1
        return result

    def _encode(self, msg: Incoming, queue_offset: int, phys: int, store_ts: int) -> bytes:
        topic = msg.topic.encode()
        props = msg.properties.encode()
        if len(topic) > 127 or len(props) > 32767:
            raise ValueError("topic or properties too long for the stored-message layout")
        total = _HEAD.size + 4 + len(msg.body) + 1 + len(topic) + 2 + len(props)
        head = _HEAD.pack(
            total,
            MESSAGE_MAGIC_CODE,
            zlib.crc32(msg.body) & 0x7FFFFFFF,  # UtilAll.crc32
            msg.queue_id,
            msg.flag,
            queue_offset,
            phys,
            msg.sys_flag & ~0x30,  # hosts are stored as IPv4
            msg.born_timestamp,
            msg.born_host[0],
            msg.born_host[1],
            store_ts,
            self.store_ip,
            self.store_port,
            msg.reconsume_times,
            0,  # preparedTransactionOffset
        )
        return b"".join(
            (head, struct.pack(">i", len(msg.body)), msg.body, bytes([len(topic)]), topic,
             struct.pack(">h", len(props)), props)
        )

    # ------------------------------------------------------------------

    def min_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get((topic, queue_id))
        return queue.min_offset if queue else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """The offset the next message will get (Java's getMaxOffsetInQueue)."""
        queue = self._queues.get((topic, queue_id))
        return queue.next_offset if queue else 0

    def get(self, topic: str, queue_id: int, offset: int, max_nums: int, max_bytes: int) -> list[bytes]:
        """Up to ``max_nums`` records from ``offset`` (at least one if any, at most ``max_bytes``)."""
        queue = self._queues.get((topic, queue_id))
        if queue is None or not queue.min_offset <= offset < queue.next_offset:
            return []
        start = offset - queue.min_offset
        out: list[bytes] = []
        size = 0
        for i in range(start, min(len(queue.records), start + max(1, max_nums))):
            record = queue.records[i][0]
            if out and size + len(record) > max_bytes:
                break
            out.append(record)
            size += len(record)
        self.get_total += len(out)
        return out

    def delete_topic(self, topic: str) -> None:
        for key in [k for k in self._queues if k[0] == topic]:
            del self._queues[key]

    def earliest_timestamp(self) -> int:
        stamps = [q.records[0][1] for q in self._queues.values() if q.records]
        return min(stamps) if stamps else 0
