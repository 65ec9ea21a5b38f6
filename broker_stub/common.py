"""Small helpers shared by the broker's request handlers."""

from __future__ import annotations

import itertools
import os
import random
import time

from remoting.command import RemotingCommand

FAQ_APPLY_TOPIC = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class Reject(Exception):
    """A request refused with a response code and remark (not a bug)."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def ext_int(req: RemotingCommand, key: str, default: int) -> int:
    """A header number; a missing value keeps the default (malformed or out-of-range values
    never get here: :mod:`broker_stub.headers` refuses them before the handler runs)."""
    fields = req.ext_fields
    text = fields.get(key) if fields else None
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        try:
            return int(text.strip())
        except ValueError:
            return default


def ext_bool(req: RemotingCommand, key: str) -> bool:
    """Boolean.parseBoolean: only "true" (any case) is true."""
    return (req.ext(key) or "").strip().lower() == "true"


def parse_properties(text: str) -> dict[str, str]:
    """MessageDecoder.string2messageProperties: ``name\\x01value\\x02`` pairs; a pair with an
    empty name or an empty value is skipped, as Java skips it (the last pair may lack its ``\\x02``)."""
    out: dict[str, str] = {}
    for pair in text.split(PROPERTY_SEPARATOR):
        name, sep, value = pair.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            out[name] = value
    return out


def format_properties(props: dict[str, str]) -> str:
    """MessageDecoder.messageProperties2String of 5.x: every pair ends with ``\\x02``."""
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in props.items())


def get_property(text: str, name: str) -> str | None:
    """A property as Java's parsed map holds it: the last pair of that name with a non-empty
    value wins. Hot path: when the name occurs once, at a pair's start, two finds and a slice."""
    key = name + NAME_VALUE_SEPARATOR
    i = text.find(key)
    if i < 0:
        return None
    if (i == 0 or text[i - 1] == PROPERTY_SEPARATOR) and text.find(key, i + 1) < 0:
        end = text.find(PROPERTY_SEPARATOR, i)
        return (text[i + len(key) : end] if end >= 0 else text[i + len(key) :]) or None
    return parse_properties(text).get(name)


def delete_property(text: str, name: str) -> str:
    """MessageUtils.deleteProperty: the text without every ``name`` pair, the rest unchanged."""
    key = name + NAME_VALUE_SEPARATOR
    if key not in text:
        return text
    pairs = text.split(PROPERTY_SEPARATOR)
    trailing = text.endswith(PROPERTY_SEPARATOR)
    kept = [p for p in (pairs[:-1] if trailing else pairs) if not p.startswith(key)]
    return "".join(p + PROPERTY_SEPARATOR for p in kept) if trailing else PROPERTY_SEPARATOR.join(kept)


class UniqIds:
    """MessageClientIDSetter.createUniqID's shape: 32 upper-case hex chars, unique per broker run.

    A Java 5.x broker gives a message that arrives without ``UNIQ_KEY`` one of these
    (SendMessageProcessor), so a consumer can always tell messages apart.
    Layout: 4 address bytes, 2 pid bytes, 4 random bytes, 4 bytes of milliseconds, 2 counter bytes.
    """

    def __init__(self, ip: bytes) -> None:
        self._prefix = (ip + (os.getpid() & 0xFFFF).to_bytes(2, "big") + random.getrandbits(32).to_bytes(4, "big")).hex().upper()
        self._counter = itertools.count()

    def next(self) -> str:
        millis = int(time.time() * 1000) & 0xFFFFFFFF
        return f"{self._prefix}{millis:08X}{next(self._counter) & 0xFFFF:04X}"
