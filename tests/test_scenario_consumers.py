"""Consumers in scenarios: the schema, each consumer expectation passing and failing on purpose
(on made-up records, so every number is known), and real runs on local clusters.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqadmin.scenario import report, runner, schema
from mqadmin.scenario.consumer_eval import account, balanced_times
from mqadmin.scenario.consumers import ConsumerRun
from mqadmin.scenario.expectations import evaluate_all
from simclient import ConsumeRecord, OwnershipEvent, SendRecord
from tests.test_scenario_run import cluster_procs

HEAD = """\
name: c
description: consumer schema test
duration: 10
cluster: {brokers: 2, slaves: 1}
load: {producers: 1, rate: 10, duration: 6}
"""


def parse(body: str) -> schema.Scenario:
    return schema.parse(HEAD + body, "c.yaml")


def error(body: str) -> str:
    with pytest.raises(schema.ScenarioError) as exc:
        parse(body)
    return str(exc.value)


# ---------------------------------------------------------------------------
# schema


def test_consumers_section_actions_and_expectations_parse() -> None:
    scn = parse("""\
consumers:
  - name: fast
    count: 2
    poll_interval: 1
    consume_from: first_offset
  - name: slow
    count: 1
    start: 2
    consume_delay_ms: 50
    subscription: "TagA || TagB"
timeline:
  - at: 3
    start_consumer: fast
    label: join
  - at: 4
    kill_consumer: fast
    consumer: 0
  - stop_consumer: slow
expect:
  - max_consume_lag: 100
    consumers: slow
    window: [1, null]
  - all_consumed_within: 5
  - max_duplicates: 10
  - max_lost: 0
    include_broker_loss: false
  - rebalance_within: 2
    after: join
  - min_consumed_from: broker-a
    broker_id: 1
    min: 5
  - max_consumed_from: broker-b
    max: 0
