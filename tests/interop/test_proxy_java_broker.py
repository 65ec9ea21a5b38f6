"""Apache's RocketMQ Proxy over an Apache Java broker in the local cluster:
``mqadmin start --broker-impl java:5.3.3 --proxy 5.3.3``.

The Proxy receives with POP, which a Java 5.x broker serves only with its timer wheel on (off, it answers
"pop message is forbidden because timerWheelEnable is false"): the runner turns the wheel on for Java
brokers when --proxy is given. A Python gRPC client (PyPI's ``rocketmq-python-client``) sends through the
Proxy and receives and acks every message with a simple consumer. The Proxy listens on 127.0.0.1 only
(the Java roles' loopback shim), and every process is stopped at the end, pass or fail.

The stub's own standard: the Java client flows test_proxy_clients runs over our broker stub
(:mod:`tests.interop.grpc_flows`, our GrpcFlows program on rocketmq-client-java: receive, ack,
change-invisible, redelivery after the invisible time with its delivery attempt, a push consumer's failed
message delivered again, a delay message no earlier than asked) run here over the Java 5.3.3 broker, in a
JVM started with the module (it overlaps the Python test), and pass the same checks. (The Python flows
are not run twice: a minute of CI for what the Java flows already show.)
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio

from tests.interop import grpc_flows, harness_build
from tests.mqadmin_procs import cli_env, mqadmin, stop_all

VERSION = "5.3.3"
TOPIC = "ProxyJava"
WAIT = 90.0  # s: bounded; a busy machine may need most of it


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    try:
        harness_build.resolve_servers()
        builds = harness_build.build_extra()
    except harness_build.HarnessBuildError as exc:
        pytest.fail(f"interop harness: {exc}", pytrace=False)
    base = tmp_path_factory.mktemp("proxy-java")
    directory = base / "cluster"
    home = os.environ.get("HOME")
    os.environ["HOME"] = str(base)  # the Python client logs to ~/logs/rocketmq_python from its first import
    flows: list[subprocess.Popen[str]] = []
    try:
        done = mqadmin("start", "--namesrvs", "1", "--brokers", "1", "--broker-impl", f"java:{VERSION}",
                       "--proxy", VERSION, "--topics", TOPIC, "--dir", str(directory), "--json",
                       env=cli_env(base / "state"), in_process=False, timeout=900)
        assert done.returncode == 0, done.stderr
        state = json.loads(done.stdout)
        broker = next(p["addr"] for p in state["procs"] if p["kind"] == "broker")
        trio.run(grpc_flows.admin, broker,
                 *[grpc_flows.topic_request(t, kind) for t, kind in grpc_flows.FLOW_TOPICS.items()])
        flows.append(grpc_flows.java_program(builds[harness_build.GRPC_CLIENT], base / "java-flows",
                                             "interop.grpc.GrpcFlows", [state["grpcEndpoint"], *grpc_flows.JAVA_FLOWS]))
        state["javaFlows"] = flows[0]
        yield directory, state
        # No graceful `mqadmin stop` here: a Java broker's and Proxy's shutdown took ~29 s of CI, and it is
        # test_java_local_cluster.py that checks a graceful stop of Java processes; stop_all leaves nothing.
    finally:
        for program in flows:
            if program.poll() is None:
                program.kill()
                program.wait(10)
        stop_all(directory)
        if home is not None:
            os.environ["HOME"] = home


def test_the_proxy_runs_over_the_java_broker_on_loopback(started: tuple[Path, dict[str, Any]]) -> None:
    _, state = started
    procs = {p["kind"]: p for p in state["procs"]}
    assert (procs["broker"]["impl"], procs["broker"]["version"]) == ("java", VERSION)
    assert (procs["proxy"]["impl"], procs["proxy"]["version"]) == ("java", VERSION)
    assert state["grpcEndpoint"] == procs["proxy"]["addr"]
    listening = {f"{c.laddr.ip}:{c.laddr.port}" for c in psutil.Process(procs["proxy"]["pid"]).net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN}
    assert procs["proxy"]["addr"] in listening and all(a.startswith("127.0.0.1:") for a in listening), listening


def test_python_client_sends_and_receives_through_the_proxy(started: tuple[Path, dict[str, Any]]) -> None:
    from rocketmq.v5.client import ClientConfiguration, Credentials
    from rocketmq.v5.consumer import SimpleConsumer
    from rocketmq.v5.exception import ClientException
    from rocketmq.v5.model import FilterExpression, Message
    from rocketmq.v5.producer import Producer

    config = ClientConfiguration(started[1]["grpcEndpoint"], Credentials(), request_timeout=10)
    producer = Producer(config, (TOPIC,))
    producer.startup()
    consumer = SimpleConsumer(config, "ProxyJavaGroup", {TOPIC: FilterExpression("*")}, await_duration=3)
    consumer.startup()
    try:
        for i in range(5):
            msg = Message()
            msg.topic, msg.body, msg.tag = TOPIC, f"j{i}".encode(), "TagA"
            assert producer.send(msg).message_id
        got: dict[str, Any] = {}
        errors: list[str] = []
        end = time.monotonic() + WAIT
        while len(got) < 5 and time.monotonic() < end:
            try:
                for msg in consumer.receive(16, 10):
                    got[msg.body.decode()] = msg
                    consumer.ack(msg)
            except ClientException as exc:  # e.g. the Proxy has not the client's settings yet right after start
                errors.append(str(exc)[:200])
                time.sleep(0.5)
        assert sorted(got) == [f"j{i}" for i in range(5)], errors[-3:]
    finally:
        consumer.shutdown()
        producer.shutdown()


# --------------------------------------------------------------------------------------------------
# the flows the stub is held to (tests.interop.grpc_flows), over the Java broker


def test_java_client_flows_as_on_the_stub(started: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    base = Path(started[0]).parent
    results = grpc_flows.java_flow_results(started[1]["javaFlows"], base / "java-flows")
    grpc_flows.check_java_flows(results)
    with capsys.disabled():  # beside the stub's in test_proxy_clients (docs/INTEROP.md)
        print(f"\nJava 5.3.3 broker behind the Proxy: {grpc_flows.figures(results)}")
