"""The sans-IO frame codec (remoting.codec) and RemotingCommand helpers.

Property tests prove that encode -> FrameDecoder.feed round-trips commands in
both header serializations, however the bytes are chunked, and that no input
whatsoever makes the decoder raise anything but ProtocolError. Example tests
pin the exact bytes of the protocol reference's worked examples (sections 1,
2.3 and 2.4) and the hostile inputs a server must refuse.
"""

from __future__ import annotations

import json
import struct
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting.codec import (
    FrameDecoder,
    ProtocolError,
    decode_binary_header,
    decode_frame,
    decode_json_header,
    encode,
    encode_success_json,
)
from remoting.codes import DEFAULT_FRAME_MAX_LENGTH, LanguageCode, SerializeType
from remoting.command import RemotingCommand, request, response_to, stringify_fields

PROPS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
int32 = st.integers(INT32_MIN, INT32_MAX)
int16 = st.integers(-(2**15), 2**15 - 1)
languages = st.sampled_from(list(LanguageCode))

# Text that stresses both encoders: quotes, backslashes, slashes, control
# characters, non-ASCII and astral characters, JSON punctuation.
_awkward_chars = st.characters(codec="utf-8") | st.sampled_from(
    ['"', "\\", "/", "\n", "\r", "\t", "\x00", "\x1f", "{", "}", ":", ",", "\u00e9", "\u4e2d", "\U0001f600"]
)
texts = st.text(alphabet=_awkward_chars, max_size=24)
nonempty_texts = st.text(alphabet=_awkward_chars, min_size=1, max_size=24)


def json_commands() -> st.SearchStrategy[RemotingCommand]:
    """Anything a JSON header can carry: int32 fields, empty strings and maps too."""
    return st.builds(
        RemotingCommand,
        int32,
        opaque=int32,
        flag=int32,
        language=languages,
        version=int32,
        remark=st.none() | texts,
        ext_fields=st.none() | st.dictionaries(texts, texts, max_size=6),
        body=st.binary(max_size=200),
        serialize_type=st.just(SerializeType.JSON),
    )


def binary_commands() -> st.SearchStrategy[RemotingCommand]:
    """What survives a ROCKETMQ header: 16-bit code/version, and since Java
    decodes an empty string as null, only non-empty remark/keys/values and
    non-empty maps."""
    return st.builds(
        RemotingCommand,
        int16,
        opaque=int32,
        flag=int32,
        language=languages,
        version=int16,
        remark=st.none() | nonempty_texts,
        ext_fields=st.none() | st.dictionaries(nonempty_texts, nonempty_texts, min_size=1, max_size=6),
        body=st.binary(max_size=200),
        serialize_type=st.just(SerializeType.ROCKETMQ),
    )


any_command = json_commands() | binary_commands()


def _check_invariants(cmd: RemotingCommand) -> None:
    """What every decoded command promises its handlers, whatever the peer sent."""
    assert isinstance(cmd, RemotingCommand)
    for name in ("code", "opaque", "flag", "version"):
        value = getattr(cmd, name)
        assert type(value) is int and INT32_MIN <= value <= INT32_MAX, (name, value)
    assert cmd.language is None or isinstance(cmd.language, LanguageCode)
    assert cmd.remark is None or type(cmd.remark) is str
    assert cmd.ext_fields is None or (
        type(cmd.ext_fields) is dict and all(type(k) is str and type(v) is str for k, v in cmd.ext_fields.items())
    )
    assert type(cmd.body) is bytes
    assert cmd.serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ)


def _feed_expecting_protocol_errors_only(decoder: FrameDecoder, chunks: list[bytes]) -> list[RemotingCommand]:
    got: list[RemotingCommand] = []
    for chunk in chunks:
        try:
            got += decoder.feed(chunk)
        except ProtocolError:
            with pytest.raises(ProtocolError):  # a failed decoder stays failed
                decoder.feed(b"")
            break
    for cmd in got:
        _check_invariants(cmd)
    return got


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(c, 0), len(data)) for c in cuts})
    chunks, prev = [], 0
    for p in points:
        chunks.append(data[prev:p])
        prev = p
    chunks.append(data[prev:])
    return chunks