""")
    fast, slow = scn.consumers
    assert (fast.name, fast.count, fast.poll_interval, fast.consume_from, fast.group) == ("fast", 2, 1.0, "first_offset",
                                                                                            "scenario_fast")
    assert (slow.start, slow.consume_delay_ms, slow.subscription, slow.topics) == (2.0, 50.0, "TagA || TagB",
                                                                                  ("ScenarioTopic",))
    assert [a.kind for a in scn.timeline] == ["start_consumer", "kill_consumer", "stop_consumer"]
    assert scn.timeline[1].args == {"group": "fast", "consumer": 0}
    assert scn.timeline[0].describe() == "start 1 consumer in fast"
    texts = [e.describe() for e in scn.expectations]
    assert texts[0] == "consume lag <= 100 in [1, end] s (slow)"
    assert texts[3] == "lost messages <= 0 (not counting those lost with a memory-only broker)"
    assert texts[5] == "consumed from broker-a-1 >= 5"
    assert scn.expectations[5].extra == {"consumers": None, "broker_id": 1}


def test_cluster_message_store_and_broker_config() -> None:
    scn = schema.parse(HEAD.replace("cluster: {brokers: 2, slaves: 1}", """cluster:
  message_store: memory
  broker_config: {slaveReadEnable: true, flushConsumerOffsetInterval: 1000}""") + "expect: [{max_failed_sends: 0}]\n", "c.yaml")
    assert scn.cluster.message_store == "memory"
    assert scn.cluster.broker_config == (("slaveReadEnable", "true"), ("flushConsumerOffsetInterval", "1000"))
    opts = runner.start_options(scn)
    assert dict(opts.broker_props) == {"slaveReadEnable": "true", "flushConsumerOffsetInterval": "1000",
                                       "persistMessages": "false"}


@pytest.mark.parametrize(("body", "message"), [
    ("timeline: [{start_consumer: x}]\nexpect: [{max_failed_sends: 0}]\n", "no consumer group 'x' (groups: none"),
    ("expect: [{max_lost: 0}]\n", "max_lost needs a consumers section"),
    ("consumers: {count: 1}\nexpect: [{rebalance_within: 3}]\n", "rebalance_within needs after: LABEL"),
    ("consumers: {count: 1, consume_from: middle}\nexpect: [{max_lost: 0}]\n", "consume_from: must be one of"),
    ("consumers: [{count: 1}]\nexpect: [{max_lost: 0}]\n", "name: is required when several"),
    ("consumers: {count: 1, topics: [Nope]}\nexpect: [{max_lost: 0}]\n", "topic 'Nope' is neither"),
    ("consumers: {count: 1}\nexpect: [{max_lost: 0, consumers: other}]\n", "no consumer group 'other'"),
    ("consumers: {count: 1}\nexpect: [{min_consumed_from: broker-a, broker_id: 2, min: 1}]\n", "broker_id: must be 0..1"),
])
def test_consumer_schema_errors_name_the_line_and_field(body: str, message: str) -> None:
    assert message in error(body)


# ---------------------------------------------------------------------------
# each expectation passing and failing, on made-up records


def sends(*items: tuple[float, str, str]) -> list[SendRecord]:
    """(send time, message id, broker): stored sends of 10 ms each."""
    return [SendRecord(t, 0, "ScenarioTopic", broker, 0, "ok", 10.0, 1, i, 0, mid) for i, (t, mid, broker) in enumerate(items)]


def consumed(*items: tuple[float, str], broker: str = "broker-a", broker_id: int = 0, group: str = "scenario_consumers") -> list[ConsumeRecord]:
    return [ConsumeRecord(t, 0, group, "ScenarioTopic", broker, broker_id, 0, 0, mid, 5.0) for t, mid in items]


def judge(body: str, records: list[SendRecord], run: ConsumerRun, labels: dict[str, float] | None = None,
          end: float = 10.0) -> list[tuple[bool, float | None]]:
    scn = parse("consumers: {count: 1}\n" + body)
    run.specs = scn.consumers
    verdicts = evaluate_all(scn, obs=None, records=records, label_times=labels or {}, end=end, consumers=run)  # type: ignore[arg-type]
    return [(v.passed, v.measured) for v in verdicts]


RECORDS = sends((1.0, "m1", "broker-a"), (2.0, "m2", "broker-a"), (3.0, "m3", "broker-b"), (5.5, "m4", "broker-a"))


def test_max_consume_lag_passes_and_fails() -> None:
    # m1 consumed at 1.5, m2 at 4.0 (lag 2 from 3.01 to 4.0: m2 and m3 waiting), m3 at 4.0, m4 at 5.6
    run = ConsumerRun((), records=consumed((1.5, "m1"), (4.0, "m2"), (4.0, "m3"), (5.6, "m4")))
    assert judge("expect: [{max_consume_lag: 2}, {max_consume_lag: 1}, {max_consume_lag: 1, window: [4, null]}]\n",
                 RECORDS, run) == [(True, 2.0), (False, 2.0), (True, 1.0)]


def test_all_consumed_within_passes_and_fails() -> None:  # the load ends at t=6
    late = ConsumerRun((), records=consumed((1.5, "m1"), (2.5, "m2"), (3.5, "m3"), (8.5, "m4")))
    assert judge("expect: [{all_consumed_within: 3}, {all_consumed_within: 2}]\n", RECORDS, late) == [
        (True, 2.5), (False, 2.5)]
    missing = ConsumerRun((), records=consumed((1.5, "m1"), (2.5, "m2"), (3.5, "m3")))
    assert judge("expect: [{all_consumed_within: 60}]\n", RECORDS, missing) == [(False, None)]


def test_max_duplicates_passes_and_fails() -> None:
    run = ConsumerRun((), records=consumed((1.5, "m1"), (2.5, "m2"), (3.5, "m3"), (5.8, "m4"), (6.0, "m1"), (7.0, "m2")))
    assert judge("expect: [{max_duplicates: 2}, {max_duplicates: 1}, {max_duplicates: 0, window: [0, 5.9]}]\n",
                 RECORDS, run) == [(True, 2.0), (False, 2.0), (True, 0.0)]


def test_max_lost_counts_what_a_memory_only_broker_took_apart() -> None:
    # broker-a (memory only) was killed at t=4: m1 and m2 were on it and never consumed; m4 came after the kill
    specs = parse("consumers: {count: 1}\nexpect: [{max_lost: 0}]\n").consumers
    run = ConsumerRun(specs, records=consumed((3.5, "m3")), broker_losses=[("broker-a", 4.0)], message_store="memory")
    acc = account(RECORDS, run)["consumers"]
    assert sorted(acc.lost) == ["m1", "m2", "m4"] and sorted(acc.lost_with_broker) == ["m1", "m2"]
    assert judge("expect: [{max_lost: 3}, {max_lost: 2}, {max_lost: 1, include_broker_loss: false},"
                 " {max_lost: 0, include_broker_loss: false}]\n", RECORDS, run) == [
        (True, 3.0), (False, 3.0), (True, 1.0), (False, 1.0)]


def test_a_memory_only_brokers_loss_counts_until_it_was_seen_dead() -> None:
    # a kill began at 2.0 and the process was seen dead at 2.3: an answer acknowledged at 2.1 came from it
    scn = schema.parse(HEAD.replace("{brokers: 2, slaves: 1}", "{brokers: 2, slaves: 1, message_store: memory}")
                       + "timeline: [{at: 2, kill_broker: broker-a}, {at: 5, restart_broker: broker-b},"
                       " {at: 6, kill_broker: broker-b, broker_id: 1}]\nexpect: [{p99_send_latency: 900}]\n", "c.yaml")
    done = [runner.ActionResult(i + 1, a, a.describe(), a.at, a.at or 0.0, (a.at or 0.0) + 0.3, True, "")
            for i, a in enumerate(scn.timeline)]
    assert runner._broker_losses(scn, done) == [("broker-a", 2.3), ("broker-b", 5.0)]
    disk = schema.parse(HEAD + "timeline: [{at: 2, kill_broker: broker-a}]\nexpect: [{p99_send_latency: 900}]\n", "c.yaml")
    assert runner._broker_losses(disk, done[:1]) == []


def ev(t: float, c: int, kind: str, q: int = -1, queues: tuple = ()) -> OwnershipEvent:  # type: ignore[type-arg]
    return OwnershipEvent(t, c, "scenario_consumers", kind, "ScenarioTopic" if q >= 0 else "", "broker-a" if q >= 0 else "",
                          q, queues)


QS = tuple(("ScenarioTopic", "broker-a", q) for q in range(4))


def test_rebalance_within_passes_and_fails() -> None:
    events = [ev(0.0, 0, "start"), ev(0.0, 0, "queues", queues=QS), *[ev(0.1, 0, "acquire", q) for q in range(4)],
              # a second consumer joins at 3: balanced once consumer 0 gave up two queues and 1 took them (3.8)
              ev(3.0, 1, "start"), ev(3.0, 1, "queues", queues=QS), ev(3.5, 0, "release", 2), ev(3.5, 0, "release", 3),
              ev(3.8, 1, "acquire", 2), ev(3.8, 1, "acquire", 3),
              # consumer 0 dies at 6; nobody takes its queues
              ev(6.0, 0, "kill")]
    run = ConsumerRun((), events=events)
    assert judge("timeline: [{at: 3, start_consumer: consumers, label: join}, {at: 6, kill_consumer: consumers, label: die}]\n"
                 "expect: [{rebalance_within: 1, after: join}, {rebalance_within: 0.5, after: join},"
                 " {rebalance_within: 5, after: die}]\n", [], run, {"join": 3.0, "die": 6.0}) == [
        (True, pytest.approx(0.8)), (False, pytest.approx(0.8)), (False, None)]
    after = dict(balanced_times(run, "consumers"))  # the state once every event of an instant applied
    assert [after[t] for t in (0.1, 3.0, 3.5, 3.8, 6.0)] == [True, False, False, True, False]


def test_min_and_max_consumed_from_pass_and_fail() -> None:
    run = ConsumerRun((), records=consumed((1.5, "m1"), (2.5, "m2"), broker_id=0)
                      + consumed((5.8, "m4"), broker_id=1) + consumed((3.5, "m3"), broker="broker-b"))
    body = ("expect: [{min_consumed_from: broker-a, min: 3}, {min_consumed_from: broker-a, min: 4},"
            " {min_consumed_from: broker-a, broker_id: 1, min: 1}, {max_consumed_from: broker-b, max: 1},"
            " {max_consumed_from: broker-b, max: 0}, {max_consumed_from: broker-a, max: 0, window: [3, 5]}]\n")
    assert judge(body, RECORDS, run) == [(True, 3.0), (False, 3.0), (True, 1.0), (True, 1.0), (False, 1.0), (True, 0.0)]


# ---------------------------------------------------------------------------
# a real run


MEMORY_CRASH = """\
name: memory-crash
description: consumers start after a memory-only broker died with messages on it
duration: 14
cluster:
  namesrvs: 1
  brokers: 2
  queues: 2
  message_store: memory
  register_period_ms: 500
