"""Route snapshot: export/restore of the table, the file format, the writer (no processes here).

The table is driven with injected time as in test_routes.py; snapshot files
are real files in tmp_path. Process-level warm restarts are in
test_warm_restart.py.
"""

from __future__ import annotations

import logging
import os
import struct
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
import trio

from namesrv import route_state, snapshot
from namesrv.config import NamesrvConfig
from namesrv.kvconfig import KVConfig
from namesrv.processor import NameServerProcessor
from namesrv.routes import RouteTable
from remoting import requests as rq
from remoting.bodies import DataVersion, TopicConfig
from remoting.codec import FrameDecoder
from remoting.codes import RequestCode, ResponseCode
from tests.test_routes import A0, A1, C1, RW, Loader, body, reg, register, route, snapshot as table_state

B0 = "10.0.0.3:10911"
WALL = 1_700_000_000_000  # wall-clock ms of a restore
V2 = DataVersion(2, 2_000, 0)


def roundtrip(table: RouteTable, now: float = 1_000.0) -> tuple[RouteTable, route_state.Restored]:
    """Export ``table`` through the real file encoding and restore it into a fresh table."""
    data = snapshot.encode(route_state.export(route_state.capture(table)), 123)
    state_ms, state = snapshot.decode(data)
    assert state_ms == 123
    fresh = RouteTable()
    return fresh, route_state.restore(fresh, state, now, WALL)


def populated() -> RouteTable:
    """Master + slave, a second group, filter servers, a static-topic mapping, a zone, a wiped perm."""
    table = RouteTable()
    register(table, reg(A0, 0, ha="10.0.0.1:10912", zone="z1", timeout=30_000), body(filter_servers=["10.0.0.9:1"]),
             conn="a0", digest=b"dA")
    register(table, reg(A1, 1), conn="a1", digest=b"dA1")
    mapping = {"T9": {"bname": "broker-a", "epoch": 3, "totalQueues": 4, "hostedQueues": {"0": [{"queueId": 0}]}}}
    register(table, reg(B0, 0, name="broker-b", cluster="C2"),
             body({"T1": (4, 4, RW, 0), "T9": (4, 4, RW, 0)}, mapping_infos=mapping), conn="b0", digest=b"dB")
    table.wipe_write_perm("broker-b")
    return table


def test_roundtrip_restores_every_answer() -> None:
    table = populated()
    fresh, restored = roundtrip(table)
    assert restored.brokers == 3 and restored.topics == len(table.topic_queues)
    for topic in table.topic_queues:
        for standard in (True, False):
            assert fresh.route_body(topic, standard) == table.route_body(topic, standard), topic
    assert fresh.cluster_info_body() == table.cluster_info_body()
    assert fresh.filter_servers == table.filter_servers and fresh.mappings == table.mappings
    assert fresh.all_topics() == table.all_topics()  # order kept
    for key, info in table.live.items():
        got = fresh.live[key]
        assert (got.name, got.broker_id, got.timeout_ms, got.data_version, got.ha_server_addr, got.body_digest) == (
            info.name, info.broker_id, info.timeout_ms, info.data_version, info.ha_server_addr, info.body_digest)
        assert got.last_update_ms == 1_000.0 and got.conn is None  # heard from at the restore, no connection
    # a slave registering against the restored master gets its HA address, as before the restart
    out = register(fresh, reg(A1, 1), conn="new-a1", now=1_001.0, digest=b"dA1")
    assert out.ok and out.master_addr == A0 and out.ha_server_addr == "10.0.0.1:10912"


def test_restored_brokers_expire_under_their_own_timeout_counted_from_the_restore() -> None:
    fresh, restored = roundtrip(populated(), now=50_000.0)
    assert {b.addr for b in restored.provisional(fresh)} == {A0, A1, B0}
    # broker-a's master sent heartbeatTimeoutMillis 30000; the others have the default 120000
    assert fresh.scan_not_active(50_000.0 + 30_000) == []
    gone = fresh.scan_not_active(50_000.0 + 30_001)
    assert [(r.addr, r.reason, r.conn) for r in gone] == [(A0, "heartbeat timeout", None)]
    assert {b.addr for b in restored.provisional(fresh)} == {A1, B0}
    assert {r.addr for r in fresh.scan_not_active(50_000.0 + 120_001)} == {A1, B0}
    assert route(fresh, "T1") is None and fresh.brokers == {}


