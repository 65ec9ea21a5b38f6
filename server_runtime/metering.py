"""Requests counted by code and result, and their handling time by access class.

A :class:`RequestMeter` sits between a server's reactor and its access
gate (it is a :class:`server_runtime.reactor.Processor` itself), so it sees every
request the server answers, refusals included. It keeps plain counters, no
``prometheus_client`` objects: the servers' metrics collectors read them
when Prometheus scrapes. Why not a ``prometheus_client`` Counter and
Histogram per request: their ``inc``/``observe`` take a lock and walk the
buckets, about 1.5 µs a request, and the NameServer spends about 20 µs on
a route query in all; issue 21 allows metrics 3 % of that.

So the hot classes (:data:`SAMPLED_CLASSES`: route queries on the
NameServer, sends and pulls on the broker) are counted exactly but timed
one request in :data:`SAMPLE_EVERY`: a clock read costs about as much as
the rest of the meter together. Every request of the other classes
(registrations, heartbeats, admin requests), and every request that
awaits, is timed. A histogram's ``_count`` is therefore the requests
timed, not the requests served (``requests_total`` has those); its
distribution, average and quantiles are the class's.

Every label is bounded: the request code is one of the server's request
class table (anything else counts as ``other``), the result is the name of
one of :class:`remoting.codes.ResponseCode` (``other`` for any other code,
``no_answer`` for a oneway request or an answer sent later), and the
latency histogram is per access class, so a peer sending made-up codes or a
fault switchboard answering odd codes adds no series.

The result is read from the encoded answer (the reactor hands back bytes):
in a JSON header the code is the first field, ``{"code":0,...``, so a
success is one byte compare; anything else is parsed from the header.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections.abc import Hashable, Mapping
from time import perf_counter

from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.request_class import RequestClass
from server_runtime.reactor import Processor

#: Upper bounds (seconds) of the latency histogram's buckets: 10 µs to 10 s.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)
#: The result label of each response code this project knows; any other code is ``other``.
RESULT_NAMES: dict[int, str] = {int(c): c.name.lower() for c in ResponseCode}
OTHER = "other"
NO_ANSWER = "no_answer"
#: Every result label there can be.
RESULTS: tuple[str, ...] = (*RESULT_NAMES.values(), OTHER, NO_ANSWER)
#: The class label of codes outside the request class table.
UNKNOWN_CLASS = "unknown"
#: Classes whose requests are timed one in SAMPLE_EVERY (a power of two).
SAMPLED_CLASSES = frozenset({RequestClass.ROUTE_READ, RequestClass.CLIENT})
SAMPLE_EVERY = 16

_JSON_CODE_PREFIX = b'{"code":'
_SHORT = struct.Struct(">h")
_ZERO = 48  # b"0"


def response_code(answer: bytes) -> int | None:
    """The response code of one encoded frame (None if the header cannot be read)."""
    if len(answer) < 10:
        return None
    if answer[4] == 1:  # ROCKETMQ binary header: the code is its first 16 bits
        return int(_SHORT.unpack_from(answer, 8)[0])
    if answer[8:16] != _JSON_CODE_PREFIX:
        return None
    end = 16
    while end < len(answer) and end < 28 and answer[end] in b"-0123456789":
        end += 1
    try:
        return int(answer[16:end])
    except ValueError:
        return None


def result_of(answer: bytes | None) -> str:
    """The result label of an answer."""
    if answer is None:
        return NO_ANSWER
    code = response_code(answer)
    return OTHER if code is None else RESULT_NAMES.get(code, OTHER)


class LatencyHistogram:
    """Counts per bucket of :data:`LATENCY_BUCKETS` (the last one is +Inf) and the sum, in seconds."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.total += seconds

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, cumulative count) pairs as Prometheus wants them, +Inf last."""
        out, running = [], 0
        for bound, count in zip((*map(repr, LATENCY_BUCKETS), "+Inf"), self.counts):
            running += count
            out.append((bound, running))
        return out


class CodeCounts:
    """One request code's answers: successes, and the other results by name."""

    __slots__ = ("code", "histogram", "klass", "mask", "ok", "results", "seen")

    def __init__(self, code: str, klass: str, histogram: LatencyHistogram, sampled: bool = False) -> None:
        self.code = code
        self.klass = klass
        self.histogram = histogram
        self.ok = 0
        self.results: dict[str, int] = {}
        self.seen = 0  # requests handled (sync ones): which one is timed next
        self.mask = SAMPLE_EVERY - 1 if sampled else 0  # seen & mask == 0: time this one

    def note(self, answer: bytes | None) -> None:
        """Count an answer that is not a plain JSON success (the slow path)."""
        result = result_of(answer)
        if result == "success":
            self.ok += 1
        else:
            self.results[result] = self.results.get(result, 0) + 1

    def by_result(self) -> dict[str, int]:
        out = dict(self.results)
        if self.ok:
            out["success"] = self.ok
        return out


class RequestMeter:
    """A :class:`server_runtime.reactor.Processor` that counts what ``inner`` answers (see the module doc)."""

    def __init__(self, inner: Processor, classes: Mapping[int, RequestClass]) -> None:
        self.inner = inner
        self._inner_handle = inner.handle
        self.histograms: dict[str, LatencyHistogram] = {c.value: LatencyHistogram() for c in RequestClass}
        self.histograms[UNKNOWN_CLASS] = LatencyHistogram()
        self.codes: dict[int, CodeCounts] = {
            code: CodeCounts(str(code), klass.value, self.histograms[klass.value], klass in SAMPLED_CLASSES)
            for code, klass in classes.items()
        }
        self.other = CodeCounts(OTHER, UNKNOWN_CLASS, self.histograms[UNKNOWN_CLASS])

    @property
    def async_codes(self) -> frozenset[int]:
        return self.inner.async_codes  # type: ignore[return-value]  # the gate's may be a container

    def handle(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        counts = self.codes.get(req.code) or self.other
        counts.seen += 1
        if counts.seen & counts.mask:  # not timed (see the module doc)
            answer = self._inner_handle(req, conn)
        else:
            started = perf_counter()
            answer = self._inner_handle(req, conn)
            counts.histogram.observe(perf_counter() - started)
        try:
            if answer[16] == _ZERO and answer[4] == 0:  # type: ignore[index]  # {"code":0,... (see module doc)
                counts.ok += 1
                return answer
        except (TypeError, IndexError):  # no answer, or a frame too short to hold a header
            pass
        counts.note(answer)
        return answer

    async def handle_async(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        started = perf_counter()
        answer = await self.inner.handle_async(req, conn)
        counts = self.codes.get(req.code) or self.other
        counts.histogram.observe(perf_counter() - started)
        counts.note(answer)
        return answer

    def count(self, code: int, result: str) -> int:
        """Requests of ``code`` answered with ``result`` so far."""
        counts = self.codes.get(code)
        if counts is None:
            return 0
        return counts.ok if result == "success" else counts.results.get(result, 0)

    def all_counts(self) -> list[CodeCounts]:
        return [*self.codes.values(), self.other]
