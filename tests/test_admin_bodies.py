"""Units of the admin wire shapes and the broker's stats: fastjson object keys, Java doubles,
version names, StatsItem windows, subscription group configs (pure code, injected clocks)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_stub.stats import (
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    MAX_ITEMS_PER_SET,
    TOPIC_PUT_NUMS,
    BrokerStats,
    StatsItemSet,
)
from broker_stub.subgroups import MAX_GROUPS, SubscriptionGroupError, SubscriptionGroups
from remoting.admin_bodies import (
    BrokerStatsData,
    ConsumeStats,
    OffsetWrapper,
    TopicOffset,
    TopicStatsTable,
    decode_reset_offsets,
    encode_reset_offsets,
    subscription_group_config,
)
from remoting.codes import version_desc
from remoting.mqjson import MessageQueue, MqJsonError, dumps, loads, mq_table
from remoting.fastjson import java_double

# What Java 5.x writes (fastjson: MessageQueue keys inlined as objects, fields sorted, doubles as Double.toString).
JAVA_TOPIC_STATS = (b'{"offsetTable":{{"brokerName":"broker-a","queueId":3,"topic":"MyTopic"}:'
                    b'{"lastUpdateTimestamp":1700000000000,"maxOffset":500,"minOffset":0}},"topicPutTps":0.0}')
JAVA_CONSUME_STATS = (b'{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":3,"topic":"MyTopic"}:'
                      b'{"brokerOffset":100,"consumerOffset":90,"lastTimestamp":1700000000000,"pullOffset":0}}}')


def test_java_shapes_decode_and_encode_byte_for_byte() -> None:
    table = TopicStatsTable.decode(JAVA_TOPIC_STATS)
    assert table.offset_table == {MessageQueue("MyTopic", "broker-a", 3): TopicOffset(0, 500, 1700000000000)}
    assert table.encode() == JAVA_TOPIC_STATS
    stats = ConsumeStats.decode(JAVA_CONSUME_STATS)
    assert stats.offset_table[MessageQueue("MyTopic", "broker-a", 3)] == OffsetWrapper(100, 90, 0, 1700000000000)
    assert stats.consume_tps == 1.5 and stats.total_diff() == 10 and stats.encode() == JAVA_CONSUME_STATS
    reset = {MessageQueue("T", "b", 0): 10, MessageQueue("T", "b", 1): 20}
    raw = encode_reset_offsets(reset)
    assert raw == (b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:10,'
                   b'{"brokerName":"b","queueId":1,"topic":"T"}:20}}')
    assert decode_reset_offsets(raw) == reset
    data = BrokerStatsData.decode(b'{"statsDay":{"avgpt":0.0,"sum":0,"tps":0.0},"statsHour":{"avgpt":0.0,"sum":5,'
                                  b'"tps":0.0083},"statsMinute":{"avgpt":1.0,"sum":0,"tps":0.0}}')
    assert data.sum_24h() == 5 and data.hour.tps == 0.0083


def test_tolerant_parse_keeps_strings_intact_and_takes_integer_keys() -> None:
    text = '{"a":{0:"x",-1:"y"},"s":"{not:a key}, [","o":{{"brokerName":"b\\"}","queueId":2,"topic":"t:{"}:1}}'
    obj = loads(text)
    assert obj["a"] == {"0": "x", "-1": "y"} and obj["s"] == "{not:a key}, ["
    assert mq_table(obj["o"]) == {MessageQueue("t:{", 'b"}', 2): 1}


@pytest.mark.parametrize("bad", [b'{"a":', b'{"offsetTable":{{"brokerName":"b"', b'{"a":"\\"', b"\xff\xfe"])
def test_malformed_is_one_error(bad: bytes) -> None:
    with pytest.raises(MqJsonError):
        loads(bad)


def test_a_long_hostile_string_is_refused_in_linear_time() -> None:
    hostile = b'{"x":' + b'"' + b'\\"' * 200_000
    start = time.process_time()  # CPU time: the machine may be busy with other work
    with pytest.raises(MqJsonError):
        loads(hostile)
    assert time.process_time() - start < 2.0


mqs = st.builds(MessageQueue, st.text(max_size=8), st.text(max_size=8), st.integers(-(2**31), 2**31 - 1))


@given(st.dictionaries(mqs, st.integers(-(2**63), 2**63 - 1), max_size=8))
def test_object_keyed_round_trip(table: dict[MessageQueue, int]) -> None:
    assert decode_reset_offsets(encode_reset_offsets(table)) == table


@pytest.mark.parametrize(("value", "text"), [
    (0.0, "0.0"), (1.5, "1.5"), (100.0, "100.0"), (0.001, "0.001"), (0.0001, "1.0E-4"), (1e7, "1.0E7"),
    (12345678.9, "1.23456789E7"), (9999999.0, "9999999.0"), (-2.5e-5, "-2.5E-5"), (1 / 3, "0.3333333333333333"),
    (float("nan"), "null"),
])
def test_java_double(value: float, text: str) -> None:
    assert java_double(value) == text
    assert dumps({"x": value}) == f'{{"x":{text}}}'.encode()


@pytest.mark.parametrize(("ordinal", "name"), [
    (0, "V3_0_0_SNAPSHOT"), (15, "V3_0_0_FINAL"), (37, "V3_0_11"), (193, "V3_8_9"), (194, "V3_9_1_SNAPSHOT"),
    (333, "V4_6_0"), (407, "V4_9_7"), (413, "V5_0_0"), (479, "V5_3_3"), (611, "V5_9_9"), (612, "HIGHER_VERSION"),
    (9999, "HIGHER_VERSION"),
])
def test_version_desc(ordinal: int, name: str) -> None:
    assert version_desc(ordinal) == name


# --------------------------------------------------------------------------
# stats: StatsItem's windows


def test_minute_window_is_sampled_every_ten_seconds_from_the_set_start() -> None:
    stats = BrokerStats("C", now=0)
    stats.put("T", 100)
    stats.put("T", 50)
    stats.flush(3_000)
    assert stats.view(TOPIC_PUT_NUMS, "T", 9_999).minute.sum == 0  # not sampled yet
    first = stats.view(TOPIC_PUT_NUMS, "T", 10_000).minute
    assert (first.sum, first.tps, first.avgpt) == (2, 0.2, 2.0)  # Java's first sample pairs with a zero one 10 s back
    stats.put("T", 1)
    stats.flush(15_000)
    assert stats.view(TOPIC_PUT_NUMS, "T", 20_000).minute.sum == 3
    # a minute later the first messages have left the minute window, the hour window has them all
    later = stats.view(TOPIC_PUT_NUMS, "T", 75_000)
    assert later.minute.sum == 1 and later.hour.sum == 0
    hour = stats.view(TOPIC_PUT_NUMS, "T", 600_000)
    assert hour.minute.sum == 0 and hour.hour.sum == 3 and hour.hour.tps == pytest.approx(3 / 600)
    day = stats.view(TOPIC_PUT_NUMS, "T", 3_600_000)
    assert day.day.sum == 3 and day.sum_24h() == 3
    assert stats.view(TOPIC_PUT_NUMS, "T", 30 * 3_600_000).sum_24h() == 0  # a day and more later: all gone
    assert stats.view(BROKER_PUT_NUMS, "C", 20_000).minute.sum == 3
    assert stats.view(TOPIC_PUT_NUMS, "nope", 20_000) is None


def test_group_get_and_deletes() -> None:
    stats = BrokerStats("C", now=0)
    stats.got("G", "T", 4, 400)
    stats.got("G", "T", 0, 0)
    stats.flush(1_000)
    gets = stats.view(GROUP_GET_NUMS, "T@G", 10_000).minute
    assert gets.sum == 4 and gets.avgpt == 2.0  # two pulls
    assert stats.minute_tps(GROUP_GET_NUMS, "T@G", 10_000) == pytest.approx(0.4)
    stats.group_deleted("G")
    assert stats.view(GROUP_GET_NUMS, "T@G", 10_000) is None
    stats.put("T", 1)
    stats.flush(2_000)
    stats.topic_deleted("T")
    assert stats.view(TOPIC_PUT_NUMS, "T", 10_000) is None


def test_stats_sets_are_bounded() -> None:
    items = StatsItemSet(origin=0, max_items=3)
    for i in range(5):
        items.add(f"k{i}", 1_000 + i, 1)
    assert list(items.items) == ["k2", "k3", "k4"]
    assert MAX_ITEMS_PER_SET >= 1000


# --------------------------------------------------------------------------
# subscription groups


def test_subscription_group_config_defaults_and_checks() -> None:
    cfg = subscription_group_config({"groupName": "G", "consumeEnable": "false", "retryMaxTimes": 2, "unknown": 1})
    assert cfg["consumeEnable"] is False and cfg["retryMaxTimes"] == 2 and "unknown" not in cfg
    assert cfg["groupRetryPolicy"] == {"type": "CUSTOMIZED"} and cfg["subscriptionDataSet"] is None
    assert json.loads(dumps(cfg))["groupName"] == "G" and b"subscriptionDataSet" not in dumps(cfg)
    for bad, why in [({"groupName": ""}, "groupName"), ({"groupName": "a/b"}, "illegal characters"),
                     ({"groupName": "G", "retryQueueNums": 5000}, "retryQueueNums"),
                     ({"groupName": "G", "brokerId": 2**63}, "brokerId"),
                     ({"groupName": "G", "groupRetryPolicy": {"type": "NEVER"}}, "groupRetryPolicy"),
                     ({"groupName": "G", "attributes": {str(i): "v" for i in range(100)}}, "attributes")]:
        with pytest.raises(MqJsonError, match=why):
            subscription_group_config(bad)


def test_subscription_groups_file_round_trip_and_bound(tmp_path: Path) -> None:
    path = tmp_path / "config" / "subscriptionGroup.json"
    groups = SubscriptionGroups(str(path))
    assert len(groups) == 8 and groups.get("CID_RMQ_SYS_TRANS")["consumeBroadcastEnable"] is True
    groups.update(subscription_group_config({"groupName": "G", "retryMaxTimes": 1}))
    assert groups.auto_create("AUTO") and not groups.auto_create("AUTO") and not groups.auto_create("bad name")
    assert groups.delete("AUTO") and not groups.delete("AUTO")
    again = SubscriptionGroups(str(path))
    assert again.get("G")["retryMaxTimes"] == 1 and "AUTO" not in again
    assert again.data_version.counter == groups.data_version.counter + 1  # continues from the saved one
    memory = SubscriptionGroups()
    for i in range(MAX_GROUPS - len(memory)):
        memory.update(subscription_group_config({"groupName": f"g{i}"}))
    with pytest.raises(SubscriptionGroupError, match="full"):
        memory.update(subscription_group_config({"groupName": "one-more"}))
    assert not memory.auto_create("one-more")
    path.write_text("{not json")
    with pytest.raises(SubscriptionGroupError, match="subscriptionGroup.json"):
        SubscriptionGroups(str(path))