def test_unchanged_reregistration_after_restore_is_cheap_and_adopts_the_connection() -> None:
    table = RouteTable()
    loader = Loader(body())
    assert table.register_broker(reg(), loader, body_digest=b"same", conn="old", now=0).ok
    fresh, restored = roundtrip(table, now=10.0)
    again = Loader(body())
    assert fresh.register_broker(reg(), again, body_digest=b"same", conn="new", now=11.0).ok
    assert again.calls == 0  # the digest is known: liveness only, no parse
    assert not restored.is_provisional(fresh, (C1, A0)) and restored.provisional(fresh) == []
    # the broker now belongs to its new connection: closing it removes the broker at once
    assert [r.addr for r in fresh.connection_closed("new")] == [A0]
    assert route(fresh, "T1") is None


def test_reregistration_with_a_new_data_version_after_restore_applies_its_topics() -> None:
    table = RouteTable()
    register(table, reg(), conn="old", digest=b"v1")
    fresh, restored = roundtrip(table)
    changed = body({"T1": (4, 4, RW, 0), "New": (2, 2, RW, 0)}, V2)
    loader = Loader(changed)
    assert fresh.register_broker(reg(), loader, body_digest=b"v2", conn="new", now=1_001.0).ok
    assert loader.calls == 1
    new = route(fresh, "New")
    assert new is not None and [q.write_queue_nums for q in new.queue_datas] == [2]
    assert fresh.live[(C1, A0)].data_version == V2 and restored.provisional(fresh) == []


def test_topic_removed_before_the_snapshot_returns_on_an_unchanged_reregistration() -> None:
    table = RouteTable()
    register(table, reg(), conn="c", digest=b"same")
    table.delete_topic("T2")
    fresh, _ = roundtrip(table)
    assert route(fresh, "T2") is None
    loader = Loader(body())
    assert fresh.register_broker(reg(), loader, body_digest=b"same", conn="new", now=1_001.0).ok
    assert loader.calls == 1 and route(fresh, "T2") is not None  # as without the restart


def test_a_second_restart_does_not_give_a_still_provisional_broker_a_new_timeout() -> None:
    """A NameServer restarting again and again must not keep a dead broker alive."""
    first, restored = roundtrip(populated(), now=0.0)  # restore 1 at WALL
    register(first, reg(A1, 1), conn="new", now=10.0, digest=b"dA1")  # the slave registered since: confirmed
    data = snapshot.encode(route_state.export(route_state.capture_with(first, restored)), 1)
    second = RouteTable()
    again = route_state.restore(second, snapshot.decode(data)[1], 500.0, WALL + 50_000)  # restore 2, 50 s later
    assert again.since[(C1, A0)] == WALL and again.since[("C2", B0)] == WALL  # still provisional since restore 1
    assert again.since[(C1, A1)] == WALL + 50_000
    # broker-a's master (timeout 30 s) is already past it; broker-b (120 s) has 70 s left; the slave a full 120 s
    assert [r.addr for r in second.scan_not_active(501.0)] == [A0]
    assert [r.addr for r in second.scan_not_active(500.0 + 70_001)] == [B0]
    assert [r.addr for r in second.scan_not_active(500.0 + 120_001)] == [A1]


def test_heartbeat_keeps_a_restored_broker_provisional_but_alive() -> None:
    fresh, restored = roundtrip(populated(), now=0.0)
    assert fresh.heartbeat("C2", B0, 100_000.0)
    assert restored.is_provisional(fresh, ("C2", B0))
    assert {r.addr for r in fresh.scan_not_active(120_001.0)} == {A0, A1}


def test_capture_in_steps_overlapping_a_removal_leaves_no_orphan_queue_data() -> None:
    table = RouteTable()
    register(table, reg(), conn="a")
    register(table, reg(B0, 0, name="broker-b", cluster="C2"), conn="b")
    capture = route_state.Capture(table, chunk=1)
    assert capture.step()  # the first topic, with both brokers
    table.unregister_broker("C2", B0, "broker-b")  # meanwhile broker-b leaves (and its queue data)
    while capture.step():
        pass
    fresh = RouteTable()
    _, state = snapshot.decode(snapshot.encode(route_state.export(capture.finish()), 1))
    restored = route_state.restore(fresh, state, 0.0, WALL)
    assert restored.brokers == 1 and set(fresh.brokers) == {"broker-a"}
    assert all(set(qmap) == {"broker-a"} for qmap in fresh.topic_queues.values())
    for topic in table.topic_queues:
        assert fresh.route_body(topic, True) == table.route_body(topic, True)


