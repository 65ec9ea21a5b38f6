"""Admin client library: what mqadmin commands, scenarios and the fan-out call.

No CLI code here. Every call has a timeout and every failure is an
:class:`AdminError` whose message names the address, so callers can print
it as one line. Writes that RocketMQ sends to every NameServer go to every
NameServer, in parallel, with one result per NameServer.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, TypeVar

import trio

from remoting import properties
from remoting import requests as rq
from remoting.bodies import BodyError, ClusterInfo, TopicRouteData, parse_kv_table, parse_topic_list
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, request
from remoting.transport import RemotingError, connect, parse_addr

T = TypeVar("T")
DEFAULT_TIMEOUT = 3.0


class AdminError(Exception):
    """A request failed; the message is one line naming the address."""


class NotFound(AdminError):
    """The server answered that the thing asked for does not exist."""


@dataclass
class PerServer:
    """The outcome of one request to one NameServer."""

    addr: str
    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def split_addrs(text: str) -> list[str]:
    """``host:port;host:port`` (RocketMQ's -n syntax) -> validated addresses."""
    addrs = [a.strip() for a in text.replace(",", ";").split(";") if a.strip()]
    if not addrs:
        raise AdminError("no NameServer address given")
    for addr in addrs:
        try:
            parse_addr(addr)
        except ValueError as exc:
            raise AdminError(str(exc)) from None
    return addrs


def namesrv_from_env() -> list[str] | None:
    value = os.environ.get("NAMESRV_ADDR")
    return split_addrs(value) if value else None


async def call(addr: str, req: RemotingCommand, timeout: float = DEFAULT_TIMEOUT) -> RemotingCommand:
    """One request over a fresh connection to ``addr``."""
    try:
        async with connect(addr, connect_timeout=timeout) as client:
            return await client.invoke(req, timeout)
    except RemotingError as exc:
        raise AdminError(str(exc)) from None


def _check(addr: str, resp: RemotingCommand, what: str) -> RemotingCommand:
    if resp.code == ResponseCode.SUCCESS:
        return resp
    remark = (resp.remark or "").strip().splitlines()[0] if resp.remark else ""
    name = ResponseCode(resp.code).name if resp.code in ResponseCode._value2member_map_ else str(resp.code)
    message = f"{addr}: {what} failed: {name}" + (f" ({remark})" if remark else "")
    if resp.code in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.QUERY_NOT_FOUND):
        raise NotFound(message)
    raise AdminError(message)


