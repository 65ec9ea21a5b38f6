"""The Apache Go client (rocketmq-client-go/v2 with ``WithCredentials``: the same HMAC-SHA1 signature
as Java's AclClientRPCHook) against our NameServer and broker stub with accounts on.

A consumer and a producer with the normal account's keys send and receive every message; a producer
with a wrong secret and one without keys get no route from the NameServer, so every send fails and
nothing more is stored.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.interop.clients_common import EXPRESSION, MESSAGES, check_received, check_sent, message_specs
from tests.interop.clusters import AuthCluster
from tests.interop.java_procs import LineProcess, json_lines

TOPIC = "AuthTopicGo"


def _go_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"} | {"ROCKETMQ_GO_LOG_LEVEL": "error"}


def _produce(go_binary: Path, cluster: AuthCluster, keys: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(go_binary), "produce", "-namesrv", cluster.namesrv, "-topic", TOPIC, *keys]
    cmd += [arg for spec in message_specs() for arg in ("-msg", spec)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=_go_env(), check=False, cwd=cwd)


def test_go_client_with_valid_keys_works_and_wrong_or_missing_keys_are_refused(
        auth_cluster: AuthCluster, go_binary: Path, tmp_path: Path) -> None:
    user = ["-access-key", auth_cluster.user.access_key, "-secret-key", auth_cluster.user.secret_key]
    consumer = LineProcess([str(go_binary), "consume", "-namesrv", auth_cluster.namesrv, "-topic", TOPIC,
                            "-group", "CG_AuthGo", "-expression", EXPRESSION, "-expect", "3", "-seconds", "120",
                            "-linger", "2s", *user], tmp_path, _go_env())
    try:
        consumer.wait_for("ready")
        done = _produce(go_binary, auth_cluster, user, tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
        check_sent(json_lines(done.stdout))
        assert consumer.finish() == 0, consumer.lines
        check_received(consumer.received(), TOPIC)
    finally:
        consumer.kill()
    for keys in (["-access-key", auth_cluster.user.access_key, "-secret-key", "not-the-secret-key"], []):
        refused = _produce(go_binary, auth_cluster, keys, tmp_path)
        assert refused.returncode == 1, refused.stdout + refused.stderr[-3000:]
        lines = json_lines(refused.stdout)
        assert [line["event"] for line in lines] == ["send-failed"] * len(MESSAGES), lines
    assert auth_cluster.stored(TOPIC) == len(MESSAGES), "only the validly signed messages were stored"
