"""REGISTER_BROKER: parsing under the configured bounds, and applying it in slices.

Kept apart from the rest of the request handlers (:mod:`namesrv.processor`)
because a registration is the one request with state of its own besides
the route table: which brokers each connection registered (for
``maxBrokersPerConnection``) and each broker's last body size (the in-use
floor of ``registerBodyMaxBytes``), and the one that runs in slices under
the table lock, so route queries are answered while a big body is applied.
The processor owns one :class:`RegisterRequests` and routes the code to it.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Generator, Hashable, Iterable
from dataclasses import dataclass
from time import perf_counter
from typing import TypeVar

import trio

from namesrv import headers
from namesrv.config import NamesrvConfig
from namesrv.counters import NamesrvCounters
from namesrv.registration.body import RawBody
from namesrv.route_model import TopicTableFull
from namesrv.routes import RegisterOutcome, Registration, RouteTable
from namesrv.slices import run_to_end
from remoting.bodies import BodyError
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.fastjson import BodyLimitError
from remoting.register_body import RegisterBody, RegisterLimits, parse_register_body
from server_runtime.ratelog import RateLimitedLog

log = logging.getLogger("namesrv")

CRC_MISMATCH = "crc32 not match"
T = TypeVar("T")

#: The answer to a registration the server abandoned because it is stopping.
STOPPING_REMARK = "the NameServer is stopping: this registration was not applied; register again"


@dataclass(slots=True)
class _Request:
    """A REGISTER_BROKER request read and admitted: the registration, its body, and the key of a new broker."""

    reg: Registration
    raw: RawBody
    new_key: tuple[str, str] | None  # (cluster, addr) of a broker new to the table


class Stopping(Exception):
    """The server began to stop while a sliced operation was under way: it was abandoned unapplied."""


async def run_in_slices(steps: Generator[None, None, T], stopping: Callable[[], bool] = lambda: False) -> T:
    """Drive a sliced table operation, letting other tasks (the reactor) run between slices.

    ``stopping`` is asked before every slice: once it is true the operation
    is closed (a registration changes the table only in its last step, so
    nothing of it is applied) and Stopping is raised.
    """
    while True:
        if stopping():
            steps.close()
            raise Stopping
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        await trio.lowlevel.checkpoint()


class RegisterRequests:
    def __init__(
        self,
        config: NamesrvConfig,
        table: RouteTable,
        table_lock: trio.Lock,
        counters: NamesrvCounters,
        warn: RateLimitedLog,
        *,
        now_ms: Callable[[], float],
        stopping: Callable[[], bool],
        order_conf_body: Callable[[], bytes],
    ) -> None:
        self.config = config
        self.table = table
        self.table_lock = table_lock
        self.counters = counters
        self.warn = warn
        self.now_ms = now_ms
        self.stopping = stopping  # the server began to stop: abandon registrations under way
        self.order_conf_body = order_conf_body  # the ORDER_TOPIC_CONFIG table answers carry
        #: live brokers each connection registered (pruned as they leave), for maxBrokersPerConnection
        self._conn_brokers: dict[Hashable, set[tuple[str, str]]] = {}
        #: size of the last uncompressed registration of each broker (pruned to live ones), for the
        #: in-use floor of registerBodyMaxBytes
        self._body_sizes: dict[tuple[str, str], int] = {}
        self.sync_limits()

    def sync_limits(self) -> None:
        """Take the registerBody* limits of the config in force (at start and after an update)."""
        config = self.config
        self.limits = RegisterLimits(
            max_inflated_bytes=config.registerBodyMaxInflatedBytes,
            max_topics=config.registerBodyMaxTopics,
            max_depth=config.registerBodyMaxJsonDepth,
            max_whole_json=config.registerBodyMaxWholeParseBytes,
        )

    def body_sizes(self) -> Iterable[int]:
        """The last uncompressed body size of each live broker."""
        self._prune_body_sizes()
        return self._body_sizes.values()

    def _prune_body_sizes(self) -> None:
        live = self.table.live
        for key in [k for k in self._body_sizes if k not in live]:
            del self._body_sizes[key]

    def register_broker(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """REGISTER_BROKER in one go (for callers of the processor's ``handle``)."""
        request = self._request(req, conn)
        if isinstance(request, RemotingCommand):
            return request
        outcome = run_to_end(self.table.register_raw(request.reg, request.raw, conn=conn, now=self.now_ms()))
        return self._registered(req, request, outcome, conn)

    async def register_broker_sliced(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """REGISTER_BROKER under the table lock, yielding to route queries between slices.

        The table changes in one step at the end, so the answer goes out
        after the registration is applied, and an unregistration or
        connection close that arrives meanwhile waits for the lock and wins.
        """
        began = perf_counter()
        result = "failed"
        try:
            request = self._request(req, conn)
            if isinstance(request, RemotingCommand):
                result = "failed" if request.remark == CRC_MISMATCH else "refused_bound"
                return request
            async with self.table_lock:
                generation = self.table.generation
                try:
                    outcome = await run_in_slices(
                        self.table.register_raw(request.reg, request.raw, conn=conn, now=self.now_ms()),
                        lambda: self.stopping() and not self.table.must_finish)
                except Stopping:
                    return response_to(req, ResponseCode.SYSTEM_ERROR, STOPPING_REMARK)
                except TopicTableFull as exc:
                    result = "refused_bound"
                    self._refused_topics(request.reg, exc)
                    raise
                changed = self.table.generation != generation
            answer = self._registered(req, request, outcome, conn)
            if outcome.ok:
                result = "applied" if changed else "unchanged"
            return answer
        except BodyLimitError:
            result = "refused_bound"
            self.counters.refused("register_body")
            raise
        finally:
            self.counters.registered(result, perf_counter() - began)

    def _refused_topics(self, reg: Registration, exc: TopicTableFull) -> None:
        self.counters.refused("max_topics")
        self.warn.warning(
            "max-topics", "{count} more registrations refused by maxTopics in the last {seconds} s",
            "broker %s %s (%s) refused (%d refusals so far): %s",
            reg.name, reg.addr, reg.cluster, self.table.topic_table_refusals, exc,
        )

    def _request(self, req: RemotingCommand, conn: Hashable) -> _Request | RemotingCommand:
        """The registration and its body, within the bounds; or the refusal (a CRC that does not
        match, no room for another broker)."""
        reg, compressed, crc = headers.registration(req)
        body = req.body
        body_limit = self.config.registerBodyMaxBytes
        if body_limit and not compressed and len(body) > body_limit:  # before any pass over the body
            raise BodyLimitError(
                f"register body of {len(body)} bytes is larger than registerBodyMaxBytes ({body_limit});"
                " a broker with this many topics can set compressedRegister=true"
            )
        if crc and (zlib.crc32(body) & 0x7FFFFFFF) != crc:
            return response_to(req, ResponseCode.SYSTEM_ERROR, CRC_MISMATCH)
        key = (reg.cluster, reg.addr)
        new_broker = key not in self.table.live
        if new_broker:
            refusal = self._broker_room(conn)
            if refusal is not None:
                return response_to(req, ResponseCode.SYSTEM_ERROR, refusal)
        limits, name = self.limits, reg.name
        raw = RawBody(
            body, compressed, req.version,
            lambda b, c, v: self._load_register_body(b, c, v, name),
            max_inflated=limits.max_inflated_bytes, max_topics=limits.max_topics,
        )
        return _Request(reg, raw, key if new_broker else None)

    def _registered(
        self, req: RemotingCommand, request: _Request, outcome: RegisterOutcome, conn: Hashable
    ) -> RemotingCommand:
        if not outcome.ok:
            return response_to(req, ResponseCode.SYSTEM_ERROR, "register broker failed")
        if not request.raw.compressed:
            self._body_sizes[(request.reg.cluster, request.reg.addr)] = len(req.body)
            if len(self._body_sizes) > 2 * len(self.table.live) + 16:
                self._prune_body_sizes()
        new_key = request.new_key
        info = self.table.live.get(new_key) if new_key is not None else None
        if info is not None and info.conn == conn:  # not when its connection closed meanwhile
            self._conn_brokers.setdefault(conn, set()).add(new_key)
        ext = {}
        if outcome.ha_server_addr is not None or outcome.master_addr is not None:
            ext = {"haServerAddr": outcome.ha_server_addr, "masterAddr": outcome.master_addr}
        resp_body = self.order_conf_body() if self.config.returnOrderTopicConfigToBroker else b""
        return response_to(req, ResponseCode.SUCCESS, ext_fields=ext, body=resp_body)

    def _broker_room(self, conn: Hashable) -> str | None:
        """Why a new broker may not register now (None: it may).

        Java has no bound; here one connection registering 100,000 brokers took 340 MB, and
        its close removed them all in one 1.4 s stall with a log line each. A Java broker
        registers itself alone over its connection (a 5.x broker container, a few).
        """
        live = self.table.live
        if len(live) >= self.config.maxBrokers:
            self.counters.refused("max_brokers")
            return f"the NameServer holds {len(live)} brokers, the maxBrokers limit"
        mine = self._conn_brokers.get(conn)
        if mine:
            mine.intersection_update([k for k in mine if (info := live.get(k)) is not None and info.conn == conn])
            if len(mine) >= self.config.maxBrokersPerConnection:
                self.counters.refused("max_brokers_per_connection")
                return (
                    f"this connection registered {len(mine)} brokers, the maxBrokersPerConnection limit"
                    f" ({self.config.maxBrokersPerConnection})"
                )
        return None

    def connection_closed(self, conn: Hashable) -> None:
        self._conn_brokers.pop(conn, None)

    def _load_register_body(self, body: bytes, compressed: bool, version: int, name: str) -> RegisterBody:
        """Parse under the configured limits; a broker may map only its own queues.

        A static-topic mapping info names the broker hosting the queues
        (``bname``); one naming another broker would overwrite that broker's
        mapping in every route of the topic.
        """
        parsed = parse_register_body(body, compressed=compressed, version=version, limits=self.limits)
        for topic, info in parsed.mapping_infos.items():
            bname = info.get("bname")
            if bname is not None and bname != name:
                raise BodyError(f"mapping info of topic {topic[:60]!r} names broker {bname[:60]!r}, not {name[:60]!r}")
        return parsed

