"""The broker admin commands (topicStatus ... resetOffsetByTime) through the real CLI against a real local
cluster (2 NameServers, 2 broker stubs, ``mqadmin start``), with a client that stays connected where a
command needs consumers or producers online."""

from __future__ import annotations

import json
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import trio

from mqadmin.client import AdminClient, SyncAdminClient
from mqadmin.client import broker_admin as ba
from remoting.acl import Credentials, sign
from remoting.admin_bodies import decode_reset_offsets
from remoting.codec import FrameDecoder, encode
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, request
from remoting.mqjson import loads
from remoting.transport import parse_addr
from tests.mqadmin_procs import cli_env, mqadmin, mqadmin_json, running_cluster

TOPIC = "AdminT"
GROUP = "AdminCG"
PRODUCER_GROUP = "AdminPG"
CLIENT_ID = "127.0.0.1@admin-test"


class Live:
    def __init__(self, env: dict[str, str], started: dict[str, Any]) -> None:
        self.env = env
        self.addr = {p["name"]: p["addr"] for p in started["procs"]}
        self.namesrv = started["namesrvAddr"]
        self.masters = sorted([self.addr["broker-a-0"], self.addr["broker-b-0"]])

    def run(self, *args: str) -> Any:
        return mqadmin(*args, env=self.env)

    def json(self, *args: str) -> Any:
        return mqadmin_json(*args, env=self.env)

    def until(self, check: Any, what: str, timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            got = check()
            if got:
                return got
            assert time.monotonic() < deadline, f"{what} not reached within {timeout} s"
            time.sleep(0.1)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("state")
    env = cli_env(home)
    with running_cluster(home / "mqadmin" / "cluster", "--topics", TOPIC, env=env, use_dir=False) as started:
        yield Live(env, started)


class Client:
    """A consumer of GROUP (subscribed to TOPIC, tag TagA) and a producer of PRODUCER_GROUP, connected to
    every master; a thread collects what the brokers send it unasked. Stopped by the context manager."""

    def __init__(self, addrs: list[str], credentials: Credentials | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        self.credentials = credentials  # signs the heartbeats (brokers with accounts)
        socks = [socket.create_connection(parse_addr(a), timeout=5) for a in addrs]
        self.socks = socks if tls is None else [tls.wrap_socket(s) for s in socks]  # brokers enforcing TLS
        self.unasked: list[RemotingCommand] = []
        self.answered: set[int] = set()
        self.lock = threading.Lock()
        self.io = threading.Lock()  # one thread at a time in a socket (a TLS socket's state is shared)
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._read, args=(s,), daemon=True) for s in self.socks]
        for t in self.threads:
            t.start()

    def _read(self, sock: socket.socket) -> None:
        decoder = FrameDecoder()
        sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                with self.io:
                    data = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            with self.lock:
                for cmd in decoder.feed(data):
                    if cmd.is_response:
                        self.answered.add(cmd.opaque)
                    else:
                        self.unasked.append(cmd)

    def heartbeat(self, topic: str = TOPIC, group: str = GROUP) -> None:
        sub = {"classFilterMode": False, "codeSet": [2598919], "expressionType": "TAG", "subString": "TagA",
               "subVersion": 1, "tagsSet": ["TagA"], "topic": topic}
        body = {"clientID": CLIENT_ID, "producerDataSet": [{"groupName": PRODUCER_GROUP}],
                "consumerDataSet": [{"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
                                     "groupName": group, "messageModel": "CLUSTERING", "subscriptionDataSet": [sub],
                                     "unitMode": False}]}
        for sock in self.socks:
            req = request(RequestCode.HEART_BEAT, body=json.dumps(body).encode(), opaque=1)
            with self.io:
                sock.sendall(encode(req if self.credentials is None else sign(req, self.credentials)))
        deadline = time.monotonic() + 5
        while 1 not in self.answered:
            assert time.monotonic() < deadline, "no heartbeat answer"
            time.sleep(0.02)

    def told(self, code: int) -> list[RemotingCommand]:
        with self.lock:
            return [c for c in self.unasked if c.code == code]

    def close(self) -> None:
        self.stop.set()
        for sock in self.socks:
            sock.close()
        for t in self.threads:
            t.join(5)


@contextmanager
def online(live: Live) -> Iterator[Client]:
    client = Client(live.masters)
    try:
        client.heartbeat()
        yield client
    finally:
        client.close()


