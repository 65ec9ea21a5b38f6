"""The mqadmin CLI against a real NameServer process (brokers faked by registrations)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import trio

from remoting import requests as rq
from remoting.bodies import DataVersion, TopicConfig
from remoting.transport import RemotingClient, connect
from tests.mqadmin_procs import cli_env
from tests.mqadmin_procs import mqadmin as run_cli
from tests.procs import NamesrvProcess


async def mqadmin(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """The CLI's entry code, in a worker thread (it runs its own trio loop)."""
    done = await trio.to_thread.run_sync(functools.partial(run_cli, *args, env=env if env is not None else cli_env()))
    return done.returncode, done.stdout, done.stderr


async def fake_broker(c: RemotingClient, name: str, addr: str, broker_id: int = 0) -> None:
    topics = [TopicConfig("TBW102", 8, 8, 7), TopicConfig("TopicA", 4, 4, 6)]
    resp = await c.invoke(
        rq.register_broker(cluster="DefaultCluster", broker_name=name, broker_addr=addr, broker_id=broker_id,
                           topics=topics, data_version=DataVersion(1, 1))
    )
    assert resp.code == 0


async def test_route_and_topic_list(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        await fake_broker(c, "broker-a", "127.0.0.1:10911")
        await fake_broker(c, "broker-a", "127.0.0.1:10921", 1)
        rc, stdout, _ = await mqadmin("topicRoute", "-t", "TopicA", "-n", namesrv.addr)
        assert rc == 0
        route = json.loads(stdout)
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"}
        assert route["queueDatas"][0]["writeQueueNums"] == 4
        rc, stdout, _ = await mqadmin("topicRoute", "-t", "TopicA", "-l", "-n", namesrv.addr)
        assert rc == 0 and "broker-a" in stdout and "{0=127.0.0.1:10911, 1=127.0.0.1:10921}" in stdout
        rc, stdout, _ = await mqadmin("topicList", "--json", "-n", namesrv.addr)
        assert rc == 0 and json.loads(stdout) == {"topicList": ["TBW102", "TopicA"]}


async def test_cluster_list_shows_unreachable_broker(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        await fake_broker(c, "broker-a", "127.0.0.1:1")  # nothing listens there
        rc, stdout, stderr = await mqadmin("clusterList", "--json", "--timeout", "5", "-n", namesrv.addr)
        assert rc == 1 and stderr == "mqadmin: 1 of 1 broker failed: 127.0.0.1:1\n", stderr  # a health check
        (row,) = json.loads(stdout)["brokers"]
        assert row["cluster"] == "DefaultCluster" and row["brokerName"] == "broker-a" and row["brokerId"] == 0
        assert row["reachable"] is False and row["error"] == "Connection refused"
        assert row["version"] is None and row["inTps"] is None and row["activated"] is None
        rc, stdout, stderr = await mqadmin("clusterList", "-n", namesrv.addr, "--timeout", "5")
        assert rc == 1 and stderr == "mqadmin: 1 of 1 broker failed: 127.0.0.1:1\n"  # a row, not a stack trace
        line = next(line for line in stdout.splitlines() if "broker-a" in line)
        assert "127.0.0.1:1" in line and line.rstrip().endswith("no answer: Connection refused")


async def test_kv_commands_go_to_every_namesrv(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    a, b = start_namesrv("a"), start_namesrv("b")
    both = f"{a.addr};{b.addr}"
    rc, stdout, _ = await mqadmin("updateKvConfig", "-s", "ns", "-k", "k", "-v", "v1", "-n", both)
    assert rc == 0 and stdout.count("success") == 2
    for addr in (a.addr, b.addr):
        rc, stdout, _ = await mqadmin("getKvConfig", "-s", "ns", "-k", "k", "--json", "-n", addr)
        assert rc == 0 and json.loads(stdout) == {"namespace": "ns", "table": {"k": "v1"}}
    rc, _, _ = await mqadmin("deleteKvConfig", "-s", "ns", "-k", "k", "-n", both)
    assert rc == 0
    rc, _, stderr = await mqadmin("getKvConfig", "-s", "ns", "-k", "k", "-n", a.addr)
    assert rc == 1 and stderr.strip() == f"mqadmin: {a.addr}: get kv ns/k failed: QUERY_NOT_FOUND (No config item, Namespace: ns Key: k)"


async def test_perm_commands_report_each_namesrv(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    a = start_namesrv("a")
    async with connect(a.addr) as c:
        await fake_broker(c, "broker-a", "127.0.0.1:10911")
        rc, stdout, _ = await mqadmin("wipeWritePerm", "-b", "broker-a", "-n", f"{a.addr};127.0.0.1:1", "--timeout", "5")
        assert rc == 1  # one NameServer failed
        assert f"wipe write perm of broker[broker-a] in name server[{a.addr}] OK, 2" in stdout
        assert "127.0.0.1:1: cannot connect: Connection refused" in stdout.splitlines()  # ADDR: what went wrong
        rc, stdout, _ = await mqadmin("addWritePerm", "-b", "broker-a", "-n", a.addr)
        assert rc == 0 and "OK, 2" in stdout


async def test_namesrv_config_commands(namesrv: NamesrvProcess) -> None:
    rc, stdout, _ = await mqadmin("updateNamesrvConfig", "-k", "enableTopicList", "-v", "false", "-n", namesrv.addr)
    assert rc == 0 and "success" in stdout
    rc, stdout, _ = await mqadmin("getNamesrvConfig", "--json", "-n", namesrv.addr)
    assert rc == 0 and json.loads(stdout)[namesrv.addr]["enableTopicList"] == "false"
    rc, stdout, _ = await mqadmin("updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/x", "-n", namesrv.addr)
    assert rc == 1 and "NO_PERMISSION" in stdout


async def test_errors_are_one_line(tmp_path: Path) -> None:
    rc, _, stderr = await mqadmin("topicRoute", "-t", "T", "-n", "127.0.0.1:1", "--timeout", "1")
    assert rc == 1 and stderr == "mqadmin: cannot connect to 127.0.0.1:1: Connection refused\n"
    rc, _, stderr = await mqadmin("topicRoute", "-t", "T", "-n", "not-an-address")
    assert rc == 2 and stderr == "mqadmin: Invalid value for -n: not a host:port address: 'not-an-address' has no port (see mqadmin topicRoute -h)\n"
    rc, _, stderr = await mqadmin("topicRoute", "-n", "127.0.0.1:1")
    assert rc == 2 and stderr.count("\n") == 1 and "--topic" in stderr
    rc, _, stderr = await mqadmin("topicRoute", "-t", "T", env=cli_env(tmp_path))  # no -n, no env, no cluster
    assert rc == 1 and "NAMESRV_ADDR" in stderr


async def test_unknown_topic(namesrv: NamesrvProcess) -> None:
    rc, stdout, stderr = await mqadmin("topicRoute", "-t", "Nope", "-n", namesrv.addr)
    assert rc == 1 and stdout == ""
    assert stderr.startswith(f"mqadmin: {namesrv.addr}: route of topic Nope failed: TOPIC_NOT_EXIST (No topic route info")


async def test_watch_shows_where_namesrvs_disagree(start_namesrv) -> None:  # type: ignore[no-untyped-def]
    a, b = start_namesrv("a"), start_namesrv("b")
    async with connect(a.addr) as ca, connect(b.addr) as cb, connect(a.addr) as only_a:
        await fake_broker(ca, "broker-a", "127.0.0.1:10911")
        await fake_broker(cb, "broker-a", "127.0.0.1:10911")
        await fake_broker(only_a, "broker-b", "127.0.0.1:10931")  # partitioned from b
        rc, stdout, stderr = await mqadmin("watch", "--once", "--json", "-n", f"{a.addr};{b.addr}")
        assert rc == 0, stderr
        snap = json.loads(stdout)
        rows = {r["broker"]: r for r in snap["brokers"]}
        assert rows["broker-a"]["agree"] and rows["broker-a"]["seenBy"] == {a.addr: True, b.addr: True}
        assert not rows["broker-b"]["agree"] and rows["broker-b"]["seenBy"] == {a.addr: True, b.addr: False}
        topics = {t["topic"]: t for t in snap["topics"]}
        assert not topics["TopicA"]["agree"]
        assert topics["TopicA"]["routes"][a.addr] == ["broker-a:RW-:4", "broker-b:RW-:4"]
        assert topics["TopicA"]["routes"][b.addr] == ["broker-a:RW-:4"]
        rc, stdout, _ = await mqadmin("watch", "--once", "-n", f"{a.addr};{b.addr}")
        assert rc == 0 and "absent" in stdout and "alive" in stdout
    # One NameServer down: it shows as an error, the other still answers.
    b.kill()
    rc, stdout, stderr = await mqadmin("watch", "--once", "--json", "--timeout", "5", "-n", f"{a.addr};{b.addr}")
    assert rc == 1 and b.addr in json.loads(stdout)["errors"]  # a health check: a silent NameServer fails it
    assert stderr.count("\n") == 1 and b.addr in stderr
