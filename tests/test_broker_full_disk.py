"""The broker store on a real full, read-only or torn filesystem (issue 20, item 1).

The store lives on a small tmpfs that the test mounts (CI runs as root; a
machine where mounting fails fails the test, it does not skip it), filled
with a file until little space is left. A real client sends over loopback
TCP; the broker is killed with SIGKILL and restarted on the same store.
What must hold: every message answered SEND_OK is read back after the
restart at the offset its answer named; no offset is answered twice; a
send that cannot be written is refused with Java's SERVICE_NOT_AVAILABLE
and its disk-full remark; once space returns, sends succeed again; a torn
or garbage tail never keeps the broker from starting.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from remoting.transport import connect
from simclient.decode import decode_pulled
from tests.test_broker_stub import call, create_topic, eventually, pull, send_v2

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)

TOPIC = "FullDisk"
QUEUES = 4
BODY = b"m" * 1024


@pytest.fixture
def mount_tmpfs() -> Iterator[Callable[[Path, str], Path]]:
    """Mount a tmpfs (``mount -t tmpfs -o OPTIONS``) on a directory; every one is unmounted afterwards
    (lazily if a process still holds it). A machine where mounting fails fails the test: it needs root."""
    mounted: list[Path] = []

    def mount(where: Path, options: str) -> Path:
        where.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.fail(f"this test needs to mount a tmpfs (run it as root): mount said {done.stderr.strip()!r}")
        mounted.append(where)
        return where

    try:
        yield mount
    finally:
        for where in reversed(mounted):
            if subprocess.run(["umount", str(where)], capture_output=True, check=False).returncode != 0:
                subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


@pytest.fixture
def small_fs(tmp_path: Path, mount_tmpfs: Callable[[Path, str], Path]) -> Path:
    """A 512 KiB tmpfs for this test."""
    return mount_tmpfs(tmp_path / "fs", "size=512k")


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(fs: Path, leave: int) -> Path:
    """A filler file that leaves about ``leave`` bytes free on ``fs``."""
    filler = fs / "filler"
    with open(filler, "ab") as fh:
        fh.write(b"\0" * max(0, free_bytes(fs) - leave))
    return filler


class Ledger:
    """Every answer the test got: acknowledged (queue, offset) -> message id, and the refusals."""

    def __init__(self) -> None:
        self.acked: dict[tuple[int, int], str] = {}
        self.duplicates: list[tuple[int, int]] = []
        self.refusals: list[tuple[int, str]] = []
        self.count = 0

    async def send(self, addr: str, n: int, tag: str) -> int:
        """``n`` sends of 1 KiB on one connection, round-robin over the queues; returns how many were acked."""
        acked = 0
        async with connect(addr) as client:
            for _ in range(n):
                self.count += 1
                uniq = f"{tag}{self.count:030X}"[:32]
                resp = await client.invoke(send_v2(TOPIC, self.count % QUEUES, BODY, uniq=uniq), 5.0)
                if resp.code == ResponseCode.SUCCESS:
                    key = (int(resp.ext("queueId") or -1), int(resp.ext("queueOffset") or -1))
                    if key in self.acked:
                        self.duplicates.append(key)
                    self.acked[key] = uniq
                    acked += 1
                else:
                    self.refusals.append((resp.code, resp.remark or ""))
        return acked


async def read_back(addr: str) -> dict[tuple[int, int], str]:
    """(queue, offset) -> message id of everything the broker serves on TOPIC."""
    out: dict[tuple[int, int], str] = {}
    for q in range(QUEUES):
        resp = await call(addr, request(RequestCode.GET_MIN_OFFSET, {"topic": TOPIC, "queueId": q}))
        offset = int(resp.ext("offset") or 0)
        for _ in range(1000):  # bounded: far more rounds than the messages sent
            resp = await call(addr, pull(TOPIC, q, offset))
            if resp.code != ResponseCode.SUCCESS:
                break
            for m in decode_pulled(resp.body):
                out[(q, m.queue_offset)] = m.msg_id
            offset = int(resp.ext("nextBeginOffset") or 0)
    return out


def assert_refusals_are_javas(ledger: Ledger) -> None:
    for code, remark in ledger.refusals:
        assert code == ResponseCode.SERVICE_NOT_AVAILABLE, (code, remark)
        assert "the broker's disk is full" in remark and "No space left on device" in remark, remark


async def test_a_full_disk_refuses_sends_and_loses_no_acknowledged_message(
    start_broker: Callable[..., BrokerProcess], small_fs: Path
) -> None:
    """Issue 20's sequence: 512 KiB tmpfs, 96 KiB free, 300 x 1 KiB sends; kill -9, restart; space back,
    50 more in the same process; kill -9, restart."""
    store = small_fs / "store"
    broker = start_broker("f1", storePathRootDir=store)
    assert (await call(broker.addr, create_topic(TOPIC, queues=QUEUES))).code == ResponseCode.SUCCESS
    filler = fill(small_fs, 96 * 1024)
    ledger = Ledger()
    await ledger.send(broker.addr, 300, "A")
    assert ledger.refusals, "the disk filled: some sends must have been refused"
    assert 20 <= len(ledger.acked) < 100, len(ledger.acked)  # 96 KiB hold about 80 records of 1.2 KiB
    assert_refusals_are_javas(ledger)
    assert not ledger.duplicates
    # refusing now, until a write succeeds again: a send made now is refused at once
    resp = await call(broker.addr, send_v2(TOPIC, 0, BODY))
    assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert "Traceback" not in broker.log()

    broker.kill()
    again = start_broker("f2", storePathRootDir=store)  # the disk is still full
    served = await read_back(again.addr)
    assert {k: served.get(k) for k in ledger.acked} == ledger.acked, "every acknowledged message, at its offset"
    await ledger.send(again.addr, 20, "B")  # still full: refused (or written where a page still has room)
    assert_refusals_are_javas(ledger)

    filler.unlink()  # space returns: sends succeed again within the probe interval

    async def accepting() -> bool:
        if await ledger.send(again.addr, 1, "C") == 1:
            return True
        await trio.sleep(0.2)  # a probe runs about once a second
        return False

    await eventually(accepting, 30.0, "sends accepted again after space returned")
    assert await ledger.send(again.addr, 50, "D") == 50
    assert not ledger.duplicates, f"offsets answered twice: {ledger.duplicates}"

    again.kill()
    third = start_broker("f3", storePathRootDir=store)
    served = await read_back(third.addr)
    assert {k: served.get(k) for k in ledger.acked} == ledger.acked
    resp = await call(third.addr, send_v2(TOPIC, 1, BODY))
    assert resp.code == ResponseCode.SUCCESS
    assert (1, int(resp.ext("queueOffset") or -1)) not in ledger.acked, "a new offset, never one answered before"
    for b in (broker, again, third):
        assert "Traceback" not in b.log()


async def test_a_read_only_directory_refuses_sends_until_it_is_writable_again(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path, mount_tmpfs: Callable[[Path, str], Path]
) -> None:
    """A topic's directory is a read-only file system (a tmpfs mounted ``ro`` there): its first write fails
    with EROFS, the broker refuses every send, and takes sends again once the directory is writable."""
    store = tmp_path / "store"
    ro = mount_tmpfs(store / "messages" / "ReadOnly", "ro,size=64k")
    broker = start_broker("ro", storePathRootDir=store)
    for topic in (TOPIC, "ReadOnly"):
        assert (await call(broker.addr, create_topic(topic, queues=QUEUES))).code == ResponseCode.SUCCESS
    ledger = Ledger()
    assert await ledger.send(broker.addr, 8, "E") == 8
    resp = await call(broker.addr, send_v2("ReadOnly", 0, BODY))
    assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE and "Read-only file system" in (resp.remark or ""), resp
    assert await ledger.send(broker.addr, 4, "F") == 0, "every send refused while the disk refuses writes"
    for code, remark in ledger.refusals:
        assert code == ResponseCode.SERVICE_NOT_AVAILABLE and "Read-only file system" in remark, remark
    subprocess.run(["umount", str(ro)], check=True)

    async def accepting() -> bool:
        if (await call(broker.addr, send_v2("ReadOnly", 0, BODY))).code == ResponseCode.SUCCESS:
            return True
        await trio.sleep(0.2)  # a probe runs about once a second
        return False

    await eventually(accepting, 30.0, "sends accepted again once the directory is writable")
    assert await ledger.send(broker.addr, 8, "G") == 8
    assert not ledger.duplicates
    served = await read_back(broker.addr)
    assert {k: served.get(k) for k in ledger.acked} == ledger.acked
    assert sum("refusing sends until a write succeeds again" in line for line in broker.log().splitlines()) == 1
    assert "Traceback" not in broker.log()


def segments(store: Path, queue_id: int) -> list[Path]:
    return sorted((store / "messages" / TOPIC / str(queue_id)).iterdir())


async def test_torn_and_garbage_tails_are_cut_back_and_the_broker_serves(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """Cut one segment mid-body, another mid-header, append garbage to a third and zeroes to a fourth:
    the broker starts, logs one line per segment with the bytes dropped, and serves every whole record."""
    store = tmp_path / "store"
    broker = start_broker("t1", storePathRootDir=store)
    assert (await call(broker.addr, create_topic(TOPIC, queues=QUEUES))).code == ResponseCode.SUCCESS
    ledger = Ledger()
    assert await ledger.send(broker.addr, 40, "H") == 40  # 10 records per queue
    broker.kill()
    record = segments(store, 0)[0].stat().st_size // 10
    with open(segments(store, 0)[0], "r+b") as fh:  # mid-body of the last record
        fh.truncate(9 * record + record // 2)
    with open(segments(store, 1)[0], "r+b") as fh:  # mid-header of the last record
        fh.truncate(9 * record + 10)
    with open(segments(store, 2)[0], "ab") as fh:
        fh.write(os.urandom(3000))
    with open(segments(store, 3)[0], "ab") as fh:
        fh.write(b"\0" * 4096)

    again = start_broker("t2", storePathRootDir=store)
    log = again.log()
    assert "Traceback" not in log
    cut_lines = [line for line in log.splitlines() if "after the last whole record" in line]
    assert len(cut_lines) == 4, log
    assert any("dropped 3000 bytes" in line for line in cut_lines) and any("dropped 4096 bytes" in line for line in cut_lines)
    served = await read_back(again.addr)
    expected = {k: v for k, v in ledger.acked.items() if not (k[0] in (0, 1) and k[1] == 9)}
    assert served == expected
    for q in range(QUEUES):  # sends continue right after the last whole record
        resp = await call(again.addr, send_v2(TOPIC, q, BODY))
        assert resp.code == ResponseCode.SUCCESS and resp.ext("queueOffset") == ("9" if q in (0, 1) else "10")
    again.kill()
    third = start_broker("t3", storePathRootDir=store)
    assert "after the last whole record" not in third.log(), "the tails were cut once, for good"
    assert len(await read_back(third.addr)) == 42  # 38 whole records and the 4 sent since


async def test_a_tear_in_an_older_segment_and_a_huge_length_do_not_stop_the_start(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """A tear in the middle of a queue (not its last segment), and a record header claiming 2 GiB: the broker
    starts, keeps every whole record it can reach, and continues the queue's offsets after the last one."""
    store = tmp_path / "store"
    broker = start_broker("m1", storePathRootDir=store)
    assert (await call(broker.addr, create_topic(TOPIC, queues=QUEUES))).code == ResponseCode.SUCCESS
    big = b"b" * (64 * 1024)
    async with connect(broker.addr) as client:
        for i in range(70):  # ~4.5 MB in queue 0: two 4 MiB segments
            assert (await client.invoke(send_v2(TOPIC, 0, big, uniq=f"{i:032X}"), 5.0)).code == ResponseCode.SUCCESS
        for i in range(3):
            assert (await client.invoke(send_v2(TOPIC, 1, BODY), 5.0)).code == ResponseCode.SUCCESS
    broker.kill()
    first, second = segments(store, 0)
    size = first.stat().st_size
    with open(first, "r+b") as fh:
        fh.truncate(size // 2)  # somewhere mid-record
    with open(segments(store, 1)[0], "r+b") as fh:
        fh.seek(0, os.SEEK_END)
        fh.write((2**31 - 1).to_bytes(4, "big") + (-626843481).to_bytes(4, "big", signed=True) + b"x" * 100)

    again = start_broker("m2", storePathRootDir=store)
    assert "Traceback" not in again.log()
    resp = await call(again.addr, request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0}))
    assert resp.ext("offset") == "70"
    resp = await call(again.addr, request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 1}))
    assert resp.ext("offset") == "3"
    resp = await call(again.addr, send_v2(TOPIC, 0, BODY))
    assert resp.code == ResponseCode.SUCCESS and resp.ext("queueOffset") == "70"


