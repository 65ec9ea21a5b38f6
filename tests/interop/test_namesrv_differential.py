"""Differential: the same requests to the Java 5.3.3 NameServer and to ours, answer by answer.

One scripted sequence (registrations of a master, a slave and a second broker over connections
held open, as brokers do, then every NameServer request code) runs against both servers through
our own remoting client. Answers are compared field by field (code, remark, ext fields, body,
flag) after normalising only what must differ: the opaque, timestamps, key order and the order
of JSON arrays of plain values (Java fills them from hash sets).

:data:`DOCUMENTED_DIFFERENCES` is every difference that remains, each explained in INTEROP.md;
the test asserts exactly that list, so a new difference (or a fixed one) fails it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from remoting import fastjson
from remoting import requests as rq
from remoting.bodies import DataVersion, TopicConfig
from remoting.command import RemotingCommand, request
from remoting.transport import RemotingClient, connect
from tests.interop.harness_build import JavaBuild
from tests.interop.java_procs import JavaNamesrv, java_servers
from tests.procs import NamesrvProcess

CLUSTER = "DiffCluster"
DV = DataVersion(7, 1_700_000_000_000)

# (step, field) -> why; every entry is explained in INTEROP.md ("Differential").
DOCUMENTED_DIFFERENCES: dict[tuple[str, str], str] = {
    ("901 broker member group", "remark"):
        "Java answers SUCCESS with its default remark 'not set any response code'; ours sends no remark",
    ("319 get config", "body"): "each server lists its own configuration keys and values",
}


def _topics(*names: str) -> list[TopicConfig]:
    return [TopicConfig("TBW102", 8, 8, 7)] + [TopicConfig(n, 4, 4, 6) for n in names]


def _register(name: str, addr: str, broker_id: int, *topics: str) -> Callable[[], RemotingCommand]:
    return lambda: rq.register_broker(cluster=CLUSTER, broker_name=name, broker_addr=addr, broker_id=broker_id,
                                      topics=_topics(*topics), data_version=DV)


def _normal_body(body: bytes) -> Any:
    if not body:
        return None
    try:
        value = fastjson.loads(body)
    except Exception:
        return body.decode(errors="replace")
    return _normal(value)


def _normal(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _normal(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
                if k not in ("timestamp",)}
    if isinstance(value, list):
        items = [_normal(v) for v in value]
        if all(isinstance(v, (str, int, float)) for v in items):
            return sorted(items, key=str)
        return items
    return value


def _view(resp: RemotingCommand | None) -> dict[str, Any]:
    if resp is None:
        return {"answer": None}
    return {"code": resp.code, "remark": resp.remark, "flag": resp.flag, "ext": dict(resp.ext_fields or {}),
            "body": _normal_body(resp.body)}


MASTER_A, SLAVE_A, MASTER_B = "127.0.0.1:20911", "127.0.0.1:20921", "127.0.0.1:20931"

# (step, the connection that sends it, the request)
STEPS: list[tuple[str, str, Callable[[], RemotingCommand]]] = [
    ("103 register master diff-a", "a0", _register("diff-a", MASTER_A, 0, "DiffT1", "DiffT2")),
    ("103 register slave diff-a", "a1", _register("diff-a", SLAVE_A, 1, "DiffT1", "DiffT2")),
    ("103 register master diff-b", "b0", _register("diff-b", MASTER_B, 0, "DiffT1", "DiffT3")),
    ("103 register master diff-a again", "a0", _register("diff-a", MASTER_A, 0, "DiffT1", "DiffT2")),
    ("105 route DiffT1", "admin", lambda: rq.get_route("DiffT1")),
    ("105 route DiffT2", "admin", lambda: rq.get_route("DiffT2")),
    ("105 route of an unknown topic", "admin", lambda: rq.get_route("NoSuchTopic")),
    ("105 route TBW102", "admin", lambda: rq.get_route("TBW102")),
    ("106 cluster info", "admin", rq.cluster_info),
    ("206 all topics", "admin", rq.all_topics),
    ("224 topics of the cluster", "admin", lambda: rq.topics_by_cluster(CLUSTER)),
    ("224 topics of an unknown cluster", "admin", lambda: rq.topics_by_cluster("NoSuchCluster")),
    ("304 system topics", "admin", lambda: request(304)),
    ("311 unit topics", "admin", lambda: request(311)),
    ("312 has-unit-sub topics", "admin", lambda: request(312)),
    ("313 has-unit-sub-ununit topics", "admin", lambda: request(313)),
    ("100 put kv", "admin", lambda: rq.put_kv("DIFF_NS", "k1", "v1")),
    ("101 get kv", "admin", lambda: rq.get_kv("DIFF_NS", "k1")),
    ("219 kv list", "admin", lambda: rq.kv_list("DIFF_NS")),
    ("102 delete kv", "admin", lambda: rq.delete_kv("DIFF_NS", "k1")),
    ("101 get deleted kv", "admin", lambda: rq.get_kv("DIFF_NS", "k1")),
    ("219 kv list of an empty namespace", "admin", lambda: rq.kv_list("DIFF_NS")),
    ("100 put order conf", "admin", lambda: rq.put_kv("ORDER_TOPIC_CONFIG", "DiffT1", "diff-a:4")),
    ("105 route of an ordered topic", "admin", lambda: rq.get_route("DiffT1")),
    ("322 query data version (same)", "a0", lambda: rq.query_data_version(
        cluster=CLUSTER, broker_name="diff-a", broker_addr=MASTER_A, broker_id=0, data_version=DV)),
    ("322 query data version (changed)", "a0", lambda: rq.query_data_version(
        cluster=CLUSTER, broker_name="diff-a", broker_addr=MASTER_A, broker_id=0,
        data_version=DataVersion(8, 1_700_000_000_001))),
    ("901 broker member group", "admin", lambda: request(
        901, {"clusterName": CLUSTER, "brokerName": "diff-a", "brokerId": "0"})),
    ("904 broker heartbeat", "a0", lambda: rq.broker_heartbeat(
        cluster=CLUSTER, broker_name="diff-a", broker_addr=MASTER_A, broker_id=0)),
    ("217 register topic in namesrv", "admin", lambda: request(
        217, {"topic": "DiffT9"}, fastjson.dumps({"queueDatas": [
            {"brokerName": "diff-a", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2, "topicSysFlag": 0}],
            "brokerDatas": []}))),
    ("105 route of the topic registered in namesrv", "admin", lambda: rq.get_route("DiffT9")),
    ("205 wipe write perm", "admin", lambda: rq.wipe_write_perm("diff-a")),
    ("105 route after wipe", "admin", lambda: rq.get_route("DiffT2")),
    ("327 add write perm", "admin", lambda: rq.add_write_perm("diff-a")),
    ("105 route after add", "admin", lambda: rq.get_route("DiffT2")),
    ("205 wipe write perm of an unknown broker", "admin", lambda: rq.wipe_write_perm("no-such-broker")),
    ("216 delete topic", "admin", lambda: rq.delete_topic("DiffT3", CLUSTER)),
    ("105 route of the deleted topic", "admin", lambda: rq.get_route("DiffT3")),
    ("216 delete topic everywhere", "admin", lambda: rq.delete_topic("DiffT2")),
    ("104 unregister slave", "a1", lambda: rq.unregister_broker(
        cluster=CLUSTER, broker_name="diff-a", broker_addr=SLAVE_A, broker_id=1)),
    ("106 cluster info after unregister", "admin", rq.cluster_info),
    ("105 route after unregister", "admin", lambda: rq.get_route("DiffT1")),
    ("318 update config", "admin", lambda: rq.update_namesrv_config({"orderMessageEnable": "true"})),
    ("319 get config", "admin", rq.get_namesrv_config),
    ("unknown request code", "admin", lambda: request(9876)),
]

# Java 5 answers an unregister at once and applies it later, from a batch queue
# (BatchUnregistrationService); these steps are asked again until the unregistered slave is gone,
# on both servers, so the comparison is of the table after the change, not of a race with it.
SETTLED_STEPS: dict[str, Callable[[RemotingCommand], bool]] = {
    "106 cluster info after unregister": lambda resp: SLAVE_A.encode() not in resp.body,
}
SETTLE_TRIES, SETTLE_PAUSE = 200, 0.05


@pytest.fixture(scope="module")
def namesrv_pair(java_builds: dict[str, JavaBuild], loopback_shim: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A fresh NameServer of ours and a fresh Java 5.3.3 one, nothing registered."""
    base = tmp_path_factory.mktemp("differential")
    ours = NamesrvProcess(base / "ours").start()
    try:
        with java_servers(JavaNamesrv(java_builds["5.3.3"], base / "java", loopback_shim)) as (java,):
            yield ours.addr, java.addr
    finally:
        ours.kill()


