"""fastjson's output for maps keyed by objects, and Java's doubles, both ways.

Several admin bodies (TopicStatsTable, ConsumeStats, ResetOffsetBody) are
maps keyed by ``MessageQueue``. fastjson writes such a key as the key
object's own JSON, unquoted: ``{"offsetTable":{{"brokerName":"b",
"queueId":0,"topic":"T"}:{...}}}``. That is not JSON, and Java peers (and
every other RocketMQ client) expect exactly it, so :func:`dumps` writes it
and :func:`loads` reads it back (object keys come out as their JSON text,
which :func:`parse_mq_key` turns into a :class:`MessageQueue`).

Writing goes through the one Java-dialect writer, :func:`remoting.fastjson.dumps`
(doubles as Java's ``Double.toString``, fields in the order the caller gives:
fastjson sorts bean fields alphabetically, so callers build dicts in that
order). Pure functions, no I/O; the tolerant parse is one linear pass, tried
only when the text is not plain JSON.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import orjson

from remoting import fastjson


class MqJsonError(ValueError):
    """Text that is neither JSON nor fastjson's object-keyed form."""


class MessageQueue(NamedTuple):
    """A queue as Java's MessageQueue; tuples sort as its ``compareTo`` (topic, broker, queue id)."""

    topic: str
    broker_name: str
    queue_id: int

    def key_json(self) -> str:
        """The key as fastjson writes it: the object's fields in alphabetical order."""
        return (
            f'{{"brokerName":{_string(self.broker_name)},"queueId":{self.queue_id},'
            f'"topic":{_string(self.topic)}}}'
        )

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}


def _string(text: str) -> str:
    """A JSON string as fastjson's default writer emits it (UTF-8 as is)."""
    return json.dumps(text, ensure_ascii=False)


def dumps(value: Any) -> bytes:
    """fastjson's default output of ``value``: MessageQueue keys as objects, Java doubles, nulls left out.

    The one Java-dialect writer is :func:`remoting.fastjson.dumps`; a key
    object with a ``key_json`` method, as :class:`MessageQueue` has, is
    written as its own JSON there.
    """
    return fastjson.dumps(value)


# ---------------------------------------------------------------------------
# reading


def _string_end(text: str, start: int) -> int:
    """Index just past the string literal opening at ``start`` (linear: no regex backtracking)."""
    i = start + 1
    while True:
        j = text.find('"', i)
        if j < 0:
            raise MqJsonError(f"unterminated string at character {start}")
        backslashes = 0
        k = j - 1
        while k > start and text[k] == "\\":
            backslashes += 1
            k -= 1
        if backslashes % 2 == 0:
            return j + 1
        i = j + 1


def _object_end(text: str, start: int) -> int:
    """Index just past the object opening at ``start``."""
    depth = 0
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i = _string_end(text, i)
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise MqJsonError(f"unterminated object key at character {start}")


def _normalize(text: str) -> str:
    """Quote object keys (as their JSON text) and bare integer keys, so the text is JSON."""
    out: list[str] = []
    stack: list[str] = []
    expect_key = False
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = _string_end(text, i)
            out.append(text[i:j])
            i = j
            expect_key = False
            continue
        if expect_key and c == "{":
            j = _object_end(text, i)
            out.append(_string(text[i:j]))
            i = j
            expect_key = False
            continue
        if expect_key and (c == "-" or c.isdigit()):
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            out.append(f'"{text[i:j]}"')
            i = j
            expect_key = False
            continue
        if c == "{":
            stack.append(c)
            expect_key = True
        elif c == "[":
            stack.append(c)
            expect_key = False
        elif c in "}]":
            if stack:
                stack.pop()
            expect_key = False
        elif c == ",":
            expect_key = bool(stack) and stack[-1] == "{"
        elif not c.isspace():
            expect_key = False
        out.append(c)
        i += 1
    return "".join(out)


#: Bodies a server reads (a subscription group, a heartbeat's client id) are small by nature;
#: the object-keyed form is rewritten by a Python loop at ~0.15 us per character, so a server
#: rewrites at most this much (~40 ms here; an 8 MB body took 1.3 s).
SERVER_NORMALIZE_MAX_BYTES = 256 * 1024


def loads(data: bytes | str, *, max_items: int | None = None, max_normalize_bytes: int | None = None) -> Any:
    """Parse JSON or fastjson's object-keyed form; object keys become their JSON text.

    A server passes bounds: ``max_items`` (:func:`remoting.fastjson.json_items` units) refuses
    a body before parsing, and a body that is not standard JSON is only rewritten when it is
    within ``max_normalize_bytes``. Clients reading their server's answers pass none.
    """
    if max_items is not None and len(data) * fastjson.MAX_UNITS_PER_BYTE > max_items:
        items = fastjson.json_items(data, stop_above=max_items)
        if items > max_items:
            raise MqJsonError(f"JSON body of about {items} items is more than the limit of {max_items}")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if max_normalize_bytes is not None and len(data) > max_normalize_bytes:
            raise MqJsonError(
                f"body is not valid JSON ({exc}), and at {len(data)} bytes too large to read as"
                f" fastjson's object-keyed form (at most {max_normalize_bytes})"
            ) from None
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    except UnicodeDecodeError as exc:
        raise MqJsonError(f"body is not UTF-8: {exc}") from None
    try:
        return orjson.loads(_normalize(text))
    except orjson.JSONDecodeError as exc:
        raise MqJsonError(f"body is not valid JSON: {exc}") from None


def parse_mq_key(key: str) -> MessageQueue:
    """A map key written by :meth:`MessageQueue.key_json` (or any JSON object with those fields)."""
    try:
        obj = orjson.loads(key)
        return MessageQueue(str(obj["topic"]), str(obj["brokerName"]), int(obj["queueId"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise MqJsonError(f"not a MessageQueue key: {key[:80]!r} ({exc})") from None


def mq_table(obj: Any) -> dict[MessageQueue, Any]:
    """A parsed ``{mqKey: value}`` map with MessageQueue keys (a missing table is empty)."""
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise MqJsonError("offset table is not an object")
    return {parse_mq_key(k): v for k, v in obj.items()}
