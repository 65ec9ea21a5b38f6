"""Bodies of the broker admin requests, in the JSON Java writes and reads.

One small class per Java body (TopicStatsTable, ConsumeStats,
BrokerStatsData, ConsumerConnection, ProducerConnection, ResetOffsetBody,
SubscriptionGroupConfig), each with ``encode`` (what a Java broker
answers, field for field in fastjson's alphabetical order) and ``decode``
(what mqadmin reads, tolerant of missing fields as fastjson is). Shared by
the broker stub and the admin client, so both sides agree on one shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from remoting.mqjson import MessageQueue, MqJsonError, dumps, loads, mq_table
from remoting.names import group_problem


def _obj(data: bytes | str, what: str) -> dict[str, Any]:
    obj = loads(data)
    if not isinstance(obj, dict):
        raise MqJsonError(f"{what} is not a JSON object")
    return obj


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        raise MqJsonError(f"{value!r} is not a number") from None


def _float(value: Any) -> float:
    try:
        return float(value) if value is not None else 0.0
    except (TypeError, ValueError):
        raise MqJsonError(f"{value!r} is not a number") from None


# ---------------------------------------------------------------------------
# GET_TOPIC_STATS_INFO (202)


@dataclass
class TopicOffset:
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0

    def to_java(self) -> dict[str, Any]:
        return {"lastUpdateTimestamp": self.last_update_timestamp, "maxOffset": self.max_offset,
                "minOffset": self.min_offset}


@dataclass
class TopicStatsTable:
    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)
    topic_put_tps: float = 0.0

    def encode(self) -> bytes:
        return dumps({"offsetTable": {mq: o.to_java() for mq, o in self.offset_table.items()},
                      "topicPutTps": float(self.topic_put_tps)})

    @classmethod
    def decode(cls, data: bytes) -> TopicStatsTable:
        obj = _obj(data, "TopicStatsTable")
        table = {
            mq: TopicOffset(_int(v.get("minOffset")), _int(v.get("maxOffset")), _int(v.get("lastUpdateTimestamp")))
            for mq, v in mq_table(obj.get("offsetTable")).items()
        }
        return cls(table, _float(obj.get("topicPutTps")))


# ---------------------------------------------------------------------------
# GET_CONSUME_STATS (208)


@dataclass
class OffsetWrapper:
    broker_offset: int = 0
    consumer_offset: int = 0
    pull_offset: int = 0
    last_timestamp: int = 0

    def to_java(self) -> dict[str, Any]:
        return {"brokerOffset": self.broker_offset, "consumerOffset": self.consumer_offset,
                "lastTimestamp": self.last_timestamp, "pullOffset": self.pull_offset}


@dataclass
class ConsumeStats:
    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def total_diff(self) -> int:
        """ConsumeStats.computeTotalDiff: messages not yet consumed, summed over the queues."""
        return sum(o.broker_offset - o.consumer_offset for o in self.offset_table.values())

    def encode(self) -> bytes:
        return dumps({"consumeTps": float(self.consume_tps),
                      "offsetTable": {mq: o.to_java() for mq, o in self.offset_table.items()}})

    @classmethod
    def decode(cls, data: bytes) -> ConsumeStats:
        obj = _obj(data, "ConsumeStats")
        table = {
            mq: OffsetWrapper(_int(v.get("brokerOffset")), _int(v.get("consumerOffset")), _int(v.get("pullOffset")),
                              _int(v.get("lastTimestamp")))
            for mq, v in mq_table(obj.get("offsetTable")).items()
        }
        return cls(table, _float(obj.get("consumeTps")))


# ---------------------------------------------------------------------------
# INVOKE_BROKER_TO_RESET_OFFSET (222) answer, RESET_CONSUMER_CLIENT_OFFSET (220) body


def encode_reset_offsets(table: dict[MessageQueue, int]) -> bytes:
    return dumps({"offsetTable": dict(table)})


def decode_reset_offsets(data: bytes) -> dict[MessageQueue, int]:
    return {mq: _int(v) for mq, v in mq_table(_obj(data, "ResetOffsetBody").get("offsetTable")).items()}


# ---------------------------------------------------------------------------
# VIEW_BROKER_STATS_DATA (315)


@dataclass(frozen=True)
class StatsWindow:
    """BrokerStatsItem: what one window (minute, hour, day) saw."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_java(self) -> dict[str, Any]:
        return {"avgpt": float(self.avgpt), "sum": self.sum, "tps": float(self.tps)}

    @classmethod
    def from_java(cls, obj: Any) -> StatsWindow:
        if not isinstance(obj, dict):
            return cls()
        return cls(_int(obj.get("sum")), _float(obj.get("tps")), _float(obj.get("avgpt")))


