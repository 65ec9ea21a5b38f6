"""Java 4.9.7 and 5.3.3 clients with ``-Dtls.enable=true`` and AclClientRPCHook against a cluster
from our ``mqadmin start --auth --tls``: every NameServer and broker stub port enforcing TLS with
the certificate the command made.

As Java users turn it on: in Java's test mode (the default: any server certificate), and checking
the server against the cluster's certificate (``tls.test.mode.enable=false``,
``tls.client.authServer=true``, ``tls.client.trustCertPath``). Both get their route and send with the
normal account's keys; the same client without ``-Dtls.enable`` gets no answer from an enforcing
port, and one that trusts another certificate fails its handshake. Only the TLS sends are stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from security.tls_context import self_signed_pem
from tests.interop.clusters import AuthCluster
from tests.interop.harness_build import JAVA_VERSIONS, JavaBuild
from tests.interop.java_procs import run_java_client


@pytest.mark.parametrize("version", JAVA_VERSIONS)
def test_tls_clients_with_keys_route_and_send_plaintext_and_mistrust_fail(
        version: str, tls_auth_cluster: AuthCluster, java_builds: dict[str, JavaBuild], tmp_path: Path) -> None:
    cluster = tls_auth_cluster
    topic = f"AuthTopic{version.replace('.', '')}"
    cert = cluster.dir / "conf" / "tls" / "cert.pem"
    other = tmp_path / "other.pem"
    other.write_bytes(self_signed_pem()[0])

    def client(main: str, props: dict[str, str]) -> list[dict[str, Any]]:
        status, lines, stderr = run_java_client(
            java_builds[version], main,
            ["--namesrv", cluster.namesrv, "--broker", cluster.broker, "--topic", topic, "--count", "1",
             "--group", f"tls_{version.replace('.', '')}",
             "--access-key", cluster.user.access_key, "--secret-key", cluster.user.secret_key], tmp_path, props=props)
        assert status == 0, stderr[-3000:]
        return lines

    def codes(lines: list[dict[str, Any]]) -> list[tuple[str, int, str | None]]:
        return [(line["event"], line["code"], line.get("status")) for line in lines]

    checked = {"tls.enable": "true", "tls.test.mode.enable": "false", "tls.client.authServer": "true"}
    for props in ({"tls.enable": "true"}, dict(checked, **{"tls.client.trustCertPath": str(cert)})):
        assert codes(client("TlsClient", props)) == [("route", 0, None), ("broker", 0, None), ("sent", 0, "SEND_OK")]
    for props in ({}, dict(checked, **{"tls.client.trustCertPath": str(other)})):
        lines = client("AclClient", props)  # the same checks; TLS as the properties say
        assert [(line["event"], line["code"]) for line in lines[:2]] == [("route", -1), ("broker", -1)], (props, lines)
        assert [line["event"] for line in lines[2:]] == ["send-failed"], (props, lines)
    assert cluster.stored(topic) == 2, "only the two TLS clients' messages were stored"
