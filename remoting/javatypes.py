"""Java's integer types, for range-checking numbers that peers send.

A Java peer stores every numeric header and body field in an ``int`` or a
``long``; a value outside that range is one Java itself would have refused
(``NumberFormatException``). Python would accept it silently and fail much
later, far from the request (an encoder raising on a 70-bit counter), so
parsers check ranges where the number comes in.
"""

from __future__ import annotations

import re
from typing import Any

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_BOUNDS = {32: (INT32_MIN, INT32_MAX), 64: (INT64_MIN, INT64_MAX)}
_TYPE_NAME = {32: "int", 64: "long"}
#: Integer.parseInt / Long.parseLong: an optional sign and ASCII digits only
#: (Python's int() would also take "1_000", spaces inside, or Arabic digits).
_DECIMAL = re.compile(r"[+-]?[0-9]+")
_MAX_DIGITS = 19  # more significant digits than this never fit a long


class JavaRangeError(ValueError):
    """A number outside the Java type of its field, or not a number at all."""


class NotANumber(JavaRangeError):
    """Text that is no decimal integer at all."""


def brief(value: Any, limit: int = 40) -> str:
    """A short, safe description of a bad value for a remark or a log line.

    ``repr`` of a 1,000-deep list raises RecursionError and ``repr`` of a
    megabyte string makes a megabyte remark; neither belongs in an answer.
    """
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[:limit] + "..."


def check_range(value: int, bits: int, what: str) -> int:
    """``value`` if it fits Java's ``int`` (bits=32) or ``long`` (bits=64)."""
    low, high = _BOUNDS[bits]
    if not low <= value <= high:
        raise JavaRangeError(f"{what} {brief(value)} is out of range for a Java {_TYPE_NAME[bits]}")
    return value


def parse_int(text: str, bits: int, what: str) -> int:
    """Java's ``Integer.parseInt`` / ``Long.parseLong`` (surrounding blanks allowed)."""
    stripped = text.strip()
    if not _DECIMAL.fullmatch(stripped):
        raise NotANumber(f"{what} is not a number: {brief(text)}")
    digits = stripped.lstrip("+-").lstrip("0")
    if len(digits) > _MAX_DIGITS:
        raise JavaRangeError(f"{what} {brief(text)} is out of range for a Java {_TYPE_NAME[bits]}")
    return check_range(int(stripped), bits, what)
