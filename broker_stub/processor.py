"""Request handlers of the broker stub: request code -> function of the state.

No sockets here. The server's reactor hands in decoded requests with an
opaque connection id and writes back whatever :meth:`handle` returns
(encoded bytes, or None: oneway, or a pull held for later, whose answer goes
out through ``write_to``). This module serves admin tools; producers are
served by :mod:`broker_stub.sending`, consumers by
:mod:`broker_stub.consuming`; the topic table, the message store and the
fault switchboard are injected so each stays one small module. Numeric
header fields are checked against their Java types first
(:mod:`broker_stub.headers`).

Everything is answered synchronously except topic changes when topics are
kept on disk (answered once the topics file holding them is durable), and
requests a fault delays (send latency, hang): :attr:`async_codes` reports
those codes and the reactor routes them through :meth:`handle_async`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable

import trio

from broker_stub.admin import BrokerAdmin
from broker_stub.broker_config_admin import BrokerConfigAdmin
from broker_stub.common import Reject, ext_bool, ext_int
from broker_stub.config import BrokerConfig
from broker_stub.consuming import Consuming
from broker_stub.faults import FAULT_CODE, FaultError, Faults
from broker_stub.pop import PopService
from broker_stub.headers import NUMERIC_FIELDS, check_fields
from broker_stub.request_classes import REQUEST_CLASSES
from broker_stub.runtime import DayTotals, Rates, runtime_table
from broker_stub.sending import SEND_CODES, Sender, check_topic_name, send_ok_frame
from broker_stub.store import MessageStore
from broker_stub.subgroups import SubscriptionGroups
from broker_stub.topics import MAX_QUEUE_NUMS, TopicTable
from remoting.bodies import TopicConfig, encode_kv_table
from remoting.clip import clip
from remoting.codec import encode
from remoting.codes import DEFAULT_TOPIC, PERM_READ, PERM_WRITE, RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.names import PathOutsideError
from server_runtime.ratelog import RateLimitedLog

log = logging.getLogger("broker_stub")

__all__ = ["BrokerProcessor", "send_ok_frame"]
#: Requests that change the topic table: answered only once the change is on disk (when kept there).
TOPIC_CHANGE_CODES = frozenset({RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_BROKER})


class _AsyncCodes:
    """The codes that must await while a delaying fault is on (the reactor asks per request;
    otherwise :attr:`BrokerProcessor.async_codes` is a frozenset, a C-level check)."""

    def __init__(self, faults: Faults, durable_codes: frozenset[int]) -> None:
        self.faults = faults
        self.durable_codes = durable_codes

    def __contains__(self, code: object) -> bool:
        if self.faults.hung:
            return code != FAULT_CODE
        return (bool(self.faults.send_latency_ms) and code in SEND_CODES) or code in self.durable_codes


class BrokerProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicTable,
        store: MessageStore,
        faults: Faults,
        *,
        broker_addr: str,
        peer_of: Callable[[Hashable], str | None] = lambda conn: None,
        kick: Callable[[], None] = lambda: None,
        registration_info: Callable[[], dict[str, str]] = dict,
        write_to: Callable[[Hashable, bytes], bool] = lambda conn, data: False,
        clock: Callable[[], float] = time.monotonic,
        topics_durable: Callable[[], Awaitable[None]] | None = None,
        subgroups: SubscriptionGroups | None = None,
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        self.faults = faults
        self.broker_addr = broker_addr
        self.peer_of = peer_of
        self.kick = kick
        self.registration_info = registration_info
        self.boot_ms = int(time.time() * 1000)
        self.rates = Rates()
        self.days = DayTotals()
        self.clock = clock
        self.warn = RateLimitedLog(log)  # flushed by tick()
        self.topics_durable = topics_durable
        self._durable_codes = TOPIC_CHANGE_CODES if topics_durable is not None else frozenset()
        self.async_codes: frozenset[int] | _AsyncCodes = self._durable_codes
        self.sending = Sender(config, topics, store, faults, broker_addr=broker_addr, peer_of=peer_of)
        self.send_message = self.sending.send_message
        self.put_message = self.sending.put_message
        self.consuming = Consuming(
            config, topics, store, broker_addr=broker_addr, put_message=self.put_message, write_to=write_to, clock=clock
        )
        self.sending.consuming = self.consuming
        self.pop = PopService(config, topics, store, self.consuming, subgroups or SubscriptionGroups(),
                              write_to=write_to, clock=clock)
        self.consuming.pops_held = lambda: self.pop.hold.count
        self.consuming.on_arrival = self.pop.arrived
        self.admin = BrokerAdmin(config, topics, store, self.consuming, self.pop.subgroups,
                                 peer_of=peer_of, write_to=write_to, clock=clock)
        self.sending.on_put = self.admin.stored
        self.broker_config = BrokerConfigAdmin(config, topics, kick=kick)
        self._handlers: dict[int, Callable[[RemotingCommand, Hashable], RemotingCommand | bytes | None]] = {
            RequestCode.SEND_MESSAGE: self.send_message,
            RequestCode.SEND_MESSAGE_V2: self.send_message,
            RequestCode.SEND_BATCH_MESSAGE: self.send_message,
            **self.consuming.handlers(),
            **self.pop.handlers(),
            **self.admin.handlers(),  # after consuming's: it wraps HEART_BEAT
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topic_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info,
            RequestCode.GET_MAX_OFFSET: self.max_offset,
            RequestCode.GET_MIN_OFFSET: self.min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.earliest_store_time,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message,
            **self.broker_config.handlers(),
            FAULT_CODE: self.fault,
        }

        _check_classified(self._handlers)

    def add_handler(self, code: int, handler: Callable[[RemotingCommand, Hashable], RemotingCommand | bytes | None]) -> None:
        """Serve one more request code (replication, offsets sync: see broker_stub.ha)."""
        _check_classified([code])
        self._handlers[code] = handler

    # ------------------------------------------------------------------
    # dispatch

    def handle(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        """The encoded answer to ``req`` (None for a oneway request or a held pull)."""
        handler = self._handlers.get(req.code)
        try:
            if handler is None:
                resp = response_to(req, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {req.code} not supported")
            else:
                numeric = NUMERIC_FIELDS.get(req.code)
                if numeric is not None:
                    check_fields(req, numeric)
                resp = handler(req, conn)
        except Reject as rej:
            if req.code in SEND_CODES:
                self.sending.refused(rej.code)
            resp = response_to(req, rej.code, rej.remark)
        except Exception as exc:  # a handler bug must not take the connection down
            what = f"{type(exc).__name__}: {clip(exc)}"
            self.warn.warning("failed", "{count} more requests failed in their handlers in the last {seconds} s",
                              "request code %s failed: %s", req.code, what)
            log.debug("request code %s failed", req.code, exc_info=exc)  # the traceback, when debugging
            resp = response_to(req, ResponseCode.SYSTEM_ERROR, what)
        if resp is None or req.flag & 2:  # held, or oneway
            return None
        return resp if type(resp) is bytes else encode(resp)  # type: ignore[arg-type]

    async def handle_async(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        """Same as :meth:`handle`, after the delay the active faults ask for; a topic change
        is answered once the topics file holding it is durable."""
        await self.faults.wait_resumed()
        if req.code in SEND_CODES and self.faults.send_latency_ms:
            await trio.sleep(self.faults.send_latency_ms / 1000.0)
        version = self.topics.data_version  # replaced by every change
        answer = self.handle(req, conn)
        durable = self.topics_durable
        if durable is not None and req.code in self._durable_codes and self.topics.data_version is not version:
            try:
                await durable()
            except OSError as exc:
                remark = f"the topic change is not on disk: {exc.strerror or exc}"
                return None if req.flag & 2 else encode(response_to(req, ResponseCode.SYSTEM_ERROR, remark))
        return answer

    def connection_closed(self, conn: Hashable) -> None:
        self.sending.connection_closed(conn)
        self.consuming.connection_closed(conn)
        self.pop.connection_closed(conn)

    def tick(self) -> None:
        """Once a second: sample the totals for the runtime-info rates and day counters."""
        store = self.store
        self.rates.sample(self.clock(), store.put_total, store.get_total)
        self.days.update(store.put_total, store.get_total)
        self.admin.tick()
        self.warn.flush()

    def timers(self) -> None:
        """Often (every few ms while anything waits): held pulls that timed out, retries that are due."""
        if self.faults.hung:
            return
        self.consuming.expire_held()
        self.consuming.delays.run_due()
        self.pop.timers()
        timers = self.sending.timers
        due = timers.next_due()
        if due is not None and due <= self.pop.now_ms():
            timers.run_due(self.pop.now_ms())

    # ------------------------------------------------------------------
    # admin

    def update_and_create_topic(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        topic = req.ext("topic") or ""
        check_topic_name(topic)
        if topic == DEFAULT_TOPIC and self.topics.get(DEFAULT_TOPIC) is not None:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with AUTO_CREATE_TOPIC_KEY_TOPIC.")
        read, write = ext_int(req, "readQueueNums", 16), ext_int(req, "writeQueueNums", 16)
        perm = ext_int(req, "perm", PERM_READ | PERM_WRITE)
        if not (1 <= read <= MAX_QUEUE_NUMS and 1 <= write <= MAX_QUEUE_NUMS and 0 <= perm <= 15):
            raise Reject(ResponseCode.SYSTEM_ERROR, f"invalid queue numbers or perm: read={read} write={write} perm={perm}")
        tc = TopicConfig(
            topic,
            read,
            write,
            perm,
            topic_filter_type=req.ext("topicFilterType") or "SINGLE_TAG",
            topic_sys_flag=ext_int(req, "topicSysFlag", 0),
            order=ext_bool(req, "order"),
            attributes=_attributes(req.ext("attributes")),
        )
        try:
            self.topics.put(tc)
        except ValueError as exc:
            raise Reject(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        log.info("topic %s created/updated: read=%d write=%d perm=%d", topic, read, write, perm)
        return response_to(req, ResponseCode.SUCCESS)

    def delete_topic(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        topic = req.ext("topic") or ""
        check_topic_name(topic)  # 4.9.7 validates here, 5.3.3 only refuses a blank one: a name may be a path
        try:
            self.store.check_topic_path(topic)
        except PathOutsideError as exc:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"topic[{topic}] not deleted: {exc}") from None
        if self.topics.delete(topic):
            self.store.delete_topic(topic)
            offsets = self.consuming.offsets
            for key in [k for k in offsets if k[1] == topic]:
                del offsets[key]
            self.admin.topic_deleted(topic)
            self.pop.topic_deleted(topic)
            log.info("topic %s deleted", topic)
        return response_to(req, ResponseCode.SUCCESS)

    def all_topic_config(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        return response_to(req, ResponseCode.SUCCESS, body=self.topics.wrapper_body())

    def max_offset(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        offset = self.store.max_offset(req.ext("topic") or "", ext_int(req, "queueId", 0))
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def min_offset(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        offset = self.store.min_offset(req.ext("topic") or "", ext_int(req, "queueId", 0))
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def search_offset(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """SEARCH_OFFSET_BY_TIMESTAMP: ``boundaryType`` LOWER (default) or UPPER (5.x)."""
        upper = (req.ext("boundaryType") or "").strip().upper() == "UPPER"
        offset = self.store.offset_by_time(
            req.ext("topic") or "", ext_int(req, "queueId", 0), ext_int(req, "timestamp", 0), upper=upper
        )
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def earliest_store_time(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        stamp = self.store.earliest_timestamp(req.ext("topic") or "", ext_int(req, "queueId", 0))
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"timestamp": stamp})

    def view_message(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """VIEW_MESSAGE_BY_ID: the stored record at a commit-log offset (mqadmin queryMsgById)."""
        phys = ext_int(req, "offset", -1)
        record = self.store.find_by_phys(phys)
        if record is None:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {phys}")
        return response_to(req, ResponseCode.SUCCESS, body=record)

    def runtime_info(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        return response_to(req, ResponseCode.SUCCESS, body=encode_kv_table(self.runtime_table()))

    def runtime_table(self) -> dict[str, str]:
        """Java 5.3.3's runtime keys (see :mod:`broker_stub.runtime` for the few of ours)."""
        store = self.store
        return runtime_table(
            boot_ms=self.boot_ms,
            now_ms=int(time.time() * 1000),
            rates=self.rates,
            days=self.days,
            put_total=store.put_total,
            get_total=store.get_total,
            earliest_ms=store.earliest_timestamp(),
            commit_offset=store.commit_offset,
            is_master=self.config.is_master,
            held_pulls=self.consuming.hold.count,
            store_root=self.config.storePathRootDir or ".",
            minute_puts=self.admin.stats.minute_puts(int(self.clock() * 1000)),
            master_addr=self.registration_info().get("masterAddr"),
            vip_channel=self.config.vipChannelEnabled,
        )

    def fault(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        try:
            self.faults.apply(req.ext("action"), dict(req.ext_fields or {}))
        except FaultError as exc:
            raise Reject(ResponseCode.INVALID_PARAMETER, str(exc)) from None
        log.warning("fault switchboard: %s", self.faults.state())
        delaying = self.faults.hung or self.faults.send_latency_ms
        self.async_codes = _AsyncCodes(self.faults, self._durable_codes) if delaying else self._durable_codes
        self.kick()  # a healed partition registers at once
        return response_to(req, ResponseCode.SUCCESS, body=self.faults.state_body())


def _check_classified(codes: Iterable[int]) -> None:
    """Every code served has an access class (broker_stub.request_classes): none is served unchecked."""
    unclassified = sorted(set(codes) - REQUEST_CLASSES.keys())
    if unclassified:
        raise RuntimeError(f"request codes without an access class: {unclassified}")


def _attributes(text: str | None) -> dict[str, str]:
    """5.x ``attributes`` header: ``+key=value,+key2=value2`` (a ``-key`` removes; ignored here)."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if item.startswith("+") and "=" in item:
            key, _, value = item[1:].partition("=")
            out[key] = value
    return out
