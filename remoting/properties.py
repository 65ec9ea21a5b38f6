"""Java ``.properties`` text, as RocketMQ reads and writes it.

RocketMQ parses config files and UPDATE_NAMESRV_CONFIG bodies with
``java.util.Properties.load``; both directions are reproduced here so files
and bodies move between Java and Python tools unchanged.

Two writers exist because Java has two: :func:`dumps` is
``MixAll.properties2String`` (plain ``key=value`` lines, what Java sends on
the wire), and :func:`store` is ``Properties.store``'s escaping, which is the
only form that parses back to exactly the keys and values written. Files we
write and bodies we send use :func:`store`: with plain lines, a value holding
a newline becomes a second key (the config-file injection of issue 11).

Parsing is linear in the input: a body of a million continuation lines is
refused by size upstream, but would still parse in linear time here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping


class PropertiesError(ValueError):
    """Text that Java's Properties.load would reject (a malformed \\u escape)."""


_BLANK = " \t\f"


def _odd_trailing_backslashes(line: str) -> bool:
    """Whether ``line`` ends in an odd run of backslashes (a continuation).

    Java counts the run within one physical line only, so this looks at the
    line alone and never at what earlier lines contributed.
    """
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _logical_lines(text: str) -> Iterator[str]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        if not _odd_trailing_backslashes(line):
            yield line
            continue
        # Collect the pieces and join once: concatenating as we go is
        # quadratic in the number of continuation lines.
        parts = [line[:-1]]
        while i < n:
            piece = lines[i].lstrip(_BLANK)
            i += 1
            if _odd_trailing_backslashes(piece):
                parts.append(piece[:-1])
                continue
            parts.append(piece)
            break
        yield "".join(parts)


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")


def _join_surrogates(text: str) -> str:
    """Combine ``\\uD83D\\uDE00``-style pairs into one character, as UTF-16 does in Java."""
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:  # a lone surrogate: keep it as Java would
        return text


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    i = 0
    n = len(text)
    surrogates = False
    while i < n:
        j = text.find("\\", i)
        if j < 0 or j + 1 >= n:  # no escape left (a lone final backslash stays)
            out.append(text[i:])
            break
        out.append(text[i:j])
        nxt = text[j + 1]
        if nxt == "u":
            digits = text[j + 2 : j + 6]
            if len(digits) != 4 or not _HEX.issuperset(digits):
                raise PropertiesError("Malformed \\uxxxx encoding.")
            code = int(digits, 16)
            surrogates = surrogates or 0xD800 <= code <= 0xDFFF
            out.append(chr(code))
            i = j + 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i = j + 2
    result = "".join(out)
    return _join_surrogates(result) if surrogates else result


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
    while j < n and line[j] in _BLANK:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _BLANK:
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


_STORE_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f",
                  "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!"}


def _store_escape(text: str, *, is_key: bool) -> str:
    """Properties.saveConvert: what makes ``loads(store(x)) == x`` hold for any text."""
    out = []
    for i, ch in enumerate(text):
        esc = _STORE_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch == " ":
            out.append("\\ " if is_key or i == 0 else " ")
        elif " " < ch <= "~":
            out.append(ch)
        else:
            code = ord(ch)
            if code > 0xFFFF:  # Java strings are UTF-16: one escape per surrogate
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}")
            else:
                out.append(f"\\u{code:04X}")
    return "".join(out)


def store(props: Mapping[str, object], *, sort: bool = True) -> str:
    """``key=value`` lines with Java's ``Properties.store`` escaping (ASCII only).

    ``loads(store(p)) == p`` for any string keys and values, so no value can
    smuggle in a line, a key or a comment.
    """
    keys = sorted(props) if sort else list(props)
    return "".join(
        f"{_store_escape(str(k), is_key=True)}={_store_escape(str(props[k]), is_key=False)}\n"
        for k in keys
        if props[k] is not None
    )