# ---------------------------------------------------------------------------
# round trips


@PROPS
@given(json_commands())
def test_json_command_round_trips(cmd: RemotingCommand) -> None:
    frame = encode(cmd)
    assert frame[4] == 0  # serialize type byte
    assert FrameDecoder().feed(frame) == [cmd]
    assert decode_frame(frame) == cmd


@PROPS
@given(binary_commands())
def test_binary_command_round_trips(cmd: RemotingCommand) -> None:
    frame = encode(cmd)
    assert frame[4] == 1  # serialize type byte
    assert FrameDecoder().feed(frame) == [cmd]
    assert decode_frame(frame) == cmd


@PROPS
@given(st.lists(any_command, min_size=1, max_size=6), st.data())
def test_concatenated_frames_round_trip_in_any_chunking(cmds: list[RemotingCommand], data: st.DataObject) -> None:
    frames = [encode(c) for c in cmds]
    stream = b"".join(frames)
    ends = []
    total = 0
    for f in frames:
        total += len(f)
        ends.append(total)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=40), label="cuts")
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    fed = 0
    for chunk in _split(stream, cuts):
        got += decoder.feed(chunk)
        fed += len(chunk)
        # A frame comes out exactly when its last byte has arrived, not later.
        assert len(got) == sum(1 for e in ends if e <= fed)
        assert decoder.buffered == fed - max([e for e in ends if e <= fed], default=0)
    assert got == cmds
    assert decoder.buffered == 0


def test_byte_at_a_time_feeding() -> None:
    cmds = [
        request(105, {"topic": "T"}, opaque=1),
        request(105, {"topic": "T"}, opaque=2, serialize_type=SerializeType.ROCKETMQ),
        RemotingCommand(0, opaque=3, flag=1, remark="r", body=b"\x00\x01body"),
    ]
    stream = b"".join(encode(c) for c in cmds)
    decoder = FrameDecoder()
    got = []
    for i in range(len(stream)):
        got += decoder.feed(stream[i : i + 1])
    assert got == cmds
    assert decoder.buffered == 0


def test_frames_in_one_read_are_all_returned_and_tail_kept() -> None:
    a = encode(request(105, {"topic": "A"}, opaque=1))
    b = encode(request(105, {"topic": "B"}, opaque=2, serialize_type=SerializeType.ROCKETMQ))
    decoder = FrameDecoder()
    out = decoder.feed(a + b + a[:5])
    assert [c.opaque for c in out] == [1, 2]
    assert decoder.buffered == 5
    out = decoder.feed(a[5:])
    assert [c.ext_fields for c in out] == [{"topic": "A"}]
    assert decoder.buffered == 0


@FEW
@given(int32, st.binary(max_size=300))
def test_success_fast_path_matches_general_encoder(opaque: int, body: bytes) -> None:
    req = request(105, {"topic": "T"}, opaque=opaque)
    expected = encode(response_to(req, 0, body=body))
    assert encode_success_json(opaque, body) == expected
    assert encode_success_json(opaque, body) == encode(RemotingCommand(0, opaque=opaque, flag=1, body=body))
    assert decode_frame(expected).opaque == opaque


# ---------------------------------------------------------------------------
# arbitrary and hostile bytes never raise anything but ProtocolError


@PROPS
@given(st.binary(max_size=600), st.lists(st.integers(0, 600), max_size=10), st.sampled_from([64, 4096, DEFAULT_FRAME_MAX_LENGTH]))
def test_random_bytes_raise_only_protocol_error(data: bytes, cuts: list[int], limit: int) -> None:
    _feed_expecting_protocol_errors_only(FrameDecoder(max_frame_length=limit), _split(data, cuts))


