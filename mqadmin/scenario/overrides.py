"""Cluster overrides, ``KEY=VALUE``, as ``scenario run --compare`` applies them to a scenario file.

``KEY`` is any field of the file's ``cluster:`` section (``namesrv_impl``, ``broker_expired_ms``), or a
key inside one of its mappings with a dot (``namesrv_config.warmRestartEnable``). ``VALUE`` is read as
YAML, so ``5000`` is a number, ``false`` a boolean and ``[toolkit, java:5.5.0]`` a list. The override
replaces what the file says before the file is checked, so an override is held to the same rules,
and its errors are the file's, naming the field.
"""

from __future__ import annotations

from typing import Any

from mqadmin.scenario.values import ScenarioError
from mqadmin.scenario.yamlnodes import LMap, YamlError
from mqadmin.scenario.yamlnodes import load as load_yaml

Override = tuple[str, Any]  # (dotted key under cluster, value)


def parse_override(text: str) -> Override:
    """``KEY=VALUE`` as (KEY, the YAML value); ScenarioError (one line) if it is not that."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not raw.strip():
        raise ScenarioError(f"--compare {text!r}: expected KEY=VALUE, a cluster field and its value "
                            "(e.g. namesrv_impl=java:5.5.0 or broker_expired_ms=30000)")
    if not all(part and all(c.isalnum() or c == "_" for c in part) for part in key.split(".")) or key.count(".") > 1:
        raise ScenarioError(f"--compare {text!r}: {key!r} is not a cluster field (FIELD or FIELD.KEY)")
    try:
        value = load_yaml(raw)
    except YamlError as exc:
        raise ScenarioError(f"--compare {text!r}: the value is not YAML: {exc}") from None
    return key, value


def describe(overrides: list[Override]) -> str:
    """``key=value, key=value`` for titles."""
    def show(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list):
            return "[" + ", ".join(map(show, v)) + "]"
        return str(v)

    return ", ".join(f"{k}={show(v)}" for k, v in overrides)


def apply(data: Any, overrides: list[Override]) -> None:
    """Set each override in the document's ``cluster:`` mapping (made if the file has none)."""
    if not isinstance(data, LMap):
        return  # not a mapping: the parser reports the file as it is
    cluster = data.get("cluster")
    if cluster is None:
        cluster = data["cluster"] = LMap(data.line)
        data.key_lines["cluster"] = data.line
    if not isinstance(cluster, LMap):
        return  # the parser reports a cluster that is not a mapping
    for key, value in overrides:
        target, name = cluster, key
        if "." in key:
            outer, name = key.split(".", 1)
            inner = cluster.get(outer)
            if inner is None:
                inner = cluster[outer] = LMap(cluster.line)
                cluster.key_lines[outer] = cluster.key_lines.get(outer, cluster.line)
            if not isinstance(inner, LMap):
                raise ScenarioError(f"--compare {key}: cluster.{outer} is not a mapping in the file")
            target = inner
        target[name] = value
        target.key_lines[name] = target.key_lines.get(name, target.line)


__all__ = ["Override", "apply", "describe", "parse_override"]
