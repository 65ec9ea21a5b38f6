"""Pure parts of mqadmin: stored-message decoding, ids, attributes, clusterList rows, table fitting."""

from __future__ import annotations

import socket
import struct
import zlib

import pytest
from rich.console import Console
from rich.text import Text

from mqadmin.client import clusterlist, messages
from mqadmin.client.errors import AdminError, PerServer
from mqadmin.client.messaging import _writable_queues
from mqadmin.client.topic_text import parse_attributes, topic_config_text
from mqadmin.commands.cluster import base_cells
from mqadmin.output.tables import Col, fit_table
from remoting.bodies import BrokerData, QueueData, TopicConfig, TopicRouteData


def stored(topic: str, body: bytes, props: dict[str, str], *, queue_id: int = 1, queue_offset: int = 7,
           phys: int = 4096, sys_flag: int = 0, magic: int = messages.MAGIC_V1) -> bytes:
    """One message in the commit-log layout (MessageDecoder), written independently of the decoder."""
    t = topic.encode()
    p = messages.format_properties(props).encode()
    topic_len = struct.pack(">b", len(t)) if magic == messages.MAGIC_V1 else struct.pack(">h", len(t))
    tail = struct.pack(">i", len(body)) + body + topic_len + t + struct.pack(">h", len(p)) + p
    head = struct.pack(">iiiiiqqiq", 0, magic, zlib.crc32(body) & 0x7FFFFFFF, queue_id, 0, queue_offset, phys, sys_flag, 1000)
    head += socket.inet_aton("10.0.0.2") + struct.pack(">i", 5555)  # born host
    head += struct.pack(">q", 2000) + socket.inet_aton("10.0.0.1") + struct.pack(">i", 10911)  # store
    head += struct.pack(">iq", 2, 0)  # reconsumeTimes, preparedTransactionOffset
    record = head + tail
    return struct.pack(">i", len(record)) + record[4:]


def test_decode_stored_messages_v1_v2_and_compressed() -> None:
    a = stored("T", b"hello", {"TAGS": "tg", "KEYS": "k", "UNIQ_KEY": "ABC"})
    b = stored("T", zlib.compress(b"big body " * 100), {}, sys_flag=messages.FLAG_COMPRESSED, magic=messages.MAGIC_V2,
               queue_offset=8, phys=5000)
    first, second = messages.decode_messages(a + b, "broker-x")
    assert (first.topic, first.body, first.queue_id, first.queue_offset) == ("T", b"hello", 1, 7)
    assert (first.tags, first.keys, first.msg_id, first.broker_name) == ("tg", "k", "ABC", "broker-x")
    assert (first.born_host, first.store_host, first.born_timestamp, first.store_timestamp) == (
        "10.0.0.2:5555", "10.0.0.1:10911", 1000, 2000)
    assert first.reconsume_times == 2 and first.store_size == len(a)
    assert first.offset_msg_id == "0A00000100002A9F0000000000001000"
    assert second.body == b"big body " * 100 and second.queue_offset == 8
    assert second.msg_id == second.offset_msg_id  # no UNIQ_KEY: the broker's id
    assert first.to_json()["body"] == "hello" and first.to_json()["properties"]["TAGS"] == "tg"


@pytest.mark.parametrize("mangle", [
    lambda d: d[:-3],  # truncated
    lambda d: d[:4] + struct.pack(">i", 12345) + d[8:],  # bad magic
    lambda d: struct.pack(">i", 10**6) + d[4:],  # size beyond the body
])
def test_malformed_pull_bodies_are_one_clear_error(mangle: object) -> None:
    data = mangle(stored("T", b"x", {"A": "b"}))  # type: ignore[operator]
    with pytest.raises(messages.MessageFormatError):
        messages.decode_messages(data)


def test_properties_and_uniq_ids() -> None:
    props = messages.message_properties(keys="k1 k2", tags="t", uniq_key="U")
    assert props == {"KEYS": "k1 k2", "TAGS": "t", "WAIT": "true", "UNIQ_KEY": "U"}
    text = messages.format_properties(props)
    assert text == "KEYS\x01k1 k2\x02TAGS\x01t\x02WAIT\x01true\x02UNIQ_KEY\x01U\x02"
    assert messages.parse_properties(text + "junk\x02\x01x\x02") == props
    gen = messages.UniqIdGenerator("127.0.0.1")
    ids = [gen.next() for _ in range(1000)]
    assert len(set(ids)) == 1000 and all(len(i) == 32 and i == i.upper() and i.startswith("7F000001") for i in ids)


def test_attributes_parse_like_java() -> None:
    assert parse_attributes("+a=b,+c=d,-e") == {"+a": "b", "+c": "d", "-e": ""}
    assert parse_attributes(None) == {}
    for bad in ("a=b", "+a=b,+a=c", "e", "+=x"):
        with pytest.raises(AdminError):
            parse_attributes(bad)
    tc = TopicConfig("T", 8, 8, 6, attributes={"+message.type": "FIFO"})
    assert topic_config_text(tc) == ("TopicConfig [topicName=T, readQueueNums=8, writeQueueNums=8, perm=RW-, "
                                     "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, "
                                     "attributes={+message.type=FIFO}]")


def test_writable_queues_need_a_master_and_write_perm() -> None:
    route = TopicRouteData(
        [QueueData("a", 2, 2, 6), QueueData("b", 2, 2, 4), QueueData("c", 1, 1, 6)],
        [BrokerData("C", "a", {0: "h:1"}), BrokerData("C", "b", {0: "h:2"}), BrokerData("C", "c", {1: "h:3"})],
    )
    assert _writable_queues(route, 4) == [("a", 0), ("a", 1)]


