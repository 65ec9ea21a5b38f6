"""The broker's topic table and its DataVersion.

Every change bumps the DataVersion: the NameServer only re-applies a
registration whose version differs from the one it holds, so an unbumped
change would never reach the routes. The table calls ``on_change`` after
each change so the registrar can register at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from remoting import fastjson
from remoting.bodies import DataVersion, TopicConfig
from remoting.codes import DEFAULT_TOPIC, PERM_INHERIT, PERM_READ, PERM_WRITE
from remoting.names import is_legal_topic

log = logging.getLogger("broker_stub")

SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BENCHMARK_TOPIC = "BenchmarkTest"
#: TopicValidator.getSystemTopicSet() of 5.3.3, in its order: what GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305)
#: answers. The ``rmq_sys_`` topics are system topics by their prefix, not listed here (as in Java).
SYSTEM_TOPIC_SET = (DEFAULT_TOPIC, SCHEDULE_TOPIC, BENCHMARK_TOPIC, "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
                    "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", SELF_TEST_TOPIC, OFFSET_MOVED_EVENT,
                    "CHECKPOINT_TOPIC")
MAX_TOPICS = 100_000  # a bound on memory, far beyond what tests create
MAX_QUEUE_NUMS = 1024  # read/write queues of one topic (BenchmarkTest's 1024 is the largest Java creates)
RW = PERM_READ | PERM_WRITE


class TopicLimitError(ValueError):
    """A topic the table will not take (full, or too many auto-created); the text says which bound."""


def now_ms() -> int:
    return int(time.time() * 1000)


def default_topics(cluster: str, broker_name: str, queue_nums: int, auto_create: bool) -> list[TopicConfig]:
    """The system topics a Java 5.3.3 broker creates (TopicConfigManager.init), in its order, so a first
    registration looks like a real broker's and never holds one topic. Java's switches at their
    defaults: clusterTopicEnable and brokerTopicEnable on (RW), traceTopicEnable off (no
    RMQ_SYS_TRACE_TOPIC), timerWheelEnable on (rmq_sys_wheel_timer), reviveQueueNum 8."""
    topics = [
        TopicConfig(SELF_TEST_TOPIC, 1, 1, RW),
        TopicConfig(BENCHMARK_TOPIC, 1024, 1024, RW),
        TopicConfig(cluster, 16, 16, RW | PERM_INHERIT),
        TopicConfig(broker_name, 1, 1, RW | PERM_INHERIT),
        TopicConfig(OFFSET_MOVED_EVENT, 1, 1, RW),
        TopicConfig(SCHEDULE_TOPIC, 18, 18, RW),
        TopicConfig(f"{cluster}_REPLY_TOPIC", 1, 1, RW),
        TopicConfig(f"rmq_sys_REVIVE_LOG_{cluster}", 8, 8, RW),
        TopicConfig(f"rmq_sys_SYNC_BROKER_MEMBER_{broker_name}", 1, 1, PERM_INHERIT),
        TopicConfig("RMQ_SYS_TRANS_HALF_TOPIC", 1, 1, RW),
        TopicConfig("RMQ_SYS_TRANS_OP_HALF_TOPIC", 1, 1, RW),
        TopicConfig("rmq_sys_wheel_timer", 1, 1, RW),
    ]
    if auto_create:
        topics.insert(1, TopicConfig(DEFAULT_TOPIC, queue_nums, queue_nums, RW | PERM_INHERIT))
    bad = [tc.topic_name for tc in topics if not is_legal_topic(tc.topic_name)]
    if bad:  # a topic name becomes a directory: a cluster or broker name that is none gets no topic
        log.warning("no topic for %s: not a legal topic name (brokerClusterName / brokerName)",
                    ", ".join(repr(name)[:60] for name in bad))
    return [tc for tc in topics if is_legal_topic(tc.topic_name)]


class TopicTable:
    """Topic name -> TopicConfig, plus the version the NameServer compares."""

    def __init__(
        self,
        initial: list[TopicConfig],
        *,
        on_change: Callable[[], None] = lambda: None,
        clock_ms: Callable[[], int] = now_ms,
        max_auto_created: int = 1024,
    ) -> None:
        self._topics: dict[str, TopicConfig] = {tc.topic_name: tc for tc in initial}
        # Topics the broker created on its own (sends to a new topic, consumer groups' retry
        # and DLQ topics) since it started: bounded, so strangers cannot grow the table, the
        # topics file and every registration without limit. Admin-created topics do not count.
        self.max_auto_created = max_auto_created
        self._auto: set[str] = set()
        self.clock_ms = clock_ms
        self.data_version = DataVersion(0, clock_ms(), 0)
        self.on_change = on_change

    def get(self, name: str) -> TopicConfig | None:
        return self._topics.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._topics

    def __len__(self) -> int:
        return len(self._topics)

    def names(self) -> list[str]:
        return list(self._topics)

    def configs(self) -> list[TopicConfig]:
        return list(self._topics.values())

    def restore(self, saved: list[TopicConfig], version: DataVersion | None, source: str = "topics.json") -> None:
        """Topics read back from disk on start, over the defaults (as TopicConfigManager.load does).

        The version continues from the saved one, one step on, so the first
        registration after a restart is never mistaken for an old one.
        """
        bad = [tc.topic_name for tc in saved[:MAX_TOPICS] if not is_legal_topic(tc.topic_name)]
        if bad:  # never a directory: the name is checked wherever a topic comes from
            log.warning("%s: skipped %d topics whose names are no legal topic names: %s", source, len(bad),
                        ", ".join(repr(name)[:60] for name in bad[:5]))
        for tc in saved[:MAX_TOPICS]:
            if not is_legal_topic(tc.topic_name):
                continue
            tc.read_queue_nums = min(tc.read_queue_nums, MAX_QUEUE_NUMS)
            tc.write_queue_nums = min(tc.write_queue_nums, MAX_QUEUE_NUMS)
            self._topics[tc.topic_name] = tc
        if version is not None:
            self.data_version = version.next(self.clock_ms())

    def put(self, tc: TopicConfig) -> None:
        """Create or replace a topic; raises TopicLimitError when the table is full.
        A topic an admin creates over an auto-created one is the admin's from then on."""
        if tc.topic_name not in self._topics and len(self._topics) >= MAX_TOPICS:
            raise TopicLimitError(f"topic table full ({MAX_TOPICS} topics)")
        self._topics[tc.topic_name] = tc
        self._auto.discard(tc.topic_name)
        self.changed()

    def put_auto(self, tc: TopicConfig) -> None:
        """Create a topic the broker makes on its own; TopicLimitError beyond ``max_auto_created``."""
        if tc.topic_name not in self._topics and len(self._auto) >= self.max_auto_created:
            raise TopicLimitError(
                f"topic[{tc.topic_name}] not created: this broker already auto-created "
                f"{len(self._auto)} topics (maxAutoCreatedTopics={self.max_auto_created}); "
                "create it with updateTopic"
            )
        self.put(tc)
        self._auto.add(tc.topic_name)

    def delete(self, name: str) -> bool:
        if self._topics.pop(name, None) is None:
            return False
        self._auto.discard(name)
        self.changed()
        return True

    def changed(self) -> None:
        """Bump the version (a broker-wide change such as brokerPermission counts too)."""
        self.data_version = self.data_version.next(self.clock_ms())
        self.on_change()

    def registered(self, broker_perm: int) -> list[TopicConfig]:
        """Topic configs as registered: perms ANDed with the broker's when it lacks R or W (Java)."""
        if broker_perm & RW == RW:
            return list(self._topics.values())
        out = []
        for tc in self._topics.values():
            copy = TopicConfig(**{f: getattr(tc, f) for f in tc.__slots__})  # type: ignore[attr-defined]
            copy.perm = tc.perm & broker_perm
            out.append(copy)
        return out

    def wrapper_body(self) -> bytes:
        """GET_ALL_TOPIC_CONFIG body: a TopicConfigAndMappingSerializeWrapper as 5.x sends it."""
        dv = self.data_version.to_obj()
        return fastjson.dumps_fast(
            {
                "dataVersion": dv,
                "mappingDataVersion": {"counter": 0, "stateVersion": 0, "timestamp": dv["timestamp"]},
                "topicConfigTable": {name: tc.to_obj() for name, tc in self._topics.items()},
                "topicQueueMappingDetailMap": {},
                "topicQueueMappingInfoMap": {},
            }
        )
