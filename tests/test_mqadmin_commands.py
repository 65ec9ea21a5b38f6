"""Every mqadmin command against one real local cluster (2 NameServers, 2 broker stubs).

The cluster is started the way a user starts it, ``mqadmin start`` with no
``--dir`` (its state dir comes from a private $XDG_STATE_HOME), so commands
run without ``-n`` and without $NAMESRV_ADDR find it. Module-scoped to keep
the suite fast; tests that change shared state undo it.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from mqadmin.cli import app
from mqadmin.client import SyncAdminClient
from mqadmin.client.errors import NotFound
from remoting.codes import RequestCode
from remoting.command import request
from tests.mqadmin_procs import cli_env, mqadmin, mqadmin_json, mqadmin_on_terminal, running_cluster

APACHE_COLUMNS = ["#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)",
                  "#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE", "#ACTIVATED"]
MSG_ID = re.compile(r"^[0-9A-F]{32}$")


class Cluster:
    def __init__(self, env: dict[str, str], started: dict[str, Any]) -> None:
        self.env = env
        self.started = started
        self.addr = {p["name"]: p["addr"] for p in started["procs"]}
        self.namesrvs = [self.addr["namesrv-0"], self.addr["namesrv-1"]]

    def run(self, *args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
        return mqadmin(*args, env=dict(self.env, COLUMNS=str(columns)))

    def json(self, *args: str) -> Any:
        return mqadmin_json(*args, env=self.env)

    def wait_route(self, topic: str, check: Any, timeout: float = 10.0) -> None:
        """Until ``check(route or None)`` holds on every NameServer (brokers re-register asynchronously)."""
        deadline = time.monotonic() + timeout
        while True:
            ok = True
            for ns in self.namesrvs:
                try:
                    route = SyncAdminClient([ns], timeout=5).topic_route(topic)
                except NotFound:
                    route = None
                ok = ok and check(route)
            if ok:
                return
            assert time.monotonic() < deadline, f"route of {topic} did not settle"
            time.sleep(0.05)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    home = tmp_path_factory.mktemp("state")
    env = cli_env(home)
    with running_cluster(home / "mqadmin" / "cluster", "--topics", "t1", env=env, use_dir=False) as started:
        yield Cluster(env, started)


def test_help_on_every_command() -> None:
    runner = CliRunner()
    group = typer.main.get_command(app)
    names = sorted(group.commands)  # type: ignore[attr-defined]
    assert {"clusterList", "topicRoute", "updateTopic", "deleteTopic", "brokerStatus", "sendMessage",
            "consumeMessage", "watch", "start", "stop"} <= set(names)
    for name in names:
        result = runner.invoke(app, [name, "-h"])
        assert result.exit_code == 0 and "Usage:" in result.output, name
    bare = mqadmin()  # like Apache's mqadmin alone: the list of commands
    assert bare.returncode == 0 and "clusterList" in bare.stdout and "Commands:" in bare.stdout and bare.stderr == ""


def test_without_n_the_local_cluster_is_used(live: Cluster) -> None:
    route = live.json("topicRoute", "-t", "TBW102")
    assert sorted(b["brokerName"] for b in route["brokerDatas"]) == ["broker-a", "broker-b"]
    status = live.json("status")
    assert status["namesrvAddr"] == live.started["namesrvAddr"] and status["topics"] == ["t1"]


def test_cluster_list_json_and_apache_columns(live: Cluster) -> None:
    rows = live.json("clusterList")["brokers"]
    assert [(r["cluster"], r["brokerName"], r["brokerId"], r["addr"]) for r in rows] == [
        ("DefaultCluster", "broker-a", 0, live.addr["broker-a-0"]),
        ("DefaultCluster", "broker-b", 0, live.addr["broker-b-0"]),
    ]
    assert set(rows[0]) == {
        "cluster", "brokerName", "brokerId", "addr", "vipAddr", "reachable", "error", "provisional", "provisionalOn", "version",
        "inTps", "outTps", "sendQueue", "sendWaitMs", "pullQueue", "pullWaitMs", "ackQueue", "ackWaitMs", "timerReadBehind",
        "timerOffsetBehind", "timerCongestNum", "timerEnqueueTps", "timerDequeueTps", "pageCacheLockTimeMs",
        "hours", "space", "activated", "inTotalYest", "outTotalYest", "inTotalToday", "outTotalToday", "impl",
    }
    for r in rows:
        assert r["reachable"] is True and r["error"] is None and r["version"] == "V5_3_3"
        assert r["impl"] == "stub"  # the local cluster's: which implementation runs at that address
        host, port = r["addr"].rsplit(":", 1)
        assert r["vipAddr"] == f"{host}:{int(port) - 2}"  # the stub's VIP port, listenPort - 2
        assert r["provisional"] is False and r["provisionalOn"] == []  # registered, not restored
        assert isinstance(r["inTps"], float) and isinstance(r["outTps"], float) and r["activated"] is True
        # a fresh store: its oldest message is minutes old, or it has none (-1), and then Java's formula gives
        # the hours since the epoch
        since_epoch = time.time() / 3600
        assert (0.0 <= r["hours"] < 1.0 or since_epoch - 0.1 < r["hours"] < since_epoch + 0.1) and 0.0 <= r["space"] <= 1.0

    wide = live.run("clusterList", columns=250)
    assert wide.returncode == 0
    header = wide.stdout.splitlines()[0]
    positions = [header.index(c) for c in APACHE_COLUMNS]
    assert positions == sorted(positions) and "#Status" in header
    line = next(line for line in wide.stdout.splitlines() if live.addr["broker-a-0"] in line)
    assert re.search(r"V5_3_3\s+\d+\.\d\d\(0,0ms\)\s+\d+\.\d\d\(0,0ms\|0,0ms\)\s+0-0\(0\.0w, 0\.0, 0\.0\)", line)
    assert line.rstrip().endswith("OK")

    more = live.run("clusterList", "-m")
    assert more.returncode == 0 and "#InTotalToday" in more.stdout and "#OutTotalYest" in more.stdout

    only = live.json("clusterList", "-c", "DefaultCluster")
    assert len(only["brokers"]) == 2
    unknown = live.run("clusterList", "-c", "Nope")
    assert unknown.returncode == 1
    assert unknown.stderr == "mqadmin: cluster Nope is not known to the NameServer (clusters: DefaultCluster)\n"


@pytest.mark.parametrize("columns", [80, 100])
def test_narrow_terminal_drops_columns_never_cuts_names(live: Cluster, columns: int) -> None:
    out = mqadmin_on_terminal("clusterList", env=live.env, columns=columns)
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert all(len(line) <= columns for line in lines)
    assert "…" not in out.stdout
    for name in ("broker-a-0", "broker-b-0"):
        assert any("DefaultCluster" in line and live.addr[name] in line and line.rstrip().endswith("OK") for line in lines)
    table, note = out.stdout.split("not shown, ", 1)  # what was dropped is said, under the table
    assert "#Timer(Progress)" not in table and "#Timer(Progress)" in note  # low-value columns go first
    assert "#InTPS" in table


def test_update_topic_on_cluster_and_broker_then_delete(live: Cluster) -> None:
    out = live.json("updateTopic", "-t", "T2", "-c", "DefaultCluster", "-r", "4", "-w", "4", "-p", "6")
    assert out["topicConfig"] == {"attributes": {}, "order": False, "perm": 6, "readQueueNums": 4,
                                  "topicFilterType": "SINGLE_TAG", "topicName": "T2", "topicSysFlag": 0,
                                  "writeQueueNums": 4}
    assert sorted(r["addr"] for r in out["brokers"]) == sorted([live.addr["broker-a-0"], live.addr["broker-b-0"]])
    assert all(r["ok"] for r in out["brokers"]) and out["orderConf"] is None
    live.wait_route("T2", lambda r: r is not None and sorted((q.broker_name, q.write_queue_nums) for q in r.queue_datas)
                    == [("broker-a", 4), ("broker-b", 4)])

    # -b with -o true: the broker's order conf is merged into ORDER_TOPIC_CONFIG on every NameServer, as Java does.
    text = live.run("updateTopic", "-t", "T2", "-b", live.addr["broker-a-0"], "-w", "2", "-r", "2", "-o", "true")
    assert text.returncode == 0, text.stderr
    assert f"create topic to {live.addr['broker-a-0']} success." in text.stdout
    assert "set broker orderConf. isOrder=true, orderConf=[broker-a:2]" in text.stdout
    assert ("TopicConfig [topicName=T2, readQueueNums=2, writeQueueNums=2, perm=RW-, topicFilterType=SINGLE_TAG, "
            "topicSysFlag=0, order=true, attributes={}]") in text.stdout
    assert live.run("updateTopic", "-t", "T2", "-b", live.addr["broker-b-0"], "-o", "true").returncode == 0
    for ns in live.namesrvs:
        kv = live.json("getKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T2", "-n", ns)
        assert sorted(kv["table"]["T2"].split(";")) == ["broker-a:2", "broker-b:8"]

    deleted = live.run("deleteTopic", "-t", "T2", "-c", "DefaultCluster")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.splitlines()[0] == "delete topic [T2] from cluster [DefaultCluster] success."
    assert deleted.stdout.count("from NameServer success.") == 2
    live.wait_route("T2", lambda r: r is None)
    gone = live.run("topicRoute", "-t", "T2")
    assert gone.returncode == 1 and "TOPIC_NOT_EXIST" in gone.stderr
    assert live.run("deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "T2").returncode == 0


def test_update_topic_errors(live: Cluster) -> None:
    both = live.run("updateTopic", "-t", "X", "-b", live.addr["broker-a-0"], "-c", "DefaultCluster")
    assert both.returncode == 2 and both.stderr.count("\n") == 1 and "exactly one of -b" in both.stderr
    neither = live.run("updateTopic", "-t", "X")
    assert neither.returncode == 2 and "exactly one of -b" in neither.stderr
    bad = live.run("updateTopic", "-t", "X", "-c", "DefaultCluster", "-p", "9")
    assert bad.returncode == 2 and "-p" in bad.stderr
    dead = live.run("updateTopic", "-t", "X", "-b", "127.0.0.1:1", "--timeout", "1")
    # the one broker named (-b) failing is the command's error: one line on stderr
    assert dead.returncode == 1 and dead.stderr == "mqadmin: cannot connect to 127.0.0.1:1: Connection refused\n"
    unknown = live.run("deleteTopic", "-t", "X", "-c", "Nope")
    assert unknown.returncode == 1 and "cluster Nope is not known" in unknown.stderr


def test_broker_status(live: Cluster) -> None:
    one = live.json("brokerStatus", "-b", live.addr["broker-b-0"])
    (entry,) = one["brokers"]
    assert entry["addr"] == live.addr["broker-b-0"] and entry["reachable"] is True and entry["error"] is None
    assert entry["table"]["brokerVersionDesc"] == "V5_3_3" and "putTps" in entry["table"]
    assert list(entry["table"]) == sorted(entry["table"])
    text = live.run("brokerStatus", "-b", live.addr["broker-b-0"])
    # Apache's "%-32s: %s" lines, sorted by key (scripts read them with awk -F': ')
    assert text.returncode == 0 and re.search(r"^brokerVersionDesc {15}: V5_3_3$", text.stdout, re.M), text.stdout
    assert text.stdout.splitlines() == [f"{k:<32}: {v}" for k, v in sorted(entry["table"].items())
                                        if k not in ("runtime", "bootTimestamp")] or all(
        line.startswith(f"{k:<32}: ") for line, k in zip(text.stdout.splitlines(), sorted(entry["table"])))
    every = live.json("brokerStatus", "-c", "DefaultCluster")
    assert sorted(b["addr"] for b in every["brokers"]) == sorted([live.addr["broker-a-0"], live.addr["broker-b-0"]])
    cluster_text = live.run("brokerStatus", "-c", "DefaultCluster").stdout.splitlines()  # "%-24s %-32s: %s"
    assert {line[:24].rstrip() for line in cluster_text} == {live.addr["broker-a-0"], live.addr["broker-b-0"]}
    assert f"{live.addr['broker-b-0']:<24} {'brokerVersionDesc':<32}: V5_3_3" in cluster_text
    dead = live.run("brokerStatus", "-b", "127.0.0.1:1", "--timeout", "1")
    assert dead.returncode == 1 and dead.stdout == ""
    assert dead.stderr == "mqadmin: cannot connect to 127.0.0.1:1: Connection refused\n"  # errors go to stderr


#: A send that times out is retried on another broker (at least once, as Java): on a loaded machine
#: that would store a duplicate and break the exact counts below, so sends here may take long.
SLOW_OK = ("--timeout", "15")


def test_send_and_consume(live: Cluster) -> None:
    sent = live.json("sendMessage", "-t", "t1", "-p", "hello", "-k", "K1", "-c", "TagA", *SLOW_OK)
    assert set(sent) == {"sendStatus", "msgId", "offsetMsgId", "brokerName", "brokerAddr", "queueId", "queueOffset",
                         "regionId", "transactionId"}
    assert sent["sendStatus"] == "SEND_OK" and MSG_ID.match(sent["msgId"]) and MSG_ID.match(sent["offsetMsgId"])
    assert sent["brokerAddr"] == live.addr[f"{sent['brokerName']}-0"] and 0 <= sent["queueId"] < 8

    first = live.json("sendMessage", "-t", "t1", "-p", "to-b-2", "-b", "broker-b", "-i", "2", *SLOW_OK)
    second = live.json("sendMessage", "-t", "t1", "-p", "again", "-b", "broker-b", "-i", "2", *SLOW_OK)
    assert (first["brokerName"], first["queueId"]) == ("broker-b", 2)
    assert second["queueOffset"] == first["queueOffset"] + 1

    # to broker-a: a queue picked at random could be broker-b's queue 2 (1 in 16), read back below by offset
    table = live.run("sendMessage", "-t", "t1", "-p", "x", "-b", "broker-a", *SLOW_OK)
    assert table.returncode == 0 and "#Send Result" in table.stdout and "SEND_OK" in table.stdout

    got = live.json("consumeMessage", "-t", "t1", "-b", "broker-b", "-i", "2", "-o", str(first["queueOffset"]))
    assert [m["body"] for m in got["messages"]] == ["to-b-2", "again"]
    m = got["messages"][0]
    assert m["msgId"] == first["msgId"] and m["offsetMsgId"] == first["offsetMsgId"]
    assert (m["brokerName"], m["queueId"], m["queueOffset"], m["topic"]) == ("broker-b", 2, first["queueOffset"], "t1")
    assert got["queues"] == [{"brokerName": "broker-b", "queueId": 2, "brokerAddr": live.addr["broker-b-0"],
                              "minOffset": 0, "maxOffset": second["queueOffset"] + 1,
                              "startOffset": first["queueOffset"], "nextOffset": second["queueOffset"] + 1,
                              "count": 2, "error": None}]

    everything = live.json("consumeMessage", "-t", "t1")
    bodies = [m["body"] for m in everything["messages"]]
    assert sorted(bodies) == sorted(["hello", "to-b-2", "again", "x"]), everything["queues"]
    tagged = next(m for m in everything["messages"] if m["body"] == "hello")
    assert tagged["tags"] == "TagA" and tagged["keys"] == "K1" and tagged["msgId"] == sent["msgId"]
    assert len(everything["queues"]) == 16

    bounded = live.json("consumeMessage", "-t", "t1", "-c", "1")
    assert len(bounded["messages"]) == 1
    text = live.run("consumeMessage", "-t", "t1")  # Apache's dump: "MSGID: <id> MessageExt [...] BODY: <body>"
    dumped = [line for line in text.stdout.splitlines() if line.startswith("MSGID: ")]
    assert text.returncode == 0 and len(dumped) == 4, text.stdout
    line = next(line for line in dumped if line.endswith(" BODY: to-b-2"))
    assert line.startswith(f"MSGID: {first['msgId']} MessageExt [brokerName=broker-b, queueId=2, storeSize=")
    assert f"msgId={first['offsetMsgId']}, " in line and f"storeHost=/{live.addr['broker-b-0']}, " in line
    assert "toString()=Message{topic='t1', flag=0, properties={" in line and "body=[116, 111, 45, 98, 45, 50]" in line
    assert text.stdout.count("Consume ok\n") == len({(m["brokerName"], m["queueId"]) for m in everything["messages"]})
    assert ("MessageQueue [topic=t1, brokerName=broker-b, queueId=2] print msg finished. status=NO_NEW_MSG, "
            f"offset={second['queueOffset'] + 1}") in text.stdout.splitlines()
    cut = live.run("consumeMessage", "-t", "t1", "-b", "broker-b", "-i", "2", "-o", str(first["queueOffset"]), "-c", "1")
    assert cut.stdout.splitlines()[:2] == ["The oldler 1 message will be provided", "Consume ok"], cut.stdout
    assert [line.rsplit(" BODY: ", 1)[1] for line in cut.stdout.splitlines() if line.startswith("MSGID: ")] == ["to-b-2"]

    # A topic without a route: sent via TBW102 like a Java producer, auto-created, then routable.
    auto = live.json("sendMessage", "-t", "fresh", "-p", "first", *SLOW_OK)
    assert auto["sendStatus"] == "SEND_OK"
    live.wait_route("fresh", lambda r: r is not None and r.queue_datas)


def test_send_and_consume_usage_errors(live: Cluster) -> None:
    no_broker = live.run("sendMessage", "-t", "t1", "-p", "x", "-i", "1")
    assert no_broker.returncode == 2 and "Broker name must be set" in no_broker.stderr
    no_queue = live.run("sendMessage", "-t", "t1", "-p", "x", "-b", "broker-z")
    assert no_queue.returncode == 1 and "no NameServer routes topic t1 to broker broker-z" in no_queue.stderr
    offset_only = live.run("consumeMessage", "-t", "t1", "-o", "3")
    assert offset_only.returncode == 2 and "queueId" in offset_only.stderr
    missing = live.run("consumeMessage", "-t", "nope")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert re.match(r"mqadmin: 127\.0\.0\.1:\d+: route of topic nope failed: TOPIC_NOT_EXIST", missing.stderr)


def test_topic_list_and_cluster_mode(live: Cluster) -> None:
    topics = live.json("topicList")["topicList"]
    assert {"TBW102", "t1", "broker-a", "broker-b"} <= set(topics) and topics == sorted(topics)
    rows = live.json("topicList", "-c")["topics"]
    assert next(r for r in rows if r["topic"] == "t1") == {"topic": "t1", "cluster": "DefaultCluster", "consumerGroups": []}
    # A group with an offset on t1 (any broker may be asked, so tell both) is a consumer of it (code 300).
    client = SyncAdminClient(live.namesrvs, timeout=2)
    for broker in ("broker-a-0", "broker-b-0"):
        client.broker_call(live.addr[broker], request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": "CG1", "topic": "t1", "queueId": 0, "commitOffset": 0}), "UPDATE_CONSUMER_OFFSET")
    rows = live.json("topicList", "-c")["topics"]
    assert next(r for r in rows if r["topic"] == "t1")["consumerGroups"] == ["CG1"]
    text = live.run("topicList", "-c")
    assert text.returncode == 0 and text.stdout.splitlines()[0].split() == ["#Cluster", "Name", "#Topic", "#Consumer", "Group"]
    assert re.search(r"^DefaultCluster\s+t1\s+CG1\s*$", text.stdout, re.MULTILINE)


def test_writes_report_each_namesrv_in_json(live: Cluster) -> None:
    out = live.json("updateKvConfig", "-s", "ns", "-k", "k", "-v", "v")
    assert sorted(r["addr"] for r in out["results"]) == sorted(live.namesrvs)
    assert all(r == {"addr": r["addr"], "ok": True, "error": None, "value": None} for r in out["results"])
    wiped = live.json("wipeWritePerm", "-b", "broker-a")
    try:
        assert all(r["ok"] and r["value"] > 0 for r in wiped["results"])
        route = live.json("topicRoute", "-t", "t1")
        assert {q["brokerName"]: q["perm"] for q in route["queueDatas"]}["broker-a"] == 4
    finally:
        restored = live.json("addWritePerm", "-b", "broker-a")
    assert all(r["ok"] for r in restored["results"])
    assert live.run("deleteKvConfig", "-s", "ns", "-k", "k").returncode == 0


def test_unreachable_namesrv_and_debug(live: Cluster) -> None:
    for args in (["clusterList"], ["topicList"], ["topicRoute", "-t", "t1"], ["updateTopic", "-t", "x", "-c", "C"],
                 ["sendMessage", "-t", "t1", "-p", "x"], ["consumeMessage", "-t", "t1"], ["watch", "--once"]):
        out = live.run(*args, "-n", "127.0.0.1:1", "--timeout", "1")
        if args[0] == "watch":  # watch shows which NameServer does not answer; none answering is a failure
            assert out.returncode == 1 and "\n127.0.0.1:1: cannot connect: Connection refused" in out.stdout
            continue
        assert out.returncode == 1, args
        assert out.stderr == "mqadmin: cannot connect to 127.0.0.1:1: Connection refused\n", args
    debug = mqadmin("topicList", "-n", "127.0.0.1:1", "--timeout", "1", "--debug", env=live.env, in_process=False)
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "AdminError" in debug.stderr


def test_watch_snapshot_and_live_refresh(live: Cluster) -> None:
    snap = live.json("watch", "--once", "-t", "t1", "-t", "nope")
    assert set(snap) == {"namesrvs", "errors", "brokers", "topics", "impls"} and snap["errors"] == {}
    assert sorted(snap["namesrvs"]) == sorted(live.namesrvs)
    assert snap["impls"] == {**dict.fromkeys(live.namesrvs, "toolkit"),
                             **{b["addr"]: "stub" for b in snap["brokers"]}}  # the local cluster's
    assert [(b["broker"], b["id"], b["agree"]) for b in snap["brokers"]] == [("broker-a", 0, True), ("broker-b", 0, True)]
    assert all(set(b["seenBy"].values()) == {True} for b in snap["brokers"])
    assert all(b["provisional"] is False and b["provisionalBy"] == [] for b in snap["brokers"])
    t1, nope = snap["topics"]
    assert t1["agree"] and set(map(tuple, t1["routes"].values())) == {("broker-a:RW-:8", "broker-b:RW-:8")}
    assert nope == {"topic": "nope", "routes": {ns: [] for ns in snap["namesrvs"]}, "agree": True}

    # Off a terminal: one frame per interval.
    began = time.monotonic()
    frames = live.run("watch", "--count", "3", "--interval", "0.5", "-t", "t1")
    assert frames.returncode == 0
    assert re.findall(r"refresh (\d+)", frames.stdout) == ["1", "2", "3"]
    assert time.monotonic() - began >= 1.0  # two full intervals between three frames

    # On a terminal: Rich Live redraws in place, in colour.
    done = mqadmin_on_terminal("watch", "--count", "2", "-t", "t1", env=live.env, raw=True, timeout=20)
    text = done.stdout
    assert done.returncode == 0 and "refresh 2" in text and "\x1b[" in text and "alive" in text


def test_bad_options_are_one_line(live: Cluster) -> None:
    for args, needle in ((["topicRoute"], "--topic"), (["topicRoute", "-t", "x", "--bogus"], "--bogus"),
                         (["clusterList", "-i", "zero"], "-i"), (["nosuchcommand"], "nosuchcommand")):
        out = live.run(*args)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and needle in out.stderr, args
        assert "Traceback" not in out.stderr and out.stdout == ""
    assert json.loads(live.run("topicRoute", "-t", "t1", "--json").stdout)["queueDatas"]


def test_broker_fault_switchboard(live: Cluster) -> None:
    """brokerFault drives the stub's request 9000; each fault shows in what a producer gets."""
    a = live.addr["broker-a-0"]
    topic = "faulted"
    try:
        state = live.json("brokerFault", "-b", "broker-a")  # no option: the state, by broker name
        assert state == {"broker": a, "action": "status",
                         "state": {"hung": False, "partitioned": [], "rejectCode": None, "sendLatencyMillis": 0}}

        assert live.json("brokerFault", "-b", "broker-a", "--latency", "400")["state"]["sendLatencyMillis"] == 400
        began = time.monotonic()
        live.json("sendMessage", "-t", topic, "-p", "slow", "-b", "broker-a", *SLOW_OK)
        assert time.monotonic() - began >= 0.4
        live.json("brokerFault", "-b", a, "--latency", "0")

        rejected = live.json("brokerFault", "-b", a, "--reject", "2", "--remark", "too busy")
        assert rejected["state"]["rejectCode"] == 2
        refused = live.run("sendMessage", "-t", topic, "-p", "no", "-b", "broker-a")
        assert refused.returncode == 1 and "SYSTEM_BUSY" in refused.stderr and "too busy" in refused.stderr
        table = live.run("brokerFault", "-b", "broker-a")
        assert table.returncode == 0 and "SYSTEM_BUSY" in table.stdout

        assert live.json("brokerFault", "-b", "broker-a", "--hang")["state"]["hung"] is True
        silent = live.run("brokerStatus", "-b", a, "--timeout", "0.5")
        assert silent.returncode == 1 and "no response to request code 28" in silent.stderr
        assert live.json("brokerFault", "-b", "broker-a")["state"]["hung"] is True  # faults are answered while hung
        assert live.json("brokerFault", "-b", "broker-a", "--resume")["state"]["hung"] is False
        assert live.run("brokerStatus", "-b", a).returncode == 0

        ns0 = live.namesrvs[0]
        assert live.json("brokerFault", "-b", "broker-a", "--partition", ns0)["state"]["partitioned"] == [ns0]
        assert live.json("brokerFault", "-b", "broker-a", "--heal", "all")["state"]["partitioned"] == []
    finally:
        cleared = live.json("brokerFault", "-b", a, "--clear")
    assert cleared["state"] == {"hung": False, "partitioned": [], "rejectCode": None, "sendLatencyMillis": 0}
    sent = live.json("sendMessage", "-t", topic, "-p", "fine", "-b", "broker-a", *SLOW_OK)
    assert sent["sendStatus"] == "SEND_OK"