@pytest.mark.parametrize("damage", [
    lambda d: {**d, "topics": d["topics"][:-1]},
    lambda d: {**d, "topicQueueSets": [99] * len(d["topicQueueSets"])},
    lambda d: {**d, "brokers": [["C1", "broker-a", {"x": A0}, False, None]]},
    lambda d: {**d, "liveBrokers": [["C1", A0]]},
    lambda d: {**d, "queueSets": [[["broker-a", 1, 1, "6", 0]]]},
    lambda d: {**d, "liveBrokers": [d["liveBrokers"][0][:4] + ["1"] + d["liveBrokers"][0][5:]]},
    lambda d: [],
], ids=["lengths", "index", "broker-id", "live-short", "perm-type", "timeout-type", "not-a-map"])
def test_bad_state_is_refused_and_leaves_the_table_untouched(damage: Any) -> None:
    state = route_state.export(route_state.capture(populated()))
    table = RouteTable()
    register(table, reg(B0, 0, name="other"), conn="x")
    before = table_state(table)
    with pytest.raises(route_state.StateError):
        route_state.restore(table, damage(state), 0.0, WALL)
    assert table_state(table) == before


# ----------------------------------------------------------------------
# the file


def good_file(tmp_path: Path, table: RouteTable | None = None, state_ms: int | None = None) -> Path:
    path = tmp_path / "routeSnapshot.msgpack"
    state = route_state.export(route_state.capture(table or populated()))
    path.write_bytes(snapshot.encode(state, int(time.time() * 1000) if state_ms is None else state_ms))
    return path


def snapshots_for(path: Path, **config: Any) -> snapshot.RouteSnapshots:
    cfg = NamesrvConfig(routeSnapshotPath=str(path), **config)
    return snapshot.RouteSnapshots(RouteTable(), cfg, now_ms=lambda: 5.0)


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flip(data: bytes) -> bytes:
    return data[:-3] + bytes([data[-3] ^ 0xFF]) + data[-2:]


def _future(data: bytes) -> bytes:
    return data[:8] + struct.pack(">H", snapshot.FORMAT_VERSION + 1) + data[10:]


@pytest.mark.parametrize(("damage", "reason"), [
    (_truncate, "truncated"),
    (lambda d: d[:10], "truncated"),
    (_flip, "corrupt (CRC32 mismatch)"),
    (_future, f"format version {snapshot.FORMAT_VERSION + 1}"),
    (lambda d: b"{\"configTable\":{}}" + d, "bad magic"),
    (lambda d: b"", "truncated"),
])
def test_damaged_snapshot_is_ignored_with_one_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                        damage: Any, reason: str) -> None:
    path = good_file(tmp_path)
    path.write_bytes(damage(path.read_bytes()))
    snaps = snapshots_for(path)
    with caplog.at_level(logging.INFO, logger="namesrv"):
        assert snaps.restore() is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "ignored" in lines[0] and reason in lines[0], lines
    assert snaps.table.topic_queues == {} and snaps.table.live == {}


def test_payload_that_is_not_msgpack_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "routeSnapshot.msgpack"
    payload = b"\xc1\xc1\xc1"  # 0xc1 is never used in msgpack
    path.write_bytes(struct.pack(">8sHHQQI", snapshot.MAGIC, snapshot.FORMAT_VERSION, 0, int(time.time() * 1000),
                                 len(payload), zlib.crc32(payload)) + payload)
    with caplog.at_level(logging.INFO, logger="namesrv"):
        assert snapshots_for(path).restore() is None
    assert "corrupt (msgpack" in caplog.text


def test_snapshot_older_than_the_bound_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    old = int(time.time() * 1000) - 10_000
    path = good_file(tmp_path, state_ms=old)
    os.utime(path, (old / 1000, old / 1000))
    with caplog.at_level(logging.INFO, logger="namesrv"):
        assert snapshots_for(path, routeSnapshotMaxAgeMillis=5_000).restore() is None
    assert "s old (routeSnapshotMaxAgeMillis 5000)" in caplog.text
    # the same file within a larger bound restores
    assert snapshots_for(path, routeSnapshotMaxAgeMillis=60_000).restore() is not None


