"""Java brokers (4.9.7, 5.3.3) register over TLS with our NameServer in ``enforcing`` mode, as
Java operators turn it on (``-Dtls.enable=true`` for the broker's own connections); a Java
broker without it is kept out, its plaintext refused (issue 19, item 4)."""

from __future__ import annotations

import time
from pathlib import Path

import trio

from remoting import requests as rq
from remoting.bodies import ClusterInfo
from remoting.codes import ResponseCode
from security.tls_context import client_context
from remoting.transport import connect
from tests.interop.harness_build import JavaBuild
from tests.interop.java_procs import JavaBroker, java_servers
from tests.procs import NamesrvProcess

PLAINTEXT_REFUSED = "plaintext on a TLS-only port (tls.server.mode=enforcing)"


def _brokers(ns: str) -> dict[str, dict[int, str]]:
    async def ask() -> dict[str, dict[int, str]]:
        async with connect(ns, tls=client_context(), connect_timeout=15.0) as client:
            resp = await client.invoke(rq.cluster_info(), 15.0)
        assert resp.code == ResponseCode.SUCCESS, resp
        return {name: data.broker_addrs for name, data in ClusterInfo.decode(resp.body).broker_addr_table.items()}

    return trio.run(ask)


def test_java_brokers_register_over_tls_with_an_enforcing_namesrv(java_builds: dict[str, JavaBuild],
                                                                  loopback_shim: Path, tmp_path: Path) -> None:
    ns = NamesrvProcess(tmp_path / "ns", **{"tls.server.mode": "enforcing"}).start()
    try:
        tls_brokers = [
            JavaBroker(build, tmp_path / f"broker-{version}", loopback_shim, cluster="JavaTls",
                       broker_name=f"tls-{version.replace('.', '')}", namesrv_addrs=(ns.addr,),
                       system_props={"tls.enable": "true"})
            for version, build in java_builds.items()
        ]
        plain = JavaBroker(java_builds["5.3.3"], tmp_path / "broker-plain", loopback_shim, cluster="JavaTls",
                           broker_name="plain-533", namesrv_addrs=(ns.addr,))
        with java_servers(*tls_brokers, plain):
            expected = {b.broker_name: {0: b.addr} for b in tls_brokers}
            deadline = time.monotonic() + 90
            # the TLS brokers listed, and the plain one's registration refused (a 5.3.3 broker
            # registers from a worker thread, possibly after its boot line)
            while (seen := _brokers(ns.addr)) != expected or PLAINTEXT_REFUSED not in ns.log():
                assert time.monotonic() < deadline, f"registered: {seen}, expected {expected}\n{ns.log()[-2000:]}"
                time.sleep(0.5)
            assert "plain-533" not in _brokers(ns.addr)
    finally:
        ns.kill()
