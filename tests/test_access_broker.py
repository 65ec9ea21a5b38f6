"""Access control on real broker stub processes, and brokers signing their own requests.

127.0.0.1 is the local operator, 127.0.0.2 a peer from elsewhere (see tests/peers.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from broker_stub.replication import REPLICATE_CODE, replicate_request
from remoting import properties
from remoting import requests as rq
from remoting.bodies import ClusterInfo
from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from remoting.transport import connect
from tests.peers import ADMIN, LOCAL, STRANGER, USER, WRONG, connect_from, write_accounts
from tests.procs import NamesrvProcess
from tests.test_broker_stub import create_topic, eventually, fault, send_v2

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

OK, DENIED = ResponseCode.SUCCESS, ResponseCode.NO_PERMISSION


def config_of(body: bytes) -> dict[str, str]:
    return properties.loads(body.decode())


async def test_strangers_cannot_drive_the_brokers_own_requests(start_broker: Callable[..., BrokerProcess]) -> None:
    """The issue's attacks on a broker with default settings, from a peer that is not local."""
    broker = start_broker(namesrvAddr="", adminAddressesWithoutAuth=LOCAL)
    async with connect_from(LOCAL, broker.addr) as local:
        assert (await local.invoke(create_topic("Orders", queues=2))).code == OK
        assert (await local.invoke(send_v2("Orders", 0, b"secret body"))).code == OK
        async with connect_from(STRANGER, broker.addr) as stranger:
            attacks = {
                "hang": fault("hang"),
                "replicate": replicate_request([("Orders", 0, 0)]),
                "permission": request(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=2\n"),
                "delete": request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Orders"}),
            }
            for name, req in attacks.items():
                resp = await stranger.invoke(req)
                assert resp.code == DENIED and "admin-write" in (resp.remark or ""), (name, resp)
                assert b"secret body" not in resp.body
            # the data path stays open to everyone, and nothing hangs
            with trio.fail_after(2):
                assert (await stranger.invoke(send_v2("Orders", 1, b"hello"))).code == OK
                assert (await local.invoke(send_v2("Orders", 0, b"more"))).code == OK
        config = config_of((await local.invoke(request(RequestCode.GET_BROKER_CONFIG))).body)
        assert config["brokerPermission"] == "6"
        topics = (await local.invoke(request(RequestCode.GET_ALL_TOPIC_CONFIG))).body
        assert b'"Orders"' in topics
        # the local operator still can
        assert (await local.invoke(request(REPLICATE_CODE, {}, b'{"offsets":[["Orders",0,0]]}'))).code == OK
        assert (await local.invoke(request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Orders"}))).code == OK
    assert "refused request code 9000 (admin-write) from 127.0.0.2:" in broker.log()


async def test_with_accounts_the_data_path_needs_a_signature(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    accounts = write_accounts(tmp_path / "plain_acl.yml")
    broker = start_broker(namesrvAddr="", aclEnable=True, aclConfigPath=accounts,
                          accessKey=ADMIN.access_key, secretKey=ADMIN.secret_key)
    async with connect_from(LOCAL, broker.addr, ADMIN) as admin:
        assert (await admin.invoke(create_topic("Orders", queues=2))).code == OK
        resp = await admin.invoke(request(RequestCode.GET_BROKER_CONFIG))
        config = config_of(resp.body)
        assert config["secretKey"] == "******" and config["accessKey"] == ADMIN.access_key
        assert ADMIN.secret_key.encode() not in resp.body
    for credentials, expected in ((None, DENIED), (WRONG, DENIED), (USER, OK), (ADMIN, OK)):
        async with connect_from(LOCAL, broker.addr, credentials) as client:
            assert (await client.invoke(send_v2("Orders", 0, b"m"))).code == expected, credentials
            resp = await client.invoke(request(RequestCode.GET_BROKER_CONFIG))
            assert resp.code == (OK if credentials is ADMIN else DENIED)
            resp = await client.invoke(fault("hang"))
            assert resp.code == DENIED or credentials is ADMIN
            if credentials is ADMIN:
                assert (await client.invoke(fault("resume"))).code == OK


async def test_a_slave_signs_its_replication_and_strangers_cannot_replicate(
    start_namesrv: Callable[..., NamesrvProcess], start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    accounts = write_accounts(tmp_path / "plain_acl.yml")
    ns = start_namesrv()
    keys = {"aclEnable": True, "aclConfigPath": accounts, "accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key}
    master = start_broker("m", brokerName="broker-a", namesrvAddr=ns.addr, **keys)
    slave = start_broker("s", brokerName="broker-a", brokerId=1, namesrvAddr=ns.addr, slaveReadEnable=True, **keys)
    async with connect(master.addr, credentials=ADMIN) as producer:
        assert (await producer.invoke(create_topic("Orders", queues=1))).code == OK
        for i in range(5):
            assert (await producer.invoke(send_v2("Orders", 0, b"m%d" % i))).code == OK

    async def copied() -> bool:
        async with connect(slave.addr, credentials=USER) as c:
            resp = await c.invoke(request(RequestCode.GET_MAX_OFFSET, {"topic": "Orders", "queueId": 0}))
            return resp.code == OK and resp.ext("offset") == "5"

    await eventually(copied, 15, "the slave copied the master's messages")
    for credentials in (None, USER, WRONG):
        async with connect(master.addr, credentials=credentials) as c:
            resp = await c.invoke(replicate_request([("Orders", 0, 0)]))
            assert resp.code == DENIED and b"m0" not in resp.body


async def test_brokers_sign_registrations_and_unsigned_ones_need_a_white_address(
    start_namesrv: Callable[..., NamesrvProcess], start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """A broker with keys registers where accounts are on; one without (a 4.9 Java broker) only
    where its address is in globalWhiteRemoteAddresses."""
    strict_acl = write_accounts(tmp_path / "strict.yml")
    white_acl = write_accounts(tmp_path / "white.yml", global_white=("127.0.0.1",))
    strict = start_namesrv("strict", aclEnable=True, aclConfigPath=strict_acl)
    white = start_namesrv("white", aclEnable=True, aclConfigPath=white_acl)
    both = f"{strict.addr};{white.addr}"
    start_broker("signed", brokerName="broker-signed", namesrvAddr=both,
                 innerClientAuthenticationCredentials=json.dumps(
                     {"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key}))
    unsigned = start_broker("unsigned", brokerName="broker-unsigned", namesrvAddr=both)

    async def brokers(addr: str) -> set[str]:
        async with connect(addr) as c:
            return set(ClusterInfo.decode((await c.invoke(rq.cluster_info())).body).broker_addr_table)

    async def settled() -> bool:
        return await brokers(strict.addr) == {"broker-signed"} and await brokers(white.addr) == {
            "broker-signed", "broker-unsigned"}

    async def refusal_logged() -> bool:
        # settled() cannot tell "refused" from "not yet tried": the log line is the refusal's proof
        return f"register to {strict.addr} refused: code=16" in unsigned.log()

    await eventually(settled, 10, "registrations settled")
    await eventually(refusal_logged, 10, "the strict NameServer's refusal in the unsigned broker's log")
    assert "broker-control needs a request signed by an admin account" in unsigned.log()
