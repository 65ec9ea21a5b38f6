"""The requests a Java 5.x push consumer sends to brokers, with Java's header names.

Shapes follow Apache RocketMQ 5.3.3's ``MQClientAPIImpl`` and the request
headers it fills (every value a string on the wire; ``bname`` is
``RpcRequestHeader.brokerName``). The producer's requests live in
:mod:`simclient.wire`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from remoting import fastjson
from remoting.codes import RequestCode
from remoting.command import RemotingCommand, request
from remoting.javahash import java_string_hash

PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
SUB_ALL = "*"


@dataclass(frozen=True, slots=True)
class Subscription:
    """``SubscriptionData`` of one topic: ``*`` or tags joined by ``||``."""

    topic: str
    expression: str = SUB_ALL
    version: int = 0  # subVersion: the creation time in ms, as Java sets it

    @property
    def tags(self) -> frozenset[str]:
        text = self.expression.strip()
        if not text or text == SUB_ALL:
            return frozenset()
        return frozenset(t.strip() for t in text.split("||") if t.strip())

    def to_json(self) -> dict[str, object]:
        tags = sorted(self.tags)
        return {
            "classFilterMode": False,
            "codeSet": [java_string_hash(t) for t in tags],
            "expressionType": "TAG",
            "subString": self.expression.strip() or SUB_ALL,
            "subVersion": self.version,
            "tagsSet": tags,
            "topic": self.topic,
        }


def subscription(topic: str, expression: str = SUB_ALL) -> Subscription:
    return Subscription(topic, expression.strip() or SUB_ALL, int(time.time() * 1000))


def consumer_heartbeat(
    client_id: str, group: str, subscriptions: Iterable[Subscription], *, consume_from_where: str
) -> RemotingCommand:
    """HEART_BEAT (34) of a push consumer (HeartbeatData with its ConsumerData and subscriptions)."""
    body = fastjson.dumps_fast(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "consumeFromWhere": consume_from_where,
                    "consumeType": "CONSUME_PASSIVELY",
                    "groupName": group,
                    "messageModel": "CLUSTERING",
                    "subscriptionDataSet": [s.to_json() for s in subscriptions],
                    "unitMode": False,
                }
            ],
            "heartbeatFingerprint": 0,
            "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}],
            "withoutSub": False,
        }
    )
    return request(RequestCode.HEART_BEAT, {}, body)


def unregister_consumer(client_id: str, group: str) -> RemotingCommand:
    """UNREGISTER_CLIENT (35) sent by ``shutdown()`` to every broker."""
    return request(RequestCode.UNREGISTER_CLIENT, {"clientID": client_id, "consumerGroup": group})


def consumer_list(group: str) -> RemotingCommand:
    """GET_CONSUMER_LIST_BY_GROUP (38)."""
    return request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})


def parse_consumer_list(body: bytes) -> list[str] | None:
    """``{"consumerIdList": [...]}``, or None when the body is not that."""
    try:
        doc = fastjson.loads(body) if body else None
    except ValueError:
        return None
    ids = doc.get("consumerIdList") if isinstance(doc, dict) else None
    if not isinstance(ids, list):
        return None
    return [str(i) for i in ids if isinstance(i, str)]


def pull_message(
    *,
    group: str,
    topic: str,
    broker_name: str,
    queue_id: int,
    offset: int,
    max_nums: int,
    sys_flag: int,
    commit_offset: int,
    suspend_ms: int,
    sub_version: int,
    subscription_expr: str | None = None,
    max_bytes: int = 0x7FFFFFFF,
) -> RemotingCommand:
    """PULL_MESSAGE (11) as ``PullAPIWrapper.pullKernelImpl`` fills PullMessageRequestHeader."""
    ext: dict[str, object] = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": queue_id,
        "queueOffset": offset,
        "maxMsgNums": max_nums,
        "sysFlag": sys_flag,
        "commitOffset": commit_offset,
        "suspendTimeoutMillis": suspend_ms,
        "subVersion": sub_version,
        "maxMsgBytes": max_bytes,
        "expressionType": "TAG",
        "bname": broker_name,
    }
    if subscription_expr is not None:
        ext["subscription"] = subscription_expr
    return request(RequestCode.PULL_MESSAGE, ext)


def query_consumer_offset(group: str, topic: str, broker_name: str, queue_id: int) -> RemotingCommand:
    """QUERY_CONSUMER_OFFSET (14)."""
    return request(
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": topic, "queueId": queue_id, "bname": broker_name},
    )


def update_consumer_offset(group: str, topic: str, broker_name: str, queue_id: int, offset: int) -> RemotingCommand:
    """UPDATE_CONSUMER_OFFSET (15); ``persistAll`` sends it oneway."""
    return request(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset, "bname": broker_name},
    )


def get_max_offset(topic: str, broker_name: str, queue_id: int) -> RemotingCommand:
    """GET_MAX_OFFSET (30): where CONSUME_FROM_LAST_OFFSET starts a group that has no offset."""
    return request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id, "bname": broker_name})


def search_offset(topic: str, broker_name: str, queue_id: int, timestamp_ms: int) -> RemotingCommand:
    """SEARCH_OFFSET_BY_TIMESTAMP (29): CONSUME_FROM_TIMESTAMP."""
    return request(
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        {"topic": topic, "queueId": queue_id, "timestamp": timestamp_ms, "bname": broker_name},
    )


def send_back(
    *, group: str, phys: int, delay_level: int, origin_msg_id: str, origin_topic: str, broker_name: str,
    max_reconsume_times: int = 16,
) -> RemotingCommand:
    """CONSUMER_SEND_MSG_BACK (36): a message whose consumption failed goes back for a later retry."""
    return request(
        RequestCode.CONSUMER_SEND_MSG_BACK,
        {
            "offset": phys,
            "group": group,
            "delayLevel": delay_level,
            "originMsgId": origin_msg_id,
            "originTopic": origin_topic,
            "unitMode": False,
            "maxReconsumeTimes": max_reconsume_times,
            "bname": broker_name,
        },
    )


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


__all__ = [
    "PULL_FLAG_COMMIT_OFFSET",
    "PULL_FLAG_SUBSCRIPTION",
    "PULL_FLAG_SUSPEND",
    "RETRY_GROUP_TOPIC_PREFIX",
    "Subscription",
    "consumer_heartbeat",
    "consumer_list",
    "get_max_offset",
    "java_string_hash",
    "parse_consumer_list",
    "pull_message",
    "query_consumer_offset",
    "retry_topic",
    "search_offset",
    "send_back",
    "subscription",
    "unregister_consumer",
    "update_consumer_offset",
]
