"""Broker statistics as Java's BrokerStatsManager keeps them (StatsItemSet / StatsItem).

What ``mqadmin statsAll``, ``topicStatus`` and ``consumerProgress`` read:
per stats name (TOPIC_PUT_NUMS, GROUP_GET_NUMS, ...) and key (a topic,
``topic@group``, the cluster name) a counter ``value`` and a call count
``times``, sampled into three windows exactly as StatsItem does: every 10 s
for the last minute (7 snapshots), every 10 min for the last hour (7),
every hour for the last day (25). A window's sum is last minus first
snapshot, its tps that sum over the snapshots' time span, its avgpt the sum
per call.

Java samples every item on a timer. Here an item is sampled lazily: between
two updates its counters are constant, so the snapshots it missed are all
equal to its value at the last update, and they are filled in (at their
exact boundary times) when the item is next touched or read. No periodic
sweep over all items, so the event loop is never held by sampling, and the
answers are the ones Java's timer would give.

Increments on the hot paths (sends, pulls) go into plain per-second
accumulators (:meth:`BrokerStats.put`, :meth:`BrokerStats.got`), folded
into the items once a second by :meth:`BrokerStats.flush`; an item is
created at its key's first increment, as Java creates it, so
VIEW_BROKER_STATS_DATA finds it right after a topic's first put. Memory is
bounded: each set holds at most ``MAX_ITEMS_PER_SET`` keys, the least
recently updated ones are dropped first (Java drops idle items too).
Pure state: the clock is passed in (milliseconds).
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass

from broker_stub.topic_traffic import TopicTraffic
from remoting.admin_bodies import BrokerStatsData, StatsWindow

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
STATS_NAMES = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS, BROKER_PUT_NUMS,
               BROKER_GET_NUMS)

MAX_ITEMS_PER_SET = 10_000
#: (sampling period ms, snapshots kept): StatsItem's minute, hour and day lists.
WINDOWS = ((10_000, 7), (600_000, 7), (3_600_000, 25))


@dataclass(frozen=True, slots=True)
class _Snapshot:
    timestamp: int
    times: int
    value: int


class _Window:
    """One of an item's snapshot lists, sampled at ``first_boundary + k * period``."""

    __slots__ = ("next_boundary", "period", "snapshots")

    def __init__(self, period: int, keep: int, first_boundary: int) -> None:
        self.period = period
        self.snapshots: deque[_Snapshot] = deque(maxlen=keep)
        self.next_boundary = first_boundary

    def catch_up(self, now: int, times: int, value: int) -> None:
        """Take the samples due up to ``now``; the counters were ``times``/``value`` at every one of them."""
        if self.next_boundary > now:
            return
        due = (now - self.next_boundary) // self.period + 1
        keep = self.snapshots.maxlen or 1
        if not self.snapshots:
            # Java's first sampling adds a zero snapshot one period back, then the real one
            self.snapshots.append(_Snapshot(self.next_boundary - self.period, 0, 0))
        skip = max(0, due - keep)  # older ones would fall off the list anyway
        boundary = self.next_boundary + skip * self.period
        for _ in range(due - skip):
            self.snapshots.append(_Snapshot(boundary, times, value))
            boundary += self.period
        self.next_boundary = boundary

    def stats(self) -> StatsWindow:
        """StatsItem.computeStatsData over this list."""
        if not self.snapshots:
            return StatsWindow()
        first, last = self.snapshots[0], self.snapshots[-1]
        total = last.value - first.value
        span = last.timestamp - first.timestamp
        calls = last.times - first.times
        return StatsWindow(total, total * 1000.0 / span if span > 0 else 0.0, total / calls if calls > 0 else 0.0)


class StatsItem:
    __slots__ = ("times", "value", "windows")

    def __init__(self, origin: int, created: int) -> None:
        self.value = 0
        self.times = 0
        self.windows = tuple(_Window(period, keep, _next_boundary(origin, created, period)) for period, keep in WINDOWS)

    def _catch_up(self, now: int) -> None:
        for window in self.windows:
            window.catch_up(now, self.times, self.value)

    def add(self, now: int, value: int, times: int) -> None:
        self._catch_up(now)
        self.value += value
        self.times += times

    def data(self, now: int) -> BrokerStatsData:
        self._catch_up(now)
        minute, hour, day = (w.stats() for w in self.windows)
        return BrokerStatsData(minute, hour, day)


