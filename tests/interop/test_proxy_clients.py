"""RocketMQ 5 clients through Apache's Proxy 5.3.3 (cluster mode) over our NameServer and broker stub.

The cluster is ``mqadmin start --namesrvs 1 --brokers 1 --proxy 5.3.3``: our ``mqnamesrv`` and
``mqbroker-stub`` with Apache's Proxy from Maven Central (resolved by mqadmin.rocketmq; the harness build
has brought it into ~/.m2), which reads routes from the NameServer and serves Apache's gRPC clients with
remoting calls to the stub: sends, POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME,
GET_SUBSCRIPTIONGROUP_CONFIG, CONSUMER_SEND_MSG_BACK. The Python client is PyPI's
``rocketmq-python-client`` (imported from ``rocketmq.v5``: the C++ client's wheel, ``rocketmq``, installs a
package of the same name, and whichever is installed last owns ``rocketmq/__init__.py``); the Java client
is ``rocketmq-client-java`` driven by our program (``interop/java/grpc``, its flows in one JVM, started with
the module so that it overlaps the Python tests). RocketMQ Dashboard's broker calls, made with
rocketmq-tools' DefaultMQAdminExt and the VIP channel on (``interop/java/admin5``), run against the same
stub, their JVM started with the Proxy's.

One Proxy JVM for the module, bound to loopback by the harness's LD_PRELOAD shim; every Java process is
stopped at the end, pass or fail (``mqadmin stop``, then whatever still names the cluster's directory).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from remoting.transport import connect
from tests.interop import harness_build
from tests.interop.harness_build import JavaBuild
from tests.interop.java_procs import java_command, java_env, json_lines, rocketmq_home
from tests.mqadmin_procs import cli_env, mqadmin, stop_all

PROXY_VERSION = "5.3.3"
#: topic -> its message type (the Proxy and the clients refuse a delay message on a NORMAL topic)
TOPICS = {"PySimple": "NORMAL", "PyPush": "NORMAL", "PyDelay": "DELAY", "PyDlq": "NORMAL",
          "JSimple": "NORMAL", "JPush": "NORMAL", "JDelay": "DELAY", "DashTopic": "NORMAL"}
DLQ_GROUP = "PyDlqGroup"
WAIT = 60.0  # s: every wait is bounded; a busy machine may need most of it


@dataclass
class ProxyCluster:
    namesrv: str
    broker: str
    endpoint: str  # the Proxy's gRPC endpoint, as `mqadmin start` reported it
    java_flows: subprocess.Popen[str]
    dashboard_calls: subprocess.Popen[str]
    base: Path


async def _admin(addr: str, *reqs: Any) -> None:
    async with connect(addr) as conn:
        for req in reqs:
            resp = await conn.invoke(req)
            assert resp.code == ResponseCode.SUCCESS, resp.remark


def _topic(name: str, kind: str) -> Any:
    return request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": name, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0, "order": "false", "attributes": f"+message.type={kind}"})


def _group(name: str, retry_max: int) -> Any:
    body = json.dumps({"groupName": name, "consumeEnable": True, "consumeBroadcastEnable": False,
                       "retryMaxTimes": retry_max, "retryQueueNums": 1, "brokerId": 0}).encode()
    return request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)


@pytest.fixture(scope="module")
def proxy_cluster(loopback_shim: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyCluster]:
    try:
        builds = harness_build.build_extra()
    except harness_build.HarnessBuildError as exc:
        pytest.fail(f"interop harness: {exc}", pytrace=False)
    base = tmp_path_factory.mktemp("proxy")
    cluster_dir = base / "cluster"
    home = os.environ.get("HOME")
    os.environ["HOME"] = str(base)  # the Python client logs to ~/logs/rocketmq_python from its first import
    programs: list[subprocess.Popen[str]] = []
    try:
        env = cli_env(base / "state", LD_PRELOAD=str(loopback_shim))  # the Proxy binds 127.0.0.1 only
        started = mqadmin("start", "--namesrvs", "1", "--brokers", "1", "--register-period", "1000",
                          "--proxy", PROXY_VERSION, "--dir", str(cluster_dir), "--json",
                          env=env, in_process=False, timeout=600)
        assert started.returncode == 0, started.stderr
        procs = {p["kind"]: p for p in json.loads(started.stdout)["procs"]}
        assert {"namesrv", "broker", "proxy"} <= set(procs)  # and the fault proxy on the broker's paths
        namesrv, broker = procs["namesrv"]["addr"], procs["broker"]["addr"]
        endpoint = json.loads(started.stdout)["grpcEndpoint"]
        assert endpoint == procs["proxy"]["addr"]
        trio.run(_admin, broker, *[_topic(t, kind) for t, kind in TOPICS.items()], _group(DLQ_GROUP, 1))
        programs.append(_java_program(builds[harness_build.DASHBOARD_ADMIN], base / "dashboard",
                                      "interop.admin.DashboardCalls", [namesrv, "DashTopic", "DashGroup"]))
        programs.append(_java_program(builds[harness_build.GRPC_CLIENT], base / "java-flows", "interop.grpc.GrpcFlows",
                                      [endpoint, "simple:JSimple:JSimpleGroup", "push:JPush:JPushGroup",
                                       "delay:JDelay:JDelayGroup:3000"]))
        yield ProxyCluster(namesrv, broker, endpoint, programs[1], programs[0], base)
    finally:
        for program in programs:
            if program.poll() is None:
                program.kill()
                program.wait(10)
        try:
            stopped = mqadmin("stop", "--dir", str(cluster_dir), env=cli_env(base / "state"), in_process=False,
                              timeout=120)
        finally:
            stop_all(cluster_dir)
            if home is not None:
                os.environ["HOME"] = home
    assert stopped.returncode == 0, stopped.stderr


def _java_program(build: JavaBuild, home: Path, main: str, args: list[str]) -> subprocess.Popen[str]:
    """One of our Java programs, running while the Python tests run (its stdout read by its test)."""
    rocketmq_home(home)
    with open(home / "stderr.log", "w") as err:
        return subprocess.Popen(java_command(build, main, args, home), stdout=subprocess.PIPE, stderr=err, text=True,
                                stdin=subprocess.DEVNULL, cwd=home, env=java_env(home))


def _output(program: subprocess.Popen[str], home: Path) -> tuple[str, str]:
    """(stdout, stderr) of a program started with the module, waited for (bounded)."""
    try:
        out, _ = program.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        program.kill()
        out, _ = program.communicate()
    return out, (home / "stderr.log").read_text(errors="replace")


# --------------------------------------------------------------------------------------------------
# Python client


def _config(endpoint: str) -> Any:
    from rocketmq.v5.client import ClientConfiguration, Credentials

    return ClientConfiguration(endpoint, Credentials(), request_timeout=10)


def _message(topic: str, body: str, *, deliver_at_s: int | None = None) -> Any:
    from rocketmq.v5.model import Message

    msg = Message()
    msg.topic, msg.body, msg.tag = topic, body.encode(), "TagA"
    msg.keys = f"key-{body}"
    if deliver_at_s is not None:
        msg.delivery_timestamp = deliver_at_s
    return msg


def _receive(consumer: Any, invisible_s: int) -> list[Any]:
    """One receive; the Proxy may not have the client's settings yet right after start (it answers an
    internal error naming them then): that is an empty receive here, and the caller tries again."""
    from rocketmq.v5.exception import ClientException

    try:
        return list(consumer.receive(32, invisible_s))
    except ClientException as exc:
        if "settings" not in str(exc):
            raise
        time.sleep(0.5)
        return []


def _receive_until(consumer: Any, invisible_s: int, done: Any, timeout: float = WAIT) -> list[Any]:
    got: list[Any] = []
    end = time.monotonic() + timeout
    while not done(got) and time.monotonic() < end:
        got.extend(_receive(consumer, invisible_s))
    return got


def test_python_producer_and_simple_consumer(proxy_cluster: ProxyCluster) -> None:
    from rocketmq.v5.consumer import SimpleConsumer
    from rocketmq.v5.model import FilterExpression
    from rocketmq.v5.producer import Producer

    config = _config(proxy_cluster.endpoint)
    producer = Producer(config, ("PySimple",))
    producer.startup()
    consumer = SimpleConsumer(config, "PySimpleGroup", {"PySimple": FilterExpression("*")}, await_duration=3)
    consumer.startup()
    try:
        sent = [producer.send(_message("PySimple", f"m{i}")).message_id for i in range(10)]
        assert len(set(sent)) == 10
        first = _receive_until(consumer, 3, lambda got: len({m.body for m in got}) >= 10)
        by_body = {m.body.decode(): m for m in first}
        assert sorted(by_body) == sorted(f"m{i}" for i in range(10))  # every message, once
        assert all(m.delivery_attempt == 1 for m in first) and len(first) == 10
        for i in range(6):
            consumer.ack(by_body[f"m{i}"])
        changed_at = time.monotonic()  # before the change: the broker counts from its answer's time
        for name in ("m6", "m7"):
            consumer.change_invisible_duration(by_body[name], 1)
        # m6 and m7 come back after their new 1 s, m8 and m9 after their 3 s; the acked ones never
        again = _receive_until(consumer, 30, lambda got: len({m.body for m in got}) >= 4)  # 30 s: not a third time
        assert sorted(m.body.decode() for m in again) == ["m6", "m7", "m8", "m9"]
        assert all(m.delivery_attempt == 2 for m in again)
        assert time.monotonic() - changed_at >= 1.0
        for m in again:
            consumer.ack(m)
        assert _receive_until(consumer, 5, lambda got: False, timeout=2) == []  # nothing more
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_python_push_consumer_redelivers_a_failed_message(proxy_cluster: ProxyCluster) -> None:
    from rocketmq.v5.consumer import ConsumeResult, MessageListener, PushConsumer
    from rocketmq.v5.model import FilterExpression
    from rocketmq.v5.producer import Producer

    deliveries: list[tuple[str, int]] = []
    lock = threading.Lock()

    class Listener(MessageListener):
        def consume(self, message: Any) -> Any:
            body = message.body.decode()
            with lock:
                deliveries.append((body, message.delivery_attempt))
            return ConsumeResult.FAILURE if body == "fail-me" and message.delivery_attempt == 1 else ConsumeResult.SUCCESS

    config = _config(proxy_cluster.endpoint)
    consumer = PushConsumer(config, "PyPushGroup", Listener(), {"PyPush": FilterExpression("*")})
    consumer.startup()
    producer = Producer(config, ("PyPush",))
    producer.startup()
    try:
        for body in ("p0", "fail-me", "p2"):
            producer.send(_message("PyPush", body))
        end = time.monotonic() + WAIT
        while time.monotonic() < end:
            with lock:
                if ("fail-me", 2) in deliveries and {"p0", "p2"} <= {b for b, _ in deliveries}:
                    break
            time.sleep(0.2)
        time.sleep(1.0)  # nothing more may come
        with lock:
            assert sorted(deliveries) == [("fail-me", 1), ("fail-me", 2), ("p0", 1), ("p2", 1)]
    finally:
        producer.shutdown()
        consumer.shutdown()


def test_python_delay_message_comes_no_earlier_than_asked(proxy_cluster: ProxyCluster) -> None:
    from rocketmq.v5.consumer import SimpleConsumer
    from rocketmq.v5.model import FilterExpression
    from rocketmq.v5.producer import Producer

    config = _config(proxy_cluster.endpoint)
    consumer = SimpleConsumer(config, "PyDelayGroup", {"PyDelay": FilterExpression("*")}, await_duration=3)
    consumer.startup()
    producer = Producer(config, ("PyDelay",))
    producer.startup()
    try:
        _receive(consumer, 5)  # the group's position, before the message is stored
        deliver_at = int(time.time()) + 3  # the Python client sends whole seconds
        producer.send(_message("PyDelay", "later", deliver_at_s=deliver_at))
        got = _receive_until(consumer, 5, bool)
        received_at = time.time()
        assert [m.body for m in got] == [b"later"]
        assert received_at >= deliver_at
        consumer.ack(got[0])
    finally:
        producer.shutdown()
        consumer.shutdown()


def test_dead_letter_after_the_groups_retry_limit(proxy_cluster: ProxyCluster) -> None:
    """retryMaxTimes=1: two deliveries, then the Proxy forwards it to %DLQ%<group> (send-back, delayLevel -1)."""
    from rocketmq.v5.consumer import SimpleConsumer
    from rocketmq.v5.model import FilterExpression
    from rocketmq.v5.producer import Producer

    config = _config(proxy_cluster.endpoint)
    consumer = SimpleConsumer(config, DLQ_GROUP, {"PyDlq": FilterExpression("*")}, await_duration=2)
    consumer.startup()
    producer = Producer(config, ("PyDlq",))
    producer.startup()
    try:
        producer.send(_message("PyDlq", "poison"))
        attempts = _receive_until(consumer, 1, lambda got: len(got) >= 2)  # never acked
        assert [m.delivery_attempt for m in attempts] == [1, 2]
        # the third POP finds it past the limit: the Proxy sends it back with delayLevel -1 and acks it
        broker, dlq = proxy_cluster.broker, f"%DLQ%{DLQ_GROUP}"
        end = time.monotonic() + WAIT
        more: list[Any] = []
        while not trio.run(_holds, broker, dlq, b"poison") and time.monotonic() < end:
            more.extend(_receive(consumer, 1))
        assert trio.run(_holds, broker, dlq, b"poison") and more == []
        assert _receive_until(consumer, 1, lambda got: False, timeout=2) == []  # not again
    finally:
        producer.shutdown()
        consumer.shutdown()


async def _holds(addr: str, topic: str, body: bytes) -> bool:
    """Whether the broker's topic (one queue) holds ``body`` now."""
    from tests.broker_wire import pull

    async with connect(addr) as conn:
        resp = await conn.invoke(pull(topic, 0, 0))
        return resp.code == ResponseCode.SUCCESS and body in resp.body


