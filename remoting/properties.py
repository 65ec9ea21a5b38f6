"""Java ``.properties`` text, as RocketMQ reads and writes it.

RocketMQ parses config files and UPDATE_NAMESRV_CONFIG bodies with
``java.util.Properties.load`` and renders them with plain ``key=value``
lines; both directions are reproduced here so files and bodies move between
Java and Python tools unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class PropertiesError(ValueError):
    """Text that Java's Properties.load would reject (a malformed \\u escape)."""


def _logical_lines(text: str) -> Iterable[str]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        # An odd number of trailing backslashes continues the line.
        while True:
            stripped = line.rstrip("\\")
            if (len(line) - len(stripped)) % 2 == 0 or i >= len(lines):
                if (len(line) - len(stripped)) % 2 == 1:
                    line = line[:-1]
                break
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        yield line


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    i = 0
    n = len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in " \t\f":
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in " \t\f":
            j += 1
    return key, line[j:]


def loads(text: str) -> dict[str, str]:
    """Parse properties text; later keys win, as in Java."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        result[_unescape(key)] = _unescape(value)
    return result


def dumps(props: Mapping[str, object], *, sort: bool = True) -> str:
    """``key=value`` lines as MixAll.properties2String writes them (no escaping)."""
    keys = sorted(props) if sort else list(props)
    return "".join(f"{k}={props[k]}\n" for k in keys if props[k] is not None)
