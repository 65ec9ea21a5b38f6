"""One message property straight from RocketMQ's properties string.

The string is ``name\x01value\x02`` pairs (the last ``\x02`` absent in 4.9.x
clients' output). Brokers read TAGS or UNIQ_KEY per message on the send and
pull paths, and clients per pulled message, so this finds one pair without
parsing the rest; both sides share it.
"""

from __future__ import annotations

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


def find_property(text: str, name: str) -> str | None:
    """The value of ``name`` in ``text``, or None."""
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
