"""Apache's RocketMQ Proxy over an Apache Java broker in the local cluster:
``mqadmin start --broker-impl java:5.3.3 --proxy 5.3.3``.

The Proxy receives with POP, which a Java 5.x broker serves only with its timer wheel on (off, it answers
"pop message is forbidden because timerWheelEnable is false"): the runner turns the wheel on for Java
brokers when --proxy is given. A Python gRPC client (PyPI's ``rocketmq-python-client``) sends through the
Proxy and receives and acks every message with a simple consumer. The Proxy listens on 127.0.0.1 only
(the Java roles' loopback shim), and every process is stopped at the end, pass or fail.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.interop import harness_build
from tests.mqadmin_procs import cli_env, mqadmin, stop_all

VERSION = "5.3.3"
TOPIC = "ProxyJava"
WAIT = 90.0  # s: bounded; a busy machine may need most of it


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    try:
        harness_build.resolve_servers()
    except harness_build.HarnessBuildError as exc:
        pytest.fail(f"interop harness: {exc}", pytrace=False)
    base = tmp_path_factory.mktemp("proxy-java")
    directory = base / "cluster"
    home = os.environ.get("HOME")
    os.environ["HOME"] = str(base)  # the Python client logs to ~/logs/rocketmq_python from its first import
    try:
        done = mqadmin("start", "--namesrvs", "1", "--brokers", "1", "--broker-impl", f"java:{VERSION}",
                       "--proxy", VERSION, "--topics", TOPIC, "--dir", str(directory), "--json",
                       env=cli_env(base / "state"), in_process=False, timeout=900)
        assert done.returncode == 0, done.stderr
        yield directory, json.loads(done.stdout)
        stopped = mqadmin("stop", "--dir", str(directory), env=cli_env(base / "state"), in_process=False,
                          timeout=180)
        assert stopped.returncode == 0, stopped.stderr
    finally:
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
