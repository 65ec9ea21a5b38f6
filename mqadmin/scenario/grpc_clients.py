"""RocketMQ 5 (gRPC) clients as a scenario's load and consumers, through the cluster's Proxy.

``client: grpc-python`` runs ``interop/python/grpc_scenario.py`` (PyPI's ``rocketmq-python-client``) in
mqadmin's own Python; ``client: grpc-java:VERSION`` runs our Java programs on ``rocketmq-client-java``
(:mod:`mqadmin.rocketmq.harness`). Both speak the line protocol of the other real clients
(:mod:`mqadmin.scenario.realclients`) and are given the Proxy's gRPC endpoint instead of the NameServers:
a RocketMQ 5 client never talks to a NameServer or a broker.

What differs from a remoting client's lines is read here. A send's answer does not say which broker
stored the message (:func:`send_record`); a consumed message names no broker, queue or offset of its
own: its receipt handle does (the broker's POP check-point info, which the Proxy hands on:
``ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId queueOffset``), and its
delivery attempt counts from 1 where a reconsume count counts from 0. A simple consumer's receives are
counted as pulls (found, or failed: what a dead broker shows up as).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

from mqadmin.rocketmq import harness
from mqadmin.rocketmq.jvm import java_command, java_env
from mqadmin.scenario.client_lines import line_float, line_int, line_str
from mqadmin.scenario.client_lines import send_record as remoting_send_record
from mqadmin.scenario.client_schema import GRPC_PYTHON, family, grpc_java_version
from mqadmin.scenario.model import ConsumerGroupSpec, ProducerGroup
from simclient import ConsumeRecord, ConsumeStats, SendRecord

CLIENT_HEAP = "96m"


def command(programs: Any, name: str, client: str, args: list[str], home: Path) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a gRPC client program (``programs``: realclients.Programs)."""
    home.mkdir(parents=True, exist_ok=True)
    producer = name.startswith("producer")
    if family(client) == GRPC_PYTHON:
        assert programs.grpc_python is not None
        env = {k: v for k, v in java_env(home).items() if k != "ROCKETMQ_HOME"}
        env["HOME"] = str(home)  # the Python client logs under ~/logs/rocketmq_python
        return [sys.executable, str(programs.grpc_python), "produce" if producer else "consume", *args], env
    version = grpc_java_version(client)
    assert version is not None
    main = harness.GRPC_PRODUCER_MAIN if producer else harness.GRPC_CONSUMER_MAIN
    return java_command(programs.grpc_java[version], main, args, home, heap=CLIENT_HEAP, direct="64m"), java_env(home)


def producer_args(g: ProducerGroup, endpoint: str) -> list[str]:
    args = ["--endpoint", endpoint, "--producers", str(g.producers), "--rate", f"{g.rate:g}",
            "--seconds", f"{g.duration:g}", "--size", str(g.message_size),
            "--timeout-ms", str(int(g.send_timeout * 1000))]
    if family(g.client) != GRPC_PYTHON:
        args += ["--retries", str(g.retries)]
    for t in g.topics:
        args += ["--topic", t]
    return args


def consumer_args(spec: ConsumerGroupSpec, endpoint: str) -> list[str]:
    args = ["--endpoint", endpoint, "--group", spec.group, "--expression", spec.subscription, "--api", spec.api,
            "--threads", str(spec.consume_threads), "--delay-ms", f"{spec.consume_delay_ms:g}",
            "--failure-rate", f"{spec.failure_rate:g}", "--invisible-s", f"{spec.invisible_time:g}"]
    for t in spec.topics:
        args += ["--topic", t]
    return args


def send_record(line: dict[str, Any], first_id: int, wall_t0: float) -> SendRecord:
    """A gRPC producer's ``send`` line as a SendRecord, with no broker or queue: the Proxy picks the broker
    and retries on another, and its answer does not say which stored the message (the queue a client's
    receipt names is the one the client asked for, even when that broker was dead)."""
    return dataclasses.replace(remoting_send_record(line, first_id, wall_t0), broker=None, queue_id=-1)


def handle_fields(handle: str) -> tuple[str, int, int]:
    """(broker name, queue id, queue offset) of a POP receipt handle; ("", -1, -1) for one not in that form."""
    parts = handle.split(" ")
    if len(parts) < 8:
        return "", -1, -1
    try:
        return parts[5], int(parts[6]), int(parts[7])
    except ValueError:
        return "", -1, -1


def consume_record(line: dict[str, Any], consumer: int, group: str, wall_t0: float) -> ConsumeRecord:
    """A gRPC consumer's ``consumed`` line as a ConsumeRecord (latency from the message's birth: a
    RocketMQ 5 client does not see its store time)."""
    t_ms = line_float(line.get("t"))
    born_ms = line_float(line.get("storeMs"), t_ms)
    broker, queue, offset = handle_fields(line_str(line.get("handle")))
    return ConsumeRecord(
        t=t_ms / 1000.0 - wall_t0,
        consumer=consumer,
        group=group,
        topic=line_str(line.get("topic")),
        broker=broker,
        broker_id=-1,
        queue_id=queue,
        queue_offset=offset,
        msg_id=line_str(line.get("msgId")),
        latency_ms=max(0.0, t_ms - born_ms),
        outcome="retry" if line.get("outcome") == "retry" else "ok",
        reconsume_times=max(0, line_int(line.get("attempt"), 1) - 1),
    )


def count_receive(line: dict[str, Any], stats: ConsumeStats) -> None:
    """A simple consumer's ``receive`` line: a pull that found messages, found none, or failed."""
    stats.pulls += 1
    if "error" in line:
        stats.pull_errors += 1
    elif line_int(line.get("n"), 0) > 0:
        stats.pulls_found += 1


__all__ = ["send_record", "command", "consume_record", "consumer_args", "count_receive", "handle_fields", "producer_args"]
