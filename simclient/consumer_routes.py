"""Routes as a push consumer uses them: the queues it may read and where each broker lives.

``MQClientInstance.topicRouteData2TopicSubscribeInfo`` turns a route into
the queues a consumer group divides among its members: every queue id
below ``readQueueNums`` of every QueueData with the READ permission,
whether or not the broker group still has a master (a group whose master
died keeps its queues, and pulls go to the slave). The addresses stay by
broker name and id, because a pull picks the node per queue
(``findBrokerAddressInSubscribe``).

:class:`RouteFetcher` asks the NameServers the way the simulated producer
does (:mod:`simclient.producer`): one NameServer kept while its connection
lives, the next one after a failure, TOPIC_NOT_EXIST or no answer keeps
the route already held.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import trio

from remoting import requests as rq
from remoting.bodies import TopicRouteData
from remoting.codes import MASTER_ID, PERM_READ, ResponseCode
from simclient.pool import ClientPool, RemotingError
from simclient.producer import RouteUnavailable
from simclient.rebalance import MessageQueue
from simclient.stats import RouteStats

_CACHE_LIMIT = 4096


@dataclass(frozen=True, slots=True, eq=False)
class SubscribeRoute:
    """One topic's route as a consumer keeps it (immutable, shared between consumers)."""

    key: tuple  # equal keys: the route did not change
    queues: frozenset[MessageQueue]  # readable queues (topic, broker, queue id)
    broker_addrs: dict[str, dict[int, str]]  # broker name -> broker id -> address

    def any_broker_addr(self, rng: random.Random) -> str | None:
        """``findBrokerAddrByTopic``: a random broker group of the route, its master if it has one."""
        if not self.broker_addrs:
            return None
        addrs = self.broker_addrs[rng.choice(sorted(self.broker_addrs))]
        if MASTER_ID in addrs:
            return addrs[MASTER_ID]
        return addrs[rng.choice(sorted(addrs))] if addrs else None


_cache: dict[tuple[str, bytes], SubscribeRoute] = {}


def decode_route(topic: str, body: bytes) -> SubscribeRoute:
    """A GET_ROUTEINFO_BY_TOPIC body as a SubscribeRoute (cached by body); BodyError if malformed."""
    key = (topic, body)
    found = _cache.get(key)
    if found is not None:
        return found
    route = TopicRouteData.decode(body)
    queues = frozenset(
        (topic, qd.broker_name, i) for qd in route.queue_datas if qd.perm & PERM_READ for i in range(qd.read_queue_nums)
    )
    addrs = {bd.broker_name: dict(bd.broker_addrs) for bd in route.broker_datas}
    sig = (queues, tuple(sorted((n, tuple(sorted(a.items()))) for n, a in addrs.items())))
    snap = SubscribeRoute(sig, queues, addrs)
    if len(_cache) >= _CACHE_LIMIT:
        _cache.clear()
    _cache[key] = snap
    return snap


NOT_FOUND = "not_found"
REFUSED = "refused"


class RouteFetcher:
    """GET_ROUTEINFO_BY_TOPIC with the Java client's choice of NameServer (see the module doc)."""

    __slots__ = ("_conn", "_index", "addrs", "clock", "failover_in_call", "pool", "stats", "timeout")

    def __init__(
        self,
        addrs: tuple[str, ...],
        pool: ClientPool,
        *,
        timeout: float,
        stats: RouteStats,
        rng: random.Random,
        failover_in_call: bool = True,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        if not addrs:
            raise ValueError("at least one NameServer address is needed")
        self.addrs = addrs
        self.pool = pool
        self.timeout = timeout
        self.stats = stats
        self.failover_in_call = failover_in_call
        self.clock = clock
        self._index = rng.randrange(len(addrs))
        self._conn: object | None = None

    async def fetch(self, topic: str) -> bytes | str:
        """A route body, NOT_FOUND or REFUSED; RouteUnavailable when no NameServer answered."""
        tries = len(self.addrs) if self.failover_in_call else 1
        last = "no NameServer tried"
        for _ in range(tries):
            if self._conn is None or self.pool.connection_of(self.addrs[self._index]) is not self._conn:
                self._index = (self._index + 1) % len(self.addrs)
            addr = self.addrs[self._index]
            self.stats.queries += 1
            begin = self.clock()
            try:
                resp = await self.pool.invoke(addr, rq.get_route(topic), self.timeout)
            except RemotingError as exc:
                self.stats.failures += 1
                self._conn = None
                last = str(exc)
                continue
            self.stats.latency.record((self.clock() - begin) * 1000.0)
            self._conn = self.pool.connection_of(addr)
            if resp.code == ResponseCode.SUCCESS and resp.body:
                return resp.body
            if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                self.stats.not_found += 1
                return NOT_FOUND
            return REFUSED
        raise RouteUnavailable(last)


__all__ = ["NOT_FOUND", "REFUSED", "RouteFetcher", "SubscribeRoute", "decode_route"]
