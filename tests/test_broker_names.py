"""Names are never paths (issue 19): hostile topic and group names against a real broker stub process.

Every test starts a broker whose ``storePathRootDir`` sits inside a sandbox
directory beside a "victim" directory, sends the hostile requests over
loopback TCP, and then compares the sandbox outside the store with what it
was before: nothing may be written there, and nothing deleted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from remoting.names import TOPIC_ILLEGAL_REMARK
from tests.test_broker_stub import call, create_topic, heartbeat, pull, send_v2

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)

WRITE_GROUP = "x/../../../outside_w"
DELETE_GROUP = "x/../../../victim"


def sandbox(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(sandbox, store, victim): the store two levels down, so ``%RETRY%x/../../../name`` under
    ``store/messages`` lands in the sandbox; the victim holds one file that must survive."""
    box = tmp_path / "box"
    store = box / "store"
    victim = box / "victim"
    victim.mkdir(parents=True)
    (victim / "precious.txt").write_text("keep me")
    store.mkdir()
    return box, store, victim


def outside_store(box: Path, store: Path) -> dict[str, int]:
    """Every path in the sandbox outside the store, with its size (directories 0)."""
    out: dict[str, int] = {}
    for root, dirs, files in os.walk(box):
        if Path(root) == store or store in Path(root).parents:
            continue
        for name in dirs + files:
            path = Path(root) / name
            if path == store:
                continue
            out[str(path.relative_to(box))] = 0 if path.is_dir() else path.stat().st_size
    return out


async def topic_names(addr: str) -> set[str]:
    resp = await call(addr, request(RequestCode.GET_ALL_TOPIC_CONFIG))
    return set(json.loads(resp.body)["topicConfigTable"])


def consumer_heartbeat(client_id: str, group: str) -> object:
    return heartbeat(client_id, group=group, topic="T")


def producer_heartbeat(client_id: str, group: str) -> object:
    body = {"clientID": client_id, "consumerDataSet": [], "producerDataSet": [{"groupName": group}],
            "heartbeatFingerprint": 0, "withoutSub": False}
    return request(RequestCode.HEART_BEAT, body=json.dumps(body).encode())


async def test_the_issue_attacks_are_refused_and_nothing_outside_the_store_changes(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """Issue 19's sequence: a heartbeat with group ``x/../../../outside_w``, a send to its retry topic,
    a delete of ``%RETRY%x/../../../victim``."""
    box, store, victim = sandbox(tmp_path)
    broker = start_broker("n", storePathRootDir=store)
    before = outside_store(box, store)

    for client, group in (("c1", WRITE_GROUP), ("c2", DELETE_GROUP)):
        resp = await call(broker.addr, consumer_heartbeat(client, group))
        assert resp.code == ResponseCode.SUCCESS, resp  # as Java 5.3.3: the illegal group is skipped, not an error
    names = await topic_names(broker.addr)
    assert not any("/" in n or ".." in n for n in names), names

    resp = await call(broker.addr, send_v2("%RETRY%" + WRITE_GROUP, 0, b"payload"))
    assert resp.code == ResponseCode.INVALID_PARAMETER, resp
    assert resp.remark == TOPIC_ILLEGAL_REMARK

    resp = await call(broker.addr, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "%RETRY%" + DELETE_GROUP}))
    assert resp.code == ResponseCode.INVALID_PARAMETER, resp
    assert resp.remark == TOPIC_ILLEGAL_REMARK

    assert (victim / "precious.txt").read_text() == "keep me"
    assert outside_store(box, store) == before, "nothing written or deleted outside the store"
    assert not list(box.rglob("outside_w"))
    resp = await call(broker.addr, consumer_heartbeat("c3", "GoodGroup"))  # the broker still serves
    assert resp.code == ResponseCode.SUCCESS and "%RETRY%GoodGroup" in await topic_names(broker.addr)


