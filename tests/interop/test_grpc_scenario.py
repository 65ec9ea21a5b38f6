"""The shipped RocketMQ 5 scenario (``scenarios/grpc-broker-crash.yaml``), run by name as a user runs it:
Apache's Proxy 5.3.3 over our NameServer and broker stubs, a Java (rocketmq-client-java) and a Python
(rocketmq-python-client) producer, a Python push consumer and a Java simple consumer; broker-a killed
and restarted. One run (about a minute and a half on a busy 2-core machine): every expectation holds,
the gRPC clients' own records fed the verdicts, and no process is left behind (the Proxy's JVM too).
"""

from __future__ import annotations

from pathlib import Path

from mqadmin.scenario import schema
from mqadmin.scenario.client_schema import is_grpc
from mqadmin.scenario.shipped import shipped_dir
from tests.interop.test_java_shipped_scenarios import action, run_shipped
from tests.test_scenario_run import base  # noqa: F401 (a fixture)


def test_grpc_broker_crash(base: Path) -> None:  # noqa: F811
    doc, _ = run_shipped(base, "grpc-broker-crash")
    assert "SIGKILL to broker-a-0" in action(doc, "crash")["detail"]
    assert {g["name"]: g["client"] for g in doc["load"]} == {"java5": "grpc-java:5.0.7", "python5": "grpc-python"}
    sends = doc["sends"]
    assert sends["total"] > 20 and sends["outcomes"]["ok"] >= 0.95 * sends["total"]  # the clients' own records
    groups = {g["name"]: g for g in doc["consumers"]["groups"]}
    assert groups["push"]["client"] == "grpc-python" and groups["simple"]["client"] == "grpc-java:5.0.7"
    for group in groups.values():
        assert group["consumed"] > 0 and group["consumedFrom"].get("broker-b", 0) > 0, group
    assert groups["simple"]["stats"]["pulls"] > 0  # the simple consumer's receives, counted as pulls


def test_every_shipped_grpc_scenario_is_run_here() -> None:
    scns = {p.stem: schema.load(p) for p in shipped_dir().glob("*.yaml")}
    grpc = {name for name, scn in scns.items()
            if any(is_grpc(c) for c in [*(g.client for g in scn.groups), *(s.client for s in scn.consumers)])}
    tested = {name.removeprefix("test_").replace("_", "-") for name in globals() if name.startswith("test_")}
    assert grpc and grpc <= tested, sorted(grpc - tested)