def test_a_fresh_mtime_keeps_an_unchanged_old_state_usable(tmp_path: Path) -> None:
    """The writer refreshes the mtime while nothing changes: the age counts from it."""
    path = good_file(tmp_path, state_ms=int(time.time() * 1000) - 600_000)
    restored = snapshots_for(path).restore()
    assert restored is not None and restored.brokers == 3


def test_disabled_warm_restart_neither_reads_nor_writes(tmp_path: Path) -> None:
    path = good_file(tmp_path)
    snaps = snapshots_for(path, warmRestartEnable=False)
    assert snaps.restore() is None and snaps.table.topic_queues == {}
    before = path.stat().st_mtime_ns
    register(snaps.table, reg(), conn="c")
    trio.run(snaps.write_final)
    assert path.stat().st_mtime_ns == before


def test_missing_file_is_a_cold_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="namesrv"):
        assert snapshots_for(tmp_path / "none.msgpack").restore() is None
    assert "no route snapshot" in caplog.text


def test_100k_topic_table_restores_in_linear_cpu_time(tmp_path: Path) -> None:
    table = RouteTable()
    topics = {f"Topic{i:06d}": (8, 8, RW, 0) for i in range(100_000)}
    register(table, reg(), body(topics), conn="a", digest=b"a")
    register(table, reg(B0, 0, name="broker-b"), body(topics), conn="b", digest=b"b")
    path = good_file(tmp_path, table)
    assert path.stat().st_size < 4 * 1024 * 1024  # bounded: a name and an index per topic
    snaps = snapshots_for(path)
    began = time.process_time()  # CPU time: wall time belongs to bench/snapshot_bench.py
    restored = snaps.restore()
    took = time.process_time() - began
    assert restored is not None and restored.topics == 100_000 and restored.brokers == 2
    assert took < 3.0, f"restore of 100,000 topics took {took:.2f} s of CPU"
    assert snaps.table.route_body("Topic099999", True) == table.route_body("Topic099999", True)


# ----------------------------------------------------------------------
# the writer


def test_writer_writes_only_when_something_durable_changed(tmp_path: Path) -> None:
    path = tmp_path / "s" / "routeSnapshot.msgpack"
    snaps = snapshots_for(path)
    table = snaps.table

    async def main() -> list[bool]:
        out = [await snaps.write_if_changed()]  # the first write: even an empty table is the current state
        register(table, reg(), conn="c", digest=b"d")
        out.append(await snaps.write_if_changed())
        out.append(await snaps.write_if_changed())  # nothing changed
        register(table, reg(), conn="c", now=5, digest=b"d")  # an unchanged re-registration: liveness only
        table.heartbeat(C1, A0, 6)
        out.append(await snaps.write_if_changed())
        table.wipe_write_perm("broker-a")
        out.append(await snaps.write_if_changed())
        register(table, reg(timeout=9_000), conn="c", now=7, digest=b"d")  # a new heartbeat timeout is kept
        out.append(await snaps.write_if_changed())
        return out

    assert trio.run(main) == [True, True, False, False, True, True]
    assert snaps.writes == 4
    restored = snapshots_for(path).restore()
    assert restored is not None and restored.entries[(C1, A0)].timeout_ms == 9_000
    assert [n for n in os.listdir(path.parent)] == ["routeSnapshot.msgpack"]  # no temp file left


def test_unchanged_state_refreshes_the_mtime(tmp_path: Path) -> None:
    path = tmp_path / "routeSnapshot.msgpack"
    snaps = snapshots_for(path)
    register(snaps.table, reg(), conn="c")
    trio.run(snaps.write_if_changed)
    os.utime(path, (1_000_000, 1_000_000))
    assert trio.run(snaps.write_if_changed) is False
    assert path.stat().st_mtime > time.time() - 60


