"""Typed reads from YAML mappings: value parsers and sections that reject unknown keys.

Each parser returns the value or raises ``_Bad``; a section turns that
into a :class:`ScenarioError` naming file, line and field, and ``finish``
names the field nobody read, with a did-you-mean.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from typing import Any

from mqadmin.scenario.yamlnodes import LMap, line_of
from namesrv.config import ConfigError, NamesrvConfig

TOPIC_CHARS = set("%|abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
MAX_DURATION = 600.0
MAX_FILE_BYTES = 1024 * 1024


class ScenarioError(ValueError):
    """An invalid scenario: the message is one line naming file, line and field."""


class _Bad(ValueError):
    """A parameter value that is wrong; the caller adds where."""


Parser = Callable[[Any], Any]
REQUIRED: Any = object()


#: A number in exponent form (``1e9``, ``2.5E-3``): YAML 1.2 reads it as a number, PyYAML (YAML 1.1, which
#: wants a dot and a sign: ``1.0e+9``) as text; read as the number the author meant.
EXPONENT_NUMBER = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)[eE][-+]?[0-9]+$")


def _as_number(v: Any) -> Any:
    """``v``, or the number a text in exponent form stands for (inf stays text: not a number)."""
    if isinstance(v, str) and EXPONENT_NUMBER.match(v.strip()):
        number_ = float(v)
        if math.isfinite(number_):
            return int(number_) if number_.is_integer() and abs(number_) < 2**63 else number_
    return v


def integer(lo: int, hi: int) -> Parser:
    def parse(v: Any) -> int:
        v = _as_number(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise _Bad(f"must be an integer, got {_show(v)}")
        if not lo <= v <= hi:
            raise _Bad(f"must be {lo}..{hi}, got {v}")
        return v
    return parse


def number(lo: float, hi: float, *, lo_open: bool = False) -> Parser:
    def parse(v: Any) -> float:
        v = _as_number(v)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise _Bad(f"must be a number, got {_show(v)}")
        if v < lo or v > hi or (lo_open and v == lo):
            raise _Bad(f"must be {'>' if lo_open else '>='} {lo:g} and <= {hi:g}, got {v:g}")
        return float(v)
    return parse


def boolean(v: Any) -> bool:
    if not isinstance(v, bool):
        raise _Bad(f"must be true or false, got {_show(v)}")
    return v


def text(v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise _Bad(f"must be a non-empty string, got {_show(v)}")
    return v.strip()


def choice(*options: str) -> Parser:
    def parse(v: Any) -> str:
        if v not in options:
            raise _Bad(f"must be one of {', '.join(options)}, got {_show(v)}")
        return v
    return parse


def topic_name(v: Any) -> str:
    name = text(v)
    if len(name) > 127 or not set(name) <= TOPIC_CHARS:
        raise _Bad(f"topic {name!r} must be 1-127 characters of [%|a-zA-Z0-9_-]")
    return name


def scenario_name(v: Any) -> str:
    name = text(v)
    if len(name) > 64 or not all(c.isalnum() or c in "._-" for c in name):
        raise _Bad(f"must be 1-64 characters of letters, digits, '.', '_' and '-', got {name!r}")
    return name


#: NameServer keys the runner sets itself (or from other cluster fields); namesrv_config may not.
RUNNER_NAMESRV_KEYS = ("listenPort", "bindAddress", "scanNotActiveBrokerInterval", "brokerChannelExpiredTime")


def namesrv_config(v: Any) -> tuple[tuple[str, str], ...]:
    """``{key: value}`` of NameServer properties, checked as mqnamesrv would check them."""
    if not isinstance(v, dict):
        raise _Bad(f"must be a mapping of NameServer config keys to values, got {_show(v)}")
    known = set(NamesrvConfig.keys())
    out = []
    for key, value in v.items():
        if key not in known:
            raise _Bad(f"{key!r} is not a NameServer config key")
        if key in RUNNER_NAMESRV_KEYS:
            raise _Bad(f"{key} is set by the runner (see the other cluster fields)")
        if NamesrvConfig.is_path_key(key):
            raise _Bad(f"{key}: paths stay in the scenario's own state directory")
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (int, str)):
            value = str(value)
        else:
            raise _Bad(f"{key} must be a string, number or true/false, got {_show(value)}")
        try:
            NamesrvConfig().parse_values({key: value})
        except ConfigError as exc:
            raise _Bad(str(exc)) from None
        out.append((key, value))
    return tuple(out)


def list_of(item: Parser, *, min_len: int = 1, max_len: int = 64) -> Parser:
    def parse(v: Any) -> tuple[Any, ...]:
        values = list(v) if isinstance(v, list) else [v]
        if not min_len <= len(values) <= max_len:
            raise _Bad(f"must list {min_len}..{max_len} items, got {len(values)}")
        out = []
        for i, x in enumerate(values):
            try:
                out.append(item(x))
            except _Bad as exc:
                raise _Bad(f"item {i + 1}: {exc}") from None
        if len(set(out)) != len(out):
            raise _Bad("must not repeat an item")
        return tuple(out)
    return parse


def _show(v: Any) -> str:
    if v is None:
        return "nothing"
    if isinstance(v, (list, dict)):
        return "a list" if isinstance(v, list) else "a mapping"
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


# ---------------------------------------------------------------------------
# reading sections


class _Ctx:
    def __init__(self, path: str) -> None:
        self.path = path
        self.deferred: list[tuple[str, Any, int, str]] = []  # (what, value, line, field)

    def error(self, line: int, where: str, message: str) -> ScenarioError:
        loc = f"{self.path}:{line}" if line else self.path
        return ScenarioError(f"{loc}: {where}: {message}" if where else f"{loc}: {message}")


class _Section:
    """Typed reads from one mapping; ``finish`` rejects keys nobody read."""

    def __init__(self, ctx: _Ctx, data: Any, where: str, line: int = 0) -> None:
        if not isinstance(data, LMap):
            raise ctx.error(line_of(data, line), where, f"must be a mapping, got {_show(data)}")
        self.ctx = ctx
        self.data = data
        self.where = where
        self.read: set[str] = set()
        self.also: tuple[str, ...] = ()  # keys read elsewhere but valid here too (an item's `at`, `label`)
        # an item's kind key, the parameter it carries, and how to write it (```kill_broker: BROKER```)
        self.main: tuple[str, str, str] | None = None

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def line(self, key: str | None = None) -> int:
        if key is not None and key in self.data.key_lines:
            return self.data.key_lines[key]
        return self.data.line

    def has(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str, parse: Parser, default: Any = REQUIRED) -> Any:
        self.read.add(key)
        if key not in self.data or (self.data[key] is None and default is not REQUIRED):
            if default is REQUIRED:
                if self.main is not None and key == self.main[1]:
                    kind, _, how = self.main
                    raise self.ctx.error(self.data.line, self.path(kind), f"needs its {key}: write {how}")
                raise self.ctx.error(self.data.line, self.path(key), "is required")
            return default
        try:
            return parse(self.data[key])
        except _Bad as exc:
            raise self.ctx.error(self.line(key), self.path(key), str(exc)) from None

    def raw(self, key: str) -> Any:
        self.read.add(key)
        return self.data.get(key)

    def fail(self, key: str | None, message: str) -> ScenarioError:
        return self.ctx.error(self.line(key), self.path(key) if key else self.where, message)

    def unknown_first(self, keys: tuple[str, ...]) -> None:
        """Report a field that is none of ``keys`` before anything else (a typo explains what follows)."""
        for given in self.data:
            if given not in keys:
                close = difflib.get_close_matches(str(given), keys, n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                raise self.ctx.error(self.line(given), self.path(str(given)),
                                     f"unknown field ({hint}expected one of: {', '.join(sorted(keys))})")

    def finish(self) -> None:
        for key in self.data:
            if key not in self.read:
                names = sorted(self.read | set(self.also))
                close = difflib.get_close_matches(str(key), names, n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                raise self.ctx.error(self.line(key), self.path(key),
                                     f"unknown field ({hint}expected one of: {', '.join(names)})")