@PROPS
@given(
    st.sampled_from([0, 1]) | st.integers(0, 255),
    st.binary(max_size=200) | st.text(max_size=100).map(str.encode),
    st.binary(max_size=40),
    st.integers(-8, 8),
)
def test_framed_random_headers_raise_only_protocol_error(stype: int, header: bytes, body: bytes, skew: int) -> None:
    """Random header bytes behind a plausible length prefix reach the header parsers."""
    hlen = max(len(header) + skew, 0)
    frame = struct.pack(">II", 4 + len(header) + len(body), (stype << 24) | hlen) + header + body
    _feed_expecting_protocol_errors_only(FrameDecoder(), [frame])


@PROPS
@given(any_command, st.data())
def test_mutated_frames_raise_only_protocol_error(cmd: RemotingCommand, data: st.DataObject) -> None:
    frame = bytearray(encode(cmd))
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        kind = data.draw(st.sampled_from(["flip", "set", "insert", "delete"]), label="kind")
        pos = data.draw(st.integers(0, max(len(frame) - 1, 0)), label="pos")
        if kind == "flip" and frame:
            frame[pos] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "set" and frame:
            frame[pos] = data.draw(st.integers(0, 255))
        elif kind == "insert":
            frame[pos:pos] = data.draw(st.binary(min_size=1, max_size=4))
        elif frame:
            del frame[pos]
    frame = frame[: data.draw(st.integers(0, len(frame)), label="truncate")]
    cuts = data.draw(st.lists(st.integers(0, len(frame)), max_size=5), label="cuts")
    _feed_expecting_protocol_errors_only(FrameDecoder(), _split(bytes(frame), cuts))


@PROPS
@given(st.binary(max_size=300))
def test_header_decoders_on_arbitrary_bytes_raise_only_protocol_error(data: bytes) -> None:
    for decode in (decode_json_header, decode_binary_header):
        try:
            cmd = decode(data)
        except ProtocolError:
            continue
        _check_invariants(cmd)


_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["JAVA", "CPP", "NOPE", " 12 ", "-1", "1e3", "0x10", "99999999999"])
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_header_keys = st.sampled_from(
    ["code", "opaque", "flag", "version", "language", "remark", "extFields", "serializeTypeCurrentRPC"]
) | st.text(max_size=6)


@FEW
@given(st.dictionaries(_header_keys, _json_values, max_size=8))
def test_structured_json_headers_raise_only_protocol_error(obj: dict[str, object]) -> None:
    """Well-formed JSON with every field of every type: typed, or ProtocolError."""
    raw = json.dumps(obj).encode()
    try:
        cmd = decode_json_header(raw)
    except ProtocolError:
        return
    _check_invariants(cmd)
    ext = obj.get("extFields")
    if isinstance(ext, dict):
        assert cmd.ext_fields is not None
        assert set(cmd.ext_fields) == {k for k, v in ext.items() if v is not None}


@FEW
@given(binary_commands(), st.data())
def test_mutated_binary_headers_raise_only_protocol_error(cmd: RemotingCommand, data: st.DataObject) -> None:
    header = bytearray(encode(cmd)[8:])
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(header) - 1))
        header[pos] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]) | st.integers(0, 255))
    header = header[: data.draw(st.integers(0, len(header)))]
    try:
        decoded = decode_binary_header(bytes(header))
    except ProtocolError:
        return
    _check_invariants(decoded)


# ---------------------------------------------------------------------------
# the reference's worked examples, byte for byte

JSON_EXAMPLE_HEADER = (
    b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":1,'
    b'"serializeTypeCurrentRPC":"JSON","version":479}'
)
JSON_EXAMPLE_FRAME = bytes.fromhex("0000007f0000007b") + JSON_EXAMPLE_HEADER

BINARY_EXAMPLE_HEADER = bytes.fromhex(
    "0069" "00" "01df" "00000001" "00000000" "00000000" "0000000c" "0005" + b"topic".hex() + "00000001" + b"T".hex()
)
BINARY_EXAMPLE_FRAME = bytes.fromhex(
    "00000025 01000021"
    " 0069 00 01df 00000001 00000000 00000000 0000000c"
    " 0005 746f706963 00000001 54".replace(" ", "")
)


