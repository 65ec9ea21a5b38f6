"""The metrics' parts without processes: the HTTP endpoint's bounds, a scrape over 100,000 topics,
the request meter's result reading, and the busiest-topics series staying counters."""

from __future__ import annotations

import time
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest

from broker_stub.topic_traffic import OTHER, TopicTraffic
from namesrv.config import NamesrvConfig
from namesrv.kvconfig import KVConfig
from namesrv.metrics import NamesrvMetrics
from namesrv.processor import NameServerProcessor
from namesrv.request_classes import REQUEST_CLASSES
from namesrv.snapshot import RouteSnapshots
from remoting import requests as rq
from remoting.bodies import DataVersion, TopicConfig
from remoting.codec import decode_frame, encode
from remoting.codes import ResponseCode, SerializeType
from remoting.command import RemotingCommand, response_to
from server_runtime.metering import RequestMeter, result_of
from server_runtime.metrics_families import registry_of
from server_runtime.metrics_http import MAX_CLIENTS, MetricsEndpoint
from server_runtime.reactor import Reactor
from tests.metrics_scrape import parse


async def _no_persist(path: str, data: bytes) -> None:
    raise OSError("nothing is written in this test")


class CountingDict(dict):  # type: ignore[type-arg]
    """A dict that counts the walks over it (len() and lookups are not walks)."""

    walks = 0

    def __iter__(self) -> Any:
        CountingDict.walks += 1
        return super().__iter__()

    def keys(self) -> Any:
        CountingDict.walks += 1
        return super().keys()

    def values(self) -> Any:
        CountingDict.walks += 1
        return super().values()

    def items(self) -> Any:
        CountingDict.walks += 1
        return super().items()


def test_a_scrape_walks_no_topic_table_even_with_100000_topics() -> None:
    config = NamesrvConfig(frameMaxLength=256 * 1024 * 1024, registerBodyMaxTopics=200_000)
    proc = NameServerProcessor(config, KVConfig("/nonexistent/kv.json"), clock=time.monotonic, persist=_no_persist)
    topics = [TopicConfig(f"topic-{i:06d}", 8, 8, 6) for i in range(100_000)]
    reg = rq.register_broker(cluster="c", broker_name="b", broker_addr="127.0.0.1:10911", broker_id=0, topics=topics,
                             data_version=DataVersion(1, 1))
    assert proc.handle(decode_frame(encode(reg)), 1) is not None
    table = proc.table
    assert len(table.topic_queues) == 100_000
    table.topic_queues = CountingDict(table.topic_queues)
    table.live = CountingDict(table.live)
    meter = RequestMeter(proc, REQUEST_CLASSES)
    reactor = Reactor(meter, on_close=lambda *a: None, max_frame=1 << 20, max_connections=lambda: 8,
                      idle_seconds=lambda: 60.0, clock=time.monotonic)
    metrics = NamesrvMetrics(table=table, kv=proc.kv, counters=proc.counters, meter=meter, reactor=reactor,
                             snapshots=RouteSnapshots(table, config, now_ms=proc.now_ms), restored=lambda: None)
    registry = metrics.registry()
    CountingDict.walks = 0
    began = time.process_time()
    text = generate_latest(registry).decode()
    took = time.process_time() - began
    assert CountingDict.walks == 0  # sizes only: the cost does not grow with the topics
    got = parse(text)
    assert got.value("rocketmq_namesrv_topics") == 100_000
    assert got.value("rocketmq_namesrv_active_brokers") == 1
    assert "topic-" not in text  # no per-topic series
    assert took < 0.25, took  # about 1 ms; a generous bound for a busy machine


def _answer(code: int, serialize: SerializeType = SerializeType.JSON) -> bytes:
    return encode(response_to(RemotingCommand(105, opaque=1, serialize_type=serialize), code, "remark"))


