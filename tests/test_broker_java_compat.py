"""The broker stub's answers that follow a Java 5.3.3 broker's: getBrokerConfig's key set and defaults,
updateBrokerConfig's rules, haStatus (907) on a master and a slave, stats items from the first put,
the disk ratio's rounding and a slave's put count; against real processes over loopback TCP.

The expected values were read from Java brokers (4.9.7 and 5.3.3, from Maven
Central) given the same requests; see docs/broker-admin-requests.md.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from broker_stub.broker_config_admin import processor_count
from broker_stub.java_broker_config import JAVA_KEYS
from remoting.bodies import parse_kv_table
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, request
from remoting.javahash import concurrent_table_size, hash_order, table_size
from remoting.mqjson import loads
from remoting.transport import connect
from tests.broker_wire import call, create_topic, props_5x, pull, send_v2
from tests.test_broker_stub import eventually

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

STUB_EXTENSIONS = {"maxMessagesPerQueue", "maxStoreBytes", "maxAutoCreatedTopics", "frameMaxLength",
                   "serverMaxConnections", "serverTotalReadBufferBytes", "maxHeldPulls", "persistMessages",
                   "maxKeyIndexEntries", "logFile", "logFileMaxSize", "logFileMaxIndex",
                   # access control (docs/security.md): Java 5.3 keeps these in its auth config, not BrokerConfig
                   "accessKey", "secretKey", "innerClientAuthenticationCredentials", "aclConfigPath",
                   "aclUnsignedClasses", "adminAddressesWithoutAuth", "allowRemoteAdminWithoutAuth",
                   # metrics (docs/metrics.md): Java 5's metricsPromExporterPort/Host stay Java keys, not acted on
                   "metricsPort", "metricsBindAddress", "metricsTopTopics",
                   # the VIP port switch and POP bounds (docs/broker-stub.md, docs/limits.md)
                   "vipChannelEnabled", "maxHeldPops", "maxPopInFlight"}


async def get_config(addr: str) -> tuple[dict[str, str], list[str], dict[str, object]]:
    """(key -> value, the keys in body order, the data version) of GET_BROKER_CONFIG, read as Java writes it."""
    resp = await call(addr, request(RequestCode.GET_BROKER_CONFIG))
    assert resp.code == ResponseCode.SUCCESS, resp
    text = resp.body.decode()
    assert text.endswith("\n")
    pairs = [line.split("=", 1) for line in text.splitlines()]
    return dict(pairs), [k for k, _ in pairs], loads(resp.ext("version") or "{}")  # type: ignore[return-value]


def update(body: str) -> RemotingCommand:
    return request(RequestCode.UPDATE_BROKER_CONFIG, body=body.encode())


# --------------------------------------------------------------------------
# GET_BROKER_CONFIG / UPDATE_BROKER_CONFIG


async def test_broker_config_has_java_5_3_3_keys_and_defaults(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROCKETMQ_HOME", "/opt/rocketmq")
    store = tmp_path / "store"
    broker = start_broker(namesrvAddr="", storePathRootDir=store)
    config, order, version = await get_config(broker.addr)
    assert order == sorted(order), "sorted, as 5.3.3's properties2String(sorted) writes them"
    java_keys = set(JAVA_KEYS) | {"storePathRootDir", "storePathCommitLog", "rocketmqHome"}
    assert len(java_keys) == 411 and java_keys - {"namesrvAddr"} <= set(config)
    assert set(config) - java_keys == STUB_EXTENSIONS
    assert "namesrvAddr" not in config  # null in Java when not set
    cpus = processor_count()
    assert config["brokerRole"] == "ASYNC_MASTER" and config["flushDiskType"] == "ASYNC_FLUSH"
    assert config["storePathCommitLog"] == f"{store}/commitlog" and config["storePathRootDir"] == str(store)
    assert config["rocketmqHome"] == "/opt/rocketmq" and config["brokerIP2"] == "127.0.0.1"
    assert config["sendMessageThreadPoolNums"] == str(min(cpus, 4))
    assert config["pullMessageThreadPoolNums"] == str(16 + 2 * cpus)
    assert config["endTransactionThreadPoolNums"] == str(max(8 + 2 * cpus, 4 * min(cpus, 4)))
    assert config["accessMessageInMemoryMaxRatio"] == "40"
    # a few of Java's defaults, as a 5.3.3 broker printed them
    for key, value in {"maxMsgsNumBatch": "64", "defaultQueryMaxNum": "32", "haMaxGapNotInSync": "268435456",
                       "mappedFileSizeCommitLog": "1073741824", "deleteWhen": "04", "fileReservedTime": "72",
                       "configBlackList": "configBlackList;brokerConfigPath", "bindAddress": "0.0.0.0",
                       "messageDelayLevel": "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
                       "controllerAddr": "", "logicalDiskSpaceCleanForciblyThreshold": "0.8",
                       "brokerPermission": "6", "defaultTopicQueueNums": "8", "listenPort": broker.addr.rsplit(":")[1],
                       }.items():
        assert config[key] == value, key
    assert version["counter"] == 0 and version["stateVersion"] == 0


async def test_a_slave_shows_its_role_and_java_keys_from_the_file(start_broker: Callable[..., BrokerProcess]) -> None:
    slave = start_broker(namesrvAddr="", brokerId=1, flushDiskType="SYNC_FLUSH", deleteWhen="05",
                         maxMsgsNumBatch="x64", slaveReadEnable=True, notAJavaKey="1")
    config, _, _ = await get_config(slave.addr)
    assert config["brokerRole"] == "SLAVE" and config["accessMessageInMemoryMaxRatio"] == "30"
    assert config["flushDiskType"] == "SYNC_FLUSH" and config["deleteWhen"] == "05"
    assert config["maxMsgsNumBatch"] == "64"  # a number Java cannot parse is ignored
    assert config["slaveReadEnable"] == "true" and "notAJavaKey" not in config


async def test_update_broker_config_takes_what_a_java_broker_takes(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="")
    async with connect(broker.addr) as c:
        async def counter() -> int:
            return int((await get_config(broker.addr))[2]["counter"])  # type: ignore[call-overload]

        ok = await c.invoke(update("fooUnknownKey=42\n"))  # accepted, ignored: Java does the same
        assert ok.code == ResponseCode.SUCCESS and await counter() == 1
        assert "fooUnknownKey" not in (await get_config(broker.addr))[0]
        for body in ("flushDiskType=SYNC_FLUSH\n", "flushDiskType=bogus\n", "maxMsgsNumBatch=abc\n",
                     "maxMsgsNumBatch=2\n", "sendMessageThreadPoolNums=9\n", "accountStatsEnable=YES\n"):
            assert (await c.invoke(update(body))).code == ResponseCode.SUCCESS, body
        config, _, version = await get_config(broker.addr)
        assert (config["flushDiskType"], config["maxMsgsNumBatch"], config["sendMessageThreadPoolNums"]) == (
            "SYNC_FLUSH", "2", "9")
        assert config["accountStatsEnable"] == "false", "Boolean.parseBoolean: anything but true is false"
        assert version["counter"] == 7
        black = await c.invoke(update("brokerConfigPath=/tmp/x\n"))
        assert (black.code, black.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        for key in ("listenPort", "brokerRole", "brokerName", "slaveReadEnable"):  # start-only: refused (Java takes it)
            refused = await c.invoke(update(f"{key}=1\n"))
            assert refused.code == ResponseCode.NO_PERMISSION and key in (refused.remark or "")
        # a key the stub acts on keeps the stub's own checks (Java would take YES as false)
        bad = await c.invoke(update("longPollingEnable=YES\ndeleteWhen=07\n"))
        assert bad.code == ResponseCode.SYSTEM_ERROR and "longPollingEnable" in (bad.remark or "")
        config, _, version = await get_config(broker.addr)
        assert config["deleteWhen"] == "04" and version["counter"] == 7, "a refused update changes nothing"
        # maxMsgsNumBatch is one the stub honours: QUERY_MESSAGE answers at most 2 now
        assert (await c.invoke(create_topic("UQ"))).code == ResponseCode.SUCCESS
        for i in range(4):
            assert (await c.invoke(send_v2("UQ", b"m", props_5x(KEYS="K")))).code == ResponseCode.SUCCESS
        found = await c.invoke(request(RequestCode.QUERY_MESSAGE, {"topic": "UQ", "key": "K", "maxNum": 32,
                                                                    "beginTimestamp": 0, "endTimestamp": 2**63 - 1}))
        assert found.code == ResponseCode.SUCCESS and found.body.count(b"UQ") == 2


# --------------------------------------------------------------------------
# GET_BROKER_HA_STATUS, a slave's put count


async def test_ha_status_of_a_master_and_its_slave(
    start_namesrv: Callable[..., object], start_broker: Callable[..., BrokerProcess]
) -> None:
    ns = start_namesrv()
    master = start_broker("m", brokerName="broker-h", namesrvAddr=ns.addr)  # type: ignore[attr-defined]
    slave = start_broker("s", brokerName="broker-h", brokerId=1, namesrvAddr=ns.addr)  # type: ignore[attr-defined]
    t0 = int(time.time() * 1000)
    async with connect(master.addr) as c:
        assert (await c.invoke(create_topic("HA", queues=2))).code == ResponseCode.SUCCESS
        for i in range(6):
            assert (await c.invoke(send_v2("HA", f"m{i}".encode(), "", queue_id=i % 2))).code == ResponseCode.SUCCESS

    async def status(addr: str) -> dict[str, object]:
        resp = await call(addr, request(RequestCode.GET_BROKER_HA_STATUS))
        assert resp.code == ResponseCode.SUCCESS, resp
        return loads(resp.body)  # type: ignore[no-any-return]

    async def caught_up() -> bool:
        info = await status(master.addr)
        links = info["haConnectionInfo"]
        return bool(links) and links[0]["diff"] == 0  # type: ignore[index]

    await eventually(caught_up, 15, "the slave acknowledged the master's end")
    info = await status(master.addr)
    assert list(info) == ["haClientRuntimeInfo", "haConnectionInfo", "inSyncSlaveNums", "master",
                          "masterCommitLogMaxOffset"]
    end = info["masterCommitLogMaxOffset"]
    assert info["master"] is True and info["inSyncSlaveNums"] == 1 and isinstance(end, int) and end > 0
    assert info["haClientRuntimeInfo"] == {"lastReadTimestamp": 0, "lastWriteTimestamp": 0, "masterFlushOffset": 0,
                                           "maxOffset": 0, "transferredByteInSecond": 0}
    (link,) = info["haConnectionInfo"]  # type: ignore[misc]
    assert list(link) == ["addr", "diff", "inSync", "slaveAckOffset", "transferFromWhere", "transferredByteInSecond"]
    assert re.fullmatch(r"127\.0\.0\.1:\d+", link["addr"]) and link["addr"] != slave.addr  # the slave's client side
    assert (link["slaveAckOffset"], link["inSync"]) == (end, True) and 0 <= link["transferFromWhere"] <= end
    mine = await status(slave.addr)
    assert mine["master"] is False and mine["haConnectionInfo"] == [] and mine["masterCommitLogMaxOffset"] == 0
    client = mine["haClientRuntimeInfo"]
    host, port = master.addr.rsplit(":", 1)
    assert client["masterAddr"] == f"{host}:{int(port) + 1}"  # type: ignore[index]  # the master's HA address
    assert client["maxOffset"] == end and client["masterFlushOffset"] == 0  # type: ignore[index]
    assert t0 <= client["lastWriteTimestamp"] and t0 <= client["lastReadTimestamp"] <= int(time.time() * 1000)  # type: ignore[index,operator]
    # a slave counts what it copied as puts (msgPutTotalTodayNow, clusterList's InTotalToday), as a 4.9.x slave does
    table = parse_kv_table((await call(slave.addr, request(RequestCode.GET_BROKER_RUNTIME_INFO))).body)
    assert table["msgPutTotalTodayNow"] == "6"
    assert parse_kv_table((await call(master.addr, request(RequestCode.GET_BROKER_RUNTIME_INFO))).body)[
        "msgPutTotalTodayNow"] == "6"


# --------------------------------------------------------------------------
# stats items, the disk ratio


async def test_stats_items_exist_from_the_first_put(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(namesrvAddr="", brokerClusterName="CX")
    async with connect(broker.addr) as c:
        async def view(name: str, key: str) -> RemotingCommand:
            return await c.invoke(request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key}))

        assert (await c.invoke(create_topic("FP", queues=1))).code == ResponseCode.SUCCESS
        assert (await view("TOPIC_PUT_NUMS", "FP")).code == ResponseCode.SYSTEM_ERROR  # nothing put yet
        assert (await c.invoke(send_v2("FP", b"x", ""))).code == ResponseCode.SUCCESS
        for name, key in (("TOPIC_PUT_NUMS", "FP"), ("TOPIC_PUT_SIZE", "FP"), ("BROKER_PUT_NUMS", "CX")):
            resp = await view(name, key)  # at once, not after the next second's fold
            assert resp.code == ResponseCode.SUCCESS, (name, resp)
        assert (await c.invoke(pull("FP", 0, 0, consumerGroup="GF"))).code == ResponseCode.SUCCESS
        assert (await view("GROUP_GET_NUMS", "FP@GF")).code == ResponseCode.SUCCESS
        assert (await view("BROKER_GET_NUMS", "CX")).code == ResponseCode.SUCCESS


async def test_disk_ratio_is_rounded_up_to_a_whole_percent(start_broker: Callable[..., BrokerProcess],
                                                           tmp_path: Path) -> None:
    broker = start_broker(namesrvAddr="", storePathRootDir=tmp_path)
    table = parse_kv_table((await call(broker.addr, request(RequestCode.GET_BROKER_RUNTIME_INFO))).body)
    st = os.statvfs(tmp_path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    percent = -(-used * 100 // (used + st.f_bavail * st.f_frsize))  # UtilAll: the used share, ceiling, in %
    assert re.fullmatch(r"[01]\.\d{1,2}", table["commitLogDiskRatio"])
    assert float(table["commitLogDiskRatio"]) == pytest.approx(percent / 100, abs=0.011)  # the disk may move a bit
    assert table[f"commitLogDiskRatio_{tmp_path}/commitlog"] == table["commitLogDiskRatio"]


# --------------------------------------------------------------------------
# Java's map orders


def test_hash_orders_are_the_ones_java_printed() -> None:
    groups = ["TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PULL",
              "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_RMQ_SYS_TRANS", "G4", "G5", "GS"]
    # a 5.3.3 broker's GET_BROKER_CONSUME_STATS answer listed its groups in this order
    assert hash_order(groups, concurrent_table_size(1024)) == [
        "SELF_TEST_C_GROUP", "G4", "G5", "GS", "CID_ONSAPI_OWNER", "CID_ONSAPI_PERMISSION", "CID_RMQ_SYS_TRANS",
        "TOOLS_CONSUMER", "CID_ONS-HTTP-PROXY", "FILTERSRV_CONSUMER", "CID_ONSAPI_PULL"]
    # and its GET_ALL_PRODUCER_INFO answer its producer groups in this one
    assert hash_order(["CLIENT_INNER_PRODUCER", "PGX4", "PGX5"], table_size(3)) == ["PGX5", "PGX4",
                                                                                    "CLIENT_INNER_PRODUCER"]
    assert concurrent_table_size(1024) == 2048 and table_size(12) == 16 and table_size(13) == 32
