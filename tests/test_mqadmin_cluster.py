"""The local cluster runner, as a user drives it (real processes, loopback only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from mqadmin import cluster


def mqadmin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from mqadmin.cli import entry; entry()", *args],
        capture_output=True, text=True, timeout=60, env=dict(os.environ, COLUMNS="200"),
    )


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "cluster"
    yield directory
    # Whatever the test did, nothing it started may outlive it.
    try:
        state = cluster.ClusterState.load(directory)
    except cluster.ClusterError:
        return
    cluster.stop_procs(state.procs, grace=1.0)


def test_start_status_stop_leaves_no_process(state_dir: Path) -> None:
    out = mqadmin("start", "--brokers", "0", "--namesrvs", "2", "--dir", str(state_dir), "--json")
    assert out.returncode == 0, out.stderr
    started = json.loads(out.stdout)
    pids = [p["pid"] for p in started["procs"]]
    assert len(pids) == 2 and all(cluster.pid_alive(p) for p in pids)
    assert started["namesrvAddr"].count(";") == 1

    status = json.loads(mqadmin("status", "--dir", str(state_dir), "--json").stdout)
    assert [p["state"] for p in status["procs"]] == ["running", "running"]

    again = mqadmin("start", "--brokers", "0", "--dir", str(state_dir))
    assert again.returncode == 1 and "already running" in again.stderr

    out = mqadmin("stop", "--dir", str(state_dir))
    assert out.returncode == 0 and "stopped 2 processes" in out.stdout
    assert not any(cluster.pid_alive(p) for p in pids)
    assert mqadmin("status", "--dir", str(state_dir)).returncode == 1


def test_kill_and_restart_namesrv_on_its_port(state_dir: Path) -> None:
    assert mqadmin("start", "--brokers", "0", "--dir", str(state_dir)).returncode == 0
    before = cluster.ClusterState.load(state_dir).namesrvs[1]
    out = mqadmin("killNamesrv", "-i", "1", "--dir", str(state_dir))
    assert out.returncode == 0 and "SIGKILL" in out.stdout
    status = json.loads(mqadmin("status", "--dir", str(state_dir), "--json").stdout)
    assert [p["state"] for p in status["procs"]] == ["running", "stopped"]
    assert mqadmin("restartNamesrv", "-i", "1", "--dir", str(state_dir)).returncode == 0
    after = cluster.ClusterState.load(state_dir).namesrvs[1]
    assert after.port == before.port and after.pid != before.pid and after.alive()
    # Commands without -n find the running cluster... when it is the default one;
    # here, point at it explicitly and check both NameServers answer.
    out = mqadmin("getNamesrvConfig", "--json", "-n", cluster.ClusterState.load(state_dir).namesrv_addr)
    assert out.returncode == 0 and len(json.loads(out.stdout)) == 2


def test_stop_and_pause_namesrv(state_dir: Path) -> None:
    assert mqadmin("start", "--brokers", "0", "--namesrvs", "1", "--dir", str(state_dir)).returncode == 0
    assert mqadmin("killNamesrv", "--signal", "STOP", "--dir", str(state_dir)).returncode == 0
    status = json.loads(mqadmin("status", "--dir", str(state_dir), "--json").stdout)
    assert status["procs"][0]["state"] == "paused (SIGSTOP)"
    out = mqadmin("stop", "--dir", str(state_dir))  # a paused process is still stopped cleanly
    assert out.returncode == 0
    assert not cluster.pid_alive(status["procs"][0]["pid"])


def test_runner_errors_are_one_line(state_dir: Path) -> None:
    out = mqadmin("status", "--dir", str(state_dir))
    assert out.returncode == 1 and out.stderr == f"mqadmin: no local cluster in {state_dir} (start one with: mqadmin start)\n"
    out = mqadmin("start", "--namesrvs", "0", "--dir", str(state_dir))
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert mqadmin("start", "--brokers", "0", "--namesrvs", "1", "--dir", str(state_dir)).returncode == 0
    out = mqadmin("killBroker", "-b", "broker-z", "--dir", str(state_dir))
    assert out.returncode == 1 and "no broker broker-z" in out.stderr
    out = mqadmin("killNamesrv", "-i", "5", "--dir", str(state_dir))
    assert out.returncode == 1 and "no NameServer 5" in out.stderr
    out = mqadmin("killNamesrv", "--signal", "HUP", "--dir", str(state_dir))
    assert out.returncode == 1 and "unknown signal" in out.stderr
    out = mqadmin("start", "--brokers", "two")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
