"""What a real client program's output lines mean to a scenario: the same records simulated clients make.

The Java and Go client programs (:mod:`mqadmin.rocketmq.harness`) print one JSON object per line:
a send, a consumption, a change of the queues a consumer was given. Each becomes a
:class:`~simclient.SendRecord`, a :class:`~simclient.ConsumeRecord` or
:class:`~simclient.OwnershipEvent` values, so the verdicts, the report and the plot read them exactly
as they read a simulated client's. Times are placed on the run's timeline by the wall clock, which
every process of the machine shares (``wall_t0``: the wall-clock time of time zero, in seconds).

A failed send's outcome is read from what the client said: Java's exception chain (class names and
messages) or the Go client's error text, in :func:`send_outcome`.
"""

from __future__ import annotations

import re
from typing import Any

from simclient import ConsumeRecord, OwnershipEvent, SendRecord
from simclient.rebalance import MessageQueue, sort_queues

#: A stored send's status, as the Java client names it and as the Go client numbers it, to the broker's
#: response code (what a simulated producer records for the same answer).
STATUS_CODES: dict[Any, int] = {
    "SEND_OK": 0, "FLUSH_DISK_TIMEOUT": 10, "SLAVE_NOT_AVAILABLE": 11, "FLUSH_SLAVE_TIMEOUT": 12,
    0: 0, 1: 10, 2: 12, 3: 11,
}
#: (outcome, words of the error text that show it), in the order they are tried.
FAILURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("no_route", ("No route info", "route info not found")),
    ("timeout", ("RemotingTimeoutException", "RemotingTooMuchRequestException", "call timeout",
                 "deadline exceeded", "i/o timeout", "timeout")),
    ("conn_error", ("RemotingConnectException", "RemotingSendRequestException", "connection refused",
                    "connection reset", "broken pipe", "dial tcp", "EOF")),
    ("rejected", ("MQBrokerException", "CODE:")),
)
#: The broker's response code in the Go client's error text ("CODE: 17, DESC: ...").
GO_CODE = re.compile(r"CODE: (-?\d+)")


def send_outcome(error: str) -> str:
    """The outcome of a failed send (one of simclient's OUTCOMES) from the client's error text."""
    for outcome, words in FAILURES:
        if any(word in error for word in words):
            return outcome
    return "error"


def line_int(value: Any, default: int = -1) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def line_float(value: Any, default: float = 0.0) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def line_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def send_record(line: dict[str, Any], first_id: int, wall_t0: float) -> SendRecord:
    """A ``send`` line of a producer program as a SendRecord (producer ids from ``first_id`` on)."""
    error = line.get("error")
    broker = line_str(line.get("broker")) or None
    if error is None:
        outcome = "ok"
        code = STATUS_CODES.get(line.get("status"), 0)
    else:
        outcome = send_outcome(str(error))
        code = line_int(line.get("code"))
        found = GO_CODE.search(str(error))
        if code == -1 and found is not None:
            code = int(found.group(1))
    return SendRecord(
        t=line_float(line.get("t")) / 1000.0 - wall_t0,
        producer=first_id + line_int(line.get("p"), 0),
        topic=line_str(line.get("topic")),
        broker=broker,
        queue_id=line_int(line.get("queue")),
        outcome=outcome,
        latency_ms=line_float(line.get("ms")),
        attempts=line_int(line.get("attempts"), 1),
        queue_offset=line_int(line.get("offset")) if outcome == "ok" else -1,
        code=code,
        msg_id=line_str(line.get("msgId")) if outcome == "ok" else "",
    )


def consume_record(line: dict[str, Any], consumer: int, group: str, wall_t0: float) -> ConsumeRecord:
    """A ``consumed`` line of a consumer program as a ConsumeRecord.

    A real client does not say which node of a broker group served a pull: ``broker_id`` is -1.
    """
    t_ms = line_float(line.get("t"))
    store_ms = line_float(line.get("storeMs"), t_ms)
    return ConsumeRecord(
        t=t_ms / 1000.0 - wall_t0,
        consumer=consumer,
        group=group,
        topic=line_str(line.get("topic")),
        broker=line_str(line.get("broker")),
        broker_id=-1,
        queue_id=line_int(line.get("queue")),
        queue_offset=line_int(line.get("offset")),
        msg_id=line_str(line.get("msgId")),
        latency_ms=max(0.0, t_ms - store_ms),
        outcome="retry" if line.get("outcome") == "retry" else "ok",
        reconsume_times=line_int(line.get("reconsume"), 0),
    )


def _queues(topic: str, pairs: Any) -> list[MessageQueue]:
    if not isinstance(pairs, list):
        return []
    return [(topic, str(p[0]), int(p[1])) for p in pairs
            if isinstance(p, list) and len(p) == 2 and isinstance(p[1], int)]


def allocation_events(line: dict[str, Any], consumer: int, group: str, wall_t0: float,
                      owned: set[MessageQueue]) -> list[OwnershipEvent]:
    """An ``allocate`` line as ownership events: the topic's queues as the consumer sees them, then a
    release of each queue it no longer has and an acquire of each new one. ``owned`` (what the consumer
    held of every topic) is updated in place."""
    topic = line_str(line.get("topic"))
    t = line_float(line.get("t")) / 1000.0 - wall_t0
    mine = set(_queues(topic, line.get("mine")))
    held = {q for q in owned if q[0] == topic}
    events = [OwnershipEvent(t, consumer, group, "queues", queues=tuple(sort_queues(_queues(topic, line.get("all")))))]
    for q in sort_queues(held - mine):
        owned.discard(q)
        events.append(OwnershipEvent(t, consumer, group, "release", q[0], q[1], q[2]))
    for q in sort_queues(mine - held):
        owned.add(q)
        events.append(OwnershipEvent(t, consumer, group, "acquire", q[0], q[1], q[2]))
    return events


__all__ = ["allocation_events", "consume_record", "send_outcome", "send_record"]