def test_json_worked_example_sizes() -> None:
    assert len(JSON_EXAMPLE_HEADER) == 123
    assert len(JSON_EXAMPLE_FRAME) == 4 + 127


def test_json_worked_example_decodes_and_encodes_exactly() -> None:
    [cmd] = FrameDecoder().feed(JSON_EXAMPLE_FRAME)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (105, LanguageCode.JAVA, 479, 1, 0)
    assert cmd.ext_fields == {"topic": "T"} and cmd.remark is None and cmd.body == b""
    assert cmd.serialize_type == SerializeType.JSON
    assert encode(cmd) == JSON_EXAMPLE_FRAME
    assert encode(request(105, {"topic": "T"}, opaque=1)) == JSON_EXAMPLE_FRAME


def test_binary_worked_example_header_is_33_bytes() -> None:
    assert len(BINARY_EXAMPLE_HEADER) == 33
    assert BINARY_EXAMPLE_FRAME == bytes.fromhex("0000002501000021") + BINARY_EXAMPLE_HEADER


def test_binary_worked_example_decodes() -> None:
    [cmd] = FrameDecoder().feed(BINARY_EXAMPLE_FRAME)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (105, LanguageCode.JAVA, 479, 1, 0)
    assert cmd.remark is None and cmd.ext_fields == {"topic": "T"} and cmd.body == b""
    assert cmd.serialize_type == SerializeType.ROCKETMQ
    assert decode_binary_header(BINARY_EXAMPLE_HEADER) == cmd


def test_binary_worked_example_encodes_exactly() -> None:
    cmd = request(105, {"topic": "T"}, opaque=1, serialize_type=SerializeType.ROCKETMQ)
    assert encode(cmd) == BINARY_EXAMPLE_FRAME
    explicit = RemotingCommand(
        105, opaque=1, flag=0, language=LanguageCode.JAVA, version=479, ext_fields={"topic": "T"},
        serialize_type=SerializeType.ROCKETMQ,
    )
    assert encode(explicit) == BINARY_EXAMPLE_FRAME


def test_json_header_key_order_with_every_field() -> None:
    cmd = RemotingCommand(
        17, opaque=7, flag=1, language=LanguageCode.PYTHON, version=407, remark="no/route é", ext_fields={"b": "2", "a": "1"}
    )
    frame = encode(cmd)
    header = frame[8:]
    assert struct.unpack(">II", frame[:8]) == (4 + len(header), len(header))
    assert list(json.loads(header)) == [
        "code", "extFields", "flag", "language", "opaque", "remark", "serializeTypeCurrentRPC", "version",
    ]
    assert header == (
        '{"code":17,"extFields":{"b":"2","a":"1"},"flag":1,"language":"PYTHON","opaque":7,'
        '"remark":"no/route é","serializeTypeCurrentRPC":"JSON","version":407}'
    ).encode()