def test_write_failure_is_logged_once_and_retried(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    snaps = snapshots_for(blocker / "routeSnapshot.msgpack")  # a directory that cannot exist
    register(snaps.table, reg(), conn="c")

    async def main() -> list[bool]:
        return [await snaps.write_if_changed() for _ in range(3)]

    with caplog.at_level(logging.INFO, logger="namesrv"):
        assert trio.run(main) == [False, False, False]
    assert sum("cannot write route snapshot" in r.getMessage() for r in caplog.records) == 1
    snaps.config.routeSnapshotPath = str(tmp_path / "ok" / "routeSnapshot.msgpack")
    with caplog.at_level(logging.INFO, logger="namesrv"):
        assert trio.run(snaps.write_if_changed) is True
    assert "written again" in caplog.text


def test_a_value_msgpack_cannot_hold_fails_the_write_not_the_server(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    snaps = snapshots_for(tmp_path / "routeSnapshot.msgpack")
    register(snaps.table, reg(), body(version=DataVersion(2**70, 1, 0)), conn="c", digest=b"big")
    with caplog.at_level(logging.INFO, logger="namesrv"):
        assert trio.run(snaps.write_if_changed) is False
    assert "cannot write route snapshot" in caplog.text and "OverflowError" in caplog.text
    register(snaps.table, reg(), body(version=DataVersion(3, 1, 0)), conn="c", now=1, digest=b"ok")
    assert trio.run(snaps.write_if_changed) is True


def test_query_data_version_of_a_provisional_broker_says_changed(tmp_path: Path) -> None:
    """A Java broker with forceRegister=false then registers on its own connection."""
    path = good_file(tmp_path)
    cfg = NamesrvConfig(routeSnapshotPath=str(path), kvConfigPath=str(tmp_path / "kv.json"))

    async def persist(_path: str, _data: bytes) -> None:
        raise AssertionError("no write expected")

    proc = NameServerProcessor(cfg, KVConfig(cfg.kvConfigPath), clock=time.monotonic, persist=persist)
    snaps = snapshot.RouteSnapshots(proc.table, cfg, now_ms=proc.now_ms)
    proc.restored = snaps.restore()
    stored = proc.table.live[("C2", B0)].data_version

    def ask() -> bool:
        req = rq.query_data_version(cluster="C2", broker_name="broker-b", broker_addr=B0, broker_id=0,
                                    data_version=stored)
        answer = proc.handle(req, "conn")
        assert answer is not None
        (resp,) = FrameDecoder().feed(answer)
        assert resp.code == ResponseCode.SUCCESS
        return (resp.ext_fields or {})["changed"] == "true"

    assert ask() is True  # provisional: register, please
    reg_req = rq.register_broker(cluster="C2", broker_name="broker-b", broker_addr=B0, broker_id=0,
                                 topics=[TopicConfig("T1", 4, 4, RW)], data_version=stored)
    assert RequestCode(reg_req.code) == RequestCode.REGISTER_BROKER and proc.handle(reg_req, "conn") is not None
    assert ask() is False  # registered since: the usual answer


def test_a_data_version_change_is_written_with_the_last_capture_topics_and_a_topic_change_reads_them_again(
    tmp_path: Path,
) -> None:
    """The writer reuses its last capture's topics while the generation stays, and only then."""
    snaps = snapshots_for(tmp_path / "routes.msgpack")
    table = snaps.table
    register(table, reg(), body(version=DataVersion(1, 1)))

    def restored() -> RouteTable:
        fresh = RouteTable()
        _, state = snapshot.decode((tmp_path / "routes.msgpack").read_bytes())
        route_state.restore(fresh, state, 0.0, WALL)
        return fresh

    assert trio.run(snaps.write_if_changed)
    first = snaps._topics_of
    assert first is not None
    register(table, reg(), body(version=DataVersion(2, 2)))  # a new data version, the same topics
    assert trio.run(snaps.write_if_changed)
    assert snaps._topics_of is not None and snaps._topics_of[1].topics is first[1].topics  # not read again
    again = restored()
    assert again.live[(C1, A0)].data_version == DataVersion(2, 2)
    assert {t: again.route_body(t, True) for t in table.topic_queues} == {
        t: table.route_body(t, True) for t in table.topic_queues}
    register(table, reg(), body({"T9": (2, 2, RW, 0)}, version=DataVersion(3, 3)))  # the topics change
    assert trio.run(snaps.write_if_changed)
    assert snaps._topics_of is not None and snaps._topics_of[1].topics is not first[1].topics
    fresh = restored()
    assert "T9" in fresh.topic_queues and set(fresh.topic_queues) == set(table.topic_queues)