def test_broker_fault_errors(live: Cluster) -> None:
    two = live.run("brokerFault", "-b", "broker-a", "--hang", "--clear")
    assert two.returncode == 2 and two.stderr.count("\n") == 1 and "at most one" in two.stderr
    remark_alone = live.run("brokerFault", "-b", "broker-a", "--remark", "x")
    assert remark_alone.returncode == 2 and "--reject" in remark_alone.stderr
    unknown = live.run("brokerFault", "-b", "broker-z", "--hang")
    assert unknown.returncode == 1 and unknown.stderr.count("\n") == 1
    assert "broker broker-z is not known" in unknown.stderr and "broker-a" in unknown.stderr
    bad_ns = live.run("brokerFault", "-b", "broker-a", "--partition", "nowhere")
    assert bad_ns.returncode == 2 and bad_ns.stderr.count("\n") == 1 and "nowhere" in bad_ns.stderr  # a bad option value
    # A NameServer (like a Java broker) does not know request 9000: one line naming the address.
    not_stub = live.run("brokerFault", "-b", live.namesrvs[0], "--hang")
    assert not_stub.returncode == 1 and "REQUEST_CODE_NOT_SUPPORTED" in not_stub.stderr
    assert live.namesrvs[0] in not_stub.stderr and "Traceback" not in not_stub.stderr


