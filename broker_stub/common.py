"""Small helpers shared by the broker's request handlers."""

from __future__ import annotations

from remoting.command import RemotingCommand

FAQ_APPLY_TOPIC = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"


class Reject(Exception):
    """A request refused with a response code and remark (not a bug)."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def ext_int(req: RemotingCommand, key: str, default: int) -> int:
    """Java's per-field parse: a missing or malformed value keeps the default."""
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
    """MessageDecoder.string2messageProperties: ``name\\x01value\\x02`` pairs, malformed ones skipped."""
    out: dict[str, str] = {}
    for pair in text.split(PROPERTY_SEPARATOR):
        name, sep, value = pair.partition(NAME_VALUE_SEPARATOR)
        if sep and name:
            out[name] = value
    return out


def format_properties(props: dict[str, str]) -> str:
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in props.items())


def find_property(text: str, name: str) -> str | None:
    """One property straight from the properties string, without parsing all of it (hot path)."""
    key = name + NAME_VALUE_SEPARATOR
    if text.startswith(key):
        start = len(key)
    else:
        i = text.find(PROPERTY_SEPARATOR + key)
        if i < 0:
            return None
        start = i + 1 + len(key)
    end = text.find(PROPERTY_SEPARATOR, start)
    return text[start:end] if end >= 0 else text[start:]