def test_json_header_omits_null_remark_and_ext_fields() -> None:
    resp = response_to(request(105, {"topic": "T"}, opaque=7), 17, "No topic")
    assert encode(resp)[8:] == (
        b'{"code":17,"flag":1,"language":"JAVA","opaque":7,"remark":"No topic",'
        b'"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    bare = RemotingCommand(0, opaque=3, flag=1)
    assert encode(bare)[8:] == (
        b'{"code":0,"flag":1,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    # An empty typed response header is written as {} (not omitted), like Java.
    empty = RemotingCommand(0, opaque=3, flag=1, ext_fields={})
    assert b'"extFields":{}' in encode(empty)


def test_java_reference_response_example_decodes() -> None:
    header = (
        b'{"code":17,"flag":1,"language":"JAVA","opaque":7,"remark":"No topic route info in name server for the topic: X'
        b'\\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.",'
        b'"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    cmd = decode_json_header(header)
    assert cmd.code == 17 and cmd.is_response and cmd.remark is not None and cmd.remark.startswith("No topic route")
    assert "\n" in cmd.remark and cmd.ext_fields is None
    assert encode(cmd)[8:] == header


def test_body_follows_header() -> None:
    cmd = RemotingCommand(103, opaque=9, body=b'{"x":1}', serialize_type=SerializeType.ROCKETMQ)
    frame = encode(cmd)
    length, word = struct.unpack(">II", frame[:8])
    assert length == len(frame) - 4
    assert word >> 24 == 1 and frame[-7:] == b'{"x":1}'
    assert (word & 0xFFFFFF) == len(frame) - 8 - 7
    assert decode_frame(frame).body == b'{"x":1}'


def test_binary_encoding_refuses_codes_wider_than_16_bits() -> None:
    with pytest.raises(ValueError):
        encode(RemotingCommand(200050, serialize_type=SerializeType.ROCKETMQ))
    with pytest.raises(ValueError):
        encode(RemotingCommand(105, version=40000, serialize_type=SerializeType.ROCKETMQ))
    # JSON has no such limit.
    assert decode_frame(encode(RemotingCommand(200050))).code == 200050


def test_binary_encoding_drops_what_java_drops() -> None:
    cmd = RemotingCommand(105, remark="", ext_fields={"": "x", "k": "v"}, serialize_type=SerializeType.ROCKETMQ)
    decoded = decode_frame(encode(cmd))
    assert decoded.remark is None  # empty remark -> length 0 -> null
    assert decoded.ext_fields == {"k": "v"}  # entry with empty key skipped
    cmd = RemotingCommand(105, ext_fields={}, serialize_type=SerializeType.ROCKETMQ)
    assert decode_frame(encode(cmd)).ext_fields is None  # only non-empty maps are written


# ---------------------------------------------------------------------------
# hostile input


def _frame(header: bytes, stype: int = 0, body: bytes = b"") -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body


@pytest.mark.parametrize(
    "data, message",
    [
        (struct.pack(">I", DEFAULT_FRAME_MAX_LENGTH - 3), "exceeds the limit"),
        (struct.pack(">I", 0xFFFFFFFF), "exceeds the limit"),
        (struct.pack(">I", 3) + b"\0" * 3, "too short"),
        (struct.pack(">I", 0), "too short"),
        (struct.pack(">II", 8, 100) + b"\0" * 4, "larger than its frame"),
        (struct.pack(">II", 4, 1), "larger than its frame"),
        (_frame(b"{}", stype=2), "unknown serialize type"),
        (_frame(b"{}", stype=0xFF), "unknown serialize type"),
        (_frame(b"{not json"), "invalid JSON"),
        (_frame(b""), "invalid JSON"),
        (_frame(b"\xff\xfe{}"), "invalid JSON"),
        (_frame(b"[]"), "not an object"),
        (_frame(b'[{"code":105}]'), "not an object"),
        (_frame(b'"code"'), "not an object"),
        (_frame(b'{"opaque":{}}'), "opaque"),
        (_frame(b'{"opaque":[1]}'), "opaque"),
        (_frame(b'{"code":"abc"}'), "code"),
        (_frame(b'{"code":1.5}'), "code"),
        (_frame(b'{"code":true}'), "code"),
        (_frame(b'{"flag":"1.0"}'), "flag"),
        (_frame(b'{"opaque":99999999999}'), "out of range"),
        (_frame(b'{"version":"-2147483649"}'), "out of range"),
        (_frame(b'{"extFields":[]}'), "extFields"),
        (_frame(b'{"extFields":"topic=T"}'), "extFields"),
        (_frame(b'{"language":[]}'), "language"),
        (_frame(b'{"language":1.0}'), "language"),
        (_frame(b'{"remark":5}'), "remark"),
        (_frame(b'{"remark":{}}'), "remark"),
        (_frame(b"\x00" * 5, stype=1), "too short"),
    ],
)
def test_malformed_frames_fail_and_the_decoder_stays_failed(data: bytes, message: str) -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match=message):
        decoder.feed(data)
    for retry in (encode(request(105, {"topic": "T"})), b"", b"\x00"):
        with pytest.raises(ProtocolError, match="already failed"):
            decoder.feed(retry)


@pytest.mark.parametrize("prefix_split", [1, 2, 3])
def test_oversized_length_is_refused_as_soon_as_its_four_bytes_arrive(prefix_split: int) -> None:
    decoder = FrameDecoder()
    length = struct.pack(">I", 64 * 1024 * 1024)
    assert decoder.feed(length[:prefix_split]) == []
    assert decoder.buffered == prefix_split
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        decoder.feed(length[prefix_split:])  # no need to wait for 64 MiB
    assert decoder.buffered == 4


def test_oversized_length_in_one_read_buffers_nothing() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        decoder.feed(struct.pack(">I", 64 * 1024 * 1024) + b"x" * 1000)
    assert decoder.buffered == 0
    # Also when it follows a complete frame in the same read.
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        decoder.feed(encode(request(105)) + struct.pack(">I", 0x7FFFFFFF) + b"x" * 1000)
    assert decoder.buffered == 0


def test_frame_limit_boundary_is_inclusive_of_the_length_field() -> None:
    limit = 64
    header = b'{"code":1}'
    body_ok = b"b" * (limit - 8 - len(header))  # frame of exactly `limit` bytes
    frame = _frame(header, body=body_ok)
    assert len(frame) == limit
    [cmd] = FrameDecoder(max_frame_length=limit).feed(frame)
    assert cmd.body == body_ok
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        FrameDecoder(max_frame_length=limit).feed(_frame(header, body=body_ok + b"b"))
    # At the default limit, a length field of exactly 16 MiB - 4 is accepted and buffered.
    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">II", DEFAULT_FRAME_MAX_LENGTH - 4, 2) + b"{}") == []
    assert decoder.buffered == 10


