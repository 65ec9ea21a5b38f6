"""Admin client library: what mqadmin commands, scenarios and the fan-out call.

No CLI code here. Every call has a timeout and every failure is an
:class:`AdminError` whose message names the address, so callers can print
it as one line. Writes that RocketMQ sends to every NameServer go to every
NameServer, in parallel, with one result per NameServer.

Each call opens a fresh connection unless the client is inside
``async with client.pooled():``, which keeps one connection per address for
the block (for many sends or pulls in a row). :class:`SyncAdminClient` is
the same API for blocking code (Spark executors, scripts).
"""

from __future__ import annotations

import functools
import inspect
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio

from broker_stub.faults import FAULT_CODE
from namesrv.liveinfo import LIVE_TABLE_CODE
from mqadmin import messages
from namesrv.provisional import RESTORED_BROKERS_CODE
from remoting import fastjson, properties
from remoting import requests as rq
from remoting.bodies import (
    BodyError,
    ClusterInfo,
    TopicConfig,
    TopicRouteData,
    parse_kv_table,
    parse_topic_list,
    perm_to_string,
)
from remoting.codes import (
    DEFAULT_TOPIC,
    NAMESPACE_ORDER_TOPIC_CONFIG,
    PERM_READ,
    PERM_WRITE,
    RequestCode,
    ResponseCode,
)
from remoting.command import RemotingCommand, request
from remoting.transport import RemotingClient, RemotingError, connect, parse_addr

T = TypeVar("T")
DEFAULT_TIMEOUT = 3.0
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"  # MixAll.TOOLS_CONSUMER_GROUP
PULL_BATCH = 32  # the broker's per-pull cap (maxTransferCountOnMessageInMemory)
SEND_ATTEMPTS = 3  # Java: 1 + retryTimesWhenSendFailed (2)
DEFAULT_TOPIC_QUEUE_NUMS = 4  # DefaultMQProducer.defaultTopicQueueNums
PULL_SYS_FLAG_SUBSCRIPTION = 0x4
#: Stored-but statuses of a send (the client returns a result, no error).
SEND_STATUS = {
    ResponseCode.SUCCESS: "SEND_OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}
PULL_STATUS = {
    ResponseCode.SUCCESS: "FOUND",
    ResponseCode.PULL_NOT_FOUND: "NO_NEW_MSG",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MSG",
    ResponseCode.PULL_OFFSET_MOVED: "OFFSET_ILLEGAL",
}


class AdminError(Exception):
    """A request failed; the message is one line naming the address."""


class NotFound(AdminError):
    """The server answered that the thing asked for does not exist."""


@dataclass
class PerServer:
    """The outcome of one request to one server (NameServer or broker)."""

    addr: str
    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return {"addr": self.addr, "ok": self.ok, "error": self.error, "value": self.value}


@dataclass
class SendResult:
    """What a send returns (SendResult.java)."""

    status: str
    msg_id: str  # the client's UNIQ_KEY
    offset_msg_id: str  # the broker's id: store host + commit-log offset
    broker_name: str
    broker_addr: str
    queue_id: int
    queue_offset: int
    region: str | None = None
    transaction_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "sendStatus": self.status, "msgId": self.msg_id, "offsetMsgId": self.offset_msg_id,
            "brokerName": self.broker_name, "brokerAddr": self.broker_addr, "queueId": self.queue_id,
            "queueOffset": self.queue_offset, "regionId": self.region, "transactionId": self.transaction_id,
        }


@dataclass
class PullResult:
    """One PULL_MESSAGE answer (PullResult.java)."""

    status: str  # FOUND, NO_NEW_MSG, NO_MATCHED_MSG, OFFSET_ILLEGAL
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[messages.Message] = field(default_factory=list)
    suggest_broker_id: int = 0


@dataclass
class QueueRead:
    """What ``consume`` read from one queue."""

    broker_name: str
    queue_id: int
    broker_addr: str | None
    min_offset: int = 0
    max_offset: int = 0
    start_offset: int = 0
    next_offset: int = 0
    messages: list[messages.Message] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name, "queueId": self.queue_id, "brokerAddr": self.broker_addr,
            "minOffset": self.min_offset, "maxOffset": self.max_offset, "startOffset": self.start_offset,
            "nextOffset": self.next_offset, "count": len(self.messages), "error": self.error,
        }


