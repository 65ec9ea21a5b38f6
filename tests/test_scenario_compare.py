"""``scenario run FILE --compare KEY=VALUE``: overrides, what the NameServers believed, and a real
side-by-side run of a hung broker with two heartbeat expiries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqadmin.scenario import schema
from mqadmin.scenario.beliefs import topic_beliefs
from mqadmin.scenario.model import Action
from mqadmin.scenario.observer import Observer
from mqadmin.scenario.overrides import describe, parse_override
from mqadmin.scenario.runner import ActionResult
from mqadmin.scenario.values import ScenarioError
from tests.test_scenario_run import base, cluster_procs, finish, start_cli  # noqa: F401 (base is a fixture)

HANG = """\
name: hang-compare
duration: 8
cluster:
  namesrvs: 2
  brokers: 2
  topics: [T]
  register_period_ms: 500
  broker_expired_ms: 4000
  scan_interval_ms: 200
load:
  producers: 1
  rate: 10
  poll_interval: 0.5
  send_timeout: 1
timeline:
  - at: 1
    stop_broker: broker-a
    label: hung
  - at: 7
    cont_broker: broker-a
expect:
  - route_excludes: broker-a
    after: hung
    within: 2.5
  - send_success_rate: 0.5
"""


# ---------------------------------------------------------------------------------------------------
# overrides

def test_overrides_replace_cluster_fields_and_keys_of_its_mappings() -> None:
    given = [parse_override("broker_expired_ms=1500"), parse_override("namesrv_config.warmRestartEnable=false"),
             parse_override("topics=[A, B]")]
    assert given == [("broker_expired_ms", 1500), ("namesrv_config.warmRestartEnable", False), ("topics", ["A", "B"])]
    scn = schema.parse(HANG, "h.yaml", given)
    assert (scn.cluster.broker_expired_ms, scn.cluster.namesrv_config, scn.cluster.topics) == (
        1500, (("warmRestartEnable", "false"),), ("A", "B"))
    assert schema.parse(HANG, "h.yaml").cluster.broker_expired_ms == 4000  # the text itself is unchanged
    assert describe(given) == "broker_expired_ms=1500, namesrv_config.warmRestartEnable=false, topics=[A, B]"
    no_cluster = schema.parse("duration: 3\nexpect:\n  - send_success_rate: 1\n", "n.yaml", [("namesrvs", 1)])
    assert no_cluster.cluster.namesrvs == 1


@pytest.mark.parametrize("text, message", [
    ("broker_expired_ms", "--compare 'broker_expired_ms': expected KEY=VALUE"),
    ("=5", "--compare '=5': expected KEY=VALUE"),
    ("a.b.c=1", "--compare 'a.b.c=1': 'a.b.c' is not a cluster field (FIELD or FIELD.KEY)"),
    ("namesrvs=[1", "--compare 'namesrvs=[1': the value is not YAML"),
])
def test_bad_overrides_are_one_line(text: str, message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_override(text)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize("override, message", [
    ("broker_expired_ms=5", "h.yaml:8: cluster.broker_expired_ms: must be 100..600000, got 5"),
    ("broker_expird_ms=5", "h.yaml:4: cluster.broker_expird_ms: unknown field (did you mean broker_expired_ms?"),
    ("namesrv_config.noSuchKey=1", "h.yaml:4: cluster.namesrv_config: 'noSuchKey' is not a NameServer config key"),
])
def test_an_override_is_checked_as_the_file_would_be(override: str, message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        schema.parse(HANG, "h.yaml", [parse_override(override)])
    assert str(err.value).startswith(message)


# ---------------------------------------------------------------------------------------------------
# beliefs

def _action(kind: str, t: float, text: str) -> ActionResult:
    return ActionResult(1, Action(kind, 1, t, None, {}), text, t, t, t, True, "")


def test_beliefs_time_the_settling_and_list_dropped_and_kept_brokers() -> None:
    obs = Observer(["ns0", "ns1"], ("T",), interval=0.1, timeout=0.5, t0=0.0, clock=lambda: 0.0)
    both = {"broker-a": ((0,), 6), "broker-b": ((0,), 6)}
    only_b = {"broker-b": ((0,), 6)}
    for ns in (0, 1):
        obs.record(ns, "T", both, -0.05)
    obs.record(0, "T", only_b, 4.2)  # ns0 drops broker-a 3.2 s after the hang ...
    obs.record(1, "T", None, 4.3)  # ... ns1 goes silent, then answers without it
    obs.record(1, "T", only_b, 4.9)
    obs.record(0, "T", both, 7.1)  # broker-a back on ns0 only
    actions = [_action("stop_broker", 1.0, "stop_broker broker-a"), _action("wait_until", 4.5, "wait"),
               _action("cont_broker", 7.0, "cont_broker broker-a")]
    routed = [a for a in actions if a.action.kind != "wait_until"]
    b = topic_beliefs(obs, "T", routed, 9.0)
    hang, resume = b.after
    assert (hang.action, hang.until) == ("stop_broker broker-a", 7.0)
    assert hang.first_change == {0: (pytest.approx(3.2), "-broker-a"), 1: (pytest.approx(3.9),
                                                                         "answers again: broker-b")}
    assert hang.settled == pytest.approx(3.9) and hang.agree
    assert resume.settled == pytest.approx(0.1) and not resume.agree
    assert b.dropped == [(0, "broker-a", 4.2), (1, "broker-a", 4.9)]
    assert b.back == [(0, "broker-a", 7.1)]
    assert b.kept == {0: ["broker-a", "broker-b"], 1: ["broker-b"]}
    doc = b.to_json()
    json.dumps(doc)
    assert doc["afterActions"][0]["firstChange"]["0"] == {"after": 3.2, "change": "-broker-a"}


# ---------------------------------------------------------------------------------------------------
# the command

def test_compare_runs_twice_and_shows_both_side_by_side(base: Path) -> None:  # noqa: F811
    path = base / "hang.yaml"
    path.write_text(HANG)
    out_json = base / "cmp.json"
    rc, out, err = finish(start_cli("scenario", "run", str(path), "--compare", "broker_expired_ms=1500",
                                    "--report", str(out_json), base=base), timeout=240)
    assert cluster_procs(base) == []
    doc = json.loads(out_json.read_text())
    cmp = doc["compare"]
    assert cmp["labels"] == ["as written", "broker_expired_ms=1500"] and cmp["overrides"] == {"broker_expired_ms": 1500}
    assert [r["cluster"]["brokerExpiredMs"] for r in doc["runs"]] == [4000, 1500]
    route = cmp["expectations"][0]
    written, shorter = (r["measured"] for r in route["runs"])
    # the hung broker leaves the route after its expiry (minus up to one registration period, plus a scan)
    assert 4.0 - 0.6 <= written <= 4.0 + 1.5 and 1.5 - 0.6 <= shorter <= 1.5 + 1.5, route
    assert route["runs"][0]["passed"] is False and route["runs"][1]["passed"] is True
    assert route["difference"] == pytest.approx(shorter - written)
    assert rc == 1 and cmp["passed"] is False, err  # one run failed an expectation
    hangs = [b[0]["afterActions"][0] for b in cmp["beliefs"]]
    assert [h["action"] for h in hangs] == ["stop_broker broker-a-0"] * 2
    assert hangs[0]["settled"] > hangs[1]["settled"]
    for beliefs in cmp["beliefs"]:
        assert {(d["namesrv"], d["broker"]) for d in beliefs[0]["dropped"]} == {(0, "broker-a"), (1, "broker-a")}
        assert beliefs[0]["kept"] == {"0": ["broker-a", "broker-b"], "1": ["broker-a", "broker-b"]}  # back after SIGCONT
    assert "Expectations, side by side" in out and "Routes of T" in out
    assert f"{shorter - written:+.4g} s" in out  # the difference column
    assert "FAIL: as written FAIL, broker_expired_ms=1500 PASS" in out


@pytest.mark.parametrize("args, message", [
    (["--compare", "broker_expired_ms"], "mqadmin: --compare 'broker_expired_ms': expected KEY=VALUE"),
    (["--compare", "broker_expired_ms=5"], "mqadmin: --compare broker_expired_ms=5: "),
    (["--compare", "namesrvs=1", "--plot", "x.png"], "mqadmin: --plot and --records show one run"),
])
def test_compare_usage_errors_exit_2_before_any_run(base: Path, args: list[str], message: str) -> None:  # noqa: F811
    path = base / "hang.yaml"
    path.write_text(HANG)
    rc, out, err = finish(start_cli("scenario", "run", str(path), *args, base=base))
    assert rc == 2 and err.startswith(message) and len(err.strip().splitlines()) == 1, err
    assert cluster_procs(base) == []


def test_compare_resolves_its_java_versions_before_the_first_run(base: Path) -> None:  # noqa: F811
    """A Java version the second run names that cannot be had (here: nothing cached, no mvn on PATH) is
    found before the first run starts, not after it."""
    path = base / "hang.yaml"
    path.write_text(HANG)
    env = {"MQADMIN_CACHE_DIR": str(base / "empty-cache"), "PATH": str(base / "no-tools")}
    rc, out, err = finish(start_cli("scenario", "run", str(path), "--compare", "namesrv_impl=java:5.5.0",
                                    base=base, env=env))
    assert rc == 2 and err.startswith("mqadmin: ") and "not found" in err, err
    assert len(err.strip().splitlines()) == 1 and "starting" not in err and out == "", (out, err)
    assert cluster_procs(base) == []