def send(live: Live, count: int, topic: str = TOPIC) -> None:
    for i in range(count):
        done = live.run("sendMessage", "-t", topic, "-p", f"m{i}", "-c", "TagA", "--timeout", "15")
        assert done.returncode == 0, done.stderr


def one_line_error(done: Any, code: int, text: str) -> None:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and text in done.stderr and "Traceback" not in done.stderr, done.stderr


# --------------------------------------------------------------------------


def test_topic_status_and_topic_cluster_list(live: Live) -> None:
    send(live, 4)
    status = live.json("topicStatus", "-t", TOPIC)
    assert [(q["brokerName"], q["queueId"]) for q in status["queues"]] == [
        (b, i) for b in ("broker-a", "broker-b") for i in range(8)]
    assert sum(q["maxOffset"] for q in status["queues"]) >= 4 and all(q["minOffset"] == 0 for q in status["queues"])
    assert all((q["lastUpdated"] is None) == (q["maxOffset"] == 0) for q in status["queues"])
    text = live.run("topicStatus", "-t", TOPIC)
    assert text.returncode == 0
    header = text.stdout.splitlines()[0].split()
    assert header == ["#Broker", "Name", "#QID", "#Min", "Offset", "#Max", "Offset", "#Last", "Updated"]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", text.stdout)
    assert re.search(r"^Topic Put TPS: \d+\.\d+(E-?\d+)?$", text.stdout, re.M)
    assert live.run("topicStatus", "-t", TOPIC, "-c", "DefaultCluster").returncode == 0

    assert live.json("topicClusterList", "-t", TOPIC) == {"topic": TOPIC, "clusters": ["DefaultCluster"]}
    assert live.run("topicClusterList", "-t", TOPIC).stdout == "DefaultCluster\n"
    one_line_error(live.run("topicStatus", "-t", "NoSuchTopic"), 1, "TOPIC_NOT_EXIST")
    assert live.run("topicStatus").returncode == 2


def test_the_local_clusters_topics_are_normal_5x_topics(live: Live) -> None:
    """`start --topics` creates what a 5.x operator creates (+message.type=NORMAL): RocketMQ Dashboard's Topic
    page lists only typed topics by default, and the Proxy checks a message's type against its topic's."""
    for addr in live.masters:
        tc = trio.run(ba.topic_config_of, AdminClient([]), addr, TOPIC)
        assert tc is not None and tc.attributes == {"message.type": "NORMAL"}, (addr, tc)


def test_update_topic_perm(live: Live) -> None:
    assert live.json("updateTopic", "-t", "PermT", "-c", "DefaultCluster", "-r", "2", "-w", "2")["brokers"]

    def perms() -> dict[str, int]:
        route = SyncAdminClient(live.namesrv.split(";"), timeout=2).topic_route("PermT")
        return {q.broker_name: q.perm for q in route.queue_datas}

    out = live.json("updateTopicPerm", "-t", "PermT", "-p", "4", "-c", "DefaultCluster")
    assert out["oldPerm"] == 6 and sorted(r["addr"] for r in out["brokers"]) == live.masters
    live.until(lambda: perms() == {"broker-a": 4, "broker-b": 4}, "perm 4 in the route")
    text = live.run("updateTopicPerm", "-t", "PermT", "-p", "6", "-b", live.addr["broker-a-0"])
    assert text.returncode == 0
    assert text.stdout.splitlines()[0] == f"update topic perm from 4 to 6 in {live.addr['broker-a-0']} success."
    assert "TopicConfig [topicName=PermT, readQueueNums=2, writeQueueNums=2, perm=RW-," in text.stdout
    live.until(lambda: perms() == {"broker-a": 6, "broker-b": 4}, "perm 6 on broker-a only")
    same = live.run("updateTopicPerm", "-t", "PermT", "-p", "6", "-b", live.addr["broker-a-0"])
    assert same.returncode == 0 and same.stdout == "new perm equals to the old one!\n"

    assert live.run("updateTopicPerm", "-t", "PermT", "-p", "5", "-c", "DefaultCluster").returncode == 2
    assert live.run("updateTopicPerm", "-t", "PermT", "-p", "6").returncode == 2
    assert live.run("updateTopicPerm", "-t", "PermT", "-p", "6", "-b", "nohost").returncode == 2
    one_line_error(live.run("updateTopicPerm", "-t", "PermT", "-p", "6", "-b", "127.0.0.1:1"), 1, "not a master")


