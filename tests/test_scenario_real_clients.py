"""Real Java and Go clients as a scenario's load and consumers (``client: java:VERSION`` / ``go``).

The line conversion and the schema are checked on their own; then one scenario runs Java 5.3.3 and
Go producers and Java 4.9.7 and Go push consumers on a real local cluster, and its verdicts are
computed from what those programs printed. A run that is interrupted leaves no client behind.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from mqadmin.rocketmq import harness
from mqadmin.scenario import report, runner, schema
from mqadmin.scenario.client_lines import allocation_events, consume_record, send_outcome, send_record
from mqadmin.scenario.consumer_eval import balanced_times
from mqadmin.scenario.consumers import ConsumerRun
from mqadmin.scenario.values import ScenarioError
from tests.test_scenario_run import base, cluster_procs, start_cli  # noqa: F401 (base is a fixture)

WALL_T0 = 1_700_000_000.0  # s: time zero on the wall clock, for the conversions


# ---------------------------------------------------------------------------------------------------
# what the programs' lines become

def test_a_stored_send_becomes_an_ok_record_on_the_run_timeline() -> None:
    line = {"event": "send", "p": 1, "t": WALL_T0 * 1000 + 2500.5, "ms": 3.25, "topic": "T", "attempts": 2,
            "status": "SEND_OK", "broker": "broker-b", "queue": 3, "offset": 41, "msgId": "AC11000100002A9F"}
    rec = send_record(line, 10, WALL_T0)
    assert (rec.producer, rec.topic, rec.broker, rec.queue_id, rec.outcome) == (11, "T", "broker-b", 3, "ok")
    assert abs(rec.t - 2.5005) < 1e-6 and rec.latency_ms == 3.25 and rec.attempts == 2
    assert (rec.queue_offset, rec.code, rec.msg_id) == (41, 0, "AC11000100002A9F")
    # stored, but not SEND_OK: the broker's code, as a simulated producer records it (Java by name, Go by number)
    assert send_record({**line, "status": "FLUSH_DISK_TIMEOUT"}, 0, WALL_T0).code == 10
    assert send_record({**line, "status": 3}, 0, WALL_T0).code == 11


@pytest.mark.parametrize("error, outcome", [
    ("MQClientException: No route info of this topic: T", "no_route"),
    ("the topic=T route info not found", "no_route"),
    ("MQClientException: Send [3] times, still failed <- RemotingTimeoutException: wait response on the channel "
     "<127.0.0.1:10911> timeout, 3000(ms)", "timeout"),
    ("RemotingTooMuchRequestException: sendDefaultImpl call timeout", "timeout"),
    ("context deadline exceeded", "timeout"),
    ("MQClientException: Send [3] times <- RemotingConnectException: connect to 127.0.0.1:1 failed", "conn_error"),
    ("dial tcp 127.0.0.1:1: connect: connection refused", "conn_error"),
    ("MQBrokerException: CODE: 13  DESC: stopped", "rejected"),
    ("CODE: 17, DESC: topic not exist", "rejected"),
    ("IllegalStateException: something else", "error"),
])
def test_a_failed_send_is_classified_from_what_the_client_said(error: str, outcome: str) -> None:
    assert send_outcome(error) == outcome


def test_a_failed_send_keeps_its_code_and_last_queue_and_no_message_id() -> None:
    java = send_record({"event": "send", "p": 0, "t": WALL_T0 * 1000, "ms": 3000.0, "topic": "T", "attempts": 3,
                        "error": "MQBrokerException: CODE: 13  DESC: x", "code": 13, "broker": "broker-a", "queue": 1},
                       0, WALL_T0)
    assert (java.outcome, java.code, java.broker, java.queue_id, java.msg_id, java.queue_offset) == (
        "rejected", 13, "broker-a", 1, "", -1)
    go = send_record({"event": "send", "p": 0, "t": WALL_T0 * 1000, "ms": 2.0, "topic": "T", "attempts": 1,
                      "error": "CODE: 17, DESC: topic not exist", "code": -1}, 0, WALL_T0)
    assert (go.outcome, go.code, go.broker) == ("rejected", 17, None)


def test_a_consumption_becomes_a_consume_record_with_end_to_end_latency() -> None:
    line = {"event": "consumed", "t": WALL_T0 * 1000 + 4000.0, "topic": "T", "broker": "broker-a", "queue": 2,
            "offset": 7, "msgId": "M1", "storeMs": WALL_T0 * 1000 + 3990.0, "outcome": "retry", "reconsume": 1}
    rec = consume_record(line, 5, "scenario_cg", WALL_T0)
    assert (rec.consumer, rec.group, rec.topic, rec.broker, rec.queue_id, rec.queue_offset, rec.msg_id) == (
        5, "scenario_cg", "T", "broker-a", 2, 7, "M1")
    assert rec.t == pytest.approx(4.0) and rec.latency_ms == pytest.approx(10.0)
    assert (rec.outcome, rec.reconsume_times, rec.broker_id) == ("retry", 1, -1)  # the node is not known


def test_allocations_become_ownership_events_the_rebalance_verdict_reads() -> None:
    from mqadmin.scenario.model import ConsumerGroupSpec
    from simclient import OwnershipEvent

    spec = ConsumerGroupSpec("cg", 2, ("T",), "*", 0, "last_offset", 30, 30, 20, 5, 15000, 0, 20, 0, client="go")
    every = [["broker-a", q] for q in range(4)]
    owned: dict[int, set] = {0: set(), 1: set()}
    events = [OwnershipEvent(0.0, 0, "scenario_cg", "start"), OwnershipEvent(0.0, 1, "scenario_cg", "start")]

    def allocate(consumer: int, t: float, mine: list) -> None:
        line = {"event": "allocate", "t": (WALL_T0 + t) * 1000, "topic": "T", "all": every, "mine": mine}
        events.extend(allocation_events(line, consumer, "scenario_cg", WALL_T0, owned[consumer]))

    allocate(0, 0.1, every)  # alone at first: all four queues
    allocate(1, 0.2, every[2:])  # the second one takes half: both hold queues 2 and 3
    assert [e.kind for e in events[-3:]] == ["queues", "acquire", "acquire"]
    allocate(0, 0.3, every[:2])  # the first gives them up
    assert [(e.kind, e.queue_id) for e in events[-3:]] == [("queues", -1), ("release", 2), ("release", 3)]
    assert owned == {0: {("T", "broker-a", 0), ("T", "broker-a", 1)}, 1: {("T", "broker-a", 2), ("T", "broker-a", 3)}}
    run = ConsumerRun((spec,), events=events)
    states = balanced_times(run, "cg")
    assert states[-1] == (pytest.approx(0.3), True)
    assert not any(ok for t, ok in states if t < 0.29)  # two owners of queues 2 and 3 until then


# ---------------------------------------------------------------------------------------------------
# the schema

LOAD = """\
duration: 5
load:
  client: {client}
{extra}expect:
  - send_success_rate: 1
