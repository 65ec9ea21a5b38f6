"""Java's types of the numeric header fields the broker reads, checked before a handler runs.

A Java broker decodes every request header into typed fields
(``Integer.parseInt`` / ``Long.parseLong``), so a value beyond int32 or
int64 never reaches its processors: the request is answered SYSTEM_ERROR
with the NumberFormatException's text. The stub reads headers lazily as
text, and an out-of-range number used to get as far as ``struct.pack``
(a traceback in the log, a SYSTEM_ERROR with Python's words). Here every
such field is checked, by code, against its Java type, and refused with a
remark naming the field, its value and the range.

Text that is no number at all (``abc``, ``1e3``, an empty string) is
refused the same way, as Java's ``Integer.parseInt`` throws on it; a field
that is absent keeps the handler's default.

The send codes (10, 310, 320) are checked inline by :mod:`broker_stub.sending`
(the hot path), with :func:`number_error` for the remark.
"""

from __future__ import annotations

from broker_stub.common import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Reject
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.javatypes import JavaRangeError, NotANumber, parse_int

INT = (INT32_MIN, INT32_MAX)
LONG = (INT64_MIN, INT64_MAX)
#: A field's name and its (lowest, highest) value.
Field = tuple[str, tuple[int, int]]

#: Request code -> its numeric header fields with their Java types (the *RequestHeader classes of 5.3.3).
NUMERIC_FIELDS: dict[int, tuple[Field, ...]] = {
    RequestCode.QUERY_MESSAGE: (("maxNum", INT), ("beginTimestamp", LONG), ("endTimestamp", LONG)),
    RequestCode.PULL_MESSAGE: (
        ("queueId", INT), ("queueOffset", LONG), ("maxMsgNums", INT), ("sysFlag", INT), ("commitOffset", LONG),
        ("suspendTimeoutMillis", LONG), ("subVersion", LONG), ("maxMsgBytes", INT), ("requestSource", INT),
    ),
    RequestCode.QUERY_CONSUMER_OFFSET: (("queueId", INT),),
    RequestCode.UPDATE_CONSUMER_OFFSET: (("queueId", INT), ("commitOffset", LONG)),
    RequestCode.UPDATE_AND_CREATE_TOPIC: (
        ("readQueueNums", INT), ("writeQueueNums", INT), ("perm", INT), ("topicSysFlag", INT),
    ),
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: (("queueId", INT), ("timestamp", LONG)),
    RequestCode.GET_MAX_OFFSET: (("queueId", INT),),
    RequestCode.GET_MIN_OFFSET: (("queueId", INT),),
    RequestCode.GET_EARLIEST_MSG_STORETIME: (("queueId", INT),),
    RequestCode.VIEW_MESSAGE_BY_ID: (("offset", LONG),),
    RequestCode.CONSUMER_SEND_MSG_BACK: (("offset", LONG), ("delayLevel", INT), ("maxReconsumeTimes", INT)),
    # ResetOffsetRequestHeader; the other admin codes (200-208, 315, 351) have no numeric field
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: (("queueId", INT), ("offset", LONG), ("timestamp", LONG)),
    RequestCode.POP_MESSAGE: (("queueId", INT), ("maxMsgNums", INT), ("invisibleTime", LONG), ("pollTime", LONG),
                              ("bornTime", LONG), ("initMode", INT)),
    RequestCode.ACK_MESSAGE: (("queueId", INT), ("offset", LONG)),
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: (("queueId", INT), ("offset", LONG), ("invisibleTime", LONG)),
    # GET_ALL_CONSUMER_OFFSET (43) and our replication request (9010, broker_stub.replication) have no
    # numeric header field: 9010's queue ids and offsets are in its body, range-checked where it is read.
}

#: SEND_MESSAGE_V2's one-letter keys, for remarks that name the field both ways.
V2_NAMES = {"d": "defaultTopicQueueNums", "e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "h": "flag",
            "j": "reconsumeTimes", "l": "maxReconsumeTimes"}


def _name(key: str) -> str:
    return f"{V2_NAMES[key]} ({key})" if key in V2_NAMES else key


def out_of_range(key: str, text: str, bounds: tuple[int, int]) -> Reject:
    """The refusal of one field; ``key`` may be a SEND_MESSAGE_V2 letter."""
    kind = "int" if bounds == INT else "long"
    return Reject(
        ResponseCode.SYSTEM_ERROR,
        f"header field {_name(key)}={_shown(text)} is out of range for a Java {kind} ({bounds[0]}..{bounds[1]})",
    )


def not_a_number(key: str, text: str, bounds: tuple[int, int]) -> Reject:
    kind = "int" if bounds == INT else "long"
    return Reject(ResponseCode.SYSTEM_ERROR, f"header field {_name(key)}={_shown(text)!r} is not a number (a Java {kind})")


def _shown(text: str) -> str:
    return text if len(text) <= 40 else text[:40] + "..."


def number_error(key: str, text: str, bounds: tuple[int, int]) -> Reject | None:
    """Why ``text`` is not a value of the field's Java type (None: it is one)."""
    if len(text) < 10 and text.isdigit() and text.isascii():
        return None  # up to 9 digits always fit an int: the usual case, no parsing
    try:
        parse_int(text, 32 if bounds == INT else 64, key)
    except NotANumber:
        return not_a_number(key, text, bounds)
    except JavaRangeError:
        return out_of_range(key, text, bounds)
    return None


def check_fields(req: RemotingCommand, fields: tuple[Field, ...]) -> None:
    """Refuse ``req`` (Reject) if a numeric field is no number or out of its Java type's range."""
    ext = req.ext_fields
    if not ext:
        return
    for key, bounds in fields:
        text = ext.get(key)
        if text is not None:
            error = number_error(key, text, bounds)
            if error is not None:
                raise error
