"""The Java ACL-signing client (AclClientRPCHook, keys from the command line) and Java mqadmin
(keys from $ROCKETMQ_HOME/conf/tools.yml) against our NameServer and broker stub.

With authentication off every signed request is answered as an unsigned one would be. With
accounts on (a local cluster from ``mqadmin start --auth``: aclEnable=true on the NameServer and the
broker stub, the stub signing its registrations), the client with valid keys gets its route and
sends; with a wrong secret or an unknown access key the NameServer refuses its route query and the
broker its own request (NO_PERMISSION, the remark naming the class) and Java's producer fails with
"No route info of this topic"; without keys it gets its route (route-read is open unsigned by
default) and the broker refuses the send with NO_PERMISSION. Nothing refused is stored. Java mqadmin signs with the
tools.yml that ``start --auth`` writes, and is refused without it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from remoting.codes import ResponseCode
from tests.interop.clients_common import create_topic
from tests.interop.clusters import AuthCluster, StubCluster
from tests.interop.harness_build import JAVA_VERSIONS, JavaBuild
from tests.interop.java_procs import AdminRunner, AdminRunners, run_java_client

NO_PERMISSION = int(ResponseCode.NO_PERMISSION)


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


@pytest.mark.parametrize("version", JAVA_VERSIONS)
def test_valid_keys_route_and_send_wrong_or_missing_ones_are_refused(
        version: str, auth_cluster: AuthCluster, java_builds: dict[str, JavaBuild], tmp_path: Path) -> None:
    topic = f"AuthTopic{version.replace('.', '')}"

    def client(access_key: str, secret_key: str, count: int) -> list[dict[str, Any]]:
        status, lines, stderr = run_java_client(
            java_builds[version], "AclClient",
            ["--namesrv", auth_cluster.namesrv, "--broker", auth_cluster.broker, "--topic", topic,
             "--count", str(count), "--group", f"acl_{version.replace('.', '')}",
             "--access-key", access_key, "--secret-key", secret_key], tmp_path)
        assert status == 0, stderr[-3000:]
        return lines

    def codes(lines: list[dict[str, Any]]) -> list[tuple[str, int, str | None]]:
        return [(line["event"], line["code"], line.get("status")) for line in lines]

    user = auth_cluster.user
    assert codes(client(user.access_key, user.secret_key, 2)) == \
        [("route", 0, None), ("broker", 0, None)] + [("sent", 0, "SEND_OK")] * 2
    # A wrong secret or an unknown access key: the NameServer refuses the route query and the broker
    # its own request, both with NO_PERMISSION, and Java's producer finds no route.
    for access_key, secret_key in ((user.access_key, "not-the-secret-key"), ("nobodyKey1", "whatever123")):
        lines = client(access_key, secret_key, 1)
        assert codes(lines)[:2] == [("route", NO_PERMISSION, None), ("broker", NO_PERMISSION, None)], lines
        assert lines[0]["remark"].startswith("access denied: request code 105 is route-read"), lines
        assert lines[1]["remark"].startswith("access denied: request code 30 is client"), lines
        assert [line["event"] for line in lines[2:]] == ["send-failed"], lines
        assert "No route info of this topic" in lines[2]["error"], lines
    # No keys: route queries stay open unsigned (aclUnsignedClasses=route-read, the default), but the
    # broker refuses the request and the send, and Java's producer reports the broker's NO_PERMISSION.
    lines = client("", "", 1)
    assert codes(lines)[:2] == [("route", 0, None), ("broker", NO_PERMISSION, None)], lines
    assert lines[1]["remark"].startswith("access denied: request code 30 is client: client needs a request signed"), lines
    assert [(line["event"], line["code"]) for line in lines[2:]] == [("send-failed", NO_PERMISSION)], lines
    assert auth_cluster.stored(topic) == 2, "only the validly signed messages were stored"


# Java mqadmin commands against the cluster with accounts: (command line, what the signed run prints,
# the request code and class the unsigned run is refused for). Placeholders: {ns}, {broker}, {v}.
ADMIN_COMMANDS = [
    ("updateKvConfig -n {ns} -s JavaAuth -k k{v} -v {v}", r"^create or update kv config to namespace success\.$",
     (100, "admin-write")),
    ("getNamesrvConfig -n {ns}", r"^aclEnable\s+=\s+true$", (319, "admin-read")),
    ("updateTopic -n {ns} -b {broker} -t JavaAuthTopic{v} -r 2 -w 2", r"^create topic to {broker} success\.$",
     (17, "admin-write")),
    ("getBrokerConfig -n {ns} -b {broker}", r"^aclEnable\s+=\s+true$", (26, "admin-read")),
]


def _run_allowing_timeouts(runner: AdminRunner, args: list[str], printed: str, attempts: int = 3) -> dict[str, Any]:
    """Run a Java mqadmin command, again (at most ``attempts`` times) when it did not print ``printed``
    because Java's own client timed out.

    A starved machine can make a cold Java admin client exceed its fixed request timeouts (a few seconds
    in 4.9.7), which says nothing about signing; any other outcome is returned at once for the test to judge.
    """
    result = runner.run(*args)
    for _ in range(attempts - 1):
        said = result["stdout"] + result["stderr"]
        if re.search(printed, result["stdout"], re.M) or "timeout" not in said.lower():
            break
        result = runner.run(*args)
    return result


@pytest.mark.parametrize("version", JAVA_VERSIONS)
def test_java_mqadmin_signs_with_the_tools_yml_start_auth_wrote(
        version: str, auth_cluster: AuthCluster, java_builds: dict[str, JavaBuild], java_admin: AdminRunners,
        tmp_path: Path) -> None:
    fill = {"ns": auth_cluster.namesrv, "broker": auth_cluster.broker, "v": version.replace(".", "")}
    (tmp_path / "conf").mkdir()
    shutil.copy(auth_cluster.dir / "conf" / "tools.yml", tmp_path / "conf" / "tools.yml")
    signed_runner = AdminRunner(java_builds[version], tmp_path)
    try:
        for line, printed, (code, cls) in ADMIN_COMMANDS:
            args = line.format(**fill).split()
            unsigned = java_admin[version].run(*args)  # its ROCKETMQ_HOME has no tools.yml
            assert not re.search(printed.format(**fill), unsigned["stdout"], re.M), unsigned
            assert re.search(rf"CODE: 16\s+DESC: access denied: request code {code} is {cls}: {cls} needs a request"
                             r" signed by an admin account", unsigned["stderr"]), unsigned
            signed = _run_allowing_timeouts(signed_runner, args, printed.format(**fill))
            assert re.search(printed.format(**fill), signed["stdout"], re.M), signed
    finally:
        signed_runner.close()
