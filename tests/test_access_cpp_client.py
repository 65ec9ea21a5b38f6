"""The C++ client (PyPI ``rocketmq`` 0.4.4, librocketmq) with accounts on, over real TCP.

With valid keys (``set_session_credentials``) it gets its route and sends;
with a wrong secret every request it signs is refused, and it sends nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from remoting import requests as rq
from remoting.bodies import ClusterInfo
from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from remoting.transport import connect
from tests.peers import ADMIN, USER, WRONG, write_accounts
from tests.procs import NamesrvProcess
from tests.test_broker_stub import create_topic, eventually

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

ROOT = Path(__file__).resolve().parent.parent


def run_producer(namesrv: str, topic: str, count: int, *keys: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "tests.cpp_producer", namesrv, topic, str(count), *keys],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])["results"]  # type: ignore[no-any-return]


async def test_cpp_client_sends_with_valid_keys_and_is_refused_with_wrong_ones(
    start_namesrv: Callable[..., NamesrvProcess], start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    accounts = write_accounts(tmp_path / "plain_acl.yml")
    ns = start_namesrv(aclEnable=True, aclConfigPath=accounts)
    broker = start_broker(namesrvAddr=ns.addr, aclEnable=True, aclConfigPath=accounts,
                          accessKey=ADMIN.access_key, secretKey=ADMIN.secret_key)
    async with connect(broker.addr, credentials=ADMIN) as admin:
        assert (await admin.invoke(create_topic("CppAclTopic", queues=2))).code == ResponseCode.SUCCESS

    async def routed() -> bool:
        async with connect(ns.addr) as c:
            return (await c.invoke(rq.get_route("CppAclTopic"))).code == ResponseCode.SUCCESS

    await eventually(routed, 10, "the topic routed")
    assert run_producer(ns.addr, "CppAclTopic", 3, USER.access_key, USER.secret_key) == ["OK"] * 3  # SendStatus.OK: SEND_OK

    wrong = run_producer(ns.addr, "CppAclTopic", 2, WRONG.access_key, WRONG.secret_key)
    assert all(r.startswith("error") for r in wrong), wrong
    unsigned = run_producer(ns.addr, "CppAclTopic", 1)
    assert all(r.startswith("error") for r in unsigned), unsigned

    async with connect(broker.addr, credentials=ADMIN) as admin:
        counts = [
            (await admin.invoke(request(RequestCode.GET_MAX_OFFSET, {"topic": "CppAclTopic", "queueId": q}))).ext("offset")
            for q in range(2)
        ]
    assert sum(int(c or 0) for c in counts) == 3, "only the validly signed messages were stored"
    assert "signature does not match" in ns.log() + broker.log()
    async with connect(ns.addr) as c:  # the registrations the broker signed stay in place
        assert set(ClusterInfo.decode((await c.invoke(rq.cluster_info())).body).broker_addr_table) == {"broker-a"}
