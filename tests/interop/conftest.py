"""Fixtures of the interop suite: the harness is built once per session, the clusters started
once for the package.

A build failure (no JDK, no Maven, no Go, no registry) fails the tests that need it with the
build's own message; nothing here skips.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

# Other test modules load tests.broker_procs as a plugin (with pytest's assert rewriting): import
# it rewritten here too, or pytest warns that it was imported first without.
pytest.register_assert_rewrite("tests.broker_procs")

from tests.interop import harness_build  # noqa: E402
from tests.interop.clusters import (  # noqa: E402
    OURS_EXPIRY_MS, AuthCluster, JavaCluster, StubCluster, auth_cluster_started, running_stub_cluster,
)
from tests.interop.harness_build import JavaBuild  # noqa: E402
from tests.interop.java_procs import AdminRunners, JavaBroker, JavaNamesrv, free_port_block, java_servers  # noqa: E402
from tests.procs import NamesrvProcess  # noqa: E402

T = TypeVar("T")


def _built(build: Callable[[], T]) -> T:
    try:
        return build()
    except harness_build.HarnessBuildError as exc:
        pytest.fail(f"interop harness: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def loopback_shim() -> Path:
    return _built(harness_build.build_shim)


@pytest.fixture(scope="session")
def java_builds() -> dict[str, JavaBuild]:
    return _built(harness_build.build_java)


@pytest.fixture(scope="session")
def go_binary() -> Path:
    return _built(harness_build.build_go)


# --- shared clusters -------------------------------------------------------------------------------
# Each is started once for the interop package (JVM starts are its main cost on a busy 2-core
# machine) and stopped when the package is done, so no JVM outlives it into the rest of the suite.

@pytest.fixture(scope="package")
def java_cluster(java_builds: dict[str, JavaBuild], loopback_shim: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaCluster]:
    """Ours + Java 5.3.3 NameServer; a 4.9.7 and a 5.3.3 master/slave pair, registered with both.

    Cluster ``Java4`` holds broker ``broker-497``, cluster ``Java5`` broker ``broker-533``. Tests may
    stop the slaves (brokerId 1); the masters and both NameServers must stay up for the package.
    """
    base = tmp_path_factory.mktemp("java-cluster")
    ours = NamesrvProcess(base / "ours", brokerChannelExpiredTime=OURS_EXPIRY_MS,
                          scanNotActiveBrokerInterval=1000).start()
    try:
        java_ns = JavaNamesrv(java_builds["5.3.3"], base / "java-ns", loopback_shim)
        java_ns.port = free_port_block()  # the brokers need its address before it is up
        brokers = {}
        for version, build in java_builds.items():
            for broker_id in (0, 1):
                brokers[(version, broker_id)] = JavaBroker(
                    build, base / f"broker-{version}-{broker_id}", loopback_shim,
                    cluster=f"Java{version[0]}", broker_name=f"broker-{version.replace('.', '')}",
                    broker_id=broker_id, namesrv_addrs=(ours.addr, java_ns.addr))
        with java_servers(java_ns, *brokers.values()):
            yield JavaCluster(ours, java_ns, brokers)
    finally:
        ours.kill()


@pytest.fixture(scope="package")
def stub_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StubCluster]:
    with running_stub_cluster(tmp_path_factory.mktemp("stub-cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="package")
def auth_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthCluster]:
    """Our NameServer and broker stub with accounts on, from ``mqadmin start --auth``."""
    with auth_cluster_started(tmp_path_factory.mktemp("auth-cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="package")
def tls_auth_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthCluster]:
    """The same with ``--tls``: every port enforcing TLS, with a certificate in <dir>/conf/tls/cert.pem."""
    with auth_cluster_started(tmp_path_factory.mktemp("tls-auth-cluster"), "--tls") as cluster:
        yield cluster


@pytest.fixture(scope="package")
def java_admin(java_builds: dict[str, JavaBuild], tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminRunners]:
    """One Java mqadmin JVM per version for the whole package (started on first use)."""
    runners = AdminRunners(java_builds, lambda version: tmp_path_factory.mktemp(f"mqadmin-{version}"))
    try:
        yield runners
    finally:
        runners.close()
