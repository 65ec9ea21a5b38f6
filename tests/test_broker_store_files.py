"""The message files' writer and reader on real files: what a failed write leaves, what replay reads.

These drive :class:`broker_stub.queue_files.QueueFiles` and
:class:`broker_stub.segments.SegmentScan` directly (the TCP-level tests
are in test_broker_full_disk.py): a full tmpfs for the writer, large and
corrupt files for the reader.
"""

from __future__ import annotations

import io
import os
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from broker_stub.queue_files import BatchReport, QueueFiles
from broker_stub.segments import SegmentScan, segment_name
from broker_stub.store import MessageStore
from tests.test_broker_full_disk import mount_tmpfs  # noqa: F401  (the fixture)


def records(topic: str, queue_id: int, count: int, size: int = 1000) -> list[bytes]:
    """``count`` records of one queue, as the store lays them out, offsets 0..count-1."""
    store = MessageStore("127.0.0.1", 1, count + 1, max_bytes=1 << 34)
    for i in range(count):
        store.put(topic, queue_id, os.urandom(size), 0, f"UNIQ_KEY\x01{i:032X}\x02", 0, 1, bytes(4), 1, 0, None)
    got, _ = store.get(topic, queue_id, 0, count, 1 << 40, max_scan=count)
    return got


class Reports:
    """Collects the writer's reports (from its thread) and waits for them."""

    def __init__(self) -> None:
        self.items: list[BatchReport] = []
        self.cond = threading.Condition()

    def __call__(self, report: BatchReport) -> None:
        with self.cond:
            self.items.append(report)
            self.cond.notify_all()

    def wait(self, check: Callable[[list[BatchReport]], bool], timeout: float = 10.0) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: check(self.items), timeout), self.items


def test_a_write_that_fails_is_cut_back_to_whole_records_and_fails_until_resumed(
    tmp_path: Path, mount_tmpfs: Callable[[Path, str], Path]
) -> None:
    fs = mount_tmpfs(tmp_path / "fs", "size=256k")
    files = QueueFiles(str(fs / "store"))
    reports = Reports()
    files.on_report = reports
    list(files.replay())
    files.start()
    try:
        recs = records("T", 0, 400)
        size = len(recs[0])
        for i, rec in enumerate(recs):
            files.append("T", 0, i, rec, "q0")
        reports.wait(lambda items: bool(items) and items[-1].done_through == 400)
        failure = next(r for r in reports.items if r.error is not None)
        assert failure.error.errno == 28 and failure.error_key == ("T", 0)  # ENOSPC
        ok = failure.ok_through
        written = max(r.written.get("q0", 0) for r in reports.items)
        assert 0 < ok == written < 400, "appends 1..ok are records 0..ok-1, on disk"
        assert all(r.ok_through == ok for r in reports.items[reports.items.index(failure):])
        segment = fs / "store" / "messages" / "T" / "0" / segment_name(0)
        assert segment.stat().st_size == ok * size, "cut back to the last whole record"

        os.truncate(segment, 0)  # space is back, but no resume yet: an append is still refused, unwritten
        files.append("T", 0, 0, recs[0], "q0")
        reports.wait(lambda items: items[-1].done_through == 401)
        assert reports.items[-1].ok_through < 401 and segment.stat().st_size == 0
        files.resume()
        files.probe(("T", 0))
        reports.wait(lambda items: items[-1].probe is not None)
        assert reports.items[-1].probe == "", "the probe wrote, synced and removed its file"
        assert not (fs / "store" / "messages" / "T" / "0" / ".write-probe").exists()
        files.append("T", 0, 0, recs[0], "q0")  # the offset the event loop rolled back to
        reports.wait(lambda items: items[-1].done_through == 402 and items[-1].ok_through == 402)
        assert segment.stat().st_size == size
    finally:
        files.close()


def test_the_writer_never_appends_after_a_gap(tmp_path: Path) -> None:
    """An append whose offset does not follow the queue's last record starts a new segment named after it,
    so a segment's offsets are always consecutive (what replay checks)."""
    files = QueueFiles(str(tmp_path / "store"))
    reports = Reports()
    files.on_report = reports
    files.start()
    try:
        recs = records("T", 0, 10)
        for i in (0, 1, 2):
            files.append("T", 0, i, recs[i], "q")
        for i in (7, 8):  # a slave whose master dropped 3..6
            files.append("T", 0, i, recs[i], "q")
        reports.wait(lambda items: bool(items) and items[-1].ok_through == 5)
    finally:
        files.close()
    qdir = tmp_path / "store" / "messages" / "T" / "0"
    assert sorted(os.listdir(qdir)) == [segment_name(0), segment_name(7)]
    again = QueueFiles(str(tmp_path / "store"))
    assert [r for _, _, r in again.replay()] == [recs[i] for i in (0, 1, 2, 7, 8)]


