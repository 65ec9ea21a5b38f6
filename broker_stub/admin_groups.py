"""Consumer-group admin requests: subscription groups and offset resets.

UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG
(201), DELETE_SUBSCRIPTIONGROUP (207) over :mod:`broker_stub.subgroups`,
and INVOKE_BROKER_TO_RESET_OFFSET (222, ``resetOffsetByTime``).

The reset does what a 5.3.3 broker does by default (server-side reset:
the group's committed offsets on this broker move to the first message
stored at or after the timestamp, or to the end for a negative one; one
queue with ``queueId``, optionally to an explicit ``offset``) and what a
4.9.x broker does (RESET_CONSUMER_CLIENT_OFFSET, 220, oneway, to every
online consumer of the group with the new offset table, so running
clients move at once), then answers the offset table. ``isForce=false``
only moves offsets backwards, as 4.9.x's reset did.

A consumer's first heartbeat creates its subscription group, as Java's
``autoCreateSubscriptionGroup`` (on by default) does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable

from broker_stub.common import Reject, ext_bool, ext_int
from broker_stub.config import BrokerConfig
from broker_stub.consuming import Consuming
from broker_stub.stats import BrokerStats
from broker_stub.store import MessageStore
from broker_stub.subgroups import SubscriptionGroupError, SubscriptionGroups, group_body
from broker_stub.topics import TopicTable
from remoting.admin_bodies import encode_reset_offsets, subscription_group_config
from remoting.codec import encode
from remoting.codes import LanguageCode, RequestCode, ResponseCode
from remoting.command import RemotingCommand, request, response_to
from remoting.fastjson import SMALL_BODY_ITEMS
from remoting.mqjson import SERVER_NORMALIZE_MAX_BYTES, MessageQueue, MqJsonError, dumps, loads
from remoting.names import group_problem

log = logging.getLogger("broker_stub")

Handler = Callable[[RemotingCommand, Hashable], RemotingCommand | None]


class GroupAdmin:
    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicTable,
        store: MessageStore,
        consuming: Consuming,
        subgroups: SubscriptionGroups,
        *,
        stats: BrokerStats,
        write_to: Callable[[Hashable, bytes], bool],
    ) -> None:
        self.config = config
        self.topics = topics
        self.store = store
        self.consuming = consuming
        self.subgroups = subgroups
        self.stats = stats
        self.write_to = write_to

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.all_groups,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.get_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_group,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.HEART_BEAT: self.heart_beat,
        }

    # ------------------------------------------------------------------
    # subscription groups

    def heart_beat(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand | None:
        """The consumers' HEART_BEAT, then their groups are created if new (findSubscriptionGroupConfig)."""
        resp = self.consuming.heart_beat(req, conn)
        body = req.body
        if b"consumerDataSet" not in body or b'"consumerDataSet":[]' in body:
            return resp  # a producer's heartbeat (most of them): no body parsed twice
        client = self.consuming.clients.clients.get(_client_id(req))
        for group in sorted(client.consumer_groups) if client is not None else ():
            self.subgroups.auto_create(group)
        return resp

    def update_group(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        try:
            obj = _server_loads(req.body) if req.body else None
            name = obj.get("groupName") if isinstance(obj, dict) else None
            if isinstance(name, str) and group_problem(name) is not None:  # 5.3.3 takes any name; we refuse it
                raise Reject(ResponseCode.INVALID_PARAMETER, str(group_problem(name)))
            cfg = subscription_group_config(obj)
        except MqJsonError as exc:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"bad SubscriptionGroupConfig: {exc}") from None
        try:
            self.subgroups.update(cfg)
        except SubscriptionGroupError as exc:
            raise Reject(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        log.info("subscription group %s created/updated", cfg["groupName"])
        return response_to(req, ResponseCode.SUCCESS)

    def get_group(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """GET_SUBSCRIPTIONGROUP_CONFIG (352, the Proxy asks it before each POP): the group's config, created
        on first sight as Java's findSubscriptionGroupConfig does; SUBSCRIPTION_GROUP_NOT_EXIST for an illegal
        name or a full table."""
        group = req.ext("group") or ""
        cfg = self.subgroups.find(group)
        if cfg is None:
            raise Reject(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        return response_to(req, ResponseCode.SUCCESS, body=group_body(cfg))

    def all_groups(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        return response_to(req, ResponseCode.SUCCESS, body=self.subgroups.encode())

    def delete_group(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        group = req.ext("groupName") or ""
        problem = group_problem(group)
        if problem is not None:
            raise Reject(ResponseCode.INVALID_PARAMETER, problem)
        try:
            deleted = self.subgroups.delete(group)
        except SubscriptionGroupError as exc:
            raise Reject(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        if not deleted:
            log.warning("delete subscription group failed, subscription groupName: %s not exist", group)
        if ext_bool(req, "cleanOffset"):
            offsets = self.consuming.offsets
            for key in [k for k in offsets if k[0] == group]:
                del offsets[key]
        self.stats.group_deleted(group)
        return response_to(req, ResponseCode.SUCCESS)

    # ------------------------------------------------------------------
    # offset reset

    def reset_offset(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        topic, group = req.ext("topic") or "", req.ext("group") or ""
        timestamp = ext_int(req, "timestamp", 0)
        force = (req.ext("isForce") or "true").strip().lower() != "false"
        queue_id = ext_int(req, "queueId", -1)
        explicit = ext_int(req, "offset", -1)
        if not self.config.is_master:
            raise Reject(ResponseCode.SYSTEM_ERROR, "Can not reset offset in slave broker")
        tc = self.topics.get(topic)
        if tc is None:
            raise Reject(ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} does not exist")
        if group not in self.subgroups and not self.consuming.clients.has_group(group):
            raise Reject(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} does not exist")
        targets: dict[int, int] = {}
        if queue_id >= 0:
            if explicit >= 0:
                lo, hi = self.store.min_offset(topic, queue_id), self.store.max_offset(topic, queue_id)
                if explicit < lo or explicit > hi + 1:
                    raise Reject(ResponseCode.SYSTEM_ERROR,
                                 f"Target offset {explicit} not in consume queue range [{lo}-{hi}]")
                targets[queue_id] = explicit
            else:
                targets[queue_id] = self._offset_at(topic, queue_id, timestamp)
        else:
            for i in range(tc.read_queue_nums):
                targets[i] = self._offset_at(topic, i, timestamp)
        if not targets:
            raise Reject(ResponseCode.SYSTEM_ERROR, "No queues to reset.")
        offsets = self.consuming.offsets
        table: dict[MessageQueue, int] = {}
        for i, target in targets.items():
            current = offsets.get((group, topic, i))
            if not force and current is not None and target > current:
                target = current  # only backwards without force (Broker2Client.resetOffset)
            self.consuming._set_offset(group, topic, i, target)
            table[MessageQueue(topic, self.config.brokerName, i)] = target
        notified = self._notify_clients(topic, group, timestamp, force, table, c_form=req.language == LanguageCode.CPP)
        log.info("[reset-offset] topic=%s group=%s timestamp=%d force=%s queues=%d clients=%d",
                 topic, group, timestamp, force, len(table), notified)
        return response_to(req, ResponseCode.SUCCESS, body=encode_reset_offsets(table))

    def _offset_at(self, topic: str, queue_id: int, timestamp: int) -> int:
        """searchOffsetByTimestamp: the queue's end for a negative time, else the first offset stored at or after it."""
        if timestamp < 0:
            return self.store.max_offset(topic, queue_id)
        return max(self.store.offset_by_time(topic, queue_id, timestamp), 0)

    def _notify_clients(self, topic: str, group: str, timestamp: int, force: bool, table: dict[MessageQueue, int],
                        *, c_form: bool) -> int:
        """RESET_CONSUMER_CLIENT_OFFSET (oneway) to each online consumer of ``group``; returns how many."""
        if c_form:  # ResetOffsetBodyForC: a list, asked for by a C++ admin client
            body = dumps({"offsetTable": [{"brokerName": mq.broker_name, "offset": off, "queueId": mq.queue_id,
                                           "topic": mq.topic} for mq, off in table.items()]})
        else:
            body = encode_reset_offsets(table)
        frame = encode(request(
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
            {"topic": topic, "group": group, "timestamp": timestamp, "isForce": force},
            body, oneway=True,
        ))
        sent = 0
        for conn in self.consuming.clients.connections_of(group):
            sent += bool(self.write_to(conn, frame))
        return sent


def _server_loads(body: bytes) -> object:
    """A body a peer sent, parsed within the bounds of a small body (no stall on a hostile one)."""
    return loads(body, max_items=SMALL_BODY_ITEMS, max_normalize_bytes=SERVER_NORMALIZE_MAX_BYTES)


def _client_id(req: RemotingCommand) -> str:
    """The clientID of a heartbeat body ("" when it has none: the heartbeat itself refuses that)."""
    try:
        data = _server_loads(req.body) if req.body else {}
    except MqJsonError:
        return ""
    return str(data.get("clientID") or "") if isinstance(data, dict) else ""