@dataclass(frozen=True)
class BrokerStatsData:
    minute: StatsWindow = StatsWindow()
    hour: StatsWindow = StatsWindow()
    day: StatsWindow = StatsWindow()

    def encode(self) -> bytes:
        return dumps({"statsDay": self.day.to_java(), "statsHour": self.hour.to_java(),
                      "statsMinute": self.minute.to_java()})

    @classmethod
    def decode(cls, data: bytes) -> BrokerStatsData:
        obj = _obj(data, "BrokerStatsData")
        return cls(StatsWindow.from_java(obj.get("statsMinute")), StatsWindow.from_java(obj.get("statsHour")),
                   StatsWindow.from_java(obj.get("statsDay")))

    def sum_24h(self) -> int:
        """StatsAllSubCommand.compute24HourSum: the day's sum, else the hour's, else the minute's."""
        return self.day.sum or self.hour.sum or self.minute.sum


# ---------------------------------------------------------------------------
# GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204)


@dataclass(frozen=True)
class Connection:
    client_id: str
    client_addr: str
    language: str
    version: int

    def to_java(self) -> dict[str, Any]:
        return {"clientAddr": self.client_addr, "clientId": self.client_id, "language": self.language,
                "version": self.version}

    @classmethod
    def from_java(cls, obj: Any) -> Connection:
        if not isinstance(obj, dict):
            raise MqJsonError("a connection is not a JSON object")
        return cls(str(obj.get("clientId") or ""), str(obj.get("clientAddr") or ""), str(obj.get("language") or ""),
                   _int(obj.get("version")))


@dataclass
class ConsumerConnection:
    connections: list[Connection] = field(default_factory=list)
    #: topic -> SubscriptionData as Java writes it (classFilterMode, codeSet, expressionType, subString, ...)
    subscriptions: dict[str, dict[str, Any]] = field(default_factory=dict)
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None

    def encode(self) -> bytes:
        return dumps({
            "connectionSet": [c.to_java() for c in self.connections],
            "consumeFromWhere": self.consume_from_where,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "subscriptionTable": self.subscriptions,
        })

    @classmethod
    def decode(cls, data: bytes) -> ConsumerConnection:
        obj = _obj(data, "ConsumerConnection")
        subs = obj.get("subscriptionTable") or {}
        if not isinstance(subs, dict):
            raise MqJsonError("subscriptionTable is not an object")
        return cls([Connection.from_java(c) for c in obj.get("connectionSet") or []],
                   {str(k): v for k, v in subs.items() if isinstance(v, dict)},
                   obj.get("consumeType"), obj.get("messageModel"), obj.get("consumeFromWhere"))

    def min_version(self) -> int:
        """ConsumerConnection.computeMinVersion (Integer.MAX_VALUE when nobody is connected)."""
        return min((c.version for c in self.connections), default=2**31 - 1)


def encode_producer_connection(connections: list[Connection]) -> bytes:
    return dumps({"connectionSet": [c.to_java() for c in connections]})


def decode_producer_connection(data: bytes) -> list[Connection]:
    return [Connection.from_java(c) for c in _obj(data, "ProducerConnection").get("connectionSet") or []]


# ---------------------------------------------------------------------------
# SubscriptionGroupConfig (200 body, 201 answer)

#: Java's fields with their defaults, in fastjson's (alphabetical) order; subscriptionDataSet is null.
SUBSCRIPTION_GROUP_DEFAULTS: dict[str, Any] = {
    "attributes": {},
    "brokerId": 0,
    "consumeBroadcastEnable": True,
    "consumeEnable": True,
    "consumeFromMinEnable": True,
    "consumeMessageOrderly": False,
    "consumeTimeoutMinute": 15,
    "groupName": None,
    "groupRetryPolicy": {"type": "CUSTOMIZED"},
    "groupSysFlag": 0,
    "notifyConsumerIdsChangedEnable": True,
    "retryMaxTimes": 16,
    "retryQueueNums": 1,
    "subscriptionDataSet": None,
    "whichBrokerWhenConsumeSlowly": 1,
}
_BOOL_FIELDS = {k for k, v in SUBSCRIPTION_GROUP_DEFAULTS.items() if isinstance(v, bool)}
_INT_FIELDS = {k for k, v in SUBSCRIPTION_GROUP_DEFAULTS.items() if isinstance(v, int) and not isinstance(v, bool)}
MAX_ATTRIBUTES = 64
MAX_TEXT = 256
MAX_RETRY_STEPS = 64
MAX_SUBSCRIPTION_DATA = 64
RETRY_POLICY_TYPES = ("CUSTOMIZED", "EXPONENTIAL")