def test_error_midway_through_a_read_fails_the_decoder() -> None:
    good = encode(request(105, {"topic": "T"}, opaque=1))
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError):
        decoder.feed(good + _frame(b"[]") + good)
    with pytest.raises(ProtocolError):
        decoder.feed(good)


def test_decode_frame_checks_the_length_field() -> None:
    good = encode(request(105, {"topic": "T"}))
    assert decode_frame(good).ext_fields == {"topic": "T"}
    with pytest.raises(ProtocolError):
        decode_frame(good[:-1])
    with pytest.raises(ProtocolError):
        decode_frame(good + b"\x00")
    with pytest.raises(ProtocolError):
        decode_frame(good[:7])


def test_cpp_style_header_with_numbers_and_trailing_newline() -> None:
    header = (
        b'{"code":310,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"","a":"G","b":"T",'
        b'"d":4,"e":1,"m":true,"n":false,"x":1.5,"z":null},"flag":0,"language":"CPP","opaque":1,"remark":"","version":333}\n'
    )
    for cmd in (decode_json_header(header), FrameDecoder().feed(_frame(header))[0]):
        assert cmd.code == 310 and cmd.language == LanguageCode.CPP and cmd.version == 333 and cmd.opaque == 1
        assert cmd.remark == ""
        assert cmd.ext_fields is not None
        assert cmd.ext_fields["d"] == "4" and cmd.ext_fields["e"] == "1"
        assert cmd.ext_fields["m"] == "true" and cmd.ext_fields["n"] == "false"
        assert cmd.ext_fields["x"] == "1.5"
        assert "z" not in cmd.ext_fields
        assert cmd.ext_fields["AccessKey"] == "" and cmd.ext_fields["b"] == "T"
        _check_invariants(cmd)


