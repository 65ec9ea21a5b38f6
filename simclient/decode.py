"""What a simulated consumer reads from a PULL_MESSAGE answer: the stored messages' headers.

A pull answer's body is a run of messages in the commit-log layout
(``MessageDecoder``, magic V1 or V2, IPv4 or IPv6 hosts). A consumer that
only records what it consumed needs a handful of fields per message, so
this decoder skips the body and parses only the two properties it uses
(``UNIQ_KEY``, the producer's message id, and ``TAGS``, for client-side
tag filtering) plus ``RETRY_TOPIC`` (a retried message's original topic).
Thousands of simulated consumers share one loop, so it stays cheap.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from remoting.msgprops import find_property

MAGIC_V1 = -626843481
MAGIC_V2 = -626843477
BORNHOST_V6 = 0x10
STOREHOST_V6 = 0x20
_HEAD = struct.Struct(">iiiiiqqiq")  # totalSize, magic, bodyCRC, queueId, flag, queueOffset, phys, sysFlag, bornTs
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
NAME_VALUE = "\x01"
PROPERTY_END = "\x02"


class DecodeError(ValueError):
    """The body is not a run of stored messages."""


@dataclass(frozen=True, slots=True)
class Pulled:
    """One pulled message, as much of it as a simulated consumer needs."""

    topic: str
    queue_id: int
    queue_offset: int
    phys: int  # commit-log offset: CONSUMER_SEND_MSG_BACK names the message by it
    store_ms: int  # broker's store timestamp (epoch ms)
    born_ms: int
    reconsume_times: int
    body_len: int
    msg_id: str  # UNIQ_KEY (the producer's id), "" when absent
    tags: str | None
    retry_topic: str | None  # RETRY_TOPIC of a message re-delivered on %RETRY%group


def decode_pulled(data: bytes) -> list[Pulled]:
    """Every message in a pull answer's body; DecodeError on a malformed one."""
    out: list[Pulled] = []
    pos = 0
    n = len(data)
    try:
        while pos < n:
            total, magic, _crc, queue_id, _flag, queue_offset, phys, sys_flag, born_ts = _HEAD.unpack_from(data, pos)
            if magic not in (MAGIC_V1, MAGIC_V2):
                raise DecodeError(f"bad magic code {magic} at byte {pos}")
            if total <= 0 or pos + total > n:
                raise DecodeError(f"message at byte {pos} claims {total} bytes, {n - pos} left")
            p = pos + 48 + (20 if sys_flag & BORNHOST_V6 else 8)
            (store_ts,) = _I64.unpack_from(data, p)
            p += 8 + (20 if sys_flag & STOREHOST_V6 else 8)
            (reconsume,) = _I32.unpack_from(data, p)
            (body_len,) = _I32.unpack_from(data, p + 12)
            p += 16 + body_len
            if magic == MAGIC_V1:
                topic_len = data[p]
                p += 1
            else:
                (topic_len,) = _I16.unpack_from(data, p)
                p += 2
            topic = data[p : p + topic_len].decode("utf-8")
            p += topic_len
            (props_len,) = _I16.unpack_from(data, p)
            if p + 2 + props_len > pos + total:
                raise DecodeError(f"message at byte {pos} overruns its size {total}")
            props = data[p + 2 : p + 2 + props_len].decode("utf-8")
            out.append(Pulled(topic, queue_id, queue_offset, phys, store_ts, born_ts, reconsume, body_len,
                              find_property(props, "UNIQ_KEY") or "", find_property(props, "TAGS"), find_property(props, "RETRY_TOPIC")))
            pos += total
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise DecodeError(f"malformed stored message at byte {pos}: {exc}") from None
    return out


__all__ = ["DecodeError", "Pulled", "decode_pulled"]
