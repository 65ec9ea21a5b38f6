"""The NameServer's metrics, as Prometheus scrapes them from ``/metrics`` (see docs/metrics.md).

Names follow rocketmq-rust's ``rocketmq_namesrv_*`` instruments where one
fits (``requests_total``, ``request_handler_latency``, ``active_brokers``,
``active_connections``, ``registration_events_total``,
``route_cache_events_total``, ``connection_events_total``), with the units
Prometheus asks for (seconds, bytes). Every family is built at scrape time
from counters the server already keeps (:class:`namesrv.counters.NamesrvCounters`,
:class:`server_runtime.metering.RequestMeter`, the reactor's totals, the table's
sizes): nothing here runs per request, and nothing walks the topics, so a
scrape costs the same with 100 topics or 100,000. No family has a per-topic
or per-broker label.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from namesrv.counters import REGISTRATION_RESULTS, NamesrvCounters
from namesrv.kvconfig import KVConfig
from namesrv.route_state import Restored
from namesrv.routes import RouteTable
from namesrv.snapshot import RouteSnapshots
from remoting.codes import RequestCode
from server_runtime.metering import RequestMeter
from server_runtime.metrics_families import registry_of, server_families
from server_runtime.reactor import Reactor

PREFIX = "rocketmq_namesrv"


class NamesrvMetrics:
    """What a scrape reads: the server's parts, handed over once at start."""

    def __init__(
        self,
        *,
        table: RouteTable,
        kv: KVConfig,
        counters: NamesrvCounters,
        meter: RequestMeter,
        reactor: Reactor,
        snapshots: RouteSnapshots,
        restored: Callable[[], Restored | None],
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.table = table
        self.kv = kv
        self.counters = counters
        self.meter = meter
        self.reactor = reactor
        self.snapshots = snapshots
        self.restored = restored
        self.wall = wall

    def registry(self) -> CollectorRegistry:
        return registry_of(self.families)

    def families(self) -> Iterator[Metric]:
        yield from server_families(PREFIX, "NameServer", {}, self.meter, self.reactor)
        yield from self._routing()
        yield from self._registrations()
        yield from self._stores()
        limits = CounterMetricFamily(f"{PREFIX}_limit_refusals",
                                     "Requests (and connections) refused because a configured bound was reached.",
                                     labels=("limit",))
        refusals = dict(self.counters.refusals)
        refusals["connections"] += self.reactor.acceptor.refused
        refusals["frame_size"] += self.reactor.oversize_frames
        for limit, count in refusals.items():
            limits.add_metric((limit,), count)
        yield limits

    def _routing(self) -> Iterator[Metric]:
        table = self.table
        restored = self.restored()
        yield GaugeMetricFamily(f"{PREFIX}_active_brokers", "Brokers in the live table (restored ones included).",
                                value=len(table.live))
        yield GaugeMetricFamily(f"{PREFIX}_restored_brokers",
                                "Brokers the start restored from the route snapshot (0 after a cold start).",
                                value=restored.brokers if restored is not None else 0)
        yield GaugeMetricFamily(f"{PREFIX}_provisional_brokers",
                                "Restored brokers that have not registered again since the start.",
                                value=len(restored.provisional(table)) if restored is not None else 0)
        yield GaugeMetricFamily(f"{PREFIX}_clusters", "Clusters with at least one broker.", value=len(table.clusters))
        yield GaugeMetricFamily(f"{PREFIX}_topics", "Topics with a route.", value=len(table.topic_queues))
        routes_ok = self.meter.count(RequestCode.GET_ROUTEINFO_BY_TOPIC, "success")
        encoded = table.answers.encodes
        cache = CounterMetricFamily(f"{PREFIX}_route_cache_events",
                                    "Route answers served from the encoded-route cache (hit) or encoded afresh.",
                                    labels=("result",))
        cache.add_metric(("hit",), max(0, routes_ok - encoded))
        cache.add_metric(("encoded",), encoded)
        yield cache

    def _registrations(self) -> Iterator[Metric]:
        counters = self.counters
        events = CounterMetricFamily(f"{PREFIX}_registration_events", "REGISTER_BROKER requests by outcome.",
                                     labels=("result",))
        by_result = dict(counters.registrations)
        by_result["refused_auth"] = self.meter.count(RequestCode.REGISTER_BROKER, "no_permission")
        for result in REGISTRATION_RESULTS:
            events.add_metric((result,), by_result[result])
        yield events
        durations = HistogramMetricFamily(f"{PREFIX}_registration_duration_seconds",
                                          "REGISTER_BROKER handling time (waiting for the table included), by outcome.",
                                          labels=("result",))
        for result, histogram in counters.registration_seconds.items():
            if any(histogram.counts):
                durations.add_metric((result,), histogram.cumulative(), histogram.total)
        yield durations
        removed = CounterMetricFamily(f"{PREFIX}_brokers_removed", "Brokers dropped from the live table, by reason.",
                                      labels=("reason",))
        for reason, count in counters.removals.items():
            removed.add_metric((reason,), count)
        yield removed

    def _stores(self) -> Iterator[Metric]:
        meter = self.meter
        yield GaugeMetricFamily(f"{PREFIX}_kv_entries", "Keys in the KV config, all namespaces.", value=self.kv.entries)
        kv = CounterMetricFamily(f"{PREFIX}_kv_writes", "PUT_KV_CONFIG and DELETE_KV_CONFIG requests, by result.",
                                 labels=("operation", "result"))
        for operation, code in (("put", RequestCode.PUT_KV_CONFIG), ("delete", RequestCode.DELETE_KV_CONFIG)):
            results = meter.codes[code].by_result()
            ok = results.pop("success", 0)
            kv.add_metric((operation, "success"), ok)
            kv.add_metric((operation, "refused"), sum(results.values()))
        yield kv
        results = meter.codes[RequestCode.UPDATE_NAMESRV_CONFIG].by_result()
        accepted = results.pop("success", 0)
        updates = CounterMetricFamily(f"{PREFIX}_config_updates", "UPDATE_NAMESRV_CONFIG requests, by result.",
                                      labels=("result",))
        updates.add_metric(("accepted",), accepted)
        updates.add_metric(("refused",), sum(results.values()))
        yield updates
        snapshots = self.snapshots
        writes = CounterMetricFamily(f"{PREFIX}_snapshot_writes", "Route snapshot writes, by result.",
                                     labels=("result",))
        writes.add_metric(("success",), snapshots.writes)
        writes.add_metric(("failed",), snapshots.failed_writes)
        yield writes
        age = GaugeMetricFamily(f"{PREFIX}_snapshot_age_seconds",
                                "Seconds since the route snapshot file was last made current (no sample before the first).")
        if snapshots.current_at is not None:
            age.add_metric((), max(0.0, self.wall() - snapshots.current_at))
        yield age
        yield GaugeMetricFamily(f"{PREFIX}_snapshot_size_bytes", "Size of the last route snapshot written.",
                                value=snapshots.size)
