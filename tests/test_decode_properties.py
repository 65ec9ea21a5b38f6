"""Property tests of the body parsers a NameServer runs on peers' bytes.

For the route, register (JSON and compressed), properties, KV table and
data-version parsers: any input yields a value or the module's own error
(BodyError / PropertiesError), never another exception; what is accepted is
safe to keep and to encode again (Java-range numbers, shallow mapping
infos); and the work is linear in the input: CPU time per example stays
under a bound proportional to its size, and 8x the input of a pathological
shape costs far less than 64x the time.
"""

from __future__ import annotations

import gc
import struct
import time
import zlib
from collections.abc import Callable
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting import fastjson, properties
from remoting.bodies import BodyError, DataVersion, TopicRouteData, parse_kv_table
from remoting.javatypes import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from remoting.register_body import RegisterBody, RegisterLimits, inflate, parse_register_body

EXAMPLES = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SMALL_LIMITS = RegisterLimits(max_inflated_bytes=1 << 20, max_topics=1000)


def cpu_bound(size: int) -> float:
    """CPU seconds any parser may spend on ``size`` bytes: generous, but linear."""
    return 0.05 + size * 5e-6


def run_bounded(parse: Callable[[], Any], size: int, errors: tuple[type[Exception], ...]) -> Any:
    """Run ``parse``; only ``errors`` may escape; CPU time within the linear bound.

    The garbage collector is off while it runs: a full collection of the
    test process's heap (Hypothesis keeps much alive) once took 64 ms inside
    a 4-byte parse on a loaded machine, and that is not the parser's work."""
    gc_was_on = gc.isenabled()
    gc.disable()
    start = time.thread_time()
    try:
        result = parse()
    except errors:
        result = None
    finally:
        took = time.thread_time() - start
        if gc_was_on:
            gc.enable()
    assert took < cpu_bound(size), f"{took:.3f} s of CPU for {size} bytes"
    return result


# ---------------------------------------------------------------------------
# strategies

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**80), 2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def _shaped(keys: list[str], values: st.SearchStrategy[Any] = _json) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(keys) | st.text(max_size=5), values, max_size=len(keys) + 1)


_numbers = st.integers(-(2**70), 2**70) | st.integers(-5, 40).map(str) | st.just("99999999999999999999999") | _json
_mapping = _shaped(
    ["topic", "scope", "bname", "totalQueues", "epoch", "dirty", "currIdMap"],
    _numbers | st.dictionaries(st.integers(-3, 3).map(str) | st.text(max_size=3), _numbers, max_size=3)
    | st.integers(1, 200).map(lambda d: _nested(d, 0)),
)
_topic = _shaped(["topicName", "perm", "readQueueNums", "writeQueueNums", "topicSysFlag", "attributes"], _numbers)
_wrapper = st.fixed_dictionaries(
    {},
    optional={
        "dataVersion": _shaped(["counter", "timestamp", "stateVersion"], _numbers) | _json,
        "topicConfigTable": st.dictionaries(st.text(max_size=5), _topic | _json, max_size=4) | _json,
        "topicQueueMappingInfoMap": st.dictionaries(st.text(max_size=5), _mapping | _json, max_size=3) | _json,
    },
)
_register_obj = st.fixed_dictionaries(
    {}, optional={"filterServerList": st.lists(st.text(max_size=6), max_size=3) | _json, "topicConfigSerializeWrapper": _wrapper}
)


def _dumps(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj)
    except TypeError:  # integers beyond 64 bits: write them as JSON text anyway
        return fastjson.dumps(obj)