# --------------------------------------------------------------------------------------------------
# Java client (rocketmq-client-java), its flows started with the module


def _java_results(cluster: ProxyCluster) -> dict[str, dict[str, Any]]:
    out, stderr = _output(cluster.java_flows, cluster.base / "java-flows")
    results = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
            results[result["flow"]] = result
    assert set(results) == {"simple", "push", "delay"}, f"{out}\n{stderr[-3000:]}"
    return results


def test_java_client_flows(proxy_cluster: ProxyCluster) -> None:
    results = _java_results(proxy_cluster)
    simple = results["simple"]
    assert "error" not in simple, simple
    assert simple["sent"] == 5 and sorted(simple["first"]) == ["s0", "s1", "s2", "s3", "s4"]
    assert simple["firstAttempts"] == [1] * 5
    again = simple["again"]
    assert sorted(again) == ["s3", "s4"] and all(v["attempt"] == 2 for v in again.values())
    assert again["s3"]["afterMs"] >= 1000  # made visible again no earlier than its new invisible time
    push = results["push"]
    assert "error" not in push, push
    assert sorted(push["deliveries"]) == ["fail-me#1", "fail-me#2", "p0#1", "p2#1"]
    delay = results["delay"]
    assert "error" not in delay, delay
    assert delay["body"] == "later" and delay["receivedAt"] >= delay["deliverAt"]


