"""Broker-stub message persistence, replication and slave reads, with real processes over loopback TCP.

Each test starts its own broker processes (and kills them, pass or fail);
a restart is a new process on the same store directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from broker_stub.store import parse_record
from remoting import fastjson
from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import request
from simclient.decode import decode_pulled
from tests.test_broker_stub import call, eventually, pull, send_v2

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)

TOPIC = "PersistTopic"


async def send_many(addr: str, count: int, *, size: int = 100, queues: int = 4) -> list[str]:
    """``count`` sends round-robin over ``queues`` queues; the message ids (UNIQ_KEY) in order."""
    ids = []
    for i in range(count):
        uniq = f"{i:032X}"
        resp = await call(addr, send_v2(TOPIC, i % queues, b"x" * size, uniq=uniq))
        assert resp.code == ResponseCode.SUCCESS, resp
        ids.append(uniq)
    return ids


async def read_all(addr: str, queues: int = 4) -> dict[int, list[tuple[int, str]]]:
    """Every (offset, message id) each queue holds, read with PULL_MESSAGE."""
    out: dict[int, list[tuple[int, str]]] = {}
    for q in range(queues):
        resp = await call(addr, request(RequestCode.GET_MIN_OFFSET, {"topic": TOPIC, "queueId": q}))
        offset, got = int(resp.ext("offset") or 0), []
        while True:
            resp = await call(addr, pull(TOPIC, q, offset))
            if resp.code != ResponseCode.SUCCESS:
                break
            msgs = decode_pulled(resp.body)
            got.extend((m.queue_offset, m.msg_id) for m in msgs)
            offset = int(resp.ext("nextBeginOffset") or 0)
        out[q] = got
    return out


async def max_offset(addr: str, q: int) -> int:
    resp = await call(addr, request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": q}))
    return int(resp.ext("offset") or -1)


async def commit(addr: str, group: str, q: int, offset: int) -> None:
    resp = await call(addr, request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                    {"consumerGroup": group, "topic": TOPIC, "queueId": q, "commitOffset": offset}))
    assert resp.code == ResponseCode.SUCCESS, resp


async def committed(addr: str, group: str, q: int) -> int:
    resp = await call(addr, request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": TOPIC, "queueId": q}))
    return int(resp.ext("offset") or -1) if resp.code == ResponseCode.SUCCESS else -1


async def test_messages_and_offsets_survive_kill_9(start_broker: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    store = tmp_path / "store"
    b = start_broker("p", storePathRootDir=store, flushConsumerOffsetInterval=200)
    ids = await send_many(b.addr, 100)
    before = await read_all(b.addr)
    await commit(b.addr, "G", 1, 7)

    async def saved() -> bool:
        return (store / "config" / "consumerOffset.json").exists()

    await eventually(saved, 30, "offsets written")
    b.kill()  # SIGKILL: no orderly stop, nothing flushed by a shutdown hook
    again = start_broker("p2", storePathRootDir=store)
    assert await read_all(again.addr) == before, "every message back at its offset"
    assert sorted(mid for q in before.values() for _, mid in q) == sorted(ids)
    assert [await max_offset(again.addr, q) for q in range(4)] == [25, 25, 25, 25]
    assert await committed(again.addr, "G", 1) == 7
    resp = await call(again.addr, send_v2(TOPIC, 2, b"new"))
    assert resp.code == ResponseCode.SUCCESS and resp.ext("queueOffset") == "25", "offsets continue"
    assert "read back 100 messages" in again.log()


async def test_memory_only_broker_loses_its_messages(start_broker: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    store = tmp_path / "store"
    b = start_broker("m", storePathRootDir=store, persistMessages=False)
    await send_many(b.addr, 20)
    b.kill()
    again = start_broker("m2", storePathRootDir=store, persistMessages=False)
    assert [await max_offset(again.addr, q) for q in range(4)] == [0, 0, 0, 0]
    assert not (store / "messages").exists()


async def test_files_follow_the_memory_bound(start_broker: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    store = tmp_path / "store"
    b = start_broker("t", storePathRootDir=store, maxMessagesPerQueue=10)
    await send_many(b.addr, 90, size=64 * 1024, queues=1)  # ~5.9 MB in queue 0: two 4 MiB segments
    qdir = store / "messages" / TOPIC / "0"

    async def trimmed() -> bool:
        return len(os.listdir(qdir)) == 1

    await eventually(trimmed, 30, "the segment below the memory bound deleted")
    b.kill()
    again = start_broker("t2", storePathRootDir=store, maxMessagesPerQueue=10)
    got = (await read_all(again.addr, queues=1))[0]
    assert [o for o, _ in got] == list(range(80, 90)), "memory holds the newest 10, offsets as before"


async def test_slave_copies_the_master_and_refuses_pulls_unless_slave_read_is_enabled(
    start_namesrv: Callable[..., object], start_broker: Callable[..., BrokerProcess]
) -> None:
    ns = start_namesrv()
    master = start_broker("a0", brokerName="broker-a", namesrvAddr=ns.addr)  # type: ignore[attr-defined]
    strict = start_broker("a1", brokerName="broker-a", brokerId=1, namesrvAddr=ns.addr)  # type: ignore[attr-defined]
    reader = start_broker("a2", brokerName="broker-a", brokerId=2, namesrvAddr=ns.addr,  # type: ignore[attr-defined]
                          slaveReadEnable=True)
    await send_many(master.addr, 40)
    await commit(master.addr, "G", 0, 3)

    async def copied() -> bool:
        return [await max_offset(reader.addr, q) for q in range(4)] == [10] * 4

    await eventually(copied, 30, "slave caught up")
    assert await read_all(reader.addr) == await read_all(master.addr), "same messages at the same offsets"
    resp = await call(strict.addr, pull(TOPIC, 0, 0))
    assert resp.code == ResponseCode.SYSTEM_BUSY and "[REJECTREQUEST]" in (resp.remark or "")
    # with its master alive, a caught-up slave sends the consumer back to it
    resp = await call(reader.addr, pull(TOPIC, 0, 10))
    assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY and resp.ext("suggestWhichBrokerId") == "0"

    async def offsets_synced() -> bool:
        return await committed(reader.addr, "G", 0) == 3

    await eventually(offsets_synced, 30, "consumer offsets synced from the master")
    master.kill()

    async def answers_itself() -> bool:  # after MASTER_ALIVE_WINDOW (3 s) it no longer bounces to the master
        resp = await call(reader.addr, pull(TOPIC, 0, 10, sys_flag=6, suspend_ms=500))
        assert resp.code in (ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_NOT_FOUND), resp
        return resp.code == ResponseCode.PULL_NOT_FOUND  # a pull at the end is held (long polling), then answered

    await eventually(answers_itself, 30, "the slave serving pulls itself once its master is gone")


async def test_an_acknowledged_message_is_on_disk_before_its_answer(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """kill -9 the instant the last answer arrives: every acknowledged message is read back (answers wait
    for the writer thread, as a Java put copies to the page cache before it answers)."""
    from simclient.pool import ClientPool

    store = tmp_path / "store"
    b = start_broker("k", storePathRootDir=store)
    acked: list[str] = []
    async with ClientPool() as pool:

        async def sender(n: int) -> None:
            for i in range(8):
                uniq = f"{n:016X}{i:016X}"
                resp = await pool.invoke(b.addr, send_v2(TOPIC, (n + i) % 4, b"y" * 200, uniq=uniq), 5.0)
                if resp.code == ResponseCode.SUCCESS:
                    acked.append(uniq)

        async with trio.open_nursery() as nursery:
            for n in range(60):  # many sends in flight at once: answers go out in batches
                nursery.start_soon(sender, n)
        b.kill()
    assert len(acked) == 480
    again = start_broker("k2", storePathRootDir=store)
    back = {mid for q in (await read_all(again.addr)).values() for _, mid in q}
    assert set(acked) <= back


async def test_a_held_answer_goes_out_only_after_the_writer_wrote_its_message(tmp_path: Path) -> None:
    """The mechanism behind the test above, without a race: the writer thread is not running yet."""
    from types import SimpleNamespace

    from broker_stub.config import BrokerConfig
    from broker_stub.persistence import Persistence
    from broker_stub.store import MessageStore

    store = MessageStore("127.0.0.1", 1, 100)
    consuming = SimpleNamespace(hold=SimpleNamespace(count=0))  # no pulls held
    p = Persistence(BrokerConfig(storePathRootDir=str(tmp_path)), store, consuming)  # type: ignore[arg-type]
    assert p.files is not None
    store.journal = p.files
    sent: list[tuple[str, bytes]] = []
    p.hold_answers(lambda conn, data: sent.append((conn, data)) is None)
    store.put("T", 0, b"x", 0, "UNIQ_KEY\x01A\x02", 0, 1, bytes(4), 1, 0, None)
    p.hold_answer("c1", b"answer-1", 1, SerializeType.JSON)
    await trio.sleep(0.2)
    assert sent == [], "held while the message is only queued"
    p.files.start()
    with trio.fail_after(5):
        while not sent:
            await trio.sleep(0.01)
    assert sent == [("c1", b"answer-1")]
    assert (tmp_path / "messages" / "T" / "0" / f"{0:020d}").stat().st_size > 0
    p.hold_answer("c2", b"answer-2", 2, SerializeType.JSON)  # nothing pending: straight out
    assert sent[-1] == ("c2", b"answer-2")
    p.files.close()


async def test_replication_is_code_9010_not_the_namesrv_live_table_code(
    start_namesrv: Callable[..., object], start_broker: Callable[..., BrokerProcess]
) -> None:
    """9001 is the NameServer's GET_BROKER_LIVE_TABLE: a broker copies messages with 9010 and does not know 9001."""
    from broker_stub.replication import REPLICATE_CODE, replicate_request, split_records
    from broker_stub.store import parse_record

    assert REPLICATE_CODE == 9010
    b = start_broker("r")
    await send_many(b.addr, 6, queues=2)
    resp = await call(b.addr, replicate_request([(TOPIC, 0, 1)]))
    assert resp.code == ResponseCode.SUCCESS and resp.ext("more") == "false", resp
    got = sorted((m.queue_id, m.body) for m in map(parse_record, split_records(resp.body)))
    assert [q for q, _ in got] == [0, 0, 1, 1, 1], "queue 0 from offset 1, all of queue 1"
    assert (await call(b.addr, request(9001, {}))).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    ns = start_namesrv()
    assert (await call(ns.addr, request(9001, {}))).code == ResponseCode.SUCCESS  # type: ignore[attr-defined]
    for bad in ([TOPIC, 2**31, 0], [TOPIC, 0, 2**63]):  # beyond a Java int queue id, a Java long offset
        resp = await call(b.addr, request(REPLICATE_CODE, {}, fastjson.dumps_fast({"offsets": [bad]})))
        assert resp.code == ResponseCode.INVALID_PARAMETER and "out of range" in (resp.remark or ""), resp


