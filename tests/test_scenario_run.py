"""Scenario runs on real local clusters: every action and expectation type, verdicts and exit codes,
and no process left behind after success, failure, timeout or an interrupt.

Clusters use short registration periods and expiry so a run takes seconds.
Every run's state directory lives under the test's tmp_path, so "left
behind" means: a live process whose command line names that directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from mqadmin.scenario import report, runner, schema
from mqadmin.scenario.observer import diff_text
from tests.mqadmin_procs import assert_headers_start_at_values

ROOT = Path(__file__).resolve().parent.parent

EVERY_ACTION = """\
name: every-action
description: every action and expectation type on one small cluster
duration: 15
cluster:
  namesrvs: 2
  brokers: 3
  topics: [T1]
  queues: 2
  register_period_ms: 500
  broker_expired_ms: 2500
  scan_interval_ms: 200
load:
  producers: 3
  rate: 20
  poll_interval: 0.5
  send_timeout: 1
timeline:
  - at: 1
    fault: broker-c
    latency_ms: 150
    label: slow
  - at: 2
    fault: broker-c
    reject: 13
    label: rejecting
  - at: 3
    fault: broker-c
    clear: true
  - wipe_write_perm: broker-c
    label: wiped
  - at: 5
    add_write_perm: broker-c
    label: added
  - wait_until: route_includes
    broker: broker-c
    timeout: 2
  - partition: broker-b
    namesrv: 0
    label: split
  - wait_until: route_excludes
    broker: broker-b
    namesrvs: [0]
    timeout: 5
  - heal: broker-b
    label: healed
  - wait_until: namesrvs_agree
    timeout: 3
  - stop_broker: broker-a
    label: hung
  - wait_until: route_excludes
    broker: broker-a
    timeout: 5
  - cont_broker: broker-a
    label: resumed
  - kill_broker: broker-c
    label: crashed
  - restart_broker: broker-c
    label: c-back
  - create_topic: T1
    brokers: [broker-c]
  - shutdown_broker: broker-b
    label: b-term
  - kill_namesrv: 1
    label: ns1-down
  - restart_namesrv: 1
    label: ns1-up
  - create_topic: T2
    label: t2
expect:
  - p99_send_latency: 1000
    window: [0.1, 0.9]
    after: slow
  - send_success_rate: 0.2
    max: 0.95
    window: [0.1, 0.9]
    after: rejecting
  - max_sends_to: broker-c
    max: 0
    window: [0.8, 1.9]
    after: wiped
  - min_sends_to: broker-c
    min: 1
    window: [0.8, null]
    after: added
  - route_excludes: broker-b
    namesrvs: [0]
    after: split
    not_before: 1.5
    within: 4
  - namesrvs_disagree: true
    after: split
    not_before: 1.5
    within: 4
  - namesrvs_agree: true
    after: healed
    within: 1
  - route_excludes: broker-a
    after: hung
    not_before: 1.5
    within: 4
  - route_includes: broker-a
    after: resumed
    within: 2
  - route_excludes: broker-c
    after: crashed
    within: 0.5
  - route_excludes: broker-b
    after: b-term
    within: 0.5
  - route_includes: broker-c
    after: c-back
    within: 2
  - route_includes: broker-a
    namesrvs: [1]
    after: ns1-up
    within: 2
  - route_includes: broker-a
    topic: T2
    after: t2
    within: 1
  - namesrvs_agree: true
    topic: T2
    after: t2
    within: 3
  - max_failed_sends: 60
"""

SMALL = """\
name: small-{tag}
description: a one-NameServer cluster for exit codes and cleanup
duration: {duration}
{timeout}cluster:
  namesrvs: 1
  brokers: 2
  topics: [S1]
  queues: 2
load:
  producers: 1
  rate: 10
timeline:
  - at: 1
    kill_broker: broker-b
  - at: 1.5
    kill_broker: broker-b        # already dead: this action fails
expect:
  - p99_send_latency: 0.001      # impossible: fails with the measured value
  - send_success_rate: 0.5