async def test_a_held_pull_is_answered_once_the_message_is_written(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """On disk, a message is readable only once written: a long-polling pull waiting on its queue is woken
    then (not at the put), and gets it; a pull right after the send's answer finds it."""
    from tests.test_broker_stub import RawConn

    broker = start_broker("lp", storePathRootDir=tmp_path / "store")
    consumer = await RawConn.open(broker.addr)
    async with consumer.stream, connect(broker.addr) as producer:
        assert (await producer.invoke(create_topic(TOPIC, queues=1))).code == ResponseCode.SUCCESS
        await consumer.send(pull(TOPIC, 0, 0, sys_flag=2 | 4, suspend_ms=20000), 1)
        sent = await producer.invoke(send_v2(TOPIC, 0, b"wanted"))
        assert sent.code == ResponseCode.SUCCESS
        resp = await consumer.response(1, timeout=15.0)
        assert resp.code == ResponseCode.SUCCESS and [m.phys for m in decode_pulled(resp.body)] == [phys(sent)]
        sent = await producer.invoke(send_v2(TOPIC, 0, b"next"))
        resp = await producer.invoke(pull(TOPIC, 0, 1))
        assert resp.code == ResponseCode.SUCCESS and [m.phys for m in decode_pulled(resp.body)] == [phys(sent)]


def phys(sent: object) -> int:
    """The commit-log offset a send's message id ends with."""
    return int((sent.ext("msgId") or "")[16:], 16)  # type: ignore[attr-defined]