def test_the_result_is_read_from_either_header_encoding() -> None:
    for serialize in SerializeType:
        assert result_of(_answer(ResponseCode.SUCCESS, serialize)) == "success"
        assert result_of(_answer(ResponseCode.TOPIC_NOT_EXIST, serialize)) == "topic_not_exist"
        assert result_of(_answer(ResponseCode.NO_PERMISSION, serialize)) == "no_permission"
        assert result_of(_answer(-7, serialize)) == "other"  # a code the project does not know
        assert result_of(_answer(31000, serialize)) == "other"
    assert result_of(None) == "no_answer"
    assert result_of(b"short") == "other"


class FixedProcessor:
    async_codes: frozenset[int] = frozenset()

    def __init__(self, answer: bytes | None) -> None:
        self.answer = answer

    def handle(self, req: RemotingCommand, conn: object) -> bytes | None:
        return self.answer

    async def handle_async(self, req: RemotingCommand, conn: object) -> bytes | None:
        return self.answer


def test_the_meter_counts_every_request_and_labels_unknown_codes_other() -> None:
    meter = RequestMeter(FixedProcessor(_answer(0)), REQUEST_CLASSES)
    for _ in range(40):
        meter.handle(RemotingCommand(105), 1)
    for code in range(5000, 5100):
        meter.handle(RemotingCommand(code), 1)
    assert meter.count(105, "success") == 40
    assert meter.other.ok == 100 and meter.other.code == "other"
    assert sum(meter.histograms["route-read"].counts) == 40 // 16  # sampled
    assert sum(meter.histograms["unknown"].counts) == 100  # every one


async def _get(port: int, request: bytes) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request)
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
        return data


async def test_the_endpoint_answers_metrics_only_and_bounds_its_clients() -> None:
    registry = registry_of(lambda: [])
    endpoint = MetricsEndpoint(registry, __import__("logging").getLogger("test"))
    _, port = await endpoint.listen("127.0.0.1", -1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(endpoint.run)
        ok = await _get(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200 OK\r\n") and b"process_cpu_seconds_total" in ok
        head = await _get(port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and head.endswith(b"\r\n\r\n")
        assert (await _get(port, b"GET /other HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
        assert (await _get(port, b"POST /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405")
        assert (await _get(port, b"garbage\r\n\r\n")).startswith(b"HTTP/1.1 400")
        assert await _get(port, b"GET /metrics " + b"x" * 10_000) == b""  # no end of headers in 8 KiB: closed
        # MAX_CLIENTS idle connections fill it; the next one is closed at once
        idle = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(MAX_CLIENTS)]
        while endpoint.clients < MAX_CLIENTS:
            await trio.sleep(0.01)
        assert await _get(port, b"GET /metrics HTTP/1.1\r\n\r\n") == b""
        for stream in idle:
            await stream.aclose()
        while endpoint.clients:
            await trio.sleep(0.01)
        assert (await _get(port, b"GET /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 200 OK")
        assert endpoint.scrapes == 3  # two GETs and a HEAD
        nursery.cancel_scope.cancel()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "e", OTHER]), st.booleans(), st.integers(0, 50),
                          st.integers(0, 5000), st.booleans()), max_size=60))
def test_busiest_topic_series_never_go_down_and_sum_to_the_totals(steps: list[tuple[str, bool, int, int, bool]]) -> None:
    traffic = TopicTraffic(top=2, max_topics=4)
    last: dict[str, list[int]] = {}
    now = 0.0
    for topic, put, messages, size, deleted in steps:
        now += 7.0
        if deleted:
            traffic.forget(topic)
        elif put:
            traffic.add(now, [(topic, messages, size)], [])
        else:
            traffic.add(now, [], [(topic, messages, size)])
        series = dict(traffic.series(traffic.ranking(now, traffic.snapshot())))
        assert len(series) <= 3 and OTHER in series
        assert [sum(v[i] for v in series.values()) for i in range(4)] == traffic.totals
        for name, values in series.items():
            if name in last:  # a series that goes on never goes down (one that came back starts at 0)
                assert all(v >= p for v, p in zip(values, last[name])), (name, values, last[name])
        last = {n: v for n, v in series.items()}
