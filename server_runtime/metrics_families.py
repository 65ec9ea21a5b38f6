"""The metric families both servers expose the same way: requests, latency, connections, bytes.

Each server's collector (``namesrv.metrics``, ``broker_stub.metrics``) adds
these under its own prefix. They read :class:`server_runtime.metering.RequestMeter`
and the reactor's totals; building them is a few hundred small objects, not
a walk over anything a client can grow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from importlib import metadata

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from server_runtime.metering import RequestMeter
from server_runtime.reactor import Reactor

#: The package version every ``*_up`` metric carries.
PACKAGE = "rocketmq-namesrv-toolkit"


def package_version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "unknown"


class FunctionCollector(Collector):
    """A collector whose families come from a function called at each scrape."""

    def __init__(self, families: Callable[[], Iterable[Metric]]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return list(self.families())


def registry_of(families: Callable[[], Iterable[Metric]]) -> CollectorRegistry:
    """A registry with the server's families and the standard ``process_*`` ones (memory, CPU, descriptors)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FunctionCollector(families))
    ProcessCollector(registry=registry)
    return registry


def server_families(prefix: str, what: str, identity: dict[str, str], meter: RequestMeter,
                    reactor: Reactor) -> Iterator[Metric]:
    """What every server starts its scrape with: ``<prefix>_up`` (1, with the version and ``identity`` as
    labels), then the request and traffic families."""
    labels = {"version": package_version(), **identity}
    up = GaugeMetricFamily(f"{prefix}_up", f"1 while the {what} serves; its version (and identity) are labels.",
                           labels=tuple(labels))
    up.add_metric(tuple(labels.values()), 1)
    yield up
    yield from request_families(prefix, meter)
    yield from traffic_families(prefix, reactor)


def request_families(prefix: str, meter: RequestMeter) -> Iterator[Metric]:
    """``<prefix>_requests_total{code,class,result}`` and ``<prefix>_request_handler_latency_seconds{class}``."""
    requests = CounterMetricFamily(
        f"{prefix}_requests", "Requests answered, by request code, its access class and the response's result.",
        labels=("code", "class", "result"),
    )
    for counts in meter.all_counts():
        for result, value in counts.by_result().items():
            requests.add_metric((counts.code, counts.klass, result), value)
    yield requests
    latency = HistogramMetricFamily(
        f"{prefix}_request_handler_latency_seconds",
        "Time from a decoded request to its encoded answer (awaits included), by access class.",
        labels=("class",),
    )
    for klass, histogram in meter.histograms.items():
        if any(histogram.counts):  # a class with no requests yet has no series
            latency.add_metric((klass,), histogram.cumulative(), histogram.total)
    yield latency


def traffic_families(prefix: str, reactor: Reactor) -> Iterator[Metric]:
    """Connections open and accepted, bytes in and out, frames that closed their connection."""
    yield GaugeMetricFamily(f"{prefix}_active_connections", "Client connections open now.",
                            value=len(reactor.connections))
    accepted = reactor.acceptor.accepted
    events = CounterMetricFamily(f"{prefix}_connection_events", "Connections accepted and closed since start.",
                                 labels=("event",))
    events.add_metric(("accepted",), accepted)
    events.add_metric(("closed",), max(0, accepted - len(reactor.connections)))
    yield events
    yield CounterMetricFamily(f"{prefix}_bytes_received", "Bytes read from client connections.",
                              value=reactor.bytes_in)
    yield CounterMetricFamily(f"{prefix}_bytes_sent", "Bytes written to client connections.",
                              value=reactor.bytes_out)
    yield CounterMetricFamily(f"{prefix}_malformed_frames",
                              "Connections closed because a frame could not be decoded (or was over frameMaxLength).",
                              value=reactor.malformed_frames)
