"""Unit tests of the input bounds of issue 11: Java ranges, register-body
limits, properties escaping, config key classes and run-time refusals, KV
bounds and static-topic mappings in the route table."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import pytest

from namesrv import config_policy
from namesrv.config import ConfigError, NamesrvConfig
from namesrv.config_policy import RuntimeState, UpdateRefused
from namesrv.kvconfig import KVConfig
from namesrv.processor import NameServerProcessor
from namesrv.routes import Registration, RouteTable
from remoting import properties
from remoting import requests as rq
from remoting.bodies import BodyError, DataVersion, QueueData, TopicConfig, parse_kv_table, parse_topic_list
from remoting.codec import FrameDecoder
from remoting.codes import NAMESPACE_ORDER_TOPIC_CONFIG, RequestCode, ResponseCode
from remoting.command import RemotingCommand, request
from remoting.javatypes import JavaRangeError, NotANumber, brief, check_range, parse_int
from remoting.register_body import (
    RegisterLimits,
    encode_register_body,
    inflate,
    mapping_info,
    parse_register_body,
)

LIMITS = RegisterLimits()


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value

# ---------------------------------------------------------------------------
# Java integer types


@pytest.mark.parametrize(
    "text, bits, value",
    [("0", 32, 0), (" 42 ", 32, 42), ("+7", 32, 7), ("-2147483648", 32, -(2**31)), ("2147483647", 32, 2**31 - 1),
     ("9223372036854775807", 64, 2**63 - 1), ("-9223372036854775808", 64, -(2**63)), ("000000000000000000000001", 64, 1)],
)
def test_parse_int_accepts_java_literals(text: str, bits: int, value: int) -> None:
    assert parse_int(text, bits, "f") == value


@pytest.mark.parametrize(
    "text, bits",
    [("2147483648", 32), ("-2147483649", 32), ("9223372036854775808", 64), ("99999999999999999999999", 64),
     ("9" * 5000, 64)],
)
def test_parse_int_refuses_out_of_range(text: str, bits: int) -> None:
    with pytest.raises(JavaRangeError, match="out of range for a Java"):
        parse_int(text, bits, "f")


@pytest.mark.parametrize("text", ["", "1_000", "1e3", "0x10", "\u0661\u0662", "１２", "1 2", "--1", "12.0", "abc"])
def test_parse_int_refuses_what_parseLong_refuses(text: str) -> None:
    with pytest.raises(NotANumber):
        parse_int(text, 64, "f")


def test_brief_is_short_and_never_recurses() -> None:
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    assert brief(deep) == "an array" and brief({"a": deep}) == "an object"
    assert len(brief("x" * 1_000_000)) < 50
    assert check_range(5, 32, "f") == 5


# ---------------------------------------------------------------------------
# register body limits

DV = DataVersion(3, 1_700_000_000_000)
TOPICS = [TopicConfig("TBW102", 8, 8, 7), TopicConfig("T1", 4, 4, 6)]


def _item(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def test_topic_count_is_checked_before_topics_are_read() -> None:
    # The count says 10**6; no topic follows. The count alone is refused.
    raw = _item(DV.encode()) + struct.pack(">i", 1_000_000)
    with pytest.raises(BodyError, match="1000000 topics, more than the limit of 200000"):
        parse_register_body(zlib.compress(raw), compressed=True, version=479)
    small = RegisterLimits(max_topics=1)
    for compressed in (False, True):
        body = encode_register_body(TOPICS, DV, compressed=compressed)
        with pytest.raises(BodyError, match="2 topics, more than the limit of 1"):
            parse_register_body(body, compressed=compressed, version=479, limits=small)
        assert len(parse_register_body(body, compressed=compressed, version=479).topics) == 2


def test_inflate_stops_at_the_limit_without_inflating_the_rest() -> None:
    bomb = zlib.compress(b"\0" * (64 << 20), 9)
    with pytest.raises(BodyError, match="size limit"):
        inflate(bomb, 4 << 20)
    data = zlib.compress(b"abc" * 1_000_000)
    assert inflate(data, 3_000_000) == b"abc" * 1_000_000
    # Output that zlib holds back while input is exhausted is still drained.
    assert inflate(zlib.compress(b"\0" * (5 << 20)), 5 << 20) == b"\0" * (5 << 20)
    with pytest.raises(BodyError, match="truncated"):
        inflate(data[:-10], 3_000_000)


def test_mapping_info_is_rebuilt_from_known_fields() -> None:
    raw = {"topic": "ST", "bname": "b", "scope": "s", "totalQueues": "4", "epoch": 2**40, "dirty": True,
           "currIdMap": {"0": 1, "1": "2"}, "junk": {"deep": [1, 2]}, "hostedQueues": {"0": []}}
    assert mapping_info("ST", raw, LIMITS) == {
        "bname": "b", "currIdMap": {0: 1, 1: 2}, "dirty": True, "epoch": 2**40, "scope": "s", "topic": "ST",
        "totalQueues": 4,
    }
    assert list(mapping_info("ST", raw, LIMITS)) == sorted(mapping_info("ST", raw, LIMITS))


@pytest.mark.parametrize(
    "raw, message",
    [
        ([], "not a JSON object"),
        ({"currIdMap": _nested(40)}, "nested deeper than 32"),
        ({"bname": 5}, "bname is not a string"),
        ({"dirty": "yes"}, "dirty is not a boolean"),
        ({"totalQueues": 2**31}, "out of range for a Java int"),
        ({"epoch": "99999999999999999999"}, "out of range for a Java long"),
        ({"currIdMap": {"x": 1}}, "is not a number"),
        ({"currIdMap": {"0": [1]}}, "is not an integer"),
        ({"currIdMap": [1]}, "is not a JSON object"),
    ],
)
def test_bad_mapping_infos_are_refused(raw: Any, message: str) -> None:
    with pytest.raises(BodyError, match=message):
        mapping_info("ST", raw, LIMITS)


def test_990_deep_mapping_in_both_body_forms_is_refused() -> None:
    deep = b'{"topic":"ST","currIdMap":' + b"[" * 990 + b"]" * 990 + b"}"
    json_body = (
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"TBW102":{},"ST":{}},'
        b'"topicQueueMappingInfoMap":{"ST":' + deep + b"}}}"
    )
    with pytest.raises(BodyError, match="nested deeper than 32"):
        parse_register_body(json_body, compressed=False, version=479)
    raw = _item(DV.encode()) + struct.pack(">i", 0) + _item(b"[]") + struct.pack(">i", 1) + _item(deep)
    with pytest.raises(BodyError, match="nested deeper than 32"):
        parse_register_body(zlib.compress(raw), compressed=True, version=479)


def test_mapping_infos_round_trip_in_both_forms() -> None:
    info = {"bname": "broker-a", "currIdMap": {0: 0, 1: 1}, "epoch": 7, "scope": "__global__", "topic": "T1",
            "totalQueues": 2}
    for compressed in (False, True):
        body = encode_register_body(TOPICS, DV, compressed=compressed, mapping_infos={"T1": info})
        assert parse_register_body(body, compressed=compressed, version=479).mapping_infos == {"T1": info}


def test_filter_server_list_is_bounded() -> None:
    too_many = encode_register_body(TOPICS, DV, filter_servers=[f"h:{i}" for i in range(65)])
    with pytest.raises(BodyError, match="more than 64"):
        parse_register_body(too_many, compressed=False, version=479)
    too_long = encode_register_body(TOPICS, DV, filter_servers=["h" * 300])
    with pytest.raises(BodyError, match="longer than 256"):
        parse_register_body(too_long, compressed=False, version=479)


@pytest.mark.parametrize(
    "body",
    [
        b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":99999999999999999999999}}}',
        b'{"topicConfigSerializeWrapper":{"dataVersion":{"timestamp":"9223372036854775808"}}}',
        b'{"topicConfigSerializeWrapper":{"dataVersion":{"stateVersion":-1e30}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"writeQueueNums":4294967296}}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicSysFlag":"-2147483649"}}}}',
    ],
)
def test_numbers_beyond_java_types_in_register_bodies(body: bytes) -> None:
    with pytest.raises(BodyError, match="out of range for a Java"):
        parse_register_body(body, compressed=False, version=479)


def test_client_side_models_refuse_deep_or_huge_values_briefly() -> None:
    deep = b"[" * 900 + b"]" * 900
    with pytest.raises(BodyError) as err:
        parse_kv_table(b'{"table":{"k":' + deep + b"}}")
    assert len(str(err.value)) < 100
    with pytest.raises(BodyError):
        parse_topic_list(b'{"topicList":[' + deep + b"]}")
    with pytest.raises(BodyError, match="out of range"):
        QueueData.from_obj({"brokerName": "b", "perm": 2**31})
    with pytest.raises(BodyError):
        TopicConfig.from_obj("T", {"topicFilterType": [[[]]]})
    with pytest.raises(BodyError):
        TopicConfig.from_obj("T", {"attributes": {"a": [1]}})


# ---------------------------------------------------------------------------
# properties: Properties.store escaping


def test_store_escapes_as_java_does() -> None:
    assert properties.store({"k": "a=b:c#d!e\\f"}) == "k=a\\=b\\:c\\#d\\!e\\\\f\n"
    assert properties.store({"k": "  two"}) == "k=\\  two\n"  # only the leading space is escaped
    assert properties.store({"a key": "v"}) == "a\\ key=v\n"
    assert properties.store({"k": "x\ny\rz\tw\fv"}) == "k=x\\ny\\rz\\tw\\fv\n"
    assert properties.store({"k": "\u00e9\U0001f600\x00"}) == "k=\\u00E9\\uD83D\\uDE00\\u0000\n"


def test_stored_injection_stays_one_key() -> None:
    evil = {"productEnvName": "center\nkvConfigPath=/some/path"}
    assert properties.loads(properties.store(evil)) == evil
    assert properties.loads(properties.dumps(evil)) == {"productEnvName": "center", "kvConfigPath": "/some/path"}


def test_escaped_surrogate_pairs_join() -> None:
    assert properties.loads("k=\\uD83D\\uDE00\n") == {"k": "\U0001f600"}
    assert properties.loads("k=\\uD83D\n") == {"k": "\ud83d"}  # a lone one stays, as in Java


# ---------------------------------------------------------------------------
# config: classes and run-time checks


def test_every_key_has_a_class() -> None:
    config = NamesrvConfig()
    classes = {k: config_policy.key_class(k, config.configBlackList) for k in NamesrvConfig.keys()}
    assert classes["listenPort"] == classes["kvConfigPath"] == classes["bindAddress"] == "refused"
    assert classes["enableTopicList"] == classes["serverMaxConnections"] == "live"
    assert classes["frameMaxLength"] == "restart" and classes["serverWorkerThreads"] == "inert"
    assert config_policy.key_class("someLogDir") == "refused"
    assert config_policy.key_class("enableTopicList", "configBlackList; enableTopicList") == "refused"
    assert set(classes.values()) <= {"live", "restart", "inert", "refused"}


def test_config_ints_are_java_typed() -> None:
    config = NamesrvConfig()
    assert config.parse_values({"brokerChannelExpiredTime": "9223372036854775807"})["brokerChannelExpiredTime"] == 2**63 - 1
    with pytest.raises(ConfigError, match="out of range for a Java int"):
        config.parse_values({"serverMaxConnections": "2147483648"})
    with pytest.raises(ConfigError, match="is not an integer"):
        config.parse_values({"serverMaxConnections": "1_000"})
    config.registerBodyMaxTopics = 0
    with pytest.raises(ConfigError, match="registerBodyMaxTopics must be between"):
        config.validate()


def test_control_characters_are_refused() -> None:
    for text in ("a\nb", "a\rb", "a\tb", "a\x00b", "a\u2028b", "a\u200bb", "\ud800"):
        with pytest.raises(UpdateRefused, match="control character"):
            config_policy.check_text({"productEnvName": text})
    config_policy.check_text({"productEnvName": "caf\u00e9 = a:b #!"})


def test_run_time_checks() -> None:
    current = NamesrvConfig()
    state = RuntimeState(connections=5, uptime_seconds=10.0)

    def updated(**kw: Any) -> NamesrvConfig:
        new = NamesrvConfig()
        for k, v in kw.items():
            setattr(new, k, v)
        return new

    config_policy.check_update(updated(serverMaxConnections=5), current, state)
    for kw in (
        {"serverMaxConnections": 4},
        {"frameMaxLength": 1 << 20},
        {"serverChannelMaxIdleTimeSeconds": 30},
        {"waitSecondsForService": 601},
        {"needWaitForService": True, "waitSecondsForService": 60},
    ):
        with pytest.raises(UpdateRefused):
            config_policy.check_update(updated(**kw), current, state)
    # Waiting already over: turning the wait on is harmless.
    config_policy.check_update(updated(needWaitForService=True, waitSecondsForService=5), current, state)
    with pytest.raises(UpdateRefused, match="restart-only") as err:
        config_policy.check_classes({"listenPort": "1"}, current)
    assert err.value.permission
    config_policy.check_classes({"listenPort": "9876", "bindAddress": " 0.0.0.0 "}, current)  # unchanged


# ---------------------------------------------------------------------------
# the processor: KV bounds and register answers (no sockets)


def _decode(data: bytes | None) -> RemotingCommand:
    assert data is not None
    (cmd,) = FrameDecoder().feed(data)
    return cmd


def _processor(tmp_path: Any, **config: Any) -> NameServerProcessor:
    cfg = NamesrvConfig()
    for k, v in config.items():
        setattr(cfg, k, v)

    async def persist(path: str, data: bytes) -> None:
        pass

    return NameServerProcessor(cfg, KVConfig(str(tmp_path / "kv.json")), clock=lambda: 0.0, persist=persist)


async def test_register_answer_never_carries_an_order_table_beyond_the_frame(tmp_path: Any) -> None:
    proc = _processor(tmp_path, frameMaxLength=128 * 1024)
    proc.kv.table[NAMESPACE_ORDER_TOPIC_CONFIG] = {"T": "x" * 100_000}  # as if loaded from a file
    req = rq.register_broker(cluster="C", broker_name="b", broker_addr="h:1", broker_id=0, topics=TOPICS, data_version=DV)
    resp = _decode(proc.handle(req, "conn"))
    assert resp.code == ResponseCode.SUCCESS and resp.body == b""
    proc.kv.table[NAMESPACE_ORDER_TOPIC_CONFIG] = {"T": "small"}
    resp = _decode(proc.handle(req, "conn"))
    assert parse_kv_table(resp.body) == {"T": "small"}
    # A PUT that does not grow an oversized namespace is accepted.
    proc.kv.table[NAMESPACE_ORDER_TOPIC_CONFIG] = {"T": "x" * 100_000, "U": "y" * 10}
    resp = _decode(await proc.handle_async(rq.put_kv(NAMESPACE_ORDER_TOPIC_CONFIG, "U", "z"), "c"))
    assert resp.code == ResponseCode.SUCCESS
    resp = _decode(await proc.handle_async(rq.put_kv(NAMESPACE_ORDER_TOPIC_CONFIG, "U", "z" * 20), "c"))
    assert resp.code == ResponseCode.SYSTEM_ERROR and proc.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, "U") == "z"


async def test_update_body_bound_and_refusals_leave_config_untouched(tmp_path: Any) -> None:
    proc = _processor(tmp_path, configUpdateMaxBytes=1024)
    big = request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"enableTopicList=false\n" + b"#" * 1100)
    resp = _decode(await proc.handle_async(big, "c"))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "configUpdateMaxBytes (1024)" in (resp.remark or "")
    assert proc.config.enableTopicList is True
    mixed = rq.update_namesrv_config({"enableTopicList": "false", "productEnvName": "a\nb"})
    resp = _decode(await proc.handle_async(mixed, "c"))
    assert resp.code == ResponseCode.SYSTEM_ERROR and proc.config.enableTopicList is True


def test_register_limits_follow_the_config(tmp_path: Any) -> None:
    proc = _processor(tmp_path, registerBodyMaxTopics=1)
    req = rq.register_broker(cluster="C", broker_name="b", broker_addr="h:1", broker_id=0, topics=TOPICS, data_version=DV)
    resp = _decode(proc.handle(req, "conn"))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "more than the limit of 1" in (resp.remark or "")
    assert proc.table.brokers == {}


# ---------------------------------------------------------------------------
# route table: mappings leave with their broker


def test_mappings_are_dropped_with_their_broker() -> None:
    table = RouteTable()
    info = {"bname": "a", "currIdMap": {0: 0}, "topic": "ST"}

    def reg(name: str, addr: str, mappings: dict[str, Any]) -> None:
        body = parse_register_body(
            encode_register_body([TopicConfig("ST", 4, 4, 6), TopicConfig("X", 4, 4, 6)], DV, mapping_infos=mappings),
            compressed=False,
            version=479,
        )
        table.register_broker(Registration("C", addr, name, 0), lambda: body, body_digest=None, conn=addr, now=0.0)

    reg("a", "h:1", {"ST": info})
    reg("b", "h:2", {})
    assert b"topicQueueMappingByBroker" in (table.route_body("ST", True) or b"")
    table.connection_closed("h:1")
    assert table.mappings == {}
    body = table.route_body("ST", True)
    assert body is not None and b"topicQueueMappingByBroker" not in body