def _next_boundary(origin: int, created: int, period: int) -> int:
    """The first sampling after ``created``: the set's timers fire at origin + k * period (k = 0, 1, ...)."""
    return origin + (max(0, created - origin) // period + 1) * period


class StatsItemSet:
    """Key -> StatsItem for one stats name, at most ``max_items`` keys (least recently updated dropped)."""

    def __init__(self, origin: int, max_items: int = MAX_ITEMS_PER_SET) -> None:
        self.origin = origin  # when the set's sampling timer started (broker start)
        self.max_items = max_items
        self.items: OrderedDict[str, StatsItem] = OrderedDict()

    def add(self, key: str, now: int, value: int, times: int = 1) -> None:
        item = self.items.get(key)
        if item is None:
            item = self.items[key] = StatsItem(self.origin, now)
            while len(self.items) > self.max_items:
                self.items.popitem(last=False)
        else:
            self.items.move_to_end(key)
        item.add(now, value, times)

    def get(self, key: str) -> StatsItem | None:
        return self.items.get(key)

    def delete_where(self, match: str, *, prefix: bool) -> None:
        """StatsItemSet.delValueByPrefixKey / delValueBySuffixKey with separator ``@``."""
        if prefix:
            doomed = [k for k in self.items if k.startswith(match + "@")]
        else:
            doomed = [k for k in self.items if k.endswith("@" + match)]
        for key in doomed:
            del self.items[key]


class BrokerStats:
    """The stats sets mqadmin reads through VIEW_BROKER_STATS_DATA, fed by sends and pulls."""

    def __init__(self, cluster_name: str, now: int, clock: Callable[[], int] | None = None) -> None:
        self.cluster_name = cluster_name
        self.clock = clock or (lambda: now)  # ms; when an item is created between two flushes
        self.sets = {name: StatsItemSet(now) for name in STATS_NAMES}
        # per-second accumulators: topic -> [messages, bytes]; (topic, group) -> [messages, bytes, pulls]
        self._puts: dict[str, list[int]] = {}
        self._gets: dict[tuple[str, str], list[int]] = {}
        self._send_backs: defaultdict[tuple[str, str], int] = defaultdict(int)
        #: With metrics on: each second's puts and pulls also go to the per-topic metric series.
        self.traffic: TopicTraffic | None = None

    # hot paths: O(1), no item work except creating the items of a key seen for the first time this second
    def put(self, topic: str, size: int) -> None:
        acc = self._puts.get(topic)
        if acc is None:
            acc = self._puts[topic] = [0, 0]
            self._create((TOPIC_PUT_NUMS, topic), (TOPIC_PUT_SIZE, topic), (BROKER_PUT_NUMS, self.cluster_name))
        acc[0] += 1
        acc[1] += size

    def got(self, group: str, topic: str, messages: int, size: int) -> None:
        acc = self._gets.get((topic, group))
        if acc is None:
            acc = self._gets[(topic, group)] = [0, 0, 0]
            key = f"{topic}@{group}"
            self._create((GROUP_GET_NUMS, key), (GROUP_GET_SIZE, key), (BROKER_GET_NUMS, self.cluster_name))
        acc[0] += messages
        acc[1] += size
        acc[2] += 1

    def sent_back(self, group: str, topic: str) -> None:
        if (topic, group) not in self._send_backs:
            self._create((SNDBCK_PUT_NUMS, f"{topic}@{group}"))
        self._send_backs[(topic, group)] += 1

    def _create(self, *items: tuple[str, str]) -> None:
        """Java creates a stats item at the first increment (getAndCreateStatsItem), so
        VIEW_BROKER_STATS_DATA finds it at once; its counts follow with the next flush."""
        now = -1
        for name, key in items:
            stats_set = self.sets[name]
            if key not in stats_set.items:
                if now < 0:
                    now = self.clock()
                stats_set.add(key, now, 0, 0)

    def flush(self, now: int) -> None:
        """Fold the accumulated increments into the items (once a second; bounded by what happened in it)."""
        puts, self._puts = self._puts, {}
        gets, self._gets = self._gets, {}
        backs, self._send_backs = self._send_backs, defaultdict(int)
        if self.traffic is not None:
            self.traffic.add(now / 1000.0, ((t, m, s) for t, (m, s) in puts.items()),
                             ((t, m, s) for (t, _), (m, s, _) in gets.items()))
        sets = self.sets
        put_total = get_total = 0
        for topic, (messages, size) in puts.items():
            sets[TOPIC_PUT_NUMS].add(topic, now, messages, 1)
            sets[TOPIC_PUT_SIZE].add(topic, now, size, 1)
            put_total += messages
        for (topic, group), (messages, size, pulls) in gets.items():
            key = f"{topic}@{group}"
            sets[GROUP_GET_NUMS].add(key, now, messages, pulls)
            sets[GROUP_GET_SIZE].add(key, now, size, pulls)
            get_total += messages
        for (topic, group), count in backs.items():
            sets[SNDBCK_PUT_NUMS].add(f"{topic}@{group}", now, count, count)
        # Java adds to the broker counters' value only (times stays 0)
        if put_total:
            sets[BROKER_PUT_NUMS].add(self.cluster_name, now, put_total, 0)
        if get_total:
            sets[BROKER_GET_NUMS].add(self.cluster_name, now, get_total, 0)

    def view(self, name: str, key: str, now: int) -> BrokerStatsData | None:
        """VIEW_BROKER_STATS_DATA: None when Java would answer "The stats <name> <key> not exist"."""
        stats_set = self.sets.get(name)
        item = stats_set.get(key) if stats_set is not None else None
        return item.data(now) if item is not None else None

    def minute_tps(self, name: str, key: str, now: int) -> float:
        """tpsTopicPutNums / tpsGroupGetNums: the minute window's tps (0 for an unknown key)."""
        data = self.view(name, key, now)
        return data.minute.tps if data is not None else 0.0

    def minute_puts(self, now: int) -> int:
        """Messages stored in the last sampled minute (for putMessageDistributeTime)."""
        data = self.view(BROKER_PUT_NUMS, self.cluster_name, now)
        return data.minute.sum if data is not None else 0

    def topic_deleted(self, topic: str) -> None:
        if self.traffic is not None:
            self.traffic.forget(topic)
        for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
            self.sets[name].items.pop(topic, None)
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            self.sets[name].delete_where(topic, prefix=True)

    def group_deleted(self, group: str) -> None:
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            self.sets[name].delete_where(group, prefix=False)
