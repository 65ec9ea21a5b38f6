"""Real Java (4.9.7, 5.3.3, remoting) and Go clients produce and consume through our NameServer and
broker stub: tags filtered by the consumer's expression, keys and user properties exact.

The consumer starts first (the topic is created beforehand), then the producer; both run at once,
so one test costs about one JVM start.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.interop.clients_common import EXPRESSION, create_topic, exchange, message_specs
from tests.interop.clusters import StubCluster
from tests.interop.harness_build import JAVA_VERSIONS, JavaBuild
from tests.interop.java_procs import LineProcess, java_command, java_consumer, java_env, rocketmq_home

CLIENTS = [f"java-{v}" for v in JAVA_VERSIONS] + ["go"]


def _go_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"} | {"ROCKETMQ_GO_LOG_LEVEL": "error"}


@pytest.mark.parametrize("client", CLIENTS)
def test_produce_and_consume_through_stub(client: str, stub_cluster: StubCluster, java_builds: dict[str, JavaBuild],
                                         go_binary: Path, tmp_path: Path) -> None:
    ns = stub_cluster.namesrv.addr
    topic = "Interop_" + client.replace(".", "").replace("-", "_")
    group = f"CG_{topic}"
    create_topic(ns, "DefaultCluster", topic)
    if client == "go":
        consumer = LineProcess([str(go_binary), "consume", "-namesrv", ns, "-topic", topic, "-group", group,
                                "-expression", EXPRESSION, "-expect", "3", "-seconds", "120", "-linger", "2s"],
                               tmp_path, _go_env())
        produce = [str(go_binary), "produce", "-namesrv", ns, "-topic", topic]
        produce += [arg for spec in message_specs() for arg in ("-msg", spec)]
        env = _go_env()
    else:
        build = java_builds[client.removeprefix("java-")]
        consumer = java_consumer(build, tmp_path / "consumer", [
            "--namesrv", ns, "--topic", topic, "--group", group, "--expression", EXPRESSION,
            "--expect", "3", "--seconds", "120", "--linger-ms", "2000"])
        home = rocketmq_home(tmp_path / "producer")
        produce = java_command(build, "interop.harness.Producer",
                               ["--namesrv", ns, "--topic", topic]
                               + [arg for spec in message_specs() for arg in ("--msg", spec)], home)
        env = java_env(home)
    exchange(consumer, produce, env, tmp_path, topic)
