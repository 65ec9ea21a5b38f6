"""Register bodies that once looped or grew without bound, and the topic table's bound (issue 20).

The wire fuzzer (seed 1) found a compressed REGISTER_BROKER body that put
the NameServer in an endless loop in ``registration.compact._runs``, appending to
a list for ever (5.4 GB in 65 s): a body declaring more topics than it
holds, whose items end exactly at the end of the body. Every scan step
must now advance or fail; these tests drive the scan generator step by
step with a bound on the steps, so a loop is a failure, not a hung test.
"""

from __future__ import annotations

import random
import signal
import struct
import sys
import threading
import zlib
from pathlib import Path

import pytest
import trio

from namesrv.config import NamesrvConfig
from namesrv.kvconfig import KVConfig
from namesrv.processor import NameServerProcessor
from namesrv.register_requests import STOPPING_REMARK
from namesrv.registration.body import RawBody
from namesrv.route_model import TopicTableFull
from namesrv.routes import Registration, RouteOptions, RouteTable
from namesrv.slices import run_to_end
from namesrv.server import NameServer
from remoting import requests as rq
from remoting.bodies import BodyError, DataVersion, TopicConfig
from remoting.register_body import encode_register_body, parse_register_body
from remoting.codec import FrameDecoder, decode_frame, encode
from remoting.codes import ResponseCode, Version
from remoting.command import RemotingCommand
from remoting.transport import connect
from tests.fuzz.register_bodies import base_topics, compact_body, evolve, json_body
from tests.procs import NamesrvProcess

V533 = int(Version.V5_3_3)
V497 = int(Version.V4_9_7)
_I32 = struct.Struct(">i")


def minimal_looping_body() -> bytes:
    """A data version and a topic count of 1, then nothing: the smallest body that looped."""
    dv = DataVersion(1, 1).encode()
    return zlib.compress(_I32.pack(len(dv)) + dv + _I32.pack(1))


def overcounted(topics: int, extra: int, version: int) -> bytes:
    """A real broker's compressed body whose declared count says ``extra`` topics more than it holds."""
    body = encode_register_body([TopicConfig(f"t{i:05d}", 8, 8, 6) for i in range(topics)], DataVersion(2, 2),
                                compressed=True, version=version)
    data = bytearray(zlib.decompress(body))
    dv_len = _I32.unpack_from(data, 0)[0]
    _I32.pack_into(data, 4 + dv_len, topics + extra)
    return zlib.compress(bytes(data))


def parse(body: bytes, compressed: bool, version: int):  # type: ignore[no-untyped-def]
    return parse_register_body(body, compressed=compressed, version=version)


#: Lines of the scan (namesrv/registration/body.py, scan.py, compact.py) one test body may execute: a loop that never yields
#: (as the old one did) fails the test after this many instead of hanging it for ever.
MAX_SCAN_LINES = 3_000_000
SCAN_FILES = ("registration/body.py", "registration/scan.py", "registration/compact.py")


