"""Which NameServers a command asks when no -n is given: every one of the local cluster, stopped ones too.

The real ``mqadmin`` program (a subprocess, as an operator runs it) against a real local cluster in the
default state directory (a private $XDG_STATE_HOME), so nothing names the NameServers but the cluster's
own record. A stopped NameServer must count as a failed server: leaving it out would let a KV write
reach one NameServer and exit 0, or ``watch`` report agreement, while the two disagree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mqadmin_procs import cli_env, mqadmin, running_cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[dict[str, str], dict[str, Any]]]:
    """2 NameServers and one broker group in the default state dir; (the CLI's environment, start --json)."""
    env = cli_env(state_home=tmp_path / "state")
    with running_cluster(tmp_path / "state" / "mqadmin" / "cluster", "--brokers", "1", env=env,
                         use_dir=False) as started:
        yield env, started


def addr_of(started: dict[str, Any], name: str) -> str:
    return next(p["addr"] for p in started["procs"] if p["name"] == name)


def test_a_stopped_namesrv_is_a_failed_server_not_a_missing_one(cluster: tuple[dict[str, str], dict[str, Any]]) -> None:
    env, started = cluster
    ns0, ns1 = addr_of(started, "namesrv-0"), addr_of(started, "namesrv-1")
    assert mqadmin("watch", "--once", env=env, in_process=False).returncode == 0  # both answer
    assert mqadmin("killNamesrv", "-i", "0", env=env).returncode == 0

    watch = mqadmin("watch", "--once", env=env, in_process=False)
    assert watch.returncode == 1, watch.stdout
    assert watch.stderr == f"mqadmin: 1 of 2 NameServer(s) did not answer: {ns0}\n"
    assert f"@{ns0}" in watch.stdout and f"@{ns1}" in watch.stdout  # one column per NameServer, the stopped one too
    snap = json.loads(mqadmin("watch", "--json", env=env, in_process=False).stdout)
    assert snap["namesrvs"] == [ns0, ns1] and list(snap["errors"]) == [ns0]

    kv = mqadmin("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T1", "-v", "broker-a:4", env=env, in_process=False)
    assert kv.returncode == 1
    lines = kv.stdout.splitlines()
    assert f"create or update kv config to namespace success. [{ns1}]" in lines
    assert len(lines) == 2 and any(ns0 in line and "success" not in line for line in lines), kv.stdout

    # Back up, the restarted NameServer lacks the write it missed: the failure above was the truth.
    assert mqadmin("restartNamesrv", "-i", "0", env=env).returncode == 0
    assert mqadmin("getKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T1", "-n", ns1, env=env).returncode == 0
    assert mqadmin("getKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T1", "-n", ns0, env=env).returncode == 1


def test_every_namesrv_stopped_names_them_and_how_to_restart(cluster: tuple[dict[str, str], dict[str, Any]]) -> None:
    env, started = cluster
    for index in ("0", "1"):
        assert mqadmin("killNamesrv", "-i", index, env=env).returncode == 0
    done = mqadmin("clusterList", env=env, in_process=False)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "no NameServer address" not in done.stderr
    ns0, ns1 = addr_of(started, "namesrv-0"), addr_of(started, "namesrv-1")
    assert f"namesrv-0 ({ns0}), namesrv-1 ({ns1})" in done.stderr
    assert "every NameServer of the local cluster" in done.stderr and "mqadmin restartNamesrv -i 0, then -i 1" in done.stderr

    # Nothing left running at all: the way back is a new start.
    assert mqadmin("killBroker", "-b", "broker-a", env=env).returncode == 0
    done = mqadmin("updateKvConfig", "-s", "N", "-k", "k", "-v", "v", env=env)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "is not running (every process is stopped): start it again with mqadmin start" in done.stderr


def test_an_empty_namesrv_option_is_a_usage_error(cluster: tuple[dict[str, str], dict[str, Any]]) -> None:
    env, _ = cluster
    for args in (("clusterList", "-n", ""), ("updateKvConfig", "-s", "N", "-k", "k", "-v", "v", "-n", " ; ")):
        done = mqadmin(*args, env=env, in_process=False)
        assert done.returncode == 2 and done.stdout == "", done.stderr
        assert done.stderr.count("\n") == 1 and "-n" in done.stderr and "no NameServer address given" in done.stderr
    done = mqadmin("fanout", "-n", "", "--engine", "multiprocessing", env=env, in_process=False)
    assert done.returncode == 2 and done.stderr == "mqadmin: --namesrv: no NameServer address given\n"
    # the KV write above was refused before anything was sent: no NameServer has the key
    assert mqadmin("getKvConfig", "-s", "N", "-k", "k", env=env).returncode == 1