def _item(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


@st.composite
def _compressed_raw(draw: st.DrawFn) -> bytes:
    """A compressed register body's plain bytes: well-formed, then perhaps damaged."""
    parts = [_item(_dumps(draw(_shaped(["counter", "timestamp", "stateVersion"], _numbers))))]
    topics = draw(st.lists(st.text(max_size=6).map(lambda t: t.encode()) | st.binary(max_size=12), max_size=5))
    parts.append(struct.pack(">i", draw(st.sampled_from([len(topics), -1, 2**31 - 1]))))
    parts.extend(_item(t + b" 4 4 6 SINGLE_TAG {}" if draw(st.booleans()) else t) for t in topics)
    parts.append(_item(_dumps(draw(st.lists(st.text(max_size=4), max_size=2) | _json))))
    mappings = draw(st.lists(_mapping | _json, max_size=3))
    parts.append(struct.pack(">i", len(mappings)))
    parts.extend(_item(_dumps(m)) for m in mappings)
    raw = bytearray(b"".join(parts))
    for _ in range(draw(st.integers(0, 3))):
        if raw:
            raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
    return bytes(raw[: draw(st.integers(0, len(raw)))])


def _check_register_body(body: RegisterBody | None) -> None:
    """What is accepted can be kept, compared and encoded again."""
    if body is None:
        return
    for quad in body.topics.values():
        assert all(type(x) is int and INT32_MIN <= x <= INT32_MAX for x in quad)
    dv = body.data_version
    assert all(INT64_MIN <= x <= INT64_MAX for x in (dv.counter, dv.timestamp, dv.state_version))
    dv.encode()  # the TypeError of issue 11 item 7 came from here
    for info in body.mapping_infos.values():
        for value in info.values():
            assert isinstance(value, (str, int, bool)) or (
                isinstance(value, dict) and all(type(k) is int and type(v) is int for k, v in value.items())
            )
        fastjson.dumps({"topicQueueMappingByBroker": {"b": info}}, standard=True)
        fastjson.dumps({"topicQueueMappingByBroker": {"b": info}}, standard=False)


# ---------------------------------------------------------------------------
# any input: a value or the module's own error, in linear time


@EXAMPLES
@given(st.binary(max_size=2000) | _register_obj.map(_dumps), st.sampled_from([30, 407, 479]))
def test_json_register_body(body: bytes, version: int) -> None:
    parsed = run_bounded(
        lambda: parse_register_body(body, compressed=False, version=version, limits=SMALL_LIMITS), len(body), (BodyError,)
    )
    _check_register_body(parsed)


@EXAMPLES
@given(_compressed_raw() | st.binary(max_size=600), st.sampled_from([407, 479]), st.booleans())
def test_compressed_register_body(raw: bytes, version: int, damage_stream: bool) -> None:
    body = zlib.compress(raw)
    if damage_stream and body:
        body = body[: len(body) // 2] + bytes([body[len(body) // 2] ^ 0x55]) + body[len(body) // 2 + 1 :]
    parsed = run_bounded(
        lambda: parse_register_body(body, compressed=True, version=version, limits=SMALL_LIMITS),
        len(raw) + len(body),
        (BodyError,),
    )
    _check_register_body(parsed)


@EXAMPLES
@given(st.binary(max_size=800))
def test_compressed_register_body_of_random_bytes(body: bytes) -> None:
    run_bounded(lambda: parse_register_body(body, compressed=True, version=479, limits=SMALL_LIMITS), len(body), (BodyError,))


_route_obj = st.fixed_dictionaries(
    {},
    optional={
        "brokerDatas": st.lists(_shaped(["brokerAddrs", "brokerName", "cluster", "zoneName"], _numbers | _json), max_size=3)
        | _json,
        "queueDatas": st.lists(_shaped(["brokerName", "perm", "readQueueNums", "writeQueueNums", "topicSysFlag"], _numbers), max_size=3)
        | _json,
        "filterServerTable": _json,
        "orderTopicConf": _json,
    },
)


@EXAMPLES
@given(st.binary(max_size=1500) | _route_obj.map(_dumps))
def test_route(body: bytes) -> None:
    route = run_bounded(lambda: TopicRouteData.decode(body), len(body), (BodyError,))
    if route is not None:
        for q in route.queue_datas:
            assert all(INT32_MIN <= x <= INT32_MAX for x in (q.perm, q.read_queue_nums, q.write_queue_nums))


@EXAMPLES
@given(st.binary(max_size=1500) | st.fixed_dictionaries({"table": _json}).map(_dumps) | _json.map(_dumps))
def test_kv_table(body: bytes) -> None:
    table = run_bounded(lambda: parse_kv_table(body), len(body), (BodyError,))
    if table is not None:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in table.items())


@EXAMPLES
@given(st.binary(max_size=500) | _shaped(["counter", "timestamp", "stateVersion"], _numbers).map(_dumps))
def test_data_version(body: bytes) -> None:
    dv = run_bounded(lambda: DataVersion.decode(body), len(body), (BodyError,))
    if dv is not None:
        dv.encode()


_props_text = st.text(alphabet=st.sampled_from(list("\\\n\r\t\f =:#!uU0123456789abcdefABCDEFxyz\u00e9\u4e2d")), max_size=3000) | st.text(
    max_size=500
)


@EXAMPLES
@given(_props_text)
def test_properties(text: str) -> None:
    props = run_bounded(lambda: properties.loads(text), len(text), (properties.PropertiesError,))
    if props is not None:
        # Whatever parsed, store() writes it back so that it parses to the same.
        assert properties.loads(properties.store(props)) == props


@EXAMPLES
@given(st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=6))
def test_properties_store_round_trip(props: dict[str, str]) -> None:
    text = properties.store(props)
    assert text.isascii()
    assert properties.loads(text) == props
    assert len(text.splitlines()) == len(props)  # one line per key, whatever the values hold


