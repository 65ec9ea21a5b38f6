"""From a topic route to the producer's send queues, and round-robin selection.

Mirrors ``MQClientInstance.topicRouteData2TopicPublishInfo`` and
``TopicPublishInfo.selectOneMessageQueue`` of Apache RocketMQ 5.x:

* queues come from ``orderTopicConf`` when set, else from every QueueData
  with the WRITE permission whose broker has a master (brokerId 0) address,
  queue ids 0..writeQueueNums-1, brokers in name order;
* selection walks a per-producer index that starts at a random value and
  increments on every pick; with filters it tries each queue at most once
  and falls back to an unfiltered pick.

Decoded routes are immutable and cached by body bytes, so thousands of
producers polling the same route share one object and change detection is
usually an identity check.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from remoting.bodies import BodyError, QueueData, TopicRouteData
from remoting.codes import MASTER_ID, PERM_WRITE

POSITIVE_MASK = 0x7FFFFFFF
_CACHE_LIMIT = 4096

#: (broker name, queue id): a MessageQueue without the topic (the topic is the table key).
Queue = tuple[str, int]


@dataclass(frozen=True, slots=True, eq=False)
class RouteSnapshot:
    """What a producer keeps of one topic route (read-only; shared between producers)."""

    key: tuple  # normalized route: equal keys mean "route unchanged" (topicRouteDataChanged)
    queues: tuple[Queue, ...]
    broker_addrs: dict[str, dict[int, str]]  # broker name -> brokerId -> address
    order_topic: bool

    def same_as(self, other: RouteSnapshot | None) -> bool:
        return other is not None and (other is self or other.key == self.key)

    def master_addr(self, broker: str) -> str | None:
        addrs = self.broker_addrs.get(broker)
        return addrs.get(MASTER_ID) if addrs else None


def _route_key(route: TopicRouteData) -> tuple:
    qds = tuple(
        sorted((q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag) for q in route.queue_datas)
    )
    bds = tuple(
        sorted((b.broker_name, b.cluster, tuple(sorted(b.broker_addrs.items()))) for b in route.broker_datas)
    )
    return (qds, bds, route.order_topic_conf or "")


def snapshot_of(route: TopicRouteData) -> RouteSnapshot:
    """The send queues of a route, as the Java client builds them."""
    broker_addrs = {b.broker_name: dict(b.broker_addrs) for b in route.broker_datas}
    queues: list[Queue] = []
    order = bool(route.order_topic_conf)
    if order:
        for item in (route.order_topic_conf or "").split(";"):
            name, sep, nums = item.partition(":")
            if sep and nums.strip().isdigit():
                queues.extend((name, i) for i in range(int(nums)))
    else:
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if not qd.perm & PERM_WRITE:
                continue
            addrs = broker_addrs.get(qd.broker_name)
            if not addrs or MASTER_ID not in addrs:
                continue
            queues.extend((qd.broker_name, i) for i in range(qd.write_queue_nums))
    return RouteSnapshot(_route_key(route), tuple(queues), broker_addrs, order)


def as_default_topic_route(route: TopicRouteData, default_topic_queue_nums: int) -> TopicRouteData:
    """The TBW102 route used for a topic without its own route: every broker's
    queue counts cut to ``min(defaultTopicQueueNums, readQueueNums)``."""
    qds = []
    for q in route.queue_datas:
        n = min(default_topic_queue_nums, q.read_queue_nums)
        qds.append(QueueData(q.broker_name, n, n, q.perm, q.topic_sys_flag))
    return TopicRouteData(qds, route.broker_datas, route.filter_server_table, route.order_topic_conf)


_cache: dict[tuple[bytes, int], RouteSnapshot] = {}


def decode_snapshot(body: bytes, *, default_topic_queue_nums: int = 0) -> RouteSnapshot:
    """Decode a GET_ROUTEINFO_BY_TOPIC body (cached); ``default_topic_queue_nums``
    > 0 applies the TBW102 fallback cut. Raises BodyError on a malformed body."""
    key = (body, default_topic_queue_nums)
    snap = _cache.get(key)
    if snap is None:
        route = TopicRouteData.decode(body)
        if default_topic_queue_nums > 0:
            route = as_default_topic_route(route, default_topic_queue_nums)
        snap = snapshot_of(route)
        if len(_cache) >= _CACHE_LIMIT:
            _cache.clear()
        _cache[key] = snap
    return snap


class TopicPublish:
    """One producer's publish info for one topic: the route it holds and its send index.

    ``snapshot`` is None for the placeholder Java puts in the table before
    the first successful lookup; ``have_route`` is set once any route (the
    topic's own or the TBW102 fallback) was installed.
    """

    __slots__ = ("have_route", "index", "snapshot")

    def __init__(self, snapshot: RouteSnapshot | None = None, *, rng: random.Random | None = None) -> None:
        self.snapshot = snapshot
        self.have_route = snapshot is not None
        self.index = (rng or random).getrandbits(31)

    @property
    def queues(self) -> tuple[Queue, ...]:
        return self.snapshot.queues if self.snapshot is not None else ()

    def ok(self) -> bool:
        return bool(self.queues)

    def _next(self) -> int:
        self.index = (self.index + 1) & POSITIVE_MASK
        return self.index

    def reset_index(self, rng: random.Random) -> None:
        self.index = rng.randrange(POSITIVE_MASK)

    def select_plain(self) -> Queue | None:
        queues = self.queues
        if not queues:
            return None
        return queues[self._next() % len(queues)]

    def select_filtered(self, accept: Callable[[str], bool]) -> Queue | None:
        """Try every queue once from the next index; the first whose broker passes."""
        queues = self.queues
        n = len(queues)
        for _ in range(n):
            q = queues[self._next() % n]
            if accept(q[0]):
                return q
        return None


def select_queue(
    tp: TopicPublish,
    *,
    last_broker: str | None,
    is_available: Callable[[str], bool] | None = None,
    is_reachable: Callable[[str], bool] | None = None,
    reset_index: bool = False,
    rng: random.Random | None = None,
) -> Queue | None:
    """``MQFaultStrategy.selectOneMessageQueue``.

    Without fault tolerance (``is_available`` None): the next queue not on
    ``last_broker``, else any next queue. With it: reset the index to a
    random value on a retry, then prefer an available broker other than the
    last one, then a reachable one, then any.
    """
    if not tp.ok():
        return None

    if is_available is not None:
        if reset_index:
            tp.reset_index(rng or random.Random())
        avail = is_available
        reach = is_reachable or (lambda b: True)
        if last_broker is None:
            q = tp.select_filtered(avail) or tp.select_filtered(reach)
        else:
            q = tp.select_filtered(lambda b: b != last_broker and avail(b)) or tp.select_filtered(
                lambda b: b != last_broker and reach(b)
            )
        return q or tp.select_plain()

    if last_broker is None:
        return tp.select_plain()
    return tp.select_filtered(lambda b: b != last_broker) or tp.select_plain()


__all__ = [
    "BodyError",
    "Queue",
    "RouteSnapshot",
    "TopicPublish",
    "as_default_topic_route",
    "decode_snapshot",
    "select_queue",
    "snapshot_of",
]
