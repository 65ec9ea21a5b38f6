"""The local cluster runner, as a user drives it (real processes, loopback only)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin.localcluster.state import STATE_FILE, ClusterState, pid_alive
from tests.mqadmin_procs import (
    mqadmin,
    mqadmin_json,
    procs_mentioning,
    running_cluster,
    stop_all,
)


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "cluster"
    yield directory
    stop_all(directory)


def test_start_with_slaves_and_topics_then_stop_leaves_no_process(state_dir: Path) -> None:
    # The real console entry point, as a user runs it (the rest runs the same code in-process).
    out = mqadmin("start", "--namesrvs", "2", "--brokers", "2", "--slaves", "1", "--topics", "orders,audit",
                  "--topic-queues", "4", "--dir", str(state_dir), "--json", in_process=False)
    assert out.returncode == 0, out.stderr
    started = json.loads(out.stdout)
    assert set(started) == {"dir", "cluster", "namesrvAddr", "topics", "auth", "tls", "procs", "prometheusConfig",
                            "faultProxy", "grpcEndpoint"}
    assert started["grpcEndpoint"] is None  # no --proxy
    assert started["auth"] is False and started["tls"] is False
    assert started["prometheusConfig"] is None  # no --metrics
    assert started["topics"] == ["orders", "audit"] and started["cluster"] == "DefaultCluster"
    procs = started["procs"]
    assert [(p["name"], p["role"]) for p in procs] == [
        ("namesrv-0", "namesrv"), ("namesrv-1", "namesrv"), ("faultproxy", "fault proxy"), ("broker-a-0", "master"),
        ("broker-a-1", "slave 1"), ("broker-b-0", "master"), ("broker-b-1", "slave 1"),
    ]
    # every broker (slaves too) reaches every NameServer through its own path of the fault proxy
    proxy = started["faultProxy"]
    assert proxy["control"] == procs[2]["addr"] and proxy["answering"] is True
    assert sorted(p["name"] for p in proxy["paths"]) == sorted(
        f"{b}.{ns}" for b in ("broker-a-0", "broker-a-1", "broker-b-0", "broker-b-1") for ns in ("namesrv-0", "namesrv-1"))
    assert all(p["enabled"] and p["toxics"] == [] for p in proxy["paths"])
    assert set(procs[0]) == {"name", "kind", "role", "impl", "version", "brokerName", "brokerId", "addr", "vipAddr",
                             "pid", "state", "log", "config", "metricsUrl"}
    assert [(p["impl"], p["version"]) for p in procs] == [("toolkit", None)] * 3 + [("stub", None)] * 4
    assert all(p["metricsUrl"] is None for p in procs)  # no --metrics: no process serves /metrics
    assert all(p["state"] == "running" and pid_alive(p["pid"]) for p in procs)
    addr = {p["name"]: p["addr"] for p in procs}
    for p in procs:  # each broker also listens on its VIP port, listenPort - 2, as a Java broker does
        host, port = p["addr"].rsplit(":", 1)
        assert p["vipAddr"] == (f"{host}:{int(port) - 2}" if p["kind"] == "broker" else None)

    # start returned only once everything is routable, on every NameServer: slaves included.
    for ns in (addr["namesrv-0"], addr["namesrv-1"]):
        route = mqadmin_json("topicRoute", "-t", "TBW102", "-n", ns)
        assert {b["brokerName"]: b["brokerAddrs"] for b in route["brokerDatas"]} == {
            "broker-a": {"0": addr["broker-a-0"], "1": addr["broker-a-1"]},
            "broker-b": {"0": addr["broker-b-0"], "1": addr["broker-b-1"]},
        }
        for topic in ("orders", "audit"):
            route = mqadmin_json("topicRoute", "-t", topic, "-n", ns)
            assert sorted((q["brokerName"], q["writeQueueNums"]) for q in route["queueDatas"]) == [("broker-a", 4), ("broker-b", 4)]

    status = mqadmin_json("status", "--dir", str(state_dir))
    assert [p["state"] for p in status["procs"]] == ["running"] * 7

    again = mqadmin("start", "--brokers", "0", "--dir", str(state_dir))
    assert again.returncode == 1 and "already running" in again.stderr and again.stderr.count("\n") == 1

    out = mqadmin("stop", "--dir", str(state_dir), in_process=False)
    assert out.returncode == 0 and out.stdout.strip() == "stopped 7 processes"
    assert not any(pid_alive(p["pid"]) for p in procs)
    assert procs_mentioning(str(state_dir)) == []
    assert mqadmin("status", "--dir", str(state_dir)).returncode == 1


def test_summary_and_namesrv_kill_restart_on_its_port(state_dir: Path) -> None:
    out = mqadmin("start", "--brokers", "0", "--dir", str(state_dir))
    assert out.returncode == 0, out.stderr
    state = ClusterState.load(state_dir)
    assert "started 2 NameServer(s) and no broker (--brokers 0): nothing is routable" in out.stdout
    assert " is up" not in out.stdout
    assert f"export NAMESRV_ADDR='{state.namesrv_addr}'" in out.stdout
    assert f"stop: mqadmin stop --dir {state_dir}" in out.stdout
    assert "namesrv-1" in out.stdout and "\x1b[" not in out.stdout  # no colour codes off a terminal

    before = state.namesrvs[1]
    out = mqadmin("killNamesrv", "-i", "1", "--dir", str(state_dir))
    assert out.returncode == 0 and "SIGKILL" in out.stdout and out.stdout.rstrip().endswith("stopped")
    done = mqadmin("status", "--dir", str(state_dir), "--json")  # a process is down: a failed health check
    assert done.returncode == 1 and done.stderr == ("mqadmin: 1 of 2 processes of the local cluster are not running: "
                                                    "namesrv-1 (stopped)\n"), done.stderr
    assert [p["state"] for p in json.loads(done.stdout)["procs"]] == ["running", "stopped"]
    assert mqadmin("restartNamesrv", "-i", "1", "--dir", str(state_dir)).returncode == 0
    after = ClusterState.load(state_dir).namesrvs[1]
    assert after.port == before.port and after.pid != before.pid and after.alive()
    configs = mqadmin_json("getNamesrvConfig", "-n", ClusterState.load(state_dir).namesrv_addr)
    assert len(configs) == 2

    logs = mqadmin("logs", "namesrv-1", "-l", "5", "--dir", str(state_dir))
    assert logs.returncode == 0 and "boot success" in logs.stdout
    tails = mqadmin_json("logs", "-l", "2", "--dir", str(state_dir))["logs"]
    assert sorted(tails) == ["namesrv-0", "namesrv-1"] and all(len(t["lines"]) <= 2 for t in tails.values())
    assert tails["namesrv-0"]["path"].endswith("namesrv-0/namesrv.log")


def test_paused_namesrv_is_still_stopped_cleanly(state_dir: Path) -> None:
    with running_cluster(state_dir, "--brokers", "0", "--namesrvs", "1") as started:
        assert mqadmin("killNamesrv", "--signal", "STOP", "--dir", str(state_dir)).returncode == 0
        done = mqadmin("status", "--dir", str(state_dir), "--json")
        assert done.returncode == 1 and "namesrv-0 (paused (SIGSTOP))" in done.stderr, done.stderr
        assert json.loads(done.stdout)["procs"][0]["state"] == "paused (SIGSTOP)"
        out = mqadmin("stop", "--dir", str(state_dir))
        assert out.returncode == 0
        assert not pid_alive(started["procs"][0]["pid"])
        assert procs_mentioning(str(state_dir)) == []


def test_runner_errors_are_one_line(state_dir: Path) -> None:
    out = mqadmin("status", "--dir", str(state_dir))
    assert out.returncode == 1 and out.stderr == f"mqadmin: no local cluster in {state_dir} (start one with: mqadmin start)\n"
    out = mqadmin("start", "--namesrvs", "0", "--dir", str(state_dir))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--namesrvs" in out.stderr
    out = mqadmin("start", "--brokers", "0", "--topics", "a", "--dir", str(state_dir))
    assert out.returncode == 2 and out.stderr == (  # a bad option value, refused before anything starts
        "mqadmin: Invalid value: --topics needs at least one broker group (--brokers >= 1) (see mqadmin start -h)\n")
    out = mqadmin("start", "--topics", "bad topic", "--dir", str(state_dir))
    assert out.returncode == 2 and "bad topic" in out.stderr and out.stderr.count("\n") == 1
    assert not (state_dir / STATE_FILE).exists()  # nothing was started
    with running_cluster(state_dir, "--brokers", "0", "--namesrvs", "1"):
        out = mqadmin("killBroker", "-b", "broker-z", "--dir", str(state_dir))
        assert out.returncode == 1 and out.stderr == (
            f"mqadmin: no broker broker-z in the local cluster in {state_dir} (brokers: none)\n")
        out = mqadmin("killNamesrv", "-i", "5", "--dir", str(state_dir))
        assert out.returncode == 1 and "no NameServer 5" in out.stderr
        out = mqadmin("killNamesrv", "--signal", "HUP", "--dir", str(state_dir))
        assert out.returncode == 2 and "unknown signal" in out.stderr  # a bad option value
        out = mqadmin("logs", "nobody", "--dir", str(state_dir))
        assert out.returncode == 1 and "no process named nobody (processes: namesrv-0)" in out.stderr
    out = mqadmin("start", "--brokers", "two")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