def test_copied_records_count_against_the_byte_budget() -> None:
    """append_stored (records read back or copied from the master) keeps to maxStoreBytes as put does."""
    from broker_stub.store import MESSAGE_OVERHEAD, QUEUE_OVERHEAD, MessageStore, StoreFullError

    master = MessageStore("127.0.0.1", 1, 1000)
    records = []
    for i in range(40):
        master.put("T", i % 2, b"z" * 1000, 0, "", 0, 1, bytes(4), 1, 0, None)
    for q in (0, 1):
        records += master.get("T", q, 0, 100, 1 << 30)[0]
    size = len(records[0]) + MESSAGE_OVERHEAD
    slave = MessageStore("127.0.0.1", 2, 1000, max_bytes=2 * QUEUE_OVERHEAD + 10 * size)
    for r in records:
        assert slave.append_stored("T", parse_record(r).queue_id, r)
    assert slave.budget.used <= slave.budget.max_bytes
    assert slave.budget.used == 2 * QUEUE_OVERHEAD + 10 * size, "full, oldest dropped first"
    assert [slave.max_offset("T", q) for q in (0, 1)] == [20, 20], "offsets as on the master"
    assert slave.min_offset("T", 0) + slave.min_offset("T", 1) == 30  # 10 held across both queues
    assert not slave.append_stored("T", 0, records[0]), "at or below the queue's end: not kept"
    gap = MessageStore("127.0.0.1", 3, 1000)
    gap.append_stored("T", 0, records[0])
    gap.append_stored("T", 0, records[5])  # the master dropped 1..4: start over at 5
    assert (gap.min_offset("T", 0), gap.max_offset("T", 0)) == (5, 6)
    assert gap.budget.used == QUEUE_OVERHEAD + size
    tiny = MessageStore("127.0.0.1", 4, 1000, max_bytes=QUEUE_OVERHEAD + 100)
    try:
        tiny.append_stored("T", 0, records[0])
    except StoreFullError:
        pass
    else:
        raise AssertionError("a record bigger than the whole budget must be refused")
