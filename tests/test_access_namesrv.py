"""Access control on a real NameServer process: classes, signatures, whitelists, reload, attacks.

Peers are told apart by their loopback source address (see tests/peers.py):
127.0.0.1 is the local operator, 127.0.0.2 a peer from elsewhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from remoting import requests as rq
from remoting.acl import Credentials
from remoting.bodies import ClusterInfo, DataVersion, TopicConfig
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, request
from tests.peers import ADMIN, LOCAL, STRANGER, UNKNOWN, USER, WRONG, connect_from, replace_file, write_accounts
from tests.procs import NamesrvProcess

OK, DENIED = ResponseCode.SUCCESS, ResponseCode.NO_PERMISSION
CLUSTER = "DefaultCluster"


def register_req(name: str = "broker-a", addr: str = "127.0.0.1:10911", topic: str = "TopicA") -> RemotingCommand:
    return rq.register_broker(
        cluster=CLUSTER, broker_name=name, broker_addr=addr, broker_id=0,
        topics=[TopicConfig("TBW102", 8, 8, 7), TopicConfig(topic, 4, 4, 6)], data_version=DataVersion(1, 1_700_000_000_000),
    )


#: One request of each class, with the code an allowed request gets.
def class_requests() -> dict[str, tuple[RemotingCommand, int]]:
    return {
        "route-read": (rq.cluster_info(), OK),
        "broker-control": (register_req("broker-probe", "127.0.0.1:20911"), OK),
        "admin-read": (rq.get_namesrv_config(), OK),
        "admin-write": (rq.put_kv("ns", "k", "v"), OK),
    }


async def codes_from(source: str, addr: str, credentials: Credentials | None) -> dict[str, tuple[int, str]]:
    out = {}
    async with connect_from(source, addr, credentials) as client:
        for name, (req, _) in class_requests().items():
            resp = await client.invoke(req)
            out[name] = (resp.code, resp.remark or "")
    return out


def allowed(codes: dict[str, tuple[int, str]]) -> set[str]:
    """The classes that were let through; refused ones must name their class in the remark."""
    for name, (code, remark) in codes.items():
        if code == DENIED:
            assert f"is {name}" in remark, remark
        else:
            assert code == class_requests()[name][1], (name, code, remark)
    return {name for name, (code, _) in codes.items() if code != DENIED}


ALL = {"route-read", "broker-control", "admin-read", "admin-write"}


async def test_without_accounts_admin_write_is_local_only(start_namesrv: Callable[..., NamesrvProcess]) -> None:
    ns = start_namesrv(adminAddressesWithoutAuth=LOCAL)
    assert allowed(await codes_from(LOCAL, ns.addr, None)) == ALL
    assert allowed(await codes_from(STRANGER, ns.addr, None)) == ALL - {"admin-write"}
    # a signature changes nothing while accounts are off (as on an Apache NameServer)
    assert allowed(await codes_from(STRANGER, ns.addr, ADMIN)) == ALL - {"admin-write"}
    async with connect_from(STRANGER, ns.addr) as client:  # an unknown code is the processor's answer
        assert (await client.invoke(request(9999))).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    log = ns.log()
    assert "admin-write to peers matching 127.0.0.1 only" in log
    assert log.count("refused request code") == 1, log  # rate-limited: one line for three refusals
    assert "127.0.0.2:" in log


async def test_allow_remote_admin_without_auth_opens_admin_write(start_namesrv: Callable[..., NamesrvProcess]) -> None:
    ns = start_namesrv(adminAddressesWithoutAuth=LOCAL, allowRemoteAdminWithoutAuth=True)
    assert allowed(await codes_from(STRANGER, ns.addr, None)) == ALL
    assert "allowRemoteAdminWithoutAuth=true" in ns.log()


async def test_default_admin_addresses_are_all_of_loopback(start_namesrv: Callable[..., NamesrvProcess]) -> None:
    ns = start_namesrv()
    assert allowed(await codes_from(STRANGER, ns.addr, None)) == ALL


@pytest.fixture
def secured(start_namesrv: Callable[..., NamesrvProcess], tmp_path: Path) -> NamesrvProcess:
    accounts = write_accounts(tmp_path / "plain_acl.yml", extra=(
        "  - accessKey: whiteKey01\n    secretKey: whiteSecret1\n    whiteRemoteAddress: 127.0.0.{1,3}\n"
        "    admin: true\n"
    ))
    return start_namesrv(aclEnable=True, aclConfigPath=accounts, adminAddressesWithoutAuth=LOCAL)


async def test_with_accounts_each_class_needs_its_signature(secured: NamesrvProcess) -> None:
    addr = secured.addr
    assert allowed(await codes_from(LOCAL, addr, None)) == {"route-read"}  # loopback is no exception
    assert allowed(await codes_from(STRANGER, addr, None)) == {"route-read"}
    assert allowed(await codes_from(STRANGER, addr, USER)) == {"route-read"}
    assert allowed(await codes_from(STRANGER, addr, ADMIN)) == ALL
    assert allowed(await codes_from(STRANGER, addr, WRONG)) == set()  # a false claim is refused everywhere
    assert allowed(await codes_from(STRANGER, addr, UNKNOWN)) == set()
    async with connect_from(STRANGER, addr, ADMIN) as client:  # unknown codes fail closed, even for an admin
        resp = await client.invoke(request(9999))
        assert resp.code == DENIED and "unknown request codes" in (resp.remark or "")
    async with connect_from(STRANGER, addr, WRONG) as client:
        resp = await client.invoke(rq.cluster_info())
        assert "signature does not match" in (resp.remark or "")
    assert "3 accounts (2 admin)" in secured.log()


async def test_an_accounts_white_address_skips_the_signature(secured: NamesrvProcess) -> None:
    """Java's rule: AccessKey alone is enough from an address the account whitelists."""
    unsigned_claim = {"AccessKey": "whiteKey01"}
    async with connect_from(LOCAL, secured.addr) as client:
        resp = await client.invoke(request(100, {"namespace": "ns", "key": "k", "value": "v", **unsigned_claim}))
        assert resp.code == OK, resp
    async with connect_from(STRANGER, secured.addr) as client:
        resp = await client.invoke(request(100, {"namespace": "ns", "key": "k", "value": "v", **unsigned_claim}))
        assert resp.code == DENIED