def test_consumers_producers_stats_and_progress(live: Live) -> None:
    with online(live):
        conns = live.json("consumerConnection", "-g", GROUP)
        (conn,) = conns["connections"]
        assert (conn["clientId"], conn["language"], conn["version"], conn["versionDesc"]) == (
            CLIENT_ID, "JAVA", 479, "V5_3_3")
        assert conns["subscriptions"] == [{"topic": TOPIC, "subExpression": "TagA"}]
        assert (conns["consumeType"], conns["messageModel"]) == ("CONSUME_PASSIVELY", "CLUSTERING")
        text = live.run("consumerConnection", "-g", GROUP, "-b", live.addr["broker-b-0"])
        assert text.returncode == 0 and "Below is subscription:" in text.stdout
        assert "ConsumeType: CONSUME_PASSIVELY" in text.stdout and CLIENT_ID in text.stdout

        producers = live.json("producerConnection", "-g", PRODUCER_GROUP, "-t", TOPIC)
        assert [c["clientId"] for c in producers["connections"]] == [CLIENT_ID]
        assert re.search(rf"^0001\s+{re.escape(CLIENT_ID)}\s+127\.0\.0\.1:\d+\s+JAVA\s+V5_3_3",
                         live.run("producerConnection", "-g", PRODUCER_GROUP, "-t", TOPIC).stdout, re.M)

        # messages the group read but did not consume: offsets committed at each queue's start
        send(live, 2)
        consumed = live.json("consumeMessage", "-t", TOPIC, "-g", GROUP)
        assert consumed["messages"]
        for q in consumed["queues"]:
            addr = q["brokerAddr"]
            req = request(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": TOPIC,
                                                               "queueId": q["queueId"], "commitOffset": q["minOffset"]})
            assert trio.run(AdminClient([]).invoke, addr, req).code == ResponseCode.SUCCESS
        progress = live.json("consumerProgress", "-g", GROUP)
        total = sum(q["maxOffset"] - q["minOffset"] for q in consumed["queues"])
        assert progress["diffTotal"] == total and len(progress["queues"]) == 16 and progress["inflightTotal"] == 0
        assert all(q["topic"] == TOPIC and q["diff"] == q["brokerOffset"] - q["consumerOffset"]
                   for q in progress["queues"])
        text = live.run("consumerProgress", "-g", GROUP, "-s", "true")
        assert text.returncode == 0 and "#Client IP" in text.stdout and f"Consume Diff Total: {total}" in text.stdout
        assert re.search(r"^Consume TPS: \d+\.\d\d$", text.stdout, re.M)
        every = live.json("consumerProgress")["groups"]
        mine = next(g for g in every if g["group"] == GROUP)
        assert (mine["count"], mine["version"], mine["type"], mine["model"], mine["diffTotal"]) == (
            1, "V5_3_3", "PUSH", "CLUSTERING", total)

        # statsAll: the brokers sample every 10 s, so the minute window shows the traffic within ~10 s
        def stats_row() -> dict[str, Any] | None:
            rows = live.json("statsAll", "-t", TOPIC)["rows"]
            row = next((r for r in rows if r["consumerGroup"] == GROUP), None)
            # a sample may fall between two of the group's reads: wait for one after the last
            done = row and row["inMsg24Hour"] >= 6 and row["outMsg24Hour"] == len(consumed["messages"])
            return row if done else None

        row = live.until(stats_row, "statsAll counts", timeout=60)
        assert row["inTps"] > 0 and row["accumulation"] == total
        text = live.run("statsAll", "-a")
        header = text.stdout.splitlines()[0].split()
        assert header == ["#Topic", "#Consumer", "Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour",
                          "#OutMsg24Hour"]
        assert TOPIC in text.stdout and "SELF_TEST_TOPIC" not in text.stdout  # -a: active topics only
        assert "NO_CONSUMER" in live.run("statsAll", "-t", "TBW102").stdout
    one_line_error(live.run("consumerConnection", "-g", "NobodyCG"), 1, "not online")
    one_line_error(live.run("producerConnection", "-g", "NobodyPG", "-t", TOPIC), 1, "NobodyPG")