class LineBudget:
    """A trace function counting the lines run in the scan's modules; AssertionError past the budget."""

    def __init__(self, budget: int) -> None:
        self.left = budget

    def __call__(self, frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call" and frame.f_code.co_filename.endswith(SCAN_FILES):
            return self.line
        return None

    def line(self, frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "line":
            self.left -= 1
            if self.left < 0:
                raise AssertionError(f"the scan ran more than {MAX_SCAN_LINES} lines: it does not advance")
        return self.line


def drive(steps, bound: int):  # type: ignore[no-untyped-def]
    """Run a generator to its end in at most ``bound`` steps (more: it does not advance), counting the
    scan's lines so that a loop inside one step fails too."""
    previous = sys.gettrace()
    sys.settrace(LineBudget(MAX_SCAN_LINES))
    try:
        for _ in range(bound):
            try:
                next(steps)
            except StopIteration as done:
                return done.value
    finally:
        sys.settrace(previous)
    raise AssertionError(f"still running after {bound} steps")


def reg(name: str = "broker-a", addr: str = "10.0.0.1:10911") -> Registration:
    return Registration("c1", addr, name, 0, enable_acting_master=False)


@pytest.mark.parametrize(
    ("body", "version"),
    [
        (minimal_looping_body(), V533),
        (overcounted(60, 2, V497), V497),  # the fuzzer's frame: 4.9.x layout, two topics short
        (overcounted(300, 3, V533), V533),
        (overcounted(5000, 1, V533), V533),
        (overcounted(5000, 50_000, V533), V533),  # more than 4-byte items could fit
    ],
)
def test_a_body_declaring_more_topics_than_it_holds_is_refused(body: bytes, version: int) -> None:
    with pytest.raises(BodyError):
        drive(RawBody(body, True, version, parse).scan([], {}), bound=100)
    table = RouteTable()
    with pytest.raises(BodyError):
        drive(table.register_raw(reg(), RawBody(body, True, version, parse), conn="c", now=0), bound=100)
    assert not table.topic_queues and not table.live


def test_an_overcounted_body_is_refused_on_the_incremental_path_too() -> None:
    """With the broker's last chunks known (anchors, chunk digests), the same refusal."""
    table = RouteTable()
    configs = [TopicConfig(f"t{i:05d}", 8, 8, 6) for i in range(3000)]
    good = encode_register_body(configs, DataVersion(1, 1), compressed=True)
    assert drive(table.register_raw(reg(), RawBody(good, True, V533, parse), conn="c", now=0), 1000).ok
    before = [(t, dict(q)) for t, q in table.topic_queues.items()]
    for extra in (1, 2, 3, 4, 700):
        with pytest.raises(BodyError):
            drive(table.register_raw(reg(), RawBody(overcounted(3000, extra, V533), True, V533, parse),
                                     conn="c", now=1), bound=1000)
    assert [(t, dict(q)) for t, q in table.topic_queues.items()] == before


def test_structurally_broken_bodies_end_in_bounded_steps() -> None:
    """Bodies from the fuzzer's structure-aware mutations, each after a valid one of the same broker:
    every one ends (applied or refused with BodyError) within a bound on its steps."""
    table = RouteTable()
    outcomes = {"applied": 0, "refused": 0}
    for seed in range(300):
        rng = random.Random(seed)
        version = rng.choice((V533, V497, 37))
        compressed = rng.random() < 0.6
        topics = base_topics(rng)
        name = f"broker-{seed % 7}"
        good = encode_register_body(topics, DataVersion(1, 1), compressed=compressed, version=version)
        run_to_end(table.register_raw(reg(name), RawBody(good, compressed, version, parse), conn=seed, now=seed))
        body = (compact_body if compressed else json_body)(evolve(topics, rng), DataVersion(2, 2), version, rng)
        try:
            outcome = drive(table.register_raw(reg(name), RawBody(body, compressed, version, parse), conn=seed, now=seed),
                            bound=10_000)
            outcomes["applied" if outcome.ok else "refused"] += 1
        except BodyError:
            outcomes["refused"] += 1
    assert outcomes["applied"] > 20 and outcomes["refused"] > 80, outcomes


async def test_the_looping_body_over_tcp_is_answered_and_the_server_keeps_answering(namesrv: NamesrvProcess) -> None:
    req = rq.register_broker(cluster="c1", broker_name="b1", broker_addr="127.0.0.1:20911", broker_id=0,
                             topics=[], data_version=DataVersion(1, 1), compressed=True)
    req.body = minimal_looping_body()
    req.ext_fields["bodyCrc32"] = str(zlib.crc32(req.body) & 0x7FFFFFFF)
    with trio.fail_after(60):  # a generous bound on a shared machine: the loop never answered at all
        async with connect(namesrv.addr) as broker:
            resp = await broker.invoke(req, timeout=60)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert "compressed register body declares 1 topics" in (resp.remark or "")
        async with connect(namesrv.addr) as client:  # a fresh connection is answered
            info = await client.invoke(rq.cluster_info(), timeout=60)
            assert info.code == ResponseCode.SUCCESS


# --------------------------------------------------------------------------
# maxTopics


def _register(table: RouteTable, name: str, topics: list[str], counter: int = 1, addr: str | None = None) -> bool:
    """Register ``name`` (compressed body) directly in ``table``; the outcome's ok."""
    body = encode_register_body([TopicConfig(t, 4, 4, 6) for t in topics], DataVersion(counter, counter), compressed=True)
    raw = RawBody(body, True, V533, parse)
    return run_to_end(table.register_raw(reg(name, addr or _addr(name)), raw, conn=name, now=counter)).ok


def _addr(name: str) -> str:
    return f"10.0.0.{ord(name[-1])}:1"


@pytest.mark.parametrize("new_topics", [300, 6000])  # applied in the commit, or in slices
def test_max_topics_refuses_a_registration_whole_and_counts_it(new_topics: int) -> None:
    table = RouteTable(RouteOptions(max_topics=8000))
    assert _register(table, "broker-a", [f"a{i}" for i in range(7000)])
    before = {t: dict(q) for t, q in table.topic_queues.items()}
    key_a = ("c1", _addr("broker-a"))
    live_before = table.live[key_a].last_update_ms
    with pytest.raises(TopicTableFull, match=r"holds 7000 topics .* past maxTopics \(8000\); nothing was changed"):
        _register(table, "broker-b", [f"a{i}" for i in range(100)] + [f"b{i}" for i in range(new_topics + 1000)])
    with pytest.raises(TopicTableFull):  # the broker that filled it: refused, yet its live entry is refreshed
        _register(table, "broker-a", [f"a{i}" for i in range(7000 + new_topics + 1000)], counter=5)
    assert {t: dict(q) for t, q in table.topic_queues.items()} == before
    assert table.topic_table_refusals == 2
    assert table.live[key_a].last_update_ms == 5 > live_before
    assert list(table.live) == [key_a]
    # topics already in the table do not count against it: a second broker of the same topics fits
    assert _register(table, "broker-c", [f"a{i}" for i in range(7000)])
    assert _register(table, "broker-d", [f"d{i}" for i in range(1000)])
    assert len(table.topic_queues) == 8000


def test_max_topics_bounds_register_topic_too() -> None:
    table = RouteTable(RouteOptions(max_topics=3))
    assert _register(table, "broker-a", ["t1", "t2", "t3"])
    table.register_topic("t1", [("broker-a", 8, 8, 6, 0)])  # an existing topic: fine
    with pytest.raises(TopicTableFull, match=r"maxTopics \(3\)"):
        table.register_topic("t4", [("broker-a", 8, 8, 6, 0)])
    assert "t4" not in table.topic_queues


async def test_a_refused_registration_over_tcp_gets_the_remark_and_a_log_line(
    start_namesrv,  # type: ignore[no-untyped-def]
) -> None:
    ns = start_namesrv(maxTopics=100)
    async with connect(ns.addr) as broker:
        ok = await broker.invoke(rq.register_broker(
            cluster="c1", broker_name="b1", broker_addr="127.0.0.1:20911", broker_id=0,
            topics=[TopicConfig(f"t{i}", 4, 4, 6) for i in range(90)], data_version=DataVersion(1, 1)), timeout=30)
        assert ok.code == ResponseCode.SUCCESS
        refused = await broker.invoke(rq.register_broker(
            cluster="c1", broker_name="b2", broker_addr="127.0.0.1:20921", broker_id=0,
            topics=[TopicConfig(f"u{i}", 4, 4, 6) for i in range(20)], data_version=DataVersion(1, 1)), timeout=30)
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert "topic table full: the NameServer holds 90 topics and this registration would add 20 new ones" in (
        refused.remark or "")
    with trio.fail_after(30):
        while "broker b2 127.0.0.1:20921 (c1) refused (1 refusals so far): topic table full" not in ns.log():
            await trio.sleep(0.05)


# --------------------------------------------------------------------------
# a stop during a registration


async def _no_persist(path: str, data: bytes) -> None:
    raise OSError("nothing is written here")


async def test_a_stop_abandons_a_registration_being_planned_and_answers_it() -> None:
    proc = NameServerProcessor(NamesrvConfig(), KVConfig("/nonexistent/kv.json"), clock=lambda: 1.0,
                               persist=_no_persist)
    req = decode_frame(encode(rq.register_broker(
        cluster="c1", broker_name="big", broker_addr="127.0.0.1:20911", broker_id=0,
        topics=[TopicConfig(f"t{i:06d}", 8, 8, 6) for i in range(60_000)], data_version=DataVersion(1, 1),
        compressed=True)))
    answers: list[bytes | None] = []

    async def register() -> None:
        answers.append(await proc.handle_async(req, "conn"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(register)
        for _ in range(5):  # a few slices in: the plan is under way, nothing is written
            await trio.lowlevel.checkpoint()
        assert proc.table_lock.locked() and not proc.table.applying
        proc.stopping = True
    answer = decode_frame(answers[0])  # type: ignore[arg-type]
    assert answer.code == ResponseCode.SYSTEM_ERROR and answer.remark == STOPPING_REMARK
    assert not proc.table.topic_queues and not proc.table.live and not proc.table.before
    assert not proc.table_lock.locked()


async def test_a_stop_after_the_commit_lets_the_registration_finish_and_answers_success() -> None:
    """Past its commit a large registration still frees the old state in slices: a stop then must not
    abandon it (it was applied) nor answer it "not applied"."""
    proc = NameServerProcessor(NamesrvConfig(), KVConfig("/nonexistent/kv.json"), clock=lambda: 1.0,
                               persist=_no_persist)
    req = decode_frame(encode(rq.register_broker(
        cluster="c1", broker_name="big", broker_addr="127.0.0.1:20911", broker_id=0,
        topics=[TopicConfig(f"t{i:06d}", 8, 8, 6) for i in range(60_000)], data_version=DataVersion(1, 1),
        compressed=True)))
    answers: list[bytes | None] = []

    async def register() -> None:
        answers.append(await proc.handle_async(req, "conn"))

    seen_writing = False
    async with trio.open_nursery() as nursery:
        nursery.start_soon(register)
        for _ in range(100_000):  # bounded: until the commit (written in slices, then shown at once)
            await trio.lowlevel.checkpoint()
            seen_writing = seen_writing or proc.table.applying
            if seen_writing and not proc.table.applying:
                break
        assert seen_writing and not proc.table.applying and proc.table.topic_queues
        assert proc.table.must_finish and proc.table_lock.locked()  # committed, still freeing the old state
        proc.stopping = True
    answer = decode_frame(answers[0])  # type: ignore[arg-type]
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert len(proc.table.topic_queues) == 60_000 and not proc.table.must_finish
    assert not proc.table_lock.locked()


async def test_a_final_snapshot_that_never_finishes_does_not_keep_the_stop_from_ending(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A disk that never completes the final snapshot write (stuck, or a starved machine): the stop
    gives the snapshot up at its time limit, says so, and the file stays the one written before."""
    config = NamesrvConfig()
    config.listenPort, config.bindAddress, config.kvConfigPath = 0, "127.0.0.1", str(tmp_path / "kv.json")
    server = NameServer(config, KVConfig(config.kvConfigPath))
    released = threading.Event()
    stuck: list[int] = []

    def stuck_write(*args: object) -> None:
        stuck.append(1)
        released.wait(120)

    two = [TopicConfig("t1", 4, 4, 6), TopicConfig("t2", 4, 4, 6)]
    try:
        with trio.fail_after(90):  # far past the stop's time limit: a hang, not a slow stop
            async with trio.open_nursery() as nursery:
                host, port = await nursery.start(server.serve)
                async with connect(f"{host}:{port}") as broker:
                    resp = await broker.invoke(rq.register_broker(
                        cluster="c1", broker_name="b", broker_addr="127.0.0.1:20911", broker_id=0,
                        topics=two, data_version=DataVersion(1, 1)), timeout=30)
                    assert resp.code == ResponseCode.SUCCESS, resp.remark
                while server.snapshots.writes == 0:  # the periodic write of that registration
                    await trio.sleep(0.05)
                written = Path(server.snapshots.path).read_bytes()
                async with connect(f"{host}:{port}") as broker:  # a change the final snapshot would write
                    resp = await broker.invoke(rq.register_broker(
                        cluster="c1", broker_name="b2", broker_addr="127.0.0.1:20921", broker_id=0,
                        topics=two, data_version=DataVersion(1, 1)), timeout=30)
                    assert resp.code == ResponseCode.SUCCESS, resp.remark
                    server.snapshots._write = stuck_write  # type: ignore[method-assign]
                    server.stop()  # serve returns, and this nursery ends
    finally:
        released.set()
    assert stuck  # the final write was attempted
    assert "final route snapshot given up" in caplog.text
    assert Path(server.snapshots.path).read_bytes() == written


async def _route_code(addr: str, topic: str) -> int:
    async with connect(addr) as client:
        return (await client.invoke(rq.get_route(topic), timeout=60)).code


async def test_sigterm_during_a_150000_topic_registration_answers_it_and_exits(tmp_path: Path) -> None:
    """Over real TCP against a real process: the registration read gets an answer, the process exits,
    and the route snapshot it leaves holds the broker whole or not at all (timing: bench/register_bench.py)."""
    frame = encode(rq.register_broker(
        cluster="c1", broker_name="big", broker_addr="127.0.0.1:20911", broker_id=0,
        topics=[TopicConfig(f"s-{i:06d}", 8, 8, 6) for i in range(150_000)], data_version=DataVersion(1, 1),
        compressed=True))
    ns = NamesrvProcess(tmp_path / "ns").start()
    try:
        host, port = ns.addr.rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        decoder = FrameDecoder(1 << 20)
        await stream.send_all(frame)
        await trio.sleep(0.2)  # read, and under way: 150,000 topics take seconds of CPU
        assert ns.proc is not None
        ns.proc.send_signal(signal.SIGTERM)
        with trio.fail_after(120):
            answers: list[RemotingCommand] = []
            while not answers:
                data = await stream.receive_some(65536)
                assert data, "the connection closed without an answer"
                answers = decoder.feed(data)
            status = await trio.to_thread.run_sync(ns.proc.wait, 120)
        await stream.aclose()
        answer = answers[0]
        assert status == 0
        assert (answer.code, answer.remark) in ((ResponseCode.SUCCESS, None), (ResponseCode.SYSTEM_ERROR, STOPPING_REMARK))
        restarted = NamesrvProcess(tmp_path / "ns").start()  # same files: restores the route snapshot
        try:
            codes = {await _route_code(restarted.addr, t) for t in ("s-000000", "s-074999", "s-149999")}
        finally:
            restarted.kill()
        applied = answer.code == ResponseCode.SUCCESS
        print("answer:", answer.code, answer.remark, "routes after restart:", codes)
        assert codes == {ResponseCode.SUCCESS if applied else ResponseCode.TOPIC_NOT_EXIST}, (answer, codes)
    finally:
        ns.kill()
