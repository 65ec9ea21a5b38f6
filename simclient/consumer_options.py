"""A simulated push consumer's settings (Java's defaults) and the ownership events it reports.

Kept apart from :mod:`simclient.consumer` so the scenario and fan-out code
can build options without the machinery behind them.
"""

from __future__ import annotations

from dataclasses import dataclass

from simclient.rebalance import MessageQueue

CONSUME_FROM_WHERE = {
    "last_offset": "CONSUME_FROM_LAST_OFFSET",
    "first_offset": "CONSUME_FROM_FIRST_OFFSET",
    "timestamp": "CONSUME_FROM_TIMESTAMP",
}
PERSIST_INITIAL_DELAY = 10.0  # MQClientInstance schedules persistAllConsumerOffset 10 s after start


@dataclass(frozen=True)
class ConsumerOptions:
    namesrv_addrs: tuple[str, ...]
    group: str
    subscriptions: tuple[tuple[str, str], ...]  # (topic, "*" or "TagA || TagB")
    consume_from: str = "last_offset"  # last_offset | first_offset | timestamp
    consume_timestamp_ms: int | None = None  # consumeTimestamp; default half an hour before start
    poll_name_server_interval: float = 30.0  # s, pollNameServerInterval
    heartbeat_broker_interval: float = 30.0  # s, heartbeatBrokerInterval
    rebalance_interval: float = 20.0  # s, rocketmq.client.rebalance.waitInterval
    rebalance_min_interval: float = 1.0  # s, rocketmq.client.rebalance.minInterval
    persist_consumer_offset_interval: float = 5.0  # s, persistConsumerOffsetInterval
    persist_initial_delay: float = PERSIST_INITIAL_DELAY
    broker_suspend_max_ms: int = 15000  # BROKER_SUSPEND_MAX_TIME_MILLIS
    consumer_timeout_when_suspend: float = 30.0  # s, CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND
    pull_batch_size: int = 32
    pull_threshold_for_queue: int = 1000
    pull_delay_on_exception: float = 3.0  # s, pullTimeDelayMillsWhenException
    consume_threads: int = 20  # consumeThreadMin/Max
    consume_delay: float = 0.0  # s per message: a slow consumer
    consume_failure_rate: float = 0.0  # share of consumptions answered RECONSUME_LATER
    max_reconsume_times: int = 16
    mq_client_api_timeout: float = 3.0
    namesrv_failover_in_call: bool = True
    unregister_on_close: bool = True

    def __post_init__(self) -> None:
        if not self.namesrv_addrs or isinstance(self.namesrv_addrs, str):
            raise ValueError("namesrv_addrs must be a non-empty tuple of host:port strings")
        if not self.group.strip():
            raise ValueError("a consumer needs a group")
        if not self.subscriptions:
            raise ValueError("a consumer needs at least one subscription")
        if self.consume_from not in CONSUME_FROM_WHERE:
            raise ValueError(f"consume_from must be one of {', '.join(CONSUME_FROM_WHERE)}")
        for name in ("poll_name_server_interval", "heartbeat_broker_interval", "rebalance_interval",
                     "rebalance_min_interval", "persist_consumer_offset_interval", "consumer_timeout_when_suspend",
                     "mq_client_api_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.pull_batch_size < 1 or self.pull_threshold_for_queue < 1 or self.consume_threads < 1:
            raise ValueError("pull_batch_size, pull_threshold_for_queue and consume_threads must be >= 1")
        if self.consume_delay < 0 or not 0 <= self.consume_failure_rate <= 1:
            raise ValueError("consume_delay must be >= 0 and consume_failure_rate in [0, 1]")
        if self.broker_suspend_max_ms < 0:
            raise ValueError("broker_suspend_max_ms must be >= 0")

    @property
    def inline(self) -> bool:
        """Consume where pulled (no delay, no failures): the cheap path thousands of consumers take."""
        return self.consume_delay == 0 and self.consume_failure_rate == 0


@dataclass(frozen=True, slots=True)
class OwnershipEvent:
    """What a consumer held and saw, over time: ``acquire``/``release`` a queue, ``queues`` (the
    topic's queues as it now sees them), ``start``, ``stop`` (graceful) and ``kill``."""

    t: float
    consumer: int
    group: str
    kind: str
    topic: str = ""
    broker: str = ""
    queue_id: int = -1
    queues: tuple[MessageQueue, ...] = ()


__all__ = ["CONSUME_FROM_WHERE", "PERSIST_INITIAL_DELAY", "ConsumerOptions", "OwnershipEvent"]
