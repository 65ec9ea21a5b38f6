"""Java mqadmin 4.9.7 and 5.3.3 against our NameServer and broker stub: each command's meaningful
output lines.

One row of :data:`COMMANDS` is one command: its arguments (placeholders filled from the module's
world: ``{ns}``, ``{broker}`` the stub's address, ``{topic}``, ``{group}``, ``{pgroup}``,
``{offset_msg_id}``, ``{v}`` the version without dots, ``{now}``) and the regular expressions its
stdout must match. Rows run in order, once per version, in one JVM per version: side effects
(create, then delete) follow the table. Adding a command is adding a row.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.interop.clients_common import create_topic
from tests.interop.clusters import StubCluster
from tests.interop.harness_build import JAVA_VERSIONS, JavaBuild
from tests.interop.java_procs import AdminRunners, LineProcess, java_command, java_consumer, java_env, rocketmq_home
from tests.mqadmin_procs import mqadmin


@dataclass(frozen=True)
class Cmd:
    args: str  # the mqadmin command line after "mqadmin", placeholders in braces, split on spaces
    expect: tuple[str, ...]  # regexes (re.M) that stdout must match
    stop_after_ms: int | None = None  # for a command that repeats until stopped
    versions: tuple[str, ...] = JAVA_VERSIONS

    @property
    def name(self) -> str:
        return self.args.split()[0]


BROKER_ROW = r"^DefaultCluster\s+broker-a\s+0\s+{broker}\s+V\d"
COMMANDS = [
    Cmd("clusterList -n {ns}", (r"^#Cluster Name\s+#Broker Name\s+#BID\s+#Addr", BROKER_ROW)),
    Cmd("topicRoute -n {ns} -t {topic}", (r'"brokerName":"broker-a"', r'0:"{broker}"', r'"writeQueueNums":4')),
    Cmd("topicList -n {ns}", (r"^{topic}$", r"^TBW102$")),
    Cmd("topicList -n {ns} -c", (r"^#Cluster Name\s+#Topic\s+#Consumer Group", r"^DefaultCluster\s+{topic}\s+{group}")),
    Cmd("topicStatus -n {ns} -t {topic}",
        (r"^#Broker Name\s+#QID\s+#Min Offset\s+#Max Offset", r"^broker-a\s+0\s+0\s+[1-9]")),
    Cmd("topicClusterList -n {ns} -t {topic}", (r"^DefaultCluster$",)),
    # Accumulation and Diff Total are not asserted to be 0: the other version's pass sends messages
    # the consumer filters out, and it commits the offsets past them only every 5 s.
    Cmd("statsAll -n {ns} -t {topic}", (r"^#Topic\s+#Consumer Group\s+#Accumulation\s+#InTPS\s+#OutTPS",
                                        r"^{topic}\s+{group}\s+\d+\s+[\d.]+\s+[\d.]+\s+\d+\s+\d+$")),
    Cmd("consumerProgress -n {ns} -g {group}",
        (r"^#Topic\s+#Broker Name\s+#QID\s+#Broker Offset\s+#Consumer Offset", r"^{topic}\s+broker-a\s+0\s+\d+\s+\d+",
         r"^(Consume )?Diff Total: \d+$")),
    Cmd("consumerConnection -n {ns} -g {group}",
        (r"^#ClientId\s+#ClientAddr\s+#Language\s+#Version", r"^\S+@interop-consumer-\d+\s+127\.0\.0\.1:\d+\s+JAVA\s+V5_3_3$",
         r"^Below is subscription:", r"{topic}\s+TagA \|\| TagC",
         r"^ConsumeType: CONSUME_PASSIVELY", r"^MessageModel: CLUSTERING")),
    Cmd("producerConnection -n {ns} -g {pgroup} -t {topic}", (r"^0001\s+\S+@\S+\s+127\.0\.0\.1:\d+\s+JAVA\s+V\d",)),
    Cmd("updateTopic -n {ns} -c DefaultCluster -t AdminNew{v} -r 2 -w 2",
        (r"^create topic to {broker} success\.$", r"topicName=AdminNew{v}, readQueueNums=2, writeQueueNums=2")),
    Cmd("updateSubGroup -n {ns} -c DefaultCluster -g AdminGroup{v}",
        (r"^create subscription group to {broker} success\.$", r"groupName=AdminGroup{v}")),
    Cmd("deleteSubGroup -n {ns} -c DefaultCluster -g AdminGroup{v}",
        (r"^delete subscription group \[AdminGroup{v}\] from broker \[{broker}\] in cluster \[DefaultCluster\] success\.$",)),
    Cmd("getBrokerConfig -n {ns} -b {broker}", (r"^brokerName\s+=\s+broker-a$", r"^brokerClusterName\s+=\s+DefaultCluster$")),
    Cmd("updateBrokerConfig -n {ns} -b {broker} -k defaultTopicQueueNums -v 6",
        (r"^update broker config success, {broker}$",)),
    Cmd("getBrokerConfig -n {ns} -b {broker}", (r"^defaultTopicQueueNums\s+=\s+6$",)),
    Cmd("getNamesrvConfig -n {ns}", (r"^=+{ns}=+$", r"^kvConfigPath\s+=\s+\S+")),
    Cmd("updateNamesrvConfig -n {ns} -k orderMessageEnable -v true",
        (r"^update name server config success!\[{ns}\]$", r"^orderMessageEnable : true$")),
    Cmd("getNamesrvConfig -n {ns}", (r"^orderMessageEnable\s+=\s+true$",)),
    Cmd("updateKvConfig -n {ns} -s AdminSpace{v} -k k1 -v v1", (r"^create or update kv config to namespace success\.$",)),
    Cmd("deleteKvConfig -n {ns} -s AdminSpace{v} -k k1", (r"^delete kv config from namespace success\.$",)),
    Cmd("updateOrderConf -n {ns} -t AdminNew{v} -m put -v broker-a:2",
        (r"update orderConf success\. topic=\[AdminNew{v}\], orderConf=\[broker-a:2\]",)),
    Cmd("updateOrderConf -n {ns} -t AdminNew{v} -m get",
        (r"get orderConf success\. topic=\[AdminNew{v}\], orderConf=\[broker-a:2\]",)),
    Cmd("updateOrderConf -n {ns} -t AdminNew{v} -m delete", (r"delete orderConf success\. topic=\[AdminNew{v}\]",)),
    Cmd("brokerStatus -n {ns} -b {broker}", (r"^msgPutTotalTodayNow\s*:\s*\d+", r"^brokerVersionDesc\s*:\s*V\d")),
    Cmd("clusterRT -n {ns} -a 2 -s 16 -i 1", (r"#Cluster Name\s+#Broker Name\s+#RT\s+#successCount\s+#failCount",
                                             r"DefaultCluster\s+broker-a\s+[\d.]+\s+2\s+0"),
        stop_after_ms=4000),
    Cmd("queryMsgById -n {ns} -i {offset_msg_id}", (r"^Topic:\s+{topic}$", r"^Tags:\s+\[TagA\]$", r"^Keys:\s+\[ka0 kshared\]$"),
        versions=("4.9.7",)),
    Cmd("queryMsgById -n {ns} -t {topic} -i {offset_msg_id}",  # 5.x requires the topic
        (r"^Topic:\s+{topic}$", r"^Tags:\s+\[TagA\]$", r"^Keys:\s+\[ka0 kshared\]$"), versions=("5.3.3",)),
    Cmd("queryMsgByOffset -n {ns} -t {topic} -b broker-a -i 0 -o 0", (r"^Topic:\s+{topic}$", r"^Queue ID:\s+0$")),
    Cmd("resetOffsetByTime -n {ns} -g {group} -t {topic} -s {now}",
        (r"^(rollback|start reset) consumer offset by specified,? group\[{group}\], topic\[{topic}\]",
         r"^#brokerName\s+#queueId\s+#offset", r"^broker-a\s+0\s+\d+")),
    Cmd("checkMsgSendRT -n {ns} -t {topic} -a 3 -s 16",
        (r"^#Broker Name\s+#QID\s+#Send Result\s+#RT", r"^broker-a\s+\d\s+true\s+\d+", r"^Avg RT: [\d.]+$")),
    Cmd("sendMessage -n {ns} -t {topic} -p hello -c TagZ -k kz",
        (r"^#Broker Name\s+#QID\s+#Send Result\s+#MsgId", r"^broker-a\s+\d\s+SEND_OK\s+[0-9A-F]{{32}}$")),
    Cmd("consumeMessage -n {ns} -t {topic} -c 1",  # the queue it starts with is Java's hash-set order
        (r"^The older 1 message of the \d queue will be provided$", r"^Consume ok$",
         r"^MSGID: [0-9A-F]{{32}} MessageExt \[brokerName=broker-a, queueId=\d, (?=.*KEYS=ka0 kshared)(?=.*TAGS=TagA)"
         r".*Message\{{topic='{topic}', .* BODY: admin-\d$")),
    # The commands a Java broker answered and the stub did not (issue table): 12, 307, 317, 328, 907.
    Cmd("queryMsgByKey -n {ns} -t {topic} -k kshared",
        (r"^#Message ID\s+#QID\s+#Offset", r"^[0-9A-F]{{32}}\s+\d\s+\d+$")),
    Cmd("queryMsgByUniqueKey -n {ns} -t {topic} -i {uniq_msg_id}",
        (r"^Topic:\s+{topic}$", r"^Keys:\s+\[ka0 kshared\]$", r"^Store Host:\s+{broker}$")),
    Cmd("consumerStatus -n {ns} -g {group}",
        (r"^Same subscription in the same group of consumer$", r"^Rebalance OK$")),
    Cmd("brokerConsumeStats -n {ns} -b {broker}",
        (r"^{topic}\s+{group}\s+broker-a\s+\d\s+\d+\s+\d+\s+\d+", r"^Diff Total: \d+$")),
    Cmd("producer -n {ns} -b {broker}",
        (r"^producer group \({pgroup}\) instance : clientId=\S+,remoteIP=/127\.0\.0\.1:\d+, language=JAVA",)),
    Cmd("haStatus -n {ns} -b {broker}", (r"^#MasterAddr\s+{broker}$", r"^#MasterCommitLogMaxOffset\s+\d+$",
                                         r"^#SlaveNum\s+\d+$"), versions=("5.3.3",)),
    Cmd("wipeWritePerm -n {ns} -b broker-a", (r"^wipe write perm of broker\[broker-a\] in name server\[{ns}\] OK, \d+$",)),
    Cmd("addWritePerm -n {ns} -b broker-a", (r"^add write perm of broker\[broker-a\] in name server\[{ns}\] OK, \d+$",)),
    Cmd("deleteTopic -n {ns} -c DefaultCluster -t AdminNew{v}",
        (r"^delete topic \[AdminNew{v}\] from cluster \[DefaultCluster\] success\.$",
         r"^delete topic \[AdminNew{v}\] from NameServer success\.$")),
]


@dataclass
class AdminWorld:
    """The state the commands look at: a topic with messages, a live consumer and producer."""

    stub: StubCluster
    topic: str
    group: str
    pgroup: str
    offset_msg_id: str
    uniq_msg_id: str
    procs: list[LineProcess] = field(default_factory=list)

    def fill(self, text: str, version: str) -> str:
        return text.format(ns=self.stub.namesrv.addr,
                           broker=self.stub.broker.addr, topic=self.topic, group=self.group, pgroup=self.pgroup,
                           offset_msg_id=self.offset_msg_id, uniq_msg_id=self.uniq_msg_id, v=version.replace(".", ""),
                           now=time.strftime("%Y-%m-%d#%H:%M:%S:000"))


@pytest.fixture(scope="module")
def admin_world(stub_cluster: StubCluster, java_builds: dict[str, JavaBuild],
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminWorld]:
    base = tmp_path_factory.mktemp("admin-world")
    ns = stub_cluster.namesrv.addr
    topic, group, pgroup = "AdminTopic", "CG_Admin", "PG_Admin"
    create_topic(ns, "DefaultCluster", topic)
    build = java_builds["5.3.3"]
    consumer = java_consumer(build, base / "consumer", ["--namesrv", ns, "--topic", topic, "--group", group,
                                                        "--expression", "TagA || TagC", "--expect", "1000",
                                                        "--seconds", "900"])
    home = rocketmq_home(base / "producer")
    msgs = [f"body=admin-{i};tag=TagA;keys=ka0 kshared;prop.i={i}" for i in range(8)]
    producer = LineProcess(java_command(build, "interop.harness.Producer",
                                        ["--namesrv", ns, "--topic", topic, "--group", pgroup, "--linger-ms", "900000"]
                                        + [a for m in msgs for a in ("--msg", m)], home), home, java_env(home))
    try:
        consumer.wait_for("ready")
        producer.wait_for("lingering")
        sent = [line for line in producer.lines if line.get("event") == "sent"]
        assert len(sent) == len(msgs), producer.lines
        consumer.wait_for("received", 120, count=len(msgs))
        _wait_for_committed_offsets(ns, group, len(msgs))
        yield AdminWorld(stub_cluster, topic, group, pgroup, sent[0]["offsetMsgId"], sent[0]["msgId"], [consumer, producer])
    finally:
        consumer.kill()
        producer.kill()


def _wait_for_committed_offsets(ns: str, group: str, count: int) -> None:
    """The push consumer commits its offsets every 5 s: until then a broker (Java's too) has no
    consume stats for the group, and consumerProgress and statsAll have nothing to show."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        done = mqadmin("consumerProgress", "-n", ns, "-g", group, "--json")
        if done.returncode == 0 and sum(q["consumerOffset"] for q in json.loads(done.stdout)["queues"]) >= count:
            return
        time.sleep(0.5)
    pytest.fail(f"{group}'s offsets did not reach the broker: {done.stdout} {done.stderr}")


CONSUMER_RECONNECTED = "RemotingSendRequestException: the connection to <"
#: The admin's 5 s wait for a request the broker relays to the Java consumer (a JVM on the same two
#: busy cores), seen once with both cores saturated: the answer came too late, not wrong.
RELAY_TIMED_OUT = "RemotingTimeoutException: wait response on the channel"
CASES = [(version, cmd) for version in JAVA_VERSIONS for cmd in COMMANDS if version in cmd.versions]


@pytest.mark.parametrize(("version", "cmd"), CASES, ids=[f"{v}-{i:02d}-{c.name}" for v, c in CASES
                                                         for i in [COMMANDS.index(c)]])
def test_java_mqadmin_command(version: str, cmd: Cmd, admin_world: AdminWorld,
                              java_admin: AdminRunners) -> None:
    args = [admin_world.fill(part, version) for part in cmd.args.split()]
    result: dict[str, Any] = java_admin[version].run(*args, stop_after_ms=cmd.stop_after_ms)
    for _ in range(2):
        # A Java client closes its connection when a synchronous call times out (4.9.7's
        # clientCloseSocketIfTimeout), which a loaded machine provokes; a request relayed to the
        # consumer in that moment fails as Java's broker would. The consumer reconnects: ask again.
        # The same when the consumer answered too late for the admin's 5 s (RELAY_TIMED_OUT).
        said = result["stdout"] + result["stderr"]
        if CONSUMER_RECONNECTED not in said and RELAY_TIMED_OUT not in said:
            break
        time.sleep(2)
        result = java_admin[version].run(*args, stop_after_ms=cmd.stop_after_ms)
    out = result["stdout"]
    assert result["exit"] in (None, 0), result
    assert result["timeout"] == (cmd.stop_after_ms is not None), result
    for pattern in cmd.expect:
        regex = pattern.format(ns=re.escape(admin_world.stub.namesrv.addr), broker=re.escape(admin_world.stub.broker.addr),
                               topic=admin_world.topic, group=admin_world.group, pgroup=admin_world.pgroup,
                               v=version.replace(".", ""))
        assert re.search(regex, out, re.M), f"{regex!r} not in the output of {' '.join(args)}:\n{out}\n{result['stderr']}"