async def test_every_entry_point_refuses_a_path_like_name(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    box, store, _victim = sandbox(tmp_path)
    broker = start_broker("e", storePathRootDir=store)
    addr = broker.addr
    assert (await call(addr, create_topic("Good", queues=1))).code == ResponseCode.SUCCESS
    sent = await call(addr, send_v2("Good", 0, b"m"))
    assert sent.code == ResponseCode.SUCCESS
    phys = int((sent.ext("msgId") or "")[16:], 16)
    before = outside_store(box, store)
    bad = "../../victim"

    # topic creation (17): 5.3.3's code and TopicValidator's remark
    resp = await call(addr, create_topic(bad))
    assert (resp.code, resp.remark) == (ResponseCode.INVALID_PARAMETER, TOPIC_ILLEGAL_REMARK)
    for name, remark in (("", "The specified topic is blank."),
                         ("T" * 128, "The specified topic is longer than topic max length."),
                         ("ok\n", TOPIC_ILLEGAL_REMARK)):
        resp = await call(addr, create_topic(name))
        assert (resp.code, resp.remark) == (ResponseCode.INVALID_PARAMETER, remark), name
    # sends, new topic or not (auto-creation from TBW102 is on)
    for req in (send_v2(bad, 0, b"m"), send_v2("a/b", 0, b"m")):
        resp = await call(addr, req)
        assert (resp.code, resp.remark) == (ResponseCode.INVALID_PARAMETER, TOPIC_ILLEGAL_REMARK)
    # send-back (36) for an illegal group: 5.3.3 finds no subscription group for it
    back = {"offset": phys, "group": "g/../../x", "delayLevel": -1, "originMsgId": sent.ext("msgId"),
            "originTopic": "Good", "unitMode": False, "maxReconsumeTimes": 1}
    resp = await call(addr, request(RequestCode.CONSUMER_SEND_MSG_BACK, back))
    assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, resp
    assert (resp.remark or "").startswith("subscription group not exist, g/../../x")
    # a group so long that its %DLQ% topic is no legal topic: refused, nothing created
    resp = await call(addr, request(RequestCode.CONSUMER_SEND_MSG_BACK, {**back, "group": "G" * 200}))
    assert resp.code != ResponseCode.SUCCESS
    # subscription groups (200, 207)
    cfg = {"groupName": "../g", "consumeEnable": True}
    resp = await call(addr, request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(cfg).encode()))
    assert resp.code == ResponseCode.INVALID_PARAMETER and "illegal characters" in (resp.remark or ""), resp
    resp = await call(addr, request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "../g", "cleanOffset": True}))
    assert resp.code == ResponseCode.INVALID_PARAMETER and "illegal characters" in (resp.remark or ""), resp
    # offsets: a pull that commits, and UPDATE_CONSUMER_OFFSET, for an illegal group
    resp = await call(addr, pull("Good", 0, 0, group="g/../x"))
    assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, resp
    resp = await call(addr, request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                    {"consumerGroup": "g/../x", "topic": "Good", "queueId": 0, "commitOffset": 1}))
    assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, resp
    # a producer heartbeat with an illegal group registers nothing
    assert (await call(addr, producer_heartbeat("p1", "p/../g"))).code == ResponseCode.SUCCESS
    resp = await call(addr, request(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "p/../g"}))
    assert resp.code != ResponseCode.SUCCESS

    names = await topic_names(addr)
    assert not any("/" in n or ".." in n or "\n" in n for n in names), names
    groups = json.loads((await call(addr, request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))).body)
    assert not any("/" in g for g in groups["subscriptionGroupTable"])
    assert outside_store(box, store) == before
    assert sorted(os.listdir(store / "messages")) == ["Good"]


async def test_bad_names_on_disk_are_skipped_with_one_line_each(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """topics.json, subscriptionGroup.json, consumerOffset.json and message directories holding names that
    are no RocketMQ names (written by an older version, or by hand): the broker starts, skips them, says so."""
    box, store, victim = sandbox(tmp_path)
    first = start_broker("d1", storePathRootDir=store, flushConsumerOffsetInterval=100)
    assert (await call(first.addr, create_topic("Good", queues=1))).code == ResponseCode.SUCCESS
    assert (await call(first.addr, send_v2("Good", 0, b"kept"))).code == ResponseCode.SUCCESS
    first.terminate()
    config = store / "config"
    topics = json.loads((config / "topics.json").read_text())
    topics["topicConfigTable"]["../../victim"] = dict(topics["topicConfigTable"]["Good"], topicName="../../victim")
    (config / "topics.json").write_text(json.dumps(topics))
    groups = {"subscriptionGroupTable": {"../g": {"groupName": "../g"}, "OkGroup": {"groupName": "OkGroup"}},
              "forbiddenTable": {}, "dataVersion": {"counter": 1, "timestamp": 1, "stateVersion": 0}}
    (config / "subscriptionGroup.json").write_text(json.dumps(groups))
    offsets = {"offsetTable": {"Good@OkGroup": {"0": 1}, "../x@OkGroup": {"0": 5}, "Good@g/../h": {"0": 7}}}
    (config / "consumerOffset.json").write_text(json.dumps(offsets))
    messages = store / "messages"
    (messages / "bad name").mkdir()
    (messages / "Escape").symlink_to(victim, target_is_directory=True)  # a link out of the store
    before = outside_store(box, store)

    again = start_broker("d2", storePathRootDir=store)
    log = again.log()
    assert "Traceback" not in log
    for what in ("topics.json", "subscriptionGroup.json", "consumerOffset.json", "bad name", "Escape"):
        assert sum(what in line and "skip" in line for line in log.splitlines()) == 1, (what, log)
    names = await topic_names(again.addr)
    assert "Good" in names and "../../victim" not in names
    resp = await call(again.addr, pull("Good", 0, 0))
    assert resp.code == ResponseCode.SUCCESS and b"kept" in resp.body
    resp = await call(again.addr, request(RequestCode.QUERY_CONSUMER_OFFSET,
                                          {"consumerGroup": "OkGroup", "topic": "Good", "queueId": 0}))
    assert resp.ext("offset") == "1"
    groups_now = json.loads((await call(again.addr, request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))).body)
    assert "OkGroup" in groups_now["subscriptionGroupTable"] and "../g" not in groups_now["subscriptionGroupTable"]
    # the link out of the store is a legal topic name, but its directory resolves outside: refused, nothing written
    assert (await call(again.addr, create_topic("Escape", queues=1))).code == ResponseCode.SUCCESS
    resp = await call(again.addr, send_v2("Escape", 0, b"m"))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "outside" in (resp.remark or ""), resp
    resp = await call(again.addr, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Escape"}))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "outside" in (resp.remark or ""), resp
    assert outside_store(box, store) == before
    assert (victim / "precious.txt").read_text() == "keep me"
