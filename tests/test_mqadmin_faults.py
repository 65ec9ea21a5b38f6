"""killBroker as routes see it: a crash at once (connection close), a hang only after the heartbeat timeout.

One cluster for the module with short, known timings: brokers register every
300 ms, NameServers drop a broker after 3 s of silence and look every 100 ms.
Every test leaves both brokers running and routable.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqadmin.client import SyncAdminClient
from tests.mqadmin_procs import mqadmin, mqadmin_json, running_cluster

REGISTER_MS = 300
EXPIRE_MS = 3000
SCAN_MS = 100


class Faulty:
    def __init__(self, directory: Path, started: dict[str, Any]) -> None:
        self.dir = directory
        self.addr = {p["name"]: p["addr"] for p in started["procs"]}
        self.namesrvs = [self.addr["namesrv-0"], self.addr["namesrv-1"]]
        self.clients = [SyncAdminClient([ns], timeout=5.0) for ns in self.namesrvs]

    def run(self, *args: str) -> Any:
        done = mqadmin(*args, "--dir", str(self.dir))
        assert done.returncode == 0, done.stderr
        return done

    def masters_everywhere(self) -> list[set[str]]:
        """Per NameServer: the broker names TBW102 is routed to with a master address."""
        return [{b.broker_name for b in c.topic_route("TBW102").broker_datas if b.master_addr} for c in self.clients]

    def wait(self, predicate: Any, timeout: float, step: float = 0.02) -> float:
        """Seconds until ``predicate(masters_everywhere())`` holds (fails the test after ``timeout``)."""
        began = time.monotonic()
        while not predicate(self.masters_everywhere()):
            assert time.monotonic() - began < timeout, f"not within {timeout} s: {self.masters_everywhere()}"
            time.sleep(step)
        return time.monotonic() - began


BOTH = {"broker-a", "broker-b"}


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faulty]:
    directory = tmp_path_factory.mktemp("faults") / "cluster"
    with running_cluster(directory, "--register-period", str(REGISTER_MS), "--broker-timeout", str(EXPIRE_MS),
                         "--scan-interval", str(SCAN_MS)) as started:
        yield Faulty(directory, started)


def test_killed_broker_leaves_every_route_by_its_closed_connection(faulty: Faulty) -> None:
    assert faulty.masters_everywhere() == [BOTH, BOTH]
    out = faulty.run("killBroker", "-b", "broker-b")
    assert "sent SIGKILL to broker-b-0" in out.stdout and out.stdout.rstrip().endswith("stopped")
    faulty.wait(lambda seen: seen == [{"broker-a"}, {"broker-a"}], timeout=20.0)
    # Removed because its connection closed, at once, on every NameServer: not by the heartbeat timeout.
    for i in range(len(faulty.namesrvs)):
        log = (faulty.dir / f"namesrv-{i}" / "namesrv.log").read_text(errors="replace")
        assert re.search(r"broker broker-b \S+ \(\S+\) removed: its connection \S+ closed", log), log[-2000:]
        assert not re.search(r"broker broker-b .*expired: no heartbeat", log), log[-2000:]
    # The CLI shows it too, on both NameServers.
    for ns in faulty.namesrvs:
        route = mqadmin_json("topicRoute", "-t", "TBW102", "-n", ns)
        assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-a"]

    faulty.run("restartBroker", "-b", "broker-b")
    faulty.wait(lambda seen: seen == [BOTH, BOTH], timeout=10.0)


def test_hung_broker_expires_only_after_the_heartbeat_timeout_then_cont_brings_it_back(faulty: Faulty) -> None:
    faulty.wait(lambda seen: seen == [BOTH, BOTH], timeout=10.0)
    stopped_at = time.monotonic()
    out = faulty.run("killBroker", "-b", "broker-a", "--signal", "STOP")
    assert "paused (SIGSTOP)" in out.stdout
    try:
        # Hung, not dead: its connection stays open, so it stays routed...
        time.sleep(1.0)
        assert faulty.masters_everywhere() == [BOTH, BOTH]
        # ...and clusterList says it does not answer: its row, and a health check's exit status 1.
        done = mqadmin("clusterList", "--timeout", "0.5", "-n", faulty.namesrvs[0], "--json")
        assert done.returncode == 1 and done.stderr.startswith("mqadmin: 1 of 2 brokers failed: "), done.stderr
        rows = json.loads(done.stdout)["brokers"]
        row_a = next(r for r in rows if r["brokerName"] == "broker-a")
        assert row_a["reachable"] is False and "no response" in row_a["error"]
        assert next(r for r in rows if r["brokerName"] == "broker-b")["reachable"] is True
        # It leaves the routes once the heartbeat timeout has passed since its last registration.
        faulty.wait(lambda seen: seen == [{"broker-b"}, {"broker-b"}], timeout=EXPIRE_MS / 1000 + 5)
        gone_after = time.monotonic() - stopped_at
        # The last registration may be one period old, or (on a loaded machine) a little older.
        earliest = (EXPIRE_MS - REGISTER_MS) / 1000 - 1.0
        assert gone_after >= earliest, f"expired after {gone_after:.2f} s, before the {EXPIRE_MS} ms timeout"
    finally:
        faulty.run("killBroker", "-b", "broker-a", "--signal", "CONT")
    faulty.wait(lambda seen: seen == [BOTH, BOTH], timeout=20.0)  # it registers again once resumed


def test_terminated_broker_unregisters_and_restarts(faulty: Faulty) -> None:
    faulty.wait(lambda seen: seen == [BOTH, BOTH], timeout=10.0)
    faulty.run("killBroker", "-b", "broker-a", "--signal", "TERM")
    faulty.wait(lambda seen: seen == [{"broker-b"}, {"broker-b"}], timeout=5.0)
    done = mqadmin("status", "--dir", str(faulty.dir), "--json")  # a process is down: exit 1
    assert done.returncode == 1 and "broker-a-0 (stopped)" in done.stderr, done.stderr
    assert {p["name"]: p["state"] for p in json.loads(done.stdout)["procs"]}["broker-a-0"] == "stopped"
    faulty.run("restartBroker", "-b", "broker-a")
    faulty.wait(lambda seen: seen == [BOTH, BOTH], timeout=10.0)
