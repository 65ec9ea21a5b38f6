"""Property tests: header decoding and fastjson parsing take any input safely, in linear time.

Every request goes through the frame decoder and its header decoder before
any handler sees it, and legacy (fastjson) bodies through
``fastjson.loads``. So for *any* bytes each must give a value or the
module's own error (``ProtocolError`` / ``BodyError``): any other exception
would escape the request's error handling. And each must run in time linear
in its input, or one crafted request stalls the server's single loop.

The time checks compare CPU time (``time.process_time``, not wall clock) of
an input of size n with one of size 8n: linear work grows about 8x,
quadratic 64x; the bound of 24x leaves room for a noisy machine.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting import fastjson
from remoting.codec import FrameDecoder, ProtocolError, decode_binary_header, decode_json_header

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False),
    st.text(max_size=40),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)
header_keys = st.sampled_from(
    ["code", "language", "version", "opaque", "flag", "remark", "extFields", "serializeTypeCurrentRPC", "x"]
)


def _dumps(value: object) -> bytes:
    """JSON of any generated value (orjson refuses integers beyond 64 bits, which peers may send)."""
    return json.dumps(value, separators=(",", ":")).encode()


def _check_command(cmd: object) -> None:
    """What every handler relies on: a header of ints, and extFields mapping strings to strings."""
    ext = cmd.ext_fields  # type: ignore[attr-defined]
    for name in ("code", "opaque", "flag", "version"):
        assert type(getattr(cmd, name)) is int
    if ext is not None:
        assert all(type(k) is str and type(v) is str for k, v in ext.items()), ext


def _decode_json(header: bytes) -> None:
    try:
        cmd = decode_json_header(header)
    except ProtocolError:
        return
    _check_command(cmd)


@SETTINGS
@given(st.dictionaries(header_keys, json_values, max_size=8))
def test_json_header_of_any_shape_decodes_or_is_a_protocol_error(fields: dict[str, object]) -> None:
    _decode_json(_dumps(fields))


@SETTINGS
@given(st.dictionaries(st.text(max_size=10), json_values, max_size=6), st.integers(-(2**31), 2**31 - 1))
def test_json_header_ext_fields_of_any_value_type(ext: dict[str, object], code: int) -> None:
    _decode_json(_dumps({"code": code, "opaque": 1, "extFields": ext}))


@pytest.mark.parametrize("depth", [1, 2, 100, 254, 255, 300, 1000, 1023, 1024, 1025, 5000])
@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_deeply_nested_ext_field_value(depth: int, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    inner = ("1" if opener != "[" else "")
    header = b'{"code":105,"extFields":{"topic":' + (opener * depth + inner + closer * depth).encode() + b"}}"
    _decode_json(header)


@SETTINGS
@given(st.binary(max_size=600))
def test_json_header_of_any_bytes(data: bytes) -> None:
    _decode_json(data)


@SETTINGS
@given(st.binary(max_size=600))
def test_binary_header_of_any_bytes(data: bytes) -> None:
    try:
        cmd = decode_binary_header(data)
    except ProtocolError:
        return
    _check_command(cmd)


@st.composite
def binary_headers(draw: st.DrawFn) -> bytes:
    """Well-formed-looking ROCKETMQ headers whose length fields may lie."""
    remark = draw(st.binary(max_size=20))
    entries = b""
    for key, value in draw(st.lists(st.tuples(st.binary(max_size=12), st.binary(max_size=24)), max_size=5)):
        klen = draw(st.one_of(st.just(len(key)), st.integers(0, 0xFFFF)))
        vlen = draw(st.one_of(st.just(len(value)), st.integers(-(2**31), 2**31 - 1)))
        entries += struct.pack(">H", klen) + key + struct.pack(">i", vlen) + value
    remark_len = draw(st.one_of(st.just(len(remark)), st.integers(-(2**31), 2**31 - 1)))
    ext_len = draw(st.one_of(st.just(len(entries)), st.integers(-(2**31), 2**31 - 1)))
    fixed = struct.pack(
        ">hbhiii", draw(st.integers(-32768, 32767)), draw(st.integers(-128, 127)), draw(st.integers(-32768, 32767)),
        draw(st.integers(-(2**31), 2**31 - 1)), draw(st.integers(-(2**31), 2**31 - 1)), remark_len,
    )
    return fixed + remark + struct.pack(">i", ext_len) + entries


@SETTINGS
@given(binary_headers())
def test_binary_header_with_lying_lengths(header: bytes) -> None:
    try:
        cmd = decode_binary_header(header)
    except ProtocolError:
        return
    _check_command(cmd)


@SETTINGS
@given(st.lists(st.binary(max_size=200), max_size=6), st.integers(8, 4096))
def test_frame_decoder_of_any_byte_stream(chunks: list[bytes], limit: int) -> None:
    decoder = FrameDecoder(limit)
    for chunk in chunks:
        try:
            commands = decoder.feed(chunk)
        except ProtocolError:
            return
        for cmd in commands:
            _check_command(cmd)
        assert decoder.buffered <= limit


@SETTINGS
@given(st.binary(max_size=400))
def test_fastjson_loads_of_any_bytes(data: bytes) -> None:
    try:
        fastjson.loads(data)
    except fastjson.BodyError:
        pass


@SETTINGS
@given(st.text(alphabet='{}[]":,0123456789-\\ ab\n', max_size=300))
def test_fastjson_loads_of_json_like_text(text: str) -> None:
    try:
        fastjson.loads(text.encode())
    except fastjson.BodyError:
        pass


@SETTINGS
@given(st.dictionaries(st.integers(-1000, 1000), st.text(max_size=20), max_size=10))
def test_fastjson_bare_integer_keys_round_trip(table: dict[int, str]) -> None:
    parsed = fastjson.loads(fastjson.dumps(table))
    assert {int(k): v for k, v in parsed.items()} == table


# --------------------------------------------------------------------------
# linear time on adversarial families


def _cpu_seconds(fn: Callable[[bytes], object], data: bytes) -> float:
    """Best of three CPU-time runs (the least disturbed by other processes)."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        try:
            fn(data)
        except (ProtocolError, fastjson.BodyError):
            pass
        best = min(best, time.process_time() - start)
    return best


