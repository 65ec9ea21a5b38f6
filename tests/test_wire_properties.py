"""The sans-IO codec and the body formats, by example and by property."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting import fastjson, properties
from remoting.bodies import (
    BodyError,
    DataVersion,
    TopicConfig,
    TopicRouteData,
)
from remoting.register_body import (
    encode_register_body,
    parse_register_body,
)
from remoting.codec import (
    FrameDecoder,
    ProtocolError,
    decode_binary_header,
    decode_frame,
    decode_json_header,
    encode,
    encode_success_json,
)
from remoting.codes import LanguageCode, SerializeType
from remoting.command import RemotingCommand, request, response_to

PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

int32 = st.integers(-(2**31), 2**31 - 1)
int16 = st.integers(-(2**15), 2**15 - 1)
text = st.text(min_size=1, max_size=30)


@st.composite
def commands(draw: st.DrawFn, serialize_type: SerializeType) -> RemotingCommand:
    binary = serialize_type == SerializeType.ROCKETMQ
    # Java decodes an empty binary string as null, so binary strings are non-empty.
    ext = draw(st.none() | st.dictionaries(text, text, min_size=1 if binary else 0, max_size=6))
    return RemotingCommand(
        draw(int16 if binary else int32),
        opaque=draw(int32),
        flag=draw(st.integers(0, 3)),
        language=draw(st.sampled_from(list(LanguageCode))),
        version=draw(int16 if binary else int32),
        remark=draw(st.none() | text),
        ext_fields=ext,
        body=draw(st.binary(max_size=300)),
        serialize_type=serialize_type,
    )


any_command = st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]).flatmap(commands)


# ---------------------------------------------------------------------------
# round trips


@PROPS
@given(st.lists(any_command, min_size=1, max_size=5), st.lists(st.integers(1, 64), max_size=20))
def test_frames_round_trip_in_any_chunking(cmds: list[RemotingCommand], cuts: list[int]) -> None:
    stream = b"".join(encode(c) for c in cmds)
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    pos = 0
    for cut in cuts:
        got += decoder.feed(stream[pos : pos + cut])
        pos += cut
    got += decoder.feed(stream[pos:])
    assert got == cmds
    assert decoder.buffered == 0


@PROPS
@given(any_command)
def test_decode_frame_inverts_encode(cmd: RemotingCommand) -> None:
    assert decode_frame(encode(cmd)) == cmd


@PROPS
@given(st.binary(max_size=400))
def test_random_bytes_raise_only_protocol_error(data: bytes) -> None:
    decoder = FrameDecoder(max_frame_length=4096)
    try:
        decoder.feed(data)
    except ProtocolError:
        pass


@PROPS
@given(any_command, st.data())
def test_mutated_frames_raise_only_protocol_error(cmd: RemotingCommand, data: st.DataObject) -> None:
    frame = bytearray(encode(cmd))
    for _ in range(data.draw(st.integers(1, 4))):
        frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    frame = frame[: data.draw(st.integers(0, len(frame)))]
    try:
        FrameDecoder().feed(bytes(frame))
    except ProtocolError:
        pass


@PROPS
@given(st.binary(max_size=200))
def test_header_decoders_raise_only_protocol_error(data: bytes) -> None:
    for decode in (decode_json_header, decode_binary_header):
        try:
            decode(data)
        except ProtocolError:
            pass


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4)
    | st.dictionaries(st.integers(-100, 100), children, max_size=4),
    max_leaves=20,
)


def _stringify_keys(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _stringify_keys(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_stringify_keys(v) for v in value]
    return value


@PROPS
@given(json_values, st.booleans())
def test_fastjson_round_trips_both_forms(value: object, standard: bool) -> None:
    encoded = fastjson.dumps(value, standard=standard)
    assert fastjson.loads(encoded) == _stringify_keys(value)
    if standard:
        encoded.decode("ascii")  # BrowserCompatible output is pure ASCII
        json.loads(encoded)  # and standard JSON


@PROPS
@given(st.dictionaries(st.text(alphabet="abcdefgXYZ._-0123", min_size=1, max_size=10), st.text(alphabet="abc xyz/.0123;", max_size=20)))
def test_properties_round_trip(props: dict[str, str]) -> None:
    assert properties.loads(properties.dumps(props)) == {k: v.lstrip(" ") for k, v in props.items()}


# ---------------------------------------------------------------------------
# the reference's worked examples


BINARY_EXAMPLE = bytes.fromhex(
    "00000025 01000021"
    "0069 00 01df 00000001 00000000 00000000 0000000c 0005 746f706963 00000001 54".replace(" ", "")
)


def test_binary_worked_example_decodes_and_encodes_byte_for_byte() -> None:
    cmd = decode_frame(BINARY_EXAMPLE)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (105, LanguageCode.JAVA, 479, 1, 0)
    assert cmd.remark is None and cmd.ext_fields == {"topic": "T"} and cmd.body == b""
    assert cmd.serialize_type == SerializeType.ROCKETMQ
    assert encode(cmd) == BINARY_EXAMPLE


def test_json_worked_example() -> None:
    header = b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":479}'
    frame = struct.pack(">II", 4 + len(header), len(header)) + header
    assert frame[:8] == bytes.fromhex("0000007f0000007b")
    cmd = decode_frame(frame)
    assert encode(cmd) == frame  # Java's key order, compact


def test_json_header_omits_null_remark_and_ext() -> None:
    req = request(105, {"topic": "T"}, opaque=7)
    resp = response_to(req, 17, "No topic")
    header = encode(resp)[8:]
    assert header == b'{"code":17,"flag":1,"language":"JAVA","opaque":7,"remark":"No topic","serializeTypeCurrentRPC":"JSON","version":479}'


def test_success_fast_path_matches_general_encoder() -> None:
    req = request(105, {"topic": "T"}, opaque=123456)
    assert encode_success_json(123456, b'{"x":1}') == encode(response_to(req, 0, body=b'{"x":1}'))


def test_cpp_client_header_is_accepted() -> None:
    header = b'{"code":310,"extFields":{"AccessKey":"","d":4,"e":1,"k":"false","m":false,"b":"T"},"flag":0,"language":"CPP","opaque":3,"remark":"","version":333}\n'
    cmd = decode_json_header(header)
    assert cmd.language == LanguageCode.CPP and cmd.version == 333
    assert cmd.ext_fields == {"AccessKey": "", "d": "4", "e": "1", "k": "false", "m": "false", "b": "T"}


# ---------------------------------------------------------------------------
# hostile input


def _frame(header: bytes, stype: int = 0) -> bytes:
    return struct.pack(">II", 4 + len(header), (stype << 24) | len(header)) + header


@pytest.mark.parametrize(
    "data, message",
    [
        (struct.pack(">I", 16 * 1024 * 1024 - 3), "exceeds the limit"),
        (struct.pack(">I", 2), "too short"),
        (struct.pack(">II", 8, 100) + b"\0" * 4, "larger than its frame"),
        (_frame(b"abc", stype=9), "unknown serialize type"),
        (_frame(b"{not json"), "invalid JSON"),
        (_frame(b"[]"), "not an object"),
        (_frame(b'{"opaque":{}}'), "opaque"),
        (_frame(b'{"code":1.5}'), "code"),
        (_frame(b'{"opaque":9999999999'), "invalid JSON"),
        (_frame(b'{"opaque":99999999999}'), "out of range"),
        (_frame(b'{"extFields":[]}'), "extFields"),
        (_frame(b'{"language":[]}'), "language"),
        (_frame(b'{"remark":5}'), "remark"),
        (_frame(b"\xff\xfe"), "invalid JSON"),
    ],
)
def test_malformed_frames(data: bytes, message: str) -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match=message):
        decoder.feed(data)
    with pytest.raises(ProtocolError):  # a failed decoder stays failed
        decoder.feed(encode(request(105)))


def test_oversized_length_is_refused_before_the_body_arrives() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError):
        decoder.feed(struct.pack(">I", 64 * 1024 * 1024))
    assert decoder.buffered <= 4  # nothing more was taken in


def test_binary_header_bounds() -> None:
    good = encode(request(105, {"topic": "T"}, serialize_type=SerializeType.ROCKETMQ))[8:]
    with pytest.raises(ProtocolError):
        decode_binary_header(good[:-1])
    bad = bytearray(good)
    bad[13:17] = struct.pack(">i", 10_000)  # remark longer than the header
    with pytest.raises(ProtocolError):
        decode_binary_header(bytes(bad))


# ---------------------------------------------------------------------------
# bodies


BROKER = {"brokerAddrs": {1: "192.168.1.11:10911", 0: "192.168.1.10:10911"}, "brokerName": "broker-a"}


def test_fastjson_forms_match_java() -> None:
    assert fastjson.dumps(BROKER) == b'{"brokerAddrs":{1:"192.168.1.11:10911",0:"192.168.1.10:10911"},"brokerName":"broker-a"}'
    assert fastjson.dumps(BROKER, standard=True) == (
        b'{"brokerAddrs":{"0":"192.168.1.10:10911","1":"192.168.1.11:10911"},"brokerName":"broker-a"}'
    )
    assert fastjson.dumps({"t": "caf\u00e9/x"}, standard=True) == b'{"t":"caf\\u00E9\\/x"}'
    assert fastjson.dumps({"t": "caf\u00e9/x"}) == '{"t":"caf\u00e9/x"}'.encode()


def test_fastjson_loads_bare_keys_without_touching_strings() -> None:
    tricky = b'{"a":"x,1:y{2:z","brokerAddrs":{0:"a",1:"b"},"c":[{3:"d"}]}'
    assert fastjson.loads(tricky) == {"a": "x,1:y{2:z", "brokerAddrs": {"0": "a", "1": "b"}, "c": [{"3": "d"}]}
    with pytest.raises(BodyError):
        fastjson.loads(b"{oops")


def test_route_decodes_in_both_forms() -> None:
    route = {
        "brokerDatas": [dict(BROKER, cluster="DefaultCluster", enableActingMaster=False)],
        "filterServerTable": {},
        "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 4, "topicSysFlag": 0, "writeQueueNums": 4}],
    }
    legacy = TopicRouteData.decode(fastjson.dumps(route))
    standard = TopicRouteData.decode(fastjson.dumps(route, standard=True))
    assert legacy == standard
    assert legacy.broker_datas[0].broker_addrs == {0: "192.168.1.10:10911", 1: "192.168.1.11:10911"}


TOPICS = [TopicConfig("TBW102", 8, 8, 7), TopicConfig("T1", 4, 4, 6, topic_sys_flag=3), TopicConfig("T2", 2, 1, 2)]


@pytest.mark.parametrize(
    "compressed, version",
    [(False, 479), (False, 407), (True, 407), (True, 479), (False, 30)],
)
def test_register_body_forms(compressed: bool, version: int) -> None:
    dv = DataVersion(3, 1_700_000_000_000, 2)
    body = encode_register_body(TOPICS, dv, filter_servers=["10.0.0.1:1"] if version >= 37 else (), compressed=compressed, version=version)
    parsed = parse_register_body(body, compressed=compressed, version=version)
    assert parsed.data_version == dv
    sysflag = 0 if compressed else 3  # the compact form does not carry topicSysFlag
    assert parsed.topics == {"TBW102": (8, 8, 7, 0), "T1": (4, 4, 6, sysflag), "T2": (2, 1, 2, 0)}
    assert parsed.filter_servers == (["10.0.0.1:1"] if version >= 37 else [])


def test_register_body_errors() -> None:
    assert parse_register_body(b"", compressed=False, version=479).topics == {}
    with pytest.raises(BodyError):
        parse_register_body(b"\x78\x9c garbage", compressed=True, version=479)
    body = encode_register_body(TOPICS, DataVersion(), compressed=True)
    with pytest.raises(BodyError):
        parse_register_body(zlib.compress(zlib.decompress(body)[:-3]), compressed=True, version=479)
    bomb = zlib.compress(b"\0" * (300 * 1024 * 1024), 9)
    with pytest.raises(BodyError):  # its first item is already wrong
        parse_register_body(bomb, compressed=True, version=479)
    item = b"T" * 1000 + b" 8 8 6 SINGLE_TAG"
    raw = DataVersion().encode()
    raw = struct.pack(">i", len(raw)) + raw + struct.pack(">i", 100_000) + (struct.pack(">i", len(item)) + item) * 20_000
    with pytest.raises(BodyError, match="size limit"):
        parse_register_body(zlib.compress(raw, 9), compressed=True, version=479)
    with pytest.raises(BodyError):
        parse_register_body(b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":"x"}}}}', compressed=False, version=479)


def test_java_properties_syntax() -> None:
    text = "# comment\n! also\na=1\nb : 2\nc 3\nd=line\\\n   continued\ne=\\u00e9\\tx\n  \nf\n"
    assert properties.loads(text) == {"a": "1", "b": "2", "c": "3", "d": "linecontinued", "e": "\u00e9\tx", "f": ""}
    with pytest.raises(properties.PropertiesError):
        properties.loads("a=\\u12")