def test_replay_memory_is_bounded_by_a_block_and_one_record(tmp_path: Path) -> None:
    """A 24 MiB segment and a header claiming 2 GiB: replay holds about a block and a record, not the file."""
    recs = records("T", 0, 6000, size=4000)
    qdir = tmp_path / "store" / "messages" / "T" / "0"
    qdir.mkdir(parents=True)
    segment = qdir / segment_name(0)
    segment.write_bytes(b"".join(recs) + (2**31 - 1).to_bytes(4, "big") + (-626843481).to_bytes(4, "big", signed=True))
    files = QueueFiles(str(tmp_path / "store"), max_record=5 * 1024 * 1024)
    count = 0
    tracemalloc.start()
    try:
        for _, _, _rec in files.replay():
            count += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 6000
    assert peak < 6 * 1024 * 1024, f"replay held {peak} bytes at once"
    assert segment.stat().st_size == sum(map(len, recs)), "the bogus header was cut off"


def test_scan_stops_at_each_kind_of_tear() -> None:
    recs = records("T", 2, 3)
    whole = b"".join(recs)
    body_cut = whole[: len(whole) - 5]
    bad_crc = bytearray(whole)
    bad_crc[len(recs[0]) + len(recs[1]) + 100] ^= 0xFF  # a byte of the third record's body
    cases = {
        "a record cut in its body": body_cut,
        "a record cut in its header": whole[: len(recs[0]) + len(recs[1]) + 30],
        "zeroes": whole[: len(recs[0]) + len(recs[1])] + bytes(500),
        "body CRC mismatch": bytes(bad_crc),
    }
    for problem, data in cases.items():
        scan = SegmentScan(io.BytesIO(data), "T", 2, 0, 1 << 20, block=700)  # blocks smaller than a record
        assert list(scan.records()) == recs[:2], problem
        assert (scan.good_end, scan.size, scan.next_offset, scan.problem) == (
            len(recs[0]) + len(recs[1]), len(data), 2, problem)
    wrong_queue = SegmentScan(io.BytesIO(whole), "T", 3, 0, 1 << 20)
    assert list(wrong_queue.records()) == [] and wrong_queue.problem == "a record of queue 2"
    wrong_start = SegmentScan(io.BytesIO(whole), "T", 2, 5, 1 << 20)
    assert list(wrong_start.records()) == [] and "where 5 was due" in (wrong_start.problem or "")


def test_records_are_readable_only_once_written_and_roll_back_to_the_disk() -> None:
    """With a journal, put keeps a record unread until confirm(); roll_back forgets the rest, and the
    next put gets the first offset that was not written."""

    class Journal:
        def __init__(self) -> None:
            self.appended: list[tuple[int, object]] = []

        def admit(self, topic: str, queue_id: int) -> None:
            pass

        def check_topic(self, topic: str) -> None:
            pass

        def append(self, topic: str, queue_id: int, offset: int, record: bytes, token: object = None) -> None:
            self.appended.append((offset, token))

        def delete_topic(self, topic: str) -> None:
            pass

    store = MessageStore("127.0.0.1", 1, 100)
    journal = Journal()
    store.journal = journal
    for i in range(5):
        assert store.put("T", 0, b"m%d" % i, 0, "", 0, 1, bytes(4), 1, 0, None)[0] == i
    assert store.max_offset("T", 0) == 0 and store.get("T", 0, 0, 10, 1 << 20)[0] == []
    token = journal.appended[0][1]
    assert store.confirm(token, 3) == ("T", 0)
    assert store.max_offset("T", 0) == 3 and len(store.get("T", 0, 0, 10, 1 << 20)[0]) == 3
    used = store.budget.used
    assert store.roll_back() == 2
    assert store.budget.used < used and store.next_offset("T", 0) == 3
    assert store.put("T", 0, b"again", 0, "", 0, 1, bytes(4), 1, 0, None)[0] == 3, "offset 3 again: never acked"
    store.unwritable = "the disk is full"
    try:
        store.put("T", 0, b"x", 0, "", 0, 1, bytes(4), 1, 0, None)
    except Exception as exc:
        assert type(exc).__name__ == "StoreUnavailableError" and "full" in str(exc)
    else:
        raise AssertionError("a put while the disk refuses writes must fail")
