"""The Java ACL-signing client (AclClientRPCHook, keys from the command line) and Java mqadmin
(keys from $ROCKETMQ_HOME/conf/tools.yml) against our NameServer and broker stub.

With authentication off every signed request is answered as an unsigned one would be. With
accounts on (a local cluster from ``mqadmin start --auth``: aclEnable=true on the NameServer and the
broker stub, the stub signing its registrations), the client with valid keys gets its route and
sends, and with a wrong secret or an unknown access key it is refused and nothing is stored; Java
mqadmin signs with the tools.yml that ``start --auth`` writes, and is refused without it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
import yaml

from remoting.acl import Credentials
from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from remoting.transport import connect
from tests.interop.clients_common import create_topic
from tests.interop.clusters import StubCluster
from tests.interop.harness_build import JAVA_VERSIONS, JavaBuild
from tests.interop.java_procs import AdminRunner, AdminRunners, run_java_client
from tests.mqadmin_procs import cli_env, running_cluster

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


@dataclass
class AuthCluster:
    """A local cluster with accounts, started by our mqadmin, and its keys."""

    dir: Path
    namesrv: str
    broker: str
    admin: Credentials
    user: Credentials


@pytest.fixture(scope="module")
def auth_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthCluster]:
    state = tmp_path_factory.mktemp("auth-cluster")
    topics = ",".join(f"AuthTopic{v.replace('.', '')}" for v in JAVA_VERSIONS)
    env = cli_env(state / "xdg")
    with running_cluster(state, "--auth", "--namesrvs", "1", "--brokers", "1", "--topics", topics, env=env) as started:
        accounts = yaml.safe_load((state / "conf" / "plain_acl.yml").read_text())["accounts"]
        keys = {a["accessKey"]: Credentials(a["accessKey"], str(a["secretKey"])) for a in accounts}
        broker = next(p["addr"] for p in started["procs"] if p["kind"] == "broker")
        yield AuthCluster(state, started["namesrvAddr"], broker, keys["localAdmin"], keys["localUser"])


def _stored(cluster: AuthCluster, topic: str) -> int:
    async def count() -> int:
        async with connect(cluster.broker, credentials=cluster.admin) as client:
            total = 0
            for queue in range(8):
                resp = await client.invoke(request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue}))
                assert resp.code == ResponseCode.SUCCESS, resp
                total += int(resp.ext("offset") or 0)
            return total

    return trio.run(count)


@pytest.mark.parametrize("version", JAVA_VERSIONS)
def test_valid_keys_route_and_send_wrong_ones_are_refused(version: str, auth_cluster: AuthCluster,
                                                          java_builds: dict[str, JavaBuild], tmp_path: Path) -> None:
    topic = f"AuthTopic{version.replace('.', '')}"

    def client(access_key: str, secret_key: str, count: int) -> list[tuple[str, int, str | None]]:
        status, lines, stderr = run_java_client(
            java_builds[version], "AclClient",
            ["--namesrv", auth_cluster.namesrv, "--topic", topic, "--count", str(count), "--group", f"acl_{version.replace('.', '')}",
             "--access-key", access_key, "--secret-key", secret_key], tmp_path)
        assert status == 0, stderr[-3000:]
        return [(line["event"], line["code"], line.get("status")) for line in lines]

    user = auth_cluster.user
    assert client(user.access_key, user.secret_key, 2) == [("route", 0, None)] + [("sent", 0, "SEND_OK")] * 2
    # a wrong secret: the NameServer refuses the route query, and the producer cannot send
    wrong = client(user.access_key, "not-the-secret-key", 1)
    assert wrong[0] == ("route", NO_PERMISSION, None) and [e for e, _, _ in wrong[1:]] == ["send-failed"], wrong
    unknown = client("nobodyKey1", "whatever123", 1)
    assert unknown[0] == ("route", NO_PERMISSION, None) and [e for e, _, _ in unknown[1:]] == ["send-failed"], unknown
    assert _stored(auth_cluster, topic) == 2, "only the validly signed messages were stored"


@pytest.mark.parametrize("version", JAVA_VERSIONS)
def test_java_mqadmin_signs_with_the_tools_yml_start_auth_wrote(
        version: str, auth_cluster: AuthCluster, java_builds: dict[str, JavaBuild], java_admin: AdminRunners,
        tmp_path: Path) -> None:
    args = ("updateKvConfig", "-n", auth_cluster.namesrv, "-s", "JavaAuth", "-k", "k", "-v", version)
    unsigned = java_admin[version].run(*args)  # its ROCKETMQ_HOME has no tools.yml
    assert "success" not in unsigned["stdout"] and "NO_PERMISSION" in unsigned["stdout"] + unsigned["stderr"], unsigned
    (tmp_path / "conf").mkdir()
    shutil.copy(auth_cluster.dir / "conf" / "tools.yml", tmp_path / "conf" / "tools.yml")
    runner = AdminRunner(java_builds[version], tmp_path)
    try:
        signed = runner.run(*args)
    finally:
        runner.close()
    assert "create or update kv config to namespace success." in signed["stdout"], signed
