"""GET_BROKER_RUNTIME_INFO: the key/value table a Java 5.3.3 broker answers, with live values.

The key set is 5.3.3's (AdminBrokerProcessor.prepareRuntimeInfo over
DefaultMessageStore.getRuntimeInfo and StoreStatsService.getRuntimeInfo),
so ``brokerStatus`` lists what a Java broker lists. Apache mqadmin
``clusterList`` (4.9.x and 5.x) parses several values as numbers
(``putTps`` and ``getTransferredTps`` split on spaces,
``earliestMessageTimeStamp`` as a long, ``commitLogDiskRatio`` as a
double, the ``timer*`` keys, ``-m`` the ``msg*Total*`` counters), so every
key it reads is present and well-formed. Values are live: rates from
per-second samples, the day counters from local midnights, the disk of the
store directory.

Four keys are ours, beyond 5.3.3's: ``getTransferedTps`` (4.9.x's
spelling, which 4.9.x mqadmin clusterList reads), ``pullHoldRequestNum``
(long-polling pulls held now), ``vipChannelEnabled`` (whether the VIP port,
listenPort - 2, is open: a Java broker always opens it) and, on a slave,
``masterAddr`` (the master its registration reported). Java's mqadmin
ignores keys it does not know.
"""

from __future__ import annotations

import datetime
import math
import os
from collections import deque
from collections.abc import Callable

from remoting.fastjson import java_double

#: Version name and ordinal we claim (MQVersion.Version.V5_3_3).
VERSION_DESC = "V5_3_3"
THREAD_POOLS = ("send", "pull", "litePull", "query", "ack")
POOL_CAPACITY = 10000  # Java's default queue capacity of the send/pull pools
#: StoreStatsService's put-latency buckets; the stub stores in memory, so every put is in the first.
PUT_LATENCY_BUCKETS = ("[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]",
                       "[500ms~1s]", "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]")


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


def _existing(path: str) -> str:
    """``path`` or its nearest existing parent: the partition the store lives (or will live) on."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def disk_used_ratio(path: str = ".") -> float:
    """UtilAll.getDiskPartitionSpaceUsedPercent of ``path``'s partition (-1 if unknown): the used
    share rounded up to a whole percent (``0.21``), as 4.9.x and 5.x compute it."""
    try:
        st = os.statvfs(_existing(path))
    except OSError:
        return -1.0
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire <= 0:
        return -1.0
    return -(-used * 100 // entire) / 100.0  # integer ceiling, then hundredths


def human_bytes(count: int) -> str:
    """MixAll.humanReadableByteCount(bytes, false): ``512 B``, ``1.5 KiB``, ``20.0 GiB``."""
    if count < 1024:
        return f"{count} B"
    exp = min(int(math.log(count) / math.log(1024)), 6)
    return f"{count / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def dir_capacity(path: str) -> str | None:
    """``commitLogDirCapacity``: ``Total : 98.3 GiB, Free : 41.0 GiB.`` of the store directory's partition
    (a Java broker has created its store directory by now; the stub may not have yet). None if unknown."""
    try:
        st = os.statvfs(_existing(path))
    except OSError:
        return None
    return f"Total : {human_bytes(st.f_blocks * st.f_frsize)}, Free : {human_bytes(st.f_bfree * st.f_frsize)}."


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
    store_root: str,
    minute_puts: int = 0,
    master_addr: str | None = None,
    vip_channel: bool = True,
) -> dict[str, str]:
    """5.3.3's prepareRuntimeInfo keys (timer wheel on, no transient store pool), plus ours (module doc)."""
    commit_log = os.path.join(os.path.abspath(os.path.expanduser(store_root)), "commitlog")
    get_tps = rates.tps(2)
    table = {
        **_store_stats_keys(boot_ms, now_ms, rates, put_total, commit_offset, minute_puts),
        **_message_store_keys(commit_log, commit_offset),
        **_controller_keys(is_master, days, put_total, get_total, earliest_ms),
        # ours (module doc)
        "getTransferedTps": get_tps,
        "pullHoldRequestNum": str(held_pulls),
        "vipChannelEnabled": "true" if vip_channel else "false",
    }
    capacity = dir_capacity(os.path.dirname(commit_log))
    if capacity is not None:
        table["commitLogDirCapacity"] = capacity
    for pool in THREAD_POOLS:
        table[f"{pool}ThreadPoolQueueSize"] = "0"
        table[f"{pool}ThreadPoolQueueCapacity"] = str(POOL_CAPACITY)
        table[f"{pool}ThreadPoolQueueHeadWaitTimeMills"] = "0"
    if master_addr and not is_master:
        table["masterAddr"] = master_addr
    return table