def check_addr(addr: str) -> str:
    """A ``host:port`` given by a user, or an :class:`AdminError` saying what is wrong.

    A port that is a number but not a TCP port gets its own message: "not a
    host:port address" would send the user looking at the syntax instead.
    """
    host, sep, port = addr.strip().rpartition(":")
    if sep and host and port.isdigit() and not 0 < int(port) < 65536:
        raise AdminError(f"port out of range in {addr.strip()!r}: {int(port)} is not 1-65535")
    try:
        parse_addr(addr)
    except ValueError as exc:
        raise AdminError(str(exc)) from None
    return addr.strip()


def split_addrs(text: str) -> list[str]:
    """``host:port;host:port`` (RocketMQ's -n syntax) -> validated addresses."""
    addrs = [a.strip() for a in text.replace(",", ";").split(";") if a.strip()]
    if not addrs:
        raise AdminError("no NameServer address given")
    return [check_addr(a) for a in addrs]


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


def code_name(code: int) -> str:
    return ResponseCode(code).name if code in ResponseCode._value2member_map_ else str(code)


def _check(addr: str, resp: RemotingCommand, what: str, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
    if resp.code in ok:
        return resp
    remark = (resp.remark or "").strip().splitlines()[0] if resp.remark else ""
    message = f"{addr}: {what} failed: {code_name(resp.code)}" + (f" ({remark})" if remark else "")
    if resp.code in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.QUERY_NOT_FOUND):
        raise NotFound(message)
    raise AdminError(message)


def _parse(addr: str, parse: Callable[[bytes], T], body: bytes) -> T:
    try:
        return parse(body)
    except (BodyError, messages.MessageFormatError) as exc:
        raise AdminError(f"{addr}: malformed answer: {exc}") from None


