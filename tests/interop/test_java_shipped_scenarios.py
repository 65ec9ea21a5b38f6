"""The shipped real-RocketMQ scenarios (``scenarios/java-*.yaml``, ``namesrv-restart-java-vs-toolkit``),
run by name as a user runs them: Apache's Java brokers, NameServers and clients resolved from the
warm Maven cache, every expectation holding, the report naming what ran each process, and no
process left behind (JVMs included), whatever the outcome.

Each asserts, beyond the verdicts, the behaviour its header predicts and that could be otherwise:
the route a crash or partition removes, which NameServer answered what after a restart, which
consumers owned queues. Their wall times are in docs/scenarios.md; each is a few tens of seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mqadmin.scenario import schema
from mqadmin.scenario.client_schema import is_grpc
from mqadmin.scenario.realclients import clients_of
from mqadmin.scenario.shipped import shipped_dir
from tests.test_scenario_run import base, cluster_procs, finish, start_cli  # noqa: F401 (base is a fixture)

#: A run is a cluster of JVMs started on a busy 2-core machine (each takes 10-30 s to boot), the
#: scenario's own seconds and a graceful stop: this bounds it, it is no performance target.
RUN_TIMEOUT = 600


def run_shipped(base: Path, name: str) -> tuple[dict[str, Any], str]:  # noqa: F811
    """``mqadmin scenario run NAME --report``: exit 0, every expectation held, nothing left running, none
    of it killed for want of stopping (the Java servers are SIGKILLed on purpose, first); (report, stdout)."""
    out_json = base / f"{name}.json"
    rc, out, err = finish(start_cli("scenario", "run", name, "--report", str(out_json), base=base), timeout=RUN_TIMEOUT)
    assert cluster_procs(base) == []
    assert out_json.exists(), (rc, err[-3000:])
    doc = json.loads(out_json.read_text())
    failed = [f"{e['expectation']}: {e['measuredText']}" for e in doc["expectations"] if not e["passed"]]
    assert rc == 0 and doc["passed"] is True, (failed, out[-3000:], err[-3000:])
    assert f"PASS: all {len(doc['expectations'])} expectations hold" in out
    assert all(a["ok"] for a in doc["actions"]), doc["actions"]
    assert doc["forceKilled"] == []
    return doc, out


def route_events(doc: dict[str, Any], namesrv: int) -> list[dict[str, Any]]:
    return [e for e in doc["routeEvents"] if e["namesrv"] == namesrv]


def action(doc: dict[str, Any], label: str) -> dict[str, Any]:
    return next(a for a in doc["actions"] if a["label"] == label)


def test_java_broker_crash(base: Path) -> None:  # noqa: F811
    """Also the clients' fault proxy in front of Java brokers (client_proxy): the Java producers reach
    them through it, and a latency on the survivor's path is applied and healed."""
    doc, out = run_shipped(base, "java-broker-crash")
    assert "cluster: 2 NameServer(s), 2 broker group(s) (java 5.3.3) x 1" in out
    assert doc["cluster"]["impls"] == {"namesrv-0": "toolkit", "namesrv-1": "toolkit",
                                       "broker-a-0": "java 5.3.3", "broker-b-0": "java 5.3.3"}
    assert "SIGKILL to broker-a-0" in action(doc, "crash")["detail"]
    assert "clients.broker-b-0: latency 50 ms" in action(doc, "slow")["detail"]
    assert "clients.broker-b-0: -" in action(doc, "healed")["detail"]
    crash = doc["expectations"][0]
    assert crash["kind"] == "route_excludes" and 0 <= crash["measured"] < 1.0  # on connection close
    assert doc["sends"]["total"] > 200  # the Java producers' own records


def test_java_broker_partition(base: Path) -> None:  # noqa: F811
    doc, _ = run_shipped(base, "java-broker-partition")
    assert doc["cluster"]["impls"]["namesrv-1"] == "java 5.5.0"
    assert doc["cluster"]["impls"]["broker-a-0"] == "java 5.3.3"
    assert "broker-a-0.namesrv-1: partition" in action(doc, "split-a")["detail"]
    healed_at = action(doc, "healed")["start"]
    # each NameServer dropped only the broker partitioned from it, before the heal, and took it back after
    for ns, gone, kept in ((1, "broker-a", "broker-b"), (0, "broker-b", "broker-a")):
        during = [e for e in route_events(doc, ns) if not e["first"] and e["t"] < healed_at]
        assert [e["change"] for e in during] == [f"-{gone}"], (ns, during)
        assert list(during[0]["route"]) == [kept]
        assert set(route_events(doc, ns)[-1]["route"]) == {"broker-a", "broker-b"}


def test_namesrv_restart_java_vs_toolkit(base: Path) -> None:  # noqa: F811
    doc, _ = run_shipped(base, "namesrv-restart-java-vs-toolkit")
    assert doc["cluster"]["impls"] == {"namesrv-0": "toolkit", "namesrv-1": "java 5.5.0",
                                       "broker-a-0": "java 4.9.7", "broker-b-0": "java 4.9.7"}
    warm_at, cold_at = action(doc, "warm")["start"], action(doc, "cold")["start"]
    ours = [e for e in route_events(doc, 0) if e["t"] >= warm_at]
    java = [e for e in route_events(doc, 1) if e["t"] >= cold_at]
    assert ours and set(ours[0]["route"]) == {"broker-a", "broker-b"}, ours  # warm: the snapshot, dead broker-a too
    assert java and java[0]["route"] is not None and "broker-a" not in java[0]["route"], java  # cold
    assert all("broker-a" not in (e["route"] or {}) for e in java), java  # the dead broker never comes back
    assert set(java[-1]["route"]) == {"broker-b"}, java  # the live one, at its next registration


def test_java_consumer_rebalance(base: Path) -> None:  # noqa: F811
    doc, _ = run_shipped(base, "java-consumer-rebalance")
    assert doc["cluster"]["impls"]["broker-a-0"] == "java 5.3.3"
    (group,) = doc["consumers"]["groups"]
    assert group["client"] == "java:5.3.3" and group["consumers"] == 3
    assert group["lost"] == 0 and group["consumed"] >= group["acknowledged"] > 200
    owners = {e["consumer"] for e in doc["consumers"]["ownership"] if e["kind"] == "acquire"}
    assert owners == {0, 1, 2}  # every member, the newcomer too, owned queues at some point
    assert {e["kind"] for e in doc["consumers"]["ownership"]} >= {"kill", "stop"}


def test_every_shipped_scenario_on_java_is_run_here() -> None:
    """A shipped scenario with a Java role or Java/Go clients gets its test in this module."""
    on_java = set()
    for path in shipped_dir().glob("*.yaml"):
        scn = schema.load(path)
        roles = (*scn.cluster.namesrv_impl, *scn.cluster.broker_impl)
        grpc_only = all(is_grpc(c) for c in clients_of(scn))  # tests/interop/test_grpc_scenario.py runs those
        if any(r.startswith("java:") for r in roles) or (clients_of(scn) and not grpc_only):
            on_java.add(path.stem)
    tested = {name.removeprefix("test_").replace("_", "-") for name in globals() if name.startswith("test_")}
    assert on_java and on_java <= tested, sorted(on_java - tested)
