"""Real Java clients (4.9.7, 5.3.3) over TLS, turned on as Java users do (``-Dtls.enable=true``,
which sets every client's ``useTLS``; Java's default test mode trusts any server certificate),
against our NameServer and broker stub (issue 19, item 6).

- ``tls.server.mode=enforcing`` on both servers (the stub then registers over TLS as well): a TLS
  producer and a TLS push consumer exchange messages exactly; the same raw request from Java's
  own ``NettyRemotingClient`` is answered over TLS and refused in plaintext, on both ports.
- ``permissive`` (the default, the package's ``stub_cluster``): a TLS producer's messages reach a
  plaintext consumer through the same ports.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from remoting import requests as rq
from remoting.bodies import TopicRouteData
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from security.tls_context import client_context
from remoting.transport import connect
from tests.broker_wire import create_topic as create_topic_request
from tests.interop.clients_common import EXPRESSION, create_topic, exchange, message_specs
from tests.interop.clusters import StubCluster, running_stub_cluster
from tests.interop.harness_build import JAVA_VERSIONS, JavaBuild
from tests.interop.java_procs import java_command, java_consumer, java_env, rocketmq_home, run_java_client

TLS = {"tls.enable": "true"}
ENFORCING = {"tls.server.mode": "enforcing"}
PLAINTEXT_REFUSED = "plaintext on a TLS-only port (tls.server.mode=enforcing)"


def _tls_call(addr: str, req: RemotingCommand) -> RemotingCommand:
    async def call() -> RemotingCommand:
        async with connect(addr, tls=client_context(), connect_timeout=15.0) as client:
            return await client.invoke(req, 15.0)

    return trio.run(call)


def _create_topic_over_tls(cluster: StubCluster, topic: str) -> None:
    """The topic on the stub (our mqadmin has no TLS option), then its route from the NameServer."""
    resp = _tls_call(cluster.broker.addr, create_topic_request(topic))
    assert resp.code == ResponseCode.SUCCESS, resp
    deadline = time.monotonic() + 60
    while True:
        route = _tls_call(cluster.namesrv.addr, rq.get_route(topic))
        if route.code == ResponseCode.SUCCESS and TopicRouteData.decode(route.body).queue_datas:
            return
        assert time.monotonic() < deadline, f"no route for {topic}: {route}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def enforcing_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StubCluster]:
    """Our NameServer and a broker stub, both ``enforcing``; the stub registers over TLS (an
    enforcing broker uses TLS for its own connections, as Java's BrokerStartup does)."""
    with running_stub_cluster(tmp_path_factory.mktemp("tls-enforcing"), "broker-tls", **ENFORCING) as cluster:
        yield cluster


def _produce_and_consume(build: JavaBuild, cluster: StubCluster, topic: str, tmp_path: Path, *,
                         producer_props: dict[str, str], consumer_props: dict[str, str]) -> None:
    """A Java push consumer started first, then a Java producer: every send SEND_OK, exactly the
    TagA/TagC messages received with their keys and properties."""
    ns = cluster.namesrv.addr
    consumer = java_consumer(build, tmp_path / "consumer", [
        "--namesrv", ns, "--topic", topic, "--group", f"CG_{topic}", "--expression", EXPRESSION,
        "--expect", "3", "--seconds", "120", "--linger-ms", "2000"], props=consumer_props)
    home = rocketmq_home(tmp_path / "producer")
    messages = [arg for spec in message_specs() for arg in ("--msg", spec)]
    produce = java_command(build, "interop.harness.Producer", ["--namesrv", ns, "--topic", topic, *messages], home,
                           props=producer_props)
    exchange(consumer, produce, java_env(home), tmp_path, topic)


@pytest.mark.parametrize("version", JAVA_VERSIONS)
def test_java_tls_producer_and_consumer_on_enforcing_ports(version: str, enforcing_cluster: StubCluster,
                                                           java_builds: dict[str, JavaBuild], tmp_path: Path) -> None:
    topic = f"TlsEnforcing{version.replace('.', '')}"
    _create_topic_over_tls(enforcing_cluster, topic)
    logs = (enforcing_cluster.namesrv, enforcing_cluster.broker)
    before = [len(server.log()) for server in logs]
    _produce_and_consume(java_builds[version], enforcing_cluster, topic, tmp_path,
                         producer_props=TLS, consumer_props=TLS)
    # every connection was TLS: neither port refused plaintext meanwhile
    assert not any(PLAINTEXT_REFUSED in server.log()[start:] for server, start in zip(logs, before)), \
        [server.log()[start:] for server, start in zip(logs, before)]


@pytest.mark.parametrize("version", JAVA_VERSIONS)
def test_enforcing_ports_refuse_a_plaintext_java_client(version: str, enforcing_cluster: StubCluster,
                                                        java_builds: dict[str, JavaBuild], tmp_path: Path) -> None:
    cluster = enforcing_cluster
    probe = ["--addr", cluster.namesrv.addr, "--addr", cluster.broker.addr, "--code", "105", "--ext", "topic=TBW102"]
    status, plain, stderr = run_java_client(java_builds[version], "RemotingProbe", probe, tmp_path / "plain")
    assert status == 0, stderr[-3000:]
    assert [(line["addr"], line["event"]) for line in plain] == [
        (cluster.namesrv.addr, "request-failed"), (cluster.broker.addr, "request-failed")], plain
    assert PLAINTEXT_REFUSED in cluster.namesrv.log()
    assert PLAINTEXT_REFUSED in cluster.broker.log()
    # the same program and request with -Dtls.enable=true is answered by both
    status, tls, stderr = run_java_client(java_builds[version], "RemotingProbe", probe, tmp_path / "tls", props=TLS)
    assert status == 0, stderr[-3000:]
    assert [(line["addr"], line["event"]) for line in tls] == [
        (cluster.namesrv.addr, "response"), (cluster.broker.addr, "response")], tls
    assert tls[0]["code"] == ResponseCode.SUCCESS and '"brokerName":"broker-tls"' in tls[0]["body"], tls


@pytest.mark.parametrize("version", JAVA_VERSIONS)
def test_permissive_ports_serve_java_tls_and_plaintext_clients(version: str, stub_cluster: StubCluster,
                                                               java_builds: dict[str, JavaBuild],
                                                               tmp_path: Path) -> None:
    for server in (stub_cluster.namesrv, stub_cluster.broker):
        assert "tls.server.mode=permissive: TLS and plaintext on one port" in server.log()
    topic = f"TlsPermissive{version.replace('.', '')}"
    create_topic(stub_cluster.namesrv.addr, "DefaultCluster", topic)  # our mqadmin, in plaintext
    # a TLS producer and a plaintext consumer on the same two ports
    _produce_and_consume(java_builds[version], stub_cluster, topic, tmp_path, producer_props=TLS, consumer_props={})