def parse_attributes(text: str | None) -> dict[str, str]:
    """``+a=b,+c=d,-e`` (AttributeParser.parseToMap: keys keep their sign)."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        if "=" in item:
            key, _, value = item.partition("=")
            if not key.startswith("+") or len(key) < 2:
                raise AdminError(f"attribute {item!r}: adding or changing is written +key=value")
        else:
            key, value = item, ""
            if not key.startswith("-") or len(key) < 2:
                raise AdminError(f"attribute {item!r}: deleting is written -key")
        if key in out:
            raise AdminError(f"attribute {key} given twice")
        out[key] = value
    return out


def attributes_text(attrs: dict[str, str]) -> str:
    return ",".join(k if not v else f"{k}={v}" for k, v in attrs.items())


def topic_config_text(tc: TopicConfig) -> str:
    """TopicConfig.toString() of 5.x, which updateTopic prints."""
    attrs = "{" + ", ".join(f"{k}={v}" for k, v in tc.attributes.items()) + "}"
    return (
        f"TopicConfig [topicName={tc.topic_name}, readQueueNums={tc.read_queue_nums}, "
        f"writeQueueNums={tc.write_queue_nums}, perm={perm_to_string(tc.perm)}, "
        f"topicFilterType={tc.topic_filter_type}, topicSysFlag={tc.topic_sys_flag}, order={str(tc.order).lower()}, "
        f"attributes={attrs}]"
    )


class _Pool:
    """One persistent connection per address, each held open by a task of the pool's nursery."""

    def __init__(self, nursery: trio.Nursery, timeout: float) -> None:
        self.nursery = nursery
        self.timeout = timeout
        self.conns: dict[str, RemotingClient] = {}
        self.closers: dict[str, trio.Event] = {}
        self.locks: dict[str, trio.Lock] = {}

    async def get(self, addr: str) -> RemotingClient:
        conn = self.conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        async with self.locks.setdefault(addr, trio.Lock()):
            conn = self.conns.get(addr)
            if conn is not None and not conn.closed:
                return conn
            self.drop(addr)
            conn = await self.nursery.start(self._hold, addr)
            self.conns[addr] = conn
            return conn

    def drop(self, addr: str) -> None:
        self.conns.pop(addr, None)
        closer = self.closers.pop(addr, None)
        if closer is not None:
            closer.set()

    async def _hold(self, addr: str, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        done = trio.Event()
        self.closers[addr] = done
        async with connect(addr, connect_timeout=self.timeout) as conn:
            task_status.started(conn)
            await done.wait()


class AdminClient:
    """Calls to a set of NameServers and to the brokers they know."""

    def __init__(self, namesrv_addrs: list[str], *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """``namesrv_addrs`` may be empty for broker-only calls; NameServer calls then fail clearly."""
        self.namesrv_addrs = list(namesrv_addrs)
        self.timeout = timeout
        self._pool: _Pool | None = None
        self._uniq = messages.UniqIdGenerator()
        self._producer_group = f"mqadmin-{os.getpid()}"

    @asynccontextmanager
    async def pooled(self) -> AsyncIterator[AdminClient]:
        """Reuse one connection per address for the block (many sends or pulls in a row)."""
        async with trio.open_nursery() as nursery:
            self._pool = _Pool(nursery, self.timeout)
            try:
                yield self
            finally:
                self._pool = None
                nursery.cancel_scope.cancel()

    async def invoke(self, addr: str, req: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """One request to any server, pooled when a pool is open."""
        t = self.timeout if timeout is None else timeout
        pool = self._pool
        if pool is None:
            return await call(addr, req, t)
        try:
            conn = await pool.get(addr)
            return await conn.invoke(req, t)
        except RemotingError as exc:
            pool.drop(addr)
            raise AdminError(str(exc)) from None

    async def _any(self, req_factory: Callable[[], RemotingCommand], what: str) -> tuple[str, RemotingCommand]:
        """Ask NameServers in random order until one answers (like a Java client)."""
        self._need_namesrv()
        errors = []
        for addr in random.sample(self.namesrv_addrs, len(self.namesrv_addrs)):
            try:
                return addr, _check(addr, await self.invoke(addr, req_factory()), what)
            except NotFound:
                raise
            except AdminError as exc:
                errors.append(str(exc))
        raise AdminError("; ".join(errors))

    async def _each(
        self,
        addrs: list[str],
        req_factory: Callable[[], RemotingCommand],
        what: str,
        parse: Callable[[RemotingCommand], Any] = lambda r: None,
    ) -> list[PerServer]:
        """The same request to every address in parallel, one result each (in ``addrs`` order)."""
        results = [PerServer(addr) for addr in addrs]

        async def one(result: PerServer) -> None:
            try:
                resp = _check(result.addr, await self.invoke(result.addr, req_factory()), what)
                result.value = parse(resp)
            except AdminError as exc:
                result.error = str(exc)
            except (BodyError, ValueError) as exc:
                result.error = f"{result.addr}: malformed answer to {what}: {exc}"

        async with trio.open_nursery() as nursery:
            for result in results:
                nursery.start_soon(one, result)
        return results

    async def _all(
        self, req_factory: Callable[[], RemotingCommand], what: str, parse: Callable[[RemotingCommand], Any] = lambda r: None
    ) -> list[PerServer]:
        self._need_namesrv()
        return await self._each(self.namesrv_addrs, req_factory, what, parse)

    def _need_namesrv(self) -> None:
        if not self.namesrv_addrs:
            raise AdminError("no NameServer address given")

    # ------------------------------------------------------------------
    # NameServer reads

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

    async def broker_live_tables_everywhere(self) -> list[PerServer]:
        """Each NameServer's GET_BROKER_LIVE_TABLE (ours, code 9001): how long each broker has been silent.

        A NameServer without it (Apache's) answers REQUEST_CODE_NOT_SUPPORTED, which is that server's error.
        """
        return await self._all(lambda: request(LIVE_TABLE_CODE), "GET_BROKER_LIVE_TABLE", lambda r: _live_rows(r.body))

    async def topic_list(self) -> list[str]:
        addr, resp = await self._any(rq.all_topics, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER")
        return _parse(addr, lambda b: parse_topic_list(b)[0], resp.body)

    async def get_kv(self, namespace: str, key: str) -> str:
        _, resp = await self._any(lambda: rq.get_kv(namespace, key), f"get kv {namespace}/{key}")
        return (resp.ext_fields or {}).get("value", "")

    async def kv_list(self, namespace: str) -> dict[str, str]:
        addr, resp = await self._any(lambda: rq.kv_list(namespace), f"kv list of {namespace}")
        return _parse(addr, parse_kv_table, resp.body)

    async def namesrv_configs(self) -> list[PerServer]:
        return await self._all(
            rq.get_namesrv_config, "GET_NAMESRV_CONFIG", lambda r: properties.loads(r.body.decode("utf-8", "replace"))
        )

    async def restored_brokers_everywhere(self) -> list[PerServer]:
        """Each NameServer's brokers restored by a warm restart and not registered since (code 9002, ours).

        Value: a list of ``{clusterName, brokerName, brokerId, brokerAddr, expiresInMillis}``;
        a NameServer without the code (a Java one) gives an error result.
        """
        return await self._all(lambda: request(RESTORED_BROKERS_CODE), "GET_RESTORED_BROKERS",
                               lambda r: _restored_rows(r.body))

    async def masters_of_cluster(self, cluster: str, info: ClusterInfo | None = None) -> dict[str, str]:
        """Broker name -> master address for every broker group of ``cluster`` (CommandUtil)."""
        return {name: addrs[0] for name, addrs in (await self.brokers_of_cluster(cluster, info)).items() if 0 in addrs}

    async def brokers_of_cluster(self, cluster: str, info: ClusterInfo | None = None) -> dict[str, dict[int, str]]:
        """Broker name -> {brokerId: address}; an unknown cluster is an error naming the known ones."""
        info = info or await self.cluster_info()
        names = info.cluster_addr_table.get(cluster)
        if names is None:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise AdminError(f"cluster {cluster} is not known to the NameServer (clusters: {known})")
        return {n: dict(info.broker_addr_table[n].broker_addrs) for n in sorted(names) if n in info.broker_addr_table}

    # ------------------------------------------------------------------
    # NameServer writes, to every NameServer

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

    async def put_order_conf(self, topic: str, conf: str, *, whole_cluster: bool) -> list[PerServer]:
        """ORDER_TOPIC_CONFIG for ``topic`` on every NameServer (createOrUpdateOrderConf).

        For a single broker (``whole_cluster`` false) Java merges ``brokerName:queues``
        into the value already stored; for a cluster it replaces it.
        """
        value = conf
        if not whole_cluster:
            try:
                old = await self.get_kv(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
            except NotFound:
                old = ""
            merged: dict[str, str] = {}
            for item in [*old.split(";"), conf]:
                if item.strip():
                    merged[item.split(":", 1)[0]] = item
            value = ";".join(merged.values())
        return await self.put_kv(NAMESPACE_ORDER_TOPIC_CONFIG, topic, value)

    # ------------------------------------------------------------------
    # brokers: admin

    async def broker_call(self, addr: str, req: RemotingCommand, what: str) -> RemotingCommand:
        return _check(addr, await self.invoke(addr, req), what)

    async def broker_fault(self, broker_addr: str, action: str, **params: object) -> dict[str, Any]:
        """Drive a broker stub's fault switchboard (request 9000, see :mod:`broker_stub.faults`).

        Returns the switchboard's whole state after the change. A Java broker
        does not know the code and answers REQUEST_CODE_NOT_SUPPORTED, which
        becomes an :class:`AdminError` like any refusal.
        """
        ext = {"action": action, **{k: str(v) for k, v in params.items()}}
        resp = await self.broker_call(broker_addr, request(FAULT_CODE, ext), f"fault {action}")
        state = _parse(broker_addr, fastjson.loads, resp.body)
        if not isinstance(state, dict):
            raise AdminError(f"{broker_addr}: malformed answer: fault state is not a JSON object")
        return state

    async def broker_addr_of(self, broker_name: str, broker_id: int = 0) -> str:
        """The address the NameServer holds for broker ``broker_name`` / ``broker_id``."""
        info = await self.cluster_info()
        data = info.broker_addr_table.get(broker_name)
        if data is None:
            known = ", ".join(sorted(info.broker_addr_table)) or "none"
            raise AdminError(f"broker {broker_name} is not known to the NameServer (brokers: {known})")
        addr = dict(data.broker_addrs).get(broker_id)
        if addr is None:
            raise AdminError(f"broker {broker_name} has no brokerId {broker_id} registered "
                             f"(ids: {', '.join(map(str, sorted(dict(data.broker_addrs))))})")
        return addr

    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        resp = await self.broker_call(broker_addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), "GET_BROKER_RUNTIME_INFO")
        return _parse(broker_addr, parse_kv_table, resp.body)

    async def runtime_infos(self, addrs: list[str]) -> list[PerServer]:
        """GET_BROKER_RUNTIME_INFO from many brokers in parallel; a silent one is an error entry."""
        return await self._each(
            addrs, lambda: request(RequestCode.GET_BROKER_RUNTIME_INFO), "GET_BROKER_RUNTIME_INFO",
            lambda r: parse_kv_table(r.body),
        )

    async def create_topic(self, broker_addr: str, tc: TopicConfig) -> None:
        """UPDATE_AND_CREATE_TOPIC (17) to one broker, with the header Java sends."""
        await self.broker_call(broker_addr, _create_topic_request(tc), f"create topic {tc.topic_name}")

    async def create_topic_on(self, addrs: list[str], tc: TopicConfig) -> list[PerServer]:
        return await self._each(addrs, lambda: _create_topic_request(tc), f"create topic {tc.topic_name}")

    async def delete_topic_in_brokers(self, addrs: list[str], topic: str) -> list[PerServer]:
        return await self._each(
            addrs, lambda: request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}), f"delete topic {topic}"
        )

    async def min_offset(self, broker_addr: str, topic: str, queue_id: int) -> int:
        req = request(RequestCode.GET_MIN_OFFSET, {"topic": topic, "queueId": queue_id})
        return _int_ext(broker_addr, await self.broker_call(broker_addr, req, "GET_MIN_OFFSET"), "offset")

    async def max_offset(self, broker_addr: str, topic: str, queue_id: int) -> int:
        req = request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id, "committed": True})
        return _int_ext(broker_addr, await self.broker_call(broker_addr, req, "GET_MAX_OFFSET"), "offset")

    async def search_offset(self, broker_addr: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after ``timestamp_ms``."""
        req = request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": topic, "queueId": queue_id, "timestamp": timestamp_ms})
        return _int_ext(broker_addr, await self.broker_call(broker_addr, req, "SEARCH_OFFSET_BY_TIMESTAMP"), "offset")

    async def topic_consumer_groups(self, broker_addr: str, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO (300); a broker that does not support it knows no groups."""
        resp = await self.invoke(broker_addr, request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}))
        if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            return []
        _check(broker_addr, resp, f"consumer groups of {topic}")
        obj = _parse(broker_addr, fastjson.loads, resp.body) if resp.body else {}
        groups = obj.get("groupList") if isinstance(obj, dict) else None
        return sorted(str(g) for g in groups) if isinstance(groups, list) else []

    # ------------------------------------------------------------------
    # brokers: producing

    async def send_to(
        self,
        broker_addr: str,
        broker_name: str,
        topic: str,
        queue_id: int,
        body: bytes,
        props: dict[str, str],
        *,
        producer_group: str | None = None,
        default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
    ) -> SendResult:
        """One SEND_MESSAGE_V2 (310) to one broker and queue, header as a Java 5.x producer sends it."""
        props = dict(props)
        uniq = props.setdefault(messages.UNIQ_KEY, self._uniq.next())
        ext: dict[str, object] = {
            "a": producer_group or self._producer_group,
            "b": topic,
            "c": DEFAULT_TOPIC,
            "d": default_topic_queue_nums,
            "e": queue_id,
            "f": 0,
            "g": int(time.time() * 1000),
            "h": 0,
            "i": messages.format_properties(props),
            "j": 0,
            "k": False,
            "m": False,
            "n": broker_name,
        }
        req = request(RequestCode.SEND_MESSAGE_V2, ext, body)
        resp = _check(broker_addr, await self.invoke(broker_addr, req), f"send to {topic}", tuple(SEND_STATUS))
        fields = resp.ext_fields or {}
        try:
            qid, offset = int(fields["queueId"]), int(fields["queueOffset"])
        except (KeyError, ValueError):
            raise AdminError(f"{broker_addr}: send answer without queueId/queueOffset: {fields}") from None
        return SendResult(
            status=SEND_STATUS[ResponseCode(resp.code)], msg_id=uniq, offset_msg_id=fields.get("msgId", ""),
            broker_name=broker_name, broker_addr=broker_addr, queue_id=qid, queue_offset=offset,
            region=fields.get("MSG_REGION"), transaction_id=fields.get("transactionId"),
        )

    async def send_message(
        self,
        topic: str,
        body: bytes,
        *,
        keys: str | None = None,
        tags: str | None = None,
        broker_name: str | None = None,
        queue_id: int | None = None,
        extra_properties: dict[str, str] | None = None,
        producer_group: str | None = None,
        route: TopicRouteData | None = None,
    ) -> SendResult:
        """Send like DefaultMQProducer.send: route (or TBW102's), pick a writable queue, retry elsewhere.

        ``broker_name`` restricts the choice to that broker group; with
        ``queue_id`` too the message goes to exactly that queue, no retry.
        """
        route, default_nums = await self._publish_route(topic, route)
        targets = _writable_queues(route, default_nums)
        if broker_name is not None:
            targets = [t for t in targets if t[0] == broker_name]
            if not targets:
                known = ", ".join(sorted({q.broker_name for q in route.queue_datas})) or "none"
                raise AdminError(f"topic {topic} has no writable queue on broker {broker_name} (brokers: {known})")
        if queue_id is not None:
            targets = [t for t in targets if t[1] == queue_id]
            if not targets:
                raise AdminError(f"topic {topic} has no writable queue {queue_id} on broker {broker_name}")
        if not targets:
            raise AdminError(f"topic {topic} has no writable queue with a master broker")
        props = messages.message_properties(keys=keys, tags=tags, uniq_key=self._uniq.next(), extra=extra_properties)
        masters = {b.broker_name: b.master_addr for b in route.broker_datas}
        errors: list[str] = []
        start = random.randrange(len(targets))
        last_failed: str | None = None
        for attempt in range(1 if queue_id is not None else SEND_ATTEMPTS):
            candidates = [t for t in targets if t[0] != last_failed] or targets
            name, qid = candidates[(start + attempt) % len(candidates)]
            addr = masters[name]
            assert addr is not None  # _writable_queues keeps only brokers with a master
            try:
                return await self.send_to(addr, name, topic, qid, body, props, producer_group=producer_group,
                                          default_topic_queue_nums=default_nums)
            except AdminError as exc:
                errors.append(str(exc))
                last_failed = name
        raise AdminError("; ".join(errors))

    async def _publish_route(self, topic: str, route: TopicRouteData | None) -> tuple[TopicRouteData, int]:
        """The topic's route, or TBW102's when the topic has none yet (the producer's fallback)."""
        if route is not None:
            return route, DEFAULT_TOPIC_QUEUE_NUMS
        try:
            return await self.topic_route(topic), DEFAULT_TOPIC_QUEUE_NUMS
        except NotFound as missing:
            try:
                default = await self.topic_route(DEFAULT_TOPIC)
            except NotFound:
                raise missing from None
            nums = DEFAULT_TOPIC_QUEUE_NUMS
            capped = [
                type(q)(q.broker_name, min(nums, q.read_queue_nums), min(nums, q.write_queue_nums), q.perm, q.topic_sys_flag)
                for q in default.queue_datas
            ]
            return TopicRouteData(capped, default.broker_datas), nums

    # ------------------------------------------------------------------
    # brokers: consuming

    async def pull(
        self,
        broker_addr: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int = PULL_BATCH,
        *,
        group: str = TOOLS_CONSUMER_GROUP,
        broker_name: str = "",
    ) -> PullResult:
        """One non-blocking PULL_MESSAGE (11) with the header DefaultMQPullConsumer sends."""
        ext: dict[str, object] = {
            "consumerGroup": group,
            "topic": topic,
            "queueId": queue_id,
            "queueOffset": offset,
            "maxMsgNums": max_nums,
            "sysFlag": PULL_SYS_FLAG_SUBSCRIPTION,
            "commitOffset": 0,
            "suspendTimeoutMillis": 0,
            "subscription": "*",
            "subVersion": 0,
            "expressionType": "TAG",
        }
        resp = _check(broker_addr, await self.invoke(broker_addr, request(RequestCode.PULL_MESSAGE, ext)),
                       f"pull {topic}:{queue_id}", tuple(PULL_STATUS))
        fields = resp.ext_fields or {}
        try:
            nxt, lo, hi = int(fields["nextBeginOffset"]), int(fields["minOffset"]), int(fields["maxOffset"])
        except (KeyError, ValueError):
            raise AdminError(f"{broker_addr}: pull answer without offsets: {fields}") from None
        msgs = _parse(broker_addr, lambda b: messages.decode_messages(b, broker_name), resp.body) if resp.code == 0 else []
        return PullResult(PULL_STATUS[ResponseCode(resp.code)], nxt, lo, hi, msgs,
                          int(fields.get("suggestWhichBrokerId", "0") or 0))

    async def consume(
        self,
        topic: str,
        *,
        broker_name: str | None = None,
        queue_id: int | None = None,
        offset: int | None = None,
        count: int = 128,
        group: str = TOOLS_CONSUMER_GROUP,
        begin_ms: int | None = None,
        end_ms: int | None = None,
    ) -> list[QueueRead]:
        """Read up to ``count`` messages, oldest first, queue after queue (ConsumeMessageCommand).

        ``begin_ms``/``end_ms`` keep to messages stored in [begin, end), found
        per queue with SEARCH_OFFSET_BY_TIMESTAMP as Java's command does.
        Bounded: at most ``count`` messages, and every pull must advance the
        offset or the queue is left.
        """
        if count <= 0:
            raise AdminError("the message count must be positive")
        if queue_id is not None and broker_name is None:
            raise AdminError("a queue id needs a broker name (-b) as well")
        route = await self.topic_route(topic)
        addrs = {b.broker_name: _read_addr(b.broker_addrs) for b in route.broker_datas}
        queues = sorted((q.broker_name, i) for q in route.queue_datas if q.perm & PERM_READ for i in range(q.read_queue_nums))
        if broker_name is not None:
            if broker_name not in addrs:
                raise AdminError(f"topic {topic} has no broker {broker_name} (brokers: {', '.join(sorted(addrs)) or 'none'})")
            queues = [q for q in queues if q[0] == broker_name]
        if queue_id is not None:
            queues = [q for q in queues if q[1] == queue_id]
            if not queues:
                raise AdminError(f"topic {topic} has no readable queue {queue_id} on broker {broker_name}")
        left = count
        reads: list[QueueRead] = []
        for name, qid in queues:
            if left <= 0:
                break
            read = QueueRead(name, qid, addrs.get(name))
            reads.append(read)
            if read.broker_addr is None:
                read.error = f"broker {name} has no address in the route"
                continue
            try:
                await self._read_queue(read, topic, offset, left, group, begin_ms, end_ms)
            except AdminError as exc:
                read.error = str(exc)
            left -= len(read.messages)
        return reads

    async def _read_queue(self, read: QueueRead, topic: str, offset: int | None, limit: int, group: str,
                          begin_ms: int | None = None, end_ms: int | None = None) -> None:
        addr = read.broker_addr
        assert addr is not None
        read.min_offset = await self.min_offset(addr, topic, read.queue_id)
        read.max_offset = await self.max_offset(addr, topic, read.queue_id)
        pos = max(read.min_offset, offset if offset is not None else read.min_offset)
        if begin_ms is not None:
            pos = max(pos, await self.search_offset(addr, topic, read.queue_id, begin_ms))
        stop = read.max_offset
        if end_ms is not None:
            stop = min(stop, await self.search_offset(addr, topic, read.queue_id, end_ms))
        read.start_offset = read.next_offset = pos
        while pos < stop and len(read.messages) < limit:
            want = min(PULL_BATCH, limit - len(read.messages), stop - pos)
            result = await self.pull(addr, topic, read.queue_id, pos, want, group=group, broker_name=read.broker_name)
            read.messages.extend(result.messages[: limit - len(read.messages)])
            if result.status != "FOUND" or result.next_begin_offset <= pos:
                break
            pos = result.next_begin_offset
        read.next_offset = read.start_offset + len(read.messages) if read.messages else pos


