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
from tests.interop import grpc_flows, harness_build
from tests.interop.grpc_flows import WAIT, admin, java_program, program_output, receive, receive_until, topic_request
from tests.interop.java_procs import json_lines
from tests.mqadmin_procs import cli_env, mqadmin, stop_all

PROXY_VERSION = "5.3.3"
#: topic -> its message type (the Proxy and the clients refuse a delay message on a NORMAL topic)
TOPICS = {**grpc_flows.FLOW_TOPICS, "PyDlq": "NORMAL", "DashTopic": "NORMAL"}
DLQ_GROUP = "PyDlqGroup"


@dataclass
class ProxyCluster:
    namesrv: str
    broker: str
    endpoint: str  # the Proxy's gRPC endpoint, as `mqadmin start` reported it
    java_flows: subprocess.Popen[str]
    dashboard_calls: subprocess.Popen[str]
    base: Path


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
        trio.run(admin, broker, *[topic_request(t, kind) for t, kind in TOPICS.items()], _group(DLQ_GROUP, 1))
        programs.append(java_program(builds[harness_build.DASHBOARD_ADMIN], base / "dashboard",
                                     "interop.admin.DashboardCalls", [namesrv, "DashTopic", "DashGroup"]))
        programs.append(java_program(builds[harness_build.GRPC_CLIENT], base / "java-flows", "interop.grpc.GrpcFlows",
                                     [endpoint, *grpc_flows.JAVA_FLOWS]))
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


# --------------------------------------------------------------------------------------------------
# Python client (the flows also run over a Java broker: test_proxy_java_broker)


def test_python_producer_and_simple_consumer(proxy_cluster: ProxyCluster) -> None:
    grpc_flows.python_simple_flow(proxy_cluster.endpoint, "PySimple", "PySimpleGroup")


def test_python_push_consumer_redelivers_a_failed_message(proxy_cluster: ProxyCluster) -> None:
    grpc_flows.python_push_flow(proxy_cluster.endpoint, "PyPush", "PyPushGroup")


def test_python_delay_message_comes_no_earlier_than_asked(proxy_cluster: ProxyCluster) -> None:
    grpc_flows.python_delay_flow(proxy_cluster.endpoint, "PyDelay", "PyDelayGroup")


def test_dead_letter_after_the_groups_retry_limit(proxy_cluster: ProxyCluster) -> None:
    """retryMaxTimes=1: two deliveries, then the Proxy forwards it to %DLQ%<group> (send-back, delayLevel -1)."""
    from rocketmq.v5.consumer import SimpleConsumer
    from rocketmq.v5.model import FilterExpression
    from rocketmq.v5.producer import Producer

    settings = grpc_flows.config(proxy_cluster.endpoint)
    consumer = SimpleConsumer(settings, DLQ_GROUP, {"PyDlq": FilterExpression("*")}, await_duration=2)
    consumer.startup()
    producer = Producer(settings, ("PyDlq",))
    producer.startup()
    try:
        producer.send(grpc_flows.message("PyDlq", "poison"))
        attempts = receive_until(consumer, 1, lambda got: len(got) >= 2)  # never acked
        assert [m.delivery_attempt for m in attempts] == [1, 2]
        # the third POP finds it past the limit: the Proxy sends it back with delayLevel -1 and acks it
        broker, dlq = proxy_cluster.broker, f"%DLQ%{DLQ_GROUP}"
        end = time.monotonic() + WAIT
        more: list[Any] = []
        while not trio.run(_holds, broker, dlq, b"poison") and time.monotonic() < end:
            more.extend(receive(consumer, 1))
        assert trio.run(_holds, broker, dlq, b"poison") and more == []
        assert receive_until(consumer, 1, lambda got: False, timeout=2) == []  # not again
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


def test_java_client_flows(proxy_cluster: ProxyCluster, capsys: pytest.CaptureFixture[str]) -> None:
    results = grpc_flows.java_flow_results(proxy_cluster.java_flows, proxy_cluster.base / "java-flows")
    grpc_flows.check_java_flows(results)  # the same checks as over a Java broker (test_proxy_java_broker)
    with capsys.disabled():
        print(f"\nbroker stub behind the Proxy: {grpc_flows.figures(results)}")


# --------------------------------------------------------------------------------------------------
# RocketMQ Dashboard's admin calls (rocketmq-tools DefaultMQAdminExt, VIP channel on)


def test_dashboard_admin_calls_over_the_vip_port(proxy_cluster: ProxyCluster) -> None:
    out, stderr = program_output(proxy_cluster.dashboard_calls, proxy_cluster.base / "dashboard")
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
