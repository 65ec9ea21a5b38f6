"""The broker stub's metrics, as Prometheus scrapes them from ``/metrics`` (see docs/metrics.md).

Message traffic uses Apache RocketMQ 5's broker names
(``rocketmq_messages_in_total``, ``rocketmq_messages_out_total``,
``rocketmq_throughput_in_total``, ``rocketmq_throughput_out_total``), with a
``topic`` label bounded to the busiest ``metricsTopTopics`` topics plus
``other`` (:mod:`broker_stub.topic_traffic`). Everything else is the stub's
own, under ``rocketmq_broker_stub_``.

What grows with the topics (the busiest-topic ranking, the offsets summed
over every queue, the client counts) is computed before each scrape in a
worker thread over copies taken on the loop (:meth:`StubMetrics.prepare`),
so a scrape holds the loop for the copies only; rendering then reads the
results.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker_stub.clients import Client, ClientTable
from broker_stub.config import BrokerConfig
from broker_stub.faults import Faults
from broker_stub.registrar import Registrar
from broker_stub.sending import Sender
from broker_stub.store import MessageStore
from broker_stub.store_queues import StoredQueue
from broker_stub.topic_traffic import BYTES_IN, BYTES_OUT, MSGS_IN, MSGS_OUT, TopicTraffic
from broker_stub.topics import TopicTable
from server_runtime.metering import RequestMeter
from server_runtime.metrics_families import registry_of, server_families
from server_runtime.reactor import Reactor

PREFIX = "rocketmq_broker_stub"


@dataclass
class _Prepared:
    """What the worker thread computed for the next render."""

    ranked: list[str] = field(default_factory=list)
    min_offsets: int = 0
    max_offsets: int = 0
    queues: int = 0
    producers: int = 0
    consumers: int = 0


def _sums(queues: list[StoredQueue], clients: list[Client], traffic: TopicTraffic, now: float,
          topics: list) -> _Prepared:  # type: ignore[type-arg]
    """O(queues + clients + topics), in a worker thread: reads numbers the loop may be changing meanwhile,
    which at worst makes a figure one message old."""
    out = _Prepared(ranked=traffic.ranking(now, topics), queues=len(queues))
    for queue in queues:
        out.min_offsets += queue.min_offset
        out.max_offsets += max(queue.visible, queue.min_offset)
    for client in clients:
        out.producers += bool(client.producer_groups)
        out.consumers += bool(client.consumer_groups)
    return out


class StubMetrics:
    def __init__(
        self,
        *,
        config: BrokerConfig,
        topics: TopicTable,
        store: MessageStore,
        traffic: TopicTraffic,
        sending: Sender,
        faults: Faults,
        clients: ClientTable,
        registrar: Registrar,
        meter: RequestMeter,
        reactor: Reactor,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        self.traffic = traffic
        self.sending = sending
        self.faults = faults
        self.clients = clients
        self.registrar = registrar
        self.meter = meter
        self.reactor = reactor
        self.clock = clock
        self.prepared = _Prepared()

    def registry(self) -> CollectorRegistry:
        return registry_of(self.families)

    async def prepare(self) -> None:
        """Copy on the loop, count in a worker thread (see the module doc)."""
        queues = self.store.queues()
        clients = list(self.clients.clients.values())
        topics = self.traffic.snapshot()
        self.prepared = await trio.to_thread.run_sync(_sums, queues, clients, self.traffic, self.clock(), topics)

    def families(self) -> Iterator[Metric]:
        config = self.config
        identity = {"cluster": config.brokerClusterName, "broker_name": config.brokerName,
                    "broker_id": str(config.brokerId)}
        yield from server_families(PREFIX, "broker stub", identity, self.meter, self.reactor)
        yield from self._messages()
        yield from self._store()
        yield from self._clients_and_faults()
        registrations = CounterMetricFamily(f"{PREFIX}_registrations",
                                            "REGISTER_BROKER requests sent, by NameServer and outcome.",
                                            labels=("namesrv", "result"))
        for (namesrv, result), count in sorted(self.registrar.outcomes.items()):
            registrations.add_metric((namesrv, result), count)
        yield registrations

    def _messages(self) -> Iterator[Metric]:
        help_tail = f"by topic (the {self.config.metricsTopTopics} busiest, the rest as topic=\"other\")"
        families = [
            (CounterMetricFamily("rocketmq_messages_in", f"Messages stored, {help_tail}.", labels=("topic",)), MSGS_IN),
            (CounterMetricFamily("rocketmq_throughput_in", f"Message bytes stored, {help_tail}.", labels=("topic",)),
             BYTES_IN),
            (CounterMetricFamily("rocketmq_messages_out", f"Messages pulled by consumers, {help_tail}.",
                                 labels=("topic",)), MSGS_OUT),
            (CounterMetricFamily("rocketmq_throughput_out", f"Message bytes pulled by consumers, {help_tail}.",
                                 labels=("topic",)), BYTES_OUT),
        ]
        for topic, counts in self.traffic.series(self.prepared.ranked):
            for family, at in families:
                family.add_metric((topic,), counts[at])
        for family, _ in families:
            yield family
        refusals = CounterMetricFamily(f"{PREFIX}_send_refusals", "Sends refused, by reason.", labels=("reason",))
        for reason, count in self.sending.refusals.items():
            refusals.add_metric((reason,), count)
        yield refusals

    def _store(self) -> Iterator[Metric]:
        prepared = self.prepared
        yield GaugeMetricFamily(f"{PREFIX}_topics", "Topics in the topic table.", value=len(self.topics))
        yield GaugeMetricFamily(f"{PREFIX}_store_bytes",
                                "Bytes the message store holds (records and their bookkeeping; maxStoreBytes bounds it).",
                                value=self.store.budget.used)
        yield GaugeMetricFamily(f"{PREFIX}_store_queues", "Queues that hold or held messages.", value=prepared.queues)
        yield GaugeMetricFamily(f"{PREFIX}_store_min_offsets", "The queues' min offsets, summed.",
                                value=prepared.min_offsets)
        yield GaugeMetricFamily(f"{PREFIX}_store_max_offsets", "The queues' max offsets, summed.",
                                value=prepared.max_offsets)

    def _clients_and_faults(self) -> Iterator[Metric]:
        prepared = self.prepared
        yield GaugeMetricFamily(f"{PREFIX}_consumer_groups", "Consumer groups with a consumer online.",
                                value=len(self.clients.groups))
        clients = GaugeMetricFamily(f"{PREFIX}_clients", "Clients known from their heartbeats, by role.",
                                    labels=("role",))
        clients.add_metric(("producer",), prepared.producers)
        clients.add_metric(("consumer",), prepared.consumers)
        yield clients
        faults = self.faults
        active = GaugeMetricFamily(f"{PREFIX}_faults_active",
                                   "Faults switched on (9000): 1 or 0; partition counts the NameServers cut off.",
                                   labels=("fault",))
        active.add_metric(("hang",), int(faults.hung))
        active.add_metric(("reject",), int(faults.reject_code is not None))
        active.add_metric(("latency",), int(bool(faults.send_latency_ms)))
        active.add_metric(("partition",), len(faults.partitioned))
        yield active