def _live_rows(body: bytes) -> list[dict[str, Any]]:
    """The ``brokers`` rows of a GET_BROKER_LIVE_TABLE body; ValueError if it is not that shape."""
    obj = fastjson.loads(body)
    rows = obj.get("brokers") if isinstance(obj, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError("no brokers list in the live table")
    for r in rows:
        if not isinstance(r.get("brokerAddr"), str) or not all(
                isinstance(r.get(k), int) for k in ("lastUpdateAgoMillis", "heartbeatTimeoutMillis")):
            raise ValueError(f"malformed live table entry {r!r}"[:200])
    return rows


def _int_ext(addr: str, resp: RemotingCommand, key: str) -> int:
    try:
        return int((resp.ext_fields or {})[key])
    except (KeyError, ValueError):
        raise AdminError(f"{addr}: answer without a numeric {key}") from None


def _restored_rows(body: bytes) -> list[dict[str, Any]]:
    obj = fastjson.loads(body)
    rows = obj.get("brokers") if isinstance(obj, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError("no brokers list")
    return rows


def _read_addr(addrs: dict[int, str]) -> str | None:
    """Where a pull consumer reads: the master, else the lowest-id slave."""
    return addrs.get(0) or next((a for _, a in sorted(addrs.items())), None)


def _create_topic_request(tc: TopicConfig) -> RemotingCommand:
    ext: dict[str, object] = {
        "topic": tc.topic_name,
        "defaultTopic": DEFAULT_TOPIC,
        "readQueueNums": tc.read_queue_nums,
        "writeQueueNums": tc.write_queue_nums,
        "perm": tc.perm,
        "topicFilterType": tc.topic_filter_type,
        "topicSysFlag": tc.topic_sys_flag,
        "order": tc.order,
        "attributes": attributes_text(tc.attributes),
    }
    return request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)


def _writable_queues(route: TopicRouteData, default_nums: int) -> list[tuple[str, int]]:
    """(brokerName, queueId) of every writable queue whose broker has a master (TopicPublishInfo)."""
    masters = {b.broker_name for b in route.broker_datas if b.master_addr}
    return [
        (q.broker_name, i)
        for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
        if q.perm & PERM_WRITE and q.broker_name in masters
        for i in range(q.write_queue_nums)
    ]


def run(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run one async admin call from synchronous code."""
    return trio.run(fn, *args)


class SyncAdminClient:
    """The :class:`AdminClient` API for blocking code: each call runs in its own ``trio.run``.

    ``SyncAdminClient(["127.0.0.1:9876"]).send_message("T", b"x")`` returns a
    :class:`SendResult`; errors are the same :class:`AdminError`.
    """

    def __init__(self, namesrv_addrs: list[str], *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.aio = AdminClient(namesrv_addrs, timeout=timeout)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.aio, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        @functools.wraps(attr)
        def blocking(*args: Any, **kwargs: Any) -> Any:
            return trio.run(functools.partial(attr, *args, **kwargs))

        return blocking
