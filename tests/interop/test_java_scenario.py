"""A scenario on Apache's Java brokers: ``cluster.broker_impl: java:5.3.3`` behind the clients' fault
proxy (``client_proxy: true``: the producers reach the Java brokers through it), a master killed
mid-load, a latency on the other's clients' path and its heal, verdicts from both NameServers' routes,
and a report that names what ran each process; every process stopped at the end. (Java NameServers
and a mixed list: test_java_local_cluster.py; the scenario keys' checks: tests/test_java_impl_options.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.interop import harness_build
from tests.mqadmin_procs import cli_env, mqadmin, procs_mentioning

JAVA_CRASH = """\
name: java-broker-crash-check
description: kill -9 a Java 5.3.3 master; both NameServers drop it at once; clients through the proxy
duration: 10
cluster:
  namesrvs: 2
  brokers: 2
  broker_impl: java:5.3.3
  register_period_ms: 10000
  client_proxy: true
  topics: [JavaCrashTopic]
  queues: 4
load:
  producers: 2
  rate: 20
  poll_interval: 30
timeline:
  - at: 4
    kill_broker: broker-a
    label: crash
  - at: 5
    network_fault: broker-b
    clients: true
    latency_ms: 50
    label: slow
  - at: 7
    heal: broker-b
    clients: true
    label: healed
expect:
  - route_excludes: broker-a
    after: crash
    within: 5
  - send_success_rate: 0.95
  - min_sends_to: broker-b
    min: 1
    after: crash
"""


def test_scenario_with_java_brokers(tmp_path: Path) -> None:
    try:
        harness_build.resolve_servers()
    except harness_build.HarnessBuildError as exc:
        pytest.fail(f"interop harness: {exc}", pytrace=False)
    path = tmp_path / "java-crash.yaml"
    path.write_text(JAVA_CRASH)
    env = cli_env(tmp_path / "xdg", TMPDIR=str(tmp_path))  # the run's cluster directory under tmp_path
    try:
        done = mqadmin("scenario", "run", str(path), "--report", str(tmp_path / "report.json"), env=env,
                       in_process=False, timeout=600)  # a process of its own: its TMPDIR is tmp_path
        assert done.returncode == 0, done.stdout + done.stderr
        assert "cluster: 2 NameServer(s), 2 broker group(s) (java 5.3.3) x 1" in done.stdout
        report = json.loads((tmp_path / "report.json").read_text())
        assert report["cluster"]["impls"] == {"namesrv-0": "toolkit", "namesrv-1": "toolkit",
                                              "broker-a-0": "java 5.3.3", "broker-b-0": "java 5.3.3"}
        crash = next(a for a in report["actions"] if a["label"] == "crash")
        assert crash["ok"] and "SIGKILL to broker-a-0" in crash["detail"]
        slow, healed = (next(a for a in report["actions"] if a["label"] == label) for label in ("slow", "healed"))
        assert slow["ok"] and "clients.broker-b-0: latency 50 ms" in slow["detail"], slow
        assert healed["ok"] and "clients.broker-b-0: -" in healed["detail"], healed
        assert all(e["passed"] for e in report["expectations"]), report["expectations"]
        assert report["forceKilled"] == []
    finally:
        left = procs_mentioning(str(tmp_path))
        for proc in left:
            proc.kill()
        assert left == [], left
