"""Request handlers of the NameServer: request code -> function of the state.

No sockets here. The processor owns the route table, the KV config and the
configuration; the server hands it decoded requests (with an opaque
connection token) and writes back whatever it returns. Persistence is
injected as an async callable, so an acknowledged write is on disk
before its response exists. Remarks and codes follow Java 5.3.3. The KV and
config handlers live in :mod:`namesrv.kv_requests` and
:mod:`namesrv.config_requests`, broker registration (its bounds and its
slices under the table lock) in :mod:`namesrv.register_requests`; header
fields are read (and range-checked as Java's types) by :mod:`namesrv.headers`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import trio

from namesrv import liveinfo, provisional
from namesrv.config import NamesrvConfig
from namesrv.config_policy import RuntimeState, observed_state
from namesrv.config_requests import ConfigRequests
from namesrv.counters import NamesrvCounters
from namesrv.headers import BROKER_HEARTBEAT_NUMBERS, BROKER_ID, BadHeader, check_numbers, required
from namesrv.kv_requests import ANSWER_HEADROOM, KVRequests
from namesrv.kvconfig import KVConfig
from namesrv.register_requests import RegisterRequests
from namesrv.request_classes import REQUEST_CLASSES
from namesrv.route_model import TopicTableFull
from namesrv.route_state import Restored
from namesrv.routes import UNIT_TOPIC_FLAGS, RouteOptions, RouteTable
from remoting import fastjson
from remoting.bodies import BodyError, DataVersion, TopicRouteData, encode_topic_list
from remoting.clip import clip
from remoting.codec import encode, encode_success_json
from remoting.codes import NAMESPACE_ORDER_TOPIC_CONFIG, RequestCode, ResponseCode, Version
from remoting.command import RemotingCommand, response_to
from server_runtime.ratelog import RateLimitedLog

log = logging.getLogger("namesrv")

FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
_STANDARD_JSON_SINCE = int(Version.V4_9_4)  # a plain int: compared on every route query
Persist = Callable[[str, bytes], Awaitable[None]]
Handler = Callable[[RemotingCommand, Hashable], RemotingCommand]
#: Requests that change the table, besides REGISTER_BROKER: answered by the reactor's awaiting path,
#: under the table lock.
TABLE_WRITES = (
    RequestCode.UNREGISTER_BROKER,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER,
    RequestCode.ADD_WRITE_PERM_OF_BROKER,
    RequestCode.DELETE_TOPIC_IN_NAMESRV,
    RequestCode.REGISTER_TOPIC_IN_NAMESRV,
)


class NameServerProcessor:
    def __init__(
        self,
        config: NamesrvConfig,
        kv: KVConfig,
        *,
        clock: Callable[[], float],
        persist: Persist,
        connection_count: Callable[[], int] = lambda: 0,
    ) -> None:
        self.config = config
        self.kv = kv
        self.clock = clock  # seconds, monotonic
        self.persist = persist
        self.connection_count = connection_count
        self.started_at = clock()
        self.warn = RateLimitedLog(log)  # flushed by the server's housekeeping
        self.counters = NamesrvCounters()  # registrations, removals and refusals, for the metrics
        self.table = RouteTable(RouteOptions())
        #: The table's encoded answers, asked directly on the route-query path (one method call).
        self.answers = self.table.answers
        #: Held by whatever changes the table's brokers or topics. A large
        #: registration works in slices and holds it throughout, so every
        #: later change (unregistration, connection close, expiry, admin
        #: request) waits and is applied after it, in arrival order; route
        #: queries never wait for it.
        self.table_lock = trio.Lock()
        self.restored: Restored | None = None  # what a warm restart put in the table (set by the server)
        #: Set by the server when it begins to stop: registrations in progress are abandoned and answered.
        self.stopping = False
        self.kv_requests = KVRequests(config, kv, persist, self.counters)
        self.config_requests = ConfigRequests(
            config, persist, self.counters, sync_options=self.sync_options, runtime_state=self.runtime_state
        )
        self.registrations = RegisterRequests(
            config, self.table, self.table_lock, self.counters, self.warn,
            now_ms=self.now_ms, stopping=lambda: self.stopping, order_conf_body=self.kv_requests.order_conf_body,
        )
        self.sync_options()
        #: Request code -> its handler: answered at once, awaited (a write persisted first), or a
        #: change of the table (awaited under the table lock; the sync handler stays for direct callers).
        self._handlers = self._sync_handlers()
        self._async_handlers: dict[int, Callable[[RemotingCommand], Awaitable[RemotingCommand]]] = {
            RequestCode.PUT_KV_CONFIG: self.kv_requests.put_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.kv_requests.delete_kv_config,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.config_requests.update_config,
        }
        self._table_writers: dict[int, Callable[[RemotingCommand, Hashable], Awaitable[RemotingCommand]]] = {
            RequestCode.REGISTER_BROKER: self.registrations.register_broker_sliced,
            **{code: self._locked(self._handlers[code]) for code in TABLE_WRITES},
        }
        self.async_codes = frozenset(self._async_handlers) | frozenset(self._table_writers)
        unclassified = (set(self._handlers) | self.async_codes) - REQUEST_CLASSES.keys()
        if unclassified:  # every code served has an access class (namesrv.request_classes)
            raise RuntimeError(f"request codes without an access class: {sorted(unclassified)}")

    def _sync_handlers(self) -> dict[int, Callable[[RemotingCommand, Hashable], RemotingCommand | bytes | None]]:
        return {
            provisional.RESTORED_BROKERS_CODE: lambda req, conn: provisional.answer(
                req, self.table, self.restored, self.now_ms()),
            RequestCode.GET_KV_CONFIG: self.kv_requests.get_kv_config,
            RequestCode.REGISTER_BROKER: self.registrations.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.all_topics,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.REGISTER_TOPIC_IN_NAMESRV: self.register_topic,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.kv_requests.kv_list,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.system_topics,
            RequestCode.GET_UNIT_TOPIC_LIST: self.unit_topics,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.unit_topics,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.unit_topics,
            RequestCode.GET_NAMESRV_CONFIG: self.config_requests.get_config,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.GET_BROKER_MEMBER_GROUP: self.member_group,
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            liveinfo.LIVE_TABLE_CODE: lambda req, conn: liveinfo.answer(req, self.table, self.now_ms()),
        }

    def now_ms(self) -> float:
        return self.clock() * 1000.0

    def sync_options(self) -> None:
        """Push per-request config flags into the route table."""
        opts = self.table.options
        acting = self.config.supportActingMaster
        if opts.support_acting_master != acting:
            opts.support_acting_master = acting
            self.table.invalidate_all()
        opts.delete_topic_with_broker_registration = self.config.deleteTopicWithBrokerRegistration
        opts.default_timeout_ms = self.config.brokerChannelExpiredTime
        opts.max_topics = self.config.maxTopics
        # Routes that need neither a readiness wait nor an order conf come
        # straight from the table's cache.
        self._plain_routes = not (self.config.needWaitForService or self.config.orderMessageEnable)
        self.registrations.sync_limits()

    def runtime_state(self) -> RuntimeState:
        """What an update's in-use floors are checked against."""
        return observed_state(
            self.table.live, self.connection_count(), self.clock() - self.started_at, self.registrations.body_sizes()
        )

    def connection_closed(self, conn: Hashable) -> None:
        self.registrations.connection_closed(conn)

    # ------------------------------------------------------------------
    # dispatch

    def handle(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        """Answer a request that needs no I/O; None means "no response"."""
        handler = self._handlers.get(req.code)
        if handler is None:
            resp: RemotingCommand | bytes | None = response_to(
                req, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {req.code} not supported"
            )
        else:
            try:
                resp = handler(req, conn)
            except (BadHeader, BodyError) as exc:
                resp = response_to(req, ResponseCode.SYSTEM_ERROR, str(exc))
            except Exception as exc:  # a handler bug must not take the server down
                resp = response_to(req, ResponseCode.SYSTEM_ERROR, self._failed(req, exc))
        if resp is None or req.flag & 2:  # oneway: never answered
            return None
        return resp if type(resp) is bytes else encode(resp)

    async def handle_async(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        """Answer a request that awaits: a write persisted before its reply, or a table change under the table lock."""
        try:
            writer = self._table_writers.get(req.code)
            resp = await (writer(req, conn) if writer is not None else self._async_handlers[req.code](req))
        except (BadHeader, BodyError) as exc:
            resp = response_to(req, ResponseCode.SYSTEM_ERROR, str(exc))
        except Exception as exc:
            resp = response_to(req, ResponseCode.SYSTEM_ERROR, self._failed(req, exc))
        return None if req.is_oneway else encode(resp)

    def _failed(self, req: RemotingCommand, exc: Exception) -> str:
        """A handler bug: one short, rate-limited log line (the traceback at DEBUG), and the remark."""
        what = f"{type(exc).__name__}: {clip(exc)}"
        self.warn.warning("failed", "{count} more requests failed in their handlers in the last {seconds} s",
                          "request code %s failed: %s", req.code, what)
        log.debug("request code %s failed", req.code, exc_info=exc)
        return what

    # ------------------------------------------------------------------
    # brokers

    def _locked(self, handler: Handler) -> Callable[[RemotingCommand, Hashable], Awaitable[RemotingCommand]]:
        async def run(req: RemotingCommand, conn: Hashable) -> RemotingCommand:
            async with self.table_lock:
                return handler(req, conn)

        return run

    def unregister_broker(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        name, addr, cluster = required(req, "brokerName", "brokerAddr", "clusterName")
        check_numbers(req, BROKER_ID)
        removed = self.table.unregister_broker(cluster, addr, name)
        if removed is not None:
            self.counters.removed("unregistered")
            log.info("broker %s %s (%s) unregistered", name, addr, cluster)
        return response_to(req, ResponseCode.SUCCESS)

    def broker_heartbeat(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        _, addr, cluster = required(req, "brokerName", "brokerAddr", "clusterName")
        check_numbers(req, BROKER_HEARTBEAT_NUMBERS)
        self.table.heartbeat(cluster, addr, self.now_ms())
        return response_to(req, ResponseCode.SUCCESS)

    def query_data_version(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        _, addr, cluster = required(req, "brokerName", "brokerAddr", "clusterName")
        check_numbers(req, BROKER_ID)
        sent = DataVersion.from_obj(fastjson.loads_small(req.body)) if req.body else DataVersion()
        changed, stored = self.table.query_data_version(cluster, addr, sent, self.now_ms())
        if not changed and self.restored is not None and self.restored.is_provisional(self.table, (cluster, addr)):
            # A restored entry has no connection: "changed" makes the broker
            # register on its own one (cheap: the body digest is known).
            changed = True
        return response_to(
            req,
            ResponseCode.SUCCESS,
            ext_fields={"changed": changed},
            body=stored.encode() if stored is not None else b"",
        )

    def member_group(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        cluster, name = req.ext("clusterName"), req.ext("brokerName")
        group: dict[str, Any] = {"brokerAddrs": self.table.broker_member_group(name or "")}
        if name is not None:
            group["brokerName"] = name
        if cluster is not None:
            group["cluster"] = cluster
        return response_to(req, ResponseCode.SUCCESS, body=fastjson.dumps({"brokerMemberGroup": group}))

    def wipe_write_perm(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        (name,) = required(req, "brokerName")
        count = self.table.wipe_write_perm(name)
        log.info("wipe write perm of broker %s: %d topics", name, count)
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": count})

    def add_write_perm(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        (name,) = required(req, "brokerName")
        count = self.table.add_write_perm(name)
        log.info("add write perm of broker %s: %d topics", name, count)
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"addTopicCount": count})

    # ------------------------------------------------------------------
    # routes and topics

    def get_route(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand | bytes:
        """GET_ROUTEINFO_BY_TOPIC: the hot path, one cached body per topic."""
        ext = req.ext_fields or {}
        topic = ext.get("topic")
        standard = req.version >= _STANDARD_JSON_SINCE or ext.get("acceptStandardJsonOnly", "").lower() == "true"
        if self._plain_routes and "__ZONE_MODE" not in ext:
            body = self.answers.route_body(topic, standard) if topic is not None else None
        else:
            body = self._special_route(req, topic, standard)
        if body is None:
            return response_to(
                req,
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {topic}\nSee {FAQ_URL} for further details.",
            )
        if type(body) is not bytes:
            return body  # an error answer from _special_route
        if req.serialize_type == 0:
            return encode_success_json(req.opaque, body)
        return response_to(req, ResponseCode.SUCCESS, body=body)

    def _special_route(self, req: RemotingCommand, topic: str | None, standard: bool) -> bytes | RemotingCommand | None:
        """Routes that depend on more than the table: waits, order confs, zones."""
        config = self.config
        if config.needWaitForService and self.clock() - self.started_at < config.waitSecondsForService:
            return response_to(req, ResponseCode.SYSTEM_ERROR, "name server not ready")
        if topic is None:
            return None
        ext = req.ext_fields or {}
        order_conf = None
        if config.orderMessageEnable:
            order_conf = self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        zone = ext.get("__ZONE_NAME", "").strip() if ext.get("__ZONE_MODE", "").lower() == "true" else ""
        if zone:
            return self.answers.zone_route(topic, order_conf, zone)
        if order_conf is not None:
            return self.answers.encode_route(topic, standard, order_conf)
        return self.answers.route_body(topic, standard)

    def cluster_info(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        return response_to(req, ResponseCode.SUCCESS, body=self.answers.cluster_info_body())

    def all_topics(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        if not self.config.enableAllTopicList:
            return response_to(req, ResponseCode.SYSTEM_ERROR, "disable")
        return self._topic_list(req, self.table.all_topics())

    def topics_by_cluster(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        if not self.config.enableTopicList:
            return response_to(req, ResponseCode.SYSTEM_ERROR, "disable")
        return self._topic_list(req, self.table.topics_by_cluster(req.ext("cluster") or ""))

    def system_topics(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        topics, addr = self.table.system_topics()
        return self._topic_list(req, topics, addr)

    def _topic_list(self, req: RemotingCommand, topics: list[str], addr: str | None = None) -> RemotingCommand:
        """A TopicList answer, or SYSTEM_ERROR when it would not fit a frame.

        Java builds the list whatever its size, and a client reading a frame over its limit
        closes the connection; with 220,000 topics of 118 characters the list is 26 MB. A
        list that cannot fit is refused before it is built (its size is at least the names
        and their quotes and commas); one that might not is built and measured.
        """
        limit = self.config.frameMaxLength - ANSWER_HEADROOM
        least = sum(map(len, topics)) + 3 * len(topics)
        body = encode_topic_list(topics, addr) if least <= limit else None
        if body is None or len(body) > limit:
            self.counters.refused("topic_list_size")
            size = f"{len(body)} bytes" if body is not None else f"at least {least} bytes"
            return response_to(
                req,
                ResponseCode.SYSTEM_ERROR,
                f"the topic list ({len(topics)} topics, {size}) does not fit a frame of {self.config.frameMaxLength}"
                " bytes; ask per cluster (GET_TOPICS_BY_CLUSTER)",
            )
        return response_to(req, ResponseCode.SUCCESS, body=body)

    def unit_topics(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        if not self.config.enableTopicList:
            return response_to(req, ResponseCode.SYSTEM_ERROR, "disable")
        kind = {
            RequestCode.GET_UNIT_TOPIC_LIST: "unit",
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: "unit_sub",
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: "unit_sub_ununit",
        }[RequestCode(req.code)]
        want, exclude = UNIT_TOPIC_FLAGS[kind]
        return self._topic_list(req, self.table.unit_topics(want, exclude))

    def delete_topic(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        topic = req.ext("topic")
        if topic is not None:
            self.table.delete_topic(topic, req.ext("clusterName"))
            log.info("topic %s deleted (cluster %s)", topic, req.ext("clusterName") or "*")
        return response_to(req, ResponseCode.SUCCESS)

    def register_topic(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        topic = req.ext("topic")
        if topic is not None and req.body:
            route = TopicRouteData.from_obj(fastjson.loads_small(req.body))
            try:
                self.table.register_topic(
                    topic,
                    [
                        (q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
                        for q in route.queue_datas
                    ],
                )
            except TopicTableFull:
                self.counters.refused("max_topics")
                raise
        return response_to(req, ResponseCode.SUCCESS)