def test_json_header_lenient_forms_java_accepts() -> None:
    cmd = decode_json_header(b'{"version":"479","opaque":" 12 ","language":3,"unknown":[1,2],"code":"105"}')
    assert (cmd.code, cmd.opaque, cmd.version, cmd.language) == (105, 12, 479, LanguageCode.PYTHON)
    cmd = decode_json_header(b"{}")  # everything defaults
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version, cmd.language) == (0, 0, 0, 0, LanguageCode.JAVA)
    assert decode_json_header(b'{"language":"KLINGON"}').language is None
    assert decode_json_header(b'{"language":99}').language is None
    assert decode_json_header(b'{"code":-2147483648,"opaque":2147483647}').opaque == INT32_MAX


def test_binary_header_bounds() -> None:
    good = bytearray(encode(request(105, {"topic": "T"}, serialize_type=SerializeType.ROCKETMQ))[8:])
    assert decode_binary_header(bytes(good)).ext_fields == {"topic": "T"}
    cases: list[Callable[[bytearray], object]] = [
        lambda h: h.__setitem__(slice(13, 17), struct.pack(">i", 10_000)),  # remark past header
        lambda h: h.__setitem__(slice(13, 17), struct.pack(">i", -1)),  # negative remark length
        lambda h: h.__setitem__(slice(17, 21), struct.pack(">i", 10_000)),  # extFields past header
        lambda h: h.__setitem__(slice(17, 21), struct.pack(">i", -5)),  # negative extFields length
        lambda h: h.__setitem__(slice(17, 21), struct.pack(">i", 1)),  # truncated key length
        lambda h: h.__setitem__(slice(17, 21), struct.pack(">i", 8)),  # truncated value length
        lambda h: h.__setitem__(slice(21, 23), struct.pack(">H", 60_000)),  # key past header
        lambda h: h.__setitem__(slice(28, 32), struct.pack(">i", -1)),  # negative value length
        lambda h: h.__setitem__(slice(28, 32), struct.pack(">i", 50)),  # value past header
        lambda h: h.__setitem__(slice(23, 24), b"\xff"),  # key not UTF-8
        lambda h: h.__delitem__(slice(-1, None)),  # truncated
        lambda h: h.__delitem__(slice(17, None)),  # no extFields length
    ]
    for mutate in cases:
        bad = bytearray(good)
        mutate(bad)
        with pytest.raises(ProtocolError):
            decode_binary_header(bytes(bad))


def test_binary_header_unknown_language_byte_is_null() -> None:
    header = bytearray(BINARY_EXAMPLE_HEADER)
    header[2] = 99
    assert decode_binary_header(bytes(header)).language is None
    header[2] = 0x80  # negative as a Java byte
    assert decode_binary_header(bytes(header)).language is None


# ---------------------------------------------------------------------------
# RemotingCommand helpers


def test_stringify_fields_writes_java_text() -> None:
    assert stringify_fields({"a": 1, "b": True, "c": False, "d": None, "e": "x", "f": -7}) == {
        "a": "1", "b": "true", "c": "false", "e": "x", "f": "-7",
    }


def test_request_and_response_helpers() -> None:
    req = request(103, {"brokerId": 0, "compressed": False}, b"body", opaque=42, oneway=True)
    assert req.ext_fields == {"brokerId": "0", "compressed": "false"}
    assert req.is_oneway and not req.is_response and req.flag == 2
    assert req.version == 479 and req.language == LanguageCode.JAVA and req.body == b"body"
    assert req.ext("brokerId") == "0" and req.ext("missing", "d") == "d"
    assert request(105).ext("topic") is None
    bin_req = request(105, {"topic": "T"}, opaque=5, serialize_type=SerializeType.ROCKETMQ)
    resp = response_to(bin_req, 17, "gone", {"n": 3})
    assert resp.opaque == 5 and resp.flag == 1 and resp.is_response and not resp.is_oneway
    assert resp.serialize_type == SerializeType.ROCKETMQ and resp.ext_fields == {"n": "3"}
    assert resp.remark == "gone"
    assert resp != bin_req
    assert "response" in repr(resp) and "request" in repr(bin_req)
