"""``mqadmin start --auth``: a local cluster with accounts, and every mqadmin command against it.

The cluster (one NameServer, a master and its slave) is started as a user starts it, with no
``--dir``, so the commands find it, and its keys, without ``-n`` and without key options. Every
command of the CLI walk that talks to servers (it takes ``-n``) runs against it and must succeed:
none may be refused for want of a signature. Raw clients show the refusals: unsigned, wrongly
signed, and the normal account's requests for admin writes.
"""

from __future__ import annotations

import json
import os
import ssl
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import typer
import yaml

from mqadmin.cli import app
from broker_stub.replication import replicate_request
from remoting import requests as rq
from remoting.acl import Credentials
from remoting.bodies import DataVersion, TopicConfig
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, request
from remoting.transport import connect
from tests.mqadmin_procs import cli_env, mqadmin, mqadmin_script, running_cluster
from tests.test_broker_stub import create_topic, fault
from tests.test_mqadmin_broker_admin import Client

TOPIC = "AuthT"
GROUP = "AuthCG"
PRODUCER_GROUP = "AdminPG"  # the group test_mqadmin_broker_admin.Client heartbeats as a producer


class AuthCluster:
    def __init__(self, env: dict[str, str], started: dict[str, Any], state_dir: Path) -> None:
        self.env = env
        self.started = started
        self.dir = state_dir
        self.addr = {p["name"]: p["addr"] for p in started["procs"]}
        self.namesrv = started["namesrvAddr"]
        self.master = self.addr["broker-a-0"]
        keys = yaml.safe_load((state_dir / "conf" / "plain_acl.yml").read_text())["accounts"]
        self.keys = {a["accessKey"]: Credentials(a["accessKey"], str(a["secretKey"])) for a in keys}
        self.admin, self.user = self.keys["localAdmin"], self.keys["localUser"]

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return mqadmin(*args, env=dict(self.env, **env))