def test_reset_offset_by_time_tells_the_consumers(live: Live) -> None:
    send(live, 2)
    with online(live) as client:
        reset = live.json("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "0")
        assert reset["mode"] == "broker" and reset["force"] is True and reset["timestamp"] == 0
        assert len(reset["offsets"]) == 16 and all(o["offset"] == 0 for o in reset["offsets"])
        told = live.until(lambda: len(client.told(RequestCode.RESET_CONSUMER_CLIENT_OFFSET)) == 2 and
                          client.told(RequestCode.RESET_CONSUMER_CLIENT_OFFSET), "220 from both brokers")
        tables = [decode_reset_offsets(cmd.body) for cmd in told]
        assert sorted(mq.broker_name for t in tables for mq in t) == ["broker-a"] * 8 + ["broker-b"] * 8
        assert all(cmd.ext_fields["group"] == GROUP and cmd.ext_fields["topic"] == TOPIC for cmd in told)
        progress = live.json("consumerProgress", "-g", GROUP)
        assert all(q["consumerOffset"] == 0 for q in progress["queues"])

        text = live.run("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "now")
        assert text.returncode == 0
        assert text.stdout.startswith(f"start reset consumer offset by specified, group[{GROUP}], topic[{TOPIC}], "
                                      "force[true], timestamp(string)[now], timestamp(long)[")
        assert text.stdout.splitlines()[1].split() == ["#brokerName", "#queueId", "#offset"]
        progress = live.json("consumerProgress", "-g", GROUP)
        assert progress["diffTotal"] == 0  # "now": every offset at the end

        busy = next(q for q in progress["queues"] if q["brokerOffset"] > 0)
        broker = live.addr[f"{busy['brokerName']}-0"]
        one = live.run("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "0", "-b", broker, "-q",
                       str(busy["queueId"]), "-o", "1")
        assert one.returncode == 0 and one.stdout.splitlines()[-1] == "reset consumer offset to 1"
        again = next(q for q in live.json("consumerProgress", "-g", GROUP)["queues"]
                     if (q["brokerName"], q["queueId"]) == (busy["brokerName"], busy["queueId"]))
        assert again["consumerOffset"] == 1

    assert live.run("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "yesterday").returncode == 2
    assert live.run("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "0", "-f", "maybe").returncode == 2
    assert live.run("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "0", "-q", "1").returncode == 2
    one_line_error(live.run("resetOffsetByTime", "-g", "NoSuchGroup", "-t", TOPIC, "-s", "0"), 1,
                   "SUBSCRIPTION_GROUP_NOT_EXIST")

    # the reset Java falls back to when a broker needs consumers online: per queue, UPDATE_CONSUMER_OFFSET
    async def old() -> list[ba.Rollback]:
        return await ba.reset_offset_old(AdminClient(live.namesrv.split(";")), TOPIC, GROUP, 0, True)

    rolled = trio.run(old)
    assert len(rolled) == 16 and all(r.rollback_offset == 0 for r in rolled)
    assert all(q["consumerOffset"] == 0 for q in live.json("consumerProgress", "-g", GROUP)["queues"])


def test_update_and_delete_subscription_group(live: Live) -> None:
    created = live.json("updateSubGroup", "-c", "DefaultCluster", "-g", "SubG", "-r", "3", "-o", "true",
                        "-p", '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":9000,"multiplier":3}}',
                        "--attributes", "+k=v")
    cfg = created["config"]
    assert (cfg["groupName"], cfg["retryMaxTimes"], cfg["consumeMessageOrderly"], cfg["consumeBroadcastEnable"],
            cfg["consumeFromMinEnable"], cfg["attributes"]) == ("SubG", 3, True, False, False, {"+k": "v"})
    assert sorted(r["addr"] for r in created["brokers"]) == live.masters and all(r["ok"] for r in created["brokers"])

    def groups(addr: str) -> dict[str, Any]:
        resp = trio.run(AdminClient([]).invoke, addr, request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        return loads(resp.body)["subscriptionGroupTable"]

    for addr in live.masters:
        assert groups(addr)["SubG"]["groupRetryPolicy"] == {
            "exponentialRetryPolicy": {"initial": 1000, "max": 9000, "multiplier": 3}, "type": "EXPONENTIAL"}
    text = live.run("updateSubGroup", "-b", live.addr["broker-a-0"], "-g", "SubG2", "-s", "false")
    assert text.returncode == 0 and text.stdout.splitlines()[0] == f"create subscription group to {live.addr['broker-a-0']} success."
    assert text.stdout.splitlines()[1].startswith("SubscriptionGroupConfig{groupName=SubG2, consumeEnable=false, ")

    deleted = live.run("deleteSubGroup", "-c", "DefaultCluster", "-g", "SubG", "-r", "true")
    assert deleted.returncode == 0
    assert deleted.stdout.count("delete subscription group [SubG] from broker [") == 2
    assert all("SubG" not in groups(addr) for addr in live.masters)
    assert live.run("deleteSubGroup", "-b", live.addr["broker-a-0"], "-g", "SubG2").returncode == 0
    assert "SubG2" not in groups(live.addr["broker-a-0"])

    assert live.run("updateSubGroup", "-c", "DefaultCluster", "-g", "X", "-p", "{nope").returncode == 2
    assert live.run("updateSubGroup", "-c", "DefaultCluster", "-g", "X", "-s", "maybe").returncode == 2
    assert live.run("updateSubGroup", "-c", "DefaultCluster", "-g", "bad name").returncode == 2
    assert live.run("updateSubGroup", "-g", "X").returncode == 2
    one_line_error(live.run("deleteSubGroup", "-c", "Nope", "-g", "X"), 1, "cluster Nope is not known")


def test_get_and_update_broker_config(live: Live) -> None:
    got = live.json("getBrokerConfig", "-c", "DefaultCluster")["brokers"]
    assert sorted(b["addr"] for b in got) == live.masters and all(b["error"] is None for b in got)
    assert {b["config"]["brokerName"] for b in got} == {"broker-a", "broker-b"}
    text = live.run("getBrokerConfig", "-b", live.addr["broker-b-0"])
    assert text.stdout.splitlines()[0] == f"============{live.addr['broker-b-0']}============"
    assert re.search(r"^brokerName {40}=  broker-b$", text.stdout, re.M)
    master = live.run("getBrokerConfig", "-c", "DefaultCluster")
    assert f"============Master: {live.addr['broker-a-0']}============" in master.stdout

    done = live.run("updateBrokerConfig", "-c", "DefaultCluster", "-k", "shortPollingTimeMills", "-v", "1500")
    assert done.returncode == 0 and done.stdout.count("update broker config success, ") == 2
    assert all(b["config"]["shortPollingTimeMills"] == "1500" for b in live.json("getBrokerConfig", "-c", "DefaultCluster")["brokers"])
    back = live.json("updateBrokerConfig", "-b", live.addr["broker-a-0"], "-k", "shortPollingTimeMills", "-v", "1000")
    assert [r["ok"] for r in back["results"]] == [True]
    refused = live.run("updateBrokerConfig", "-b", live.addr["broker-a-0"], "-k", "listenPort", "-v", "1")
    # the one broker named (-b) refusing is the command's error: one line on stderr
    assert refused.returncode == 1 and "NO_PERMISSION" in refused.stderr and refused.stderr.count("\n") == 1
    assert live.run("getBrokerConfig").returncode == 2
    assert live.run("getBrokerConfig", "-b", "no-port").returncode == 2
    dead = live.run("getBrokerConfig", "-b", "127.0.0.1:1", "--timeout", "1")
    assert dead.returncode == 1 and dead.stderr == "mqadmin: cannot connect to 127.0.0.1:1: Connection refused\n"


def test_cluster_rt(live: Live) -> None:
    out = live.run("clusterRT", "-a", "3", "-i", "0", "--count", "1", "--json")
    rows = [json.loads(line) for line in out.stdout.splitlines()]  # one JSON object per line
    assert sorted((r["cluster"], r["brokerName"], r["successCount"], r["failCount"]) for r in rows) == [
        ("DefaultCluster", "broker-a", 3, 0), ("DefaultCluster", "broker-b", 3, 0)]
    assert all(r["rt"] >= 0 for r in rows)
    text = live.run("clusterRT", "-a", "2", "-i", "0", "--count", "2")
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["#Cluster", "Name", "#Broker", "Name", "#RT", "#successCount", "#failCount"]
    assert len(lines) == 5 and all(re.match(r"DefaultCluster\s+broker-[ab]\s+\d+\.\d\d\s+2\s+0", x) for x in lines[1:])
    tlog = live.run("clusterRT", "-a", "1", "-i", "0", "--count", "1", "-p", "true", "-m", "room1")
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\|room1\|DefaultCluster\|broker-[ab]\|\d+", x)
               for x in tlog.stdout.splitlines())
    one_line_error(live.run("clusterRT", "-c", "Nope", "-a", "1", "--count", "1"), 1, "cluster [Nope] not exist")
