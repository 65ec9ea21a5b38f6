"""The fault proxy's sans-IO parts (the vocabulary, latency and bandwidth timing, the HTTP head parser) and
the scenario schema's network actions: pure functions, time as a parameter, no sockets."""

from __future__ import annotations

import pytest

from faultproxy.faults import (
    NO_FAULTS,
    FaultError,
    Pacer,
    StreamFaults,
    due_time,
    effective,
    parse_address,
    parse_path,
    parse_toxic,
)
from faultproxy.httpwire import HttpError, parse_head
from mqadmin.scenario import schema
from mqadmin.scenario.values import ScenarioError


def test_toxics_on_one_stream_combine_as_toxiproxy_chains_them() -> None:
    toxics = [parse_toxic({"type": "latency", "stream": "upstream", "name": "a", "attributes": {"latency": 100, "jitter": 5}}),
              parse_toxic({"type": "latency", "stream": "upstream", "name": "b", "attributes": {"latency": 50}}),
              parse_toxic({"type": "bandwidth", "stream": "upstream", "name": "c", "attributes": {"rate": 30}}),
              parse_toxic({"type": "bandwidth", "stream": "upstream", "name": "d", "attributes": {"rate": 10}}),
              parse_toxic({"type": "blackhole", "stream": "downstream"})]
    assert effective(toxics, "upstream") == StreamFaults(False, 150, 5, 10_000)
    assert effective(toxics, "downstream") == StreamFaults(blackhole=True)
    assert effective([], "upstream") is NO_FAULTS


def test_a_toxic_defaults_to_toxiproxys_name_and_stream_and_updates_keep_the_rest() -> None:
    toxic = parse_toxic({"type": "latency", "attributes": {"latency": 10}})
    assert (toxic.name, toxic.stream, dict(toxic.attributes)) == ("latency_downstream", "downstream",
                                                                   {"latency": 10, "jitter": 0})
    changed = parse_toxic({"attributes": {"jitter": 3}}, existing=toxic)
    assert dict(changed.attributes) == {"latency": 10, "jitter": 3} and changed.name == toxic.name
    with pytest.raises(FaultError, match="remove it and add another"):
        parse_toxic({"type": "bandwidth", "attributes": {"rate": 1}}, existing=toxic)


def test_latency_keeps_the_order_of_a_byte_stream() -> None:
    faults = StreamFaults(latency_ms=100, jitter_ms=80)
    first = due_time(10.0, faults, spread=1.0, last_due=0.0)  # 10 + 0.18
    second = due_time(10.01, faults, spread=-1.0, last_due=first)  # would be 10.03: held behind the first
    assert first == pytest.approx(10.18) and second == first
    assert due_time(5.0, StreamFaults(latency_ms=10, jitter_ms=50), spread=-1.0, last_due=0.0) == 5.0  # never early


def test_bandwidth_pacing_never_exceeds_the_rate() -> None:
    pacer = Pacer()
    rate = 1000  # bytes a second: slices of 100 bytes
    assert Pacer.slice_bytes(rate) == 100 and Pacer.slice_bytes(5) == 1
    starts = [pacer.start_of(0.0, 100, rate) for _ in range(10)]  # all asked for at t=0
    assert starts == pytest.approx([i * 0.1 for i in range(10)])
    assert pacer.start_of(5.0, 100, rate) == 5.0  # idle since: no burst owed, no debt either


@pytest.mark.parametrize(("value", "message"), [
    ("127.0.0.1", "must be host:port"), (":80", "must be host:port"), ("h:x", "must be host:port"),
    ("h:70000", "must be 1..65535"), ("a b:1", "must be host:port"), (5, "must be host:port"),
])
def test_bad_addresses(value: object, message: str) -> None:
    with pytest.raises(FaultError, match=message):
        parse_address(value, "upstream")