@pytest.fixture(scope="module")
def auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthCluster]:
    home = tmp_path_factory.mktemp("state")
    env = cli_env(home)
    state_dir = home / "mqadmin" / "cluster"
    with running_cluster(state_dir, "--auth", "--namesrvs", "1", "--brokers", "1", "--slaves", "1", "--topics", TOPIC,
                         env=env, use_dir=False) as started:
        yield AuthCluster(env, started, state_dir)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_keys_are_private_and_only_in_their_files(auth: AuthCluster) -> None:
    conf = auth.dir / "conf"
    assert _mode(conf) == 0o700
    assert _mode(conf / "plain_acl.yml") == 0o600 and _mode(conf / "tools.yml") == 0o600
    brokers = [Path(p["config"]) for p in auth.started["procs"] if p["kind"] == "broker"]
    assert len(brokers) == 2 and all(_mode(b) == 0o600 for b in brokers)
    assert all(f"secretKey={auth.admin.secret_key}" in b.read_text() for b in brokers)  # they sign as localAdmin
    tools = yaml.safe_load((conf / "tools.yml").read_text())
    assert tools == {"accessKey": "localAdmin", "secretKey": auth.admin.secret_key}
    assert auth.admin.secret_key != auth.user.secret_key and len(auth.admin.secret_key) >= 40
    status = auth.run("status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["auth"] is True
    for text in (status.stdout, (auth.dir / "cluster.json").read_text()):
        assert auth.admin.secret_key not in text and auth.user.secret_key not in text
    for proc in auth.started["procs"]:
        assert auth.admin.secret_key not in Path(proc["log"]).read_text()


def _server_commands() -> set[str]:
    """The commands of the CLI walk (tests/test_cli_walk.py) that talk to servers: they take -n."""
    found = set()
    for name, cmd in typer.main.get_command(app).commands.items():  # type: ignore[attr-defined]
        if any("-n" in getattr(p, "opts", ()) or "--namesrv" in getattr(p, "opts", ()) for p in cmd.params):
            found.add(name)
    return found


def _invocations(auth: AuthCluster) -> list[tuple[str, ...]]:
    """One or more invocations of every server command, in an order where each has what it needs."""
    m = auth.master
    return [
        ("clusterList",), ("topicList",), ("topicRoute", "-t", TOPIC), ("topicClusterList", "-t", TOPIC),
        ("sendMessage", "-t", TOPIC, "-p", "signed", "-c", "TagA"),
        ("consumeMessage", "-t", TOPIC, "-c", "1"),
        ("topicStatus", "-t", TOPIC), ("statsAll", "-t", TOPIC), ("brokerStatus", "-b", m),
        ("updateTopic", "-t", "AuthT2", "-c", "DefaultCluster", "-r", "2", "-w", "2"),
        ("updateTopicPerm", "-t", "AuthT2", "-p", "4", "-c", "DefaultCluster"),
        ("deleteTopic", "-t", "AuthT2", "-c", "DefaultCluster"),
        ("updateSubGroup", "-g", GROUP, "-c", "DefaultCluster"),
        ("consumerConnection", "-g", GROUP), ("producerConnection", "-g", PRODUCER_GROUP, "-t", TOPIC),
        ("consumerProgress", "-g", GROUP),
        ("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "now"),
        ("updateSubGroup", "-g", "AuthCG2", "-b", m), ("deleteSubGroup", "-g", "AuthCG2", "-b", m),
        ("getBrokerConfig", "-b", m), ("updateBrokerConfig", "-k", "defaultTopicQueueNums", "-v", "4", "-b", m),
        ("getNamesrvConfig",), ("updateNamesrvConfig", "-k", "brokerChannelExpiredTime", "-v", "120000"),
        ("updateKvConfig", "-s", "authNs", "-k", "k", "-v", "v"), ("getKvConfig", "-s", "authNs", "-k", "k"),
        ("deleteKvConfig", "-s", "authNs", "-k", "k"),
        ("wipeWritePerm", "-b", "broker-a"), ("addWritePerm", "-b", "broker-a"),
        ("brokerFault", "-b", "broker-a", "--latency", "1"), ("brokerFault", "-b", "broker-a", "--clear"),
        ("clusterRT", "-a", "1", "-i", "0", "--count", "1"),
        ("watch", "--once"),
        ("fanout", "--engine", "multiprocessing", "--workers", "1", "--producers", "2", "--topics", "1",
         "--duration", "2", "--rate", "2", "--start-delay", "0.5", "--consumers", "1", "--drain", "1", "-q", "--json"),
    ]


def run_every_server_command(cluster: AuthCluster, tls: ssl.SSLContext | None = None) -> None:
    """Every command of the CLI walk that talks to servers, against ``cluster``, with no key or TLS
    option: none may fail or be refused. A consumer (over ``tls``) stays connected for the connection
    commands."""
    invocations = _invocations(cluster)
    assert {i[0] for i in invocations} == _server_commands(), "a command that talks to servers is not run here"
    consumer = Client([cluster.master], credentials=cluster.user, tls=tls)  # online: the connection commands need one
    try:
        consumer.heartbeat(topic=TOPIC, group=GROUP)
        for args in invocations:
            done = cluster.run(*args, "--timeout", "15") if args[0] != "fanout" else cluster.run(*args)
            said = done.stdout + done.stderr
            assert done.returncode == 0 and "NO_PERMISSION" not in said and "access denied" not in said, (args, said)
            assert "handshake" not in said and "closed by peer" not in said, (args, said)
            if args[0] == "fanout":  # simulated producers and consumers in worker processes, signing too
                run = json.loads(done.stdout)
                assert run["sends"]["total"] > 0 and run["sends"]["outcomes"]["ok"] == run["sends"]["total"], run
                assert run["consumers"]["consumptions"] >= run["sends"]["total"], run["consumers"]
    finally:
        consumer.close()


def test_every_server_command_works_on_the_auth_cluster_without_key_options(auth: AuthCluster) -> None:
    run_every_server_command(auth)


def _refused(resp: RemotingCommand, cls: str) -> None:
    assert resp.code == ResponseCode.NO_PERMISSION and cls in (resp.remark or ""), (resp.code, resp.remark)


async def _ask(addr: str, req: RemotingCommand, credentials: Credentials | None) -> RemotingCommand:
    async with connect(addr, credentials=credentials) as c:
        return await c.invoke(req)


def test_the_issue_attacks_are_refused_on_the_auth_cluster(auth: AuthCluster) -> None:
    """Issue 19's attacks on routing and on the brokers' own requests, against ``start --auth``: refused
    unsigned, wrongly signed and signed by the normal account; the admin's signed requests go through."""
    wrong = Credentials(auth.admin.access_key, auth.admin.secret_key[::-1])
    slave = auth.addr["broker-a-1"]
    hijack = rq.register_broker(cluster="DefaultCluster", broker_name="broker-a", broker_addr="127.0.0.1:6666",
                                broker_id=0, topics=[TopicConfig(TOPIC, 4, 4, 6)], data_version=DataVersion(9, 1))
    unregister = rq.unregister_broker(cluster="DefaultCluster", broker_name="broker-a", broker_addr=auth.master,
                                      broker_id=0)
    namesrv_attacks = {
        "admin-write": [rq.put_kv("authNs", "x", "y"), rq.update_namesrv_config({"brokerChannelExpiredTime": "1"}),
                        rq.update_namesrv_config({"maxBrokers": "1"}), rq.wipe_write_perm("broker-a")],
        "broker-control": [unregister, hijack],
    }
    broker_attacks = {
        "admin-write": [create_topic("Refused", queues=1), fault("hang"), replicate_request([(TOPIC, 0, 0)]),
                        request(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=2\n"),
                        request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": TOPIC})],
        "admin-read": [request(RequestCode.GET_BROKER_CONFIG)],
    }

    async def main() -> None:
        for who in (None, wrong, auth.user):
            for addr, attacks in ((auth.namesrv, namesrv_attacks), (auth.master, broker_attacks)):
                for cls, requests in attacks.items():
                    for req in requests:
                        _refused(await _ask(addr, req, who), cls)
        _refused(await _ask(auth.namesrv, rq.get_kv("authNs", "x"), None), "admin-read")
        # nothing changed: broker-a is still routed at its own address, writable, and the slave still copies it
        route = await _ask(auth.namesrv, rq.get_route(TOPIC), None)  # route-read stays open unsigned
        assert route.code == ResponseCode.SUCCESS and auth.master.encode() in route.body and b"6666" not in route.body
        assert b'"perm":6' in route.body
        config = (await _ask(auth.master, request(RequestCode.GET_BROKER_CONFIG), auth.admin)).body.decode()
        assert "brokerPermission=6" in config
        info = (await _ask(slave, request(RequestCode.GET_BROKER_RUNTIME_INFO), auth.admin)).code
        assert info == ResponseCode.SUCCESS
        # the admin's signature opens admin writes; the floors still keep routing up
        assert (await _ask(auth.namesrv, rq.put_kv("authNs", "x", "y"), auth.admin)).code == ResponseCode.SUCCESS
        assert (await _ask(auth.master, create_topic("Allowed", queues=1), auth.admin)).code == ResponseCode.SUCCESS
        floor = await _ask(auth.namesrv, rq.update_namesrv_config({"brokerChannelExpiredTime": "1"}), auth.admin)
        assert floor.code == ResponseCode.SYSTEM_ERROR and "brokerChannelExpiredTime" in (floor.remark or "")

    trio.run(main)


def test_key_options_environment_and_tools_yml(auth: AuthCluster, tmp_path: Path) -> None:
    write = ("updateKvConfig", "-s", "authNs", "-k", "k2", "-v", "v")
    # the local cluster named with -n is still the local cluster: its keys
    assert auth.run(*write, "-n", auth.namesrv).returncode == 0
    # keys given win over the local cluster's: a normal account is refused an admin write
    user = auth.run(*write, "--access-key", auth.user.access_key, "--secret-key", auth.user.secret_key)
    assert user.returncode == 1 and "NO_PERMISSION" in user.stdout and "admin-write" in user.stdout, user
    wrong = auth.run(*write, "--access-key", "localAdmin", "--secret-key", "not-the-secret")
    assert wrong.returncode == 1 and "signature does not match" in wrong.stdout, wrong
    half = auth.run(*write, "--access-key", "localAdmin")
    assert half.returncode == 2 and "--access-key/--secret-key" in half.stderr and half.stderr.count("\n") == 1
    # elsewhere (no local cluster in this state home): unsigned unless keys come from somewhere
    elsewhere = cli_env(tmp_path / "empty", NAMESRV_ADDR=auth.namesrv)
    refused = mqadmin(*write, env=elsewhere)
    assert refused.returncode == 1 and "NO_PERMISSION" in refused.stdout
    by_env = dict(elsewhere, ROCKETMQ_ACCESS_KEY="localAdmin", ROCKETMQ_SECRET_KEY=auth.admin.secret_key)
    assert mqadmin(*write, env=by_env).returncode == 0
    # Apache's place for them: $ROCKETMQ_HOME/conf/tools.yml (the cluster's state dir has one)
    assert mqadmin(*write, env=dict(elsewhere, ROCKETMQ_HOME=str(auth.dir))).returncode == 0
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "tools.yml").write_text("accessKey: localAdmin\n")
    bad = mqadmin(*write, env=dict(elsewhere, ROCKETMQ_HOME=str(home)))
    assert bad.returncode == 1 and "tools.yml: an access key without a secret key" in bad.stderr, bad.stderr
    os.remove(home / "conf" / "tools.yml")
    assert mqadmin(*write, env=dict(elsewhere, ROCKETMQ_HOME=str(home))).returncode == 1  # no file: unsigned


def test_unsigned_requests_to_the_auth_cluster_on_purpose(auth: AuthCluster) -> None:
    """Issue 29, item 9: what a client without keys gets, without emptying XDG_STATE_HOME: --unsigned
    (or $MQADMIN_UNSIGNED=1) drops the local cluster's keys; the console script as a user runs it."""
    write = ("updateKvConfig", "-s", "authNs", "-k", "unsigned", "-v", "v")
    refused = mqadmin_script(*write, "--unsigned", env=auth.env)
    assert refused.returncode == 1, refused.stderr
    assert "NO_PERMISSION" in refused.stdout and "admin-write" in refused.stdout, refused.stdout
    assert refused.stderr == f"mqadmin: 1 of 1 NameServer failed: {auth.namesrv}\n"
    by_env = mqadmin_script("getNamesrvConfig", env=dict(auth.env, MQADMIN_UNSIGNED="1"))
    assert by_env.returncode == 1 and "NO_PERMISSION" in by_env.stdout and "admin-read" in by_env.stdout, by_env
    route = mqadmin_script("topicRoute", "-t", TOPIC, "--unsigned", env=auth.env)  # route-read stays open
    assert route.returncode == 0 and json.loads(route.stdout)["brokerDatas"], route.stderr
    assert auth.run(*write).returncode == 0  # without the option: signed with the cluster's admin keys
    both = auth.run(*write, "--unsigned", "--access-key", "localAdmin", "--secret-key", auth.admin.secret_key)
    assert both.returncode == 2 and both.stderr.startswith("mqadmin: Invalid value for --unsigned: "), both.stderr


AUTH_SCENARIO = """\
name: auth
description: a cluster with accounts; producers and consumers sign as the normal account, actions as the admin
duration: 8
cluster:
  namesrvs: 1
  brokers: 2
  queues: 2
  register_period_ms: 500
  auth: true
load:
  producers: 2
  rate: 10
  duration: 6
  poll_interval: 0.5
consumers:
  name: cg
  count: 1
  consume_from: first_offset
  poll_interval: 0.5
  heartbeat_interval: 1
  rebalance_interval: 2
  persist_interval: 0.5
timeline:
  - at: 2
    wipe_write_perm: broker-a
    label: wiped
  - at: 4
    add_write_perm: broker-a
  - at: 4.5
    create_topic: AuthScnLater
expect:
  - route_excludes: broker-a
    after: wiped
    within: 0.5
  - send_success_rate: 1.0
  - all_consumed_within: 5
"""


def run_auth_scenario(tmp_path: Path, text: str = AUTH_SCENARIO) -> str:
    """Run a scenario whose cluster has accounts; every action, verdict and process must pass, and
    nobody may be refused. Returns the processes' logs."""
    from mqadmin.scenario import runner, schema
    from tests.test_scenario_run import cluster_procs

    scn = schema.parse(text, "auth.yaml")
    assert scn.cluster.auth is True
    result = runner.run(scn, base_dir=tmp_path, keep_dir=True)
    assert cluster_procs(tmp_path) == []
    assert all(a.ok for a in result.actions), [a.detail for a in result.actions]
    assert result.passed, [f"{v.index}: {v.measured_text} {v.detail}" for v in result.verdicts]
    assert len(result.records) > 50 and result.consumers is not None and result.consumers.records
    assert result.state_dir is not None
    logs = "".join(p.read_text() for p in Path(result.state_dir).glob("*/*.log"))
    assert "refused request code" not in logs  # nobody was refused ...
    assert logs.count("access: 2 accounts (1 admin)") == 3  # ... by the NameServer and both brokers, checking accounts
    return logs


def test_scenario_with_cluster_auth(tmp_path: Path) -> None:
    run_auth_scenario(tmp_path)
