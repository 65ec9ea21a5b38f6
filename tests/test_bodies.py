"""Body formats: fastjson quirks, register bodies, routes, properties text.

Byte-exact expectations come from the protocol reference (sections 4.1-4.14);
property tests prove the encoders and parsers invert each other and that
malformed bodies only ever surface as BodyError / PropertiesError.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting import bodies, fastjson, properties, register_body
from remoting.register_body import RegisterLimits
from remoting.bodies import (
    BodyError,
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicRouteData,
    encode_kv_table,
    encode_topic_list,
    parse_kv_table,
    parse_topic_list,
    perm_to_string,
)
from remoting.register_body import (
    encode_register_body,
    parse_register_body,
)

PROPS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

INT64 = st.integers(-(2**63), 2**63 - 1)

# ---------------------------------------------------------------------------
# fastjson: the reference's examples

BROKER_LEGACY = (
    b'{"brokerAddrs":{0:"192.168.1.10:10911",1:"192.168.1.11:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster","enableActingMaster":false,"zoneName":"zone1"}'
)
BROKER_STANDARD = (
    b'{"brokerAddrs":{"0":"192.168.1.10:10911","1":"192.168.1.11:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster","enableActingMaster":false}'
)
ROUTE_STANDARD = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"192.168.1.10:10911","1":"192.168.1.11:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster","enableActingMaster":false}],'
    b'"filterServerTable":{},'
    b'"orderTopicConf":"broker-a:4;broker-b:4",'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}],'
    b'"topicQueueMappingByBroker":{"broker-a":{"bname":"broker-a","currIdMap":{"0":0},"dirty":false,"epoch":0,'
    b'"scope":"__global__","topic":"T","totalQueues":2}}}'
)


def _broker_obj(zone: bool) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "brokerAddrs": {0: "192.168.1.10:10911", 1: "192.168.1.11:10911"},
        "brokerName": "broker-a",
        "cluster": "DefaultCluster",
        "enableActingMaster": False,
    }
    if zone:
        obj["zoneName"] = "zone1"
    return obj


def test_fastjson_legacy_form_has_bare_integer_keys() -> None:
    assert fastjson.dumps(_broker_obj(zone=True)) == BROKER_LEGACY
    assert fastjson.dumps(_broker_obj(zone=True), standard=False) == BROKER_LEGACY


def test_fastjson_standard_form_quotes_and_sorts_integer_keys() -> None:
    assert fastjson.dumps(_broker_obj(zone=False), standard=True) == BROKER_STANDARD
    unsorted = _broker_obj(zone=False)
    unsorted["brokerAddrs"] = {1: "192.168.1.11:10911", 0: "192.168.1.10:10911"}
    assert fastjson.dumps(unsorted, standard=True) == BROKER_STANDARD
    # Numeric, not lexicographic, order: 2 before 10, -1 first.
    assert fastjson.dumps({10: "a", 2: "b", -1: "c"}, standard=True) == b'{"-1":"c","2":"b","10":"a"}'
    # The legacy form keeps the order given (Java's HashMap order is the caller's job).
    assert fastjson.dumps({10: "a", 2: "b"}) == b'{10:"a",2:"b"}'


def test_broker_data_model_emits_both_forms() -> None:
    bd = BrokerData("DefaultCluster", "broker-a", {1: "192.168.1.11:10911", 0: "192.168.1.10:10911"}, zone_name="zone1")
    assert fastjson.dumps(bd.to_obj()) == BROKER_LEGACY
    bd.zone_name = None
    assert fastjson.dumps(bd.to_obj(), standard=True) == BROKER_STANDARD
    assert bd.master_addr == "192.168.1.10:10911"


def test_fastjson_standard_escapes_non_ascii_and_slash() -> None:
    assert fastjson.dumps({"t": "caf\u00e9/x"}, standard=True) == b'{"t":"caf\\u00E9\\/x"}'
    assert fastjson.dumps("\u00e9", standard=True) == b'"\\u00E9"'
    assert fastjson.dumps("a/b", standard=True) == b'"a\\/b"'
    assert fastjson.dumps("\u4e2d\u00ff", standard=True) == b'"\\u4E2D\\u00FF"'
    # Astral characters as an upper-case surrogate pair.
    assert fastjson.dumps("\U0001f600", standard=True) == b'"\\uD83D\\uDE00"'
    # A literal backslash-u in the text is not an escape to upper-case.
    assert fastjson.dumps("\\u00e9", standard=True) == b'"\\\\u00e9"'
    # Keys get the same treatment.
    assert fastjson.dumps({"k/\u00e9": 1}, standard=True) == b'{"k\\/\\u00E9":1}'


def test_fastjson_legacy_writes_raw_utf8() -> None:
    assert fastjson.dumps({"t": "caf\u00e9/x"}) == '{"t":"caf\u00e9/x"}'.encode()
    assert fastjson.dumps(["\u4e2d", True, False, None, -3]) == '["\u4e2d",true,false,null,-3]'.encode()


def test_fastjson_omits_null_map_values() -> None:
    assert fastjson.dumps({"a": None, "b": 1}) == b'{"b":1}'
    assert fastjson.dumps({"a": None, "b": 1}, standard=True) == b'{"b":1}'


def test_fastjson_loads_bare_integer_keys() -> None:
    assert fastjson.loads(b'{"brokerAddrs":{0:"a",1:"b"}}') == {"brokerAddrs": {"0": "a", "1": "b"}}
    assert fastjson.loads('{"brokerAddrs":{0:"a",1:"b"}}') == {"brokerAddrs": {"0": "a", "1": "b"}}
    assert fastjson.loads(b'{ -1 : "x" , 22:"y"}') == {"-1": "x", "22": "y"}
    assert fastjson.loads(b'{"c":[{3:"d"},{4:[5,6]}]}') == {"c": [{"3": "d"}, {"4": [5, 6]}]}


def test_fastjson_loads_does_not_corrupt_strings_that_look_like_keys() -> None:
    tricky = b'{"a":"x,1:y{2:z","brokerAddrs":{0:"a",1:"b"},"q":"\\"{3:\\"","s":",4:"}'
    assert fastjson.loads(tricky) == {
        "a": "x,1:y{2:z",
        "brokerAddrs": {"0": "a", "1": "b"},
        "q": '"{3:"',
        "s": ",4:",
    }
    # Valid JSON (no bare keys) containing such strings is untouched too.
    assert fastjson.loads(b'{"a":"{1:2,3:4}"}') == {"a": "{1:2,3:4}"}


def test_fastjson_loads_accepts_memoryview_and_bytearray() -> None:
    assert fastjson.loads(bytearray(b'{0:"a"}')) == {"0": "a"}
    assert fastjson.loads(memoryview(b'{0:"a"}')) == {"0": "a"}


@pytest.mark.parametrize("bad", [b"{oops", b"", b"{0:}", b'{"a":1', b"\xff\xfe", b"{0:'a'}", b"nul"])
def test_fastjson_loads_rejects_with_body_error(bad: bytes) -> None:
    with pytest.raises(BodyError):
        fastjson.loads(bad)


# ---------------------------------------------------------------------------
# fastjson: properties

_chars = st.characters(codec="utf-8") | st.sampled_from(
    ['"', "\\", "/", "\n", "\r", "\t", "\x00", "\x01", "\x1f", "\x7f", "\u2028", "\u00e9", "\U0001f600", ",", ":", "{", "}"]
)
_strings = st.text(alphabet=_chars, max_size=16) | st.sampled_from([",1:", "{2:", '","3":"', "\\u00e9", "a/b", "\\/"])
_scalars = _strings | INT64 | st.booleans()
_json_data = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(_strings, inner, max_size=4)
    | st.dictionaries(INT64, inner, max_size=4),
    max_leaves=16,
)


def _stringify_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _stringify_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify_keys(v) for v in value]
    return value


@PROPS
@given(_json_data, st.booleans())
def test_fastjson_round_trips(value: Any, standard: bool) -> None:
    encoded = fastjson.dumps(value, standard=standard)
    assert fastjson.loads(encoded) == _stringify_keys(value)
    assert fastjson.loads(encoded.decode("utf-8")) == _stringify_keys(value)


@PROPS
@given(_json_data)
def test_fastjson_standard_output_is_ascii_strict_json(value: Any) -> None:
    encoded = fastjson.dumps(value, standard=True)
    text = encoded.decode("ascii")  # BrowserCompatible: every non-ASCII char escaped
    assert json.loads(text) == _stringify_keys(value)  # strict JSON, no bare keys
    # Every \uXXXX escape is upper-case hex; no raw "/" anywhere.
    for hexdigits in re.findall(r"(?<!\\)(?:\\\\)*\\u([0-9a-fA-F]{4})", text):
        assert hexdigits == hexdigits.upper()
    assert re.search(r"(?<!\\)(?:\\\\)*/", text) is None


@FEW
@given(st.dictionaries(INT64, st.text(max_size=5), min_size=1, max_size=10))
def test_fastjson_standard_sorts_integer_keys_numerically(mapping: dict[int, str]) -> None:
    keys = list(json.loads(fastjson.dumps(mapping, standard=True)))
    assert keys == [str(k) for k in sorted(mapping)]
    legacy = fastjson.dumps(mapping).decode()
    assert legacy.startswith("{" + str(next(iter(mapping))) + ":")  # bare, in the given order
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(legacy)  # not JSON: hence fastjson.loads


@PROPS
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_characters='"\\', min_codepoint=0x20), max_size=20))
def test_fastjson_legacy_strings_are_raw(text: str) -> None:
    assert fastjson.dumps(text) == ('"' + text + '"').encode("utf-8")


@PROPS
@given(st.binary(max_size=200) | st.text(alphabet='{}[]:,"\\0123456789-abtrufnl ', max_size=60).map(str.encode))
def test_fastjson_loads_arbitrary_input_raises_only_body_error(data: bytes) -> None:
    try:
        fastjson.loads(data)
    except BodyError:
        pass


# ---------------------------------------------------------------------------
# DataVersion, TopicConfig


def test_data_version_json() -> None:
    dv = DataVersion(3, 1_700_000_000_000, 0)
    assert dv.encode() == b'{"counter":3,"stateVersion":0,"timestamp":1700000000000}'
    assert DataVersion.decode(dv.encode()) == dv
    # 4.9.x sends no stateVersion; it parses as 0. Strings are accepted as numbers.
    assert DataVersion.decode(b'{"counter":"5","timestamp":7}') == DataVersion(5, 7, 0)
    assert dv.next(1_700_000_000_001) == DataVersion(4, 1_700_000_000_001, 0)
    with pytest.raises(BodyError):
        DataVersion.decode(b'{"counter":"five"}')
    with pytest.raises(BodyError):
        DataVersion.decode(b"[1,2]")


def test_topic_config_forms() -> None:
    tc = TopicConfig("TopicTest", 4, 4, 6)
    assert fastjson.dumps_fast(tc.to_obj()) == (
        b'{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
        b'"topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}'
    )
    assert tc.encode_compact() == "TopicTest 4 4 6 SINGLE_TAG {}"
    assert TopicConfig.from_obj("x", tc.to_obj()) == tc
    assert TopicConfig.from_obj("Fallback", {}) == TopicConfig("Fallback")  # Java defaults 16/16/6
    assert tc.queue_data == (4, 4, 6, 0)


def test_perm_to_string() -> None:
    assert perm_to_string(6) == "RW-"
    assert perm_to_string(7) == "RWX"
    assert perm_to_string(4) == "R--"
    assert perm_to_string(0) == "---"


# ---------------------------------------------------------------------------
# REGISTER_BROKER bodies

TOPICS = [
    TopicConfig("TBW102", 8, 8, 7),
    TopicConfig("T1", 4, 4, 6, topic_sys_flag=3, attributes={"+message.type": "NORMAL"}),
    TopicConfig("T\u00e9", 2, 1, 2),
]
DV = DataVersion(3, 1_700_000_000_000, 2)


@pytest.mark.parametrize(
    "compressed, version",
    [(False, 479), (False, 407), (False, 37), (True, 479), (True, 413), (True, 407), (False, 36), (False, 30)],
)
def test_register_body_round_trips_in_every_form(compressed: bool, version: int) -> None:
    servers = ["10.0.0.1:1"] if version >= 37 else []
    body = encode_register_body(TOPICS, DV, filter_servers=servers, compressed=compressed, version=version)
    parsed = parse_register_body(body, compressed=compressed, version=version)
    assert parsed.data_version == DV
    sysflag = 0 if compressed else 3  # the compact form does not carry topicSysFlag
    assert parsed.topics == {"TBW102": (8, 8, 7, 0), "T1": (4, 4, 6, sysflag), "T\u00e9": (2, 1, 2, 0)}
    assert parsed.filter_servers == servers
    assert parsed.mapping_infos == {}


def test_register_body_json_layout() -> None:
    body = encode_register_body(TOPICS[:1], DataVersion(1, 2, 0), filter_servers=["f:1"])
    obj = json.loads(body)
    assert list(obj) == ["filterServerList", "topicConfigSerializeWrapper"]
    assert obj["filterServerList"] == ["f:1"]
    assert obj["topicConfigSerializeWrapper"]["dataVersion"] == {"counter": 1, "stateVersion": 0, "timestamp": 2}
    assert obj["topicConfigSerializeWrapper"]["topicConfigTable"]["TBW102"]["perm"] == 7
    # Old senders (< V3_0_11 = 37): a bare TopicConfigSerializeWrapper.
    old = json.loads(encode_register_body(TOPICS[:1], DataVersion(1, 2, 0), version=36))
    assert set(old) == {"dataVersion", "topicConfigTable"}


def test_register_body_old_form_is_read_as_a_bare_wrapper() -> None:
    wrapper = b'{"dataVersion":{"counter":9,"timestamp":1},"topicConfigTable":{"A":{"topicName":"A","perm":6,"readQueueNums":1,"writeQueueNums":2}}}'
    parsed = parse_register_body(wrapper, compressed=False, version=30)
    assert parsed.data_version == DataVersion(9, 1, 0)
    assert parsed.topics == {"A": (1, 2, 6, 0)} and parsed.filter_servers == []
    # The same bytes from a >= 37 sender have no topicConfigSerializeWrapper: no topics.
    assert parse_register_body(wrapper, compressed=False, version=479).topics == {}


def _items(data: bytes) -> list[bytes | int]:
    """Split an inflated compressed register body into its length-prefixed items."""
    out: list[bytes | int] = []
    pos = 0
    (n,) = struct.unpack_from(">i", data, pos)
    out.append(data[pos + 4 : pos + 4 + n])
    pos += 4 + n
    (count,) = struct.unpack_from(">i", data, pos)
    out.append(count)
    pos += 4
    for _ in range(count + 1):  # topics, then the filter server list
        (n,) = struct.unpack_from(">i", data, pos)
        out.append(data[pos + 4 : pos + 4 + n])
        pos += 4 + n
    if pos < len(data):
        (m,) = struct.unpack_from(">i", data, pos)
        out.append(m)
        pos += 4
    assert pos == len(data)
    return out


def test_compressed_register_body_layout_per_version() -> None:
    v5 = zlib.decompress(encode_register_body(TOPICS[:2], DV, filter_servers=["f:1"], compressed=True, version=479))
    items = _items(v5)
    assert items[0] == b'{"counter":3,"stateVersion":2,"timestamp":1700000000000}'
    assert items[1] == 2
    assert items[2] == b"TBW102 8 8 7 SINGLE_TAG {}"  # 5.x: attributes JSON as a 6th field
    assert items[3] == b'T1 4 4 6 SINGLE_TAG {"+message.type":"NORMAL"}'
    assert items[4] == b'["f:1"]'
    assert items[5] == 0  # >= V5_0_0: the (empty) static-topic mapping section
    v4 = zlib.decompress(encode_register_body(TOPICS[:2], DV, filter_servers=["f:1"], compressed=True, version=407))
    items = _items(v4)
    # 4.9.x TopicConfig.decode wants exactly 5 space-separated fields.
    assert items[2] == b"TBW102 8 8 7 SINGLE_TAG"
    assert items[3] == b"T1 4 4 6 SINGLE_TAG"
    assert items[4] == b'["f:1"]' and len(items) == 5  # no mapping section


def _pack_item(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def test_compressed_register_body_with_static_topic_mappings() -> None:
    info = b'{"bname":"broker-a","currIdMap":{0:0},"dirty":false,"epoch":0,"scope":"__global__","topic":"S","totalQueues":2}'
    raw = (
        _pack_item(DV.encode())
        + struct.pack(">i", 1)
        + _pack_item(b"S 2 2 6 SINGLE_TAG")
        + _pack_item(b"[]")
        + struct.pack(">i", 1)
        + _pack_item(info)
    )
    parsed = parse_register_body(zlib.compress(raw), compressed=True, version=479)
    assert parsed.topics == {"S": (2, 2, 6, 0)}
    assert parsed.mapping_infos["S"]["currIdMap"] == {0: 0}  # integer keys, as Java's Map<Integer, Integer>
    # A 4.9.x sender has no mapping section: the same prefix, read at 407, ignores the tail.
    assert parse_register_body(zlib.compress(raw), compressed=True, version=407).mapping_infos == {}


def test_bodyless_register_gives_empty_topics() -> None:
    for compressed in (False, True):
        for version in (30, 407, 479):
            parsed = parse_register_body(b"", compressed=compressed, version=version)
            assert parsed.topics == {} and parsed.data_version == DataVersion()
            assert parsed.filter_servers == [] and parsed.mapping_infos == {}


def test_compressed_body_that_inflates_past_the_limit_is_refused() -> None:
    topic = _pack_item(b"T 1 1 6 SINGLE_TAG")
    raw = _pack_item(DV.encode()) + struct.pack(">i", 400_000) + topic * 400_000
    bomb = zlib.compress(raw, 9)
    assert len(bomb) < 64 * 1024 and len(raw) > 8 * 1024 * 1024
    limits = RegisterLimits(max_inflated_bytes=1024 * 1024, max_topics=1_000_000)
    with pytest.raises(BodyError, match="inflates past the size limit"):
        parse_register_body(bomb, compressed=True, version=479, limits=limits)
    # A bomb of zeros is refused by its very first item, after one inflate step.
    with pytest.raises(BodyError, match="not valid JSON"):
        parse_register_body(zlib.compress(b"\0" * (64 << 20)), compressed=True, version=479)


def test_inflate_limit_boundary() -> None:
    body = encode_register_body(TOPICS, DV, compressed=True, version=479)
    size = len(zlib.decompress(body))
    at_limit = RegisterLimits(max_inflated_bytes=size)
    assert parse_register_body(body, compressed=True, version=479, limits=at_limit).data_version == DV
    with pytest.raises(BodyError, match="size limit"):
        parse_register_body(body, compressed=True, version=479, limits=RegisterLimits(max_inflated_bytes=size - 1))


def test_default_inflate_limit_is_16_mib() -> None:
    assert register_body.DEFAULT_REGISTER_LIMITS.max_inflated_bytes == 16 * 1024 * 1024


@pytest.mark.parametrize("version", [407, 479])
def test_every_truncation_of_a_compressed_body_is_refused(version: int) -> None:
    body = encode_register_body(TOPICS, DV, filter_servers=["f:1"], compressed=True, version=version)
    for cut in range(1, len(body)):
        with pytest.raises(BodyError):
            parse_register_body(body[:cut], compressed=True, version=version)


@pytest.mark.parametrize(
    "body",
    [
        b"not zlib at all",
        b"\x78\x9c garbage",
        zlib.compress(b""),
        zlib.compress(b"\x00\x00\x00\x05{}"),  # item shorter than its length
        zlib.compress(_pack_item(b"{}") + struct.pack(">i", -1)),  # negative topic count
        zlib.compress(_pack_item(b"{}") + struct.pack(">i", 1) + _pack_item(b"T 1 2")),  # < 5 fields
        zlib.compress(_pack_item(b"{}") + struct.pack(">i", 1) + _pack_item(b"T x 1 6 SINGLE_TAG")),
        zlib.compress(_pack_item(b"{}") + struct.pack(">i", 1) + _pack_item(b"\xff 1 1 6 SINGLE_TAG")),
        zlib.compress(_pack_item(b"[]") + struct.pack(">i", 0) + _pack_item(b"[]")),  # DataVersion not an object
        zlib.compress(_pack_item(b"{}") + struct.pack(">i", 0) + _pack_item(b'{"a":1}')),  # filters not a list
        zlib.compress(_pack_item(b"{}") + struct.pack(">i", 0) + _pack_item(b"[1]")),  # filters not strings
        zlib.compress(_pack_item(b"{}") + struct.pack(">i", 0)),  # no filter list
        zlib.compress(_pack_item(b"{}") + struct.pack(">i", 0) + _pack_item(b"[]")),  # 479: no mapping count
    ],
)
def test_malformed_compressed_bodies(body: bytes) -> None:
    with pytest.raises(BodyError):
        parse_register_body(body, compressed=True, version=479)


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b"{oops",
        b'"x"',
        b'{"topicConfigSerializeWrapper":[]}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":[]}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":5}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":"x"}}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":[]}}}}',
        b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":{}}}}',
        b'{"filterServerList":"f:1","topicConfigSerializeWrapper":{}}',
        b'{"filterServerList":[1],"topicConfigSerializeWrapper":{}}',
    ],
)
def test_malformed_json_register_bodies(body: bytes) -> None:
    with pytest.raises(BodyError):
        parse_register_body(body, compressed=False, version=479)


def test_json_register_body_with_java_quirks() -> None:
    body = (
        b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":2},'
        b'"topicConfigTable":{"key":{"topicName":"Real","perm":"6","readQueueNums":"4","writeQueueNums":4}},'
        b'"topicQueueMappingInfoMap":{"S":{"currIdMap":{0:1},"topic":"S"}}}}'
    )
    parsed = parse_register_body(body, compressed=False, version=479)
    assert parsed.topics == {"Real": (4, 4, 6, 0)}  # topicName wins over the table key
    assert parsed.mapping_infos == {"S": {"currIdMap": {0: 1}, "topic": "S"}}


_topic_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789_-%|\u00e9\u4e2d", min_size=1, max_size=12)
_topic_configs = st.builds(
    TopicConfig,
    _topic_names,
    read_queue_nums=st.integers(0, 1024),
    write_queue_nums=st.integers(0, 1024),
    perm=st.integers(0, 15),
    topic_filter_type=st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
    topic_sys_flag=st.integers(0, 3),
    attributes=st.dictionaries(st.text(alphabet="+abc.", min_size=1, max_size=5), st.text(alphabet="xyz ", max_size=5), max_size=2),
)


@FEW
@given(
    st.lists(_topic_configs, max_size=8, unique_by=lambda tc: tc.topic_name),
    st.builds(DataVersion, INT64, INT64, INT64),
    st.lists(st.text(alphabet="0123456789.:", min_size=1, max_size=15), max_size=3),
    st.sampled_from([(False, 479), (False, 407), (False, 30), (True, 479), (True, 407)]),
)
def test_register_body_round_trip_property(
    configs: list[TopicConfig], dv: DataVersion, servers: list[str], form: tuple[bool, int]
) -> None:
    compressed, version = form
    body = encode_register_body(configs, dv, filter_servers=servers, compressed=compressed, version=version)
    parsed = parse_register_body(body, compressed=compressed, version=version)
    assert parsed.data_version == dv
    assert parsed.topics == {
        tc.topic_name: (tc.read_queue_nums, tc.write_queue_nums, tc.perm, 0 if compressed else tc.topic_sys_flag)
        for tc in configs
    }
    assert parsed.filter_servers == (servers if version >= 37 else [])


@FEW
@given(st.data())
def test_corrupted_compressed_bodies_raise_only_body_error(data: st.DataObject) -> None:
    raw = bytearray(zlib.decompress(encode_register_body(TOPICS, DV, filter_servers=["f:1"], compressed=True)))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    raw = raw[: data.draw(st.integers(0, len(raw)))]
    try:
        parse_register_body(zlib.compress(bytes(raw)), compressed=True, version=data.draw(st.sampled_from([407, 479])))
    except BodyError:
        pass


_any_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)


def _shaped(keys: list[str]) -> st.SearchStrategy[Any]:
    """Objects using the real property names with values of any type."""
    return st.dictionaries(st.sampled_from(keys) | st.text(max_size=4), _any_json, max_size=len(keys))


_WRAPPER_KEYS = ["dataVersion", "topicConfigTable", "topicQueueMappingInfoMap"]
_TOPIC_KEYS = ["topicName", "perm", "readQueueNums", "writeQueueNums", "topicSysFlag", "attributes", "order"]
_register_json = st.fixed_dictionaries(
    {},
    optional={
        "filterServerList": st.lists(st.text(max_size=5), max_size=2) | _any_json,
        "topicConfigSerializeWrapper": st.fixed_dictionaries(
            {},
            optional={
                "dataVersion": _shaped(["counter", "timestamp", "stateVersion"]) | _any_json,
                "topicConfigTable": st.dictionaries(st.text(max_size=4), _shaped(_TOPIC_KEYS) | _any_json, max_size=3)
                | _any_json,
                "topicQueueMappingInfoMap": _any_json,
            },
        )
        | _any_json,
    },
)


@FEW
@given(_register_json, st.sampled_from([30, 479]))
def test_hostile_json_register_bodies_raise_only_body_error(obj: Any, version: int) -> None:
    try:
        parsed = parse_register_body(orjson.dumps(obj), compressed=False, version=version)
    except BodyError:
        return
    for name, quad in parsed.topics.items():
        assert isinstance(name, str) and all(type(x) is int for x in quad)


# ---------------------------------------------------------------------------
# TopicRouteData, ClusterInfo, small bodies


def test_route_standard_example_decodes_and_reencodes_exactly() -> None:
    route = TopicRouteData.decode(ROUTE_STANDARD)
    assert route.order_topic_conf == "broker-a:4;broker-b:4"
    assert route.queue_datas == [QueueData("broker-a", 4, 4, 6, 0)]
    [bd] = route.broker_datas
    assert bd.broker_addrs == {0: "192.168.1.10:10911", 1: "192.168.1.11:10911"}
    assert (bd.cluster, bd.broker_name, bd.enable_acting_master, bd.zone_name) == ("DefaultCluster", "broker-a", False, None)
    assert route.filter_server_table == {}
    assert route.topic_queue_mapping_by_broker is not None
    assert route.topic_queue_mapping_by_broker["broker-a"]["totalQueues"] == 2
    assert route.encode(standard=True) == ROUTE_STANDARD


def test_route_legacy_form_decodes_like_the_standard_one() -> None:
    legacy = (
        b'{"brokerDatas":[' + BROKER_LEGACY + b'],"filterServerTable":{"192.168.1.10:10911":["f:1"]},'
        b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
    )
    route = TopicRouteData.decode(legacy)
    [bd] = route.broker_datas
    assert bd.broker_addrs == {0: "192.168.1.10:10911", 1: "192.168.1.11:10911"}
    assert bd.zone_name == "zone1"
    assert route.filter_server_table == {"192.168.1.10:10911": ["f:1"]}
    assert route.order_topic_conf is None and route.topic_queue_mapping_by_broker is None
    # Both encodings of the same model decode to the same model.
    assert TopicRouteData.decode(route.encode(standard=False)) == route
    assert TopicRouteData.decode(route.encode(standard=True)) == route
    assert b'{0:"192.168.1.10:10911",1:"192.168.1.11:10911"}' in route.encode(standard=False)
    assert b'{"0":"192.168.1.10:10911","1":"192.168.1.11:10911"}' in route.encode(standard=True)


def test_route_accepts_pre_4_9_topic_syn_flag() -> None:
    body = b'{"brokerDatas":[],"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":1,"writeQueueNums":1,"topicSynFlag":3}]}'
    assert TopicRouteData.decode(body).queue_datas[0].topic_sys_flag == 3


def test_empty_route_encoding_always_has_the_three_keys() -> None:
    assert TopicRouteData([], []).encode(standard=True) == b'{"brokerDatas":[],"filterServerTable":{},"queueDatas":[]}'


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'{"queueDatas":{"a":1}}',
        b'{"brokerDatas":"x"}',
        b'{"queueDatas":[{"perm":6}]}',  # no brokerName
        b'{"queueDatas":[5]}',
        b'{"brokerDatas":[{"brokerAddrs":{"x":"a"}}]}',  # broker id not a number
        b'{"brokerDatas":[{"brokerAddrs":[]}]}',
        b'{"filterServerTable":[]}',
        b'{"filterServerTable":{"a":5}}',
        b'{"filterServerTable":{"a":"f:1"}}',
        b'{"orderTopicConf":5}',
    ],
)
def test_malformed_routes(body: bytes) -> None:
    with pytest.raises(BodyError):
        TopicRouteData.decode(body)


CLUSTER_INFO = (
    b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"192.168.1.10:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster","enableActingMaster":false}},'
    b'"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
)


def test_cluster_info_example_decodes() -> None:
    info = ClusterInfo.decode(CLUSTER_INFO)
    assert info.cluster_addr_table == {"DefaultCluster": ["broker-a"]}
    bd = info.broker_addr_table["broker-a"]
    assert bd.broker_addrs == {0: "192.168.1.10:10911"} and bd.cluster == "DefaultCluster"


@pytest.mark.parametrize(
    "body",
    [b"[]", b'{"brokerAddrTable":[]}', b'{"clusterAddrTable":{"c":5}}', b'{"clusterAddrTable":{"c":"broker-a"}}'],
)
def test_malformed_cluster_info(body: bytes) -> None:
    with pytest.raises(BodyError):
        ClusterInfo.decode(body)


_route_json = st.fixed_dictionaries(
    {},
    optional={
        "brokerDatas": st.lists(_shaped(["cluster", "brokerName", "brokerAddrs", "enableActingMaster", "zoneName"]), max_size=2)
        | _any_json,
        "queueDatas": st.lists(_shaped(["brokerName", "perm", "readQueueNums", "writeQueueNums", "topicSysFlag"]), max_size=2)
        | _any_json,
        "filterServerTable": st.dictionaries(st.text(max_size=3), _any_json, max_size=2) | _any_json,
        "orderTopicConf": _any_json,
        "topicQueueMappingByBroker": _any_json,
    },
)


@FEW
@given(_route_json)
def test_hostile_routes_raise_only_body_error(obj: Any) -> None:
    try:
        route = TopicRouteData.decode(orjson.dumps(obj))
    except BodyError:
        return
    for fs in route.filter_server_table.values():
        assert all(isinstance(x, str) for x in fs)


@FEW
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "brokerAddrTable": st.dictionaries(st.text(max_size=3), _any_json, max_size=2) | _any_json,
            "clusterAddrTable": st.dictionaries(st.text(max_size=3), _any_json, max_size=2) | _any_json,
        },
    )
)
def test_hostile_cluster_info_raises_only_body_error(obj: Any) -> None:
    try:
        info = ClusterInfo.decode(orjson.dumps(obj))
    except BodyError:
        return
    for names in info.cluster_addr_table.values():
        assert all(isinstance(x, str) for x in names)


@FEW
@given(_any_json)
def test_small_body_parsers_raise_only_body_error(obj: Any) -> None:
    raw = orjson.dumps(obj)
    for parse in (parse_topic_list, parse_kv_table, DataVersion.decode, TopicRouteData.decode, ClusterInfo.decode):
        try:
            parse(raw)
        except BodyError:
            pass


def test_topic_list_and_kv_table() -> None:
    assert encode_topic_list(["TopicTest", "TBW102"]) == b'{"topicList":["TopicTest","TBW102"]}'
    assert encode_topic_list(["DefaultCluster"], "192.168.1.10:10911") == (
        b'{"brokerAddr":"192.168.1.10:10911","topicList":["DefaultCluster"]}'
    )
    assert parse_topic_list(b'{"topicList":["a","b"]}') == (["a", "b"], None)
    assert parse_topic_list(b'{"brokerAddr":"x:1","topicList":["a"]}') == (["a"], "x:1")
    assert parse_topic_list(b"{}") == ([], None)
    assert encode_kv_table({"TopicTest": "broker-a:4"}) == b'{"table":{"TopicTest":"broker-a:4"}}'
    assert parse_kv_table(b'{"table":{"TopicTest":"broker-a:4","n":null}}') == {"TopicTest": "broker-a:4"}
    with pytest.raises(BodyError):
        parse_topic_list(b'{"topicList":"a"}')
    with pytest.raises(BodyError):
        parse_kv_table(b'{"table":[]}')


@FEW
@given(st.lists(st.text(max_size=10), max_size=5), st.none() | st.text(max_size=10), st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=5))
def test_small_bodies_round_trip(topics: list[str], addr: str | None, table: dict[str, str]) -> None:
    assert parse_topic_list(encode_topic_list(topics, addr)) == (topics, addr)
    assert parse_kv_table(encode_kv_table(table)) == table


# ---------------------------------------------------------------------------
# Java .properties text


def test_properties_separators() -> None:
    text = "a=1\nb:2\nc 3\nd = 4\ne\t:\t5\nf  =  6\ng==7\nh:=8\ni\n"
    assert properties.loads(text) == {
        "a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6", "g": "=7", "h": "=8", "i": "",
    }


def test_properties_comments_and_blank_lines() -> None:
    text = "# comment=1\n! bang=2\n   # indented=3\n\t! indented=4\n\n   \nreal=5\nx=#not a comment\n"
    assert properties.loads(text) == {"real": "5", "x": "#not a comment"}


def test_properties_line_continuation() -> None:
    assert properties.loads("d=line\\\n   continued\n") == {"d": "linecontinued"}
    assert properties.loads("d=a\\\n  b\\\n  c\n") == {"d": "abc"}
    # An even number of trailing backslashes is an escaped backslash, not a continuation.
    assert properties.loads("a=b\\\\\nc=d\n") == {"a": "b\\", "c": "d"}
    # A continued line starting with # is not a comment.
    assert properties.loads("a=x\\\n#y\n") == {"a": "x#y"}
    # A comment line ending in a backslash does not continue.
    assert properties.loads("#c\\\na=1\n") == {"a": "1"}
    # The key itself may be continued.
    assert properties.loads("ke\\\n  y=v\n") == {"key": "v"}
    # A trailing backslash at end of input is dropped.
    assert properties.loads("a=b\\") == {"a": "b"}


def test_properties_escapes() -> None:
    assert properties.loads("e=\\u00e9\\u4E2D\\tx\n") == {"e": "\u00e9\u4e2d\tx"}
    assert properties.loads("n=a\\nb\\rc\\fd\n") == {"n": "a\nb\rc\fd"}
    assert properties.loads("q=\\q\\:\\=\\ \\#\n") == {"q": "q:= #"}
    assert properties.loads("a\\=b=c\n") == {"a=b": "c"}
    assert properties.loads("a\\ b c\n") == {"a b": "c"}
    assert properties.loads("a\\:b:c\n") == {"a:b": "c"}
    assert properties.loads("\\u0041=x\n") == {"A": "x"}


def test_properties_line_endings_and_whitespace() -> None:
    assert properties.loads("a=1\r\nb=2\rc=3\n") == {"a": "1", "b": "2", "c": "3"}
    assert properties.loads("   a = 1  \n") == {"a": "1  "}  # trailing whitespace kept, as in Java
    assert properties.loads("\f a=1\n") == {"a": "1"}
    assert properties.loads("a=1\na=2\n") == {"a": "2"}  # later keys win
    assert properties.loads("") == {}


@pytest.mark.parametrize("text", ["a=\\u12", "a=\\u12zz", "a=\\uXYZW", "\\u00g0=x", "a=\\u", "a=b\\u00e"])
def test_properties_malformed_unicode_escape(text: str) -> None:
    with pytest.raises(properties.PropertiesError, match="Malformed"):
        properties.loads(text)


def test_properties_dumps_like_mixall() -> None:
    assert properties.dumps({"b": "2", "a": "1", "n": None}) == "a=1\nb=2\n"
    assert properties.dumps({"b": "2", "a": 1}, sort=False) == "b=2\na=1\n"
    assert properties.dumps({}) == ""
    # No escaping of any kind (MixAll.properties2String).
    assert properties.dumps({"p": "C:\\dir x=y"}) == "p=C:\\dir x=y\n"


_prop_keys = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="=: \t\f\r\n\\#!"), min_size=1, max_size=12
) | st.text(alphabet="abc.XYZ_-0123", min_size=1, max_size=12)
_prop_values = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\r\n\\"), max_size=20
).filter(lambda v: not v[:1].isspace() or v[:1] not in " \t\f")


@PROPS
@given(st.dictionaries(_prop_keys, _prop_values, max_size=8), st.booleans())
def test_properties_round_trip(props: dict[str, str], sort: bool) -> None:
    assert properties.loads(properties.dumps(props, sort=sort)) == props