"""


@pytest.mark.parametrize("client", ["sim", "go", "java:5.3.3", "java:4.9.7", "java:5.5.0"])
def test_client_kinds_parse(client: str) -> None:
    scn = schema.parse(LOAD.format(client=client, extra=""), "c.yaml")
    assert scn.groups[0].client == client


@pytest.mark.parametrize("client, extra, message", [
    ("java", "", "c.yaml:3: load.client: must be sim, go, java:VERSION, grpc-python or grpc-java[:VERSION] (e.g. java:5.3.3, grpc-java:5.0.7), got 'java'"),
    ("java:5", "", "c.yaml:3: load.client: RocketMQ version '5' is not a version number like 5.3.3"),
    ("go", "  latency_fault: true\n", "c.yaml:4: load.latency_fault: not with client go: the Go client has no "
                                        "latency fault tolerance"),
    ("go", "  poll_interval: 1\n", "c.yaml:4: load.poll_interval: not with client go: the Go client polls the "
                                     "NameServers every 30 s and has no setting for it"),
])
def test_load_client_errors_name_the_line_and_field(client: str, extra: str, message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        schema.parse(LOAD.format(client=client, extra=extra), "c.yaml")
    assert str(err.value) == message


CONSUMERS = """\
duration: 5
consumers:
  client: {client}
{extra}expect:
  - {expect}
