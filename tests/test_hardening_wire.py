"""Hostile frames against the shared wire layer (issue 11, items 1-3 and 9).

Real servers over real TCP on 127.0.0.1: both ``mqnamesrv`` and
``mqbroker-stub`` as processes for the reproductions from the issue, and the
reactor in this process (with a tiny processor whose answers are really
encoded) where a handler or encoder must fail on purpose.
"""

from __future__ import annotations

import json
import logging
import socket
import struct
import time
from collections.abc import Hashable
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from remoting import fastjson
from remoting import requests as rq
from remoting.bodies import DataVersion
from remoting.codec import FrameDecoder, ProtocolError, decode_frame, encode
from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand, request, response_to
from remoting.clip import clip
from server_runtime.ratelog import ClipArgs, RateLimitedLog
from server_runtime.reactor import Reactor
from remoting.transport import connect
from tests.broker_procs import BrokerProcess
from tests.procs import NamesrvProcess

#: The issue's 643-byte frame: a topic nested 300 deep (orjson reads up to 1024).
def _frame(header: bytes, body: bytes = b"") -> bytes:
    """A JSON-header frame, written by hand (hostile frames are not what encode makes)."""
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


DEEP_FRAME = _frame(b'{"code":105,"extFields":{"topic":' + b"[" * 300 + b"]" * 300 + b"}}")


def _raw(addr: str) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5)


def _closed_by_server(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _exchange(sock: socket.socket, frame: bytes, timeout: float = 5.0) -> RemotingCommand:
    """Send one frame and read one answer, blocking (run in a worker thread)."""
    sock.settimeout(timeout)
    sock.sendall(frame)
    decoder = FrameDecoder()
    while True:
        data = sock.recv(65536)
        assert data, "server closed the connection instead of answering"
        got = decoder.feed(data)
        if got:
            return got[0]


async def _fresh_client_answered(addr: str, code: int = RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) -> None:
    """A brand-new connection gets an answer (10 s only detects a hang: stalls are measured by bench/)."""
    with trio.fail_after(10.0):
        async with connect(addr) as client:
            await client.invoke(request(code), timeout=10.0)


@pytest.fixture
def broker(tmp_path: Path):  # type: ignore[no-untyped-def]
    proc = BrokerProcess(tmp_path / "broker")
    try:
        yield proc.start()
    finally:
        proc.kill()


# ---------------------------------------------------------------------------
# item 1: the deep extFields frame


def test_deep_extfields_value_is_a_protocol_error() -> None:
    assert len(DEEP_FRAME) == 643
    with pytest.raises(ProtocolError, match="extFields value of type list"):
        FrameDecoder().feed(DEEP_FRAME)
    with pytest.raises(ProtocolError, match="type dict"):
        decode_frame(_frame(b'{"code":105,"extFields":{"a":{"b":1}}}'))
    # Scalars are still normalised to Java's text, as C++ clients need.
    [cmd] = FrameDecoder().feed(_frame(b'{"code":105,"extFields":{"a":1,"b":true,"c":1.5,"d":null,"e":"x"}}'))
    assert cmd.ext_fields == {"a": "1", "b": "true", "c": "1.5", "e": "x"}


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)
_FIELDS = st.sampled_from(
    ["code", "opaque", "flag", "version", "language", "remark", "extFields", "serializeTypeCurrentRPC"]
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_FIELDS, _JSON | st.dictionaries(st.text(max_size=8), _JSON, max_size=5), max_size=8))
def test_any_json_header_decodes_or_is_a_protocol_error(header: dict[str, object]) -> None:
    frame = _frame(json.dumps(header).encode())  # stdlib: integers past 64 bits too
    try:
        [cmd] = FrameDecoder().feed(frame)
    except ProtocolError:
        return
    assert all(type(k) is str and type(v) is str for k, v in (cmd.ext_fields or {}).items())
    assert all(-(2**31) <= v < 2**31 for v in (cmd.code, cmd.opaque, cmd.flag, cmd.version))
    assert cmd.remark is None or type(cmd.remark) is str


async def test_deep_frame_leaves_namesrv_serving(namesrv: NamesrvProcess) -> None:
    bad = _raw(namesrv.addr)
    bad.sendall(DEEP_FRAME)
    assert await trio.to_thread.run_sync(_closed_by_server, bad)
    bad.close()
    await _fresh_client_answered(namesrv.addr)
    assert namesrv.proc is not None and namesrv.proc.poll() is None
    log = namesrv.log()
    assert "extFields value of type list" in log
    assert "Traceback" not in log