class AdminClient:
    """Calls to a set of NameServers (and to brokers they know)."""

    def __init__(self, namesrv_addrs: list[str], *, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not namesrv_addrs:
            raise AdminError("no NameServer address given")
        self.namesrv_addrs = list(namesrv_addrs)
        self.timeout = timeout

    async def _any(self, req_factory: Callable[[], RemotingCommand], what: str) -> tuple[str, RemotingCommand]:
        """Ask NameServers in random order until one answers (like a Java client)."""
        errors = []
        for addr in random.sample(self.namesrv_addrs, len(self.namesrv_addrs)):
            try:
                return addr, _check(addr, await call(addr, req_factory(), self.timeout), what)
            except NotFound:
                raise
            except AdminError as exc:
                errors.append(str(exc))
        raise AdminError("; ".join(errors))

    async def _all(
        self, req_factory: Callable[[], RemotingCommand], what: str, parse: Callable[[RemotingCommand], Any] = lambda r: None
    ) -> list[PerServer]:
        results = [PerServer(addr) for addr in self.namesrv_addrs]

        async def one(result: PerServer) -> None:
            try:
                resp = _check(result.addr, await call(result.addr, req_factory(), self.timeout), what)
                result.value = parse(resp)
            except AdminError as exc:
                result.error = str(exc)
            except BodyError as exc:
                result.error = f"{result.addr}: malformed answer to {what}: {exc}"

        async with trio.open_nursery() as nursery:
            for result in results:
                nursery.start_soon(one, result)
        return results

    # ------------------------------------------------------------------
    # reads

    async def cluster_info(self) -> ClusterInfo:
        addr, resp = await self._any(rq.cluster_info, "GET_BROKER_CLUSTER_INFO")
        return _parse(addr, ClusterInfo.decode, resp.body)

    async def topic_route(self, topic: str) -> TopicRouteData:
        addr, resp = await self._any(lambda: rq.get_route(topic), f"route of topic {topic}")
        return _parse(addr, TopicRouteData.decode, resp.body)

    async def topic_routes_everywhere(self, topic: str) -> list[PerServer]:
        """The route as each NameServer sees it (they need not agree)."""
        return await self._all(lambda: rq.get_route(topic), f"route of topic {topic}", lambda r: TopicRouteData.decode(r.body))

    async def cluster_infos_everywhere(self) -> list[PerServer]:
        """Each NameServer's own ClusterInfo (they need not agree)."""
        return await self._all(rq.cluster_info, "GET_BROKER_CLUSTER_INFO", lambda r: ClusterInfo.decode(r.body))

    async def topic_lists_everywhere(self) -> list[PerServer]:
        return await self._all(rq.all_topics, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER", lambda r: parse_topic_list(r.body)[0])

    async def topic_list(self) -> list[str]:
        addr, resp = await self._any(rq.all_topics, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER")
        return _parse(addr, lambda b: parse_topic_list(b)[0], resp.body)

    async def get_kv(self, namespace: str, key: str) -> str:
        addr, resp = await self._any(lambda: rq.get_kv(namespace, key), f"get kv {namespace}/{key}")
        return (resp.ext_fields or {}).get("value", "")

    async def kv_list(self, namespace: str) -> dict[str, str]:
        addr, resp = await self._any(lambda: rq.kv_list(namespace), f"kv list of {namespace}")
        return _parse(addr, parse_kv_table, resp.body)

    async def namesrv_configs(self) -> list[PerServer]:
        return await self._all(
            rq.get_namesrv_config, "GET_NAMESRV_CONFIG", lambda r: properties.loads(r.body.decode("utf-8", "replace"))
        )

    # ------------------------------------------------------------------
    # writes, to every NameServer

    async def put_kv(self, namespace: str, key: str, value: str) -> list[PerServer]:
        return await self._all(lambda: rq.put_kv(namespace, key, value), "PUT_KV_CONFIG")

    async def delete_kv(self, namespace: str, key: str) -> list[PerServer]:
        return await self._all(lambda: rq.delete_kv(namespace, key), "DELETE_KV_CONFIG")

    async def wipe_write_perm(self, broker_name: str) -> list[PerServer]:
        return await self._all(
            lambda: rq.wipe_write_perm(broker_name), "WIPE_WRITE_PERM_OF_BROKER",
            lambda r: int((r.ext_fields or {}).get("wipeTopicCount", "0")),
        )

    async def add_write_perm(self, broker_name: str) -> list[PerServer]:
        return await self._all(
            lambda: rq.add_write_perm(broker_name), "ADD_WRITE_PERM_OF_BROKER",
            lambda r: int((r.ext_fields or {}).get("addTopicCount", "0")),
        )

    async def update_namesrv_config(self, key: str, value: str) -> list[PerServer]:
        return await self._all(lambda: rq.update_namesrv_config({key: value}), "UPDATE_NAMESRV_CONFIG")

    async def delete_topic_in_namesrv(self, topic: str, cluster: str | None) -> list[PerServer]:
        return await self._all(lambda: rq.delete_topic(topic, cluster), "DELETE_TOPIC_IN_NAMESRV")

    # ------------------------------------------------------------------
    # brokers

    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        resp = _check(
            broker_addr,
            await call(broker_addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), self.timeout),
            "GET_BROKER_RUNTIME_INFO",
        )
        return _parse(broker_addr, parse_kv_table, resp.body)


def _parse(addr: str, parse: Callable[[bytes], T], body: bytes) -> T:
    try:
        return parse(body)
    except BodyError as exc:
        raise AdminError(f"{addr}: malformed answer: {exc}") from None


def run(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run one async admin call from synchronous code."""
    return trio.run(fn, *args)
