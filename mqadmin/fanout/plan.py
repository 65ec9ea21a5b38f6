"""The plan of a fan-out run: what every partition needs to know, shipped with each task.

Its own module because the partition's producers (:mod:`mqadmin.fanout.partition`) and its
consumers (:mod:`mqadmin.fanout.consume`) both read it, and the drivers (runner, Spark,
multiprocessing) make it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mqadmin.client.security import UNSIGNED, ClientSecurity
from simclient.load import LoadSpec
from simclient.producer_options import ProducerOptions


@dataclass(frozen=True)
class FanoutPlan:
    """What every partition needs to know (small and picklable: it is shipped with each task)."""

    namesrv_addrs: tuple[str, ...]
    topics: tuple[str, ...]
    producers: int
    partitions: int
    rate: float = 1.0  # sends/s per producer, 0 = closed loop
    duration: float | None = 20.0
    messages_per_producer: int | None = None
    message_size: int = 256
    poll_interval: float = 30.0
    send_timeout: float = 3.0
    retries: int = 2
    latency_fault: bool = False
    ramp_up: float = 0.0
    max_duration: float = 600.0
    group: str = "fanout_producer_group"
    start_wall: float = 0.0  # epoch seconds at which every partition starts its load
    sample_interval: float = 1.0
    # simulated push consumers in the same partitions (mqadmin.fanout.consume)
    consumers: int = 0
    consumer_groups: int = 1
    drain: float = 5.0  # s consumers keep consuming after the load ends
    consumer_heartbeat_interval: float = 30.0  # heartbeatBrokerInterval
    rebalance_interval: float = 20.0
    persist_interval: float = 5.0  # persistConsumerOffsetInterval
    security: ClientSecurity = UNSIGNED  # every producer's and consumer's requests are signed with its keys

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise ValueError("partitions must be >= 1")
        if self.producers < 1:
            raise ValueError("producers must be >= 1")
        if self.consumers < 0 or not 1 <= self.consumer_groups <= max(1, self.consumers):
            raise ValueError("consumers must be >= 0 and consumer_groups 1..consumers")
        if self.sample_interval <= 0:
            raise ValueError("sample_interval must be positive")

    def share(self, index: int) -> tuple[int, int]:
        """(first producer id, producer count) of partition ``index``: counts differ by at most one."""
        base, extra = divmod(self.producers, self.partitions)
        first = index * base + min(index, extra)
        return first, base + (1 if index < extra else 0)

    def starting_at(self, start_wall: float) -> FanoutPlan:
        return replace(self, start_wall=start_wall)

    @property
    def time_limit(self) -> float:
        """Longest the load itself may run (s), whatever the counts say."""
        return self.duration if self.duration is not None else self.max_duration

    def load_spec(self, count: int) -> LoadSpec:
        return LoadSpec(
            producers=count, topics=self.topics, rate_per_producer=self.rate, message_size=self.message_size,
            duration=self.duration, messages_per_producer=self.messages_per_producer, ramp_up=self.ramp_up,
            max_duration=self.max_duration,
        )

    def producer_options(self) -> ProducerOptions:
        return ProducerOptions(
            namesrv_addrs=self.namesrv_addrs, group=self.group, poll_name_server_interval=self.poll_interval,
            send_timeout=self.send_timeout, retry_times_when_send_failed=self.retries,
            send_latency_fault_enable=self.latency_fault,
        )