# ---------------------------------------------------------------------------
# pathological shapes: 8x the input must cost far less than 64x the time


def _cpu(work: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.thread_time()
        try:
            work()
        except (BodyError, properties.PropertiesError):
            pass
        best = min(best, time.thread_time() - start)
    return best


def assert_linear(make: Callable[[int], Any], parse: Callable[[Any], Any], n: int) -> None:
    small, large = make(n), make(8 * n)
    t_small = _cpu(lambda: parse(small))
    t_large = _cpu(lambda: parse(large))
    assert t_large < 20 * t_small + 0.02, f"8x input took {t_large / max(t_small, 1e-9):.1f}x the time"


def test_properties_parse_in_linear_time() -> None:
    shapes: list[Callable[[int], str]] = [
        lambda n: "a\\\n" * n,  # line continuations: 6.7 s at 1.2 MB before the fix
        lambda n: "k=" + "\\\\" * n + "\n",
        lambda n: "k=" + "\\u0041" * n + "\n",
        lambda n: "k=" + "\\uD83D\\uDE00" * n + "\n",
        lambda n: "k=v\n" * n,
        lambda n: "\\\n" * n,
        lambda n: " " * n + "k=v",
        lambda n: "k" + "\\ " * n + "=v",
    ]
    for make in shapes:
        assert_linear(make, properties.loads, 20_000)


def _compressed_topics(n: int) -> bytes:
    raw = (
        _item(DataVersion(1, 1).encode())
        + struct.pack(">i", n)
        + b"".join(_item(b"T%07d 8 8 6 SINGLE_TAG {}" % i) for i in range(n))
        + _item(b"[]")
        + struct.pack(">i", 0)
    )
    return zlib.compress(raw)


def _json_topics(n: int) -> bytes:
    table = {f"T{i:07d}": {"perm": 6, "readQueueNums": 8, "writeQueueNums": 8} for i in range(n)}
    return orjson.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": table}})


def _json_mappings(n: int) -> bytes:
    infos = {f"T{i}": {"topic": f"T{i}", "bname": "b", "currIdMap": {str(j): j for j in range(4)}} for i in range(n)}
    return orjson.dumps({"topicConfigSerializeWrapper": {"topicQueueMappingInfoMap": infos}})


def test_register_bodies_parse_in_linear_time() -> None:
    assert_linear(_compressed_topics, lambda b: parse_register_body(b, compressed=True, version=479), 5_000)
    assert_linear(_json_topics, lambda b: parse_register_body(b, compressed=False, version=479), 5_000)
    assert_linear(_json_mappings, lambda b: parse_register_body(b, compressed=False, version=479), 1_000)
    assert_linear(
        lambda n: zlib.compress(b"\0" * n, 9), lambda b: inflate(b, 1 << 30), 2 << 20
    )


def test_kv_table_parses_in_linear_time() -> None:
    assert_linear(
        lambda n: orjson.dumps({"table": {f"k{i}": "v" * 10 for i in range(n)}}), parse_kv_table, 10_000
    )