"""


@pytest.mark.parametrize("client, extra, expect, message", [
    ("go", "  rebalance_interval: 2\n", "max_lost: 0",
     "c.yaml:4: consumers.rebalance_interval: not with client go: the Go client rebalances every 20 s"),
    ("java:5.3.3", "  suspend_ms: 1000\n", "max_lost: 0",
     "c.yaml:4: consumers.suspend_ms: not with client java:5.3.3: Java's push consumer holds its long polls 15 s"),
    ("java:5.3.3", "", "min_consumed_from: broker-a\n    min: 1\n    broker_id: 0",
     "c.yaml:7: expect[1].broker_id: group consumers runs a real client, which does not say which node"),
])
def test_consumer_client_errors_name_the_line_and_field(client: str, extra: str, expect: str, message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        schema.parse(CONSUMERS.format(client=client, extra=extra, expect=expect), "c.yaml")
    assert str(err.value).startswith(message)


# ---------------------------------------------------------------------------------------------------
# the programs' build

def test_sources_hash_follows_the_sources(tmp_path: Path) -> None:
    (tmp_path / "a.go").write_text("package main\n")
    (tmp_path / "notes.txt").write_text("x")
    first = harness.sources_hash(tmp_path, (".go",))
    (tmp_path / "notes.txt").write_text("y")  # not a source
    assert harness.sources_hash(tmp_path, (".go",)) == first
    (tmp_path / "a.go").write_text("package main // edited\n")
    assert harness.sources_hash(tmp_path, (".go",)) != first


def test_java_programs_come_from_the_cache_once_built() -> None:
    built = harness.java_programs("5.3.3")
    classes = Path(built.classpath.split(os.pathsep)[0])
    stamp = (classes / "ok").stat().st_mtime
    again = harness.java_programs("5.3.3", progress=lambda line: pytest.fail(f"built again: {line}"))
    assert again == built and (classes / "ok").stat().st_mtime == stamp
    assert (classes / "interop" / "harness" / "ScenarioProducer.class").is_file()


# ---------------------------------------------------------------------------------------------------
# real runs

MIXED = """\
# Java 5.3.3 and Go producers, Java 4.9.7 and Go push consumers; a Java consumer killed, one started.
# Accounts on every process: the programs sign as the cluster's normal account. (TLS works too, but a
# JVM's first TLS handshakes take seconds on a busy machine: a consumer's first rebalance came up to 10 s late.)
name: mixed-clients
duration: 15
cluster:
  namesrvs: 2
  brokers: 2
  auth: true
  register_period_ms: 1000
  broker_expired_ms: 6000
  scan_interval_ms: 500
load:
  - name: jp
    client: java:5.3.3
    producers: 2
    rate: 10
    duration: 9
    send_timeout: 15            # the default 3 s timed out 2 of 102 sends at load 14 on 2 cores
  - name: gp
    client: go
    rate: 10
    duration: 9
    producers: 1
    send_timeout: 15
consumers:
  - name: jc
    client: java:4.9.7
    count: 2
    consume_from: first_offset
    rebalance_interval: 2
    heartbeat_interval: 1
    poll_interval: 1
  - name: gc
    client: go
    consume_from: first_offset
timeline:
  - at: 5
    kill_consumer: jc
    label: kill
  - at: 8
    start_consumer: jc
    label: join
expect:
  - send_success_rate: 1
    producers: jp
  - send_success_rate: 1
    producers: gp
  - min_sends_to: broker-a
    min: 1
    producers: gp
  - p99_send_latency: 10000
  - max_lost: 0
  - rebalance_within: 30
    after: kill
    consumers: jc
  - rebalance_within: 7
    after: join
    consumers: jc
