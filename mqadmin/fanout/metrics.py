"""What one fan-out partition measured, in a form the driver can add up exactly.

Each partition (thousands of producers on one trio loop) keeps counters,
fixed-bucket latency histograms (:class:`simclient.stats.Histogram`) and
per-second counters; merging two partitions adds integers and takes
minima/maxima, so the merged figures are the same whatever the order and
grouping of the merge. Only this summary travels back to the driver as one
msgpack blob per partition, never a row per message.

Times are seconds since the run's start barrier (the wall-clock instant at
which every partition starts its load), so events of different partitions,
processes or machines line up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack

from mqadmin.fanout.consume_metrics import ConsumeMetrics
from mqadmin.output.jsonkeys import camel
from simclient.load import LoadSummary

#: Per-second counters of the whole run, in this order (their names are the report's JSON keys).
TIMELINE_FIELDS = ("ok", "failed", "routeQueries", "routeFailures")
#: Per-second counters of one broker, in this order (``routing`` is a sampled gauge: producers
#: whose route of some topic includes the broker; it adds up across partitions).
BROKER_TIMELINE_FIELDS = ("attempts", "failed", "routing")
#: Partition errors kept (a run with thousands of partitions failing the same way needs a few).
MAX_ERRORS = 20
#: Format version of the encoded blob (a driver refuses blobs it cannot read).
VERSION = 1

Timeline = dict[int, list[int]]


def _min(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _add_timeline(into: Timeline, other: Timeline, width: int) -> None:
    for sec, counts in other.items():
        row = into.get(sec)
        if row is None:
            into[sec] = list(counts)
        else:
            for i in range(width):
                row[i] += counts[i]


def bump(timeline: Timeline, sec: int, index: int, width: int, n: int = 1) -> None:
    """Add ``n`` to counter ``index`` of second ``sec``."""
    row = timeline.get(sec)
    if row is None:
        row = timeline[sec] = [0] * width
    row[index] += n


def _timeline_obj(timeline: Timeline) -> list[list[int]]:
    return [[sec, *counts] for sec, counts in sorted(timeline.items())]


def _timeline_from(rows: list[list[int]], width: int) -> Timeline:
    out: Timeline = {}
    for row in rows:
        if len(row) != width + 1:
            raise ValueError(f"timeline row of {len(row)} values, expected {width + 1}")
        out[int(row[0])] = [int(v) for v in row[1:]]
    return out


@dataclass(slots=True)
class BrokerUse:
    """How the producers used one broker (by name): every send attempt, not only the last of a send.

    ``failed`` attempts got no answer (connection refused or lost, timeout);
    ``refused`` ones were answered with a code that does not mean "stored".
    ``routing`` is how many producers still had the broker in a route at the
    end, ``last_routed`` the last sample at which any did.
    """

    addrs: list[str] = field(default_factory=list)
    attempts: int = 0
    failed: int = 0
    refused: int = 0
    stored: int = 0
    first_attempt: float | None = None
    last_attempt: float | None = None
    first_failure: float | None = None
    last_failure: float | None = None
    last_stored: float | None = None
    routing: int = 0
    last_routed: float | None = None
    timeline: Timeline = field(default_factory=dict)

    def attempt(self, t: float, *, failed: bool = False, refused: bool = False) -> None:
        self.attempts += 1
        self.first_attempt = _min(self.first_attempt, t)
        self.last_attempt = _max(self.last_attempt, t)
        sec = max(0, int(t))
        bump(self.timeline, sec, 0, 3)
        if failed or refused:
            if failed:
                self.failed += 1
            else:
                self.refused += 1
            self.first_failure = _min(self.first_failure, t)
            self.last_failure = _max(self.last_failure, t)
            bump(self.timeline, sec, 1, 3)

    def merge(self, other: BrokerUse) -> None:
        self.addrs = sorted(set(self.addrs) | set(other.addrs))
        self.attempts += other.attempts
        self.failed += other.failed
        self.refused += other.refused
        self.stored += other.stored
        self.first_attempt = _min(self.first_attempt, other.first_attempt)
        self.last_attempt = _max(self.last_attempt, other.last_attempt)
        self.first_failure = _min(self.first_failure, other.first_failure)
        self.last_failure = _max(self.last_failure, other.last_failure)
        self.last_stored = _max(self.last_stored, other.last_stored)
        self.routing += other.routing
        self.last_routed = _max(self.last_routed, other.last_routed)
        _add_timeline(self.timeline, other.timeline, 3)

    def to_obj(self) -> dict[str, Any]:
        return {
            "addrs": list(self.addrs), "attempts": self.attempts, "failed": self.failed, "refused": self.refused,
            "stored": self.stored, "first_attempt": self.first_attempt, "last_attempt": self.last_attempt,
            "first_failure": self.first_failure, "last_failure": self.last_failure, "last_stored": self.last_stored,
            "routing": self.routing, "last_routed": self.last_routed, "timeline": _timeline_obj(self.timeline),
        }

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> BrokerUse:
        opt = lambda k: None if obj.get(k) is None else float(obj[k])
        return cls(
            addrs=[str(a) for a in obj.get("addrs", [])], attempts=int(obj.get("attempts", 0)),
            failed=int(obj.get("failed", 0)), refused=int(obj.get("refused", 0)), stored=int(obj.get("stored", 0)),
            first_attempt=opt("first_attempt"), last_attempt=opt("last_attempt"), first_failure=opt("first_failure"),
            last_failure=opt("last_failure"), last_stored=opt("last_stored"), routing=int(obj.get("routing", 0)),
            last_routed=opt("last_routed"), timeline=_timeline_from(obj.get("timeline", []), 3),
        )


@dataclass(slots=True)
class PartInfo:
    """One partition's own facts: where its time and resources went (kept per partition, not summed)."""

    index: int
    producers: int = 0
    entered: float = 0.0  # when the task began running (s since the start barrier; negative = early)
    started: float = 0.0  # when its load began
    ended: float = 0.0  # when its load and clean-up ended
    cpu_s: float = 0.0  # CPU time of the worker process during the task
    max_rss_mb: float = 0.0
    max_fds: int = 0
    connects: int = 0  # connection attempts of the shared pool (one per server, again after one breaks)
    connect_failures: int = 0  # of which failed (e.g. re-dials of a killed broker)
    host: str = ""
    pid: int = 0
    error: str | None = None

    def to_obj(self) -> dict[str, Any]:
        return {
            "index": self.index, "producers": self.producers, "entered": self.entered, "started": self.started,
            "ended": self.ended, "cpu_s": self.cpu_s, "max_rss_mb": self.max_rss_mb, "max_fds": self.max_fds,
            "connects": self.connects, "connect_failures": self.connect_failures, "host": self.host, "pid": self.pid,
            "error": self.error,
        }

    def to_json(self) -> dict[str, Any]:
        """The report's ``partitions`` entry: ``to_obj`` (what travels back to the driver) with camelCase keys."""
        return {"cpuSeconds" if k == "cpu_s" else camel(k): v for k, v in self.to_obj().items()}

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> PartInfo:
        return cls(
            index=int(obj["index"]), producers=int(obj.get("producers", 0)), entered=float(obj.get("entered", 0.0)),
            started=float(obj.get("started", 0.0)), ended=float(obj.get("ended", 0.0)),
            cpu_s=float(obj.get("cpu_s", 0.0)), max_rss_mb=float(obj.get("max_rss_mb", 0.0)),
            max_fds=int(obj.get("max_fds", 0)), connects=int(obj.get("connects", 0)),
            connect_failures=int(obj.get("connect_failures", 0)), host=str(obj.get("host", "")),
            pid=int(obj.get("pid", 0)), error=None if obj.get("error") is None else str(obj["error"]),
        )