"""


def cluster_procs(base: Path) -> list[psutil.Process]:
    """Live (non-zombie) processes started for a scenario whose state directory is under ``base``: named
    in their command line, or for a Go client program (``interop-go``), its working directory."""
    marker = f"{base}{os.sep}mqscenario-"
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if marker not in cmd and "interop-go" in cmd:
                cmd += " " + p.cwd()
        except (psutil.Error, TypeError):
            continue
        if marker in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(p)
    return found


@pytest.fixture
def base(tmp_path: Path) -> Iterator[Path]:
    """A directory for scenario state; whatever a failing test left running there is killed."""
    yield tmp_path
    for p in cluster_procs(tmp_path):
        try:
            p.kill()
        except psutil.Error:
            pass


def write_small(base: Path, tag: str, duration: float = 3, timeout: float | None = None) -> Path:
    path = base / f"{tag}.yaml"
    path.write_text(SMALL.format(tag=tag, duration=duration, timeout=f"timeout: {timeout}\n" if timeout else ""))
    return path


def start_cli(*args: str, base: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(base), "COLUMNS": "200", **(env or {})}
    code = "import sys; from mqadmin.cli import entry; sys.argv[0] = 'mqadmin'; entry()"
    # SIGINT back to its default: a background test run (``cmd &``) ignores it, and children inherit that
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"mqadmin scenario run did not finish within {timeout} s: {err[-2000:]}") from None
    return proc.returncode, out, err


def test_every_action_and_expectation_type(base: Path) -> None:
    scn = schema.parse(EVERY_ACTION, "every-action.yaml")
    records = base / "records.msgpack"
    result = runner.run(scn, base_dir=base, records_path=records)
    assert cluster_procs(base) == []
    assert not list(base.glob("mqscenario-*")), "the state directory is removed"
    failed_actions = [f"{a.text}: {a.detail}" for a in result.actions if not a.ok]
    assert failed_actions == []
    assert [a.action.kind for a in result.actions] == [a.kind for a in scn.timeline]
    failed = [f"{v.text}: measured {v.measured_text} ({v.detail})" for v in result.verdicts if not v.passed]
    assert failed == []
    assert result.passed
    verdicts = {v.index: v for v in result.verdicts}
    # the injected latency shows in the measured p99 (150 ms per send to broker-c, queued on one connection)
    assert 150 <= verdicts[1].measured <= 1000
    # the reject fault fails sends with its code, without retry (13 is not a retry code)
    rejected = [r for r in result.records if r.outcome == "rejected"]
    assert rejected and all(r.code == 13 and r.broker == "broker-c" for r in rejected)
    assert all(2.0 - 1.2 <= r.t <= 3.0 + 0.1 for r in rejected)
    # hung broker: sends to it time out after the 1 s send timeout
    hung = [r for r in result.records if r.outcome == "timeout"]
    assert hung and all(r.broker == "broker-a" and r.latency_ms >= 950 for r in hung)
    # the heartbeat expiry cannot be faster than brokerChannelExpiredTime minus one registration period
    assert 2.0 - 0.1 <= verdicts[8].measured <= 4.0
    assert verdicts[10].measured < 0.5 and verdicts[11].measured < 0.5  # kill -9 and SIGTERM: at once
    changes = [diff_text(e.before, e.after) for e in result.observer.events if not e.first]
    assert "broker-c perm 6→4" in changes and "broker-c perm 4→6" in changes
    assert "unreachable" in changes  # namesrv-1 killed
    doc = report.to_json(result)
    json.dumps(doc)
    assert doc["passed"] is True and doc["sends"]["total"] == len(result.records) > 500
    assert len(doc["expectations"]) == len(scn.expectations) and len(doc["actions"]) == len(scn.timeline)
    assert sum(sum(s.values()) for s in doc["sends"]["perSecond"]) == len(result.records)
    from simclient import read_records

    assert list(read_records(records)) == result.records


def test_failing_expectation_and_action_exit_1_with_measured_value(base: Path) -> None:
    path = write_small(base, "fails")
    out_json, out_png = base / "r.json", base / "r.png"
    rc, out, err = finish(start_cli("scenario", "run", str(path), "--report", str(out_json), "--plot", str(out_png), base=base))
    assert rc == 1, err
    assert cluster_procs(base) == []
    assert "Traceback" not in err
    doc = json.loads(out_json.read_text())
    assert doc["passed"] is False
    p99, rate = doc["expectations"]
    assert p99["passed"] is False and p99["measured"] > 0.001
    assert abs(float(p99["measuredText"].removesuffix(" ms")) - p99["measured"]) <= 0.05
    assert p99["measuredText"] in out  # the measured value is in the report
    assert rate["passed"] is True and rate["measured"] >= 0.5
    kill1, kill2 = doc["actions"]
    assert kill1["ok"] and not kill2["ok"] and "is not running" in kill2["detail"]
    assert "FAIL: 1 of 2 expectations failed; 1 action(s) failed" in out
    # stderr says why the status is 1, in mqadmin's one prefix
    assert err.strip().splitlines()[-1] == ("mqadmin: scenario small-fails failed: 1 of 2 expectations did not hold, "
                                            "1 of 2 actions failed")
    assert_headers_start_at_values(out, header_starts=("t (s)", "#  "))  # the report's tables, piped
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_quiet_pass_exits_0(base: Path) -> None:
    path = base / "passes.yaml"
    path.write_text(SMALL.format(tag="passes", duration=2, timeout="").replace(
        "  - at: 1.5\n    kill_broker: broker-b        # already dead: this action fails\n", "").replace(
        "  - p99_send_latency: 0.001      # impossible: fails with the measured value\n", ""))
    rc, out, err = finish(start_cli("scenario", "run", str(path), "-q", base=base))
    assert (rc, out) == (0, "PASS small-passes\n"), err
    assert cluster_procs(base) == []


def test_timeout_exits_1_and_stops_everything(base: Path) -> None:
    # A timeout shorter than the duration is refused when the file is read; a wait that never ends is what
    # makes a valid run outlast its timeout (6 s, against a 120 s wait for a route change that never comes).
    path = base / "slow.yaml"
    path.write_text(SMALL.format(tag="slow", duration=3, timeout="timeout: 6\n").replace("expect:", (
        "  - wait_until: route_excludes     # never true: broker-a stays up\n"
        "    broker: broker-a\n    timeout: 120\nexpect:")))
    rc, _, err = finish(start_cli("scenario", "run", str(path), base=base), timeout=100)
    assert rc == 1  # a runtime failure, like any other (README: exit status)
    assert "ran longer than its timeout of 6 s" in err and "Traceback" not in err
    assert cluster_procs(base) == []


def wait_for_procs(base: Path, count: int, proc: subprocess.Popen[str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while len(cluster_procs(base)) < count:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"cluster did not start: {finish(proc)[2][-2000:]}")
        time.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_while_running_stops_everything(base: Path, sig: signal.Signals) -> None:
    proc = start_cli("scenario", "run", str(write_small(base, "long", duration=60)), base=base)
    try:
        wait_for_procs(base, 3, proc)
        time.sleep(1.5)  # well into the load and the timeline
        proc.send_signal(sig)
        rc, _, err = finish(proc, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"mqadmin: {'interrupted' if sig == signal.SIGINT else 'received SIGTERM'}; "
        "every process the run started was stopped")
    assert cluster_procs(base) == []


def test_interrupt_during_cluster_start_stops_everything(base: Path) -> None:
    proc = start_cli("scenario", "run", str(write_small(base, "early", duration=60)), base=base)
    try:
        wait_for_procs(base, 1, proc)  # the first NameServer exists; the rest is still starting
        proc.send_signal(signal.SIGINT)
        rc, _, err = finish(proc, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 130, err
    assert "Traceback" not in err
    assert cluster_procs(base) == []


@pytest.mark.parametrize("name", ["broker-crash", "broker-shutdown", "namesrv-all-down", "consumer-namesrv-all-down"])
def test_shipped_scenario_passes(base: Path, name: str) -> None:
    """Four shipped scenarios, run by name as a user runs them: every expectation holds."""
    out_json = base / f"{name}.json"
    rc, out, err = finish(start_cli("scenario", "run", name, "--report", str(out_json), base=base), timeout=120)
    assert cluster_procs(base) == []
    doc = json.loads(out_json.read_text())
    failed = [f"{e['expectation']}: {e['measuredText']}" for e in doc["expectations"] if not e["passed"]]
    assert rc == 0 and doc["passed"] is True, (failed, err[-2000:])
    assert "PASS: all" in out and "expectations hold" in out
    route_drops = [e for e in doc["expectations"] if e["kind"] == "route_excludes"]
    if name in ("broker-crash", "broker-shutdown"):  # a crash or a shutdown drops the route on connection close, well under 1 s
        assert route_drops and all(0 <= e["measured"] < 1.0 for e in route_drops)
    assert doc["sends"]["total"] > 100
    if name.startswith("consumer-"):
        assert_headers_start_at_values(out, header_starts=("t (s)", "#  ", "group  "))
        groups = {g["name"]: g for g in doc["consumers"]["groups"]}
        assert groups["running"]["consumed"] >= groups["running"]["acknowledged"] > 100