def _store_stats_keys(boot_ms: int, now_ms: int, rates: Rates, put_total: int, commit_offset: int,
                      minute_puts: int) -> dict[str, str]:
    """StoreStatsService's keys: uptime, put counts and sizes, rates, latencies."""
    uptime = max(0, now_ms - boot_ms) // 1000
    put_tps, get_tps = rates.tps(1), rates.tps(2)
    times = put_total or 1  # StoreStatsService reports 1 before the first put
    distribute = "".join(f"{name}:{minute_puts if i == 0 else 0} " for i, name in enumerate(PUT_LATENCY_BUCKETS))
    return {
        "bootTimestamp": str(boot_ms),
        "runtime": f"[ {uptime // 86400} days, {uptime % 86400 // 3600} hours, "
        f"{uptime % 3600 // 60} minutes, {uptime % 60} seconds ]",
        "putMessageEntireTimeMax": "0",
        "putMessageTimesTotal": str(times),
        "putMessageFailedTimes": "0",
        "putMessageSizeTotal": str(commit_offset),
        "putMessageDistributeTime": distribute,
        "putMessageAverageSize": java_double(commit_offset / times),
        "dispatchMaxBuffer": "0",
        "getMessageEntireTimeMax": "0",
        "putTps": put_tps,
        "getFoundTps": get_tps,
        "getMissTps": "0.00 0.00 0.00",
        "getTotalTps": get_tps,
        "getTransferredTps": get_tps,
        "putLatency99": "0.00",
        "putLatency999": "0.00",
    }


def _message_store_keys(commit_log: str, commit_offset: int) -> dict[str, str]:
    """DefaultMessageStore's keys: the disk the commit log is on, and its offsets."""
    ratio = java_double(disk_used_ratio(commit_log))
    return {
        f"commitLogDiskRatio_{commit_log}": ratio,
        "commitLogDiskRatio": ratio,
        "consumeQueueDiskRatio": ratio,
        "commitLogMinOffset": "0",
        "commitLogMaxOffset": str(commit_offset),
    }


def _controller_keys(is_master: bool, days: DayTotals, put_total: int, get_total: int,
                     earliest_ms: int) -> dict[str, str]:
    """BrokerController's and AdminBrokerProcessor's keys: role, version, day totals, the timer wheel."""
    return {
        "brokerActive": "true" if is_master else "false",
        "brokerVersionDesc": VERSION_DESC,
        "brokerVersion": "479",
        "msgPutTotalYesterdayMorning": str(days.put_yesterday_morning),
        "msgPutTotalTodayMorning": str(days.put_today_morning),
        "msgPutTotalTodayNow": str(put_total),
        "msgGetTotalYesterdayMorning": str(days.get_yesterday_morning),
        "msgGetTotalTodayMorning": str(days.get_today_morning),
        "msgGetTotalTodayNow": str(get_total),
        "dispatchBehindBytes": "0",
        "pageCacheLockTimeMills": "0",
        "earliestMessageTimeStamp": str(earliest_ms),
        "startAcceptSendRequestTimeStamp": "0",
        "timerReadBehind": "0",
        "timerOffsetBehind": "0",
        "timerCongestNum": "0",
        "timerEnqueueTps": "0.0",
        "timerDequeueTps": "0.0",
        "remainTransientStoreBufferNumbs": "2147483647",
        "remainHowManyDataToFlush": "0 B",
        "EndTransactionQueueSize": "0",
        "EndTransactionThreadPoolQueueCapacity": "100000",
    }
