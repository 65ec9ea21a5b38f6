"""JSON the way Java RocketMQ (fastjson) reads and writes it.

Java peers write maps with integer keys unquoted (``{0:"addr"}``), which is
not JSON; they read both forms. We parse both, and write either the
"standard" form (quoted keys, sorted maps, ``\\uXXXX`` for non-ASCII, ``\\/``)
or the legacy form (bare integer keys, raw UTF-8), byte for byte as a Java
NameServer would.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson


class BodyError(ValueError):
    """A request body that cannot be parsed as the type its code demands."""


# A string (its closing quote optional) or a bare integer key. The optional
# quote is what keeps this linear: an unterminated string, e.g. '"' + '\\"'*n,
# is consumed once to the end instead of failing and being rescanned from
# every later quote (quadratic: 18 s at 64 KB). DOTALL lets an escape take
# any character, a newline included, so no string stops half-way.
_STRING_OR_BARE_KEY = re.compile(r'"(?:[^"\\]+|\\.)*"?|([{,]\s*)(-?\d+)(\s*:)', re.DOTALL)


def _quote_bare_key(match: re.Match[str]) -> str:
    if match.group(2) is None:
        return match.group(0)
    return f'{match.group(1)}"{match.group(2)}"{match.group(3)}'


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse fastjson output, including bare integer object keys."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        # bytes() first: a memoryview has no .decode of its own.
        text = bytes(data).decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
    except UnicodeDecodeError as exc:
        raise BodyError(f"body is not UTF-8: {exc}") from None
    try:
        return orjson.loads(_STRING_OR_BARE_KEY.sub(_quote_bare_key, text))
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"body is not valid JSON: {exc}") from None


_UNICODE_ESCAPE = re.compile(r"\\\\|\\u[0-9a-f]{4}")


def _upper_escape(match: re.Match[str]) -> str:
    text = match.group(0)
    return text if text == "\\\\" else "\\u" + text[2:].upper()


def _string(value: str, standard: bool) -> str:
    if standard:
        text = json.dumps(value, ensure_ascii=True)
        if "\\u" in text:
            text = _UNICODE_ESCAPE.sub(_upper_escape, text)
        return text.replace("/", "\\/")
    return json.dumps(value, ensure_ascii=False)


def _encode(value: Any, standard: bool, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(_string(value, standard))
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif value is None:
        out.append("null")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(repr(value))
    elif isinstance(value, dict):
        out.append("{")
        items = value.items()
        if standard and value and not isinstance(next(iter(value)), str):
            items = sorted(items)  # MapSortField: numeric keys in numeric order
        first = True
        for key, item in items:
            if item is None:
                continue
            if not first:
                out.append(",")
            first = False
            if isinstance(key, str):
                out.append(_string(key, standard))
            elif standard:
                out.append(f'"{key}"')
            else:
                out.append(str(key))
            out.append(":")
            _encode(item, standard, out)
        out.append("}")
    elif isinstance(value, (list, tuple, set, frozenset)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, standard, out)
        out.append("]")
    else:
        raise TypeError(f"cannot encode {type(value).__name__}")


def dumps(value: Any, *, standard: bool = False) -> bytes:
    """Encode ``value`` (dicts in the key order given) as fastjson would.

    ``standard=False`` is fastjson's default output (integer keys bare);
    ``standard=True`` is the BrowserCompatible + QuoteFieldNames + MapSortField
    mode a NameServer uses for route answers to clients >= 4.9.4.
    """
    out: list[str] = []
    _encode(value, standard, out)
    return "".join(out).encode("utf-8")


def dumps_fast(value: Any) -> bytes:
    """Compact JSON of a value with string keys only (no fastjson quirks apply)."""
    return orjson.dumps(value)