def test_addresses_and_paths() -> None:
    assert parse_address("[::1]:80", "x") == ("::1", 80)
    assert parse_address("127.0.0.1:0", "x", any_port=True) == ("127.0.0.1", 0)
    spec = parse_path({"name": "b@x:1", "listen": "127.0.0.2:0", "upstream": "127.0.0.1:9"})
    assert spec.enabled and spec.max_connections == 256
    with pytest.raises(FaultError, match="max_connections must be 1..1024"):
        parse_path({"name": "p", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:9", "max_connections": 0})
    with pytest.raises(FaultError, match="enabled must be true or false"):
        parse_path({"name": "p", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:9", "enabled": "no"})


@pytest.mark.parametrize(("head", "status"), [
    (b"GET /x HTTP/1.1\r\nBad Header: 1", 400),
    (b"GET /x HTTP/1.1\r\nContent-Length: -1", 400),
    (b"GET /x HTTP/1.1\r\nContent-Length: 1e3", 400),
    (b"BREW /x HTTP/1.1", 400),
    (b"GET x HTTP/1.1", 400),
    (b"GET /x HTTP/2", 505),
    (b"GET /x HTTP/1.1\r\n\xff: 1", 400),
    (b"GET /x HTTP/1.1" + b"\r\nA: b" * 65, 431),
])
def test_malformed_heads(head: bytes, status: int) -> None:
    with pytest.raises(HttpError) as caught:
        parse_head(head)
    assert caught.value.status == status


def test_a_head_with_a_query_and_a_body_length() -> None:
    head = parse_head(b"POST /proxies/a%2Fb/toxics?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 12")
    assert (head.method, head.path, head.content_length) == ("POST", "/proxies/a%2Fb/toxics", 12)


SCENARIO = """\
duration: 5
cluster: {brokers: 2%s}
timeline:
%s
expect:
  - send_success_rate: 0.5
"""


def _parse(timeline: str, cluster: str = "") -> schema.Scenario:
    return schema.parse(SCENARIO % (cluster, timeline), "net.yaml")


def test_the_proxy_is_started_only_for_a_scenario_that_needs_it() -> None:
    assert _parse("  - kill_broker: broker-a").cluster.fault_proxy is False
    assert _parse("  - partition: broker-a\n    namesrv: 0").cluster.fault_proxy is True
    assert _parse("  - kill_broker: broker-a", ", client_proxy: true").cluster.fault_proxy is True
    assert _parse("  - kill_broker: broker-a", ", fault_proxy: true").cluster.fault_proxy is True


def test_network_actions_parse_and_describe() -> None:
    scn = _parse("  - network_fault: broker-b\n    namesrv: 1\n    latency_ms: 20\n    jitter_ms: 5\n    stream: upstream\n"
                 "  - network_fault: broker-a\n    bandwidth_kbps: 7\n"
                 "  - network_fault: broker-a\n    blackhole: downstream\n"
                 "  - network_fault: broker-a\n    clients: true\n    reset: true\n"
                 "  - heal: broker-a\n  - heal: broker-b\n    namesrv: 1", ", client_proxy: true")
    assert [a.describe() for a in scn.timeline] == [
        "network_fault broker-b-0 to namesrv-1: latency 20±5 ms upstream",
        "network_fault broker-a-0: bandwidth 7 KB/s both",
        "network_fault broker-a-0: blackhole downstream",
        "network_fault broker-a-0 (clients' path): reset",
        "heal broker-a-0",
        "heal broker-b-0 to namesrv-1",
    ]


@pytest.mark.parametrize(("timeline", "cluster", "message"), [
    ("  - partition: broker-a\n    namesrv: 0", ", fault_proxy: false",
     "cluster.fault_proxy: is false, but the partition action on line"),
    ("  - kill_broker: broker-a", ", fault_proxy: false, client_proxy: true", "client_proxy: needs the fault proxy"),
    ("  - network_fault: broker-a\n    clients: true\n    reset: true", "", "needs cluster.client_proxy: true"),
    ("  - network_fault: broker-a\n    refuse: true\n    reset: true", "", "exactly one of refuse, blackhole"),
    ("  - network_fault: broker-a", "", "exactly one of refuse"),
    ("  - network_fault: broker-a\n    refuse: false", "", "refuse: false means nothing"),
    ("  - network_fault: broker-a\n    blackhole: sideways", "", "blackhole"),
    ("  - network_fault: broker-a\n    refuse: true\n    stream: upstream", "", "unknown field"),
    ("  - network_fault: broker-z\n    refuse: true", "", "no broker group 'broker-z'"),
    ("  - network_fault: broker-a\n    namesrv: 4\n    refuse: true", "", "namesrv"),
    ("  - partition: broker-a", "", "namesrv: is required"),
])
def test_bad_network_actions_are_one_line_with_the_line(timeline: str, cluster: str, message: str) -> None:
    with pytest.raises(ScenarioError, match="^net.yaml:[0-9]+: ") as caught:
        _parse(timeline, cluster)
    assert message in str(caught.value) and "\n" not in str(caught.value)
