"""Messages delivered later: 5.x timer messages and 4.x delay levels, as a producer sends them.

A RocketMQ 5 client's delay message reaches the broker with
``TIMER_DELIVER_MS`` (the Proxy sets it from the gRPC delivery timestamp;
``TIMER_DELAY_SEC`` and ``TIMER_DELAY_MS`` are its relative forms); a 4.x
producer's with a ``DELAY`` level. A Java broker (HookUtils) then stores the
message on ``rmq_sys_wheel_timer`` queue 0 (a level: ``SCHEDULE_TOPIC_XXXX``
queue level-1) with ``REAL_TOPIC`` and ``REAL_QID`` (and ``TIMER_OUT_MS``),
answers the producer, and when the time comes puts it on its real queue.
The stub does the same (:func:`transform` decides, :class:`Timers` keeps
what is due), with one difference: Java rounds a deliver time down to its
1 s timer precision (and so may deliver up to a second early); the stub
delivers no earlier than asked, within its timer tick (10-100 ms).

A deliver time more than ``timerMaxDelaySec`` (3 days) ahead is refused
with Java's MESSAGE_ILLEGAL; a time already past is delivered at once.
The due messages themselves are stored records, so with messages on disk
they survive a restart: the queues are scanned on start, and offsets
already delivered (kept in the POP state file, :mod:`broker_stub.pop_state`)
are skipped; a restart between a delivery and the next state write
delivers that message twice (at least once, never lost). Pending timers are
bounded by the timer queues themselves (``maxMessagesPerQueue`` each).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable
from typing import Any

from broker_stub.common import Reject, format_properties, parse_properties
from broker_stub.store import MessageStore, StoreUnavailableError, parse_record
from broker_stub.topics import SCHEDULE_TOPIC
from remoting.codes import ResponseCode
from server_runtime.ratelog import clip

log = logging.getLogger("broker_stub")

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_MAX_DELAY_MS = 3 * 24 * 3600 * 1000  # MessageStoreConfig.timerMaxDelaySec
RETRY_LATER_MS = 1000  # a due message the store cannot take now waits this long
DELAY, REAL_TOPIC, REAL_QID, TIMER_OUT_MS = "DELAY", "REAL_TOPIC", "REAL_QID", "TIMER_OUT_MS"
TIMER_KEYS = ("TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_DELIVER_MS")

#: Store a message: the processor's put (topic, queue id, body, flag, properties, sys flag, born ts, born ip,
#: born port, reconsume times) -> (queue offset, physical offset).
Put = Callable[..., tuple[int, int]]


def transform(topic: str, queue_id: int, props_text: str, now_ms: int, levels: list[float]
              ) -> tuple[str, int, str, int] | None:
    """Where a sent message is stored instead, if it is delivered later: (topic, queue id, properties,
    deliver time in ms); None for an ordinary message. Reject for a timer Java refuses."""
    props = parse_properties(props_text)
    level = _int(props.get(DELAY))
    if level is not None and level > 0:  # a level wins over timer properties, which Java then clears
        for key in TIMER_KEYS:
            props.pop(key, None)
        level = min(level, len(levels))
        props[REAL_TOPIC], props[REAL_QID] = topic, str(queue_id)
        return SCHEDULE_TOPIC, level - 1, format_properties(props), now_ms + int(levels[level - 1] * 1000)
    if not any(key in props for key in TIMER_KEYS) or TIMER_OUT_MS in props:
        return None
    try:
        if "TIMER_DELAY_SEC" in props:
            deliver = now_ms + int(props["TIMER_DELAY_SEC"]) * 1000
        elif "TIMER_DELAY_MS" in props:
            deliver = now_ms + int(props["TIMER_DELAY_MS"])
        else:
            deliver = int(props["TIMER_DELIVER_MS"])
    except ValueError:
        deliver = None
    if deliver is None or deliver - now_ms > TIMER_MAX_DELAY_MS:
        raise Reject(ResponseCode.MESSAGE_ILLEGAL, "timer message illegal, the delay time should not be bigger than "
                                                   f"the max delay {TIMER_MAX_DELAY_MS}ms; or if set del msg, the "
                                                   "delay time should be bigger than the current time")
    if deliver <= now_ms:
        return None
    props[TIMER_OUT_MS], props[REAL_TOPIC], props[REAL_QID] = str(deliver), topic, str(queue_id)
    return TIMER_TOPIC, 0, format_properties(props), deliver


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


class Timers:
    """Stored timer records by due time; each put on its real queue once due (time as a parameter)."""

    def __init__(self, store: MessageStore, put: Put, levels: list[float]) -> None:
        self.store = store
        self.put = put
        self.levels = levels
        self._heap: list[tuple[int, str, int, int]] = []  # (deliver ms, timer topic, queue, offset)
        self.delivered: dict[tuple[str, int], set[int]] = {}  # offsets of the timer queues already delivered
        self.changes = 0

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, deliver_ms: int, topic: str, queue_id: int, offset: int) -> None:
        heapq.heappush(self._heap, (deliver_ms, topic, queue_id, offset))

    def next_due(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def run_due(self, now_ms: int) -> int:
        """Put every due message on its real queue; returns how many."""
        done = 0
        later = []
        while self._heap and self._heap[0][0] <= now_ms:
            item = heapq.heappop(self._heap)
            try:
                self._deliver(item[1], item[2], item[3])
            except StoreUnavailableError:  # the disk refuses writes: again in a while
                later.append((now_ms + RETRY_LATER_MS, *item[1:]))
                continue
            except Exception as exc:
                log.warning("a timer message was not delivered: %s: %s", type(exc).__name__, clip(exc))
            self.delivered.setdefault((item[1], item[2]), set()).add(item[3])
            self.changes += 1
            done += 1
        for item in later:
            heapq.heappush(self._heap, item)
        return done

    def _deliver(self, topic: str, queue_id: int, offset: int) -> None:
        records, _ = self.store.get(topic, queue_id, offset, 1, 1 << 30)
        if not records:
            return  # no longer held (its queue dropped it)
        msg = parse_record(records[0])
        props = parse_properties(msg.properties)
        real_topic, real_qid = props.pop(REAL_TOPIC, None), _int(props.pop(REAL_QID, None))
        props.pop(DELAY, None)
        if not real_topic or real_qid is None:
            return
        self.put(real_topic, real_qid, msg.body, msg.flag, format_properties(props), msg.sys_flag, msg.born_timestamp,
                 msg.born_ip, msg.born_port, msg.reconsume_times)

    def snapshot(self) -> list[list[Any]]:
        """The delivered offsets still held by their queues (what a restart must not deliver again)."""
        out = []
        for (topic, queue_id), offsets in self.delivered.items():
            low = self.store.min_offset(topic, queue_id)
            offsets.difference_update([o for o in offsets if o < low])
            if offsets:
                out.append([topic, queue_id, sorted(offsets)])
        return out

    def restore(self, delivered: list[Any], now_ms: int) -> int:
        """After a restart: every timer record still held and not delivered is due again; returns how many."""
        for topic, queue_id, offsets in delivered:
            self.delivered[(str(topic), int(queue_id))] = {int(o) for o in offsets}
        pending = 0
        for topic, queue_id in self.store.queue_keys():
            if topic not in (TIMER_TOPIC, SCHEDULE_TOPIC):
                continue
            done = self.delivered.get((topic, queue_id), set())
            offset = self.store.min_offset(topic, queue_id)
            while offset < self.store.max_offset(topic, queue_id):
                records, next_offset = self.store.get(topic, queue_id, offset, 32, 1 << 30)
                for i, record in enumerate(records):
                    if offset + i not in done:
                        self.schedule(self._due_of(topic, queue_id, record, now_ms), topic, queue_id, offset + i)
                        pending += 1
                offset = max(next_offset, offset + 1)
        return pending

    def _due_of(self, topic: str, queue_id: int, record: bytes, now_ms: int) -> int:
        msg = parse_record(record)
        out_ms = _int(parse_properties(msg.properties).get(TIMER_OUT_MS))
        if out_ms is not None:
            return out_ms
        stored_ms = int.from_bytes(record[56:64], "big")  # a level's delay counts from the store time
        level = min(queue_id + 1, len(self.levels))
        return stored_ms + int(self.levels[level - 1] * 1000) if topic == SCHEDULE_TOPIC else now_ms