async def test_deep_frame_leaves_broker_serving(broker: BrokerProcess) -> None:
    bad = _raw(broker.addr)
    bad.sendall(DEEP_FRAME)
    assert await trio.to_thread.run_sync(_closed_by_server, bad)
    bad.close()
    await _fresh_client_answered(broker.addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert broker.proc is not None and broker.proc.poll() is None
    log = broker.log()
    assert "extFields value of type list" in log
    assert "Traceback" not in log


# ---------------------------------------------------------------------------
# items 1 and 2: a request whose handling or encoding fails, in-process reactor


class _FailingProcessor:
    """Codes 1-3 fail in different ways; everything else is answered SUCCESS."""

    async_codes = frozenset({4})

    def handle(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        if req.code == 1:
            raise RuntimeError("handler bug " + "x" * 5000)
        if req.code == 2:
            # A real encoding failure: a ROCKETMQ header holds 16-bit codes only.
            return encode(response_to(req, 70000))
        if req.code == 3:
            raise TypeError("oneway handler bug")
        return encode(response_to(req, ResponseCode.SUCCESS, remark=f"ok {req.code}"))

    async def handle_async(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        await trio.sleep(0)
        raise OSError("disk on fire")


@pytest.fixture
async def failing_reactor(nursery: trio.Nursery):  # type: ignore[no-untyped-def]
    reactor = Reactor(
        _FailingProcessor(),
        on_close=lambda *_: None,
        max_frame=1 << 20,
        max_connections=lambda: 100,
        idle_seconds=lambda: 60.0,
    )
    host, port = reactor.listen("127.0.0.1", 0, 16)
    nursery.start_soon(reactor.run)
    yield f"{host}:{port}"
    reactor.close_all("test over")


async def test_handler_and_encoder_failures_answer_system_error(
    failing_reactor: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="remoting")
    sock = _raw(failing_reactor)
    remarks: list[str] = []
    try:
        for code, serialize in ((1, SerializeType.JSON), (2, SerializeType.ROCKETMQ), (4, SerializeType.JSON)):
            frame = encode(request(code, opaque=code, serialize_type=serialize))
            answer = await trio.to_thread.run_sync(_exchange, sock, frame)
            assert (answer.code, answer.opaque, answer.serialize_type) == (ResponseCode.SYSTEM_ERROR, code, serialize)
            assert answer.remark is not None and len(answer.remark) < 300
            remarks.append(answer.remark)
        assert remarks[1] == "ValueError: code and version must fit in 16 bits for a ROCKETMQ header"
        assert remarks[2] == "OSError: disk on fire"
        # A failing oneway request gets no answer; the connection still serves the next one.
        frame = encode(request(3, oneway=True)) + encode(request(5, opaque=5))
        answer = await trio.to_thread.run_sync(_exchange, sock, frame)
        assert (answer.code, answer.opaque, answer.remark) == (ResponseCode.SUCCESS, 5, "ok 5")
    finally:
        sock.close()
    # Four failures, one short line: the rest are counted for the next summary.
    [line] = [r.getMessage() for r in caplog.records if r.name == "remoting"]
    assert line.startswith("request code 1 from 127.0.0.1:") and len(line) < 400


# ---------------------------------------------------------------------------
# item 3: fastjson's legacy parse is linear


def _escaped_quotes(n: int) -> bytes:
    return b'"' + b'\\"' * n


def _parse_seconds(data: bytes) -> float:
    """CPU seconds (not wall time: other processes share the cores) to parse or refuse ``data``."""
    start = time.process_time()
    try:
        fastjson.loads(data)
    except fastjson.BodyError:
        pass
    return time.process_time() - start


@pytest.mark.parametrize(
    "make",
    [
        _escaped_quotes,
        lambda n: b"{" + b" " * (2 * n),
        lambda n: b"{1" + b" " * (2 * n),
        lambda n: b"{" + b"1" * (2 * n),
        lambda n: b"," * (2 * n),
        lambda n: b'{"a":' * (n // 3),
        lambda n: b"[" * (2 * n),
        lambda n: b'"\\' + b"\\\n" * n,
    ],
)
def test_fastjson_loads_is_linear(make) -> None:  # type: ignore[no-untyped-def]
    # CPU time, best of 5, and a 1 ms floor (caches are shared with other processes); quadratic would be 64x
    small = min(_parse_seconds(make(4096)) for _ in range(5))
    big = min(_parse_seconds(make(32768)) for _ in range(5))  # 8x the input, 64 KB
    assert big < 0.2, f"64 KB took {big * 1000:.1f} ms of CPU"
    assert big < 20 * max(small, 0.001), f"8x input took {big / max(small, 1e-9):.1f}x the CPU time"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='"\\{}[],:-0123456789 \naeltrunfs', max_size=3000))
def test_fastjson_loads_any_text_is_a_value_or_body_error_quickly(text: str) -> None:
    start = time.thread_time()  # this thread's CPU only: a worker's other threads are not the parse
    try:
        fastjson.loads(text.encode())
    except fastjson.BodyError:
        pass
    assert time.thread_time() - start < 0.2


def test_fastjson_legacy_forms_still_parse() -> None:
    assert fastjson.loads(b'{0:"a\\"b{1:",12 : [1],"k":{-3:true}}') == {"0": 'a"b{1:', "12": [1], "k": {"-3": True}}
    with pytest.raises(fastjson.BodyError):
        fastjson.loads(_escaped_quotes(10))


async def test_namesrv_query_data_version_with_escaped_quotes_stalls_nobody(namesrv: NamesrvProcess) -> None:
    body = _escaped_quotes(32768)  # 64 KB: 18 s of stall before the fix
    req = rq.query_data_version(
        cluster="c", broker_name="b", broker_addr="127.0.0.1:1", broker_id=0, data_version=DataVersion(1, 1)
    )
    req.body = body
    async with connect(namesrv.addr) as attacker:
        resp = await attacker.invoke(req, timeout=10.0)
        assert resp.code == ResponseCode.SYSTEM_ERROR
    await _fresh_client_answered(namesrv.addr)


async def test_broker_heartbeat_with_escaped_quotes_stalls_nobody(broker: BrokerProcess) -> None:
    async with connect(broker.addr) as attacker:
        resp = await attacker.invoke(request(RequestCode.HEART_BEAT, body=_escaped_quotes(32768)), timeout=10.0)
        assert resp.code != ResponseCode.SUCCESS
    await _fresh_client_answered(broker.addr, RequestCode.GET_BROKER_RUNTIME_INFO)


# ---------------------------------------------------------------------------
# item 9: what a client sends cannot blow up the log


async def test_huge_garbage_code_is_logged_in_a_short_line(namesrv: NamesrvProcess) -> None:
    header = b'{"code":"' + b"9" * 8 * 1024 * 1024 + b'x"}'
    before = namesrv.log_path.stat().st_size
    bad = _raw(namesrv.addr)
    await trio.to_thread.run_sync(bad.sendall, _frame(header))
    assert await trio.to_thread.run_sync(_closed_by_server, bad)
    bad.close()
    await _fresh_client_answered(namesrv.addr)
    grown = namesrv.log_path.stat().st_size - before
    assert 0 < grown < 1000, f"log grew by {grown} bytes"
    assert "is not an integer" in namesrv.log()


async def test_refusals_at_the_connection_limit_are_one_line(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    namesrv = start_namesrv(serverMaxConnections=2)
    held = [_raw(namesrv.addr) for _ in range(2)]
    try:
        refused = 0
        for _ in range(200):
            sock = _raw(namesrv.addr)
            if await trio.to_thread.run_sync(_closed_by_server, sock):
                refused += 1
            sock.close()
        assert refused == 200
    finally:
        for sock in held:
            sock.close()
    assert namesrv.log().count("refusing connection") == 1


async def test_client_values_in_server_log_lines_are_clipped(namesrv: NamesrvProcess) -> None:
    key = "k" * 60_000 + "Path"  # refused (a path key, under configUpdateMaxBytes) and logged, key and all
    async with connect(namesrv.addr) as client:
        resp = await client.invoke(rq.update_namesrv_config({key: "v"}))
        assert resp.code == ResponseCode.NO_PERMISSION
    [line] = [line for line in namesrv.log().splitlines() if "refused config update" in line]
    assert len(line) < 500


def test_clip_args_filter_keeps_formats_working() -> None:
    args = ("a" * 1000, 7, b"b" * 1000, [1] * 500)
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "%s %d %r %s", args, None)
    ClipArgs().filter(record)
    text = record.getMessage()
    assert len(text) < 1000 and " 7 " in text and "(800 more)" in text


def test_rate_limited_log_summarises_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    limited = RateLimitedLog(logging.getLogger("test.ratelog"), interval=10.0, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="test.ratelog")
    summary = "refused {count} connections at the limit in the last {seconds} s"
    for _ in range(432):
        limited.warning("refused", summary, "refusing connection from %s", "1.2.3.4:5")
        now[0] += 0.01
    limited.flush()  # 4.32 s in: not due yet
    assert [r.getMessage() for r in caplog.records] == ["refusing connection from 1.2.3.4:5"]
    now[0] = 110.5
    limited.flush()
    assert caplog.records[-1].getMessage() == "refused 431 connections at the limit in the last 10 s"
    limited.warning("refused", summary, "refusing again")
    assert caplog.records[-1].getMessage() == "refusing again"


def test_clip_bounds_client_values() -> None:
    assert clip("abc") == "abc"
    text = clip("x" * 10_000)
    assert len(text) < 230 and text.endswith("(9800 more)")
    assert len(clip(b"\xff" * 5000)) < 230
