"""The fault vocabulary, as data: paths, toxics, and what one stream of a connection does now.

Shopify's Toxiproxy is the model. A *path* (Toxiproxy's "proxy") forwards each TCP connection accepted
on ``listen`` to ``upstream``. A *toxic* sits on one *stream* of a path: ``upstream`` is what the
client sends towards the server, ``downstream`` what comes back. Three types:

============  =====================  ====================================================================
type          attributes             effect on the stream
============  =====================  ====================================================================
``latency``   ``latency``,           each chunk is delivered ``latency`` +- ``jitter`` ms after it was
              ``jitter`` (ms)        read, in order
``bandwidth`` ``rate`` (KB/s,        at most ``rate`` x 1000 bytes a second get through
              1 KB = 1000 bytes)
``blackhole`` none                   bytes are read and dropped, never forwarded; a close or a reset from
                                     that side is not forwarded either
============  =====================  ====================================================================

Several toxics on one stream combine as Toxiproxy chains them: latencies add up, the lowest rate wins,
one blackhole drops everything. Two operations act on a whole path rather than on a stream: disabling
it (Toxiproxy's ``enabled: false``: *refuse*, the listener is closed so that a connect is refused, and
live connections are reset) and *reset-now* (every live connection gets a TCP RST at both ends). *Heal*
removes a path's toxics and enables it.

Nothing here opens a socket or reads a clock: the pumps (:mod:`faultproxy.link`) ask :func:`effective`
what their stream does, and :func:`due_time` and :class:`Pacer` take ``now`` as a parameter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from faultproxy.limits import MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PATH, MAX_LATENCY_MS, MAX_RATE_KBPS, NAME_PATTERN

UPSTREAM = "upstream"
DOWNSTREAM = "downstream"
STREAMS = (UPSTREAM, DOWNSTREAM)

#: type -> {attribute: (lowest, highest, default; None: required)}
TOXIC_TYPES: dict[str, dict[str, tuple[int, int, int | None]]] = {
    "latency": {"latency": (0, MAX_LATENCY_MS, 0), "jitter": (0, MAX_LATENCY_MS, 0)},
    "bandwidth": {"rate": (1, MAX_RATE_KBPS, None)},
    "blackhole": {},
}
_NAME = re.compile(NAME_PATTERN)
_TOXIC_KEYS = ("name", "type", "stream", "toxicity", "attributes")
_PATH_KEYS = ("name", "listen", "upstream", "enabled", "max_connections")


class FaultError(ValueError):
    """A bad path or toxic (or a name that is not there); ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def check_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise FaultError(f"{what} must be 1-64 characters of A-Z a-z 0-9 . _ @ : -, got {_show(value)}")
    return value


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