@dataclass
class FanoutMetrics:
    """Everything measured by one or more partitions; ``merge`` adds another one in."""

    load: LoadSummary = field(default_factory=LoadSummary)
    brokers: dict[str, BrokerUse] = field(default_factory=dict)
    timeline: Timeline = field(default_factory=dict)
    parts: list[PartInfo] = field(default_factory=list)
    consume: ConsumeMetrics | None = None  # when the run had consumers

    @property
    def partitions(self) -> int:
        return len(self.parts)

    @property
    def producers(self) -> int:
        return self.load.producers

    @property
    def errors(self) -> list[str]:
        return [f"partition {p.index}: {p.error}" for p in self.parts if p.error][:MAX_ERRORS]

    @property
    def started(self) -> float | None:
        """When the first partition's load began (s since the start barrier)."""
        ok = [p.started for p in self.parts if p.error is None and p.producers]
        return min(ok) if ok else None

    @property
    def ended(self) -> float | None:
        ok = [p.ended for p in self.parts if p.error is None and p.producers]
        return max(ok) if ok else None

    def broker(self, name: str) -> BrokerUse:
        use = self.brokers.get(name)
        if use is None:
            use = self.brokers[name] = BrokerUse()
        return use

    def merge(self, other: FanoutMetrics) -> None:
        self.load.merge(other.load)
        for name, use in other.brokers.items():
            self.broker(name).merge(use)
        _add_timeline(self.timeline, other.timeline, len(TIMELINE_FIELDS))
        self.parts = sorted([*self.parts, *other.parts], key=lambda p: p.index)
        if other.consume is not None:
            if self.consume is None:
                self.consume = ConsumeMetrics()
            self.consume.merge(other.consume)

    def to_obj(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "load": self.load.to_obj(),
            "brokers": {name: use.to_obj() for name, use in sorted(self.brokers.items())},
            "timeline": _timeline_obj(self.timeline),
            "parts": [p.to_obj() for p in self.parts],
            **({"consume": self.consume.to_obj()} if self.consume is not None else {}),
        }

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> FanoutMetrics:
        if obj.get("version") != VERSION:
            raise ValueError(f"fan-out metrics of version {obj.get('version')!r}, this driver reads {VERSION}")
        return cls(
            load=LoadSummary.from_obj(obj.get("load", {})),
            brokers={str(k): BrokerUse.from_obj(v) for k, v in obj.get("brokers", {}).items()},
            timeline=_timeline_from(obj.get("timeline", []), len(TIMELINE_FIELDS)),
            parts=[PartInfo.from_obj(p) for p in obj.get("parts", [])],
            consume=ConsumeMetrics.from_obj(obj["consume"]) if obj.get("consume") is not None else None,
        )

    def encode(self) -> bytes:
        """The compact blob a partition sends back (msgpack)."""
        return msgpack.packb(self.to_obj(), use_bin_type=True)

    @classmethod
    def decode(cls, blob: bytes) -> FanoutMetrics:
        try:
            return cls.from_obj(msgpack.unpackb(blob, raw=False))
        except (AttributeError, KeyError, TypeError, ValueError, msgpack.UnpackException) as exc:
            raise ValueError(f"unreadable fan-out metrics blob: {exc}") from None


def merge_blobs(blobs: list[bytes]) -> FanoutMetrics:
    """The driver's side: decode every partition's blob and add them up."""
    total = FanoutMetrics()
    for blob in blobs:
        total.merge(FanoutMetrics.decode(blob))
    return total
