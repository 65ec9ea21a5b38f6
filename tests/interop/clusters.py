"""The clusters the interop tests share (started by conftest.py, once for the package)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import trio
import yaml

from remoting.acl import Credentials
from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from security.tls_context import client_context
from remoting.transport import connect
from tests.broker_procs import BrokerProcess
from tests.interop.java_procs import JavaBroker, JavaNamesrv
from tests.mqadmin_procs import cli_env, running_cluster
from tests.procs import NamesrvProcess

# Ours expires a silent broker after 30 s (Java: a fixed 120 s), scanning every second (Java: 5 s).
# 30 s, not less: a Java broker re-registers every 10 s at the fastest (it clamps the period).
OURS_EXPIRY_MS = 30_000


@dataclass
class JavaCluster:
    """Our NameServer and Java's side by side, and Java brokers that register with both."""

    ours: NamesrvProcess
    java_namesrv: JavaNamesrv
    brokers: dict[tuple[str, int], JavaBroker]  # (version, brokerId) -> broker

    def broker_name(self, version: str) -> str:
        return f"broker-{version.replace('.', '')}"


@dataclass
class StubCluster:
    """Our NameServer and one broker stub: what Java and Go clients and Java mqadmin talk to."""

    namesrv: NamesrvProcess
    broker: BrokerProcess


@contextmanager
def running_stub_cluster(base: Path, broker_name: str = "broker-a", **both: object) -> Iterator[StubCluster]:
    """Our NameServer and one broker stub (cluster ``DefaultCluster``) under ``base``, ``both``'s
    keys in each one's properties (``tls.server.mode``, ...); both killed on exit, pass or fail."""
    namesrv = NamesrvProcess(base / "ns", **both).start()
    broker = BrokerProcess(base / "broker", brokerClusterName="DefaultCluster", brokerName=broker_name,
                           namesrvAddr=namesrv.addr, storePathRootDir=base / "broker" / "store", **both)
    try:
        broker.start()
        yield StubCluster(namesrv, broker)
    finally:
        broker.kill()
        namesrv.kill()


#: The topics of the clients that run against the cluster with accounts (one per client program).
AUTH_TOPICS = ("AuthTopic497", "AuthTopic533", "AuthTopicGo")


@dataclass
class AuthCluster:
    """A local cluster with accounts (our ``mqadmin start --auth``) and the keys it generated."""

    dir: Path
    namesrv: str
    broker: str
    admin: Credentials
    user: Credentials
    tls: ssl.SSLContext | None = None  # started with --tls: trusting its certificate

    def stored(self, topic: str) -> int:
        """How many messages of ``topic`` the broker holds (asked as the admin account)."""
        async def count() -> int:
            async with connect(self.broker, credentials=self.admin, tls=self.tls) as client:
                total = 0
                for queue in range(8):
                    resp = await client.invoke(request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue}))
                    assert resp.code == ResponseCode.SUCCESS, resp
                    total += int(resp.ext("offset") or 0)
                return total

        return trio.run(count)


@contextmanager
def auth_cluster_started(state: Path, *more: str) -> Iterator[AuthCluster]:
    """One NameServer and one broker stub with aclEnable=true (``more``: more start options, such as
    --tls), stopped on exit."""
    env = cli_env(state / "xdg")
    with running_cluster(state, "--auth", *more, "--namesrvs", "1", "--brokers", "1", "--topics",
                         ",".join(AUTH_TOPICS), env=env) as started:
        accounts = yaml.safe_load((state / "conf" / "plain_acl.yml").read_text())["accounts"]
        keys = {a["accessKey"]: Credentials(a["accessKey"], str(a["secretKey"])) for a in accounts}
        broker = next(p["addr"] for p in started["procs"] if p["kind"] == "broker")
        cert = state / "conf" / "tls" / "cert.pem"
        tls = client_context(verify=True, trust_cert_path=str(cert)) if "--tls" in more else None
        yield AuthCluster(state, started["namesrvAddr"], broker, keys["localAdmin"], keys["localUser"], tls)