def check_group_name(name: Any) -> str:
    """A consumer group name as Java's validators accept it; MqJsonError names the problem."""
    if not isinstance(name, str) or not name:
        raise MqJsonError("groupName is missing")
    problem = group_problem(name)
    if problem is not None:
        raise MqJsonError(problem)
    return name


def _java_bool(value: Any, key: str) -> bool:
    """fastjson's lenient boolean: true/false, "true"/"false", 1/0."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise MqJsonError(f"{key}={value!r} is not a boolean")


def _java_long(value: Any, key: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise MqJsonError(f"{key}={value!r} is not an integer") from None
    if isinstance(value, float) and value != number or not -(2**63) <= number < 2**63:
        raise MqJsonError(f"{key}={value!r} is not a Java long")
    return number


def _retry_policy(value: Any) -> dict[str, Any]:
    """GroupRetryPolicy, kept as given (bounded): its type and the chosen policy's parameters."""
    if not isinstance(value, dict):
        raise MqJsonError("groupRetryPolicy is not a JSON object")
    kind = str(value.get("type") or "CUSTOMIZED")
    if kind not in RETRY_POLICY_TYPES:
        raise MqJsonError(f"groupRetryPolicy type {kind[:40]!r} is not CUSTOMIZED or EXPONENTIAL")
    out: dict[str, Any] = {}
    custom = value.get("customizedRetryPolicy")
    if isinstance(custom, dict):
        steps = custom.get("next") or []
        if not isinstance(steps, list) or len(steps) > MAX_RETRY_STEPS:
            raise MqJsonError(f"customizedRetryPolicy.next must be a list of at most {MAX_RETRY_STEPS} numbers")
        out["customizedRetryPolicy"] = {"next": [_java_long(s, "next") for s in steps]}
    expo = value.get("exponentialRetryPolicy")
    if isinstance(expo, dict):
        out["exponentialRetryPolicy"] = {
            k: _java_long(expo[k], k) for k in ("initial", "max", "multiplier") if expo.get(k) is not None
        }
    out["type"] = kind
    return out


def subscription_group_config(obj: Any) -> dict[str, Any]:
    """A SubscriptionGroupConfig from JSON: Java's defaults for missing fields, unknown fields dropped,
    every value type-checked and bounded (MqJsonError names the first bad field)."""
    if not isinstance(obj, dict):
        raise MqJsonError("SubscriptionGroupConfig is not a JSON object")
    cfg = dict(SUBSCRIPTION_GROUP_DEFAULTS)
    cfg["groupName"] = check_group_name(obj.get("groupName"))
    for key in _BOOL_FIELDS:
        if obj.get(key) is not None:
            cfg[key] = _java_bool(obj[key], key)
    for key in _INT_FIELDS:
        if obj.get(key) is not None:
            cfg[key] = _java_long(obj[key], key)
    if not 0 <= cfg["retryQueueNums"] <= 1024:
        raise MqJsonError(f"retryQueueNums={cfg['retryQueueNums']} is not 0-1024")
    if obj.get("groupRetryPolicy") is not None:
        cfg["groupRetryPolicy"] = _retry_policy(obj["groupRetryPolicy"])
    attrs = obj.get("attributes") or {}
    if not isinstance(attrs, dict) or len(attrs) > MAX_ATTRIBUTES:
        raise MqJsonError(f"attributes must be an object of at most {MAX_ATTRIBUTES} entries")
    if any(len(str(k)) > MAX_TEXT or len(str(v)) > MAX_TEXT for k, v in attrs.items()):
        raise MqJsonError(f"an attribute key or value is longer than {MAX_TEXT} characters")
    cfg["attributes"] = {str(k): str(v) for k, v in attrs.items()}
    subs = obj.get("subscriptionDataSet")
    if subs is not None:
        if not isinstance(subs, list) or len(subs) > MAX_SUBSCRIPTION_DATA or not all(isinstance(s, dict) for s in subs):
            raise MqJsonError(f"subscriptionDataSet must be a list of at most {MAX_SUBSCRIPTION_DATA} objects")
        cfg["subscriptionDataSet"] = [
            {k: s[k] for k in ("expression", "expressionType", "topic", "version") if k in s} for s in subs
        ]
    return cfg


def encode_subscription_group(cfg: dict[str, Any]) -> bytes:
    return dumps(cfg)
