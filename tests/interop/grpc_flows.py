"""RocketMQ 5 client flows through Apache's Proxy, shared by the Proxy's interop modules: the same flows
and the same checks over our broker stub (test_proxy_clients) and over Apache's Java 5.3.3 broker
(test_proxy_java_broker), so that invisible time, ack, change-invisible, redelivery and delay are held to
one standard on both.

The Python flows use PyPI's ``rocketmq-python-client`` in-process (imported from ``rocketmq.v5``); the
Java ones are our GrpcFlows program (``interop/java/grpc``) on ``rocketmq-client-java``, a JVM started
with the module and read by :func:`java_flow_results`. Every wait is bounded (:data:`WAIT`); nothing here
asserts how long something took, only what came and in which order (a redelivery no earlier than the
invisible time asked, a delay message no earlier than its delivery time).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from remoting.transport import connect
from tests.interop.harness_build import JavaBuild
from tests.interop.java_procs import java_command, java_env, rocketmq_home

WAIT = 60.0  # s: every wait is bounded; a busy machine may need most of it
#: GrpcFlows' arguments after the endpoint: its three flows, each on a topic and group of its own
JAVA_FLOWS = ["simple:JSimple:JSimpleGroup", "push:JPush:JPushGroup", "delay:JDelay:JDelayGroup:3000"]
#: the topics the flows use -> their message type (the Proxy and the clients refuse a delay message on a
#: NORMAL topic)
FLOW_TOPICS = {"PySimple": "NORMAL", "PyPush": "NORMAL", "PyDelay": "DELAY",
               "JSimple": "NORMAL", "JPush": "NORMAL", "JDelay": "DELAY"}


async def admin(addr: str, *reqs: Any) -> None:
    async with connect(addr) as conn:
        for req in reqs:
            resp = await conn.invoke(req)
            assert resp.code == ResponseCode.SUCCESS, resp.remark


def topic_request(name: str, kind: str) -> Any:
    return request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": name, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0, "order": "false", "attributes": f"+message.type={kind}"})


def java_program(build: JavaBuild, home: Path, main: str, args: list[str]) -> subprocess.Popen[str]:
    """One of our Java programs, running while the Python tests run (its stdout read by its test)."""
    rocketmq_home(home)
    with open(home / "stderr.log", "w") as err:
        return subprocess.Popen(java_command(build, main, args, home), stdout=subprocess.PIPE, stderr=err, text=True,
                                stdin=subprocess.DEVNULL, cwd=home, env=java_env(home))


def program_output(program: subprocess.Popen[str], home: Path) -> tuple[str, str]:
    """(stdout, stderr) of a program started with the module, waited for (bounded)."""
    try:
        out, _ = program.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        program.kill()
        out, _ = program.communicate()
    return out, (home / "stderr.log").read_text(errors="replace")


def config(endpoint: str) -> Any:
    from rocketmq.v5.client import ClientConfiguration, Credentials

    return ClientConfiguration(endpoint, Credentials(), request_timeout=10)


def message(topic: str, body: str, *, deliver_at_s: int | None = None) -> Any:
    from rocketmq.v5.model import Message

    msg = Message()
    msg.topic, msg.body, msg.tag = topic, body.encode(), "TagA"
    msg.keys = f"key-{body}"
    if deliver_at_s is not None:
        msg.delivery_timestamp = deliver_at_s
    return msg


def receive(consumer: Any, invisible_s: int) -> list[Any]:
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


def receive_until(consumer: Any, invisible_s: int, done: Any, timeout: float = WAIT) -> list[Any]:
    got: list[Any] = []
    end = time.monotonic() + timeout
    while not done(got) and time.monotonic() < end:
        got.extend(receive(consumer, invisible_s))
    return got


def python_simple_flow(endpoint: str, topic: str, group: str) -> None:
    """10 sent; all received once; 6 acked, 2 made visible again in 1 s, 2 left to their 3 s invisible
    time: those 4 come again (delivery attempt 2), and nothing more."""
    from rocketmq.v5.consumer import SimpleConsumer
    from rocketmq.v5.model import FilterExpression
    from rocketmq.v5.producer import Producer

    settings = config(endpoint)
    producer = Producer(settings, (topic,))
    producer.startup()
    consumer = SimpleConsumer(settings, group, {topic: FilterExpression("*")}, await_duration=3)
    consumer.startup()
    try:
        sent = [producer.send(message(topic, f"m{i}")).message_id for i in range(10)]
        assert len(set(sent)) == 10
        first = receive_until(consumer, 3, lambda got: len({m.body for m in got}) >= 10)
        by_body = {m.body.decode(): m for m in first}
        assert sorted(by_body) == sorted(f"m{i}" for i in range(10))  # every message, once
        assert all(m.delivery_attempt == 1 for m in first) and len(first) == 10
        for i in range(6):
            consumer.ack(by_body[f"m{i}"])
        changed_at = time.monotonic()  # before the change: the broker counts from its answer's time
        for name in ("m6", "m7"):
            consumer.change_invisible_duration(by_body[name], 1)
        # m6 and m7 come back after their new 1 s, m8 and m9 after their 3 s; the acked ones never
        again = receive_until(consumer, 30, lambda got: len({m.body for m in got}) >= 4)  # 30 s: not a third time
        assert sorted(m.body.decode() for m in again) == ["m6", "m7", "m8", "m9"]
        assert all(m.delivery_attempt == 2 for m in again)
        assert time.monotonic() - changed_at >= 1.0
        for m in again:
            consumer.ack(m)
        assert receive_until(consumer, 5, lambda got: False, timeout=2) == []  # nothing more
    finally:
        consumer.shutdown()
        producer.shutdown()


def python_push_flow(endpoint: str, topic: str, group: str) -> None:
    """A push consumer fails the first delivery of "fail-me": it comes again (attempt 2), the others once."""
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

    settings = config(endpoint)
    consumer = PushConsumer(settings, group, Listener(), {topic: FilterExpression("*")})
    consumer.startup()
    producer = Producer(settings, (topic,))
    producer.startup()
    try:
        for body in ("p0", "fail-me", "p2"):
            producer.send(message(topic, body))
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


def python_delay_flow(endpoint: str, topic: str, group: str) -> None:
    """A message with a delivery time 3 s ahead is received no earlier than that."""
    from rocketmq.v5.consumer import SimpleConsumer
    from rocketmq.v5.model import FilterExpression
    from rocketmq.v5.producer import Producer

    settings = config(endpoint)
    consumer = SimpleConsumer(settings, group, {topic: FilterExpression("*")}, await_duration=3)
    consumer.startup()
    producer = Producer(settings, (topic,))
    producer.startup()
    try:
        receive(consumer, 5)  # the group's position, before the message is stored
        deliver_at = int(time.time()) + 3  # the Python client sends whole seconds
        producer.send(message(topic, "later", deliver_at_s=deliver_at))
        got = receive_until(consumer, 5, bool)
        received_at = time.time()
        assert [m.body for m in got] == [b"later"]
        assert received_at >= deliver_at
        consumer.ack(got[0])
    finally:
        producer.shutdown()
        consumer.shutdown()


def java_flow_results(program: subprocess.Popen[str], home: Path) -> dict[str, dict[str, Any]]:
    """The RESULT lines of our GrpcFlows program (interop/java/grpc), by flow."""
    out, stderr = program_output(program, home)
    results = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
            results[result["flow"]] = result
    assert set(results) == {"simple", "push", "delay"}, f"{out}\n{stderr[-3000:]}"
    return results


def check_java_flows(results: dict[str, dict[str, Any]]) -> None:
    """What GrpcFlows must have seen (its doc): the same on every broker behind the Proxy."""
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


def figures(results: dict[str, dict[str, Any]]) -> str:
    """The flows' timings, for a reader comparing brokers (never judged: they are wall-clock times)."""
    again, delay = results["simple"]["again"], results["delay"]
    return (f"redelivered {again['s3']['afterMs']} ms after a change-invisible to 1 s, {again['s4']['afterMs']} ms "
            f"after it for the one left to its 4 s invisible time; the 3 s delay message came "
            f"{delay['receivedAt'] - delay['deliverAt']} ms after its delivery time")
