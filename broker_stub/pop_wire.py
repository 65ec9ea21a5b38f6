"""POP consumption on the wire: receipt handles, the offset-info header fields, retry topics, records.

Pure functions over text and bytes, in Apache RocketMQ 5.3.3's formats:

* A receipt handle (the ``extraInfo`` of ACK_MESSAGE and
  CHANGE_MESSAGE_INVISIBLETIME, ExtraInfoUtil's format) is space-separated:
  ``ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName
  queueId [queueOffset]``, retryFlag ``0`` for the topic itself, ``1`` for a
  ``%RETRY%`` topic (``2``: Java's v2 retry topic, ``%RETRY%group+topic``,
  not made by this broker but understood).
* A POP answer's ``startOffsetInfo`` (``retryFlag queueId startOffset``,
  ``;``-separated) and ``msgOffsetInfo`` (``retryFlag queueId
  offset,offset,...``): the client builds each message's receipt handle
  from them.
* A message read from the group's POP retry topic is handed out under the
  topic the consumer asked for, with the ``POP_CK`` property already set
  (PopMessageProcessor re-encodes it so; its queue id, queue offset and
  commit-log offset stay those of the retry topic).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from broker_stub.common import RETRY_GROUP_TOPIC_PREFIX, format_properties, parse_properties

SEPARATOR = " "  # MessageConst.KEY_SEPARATOR
NORMAL, RETRY, RETRY_V2 = "0", "1", "2"
ORDER_REVIVE_QUEUE = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE
POP_CK = "POP_CK"
FIRST_POP_TIME = "1ST_POP_TIME"  # MessageConst.PROPERTY_FIRST_POP_TIME
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_QUEUE_OFFSET = struct.Struct(">q")
QUEUE_OFFSET_AT = 20  # byte offset of queueOffset in a stored record (after size, magic, crc, queueId, flag)
BODY_LEN_AT = 84  # byte offset of bodyLength


class HandleError(ValueError):
    """A receipt handle that is not ExtraInfoUtil's format; the text says why."""


@dataclass(frozen=True, slots=True)
class Handle:
    """The fields of a receipt handle the broker reads."""

    ck_offset: int
    pop_time: int
    invisible_ms: int
    revive_qid: int
    retry_flag: str
    broker_name: str
    queue_id: int


def parse_handle(extra_info: str) -> Handle:
    """ExtraInfoUtil's getters over ``extraInfo``; HandleError when a field is missing or no number."""
    parts = extra_info.split(SEPARATOR)
    if len(parts) < 7:
        raise HandleError(f"extraInfo has {len(parts)} fields, a receipt handle has at least 7")
    try:
        return Handle(int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]), parts[4], parts[5], int(parts[6]))
    except ValueError:
        raise HandleError(f"extraInfo {extra_info[:120]!r} is not a receipt handle") from None


def retry_flag(topic: str) -> str:
    """ExtraInfoUtil.getRetry: how a handle marks the topic a message was read from."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and "+" in topic:
        return RETRY_V2
    return RETRY if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else NORMAL


def pop_retry_topic(topic: str, group: str) -> str:
    """KeyBuilder.buildPopRetryTopicV1 (5.3.3's default, ``enableRetryTopicV2=false``)."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"


def build_handle(ck_offset: int, pop_time: int, invisible_ms: int, revive_qid: int, topic: str, broker_name: str,
                 queue_id: int, queue_offset: int) -> str:
    """ExtraInfoUtil.buildExtraInfo with the message's queue offset (the POP_CK of a retried message)."""
    return SEPARATOR.join(str(x) for x in (ck_offset, pop_time, invisible_ms, revive_qid, retry_flag(topic),
                                           broker_name, queue_id, queue_offset))


def start_offset_info(topic: str, queue_id: int, start: int) -> str:
    return f"{retry_flag(topic)}{SEPARATOR}{queue_id}{SEPARATOR}{start}"


def msg_offset_info(topic: str, queue_id: int, offsets: list[int]) -> str:
    return f"{retry_flag(topic)}{SEPARATOR}{queue_id}{SEPARATOR}{','.join(map(str, offsets))}"


def queue_offset_of(record: bytes) -> int:
    """The queue offset stored in a record."""
    return int(_QUEUE_OFFSET.unpack_from(record, QUEUE_OFFSET_AT)[0])


def handed_out_as(record: bytes, topic: str, pop_ck: str) -> bytes:
    """A retry topic's record as a POP answer carries it: under ``topic``, ``POP_CK`` set (unless the
    record has one), every other field as stored (MessageDecoder.encode of the decoded message)."""
    (body_len,) = _I32.unpack_from(record, BODY_LEN_AT)
    pos = BODY_LEN_AT + 4 + body_len
    topic_len = record[pos]
    pos += 1 + topic_len
    (props_len,) = _I16.unpack_from(record, pos)
    props = parse_properties(record[pos + 2 : pos + 2 + props_len].decode())
    props.setdefault(POP_CK, pop_ck)
    topic_b, props_b = topic.encode(), format_properties(props).encode()
    head_and_body = record[4 : BODY_LEN_AT + 4 + body_len]
    total = 4 + len(head_and_body) + 1 + len(topic_b) + 2 + len(props_b)
    return b"".join((_I32.pack(total), head_and_body, bytes((len(topic_b),)), topic_b, _I16.pack(len(props_b)), props_b))