def test_consume_between_timestamps(live: Cluster) -> None:
    """consumeMessage -s/-e (Apache's begin/end timestamps) pick messages by store time."""
    first = live.json("sendMessage", "-t", "timed", "-p", "early", "-b", "broker-b", "-i", "0", *SLOW_OK)
    time.sleep(0.05)
    second = live.json("sendMessage", "-t", "timed", "-p", "late", "-b", "broker-b", "-i", "0", *SLOW_OK)
    assert second["queueOffset"] == first["queueOffset"] + 1
    where = ("-t", "timed", "-b", "broker-b", "-i", "0")
    stored = {m["body"]: m["storeTimestamp"] for m in live.json("consumeMessage", *where)["messages"]}
    assert stored["late"] > stored["early"]

    def bodies(*args: str) -> list[str]:
        return [m["body"] for m in live.json("consumeMessage", *where, *args)["messages"]]

    assert bodies("-s", str(stored["late"])) == ["late"]
    assert bodies("-e", str(stored["late"])) == ["early"]
    assert bodies("-s", str(stored["early"]), "-e", str(stored["late"] + 1)) == ["early", "late"]
    local = time.strftime("%Y-%m-%d#%H:%M:%S", time.localtime(stored["late"] / 1000)) + f":{stored['late'] % 1000:03d}"
    assert bodies("-s", local) == ["late"]
    bad = live.run("consumeMessage", *where, "-s", "yesterday")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "yyyy-MM-dd#HH:mm:ss:SSS" in bad.stderr
    backwards = live.run("consumeMessage", *where, "-s", "2000", "-e", "1000")
    assert backwards.returncode == 2 and "before the begin" in backwards.stderr