@asynccontextmanager
async def _connections(addr: str) -> AsyncIterator[dict[str, RemotingClient]]:
    """One connection per simulated broker (their close would remove them) and one for admin."""
    async with AsyncExitStack() as stack:
        yield {name: await stack.enter_async_context(connect(addr)) for name in ("a0", "a1", "b0", "admin")}


async def _settled(client: RemotingClient, make: Callable[[], RemotingCommand],
                   settled: Callable[[RemotingCommand], bool]) -> RemotingCommand | None:
    """The first answer that shows the change, or the last one asked (bounded: 200 tries, ~10 s)."""
    resp = None
    for _ in range(SETTLE_TRIES):
        resp = await client.invoke(make(), 10.0)
        if resp is None or settled(resp):
            break
        await trio.sleep(SETTLE_PAUSE)
    return resp


async def _answers(addr: str) -> dict[str, dict[str, Any]]:
    answers = {}
    async with _connections(addr) as conns:
        for step, conn, make in STEPS:
            if step in SETTLED_STEPS:
                answers[step] = _view(await _settled(conns[conn], make, SETTLED_STEPS[step]))
            else:
                answers[step] = _view(await conns[conn].invoke(make(), 10.0))
    return answers


async def test_same_answers_as_java_namesrv(namesrv_pair: tuple[str, str]) -> None:
    ours, java = await _answers(namesrv_pair[0]), await _answers(namesrv_pair[1])
    differences = {}
    for step, _, _ in STEPS:
        for key in ours[step]:
            if ours[step][key] != java[step][key]:
                differences[(step, key)] = (ours[step][key], java[step][key])
    unexpected = {k: v for k, v in differences.items() if k not in DOCUMENTED_DIFFERENCES}
    gone = sorted(set(DOCUMENTED_DIFFERENCES) - set(differences))
    assert not unexpected and not gone, (
        "new differences (ours, java):\n" + "\n".join(f"{k}: {v}" for k, v in unexpected.items())
        + f"\ndocumented differences no longer seen: {gone}")
