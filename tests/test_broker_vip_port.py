"""The broker stub's VIP port (listenPort - 2), as RocketMQ Dashboard's admin client reaches a broker.

A Java broker opens its "fast" remoting server on listenPort - 2, and a Java client with
``vipChannelEnabled`` (the dashboard's default) sends its broker requests there. The stub listens
there too, with the same handlers, access classes, TLS and metrics, unless ``vipChannelEnabled=false``.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from remoting.bodies import parse_kv_table
from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from security.tls_context import client_context
from remoting.transport import RemotingError, connect
from tests.broker_procs import broker_command
from tests.metrics_scrape import scrape
from tests.peers import ADMIN, LOCAL, connect_from, write_accounts
from tests.test_broker_stub import call, create_topic, pull, send_v2

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture


def _port(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


async def test_the_vip_port_serves_the_same_broker(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="", metricsPort=-1)
    assert broker.vip_addr == f"127.0.0.1:{_port(broker.addr) - 2}"
    # a message sent over the VIP port is read over the main one, and the other way round
    assert (await call(broker.vip_addr, create_topic("Vip", queues=1))).code == ResponseCode.SUCCESS
    assert (await call(broker.vip_addr, send_v2("Vip", 0, b"over the VIP port"))).code == ResponseCode.SUCCESS
    assert (await call(broker.addr, send_v2("Vip", 0, b"over the main port"))).code == ResponseCode.SUCCESS
    for addr in (broker.addr, broker.vip_addr):
        got = await call(addr, pull("Vip", 0, 0))
        assert got.code == ResponseCode.SUCCESS
        assert b"over the VIP port" in got.body and b"over the main port" in got.body
    table = parse_kv_table((await call(broker.vip_addr, request(RequestCode.GET_BROKER_RUNTIME_INFO))).body)
    assert table["vipChannelEnabled"] == "true"
    # both ports' requests are counted by the same meter
    got = await scrape(broker.metrics_url)
    assert got.total("rocketmq_broker_stub_requests_total", code="17") == 1
    assert got.total("rocketmq_broker_stub_requests_total", code="310") == 2


async def test_a_key_turns_the_vip_port_off(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="", vipChannelEnabled=False)
    assert broker.vip_addr == "" and "VIP channel" not in broker.log()
    with socket.socket() as probe:  # nothing of ours listens on listenPort - 2
        probe.settimeout(5)
        assert probe.connect_ex(("127.0.0.1", _port(broker.addr) - 2)) != 0
    table = parse_kv_table((await call(broker.addr, request(RequestCode.GET_BROKER_RUNTIME_INFO))).body)
    assert table["vipChannelEnabled"] == "false"


def test_a_taken_vip_port_fails_the_start_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1] + 2
        config = tmp_path / "broker.properties"
        config.write_text(f"listenPort={port}\nbrokerIP1=127.0.0.1\nnamesrvAddr=\n")
        done = subprocess.run(broker_command() + ["-c", str(config)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert f"the VIP port {port - 2}, listenPort - 2" in last and "vipChannelEnabled=false" in last
    assert "Traceback" not in done.stderr


async def test_the_vip_port_has_the_main_ports_access_classes(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    accounts = write_accounts(tmp_path / "plain_acl.yml")
    broker = start_broker(namesrvAddr="", aclEnable=True, aclConfigPath=accounts,
                          accessKey=ADMIN.access_key, secretKey=ADMIN.secret_key)
    unsigned = await call(broker.vip_addr, create_topic("Nope"))
    assert unsigned.code == ResponseCode.NO_PERMISSION
    async with connect_from(LOCAL, broker.vip_addr, ADMIN) as admin:
        assert (await admin.invoke(create_topic("Signed"))).code == ResponseCode.SUCCESS


async def test_the_vip_port_has_the_main_ports_tls(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="", **{"tls.server.mode": "enforcing"})
    async with connect(broker.vip_addr, tls=client_context(), connect_timeout=10.0) as conn:
        resp = await conn.invoke(request(RequestCode.GET_BROKER_RUNTIME_INFO))
        assert resp.code == ResponseCode.SUCCESS
    with pytest.raises(RemotingError, match="closed by peer|connection lost"):
        async with connect(broker.vip_addr, connect_timeout=10.0) as plain:
            await plain.invoke(request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout=5.0)
