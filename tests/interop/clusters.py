"""The clusters the interop tests share (started by conftest.py, once for the package)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.broker_procs import BrokerProcess
from tests.interop.java_procs import JavaBroker, JavaNamesrv
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
