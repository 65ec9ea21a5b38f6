"""JSON the way Java RocketMQ (fastjson) reads and writes it.

Java peers write maps with integer keys unquoted (``{0:"addr"}``), which is
not JSON; they read both forms. We parse both, and write either the
"standard" form (quoted keys, sorted maps, ``\\uXXXX`` for non-ASCII, ``\\/``)
or the legacy form (bare integer keys, raw UTF-8), byte for byte as a Java
NameServer would. :func:`dumps` is the project's one writer of Java's
dialect: it also writes a map keyed by objects (a ``MessageQueue``, see
:mod:`remoting.mqjson`) with each key as its own JSON, unquoted, and doubles
as Java's ``Double.toString``. Plain JSON with string keys goes through
orjson instead (:func:`dumps_fast`).
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

import orjson


class BodyError(ValueError):
    """A request body that cannot be parsed as the type its code demands."""


class BodyLimitError(BodyError):
    """A body refused because it is larger (or holds more) than a configured bound allows."""


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


#: Parse cost of the tokens :func:`json_items` counts, in units of one short string (~14 ns
#: here): orjson builds an empty object in ~60 ns, an array in ~170-300 ns, an object member
#: ~45 ns (a distinct key ~250 ns), an integer or string ~5-15 ns.
_ARRAY_WEIGHT, _OBJECT_WEIGHT, _MEMBER_WEIGHT = 20, 5, 3
#: No byte costs more units than this: a body of n bytes cannot pass n * MAX_UNITS_PER_BYTE.
MAX_UNITS_PER_BYTE = _ARRAY_WEIGHT
#: The bound for bodies a server reads that are small by nature (a data version, a route, a
#: heartbeat, a lock request, a subscription group): about 35-50 ms of parsing at worst here,
#: and room for a heartbeat of some 10,000 subscriptions.
SMALL_BODY_ITEMS = 1_000_000
#: The legacy form (bare integer keys) is rewritten by a regex that calls Python for every
#: string, ~0.3 us each: a body over this many items is not rewritten (~60 ms at the bound).
LEGACY_MAX_ITEMS = 200_000


def json_items(data: bytes | bytearray | memoryview | str, stop_above: int | None = None) -> int:
    """An upper bound on the work of parsing ``data``, in units of one short string.

    Counted with C-speed ``count`` (about 1.5 ms per MB for all five) before anything is
    parsed: brackets, braces, colons, commas and quotes, weighted by what orjson spends on
    each. Characters inside strings count too, so text-heavy bodies are overestimated,
    never underestimated. With ``stop_above``, counting stops once the total passes it (the
    costliest tokens are counted first), so a hostile body is refused after one pass.
    """
    if isinstance(data, memoryview):
        data = bytes(data)
    text = isinstance(data, str)
    total = 1
    for token, weight in _WEIGHTS:
        total += data.count(token.decode() if text else token) * weight  # type: ignore[arg-type]
        if stop_above is not None and total > stop_above:
            break
    return total


#: Costliest first; a quote counts 1 (a string has two: strings are counted twice over).
_WEIGHTS = ((b"[", _ARRAY_WEIGHT), (b"{", _OBJECT_WEIGHT), (b":", _MEMBER_WEIGHT), (b",", 1), (b'"', 1))


def loads(
    data: bytes | bytearray | memoryview | str,
    *,
    max_items: int | None = None,
    max_legacy_items: int | None = None,
) -> Any:
    """Parse fastjson output, including bare integer object keys.

    A server reading what a peer sent passes bounds (in :func:`json_items` units): a body
    over ``max_items`` is refused before parsing, and one that is not standard JSON is only
    rewritten from the legacy form when it is within ``max_legacy_items``. Without bounds
    (a client reading its server's answers) any size is parsed.
    """
    items = 0
    bounds = [b for b in (max_items, max_legacy_items) if b is not None]
    if bounds and len(data) * MAX_UNITS_PER_BYTE > min(bounds):  # a smaller body cannot reach a bound
        items = json_items(data, stop_above=max_items)
        if max_items is not None and items > max_items:
            raise BodyError(f"JSON body of about {items} items is more than the limit of {max_items}")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if max_legacy_items is not None and items > max_legacy_items:
            raise BodyError(
                f"body is not valid JSON ({exc}), and at about {items} items too large to read as"
                f" fastjson's legacy form (at most {max_legacy_items})"
            ) from None
    try:
        # bytes() first: a memoryview has no .decode of its own.
        text = bytes(data).decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
    except UnicodeDecodeError as exc:
        raise BodyError(f"body is not UTF-8: {exc}") from None
    try:
        return orjson.loads(_STRING_OR_BARE_KEY.sub(_quote_bare_key, text))
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"body is not valid JSON: {exc}") from None


def loads_small(data: bytes | bytearray | memoryview | str) -> Any:
    """:func:`loads` with the bounds for a body that is small by nature (see SMALL_BODY_ITEMS)."""
    return loads(data, max_items=SMALL_BODY_ITEMS, max_legacy_items=LEGACY_MAX_ITEMS)


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
        out.append(java_double(value))
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
            elif isinstance(key, int) or not hasattr(key, "key_json"):
                out.append(f'"{key}"' if standard else str(key))
            else:  # an object key (a MessageQueue): its own JSON, unquoted
                out.append(key.key_json())
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


def java_double(value: float) -> str:
    """``Double.toString``: plain decimal in [1e-3, 1e7), else ``d.dddE±n``; NaN/infinite as fastjson's ``null``."""
    if math.isnan(value) or math.isinf(value):
        return "null"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    magnitude = abs(value)
    sign = "-" if value < 0 else ""
    digits_tuple = Decimal(repr(magnitude)).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    exponent = len(digits) - 1 + int(digits_tuple.exponent)  # value = d.ddd x 10^exponent
    if 1e-3 <= magnitude < 1e7:
        if exponent >= 0:
            whole, frac = digits[: exponent + 1].ljust(exponent + 1, "0"), digits[exponent + 1 :]
        else:
            whole, frac = "0", "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{frac or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


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