def _assert_linear(fn: Callable[[bytes], object], make: Callable[[int], bytes], n: int) -> None:
    small = _cpu_seconds(fn, make(n))
    large = _cpu_seconds(fn, make(8 * n))
    # Below a few ms the timer's resolution dominates: only a large absolute cost can be quadratic.
    assert large < max(24 * small, 0.02), f"8x the input took {large / max(small, 1e-9):.0f}x the time ({large:.3f} s)"


FASTJSON_FAMILIES: dict[str, Callable[[int], bytes]] = {
    "escaped quotes": lambda n: ('"' + '\\"' * n).encode(),
    "escaped quotes, closed": lambda n: ('"' + '\\"' * n + '"').encode(),
    "bare keys": lambda n: ("{" + ",".join(f"{i}:{i}" for i in range(n)) + "}").encode(),
    "bare keys, broken": lambda n: ("{" + ",".join(f"{i}:{i}" for i in range(n)) + ",").encode(),
    "nesting": lambda n: b"[" * n + b"]" * n,
    "backslashes": lambda n: b'{"a":"' + b"\\" * n,
    "unterminated strings": lambda n: b'{1:"' * n,
}


@pytest.mark.parametrize("family", sorted(FASTJSON_FAMILIES))
def test_fastjson_loads_is_linear(family: str) -> None:
    _assert_linear(fastjson.loads, FASTJSON_FAMILIES[family], 4000)


def _deep_header(n: int) -> bytes:
    return b'{"code":105,"extFields":{"topic":' + b"[" * n + b"]" * n + b"}}"


HEADER_FAMILIES: dict[str, Callable[[int], bytes]] = {
    "many ext fields": lambda n: _dumps({"code": 105, "extFields": {f"k{i}": "v" for i in range(n)}}),
    "long remark": lambda n: _dumps({"code": 105, "remark": "\\" * n}),
    "deep ext value": lambda n: _deep_header(min(n, 120)),
    "numeric ext values": lambda n: _dumps({"code": 105, "extFields": {f"k{i}": i for i in range(n)}}),
}


@pytest.mark.parametrize("family", sorted(HEADER_FAMILIES))
def test_json_header_decode_is_linear(family: str) -> None:
    _assert_linear(decode_json_header, HEADER_FAMILIES[family], 2000)


def _binary_entries(n: int) -> bytes:
    entries = b"".join(struct.pack(">H", 3) + b"k%02d" % (i % 100) + struct.pack(">i", 1) + b"v" for i in range(n))
    return struct.pack(">hbhiii", 10, 0, 453, 1, 0, 0) + struct.pack(">i", len(entries)) + entries


def test_binary_header_decode_is_linear() -> None:
    _assert_linear(decode_binary_header, _binary_entries, 2000)
