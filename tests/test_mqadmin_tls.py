"""``mqadmin start --tls`` (with ``--auth``): every process enforcing TLS with a certificate made for
the cluster, and every mqadmin command against it over TLS; ``--tls``/``--tls-trust-cert`` from
elsewhere.

The cluster is started as a user starts it (no ``--dir``), so the commands find its keys and its
certificate without options. A plaintext client is turned away by the NameServer and the brokers;
the brokers register over TLS, checking the NameServer's certificate, or there would be no route.
"""

from __future__ import annotations

import json
import ssl
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from security.tls_context import client_context, self_signed_pem
from remoting.transport import RemotingError, connect
from tests.mqadmin_procs import cli_env, mqadmin, running_cluster
from tests.test_mqadmin_auth import (
    AUTH_SCENARIO, TOPIC, AuthCluster, run_auth_scenario, run_every_server_command,
)


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthCluster]:
    home = tmp_path_factory.mktemp("state")
    env = cli_env(home)
    state_dir = home / "mqadmin" / "cluster"
    with running_cluster(state_dir, "--auth", "--tls", "--namesrvs", "1", "--brokers", "1", "--slaves", "1",
                         "--topics", TOPIC, env=env, use_dir=False) as started:
        yield AuthCluster(env, started, state_dir)


def _cert(cluster: AuthCluster) -> Path:
    return cluster.dir / "conf" / "tls" / "cert.pem"


async def _route(addr: str, tls: ssl.SSLContext | None) -> int:
    async with connect(addr, connect_timeout=5, tls=tls) as client:
        return (await client.invoke(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), 5)).code


def test_every_process_enforces_tls_with_the_clusters_certificate(secure: AuthCluster) -> None:
    tls_dir = secure.dir / "conf" / "tls"
    assert stat.S_IMODE(tls_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((tls_dir / "key.pem").stat().st_mode) == 0o600
    status = secure.run("status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["tls"] is True
    trusting = client_context(verify=True, trust_cert_path=str(_cert(secure)))
    for addr in (secure.namesrv, secure.master):
        with pytest.raises(RemotingError):  # plaintext: closed at its first bytes
            trio.run(_route, addr, None)
    assert trio.run(_route, secure.namesrv, trusting) == ResponseCode.SUCCESS  # route-read: open unsigned
    for proc in secure.started["procs"]:
        if proc["kind"] == "faultproxy":  # a TCP proxy: the brokers' TLS to the NameServers crosses it end to end
            continue
        log = Path(proc["log"]).read_text()
        assert "enforcing" in log, proc["name"]
        if proc["kind"] == "broker":
            assert "to name servers: TLS" in log, log[-2000:]


def test_every_server_command_works_over_tls_without_options(secure: AuthCluster) -> None:
    run_every_server_command(secure, tls=client_context(verify=True, trust_cert_path=str(_cert(secure))))


def test_tls_options_from_elsewhere(secure: AuthCluster, tmp_path: Path) -> None:
    keys = ["--access-key", secure.admin.access_key, "--secret-key", secure.admin.secret_key]
    elsewhere = cli_env(tmp_path / "empty", NAMESRV_ADDR=secure.namesrv)  # no local cluster here
    read = ("getNamesrvConfig", "--timeout", "10")
    plain = mqadmin(*read, *keys, env=elsewhere)
    assert plain.returncode == 1 and "Traceback" not in plain.stdout + plain.stderr, plain
    assert "connection closed by peer (a server that enforces TLS does this to plaintext: try --tls)" in \
        plain.stdout + plain.stderr
    assert mqadmin(*read, *keys, "--tls", env=elsewhere).returncode == 0  # as Java's test mode: not checked
    trusted = mqadmin(*read, *keys, "--tls-trust-cert", str(_cert(secure)), env=elsewhere)
    assert trusted.returncode == 0 and "tls.server.mode" in trusted.stdout, trusted
    other_cert, _ = self_signed_pem()
    (tmp_path / "other.pem").write_bytes(other_cert)
    mistrusted = mqadmin(*read, *keys, "--tls-trust-cert", str(tmp_path / "other.pem"), env=elsewhere)
    said = mistrusted.stdout + mistrusted.stderr
    assert mistrusted.returncode == 1 and "certificate verify failed" in said and "Traceback" not in said, said
    missing = mqadmin(*read, "--tls-trust-cert", str(tmp_path / "nothing.pem"), env=elsewhere)
    assert missing.returncode == 2 and "--tls-trust-cert" in missing.stderr, missing
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    junk = mqadmin(*read, "--tls-trust-cert", str(tmp_path / "junk.pem"), env=elsewhere)
    assert junk.returncode == 2 and "--tls-trust-cert" in junk.stderr and junk.stderr.count("\n") <= 2, junk


def test_scenario_with_cluster_auth_and_tls(tmp_path: Path) -> None:
    logs = run_auth_scenario(tmp_path, AUTH_SCENARIO.replace("  auth: true\n", "  auth: true\n  tls: true\n"))
    # the NameServer and both brokers enforcing TLS with the cluster's certificate (and the clients in TLS:
    # a plaintext one would have been cut off, and the scenario's sends and actions would have failed)
    assert logs.count("tls.server.mode=enforcing: TLS only, with the configured certificate") == 3, logs[-3000:]
