"""What ``mqadmin fanout`` can be told, and the checks made before anything starts.

Kept apart from the driver: the CLI validates these first (a bad value is a
usage error, exit 2) without importing the engines, and the driver trusts them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from mqadmin.client.addresses import split_addrs
from mqadmin.client.errors import AdminError
from mqadmin.client.security import UNSIGNED, ClientSecurity
from mqadmin.fanout import FanoutUsageError

ENGINES = ("spark", "multiprocessing")


@dataclass
class FanoutOptions:
    """Everything ``mqadmin fanout`` can be told (None: the default, or the scenario's value)."""

    producers: int = 1000
    topics: int = 4
    topic_prefix: str = "FanoutTopic"
    rate: float | None = None  # sends/s per producer; default 1.0
    duration: float | None = None  # default 20 s unless messages_per_producer is given
    messages_per_producer: int | None = None
    message_size: int | None = None  # default 256 bytes
    namesrv: str | None = None
    start: bool = False
    cluster_dir: Path | None = None
    scenario: Path | None = None
    master: str = "local[*]"
    partitions: int | None = None
    engine: str = "spark"
    workers: int | None = None  # multiprocessing: processes (default: CPU count)
    poll_interval: float | None = None  # default 30 s (pollNameServerInterval)
    send_timeout: float | None = None  # default 3 s
    retries: int | None = None  # default 2
    latency_fault: bool | None = None  # default False (5.x)
    ramp_up: float | None = None  # default: one send interval (producers are not in lock-step)
    start_delay: float = 2.0
    kills: tuple[tuple[str, float], ...] = ()
    create_topics: bool = True
    queues: int = 8
    spark_conf: dict[str, str] = field(default_factory=dict)
    spark_timeout: float = 60.0
    max_duration: float = 600.0
    consumers: int = 0  # simulated push consumers in the same partitions (mqadmin.fanout.consume)
    consumer_groups: int | None = None  # default: one per topic
    drain: float = 5.0  # s consumers keep consuming after the load ends
    security: ClientSecurity = UNSIGNED  # keys for a cluster the run does not start (a started one's are known)

    def validate(self) -> None:
        if self.engine not in ENGINES:
            raise FanoutUsageError(f"--engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.producers < 1:
            raise FanoutUsageError("--producers must be >= 1")
        if self.partitions is not None and not 1 <= self.partitions <= self.producers:
            raise FanoutUsageError(f"--partitions must be 1..{self.producers} (the producer count)")
        if self.duration is not None and self.messages_per_producer is not None:
            raise FanoutUsageError("give --duration or --messages-per-producer, not both")
        if self.duration is not None and not 0 < self.duration <= self.max_duration:
            raise FanoutUsageError(f"--duration must be in (0, {self.max_duration:g}] s")
        if self.messages_per_producer is not None and self.messages_per_producer < 1:
            raise FanoutUsageError("--messages-per-producer must be >= 1")
        if self.rate is not None and (not math.isfinite(self.rate) or self.rate < 0):
            raise FanoutUsageError("--rate must be >= 0 (0: each producer sends as fast as it can)")
        if self.scenario is not None and (self.namesrv or self.start):
            raise FanoutUsageError("--scenario starts the scenario's own cluster: leave out --namesrv and --start")
        if self.start and self.namesrv:
            raise FanoutUsageError("--start runs a new local cluster: leave out --namesrv")
        if self.kills and self.scenario is not None:
            raise FanoutUsageError("--kill-broker and --scenario cannot be combined (put the kill in the scenario's timeline)")
        if not 0 <= self.start_delay <= 120:
            raise FanoutUsageError("--start-delay must be 0..120 s")
        if self.topics < 1:
            raise FanoutUsageError("--topics must be >= 1")
        if self.consumers < 0:
            raise FanoutUsageError("--consumers must be >= 0")
        if self.consumer_groups is not None and not self.consumers:
            raise FanoutUsageError("--consumer-groups needs --consumers")
        if self.consumer_groups is not None and not 1 <= self.consumer_groups <= max(1, self.consumers):
            raise FanoutUsageError(f"--consumer-groups must be 1..{max(1, self.consumers)} (the consumer count)")
        if not 0 <= self.drain <= 300:
            raise FanoutUsageError("--drain must be 0..300 s")
        if self.engine == "spark":
            from mqadmin.fanout.spark import (  # no pyspark import: regexes
                check_master,
                on_this_host,
            )

            check_master(self.master)
            if (self.start or self.scenario is not None) and not on_this_host(self.master):
                raise FanoutUsageError(f"a local cluster listens on 127.0.0.1, which executors of {self.master} cannot reach: "
                                       "give --namesrv with addresses the workers can reach instead of --start/--scenario")
        if self.namesrv is not None:  # -n '' is a usage error, not "the default"
            try:
                split_addrs(self.namesrv)
            except AdminError as exc:
                raise FanoutUsageError(f"--namesrv: {exc}") from None