load:
  producers: 2
  rate: 10
  duration: 7
  poll_interval: 0.5
  send_timeout: 1
consumers:
  name: cg
  count: 1
  start: 4
  consume_from: first_offset
  poll_interval: 0.5
  heartbeat_interval: 1
  rebalance_interval: 2
  persist_interval: 0.5
timeline:
  - at: 2
    kill_broker: broker-a
    label: crash
  - at: 5
    start_consumer: cg
    label: join
  - at: 8
    stop_consumer: cg
    consumer: 0
    label: leave
expect:
  - max_lost: 0                  # 1: fails: broker-a took its messages
  - max_lost: 0                  # 2: holds: every loss is the memory-only broker's
    include_broker_loss: false
  - max_consume_lag: 1           # 3: fails: nothing consumed until t=4
  - max_consume_lag: 1000        # 4
  - rebalance_within: 10         # 5
    after: join
  - rebalance_within: 10         # 6
    after: leave
  - min_consumed_from: broker-b  # 7
    min: 1
  - max_consumed_from: broker-a  # 8: nothing read from the dead broker
    max: 0
  - max_duplicates: 1000         # 9
  - all_consumed_within: 30      # 10: fails: never (lost ones)
"""


def test_consumers_on_a_real_cluster_with_a_memory_only_broker_crash(tmp_path: Path) -> None:
    scn = schema.parse(MEMORY_CRASH, "memory-crash.yaml")
    consumed_path = tmp_path / "consumed.msgpack"
    result = runner.run(scn, base_dir=tmp_path, consume_records_path=consumed_path)
    assert cluster_procs(tmp_path) == []
    assert all(a.ok for a in result.actions), [a.detail for a in result.actions]
    got = {v.index: (v.passed, v.measured) for v in result.verdicts}
    detail = {v.index: f"{v.measured_text} {v.detail}" for v in result.verdicts}
    assert got[1][0] is False and got[1][1] > 0, detail[1]
    assert got[2] == (True, 0.0), detail[2]
    assert got[3][0] is False and got[4][0] is True, (detail[3], detail[4])
    assert got[5][0] and got[6][0], (detail[5], detail[6])
    assert got[7][0] and got[8] == (True, 0.0), (detail[7], detail[8])
    assert got[9][0] and got[10] == (False, None), detail[10]
    doc = report.to_json(result)
    json.dumps(doc)
    group = doc["consumers"]["groups"][0]
    assert group["lost"] == group["lostWithBroker"] > 0 and group["consumers"] == 2
    assert doc["consumers"]["brokerLosses"][0]["broker"] == "broker-a"
    assert sum(doc["consumers"]["perSecond"]) == group["consumed"]
    from simclient import read_consume_records

    assert list(read_consume_records(consumed_path)) == result.consumers.records  # type: ignore[union-attr]
