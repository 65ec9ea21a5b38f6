"""Scenario files: validation errors name file, line and field; the judging rules on made-up observations.

No process is started here: parsing and evaluation are pure, and the
evaluation tests feed an Observer and send records by hand.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mqadmin.scenario import schema
from mqadmin.scenario.expectations import evaluate, first_true, holds, percentile
from mqadmin.scenario.observer import Observer, diff_text
from mqadmin.scenario.shipped import shipped_dir
from simclient import SendRecord

ROOT = Path(__file__).resolve().parent.parent

VALID = """\
name: t
description: a test scenario
duration: 10
cluster:
  namesrvs: 2
  brokers: 2
  topics: [T1]
load:
  producers: 2
  rate: 10
timeline:
  - at: 2
    kill_broker: broker-a
    label: crash
  - wait_until: route_excludes
    broker: broker-a
    timeout: 3
expect:
  - route_excludes: broker-a
    after: crash
    within: 1
  - send_success_rate: 0.9
"""


def parse(text: str) -> schema.Scenario:
    return schema.parse(textwrap.dedent(text), "s.yaml")


def error_of(text: str) -> str:
    with pytest.raises(schema.ScenarioError) as info:
        parse(text)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_valid_scenario_defaults_and_flat_items() -> None:
    scn = parse(VALID)
    assert scn.name == "t" and scn.duration == 10.0
    assert scn.cluster.namesrvs == 2 and scn.cluster.register_period_ms == 30000 and scn.cluster.broker_expired_ms == 120000
    (g,) = scn.groups
    assert (g.name, g.producers, g.rate, g.topics, g.poll_interval, g.send_timeout, g.retries, g.latency_fault) == (
        "producers", 2, 10.0, ("T1",), 30.0, 3.0, 2, False)
    kill, wait = scn.timeline
    assert (kill.kind, kill.at, kill.label, dict(kill.args)) == ("kill_broker", 2.0, "crash", {"broker": "broker-a", "broker_id": 0})
    assert wait.at is None and wait.condition == schema.Condition("route_excludes", "T1", "broker-a", None, "writable")
    e1, e2 = scn.expectations
    assert (e1.kind, e1.after, e1.within, e1.line) == ("route_excludes", "crash", 1.0, 19)
    assert (e2.kind, e2.threshold, e2.line) == ("send_success_rate", 0.9, 22)
    assert scn.timeout == 10 + 3 + 60  # duration + waits + margin


def test_nested_form_equals_flat_form() -> None:
    nested = VALID.replace("  - route_excludes: broker-a\n    after: crash\n    within: 1\n",
                           "  - route_excludes: {broker: broker-a, after: crash, within: 1}\n")
    assert parse(nested).expectations[0] == parse(VALID).expectations[0]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("duration: 10", "duration: ten", "s.yaml:3: duration: must be a number, got 'ten'"),
        ("duration: 10", "duration: 0.5", "s.yaml:3: duration: must be >= 1 and <= 600, got 0.5"),
        ("  brokers: 2", "  brokers: 2\n  flavour: x", "s.yaml:7: cluster.flavour: unknown field"),
        ("    kill_broker: broker-a", "    kill_broker: broker-z",
         "s.yaml:13: timeline[1].broker: no broker group 'broker-z' in the cluster (groups: broker-a, broker-b)"),
        ("    kill_broker: broker-a", "    kil_broker: broker-a", "s.yaml:13: timeline[1].kil_broker: unknown kind"),
        ("    label: crash", "    label: crash\n    stop_broker: broker-b", "s.yaml:12: timeline[1]: needs exactly one of"),
        ("    after: crash", "    after: boom", "s.yaml:20: expect[1].after: no timeline action has label 'boom' (labels: crash)"),
        ("  - at: 2", "  - at: 11", "s.yaml:12: timeline[1].at: must be >= 0 and <= 10, got 11"),
        ("  - send_success_rate: 0.9", "  - send_success_rate: 1.5", "s.yaml:22: expect[2].min: must be >= 0 and <= 1, got 1.5"),
        ("  - send_success_rate: 0.9", "  - send_success_rate: 0.9\n    window: [5, 2]",
         "s.yaml:23: expect[2].window: must end after it starts, got [5, 2]"),
        ("  - send_success_rate: 0.9", "  - send_success_rate: 0.9\n    producers: nobody",
         "s.yaml:23: expect[2].producers: no producer group 'nobody' (groups: producers)"),
        ("    within: 1", "    within: 1\n    topic: Nope", "s.yaml:22: expect[1].topic: topic 'Nope' is neither in cluster.topics"),
        ("    timeout: 3", "    timeout: 3\n    namesrvs: [2]", "s.yaml:18: timeline[2].namesrvs: item 1: must be 0..1, got 2"),
        ("    within: 1", "    within: 1\n    not_before: 2", "s.yaml:22: expect[1].not_before: must not exceed within (1), got 2"),
        ("  rate: 10", "  rate: 0", "s.yaml:10: load.rate: must be > 0 and <= 1000, got 0"),
        ("  topics: [T1]", "  topics: [T1]\n  topics: [T2]", "s.yaml:8: duplicate key 'topics'"),
        ("  topics: [T1]", "  topics: [T1", "s.yaml:8: YAML syntax:"),
        ("duration: ", "durtion: ", "s.yaml:3: durtion: unknown field (did you mean duration?"),  # the typo, not what it hides
    ],
)
def test_errors_name_line_and_field(old: str, new: str, expected: str) -> None:
    assert old in VALID
    assert error_of(VALID.replace(old, new, 1)).startswith(expected)


def test_more_errors() -> None:
    fault = VALID.replace("    kill_broker: broker-a", "    fault: broker-a\n    hang: true\n    clear: true")
    assert error_of(fault).startswith("s.yaml:13: timeline[1]: fault needs exactly one of latency_ms, reject, hang, resume, clear")
    back = VALID.replace("  - wait_until: route_excludes", "  - at: 1\n    wait_until: route_excludes")
    assert error_of(back).startswith("s.yaml:15: timeline[2].at: must not go back in time (1 < 2)")
    no_expect = VALID[: VALID.index("expect:")]
    assert error_of(no_expect) == "s.yaml:1: expect: must list at least one expectation"
    twice = VALID.replace("    within: 1", "    within: 1\n    broker: broker-b")
    assert error_of(twice).startswith("s.yaml:22: expect[1].broker: given twice")
    ns = VALID.replace("    kill_broker: broker-a", "    partition: broker-a\n    namesrv: 5")
    assert error_of(ns).startswith("s.yaml:14: timeline[1].namesrv: must be 0..1, got 5")
    dup_label = VALID.replace("    timeout: 3", "    timeout: 3\n    label: crash")
    assert error_of(dup_label).startswith("s.yaml:18: timeline[2].label: label 'crash' already used on line 14")
    assert error_of("- 1\n- 2\n") == "s.yaml:1: must be a mapping, got a list"


def test_every_shipped_scenario_is_valid_and_short_enough() -> None:
    files = sorted(shipped_dir().glob("*.yaml"))
    assert len(files) >= 10
    for f in files:
        scn = schema.load(f)
        assert scn.duration <= 60, f.name
        assert f.read_text().startswith("#"), f"{f.name} needs a header comment"


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    code = "import sys; from mqadmin.cli import entry; sys.argv[0] = 'mqadmin'; entry()"
    return subprocess.run([sys.executable, "-c", code, *args], check=False, capture_output=True, text=True, env=env, cwd=cwd, timeout=60)


def test_cli_invalid_file_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(VALID.replace("    kill_broker: broker-a", "    kill_broker: broker-q"))
    proc = _cli("scenario", "run", str(bad))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"mqadmin: {bad}:13: timeline[1].broker: no broker group 'broker-q' in the cluster (groups: broker-a, broker-b)"
    ]
    missing = _cli("scenario", "run", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "no such scenario file" in missing.stderr


def test_cli_list_shows_every_shipped_scenario() -> None:
    proc = _cli("scenario", "list")
    assert proc.returncode == 0, proc.stderr
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert names == sorted(f.stem for f in shipped_dir().glob("*.yaml"))
    assert "broker-crash" in names and "slave-only-group" in names


# ---------------------------------------------------------------------------
# judging, on hand-made observations


def observer(namesrvs: int = 2) -> Observer:
    return Observer([f"127.0.0.1:{9000 + i}" for i in range(namesrvs)], ("T1",), interval=0.1, timeout=0.5, t0=0.0,
                    clock=lambda: 0.0)


BOTH = {"broker-a": ((0,), 6), "broker-b": ((0,), 6)}
ONLY_B = {"broker-b": ((0,), 6)}


def test_route_conditions_over_time() -> None:
    obs = observer()
    obs.record(0, "T1", BOTH, 0.0)
    obs.record(1, "T1", BOTH, 0.0)
    obs.record(0, "T1", ONLY_B, 2.3)
    obs.record(1, "T1", None, 2.5)  # namesrv-1 stops answering: not counted
    excl = schema.Condition("route_excludes", "T1", "broker-a")
    assert not holds(excl, obs, 2.2, 2)
    assert not holds(excl, obs, 2.4, 2)  # namesrv-1 still lists it
    assert holds(excl, obs, 2.5, 2)
    assert first_true(excl, obs, 2.0, 10.0, 2) == 2.5
    assert first_true(excl, obs, 3.0, 10.0, 2) == 3.0  # already true at the reference time
    assert first_true(excl, obs, 2.0, 2.4, 2) is None  # not within the run
    agree = schema.Condition("namesrvs_agree", "T1")
    disagree = schema.Condition("namesrvs_disagree", "T1")
    assert holds(agree, obs, 1.0, 2) and not holds(disagree, obs, 1.0, 2)
    assert holds(disagree, obs, 2.4, 2) and not holds(agree, obs, 2.4, 2)
    assert not holds(agree, obs, 3.0, 2)  # a silent NameServer is no agreement
    assert not holds(disagree, obs, 3.0, 2)  # nor a disagreement
    # present vs writable: a slave-only group or a wiped perm is listed but not writable
    obs.record(0, "T1", {"broker-a": ((1,), 6), "broker-b": ((0,), 4)}, 4.0)
    assert holds(schema.Condition("route_excludes", "T1", "broker-a", (0,)), obs, 4.0, 2)
    assert holds(schema.Condition("route_excludes", "T1", "broker-b", (0,)), obs, 4.0, 2)
    assert holds(schema.Condition("route_includes", "T1", "broker-a", (0,), "present"), obs, 4.0, 2)
    assert diff_text(ONLY_B, {"broker-a": ((1,), 6), "broker-b": ((0,), 4)}) == "+broker-a (no master), broker-b perm 6→4"


def rec(t: float, outcome: str = "ok", latency: float = 1.0, broker: str = "broker-a", producer: int = 0) -> SendRecord:
    return SendRecord(t, producer, "T1", broker, 0, outcome, latency, 1)


def judge(expect_yaml: str, records: list[SendRecord], obs: Observer | None = None, labels: dict[str, float] | None = None):
    scn = parse(VALID.replace("  - send_success_rate: 0.9\n", expect_yaml))
    exp = scn.expectations[-1]
    return evaluate(scn, exp, 1, obs=obs or observer(), records=records, label_times=labels or {"crash": 2.0}, end=10.0)


def test_send_expectations_count_in_windows() -> None:
    records = [rec(t / 10) for t in range(100)] + [rec(2.05, "timeout", 1000.0), rec(2.1, "conn_error", 5.0, "broker-b")]
    v = judge("  - send_success_rate: 0.99\n", records)
    assert not v.passed and v.measured == pytest.approx(100 / 102, abs=1e-6)
    assert "100/102" in v.measured_text and "timeout 1" in v.detail and "conn_error 1" in v.detail
    v = judge("  - send_success_rate: 0.99\n    window: [0.5, null]\n    after: crash\n", records)
    assert v.passed and v.measured == 1.0 and "75 sends" in v.detail  # 2.5 <= t < inf
    v = judge("  - max_failed_sends: 1\n", records)
    assert not v.passed and v.measured == 2.0
    v = judge("  - max_failed_sends: 1\n    window: [2.06, 3]\n", records)
    assert v.passed and v.measured == 1.0
    v = judge("  - p99_send_latency: 4\n", records)
    assert not v.passed and v.measured == 5.0  # nearest rank: the 101st of 102 values (the 102nd is 1000)
    v = judge("  - p99_send_latency: 100\n    outcome: ok\n", records)
    assert v.passed and v.measured == 1.0
    v = judge("  - max_sends_to: broker-a\n    max: 9\n    window: [0, 1]\n", records)
    assert not v.passed and v.measured == 10.0
    v = judge("  - min_sends_to: broker-b\n    min: 1\n", records)
    assert not v.passed and v.measured == 0.0  # the only send to broker-b failed
    v = judge("  - send_success_rate: 0.99\n    window: [20, 30]\n", records)
    assert not v.passed and v.measured is None and v.measured_text == "no sends"
    v = judge("  - send_success_rate: 0\n    max: 0.5\n", records)
    assert not v.passed and v.target == "≤ 0.5"


def test_timed_expectations_measure_from_the_label() -> None:
    obs = observer()
    for ns in (0, 1):
        obs.record(ns, "T1", BOTH, 0.0)
    obs.record(0, "T1", ONLY_B, 2.4)
    obs.record(1, "T1", ONLY_B, 2.7)
    base = {"obs": obs, "records": [rec(1.0)], "label_times": {"crash": 2.0}, "end": 10.0}
    scn = parse(VALID)
    v = evaluate(scn, scn.expectations[0], 1, **base)
    assert v.passed and v.measured == pytest.approx(0.7) and v.measured_text == "0.70 s"
    slow = parse(VALID.replace("    within: 1", "    within: 0.5"))
    v = evaluate(slow, slow.expectations[0], 1, **base)
    assert not v.passed and v.measured == pytest.approx(0.7)
    early = parse(VALID.replace("    within: 1", "    within: 1\n    not_before: 0.8"))
    v = evaluate(early, early.expectations[0], 1, **base)
    assert not v.passed and v.target == "0.8-1 s"
    v = evaluate(scn, scn.expectations[0], 1, **{**base, "label_times": {}})
    assert not v.passed and v.measured is None and "did not run" in v.detail


def test_percentile_nearest_rank() -> None:
    assert percentile([5.0], 99) == 5.0
    assert percentile(list(map(float, range(1, 101))), 99) == 99.0
    assert percentile(list(map(float, range(1, 101))), 50) == 50.0