async def test_global_white_addresses_open_all_but_admin_write(
    start_namesrv: Callable[..., NamesrvProcess], tmp_path: Path
) -> None:
    accounts = write_accounts(tmp_path / "plain_acl.yml", global_white=("127.0.0.2",))
    ns = start_namesrv(aclEnable=True, aclConfigPath=accounts)
    assert allowed(await codes_from(STRANGER, ns.addr, None)) == ALL - {"admin-write"}
    assert allowed(await codes_from(LOCAL, ns.addr, None)) == {"route-read"}


async def test_signed_route_reads_are_required_when_configured(
    start_namesrv: Callable[..., NamesrvProcess], tmp_path: Path
) -> None:
    accounts = write_accounts(tmp_path / "plain_acl.yml")
    ns = start_namesrv(aclEnable=True, aclConfigPath=accounts, aclUnsignedClasses="")
    assert allowed(await codes_from(LOCAL, ns.addr, None)) == set()
    assert allowed(await codes_from(LOCAL, ns.addr, USER)) == {"route-read"}


async def test_strangers_cannot_take_routing_down_when_accounts_are_on(secured: NamesrvProcess) -> None:
    """The issue's attacks on routing, by a peer without an admin account's signature."""
    addr = secured.addr
    async with connect_from(LOCAL, addr, ADMIN) as broker:  # held open: its close would drop the broker
        assert (await broker.invoke(register_req())).code == OK
        for credentials in (None, USER, WRONG):
            async with connect_from(STRANGER, addr, credentials) as client:
                attacks = [
                    rq.update_namesrv_config({"brokerChannelExpiredTime": "1"}),
                    rq.update_namesrv_config({"maxBrokers": "1"}),
                    rq.update_namesrv_config({"registerBodyMaxTopics": "1"}),
                    rq.unregister_broker(cluster=CLUSTER, broker_name="broker-a", broker_addr="127.0.0.1:10911",
                                         broker_id=0),
                    register_req("broker-a", "127.0.0.2:6666"),
                    rq.wipe_write_perm("broker-a"),
                ]
                for req in attacks:
                    resp = await client.invoke(req)
                    assert resp.code == DENIED, (req.code, resp)
        async with connect_from(LOCAL, addr) as client:
            info = ClusterInfo.decode((await client.invoke(rq.cluster_info())).body)
            route = await client.invoke(rq.get_route("TopicA"))
            config = (await broker.invoke(rq.get_namesrv_config())).body.decode()
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.1:10911"}
    assert route.code == OK and b'"perm":6' in route.body
    assert "brokerChannelExpiredTime=120000" in config and "maxBrokers=10000" in config


def _wait_for(predicate: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


async def test_accounts_reload_and_a_bad_file_keeps_the_last_good(
    start_namesrv: Callable[..., NamesrvProcess], tmp_path: Path
) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(f"accounts:\n  - accessKey: {ADMIN.access_key}\n    secretKey: {ADMIN.secret_key}\n    admin: true\n")
    ns = start_namesrv(aclEnable=True, aclConfigPath=path, scanNotActiveBrokerInterval=100)
    assert allowed(await codes_from(LOCAL, ns.addr, USER)) == set()
    write_accounts(path)  # adds USER
    _wait_for(lambda: "accounts reloaded" in ns.log())
    assert allowed(await codes_from(LOCAL, ns.addr, USER)) == {"route-read"}
    replace_file(path, "accounts: [ {accessKey: short, secretKey: x} ]\n")  # keys too short: refused as a whole
    _wait_for(lambda: "not reloaded" in ns.log())
    await trio.sleep(0.5)  # more housekeeping rounds: still one line for one bad version of the file
    assert ns.log().count("not reloaded") == 1
    assert allowed(await codes_from(LOCAL, ns.addr, ADMIN)) == ALL


def test_a_bad_accounts_file_stops_the_start(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text("globalWhiteRemoteAddresses:\n  - 192.168.*\n")
    proc = NamesrvProcess(tmp_path / "ns", aclEnable=True, aclConfigPath=path)
    with pytest.raises(RuntimeError, match="did not boot"):
        proc.start(timeout=60)
    assert proc.proc is not None and proc.proc.returncode not in (0, None)
    (line,) = [ln for ln in proc.log().splitlines() if ln.strip()]
    assert line.startswith("mqnamesrv: ") and "globalWhiteRemoteAddresses" in line and "192.168.*" in line


def test_accounts_on_without_a_file_stops_the_start(tmp_path: Path) -> None:
    proc = NamesrvProcess(tmp_path / "ns", aclEnable=True, aclConfigPath=tmp_path / "missing.yml")
    with pytest.raises(RuntimeError, match="did not boot"):
        proc.start(timeout=60)
    assert "cannot read accounts file" in proc.log() and "Traceback" not in proc.log()
