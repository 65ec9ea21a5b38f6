"""YAML loading that remembers where every value came from.

A scenario error must name the file, line and field in one line, so the
plain ``yaml.safe_load`` (which forgets positions) is not enough. We let
PyYAML compose its node graph and build ordinary dicts and lists from it,
subclassed only to carry the 1-based line of each key and item.
"""

from __future__ import annotations

from typing import Any

import yaml


class YamlError(ValueError):
    """Bad YAML; ``line`` is 1-based (0 when unknown)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


class LMap(dict[str, Any]):
    """A mapping plus the line of itself, of each key, and of each value."""

    line: int = 0

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.key_lines: dict[str, int] = {}


class LSeq(list[Any]):
    """A sequence plus the line of itself and of each item."""

    line: int = 0

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.item_lines: list[int] = []


def line_of(value: Any, default: int = 0) -> int:
    return getattr(value, "line", default) or default


def load(text: str) -> Any:
    """Parse one YAML document into LMap/LSeq/scalars; YamlError on bad syntax or shapes."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise YamlError(mark.line + 1 if mark else 0, f"YAML syntax: {problem}") from None
    except yaml.YAMLError as exc:
        raise YamlError(0, f"YAML: {exc}") from None
    if node is None:
        return None
    return _convert(node, yaml.SafeLoader(""), 0)


_MAX_DEPTH = 50


def _convert(node: yaml.Node, ctor: yaml.SafeLoader, depth: int) -> Any:
    line = node.start_mark.line + 1
    if depth > _MAX_DEPTH:
        raise YamlError(line, "YAML nested too deeply")
    if isinstance(node, yaml.MappingNode):
        out = LMap(line)
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise YamlError(key_node.start_mark.line + 1, "mapping keys must be plain names")
            key = ctor.construct_object(key_node)
            if not isinstance(key, str):
                raise YamlError(key_node.start_mark.line + 1, f"mapping key {key!r} must be a name, not a {type(key).__name__}")
            if key in out:
                raise YamlError(key_node.start_mark.line + 1, f"duplicate key {key!r}")
            out[key] = _convert(value_node, ctor, depth + 1)
            out.key_lines[key] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        seq = LSeq(line)
        for item in node.value:
            seq.append(_convert(item, ctor, depth + 1))
            seq.item_lines.append(item.start_mark.line + 1)
        return seq
    try:
        return ctor.construct_object(node)
    except yaml.YAMLError as exc:
        raise YamlError(line, f"bad value: {exc}") from None
