"""The pure parts of POP consumption and timer messages: the in-flight table, receipt handles, the
record a retried message is handed out as, and where a timer message waits (no sockets, time given)."""

from __future__ import annotations

import pytest

from broker_stub.common import Reject, parse_properties
from broker_stub.pop_inflight import InFlight, InFlightTable
from broker_stub.pop_wire import HandleError, build_handle, handed_out_as, parse_handle, pop_retry_topic, queue_offset_of
from broker_stub.store import MessageStore, parse_record
from broker_stub.timers import TIMER_TOPIC, transform
from broker_stub.topics import SCHEDULE_TOPIC
from remoting.codes import ResponseCode


def test_in_flight_deadlines_acks_changes_and_the_bound() -> None:
    table = InFlightTable(capacity=3)
    for offset in range(3):
        table.add(InFlight("G", "T", 0, offset, pop_time=1000, invisible_ms=500))
    assert table.room() == 0
    assert not table.ack(("G", "T", 0, 1), pop_time=999)  # another handle's pop time: nothing
    assert table.ack(("G", "T", 0, 1), pop_time=1000) and table.room() == 1
    changed = table.change(("G", "T", 0, 2), old_pop_time=1000, now_ms=1200, invisible_ms=1000)
    assert changed.deadline == 2200
    assert not table.ack(("G", "T", 0, 2), pop_time=1000)  # the old handle acks nothing any more
    assert table.due(1499) == []
    assert [e.offset for e in table.due(1500)] == [0]  # offset 2 is due at 2200 now, not 1500
    assert [e.offset for e in table.due(2200)] == [2] and len(table) == 0
    # the stale heap items of acked or changed entries never come back
    assert table.due(10_000) == [] and table.next_deadline() is None
    restored = InFlightTable(capacity=2)
    assert restored.restore([["G", "T", 1, 7, 5, 6], ["G", "T", 1, 8, 5, 6], ["G", "T", 1, 9, 5, 6]]) == 2
    with pytest.raises(ValueError):
        InFlight.from_list(["G", "T", "1", 7, 5, 6])


def test_receipt_handles_in_extra_info_util_s_format() -> None:
    handle = build_handle(10, 1700000000000, 30000, 3, "%RETRY%G_T", "broker-a", 0, 12)
    assert handle == "10 1700000000000 30000 3 1 broker-a 0 12"
    parsed = parse_handle(handle)
    assert (parsed.ck_offset, parsed.pop_time, parsed.invisible_ms, parsed.revive_qid, parsed.retry_flag,
            parsed.broker_name, parsed.queue_id) == (10, 1700000000000, 30000, 3, "1", "broker-a", 0)
    assert parse_handle("1 2 3 4 0 b 5").retry_flag == "0"  # the seven-field form of 4.x/5.0 clients
    for bad in ("", "1 2 3", "x 2 3 4 0 b 5"):
        with pytest.raises(HandleError):
            parse_handle(bad)
    assert pop_retry_topic("T", "G") == "%RETRY%G_T"


def test_a_retried_record_is_handed_out_under_the_topic_asked_for() -> None:
    store = MessageStore("127.0.0.1", 10911, 100)
    store.put("%RETRY%G_T", 0, b"body", 0, "TAGS\x01A\x02", 0, 1, b"\x7f\x00\x00\x01", 1, 1, "A")
    records, _ = store.get("%RETRY%G_T", 0, 0, 1, 1 << 20)
    out = handed_out_as(records[0], "T", "0 1 2 3 1 b 0 0")
    msg = parse_record(out)
    assert msg.topic == "T" and msg.body == b"body" and msg.reconsume_times == 1
    assert parse_properties(msg.properties) == {"TAGS": "A", "POP_CK": "0 1 2 3 1 b 0 0"}
    assert queue_offset_of(out) == queue_offset_of(records[0]) == 0
    assert msg.phys == parse_record(records[0]).phys  # the retry record's commit-log offset: send-back finds it


def test_where_a_timer_or_delay_message_waits() -> None:
    levels = [1.0, 5.0, 10.0]
    assert transform("T", 2, "KEYS\x01k\x02", 1000, levels) is None  # an ordinary message
    topic, queue, props, due = transform("T", 2, "TIMER_DELIVER_MS\x015000\x02", 1000, levels)  # type: ignore[misc]
    assert (topic, queue, due) == (TIMER_TOPIC, 0, 5000)
    assert parse_properties(props) == {"TIMER_DELIVER_MS": "5000", "TIMER_OUT_MS": "5000", "REAL_TOPIC": "T",
                                       "REAL_QID": "2"}
    assert transform("T", 0, "TIMER_DELAY_SEC\x013\x02", 1000, levels)[3] == 4000  # type: ignore[index]
    assert transform("T", 0, "TIMER_DELIVER_MS\x01999\x02", 1000, levels) is None  # already due: stored as is
    level = transform("T", 1, "DELAY\x012\x02TIMER_DELAY_MS\x01100\x02", 1000, levels)
    assert level is not None and level[:2] == (SCHEDULE_TOPIC, 1) and level[3] == 6000  # a level wins, 5 s
    assert "TIMER_DELAY_MS" not in parse_properties(level[2])
    with pytest.raises(Reject) as refused:
        transform("T", 0, f"TIMER_DELAY_SEC\x01{4 * 24 * 3600}\x02", 1000, levels)
    assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