def _int(value: object, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise FaultError(f"{what} must be an integer, got {_show(value)}")
    if not lo <= value <= hi:
        raise FaultError(f"{what} must be {lo}..{hi}, got {int(value)}")
    return int(value)


def _unknown(body: Mapping[str, Any], known: tuple[str, ...], what: str) -> None:
    extra = [k for k in body if k not in known]
    if extra:
        raise FaultError(f"{what} has no field {_show(extra[0])} (fields: {', '.join(known)})")


@dataclass(frozen=True)
class Toxic:
    name: str
    type: str
    stream: str
    attributes: tuple[tuple[str, int], ...]

    def attr(self, key: str) -> int:
        return dict(self.attributes)[key]

    def to_json(self) -> dict[str, Any]:
        """Toxiproxy's shape (``toxicity`` is always 1: every connection gets the toxic)."""
        return {"name": self.name, "type": self.type, "stream": self.stream, "toxicity": 1.0,
                "attributes": dict(self.attributes)}


def parse_toxic(body: object, existing: Toxic | None = None) -> Toxic:
    """A toxic from its JSON (Toxiproxy's fields); with ``existing``, an update of that toxic's attributes."""
    if not isinstance(body, dict):
        raise FaultError(f"a toxic is a JSON object, got {_show(body)}")
    _unknown(body, _TOXIC_KEYS, "a toxic")
    kind = body.get("type", existing.type if existing else None)
    if kind not in TOXIC_TYPES:
        raise FaultError(f"toxic type must be one of {', '.join(TOXIC_TYPES)}, got {_show(kind)}")
    stream = body.get("stream", existing.stream if existing else DOWNSTREAM)
    if stream not in STREAMS:
        raise FaultError(f"stream must be upstream or downstream, got {_show(stream)}")
    if existing is not None and (kind, stream) != (existing.type, existing.stream):
        raise FaultError(f"toxic {existing.name} is {existing.type} on {existing.stream}: remove it and add another")
    toxicity = body.get("toxicity", 1)
    if toxicity != 1 or isinstance(toxicity, bool):
        raise FaultError(f"toxicity must be 1 (every connection gets the toxic), got {_show(toxicity)}")
    given = body.get("attributes", {})
    if not isinstance(given, dict):
        raise FaultError(f"attributes must be a JSON object, got {_show(given)}")
    spec = TOXIC_TYPES[kind]
    _unknown(given, tuple(spec), f"a {kind} toxic's attributes")
    old = dict(existing.attributes) if existing else {}
    attributes = []
    for key, (lo, hi, default) in spec.items():
        value = given.get(key, old.get(key, default))
        if value is None:
            raise FaultError(f"a {kind} toxic needs attributes.{key} ({lo}..{hi})")
        attributes.append((key, _int(value, f"attributes.{key}", lo, hi)))
    name = check_name(body.get("name", existing.name if existing else f"{kind}_{stream}"), "toxic name")
    return Toxic(name, kind, stream, tuple(attributes))


def parse_address(value: object, what: str, *, any_port: bool = False) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as (host, port); port 0 (the system picks) only if ``any_port``."""
    if not isinstance(value, str) or ":" not in value:
        raise FaultError(f"{what} must be host:port, got {_show(value)}")
    host, _, port_text = value.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or any(c.isspace() for c in host) or not port_text.isdigit():
        raise FaultError(f"{what} must be host:port, got {_show(value)}")
    return host, _int(int(port_text), f"{what}'s port", 0 if any_port else 1, 65535)


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class PathSpec:
    """What a path is asked to be: Toxiproxy's proxy fields, and our own bound on its connections."""

    name: str
    listen: tuple[str, int]
    upstream: tuple[str, int]
    enabled: bool = True
    max_connections: int = MAX_CONNECTIONS_PER_PATH


def parse_path(body: object) -> PathSpec:
    if not isinstance(body, dict):
        raise FaultError(f"a path is a JSON object, got {_show(body)}")
    _unknown(body, _PATH_KEYS, "a path")
    enabled = body.get("enabled", True)
    if not isinstance(enabled, bool):
        raise FaultError(f"enabled must be true or false, got {_show(enabled)}")
    return PathSpec(
        name=check_name(body.get("name"), "path name"),
        listen=parse_address(body.get("listen"), "listen", any_port=True),
        upstream=parse_address(body.get("upstream"), "upstream"),
        enabled=enabled,
        max_connections=_int(body.get("max_connections", MAX_CONNECTIONS_PER_PATH), "max_connections", 1,
                             MAX_CONNECTIONS),
    )


@dataclass(frozen=True)
class StreamFaults:
    """What one stream of every connection of a path does now."""

    blackhole: bool = False
    latency_ms: int = 0
    jitter_ms: int = 0
    rate_bps: int = 0  # bytes a second; 0: no limit

    @property
    def delays(self) -> bool:
        return bool(self.latency_ms or self.jitter_ms)


NO_FAULTS = StreamFaults()


def effective(toxics: Iterable[Toxic], stream: str) -> StreamFaults:
    """The combined effect of a path's toxics on ``stream``."""
    mine = [t for t in toxics if t.stream == stream]
    if not mine:
        return NO_FAULTS
    rates = [t.attr("rate") * 1000 for t in mine if t.type == "bandwidth"]
    return StreamFaults(
        blackhole=any(t.type == "blackhole" for t in mine),
        latency_ms=sum(t.attr("latency") for t in mine if t.type == "latency"),
        jitter_ms=sum(t.attr("jitter") for t in mine if t.type == "latency"),
        rate_bps=min(rates) if rates else 0,
    )


def due_time(now: float, faults: StreamFaults, spread: float, last_due: float) -> float:
    """When a chunk read at ``now`` may go out: its latency later, +- its jitter (``spread`` in [-1, 1]),
    never before the chunk ahead of it (a byte stream keeps its order)."""
    delay = max(0.0, (faults.latency_ms + spread * faults.jitter_ms) / 1000.0)
    return max(now + delay, last_due)


class Pacer:
    """Bandwidth pacing of one stream: when each slice may start so that the rate is never exceeded.

    A slice is at most a tenth of a second's worth of bytes (Toxiproxy's 100 ms), so a low rate trickles
    rather than stalling and then bursting.
    """

    def __init__(self) -> None:
        self.next_free = 0.0

    @staticmethod
    def slice_bytes(rate_bps: int) -> int:
        return max(1, rate_bps // 10)

    def start_of(self, now: float, nbytes: int, rate_bps: int) -> float:
        """When ``nbytes`` may start going out at ``rate_bps``; the slice after them waits for their time."""
        start = max(now, self.next_free)
        self.next_free = start + nbytes / rate_bps
        return start