"""


def test_java_and_go_clients_feed_the_verdicts(base: Path) -> None:  # noqa: F811
    scn = schema.parse(MIXED, "mixed.yaml")
    result = runner.run(scn, base_dir=base)
    assert cluster_procs(base) == []
    assert result.clients is not None and not any(p.alive() for p in result.clients.procs)
    assert result.client_problems == []
    failed = [f"{v.text}: {v.measured_text} ({v.detail})" for v in result.verdicts if not v.passed]
    assert failed == [] and result.passed, failed
    by_group = {name: [r for r in result.records if r.producer in scn.group(name).ids] for name in ("jp", "gp")}
    # about 10/s per producer for 9 s (a JVM's first sends are slow, and a late producer does not burst)
    assert 60 <= len(by_group["jp"]) <= 2 * 90 + 4 and 40 <= len(by_group["gp"]) <= 90 + 2
    assert {r.producer for r in by_group["jp"]} == {0, 1} and {r.producer for r in by_group["gp"]} == {2}
    ok = [r for r in result.records if r.outcome == "ok"]
    assert len({r.msg_id for r in ok}) == len(ok) and all(r.msg_id and r.broker and r.queue_id >= 0 for r in ok)
    assert all(-1.0 <= r.t <= 10.5 and r.attempts >= 1 for r in result.records)
    assert {r.broker for r in ok} == {"broker-a", "broker-b"}
    run = result.consumers
    assert run is not None
    for spec in scn.consumers:
        consumed = {r.msg_id for r in run.records if r.group == spec.group and r.outcome == "ok"}
        assert consumed >= {r.msg_id for r in ok}, spec.name  # every group consumed every stored message
    jc = [e for e in run.events if e.group == "scenario_jc"]
    starts = [e.consumer for e in jc if e.kind == "start"]
    assert len(starts) == 3 and [e.consumer for e in jc if e.kind == "kill"] == [starts[1]]  # the newest running
    doc = report.to_json(result)
    json.dumps(doc)
    assert [g["client"] for g in doc["load"]] == ["java:5.3.3", "go"]
    assert [g["client"] for g in doc["consumers"]["groups"]] == ["java:4.9.7", "go"]
    assert doc["clientProblems"] == [] and doc["passed"] is True


def test_a_client_program_that_does_not_start_fails_the_run_and_leaves_nothing(
        base: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setattr(harness, "go_program", lambda progress=None: Path("/bin/false"))
    scn = schema.parse(LOAD.format(client="go", extra=""), "false.yaml")
    with pytest.raises(runner.ScenarioRunError) as err:
        runner.run(scn, base_dir=base)
    assert str(err.value).startswith("client program producer-producers (/bin/false) exited (status 1): ")
    assert cluster_procs(base) == []


def test_an_interrupted_run_stops_every_client(base: Path) -> None:  # noqa: F811
    path = base / "long.yaml"
    path.write_text(MIXED.replace("duration: 15", "duration: 120"))
    proc = start_cli("scenario", "run", str(path), base=base)
    try:
        deadline = time.monotonic() + 240
        # 2 NameServers, 2 brokers, then the programs: 2 producer groups + 2 + 1 (join) Java and 1 Go consumer
        while len(cluster_procs(base)) < 4 + 6:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
            time.sleep(0.2)
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "every process the run started was stopped" in err and "Traceback" not in err
    assert cluster_procs(base) == []


def test_a_missing_go_is_one_line_and_exit_2(base: Path) -> None:  # noqa: F811
    path = base / "go.yaml"
    path.write_text(LOAD.format(client="go", extra=""))
    empty = base / "bin"
    empty.mkdir()
    proc = start_cli("scenario", "run", str(path), base=base,
                     env={"PATH": str(empty), "MQADMIN_CACHE_DIR": str(base / "cache")})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert err.strip() == ("mqadmin: the scenario's clients: go not found on PATH: the Go scenario client "
                           "is built at first use (Debian's golang-go)")
    assert cluster_procs(base) == []