# --------------------------------------------------------------------------------------------------
# RocketMQ Dashboard's admin calls (rocketmq-tools DefaultMQAdminExt, VIP channel on)


def test_dashboard_admin_calls_over_the_vip_port(proxy_cluster: ProxyCluster) -> None:
    out, stderr = _output(proxy_cluster.dashboard_calls, proxy_cluster.base / "dashboard")
    calls = {line["call"]: line for line in json_lines(out) if "call" in line}
    assert proxy_cluster.dashboard_calls.returncode == 0 and len(calls) == 12, f"{out}\n{stderr[-3000:]}"
    failed = {name: c.get("error") for name, c in calls.items() if not c["ok"]}
    assert failed == {}, failed
    assert calls["consumed"]["consumed"] is True
    assert calls["clusterInfo"]["brokers"] == {"broker-a/0": "V5_3_3"}
    topics = calls["topicList"]
    assert "DashTopic" in topics["topics"] and {"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRACE_TOPIC"} <= set(topics["system"])
    assert calls["topicStats"]["queues"] == 2 and calls["topicStats"]["messages"] == 1
    assert calls["consumerConnection"]["clients"] == [calls["consumerConnection"]["clientId"]]
    assert calls["consumeStats"]["queues"] == 2 and calls["consumeStats"]["diff"] == 0 and calls["runningInfo"]["subscriptions"] >= 1
    assert calls["producerConnection"]["producers"] == 1
    assert calls["queryByKey"]["found"] == 1 and calls["viewMessage"]["body"] == "dashboard"
    assert calls["consumeDirectly"]["result"] == "CR_SUCCESS"
