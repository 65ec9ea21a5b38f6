"""Every JSON key mqadmin prints is camelCase (``perSecond``, ``latencyMs``), as Apache's own JSON is.

Our internal records (what a fan-out partition sends its driver, simclient's counters) keep their Python
names; :func:`camel_keys` turns such a record into the printed form at the edge, leaving alone the maps
whose keys are data (outcome names, broker names), not field names.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any


def camel(name: str) -> str:
    """``ok_latency`` -> ``okLatency``; a name without an underscore is unchanged."""
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def camel_keys(value: Any, data_maps: Collection[str] = ()) -> Any:
    """``value`` with every dict key camelCased, recursively; under a key named in ``data_maps`` (by its
    original name) the map's own keys are data and stay as they are."""
    if isinstance(value, dict):
        return {camel(k) if isinstance(k, str) else k:
                ({kk: camel_keys(vv, data_maps) for kk, vv in v.items()} if k in data_maps and isinstance(v, dict)
                 else camel_keys(v, data_maps))
                for k, v in value.items()}
    if isinstance(value, list):
        return [camel_keys(v, data_maps) for v in value]
    return value