RUNTIME = {
    "brokerVersionDesc": "V5_3_3", "putTps": "12.50 10.00 9.00", "getTransferedTps": "3.25 1 1",
    "sendThreadPoolQueueSize": "4", "sendThreadPoolQueueHeadWaitTimeMills": "7", "pullThreadPoolQueueSize": "0",
    "pullThreadPoolQueueHeadWaitTimeMills": "0", "timerReadBehind": "5", "timerOffsetBehind": "6",
    "timerCongestNum": "25000", "timerEnqueueTps": "1.5", "timerDequeueTps": "2.0", "pageCacheLockTimeMills": "3",
    "earliestMessageTimeStamp": str(10_000_000 - 7_200_000), "commitLogDiskRatio": "0.25", "brokerActive": "true",
    "msgPutTotalYesterdayMorning": "10", "msgPutTotalTodayMorning": "30", "msgPutTotalTodayNow": "35",
    "msgGetTotalYesterdayMorning": "1", "msgGetTotalTodayMorning": "2", "msgGetTotalTodayNow": "3",
}


def test_cluster_list_row_from_runtime_info() -> None:
    r = clusterlist.row("C", "b", 0, "h:1", PerServer("h:1", RUNTIME), now_ms=10_000_000)
    assert (r["inTps"], r["outTps"], r["hours"], r["space"], r["activated"]) == (12.5, 3.25, 2.0, 0.25, True)
    assert (r["inTotalYest"], r["outTotalYest"], r["inTotalToday"], r["outTotalToday"]) == (20, 1, 5, 1)
    assert (r["ackQueue"], r["ackWaitMs"]) == (None, None)  # a 4.9.x broker has no ack pool
    cells = [c.plain if isinstance(c, Text) else c for c in base_cells(r)]
    assert cells == ["C", "b", "0", "h:1", "h:0", "V5_3_3", "12.50(4,7ms)", "3.25(0,0ms|N,Nms)", "5-6(2.5w, 1.5, 2.0)", "3",
                     "2.00", "0.2500", "true", "OK"]
    # Nothing stored (0, or -1 from a 4.9.7 or 5.3.3 broker): Java prints (now - earliest) hours all the same.
    now = 1_795_700_000_000
    for nothing_stored, hours in (("0", 498805.56), ("-1", 498805.56)):
        empty = clusterlist.row("C", "b", 0, "h:1", PerServer("h:1", {"earliestMessageTimeStamp": nothing_stored}), now)
        assert empty["hours"] == hours and empty["version"] is None
    missing = clusterlist.row("C", "b", 0, "h:1", PerServer("h:1", {}), now)
    assert missing["hours"] == 0.0  # no earliestMessageTimeStamp at all: Java prints 0.00 too
    # the VIP port: a Java broker always opens listenPort - 2; a stub says whether it does
    assert missing["vipAddr"] == "h:0"
    off = clusterlist.row("C", "b", 0, "h:10911", PerServer("h:10911", {"vipChannelEnabled": "false"}), now)
    assert off["vipAddr"] is None and base_cells(off)[4] == "-"


def test_cluster_list_row_of_a_silent_broker() -> None:
    r = clusterlist.row("C", "b", 1, "h:1", PerServer("h:1", error="h:1: no response to request code 28 within 1 s"), 0)
    assert r["reachable"] is False and r["error"] == "no response to request code 28 within 1 s"
    assert r["version"] is None and r["inTps"] is None
    cells = base_cells(r)
    assert cells[4:13] == ["-"] * 9 and str(cells[-1]) == "no answer: no response to request code 28 within 1 s"


def test_fit_table_drops_low_value_columns_first_and_never_cuts() -> None:
    cols = [Col("#Name"), Col("#Addr"), Col("#Minor", 2), Col("#Detail", 1), Col("#Status", wrap=True)]
    rows = [["DefaultCluster", "127.0.0.1:10911", "x" * 20, "y" * 10, "OK"]]

    def render(width: int, terminal: bool = True) -> str:
        # Fitting is for a terminal; pytest's captured stdout is not one (Rich would say so, or not, by $TERM).
        console = Console(width=width, color_system=None, force_terminal=terminal)
        with console.capture() as cap:
            console.print(fit_table(cols, rows, console=console))
        return cap.get()

    piped = render(500, terminal=False)  # off a terminal: Apache's layout, every column, no rule line
    assert piped.splitlines()[0].split() == ["#Name", "#Addr", "#Minor", "#Detail", "#Status"]
    assert "─" not in piped and "x" * 20 in piped

    wide = render(200)
    assert "#Minor" in wide and "#Detail" in wide
    assert "not shown" not in wide
    mid = render(60)  # a dropped column is named under the table, never dropped silently
    table, caption = mid.split("not shown, ", 1)
    assert "#Minor" not in table and "#Detail" in table and "DefaultCluster" in table
    assert " ".join(caption.split()).startswith("60 columns too narrow: #Minor (--json or a pipe shows all)")
    narrow = render(45)
    table, caption = narrow.split("not shown, ", 1)
    assert "#Minor" not in table and "#Detail" not in table
    assert "DefaultCluster" in table and "127.0.0.1:10911" in table and "…" not in table
    assert "#Minor, #Detail" in " ".join(caption.split())
    tiny = render(20)  # nothing left to drop: values fold onto more lines, none is cut
    assert "…" not in tiny and all(len(line) <= 20 for line in tiny.splitlines())
    table = tiny.split("not shown", 1)[0]
    assert "".join(line.split()[0] for line in table.splitlines()[3:]) == "DefaultCluster"
