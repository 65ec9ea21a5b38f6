"""The Java ACL-signing client (AclClientRPCHook, keys from the command line) against our
NameServer and broker stub with authentication off: every signed request is answered as an
unsigned one would be. (With accounts configured, issue 19's tests use the same client to check
refusals.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop.clients_common import create_topic
from tests.interop.clusters import StubCluster
from tests.interop.harness_build import JAVA_VERSIONS, JavaBuild
from tests.interop.java_procs import run_java_client


@pytest.mark.parametrize("version", JAVA_VERSIONS)
def test_signed_route_and_sends_accepted_without_auth(version: str, stub_cluster: StubCluster,
                                                      java_builds: dict[str, JavaBuild], tmp_path: Path) -> None:
    topic = f"AclTopic{version.replace('.', '')}"
    create_topic(stub_cluster.namesrv.addr, "DefaultCluster", topic)
    status, lines, stderr = run_java_client(
        java_builds[version], "AclClient",
        ["--namesrv", stub_cluster.namesrv.addr, "--topic", topic, "--count", "2",
         "--access-key", "interopAK", "--secret-key", "interopSK12345"], tmp_path)
    assert status == 0, stderr[-3000:]
    route = [line for line in lines if line["event"] == "route"]
    assert [(r["requestCode"], r["code"]) for r in route] == [(105, 0)], lines
    assert f'0:"{stub_cluster.broker.addr}"' in route[0]["body"], route
    assert [(line["event"], line["code"], line.get("status")) for line in lines if line["event"] != "route"] == \
        [("sent", 0, "SEND_OK")] * 2, lines
