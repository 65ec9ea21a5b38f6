"""GET_BROKER_RUNTIME_INFO: the key/value table a Java broker answers, with live values.

Apache mqadmin ``clusterList`` (4.9.x and 5.x) prints one row per broker
from this table and parses several values as numbers (``putTps`` and
``getTransferredTps``/``getTransferedTps`` split on spaces,
``earliestMessageTimeStamp`` as a long, ``commitLogDiskRatio`` as a
double, the ``timer*`` keys as long/float, ``-m`` the ``msg*Total*``
counters), so every key it reads is present and well-formed. Values are
live: rates from per-second samples, the day counters from local
midnights, the disk ratio of the partition the broker runs in.
"""

from __future__ import annotations

import datetime
import os
import time
from collections import deque
from collections.abc import Callable

#: Version name and ordinal we claim (MQVersion.Version.V5_3_3).
VERSION_DESC = "V5_3_3"
THREAD_POOLS = ("send", "pull", "litePull", "query", "ack")
POOL_CAPACITY = 10000  # Java's default queue capacity of the send/pull pools


class Rates:
    """Per-second samples of the put/get totals, for the ``*Tps`` keys."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int, int]] = deque(maxlen=601)

    def sample(self, now: float, puts: int, gets: int) -> None:
        self.samples.append((now, puts, gets))

    def tps(self, index: int) -> str:
        """Java's ``"10s 60s 600s"`` rates (``%.2f`` each) over the samples we have."""
        if len(self.samples) < 2:
            return "0.00 0.00 0.00"
        last = self.samples[-1]
        parts = []
        for window in (10, 60, 600):
            first = self.samples[max(0, len(self.samples) - 1 - window)]
            span = last[0] - first[0]
            parts.append(f"{(last[index] - first[index]) / span if span > 0 else 0.0:.2f}")
        return " ".join(parts)


class DayTotals:
    """BrokerStats: the put/get totals at this and the previous local midnight."""

    def __init__(self, today: Callable[[], datetime.date] = datetime.date.today) -> None:
        self.today = today
        self.day = today()
        self.put_yesterday_morning = self.put_today_morning = 0
        self.get_yesterday_morning = self.get_today_morning = 0

    def update(self, puts: int, gets: int) -> None:
        day = self.today()
        if day != self.day:
            self.day = day
            self.put_yesterday_morning, self.put_today_morning = self.put_today_morning, puts
            self.get_yesterday_morning, self.get_today_morning = self.get_today_morning, gets


def disk_used_ratio(path: str = ".") -> float:
    """UtilAll.getDiskPartitionSpaceUsedPercent of ``path``'s partition (-1 if unknown)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    return used / entire if entire > 0 else -1.0


def runtime_table(
    *,
    boot_ms: int,
    now_ms: int,
    rates: Rates,
    days: DayTotals,
    put_total: int,
    get_total: int,
    earliest_ms: int,
    commit_offset: int,
    is_master: bool,
    held_pulls: int,
) -> dict[str, str]:
    """Every key ``clusterList`` reads, plus the other keys of Java's prepareRuntimeInfo."""
    uptime = max(0, now_ms - boot_ms) // 1000
    put_tps, get_tps = rates.tps(1), rates.tps(2)
    ratio = f"{disk_used_ratio():.4f}"
    table = {
        "brokerVersionDesc": VERSION_DESC,
        "brokerVersion": "479",
        "bootTimestamp": str(boot_ms),
        "runtime": f"[ {uptime // 86400} days, {uptime % 86400 // 3600} hours, "
        f"{uptime % 3600 // 60} minutes, {uptime % 60} seconds ]",
        "brokerActive": "true" if is_master else "false",
        "putTps": put_tps,
        "getTransferredTps": get_tps,  # 5.x name
        "getTransferedTps": get_tps,  # 4.9.x name
        "getFoundTps": get_tps,
        "getMissTps": "0.00 0.00 0.00",
        "getTotalTps": get_tps,
        "putMessageEntireTimeMax": "0",
        "putMessageTimesTotal": str(put_total),
        "putMessageSizeTotal": str(commit_offset),
        "putMessageAverageSize": f"{commit_offset / put_total if put_total else 0.0:.1f}",
        "msgPutTotalYesterdayMorning": str(days.put_yesterday_morning),
        "msgPutTotalTodayMorning": str(days.put_today_morning),
        "msgPutTotalTodayNow": str(put_total),
        "msgGetTotalYesterdayMorning": str(days.get_yesterday_morning),
        "msgGetTotalTodayMorning": str(days.get_today_morning),
        "msgGetTotalTodayNow": str(get_total),
        "earliestMessageTimeStamp": str(earliest_ms),
        "startAcceptSendRequestTimeStamp": "0",
        "commitLogDiskRatio": ratio,
        "consumeQueueDiskRatio": ratio,
        "commitLogMinOffset": "0",
        "commitLogMaxOffset": str(commit_offset),
        "dispatchBehindBytes": "0",
        "pageCacheLockTimeMills": "0",
        "remainTransientStoreBufferNumbs": "2147483647",
        "remainHowManyDataToFlush": "0 B",
        "timerReadBehind": "0",
        "timerOffsetBehind": "0",
        "timerCongestNum": "0",
        "timerEnqueueTps": "0.0",
        "timerDequeueTps": "0.0",
        "pullHoldRequestNum": str(held_pulls),  # extension: long-polling pulls held now
        "EndTransactionQueueSize": "0",
        "EndTransactionThreadPoolQueueCapacity": "100000",
    }
    for pool in THREAD_POOLS:
        table[f"{pool}ThreadPoolQueueSize"] = "0"
        table[f"{pool}ThreadPoolQueueCapacity"] = str(POOL_CAPACITY)
        table[f"{pool}ThreadPoolQueueHeadWaitTimeMills"] = "0"
    return table


def now_ms() -> int:
    return int(time.time() * 1000)
