"""Body models: the JSON (and compressed) payloads RocketMQ puts in frames.

Property names, ordering and optional fields follow what Java emits; every
parser accepts fastjson's bare integer keys and reports any malformed body
as :class:`BodyError` so a handler can answer SYSTEM_ERROR instead of dying.

Numbers are range-checked as the Java types of their fields (``int`` or
``long``), and error texts describe bad values briefly (a remark never
carries a megabyte string or the repr of a 1,000-deep list). The
REGISTER_BROKER body, parsed under hard bounds, is in
:mod:`remoting.register_body`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from remoting import fastjson
from remoting.codes import PERM_INHERIT, PERM_READ, PERM_WRITE
from remoting.fastjson import BodyError
from remoting.javatypes import JavaRangeError, brief, check_range, parse_int

__all__ = [
    "BodyError",
    "BrokerData",
    "ClusterInfo",
    "DataVersion",
    "QueueData",
    "TopicConfig",
    "TopicRouteData",
    "encode_kv_table",
    "encode_topic_list",
    "parse_kv_table",
    "parse_topic_list",
    "perm_to_string",
]


def json_int(value: Any, what: str, default: int = 0, bits: int = 32) -> int:
    """A JSON number or numeric string as Java's int (bits=32) or long (bits=64)."""
    if value is None:
        return default
    try:
        if type(value) is int:
            return check_range(value, bits, what)
        if isinstance(value, str):
            return parse_int(value, bits, what)
        if isinstance(value, float) and value.is_integer():
            # orjson reads integers beyond 64 bits as floats: 1e+23.
            return check_range(int(value), bits, what)
    except JavaRangeError as exc:
        raise BodyError(str(exc)) from None
    raise BodyError(f"{what} is not an integer: {brief(value)}")


def deeper_than(value: Any, max_depth: int) -> bool:
    """Whether a parsed JSON value nests more than ``max_depth`` containers deep.

    Iterative, so a 1,000-deep value costs a loop, not Python's recursion limit.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return False


def json_obj(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BodyError(f"{what} is not a JSON object")
    return value


def json_string_list(value: Any, what: str) -> list[str]:
    """A JSON array of strings, else BodyError (not a TypeError further on)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise BodyError(f"{what} is not a list of strings")
    return value


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _scalar_text(value: Any, what: str) -> str:
    """A scalar as the text Java's String conversion gives; containers are refused."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise BodyError(f"{what} is not a string: {brief(value)}")


def _str_or_none(value: Any, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise BodyError(f"{what} is not a string: {brief(value)}")


# --------------------------------------------------------------------------
# DataVersion, TopicConfig


@dataclass(frozen=True, slots=True)
class DataVersion:
    """A broker's topic-table version; equality is 5.x's (all three fields)."""

    counter: int = 0
    timestamp: int = 0
    state_version: int = 0

    @classmethod
    def from_obj(cls, obj: Any) -> DataVersion:
        o = json_obj(obj, "dataVersion")
        return cls(
            counter=json_int(o.get("counter"), "dataVersion.counter", bits=64),
            timestamp=json_int(o.get("timestamp"), "dataVersion.timestamp", bits=64),
            state_version=json_int(o.get("stateVersion"), "dataVersion.stateVersion", bits=64),
        )

    def to_obj(self) -> dict[str, int]:
        return {"counter": self.counter, "stateVersion": self.state_version, "timestamp": self.timestamp}

    def encode(self) -> bytes:
        return fastjson.dumps_fast(self.to_obj())

    @classmethod
    def decode(cls, body: bytes) -> DataVersion:
        return cls.from_obj(fastjson.loads(body))

    def next(self, now_ms: int) -> DataVersion:
        """The version after one more topic change."""
        return DataVersion(self.counter + 1, now_ms, self.state_version)


@dataclass(slots=True)
class TopicConfig:
    """A broker-side topic definition (TopicConfig.java)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_obj(cls, name: str, obj: Any) -> TopicConfig:
        o = json_obj(obj, f"topic config {brief(name)}")
        attrs = o.get("attributes") or {}
        if not isinstance(attrs, dict) or not all(_is_scalar(v) for v in attrs.values()):
            raise BodyError(f"attributes of topic {brief(name)} is not an object of strings")
        return cls(
            topic_name=_str_or_none(o.get("topicName"), "topicName") or name,
            read_queue_nums=json_int(o.get("readQueueNums"), "readQueueNums", 16),
            write_queue_nums=json_int(o.get("writeQueueNums"), "writeQueueNums", 16),
            perm=json_int(o.get("perm"), "perm", 6),
            topic_filter_type=_scalar_text(o.get("topicFilterType") or "SINGLE_TAG", "topicFilterType"),
            topic_sys_flag=json_int(o.get("topicSysFlag"), "topicSysFlag"),
            order=_bool(o.get("order")),
            attributes={str(k): str(v) for k, v in attrs.items()},
        )

    def to_obj(self) -> dict[str, Any]:
        return {
            "attributes": dict(self.attributes),
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    def encode_compact(self, *, with_attributes: bool = True) -> str:
        """The space-separated form used inside a compressed register body.

        5.x appends the attributes JSON as a sixth field; 4.9.x has no
        attributes and its ``TopicConfig.decode`` accepts exactly five fields,
        so ``with_attributes=False`` gives the 4.9.x form.
        """
        text = (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} "
            f"{self.perm} {self.topic_filter_type}"
        )
        if not with_attributes:
            return text
        return f"{text} {fastjson.dumps_fast(self.attributes).decode()}"

    @property
    def queue_data(self) -> tuple[int, int, int, int]:
        """(readQueueNums, writeQueueNums, perm, topicSysFlag): what a route needs."""
        return (self.read_queue_nums, self.write_queue_nums, self.perm, self.topic_sys_flag)


def perm_to_string(perm: int) -> str:
    """PermName.perm2String: ``RW-`` style."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )


# --------------------------------------------------------------------------
# routes and cluster info (client-side models)


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_obj(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_obj(cls, obj: Any) -> QueueData:
        o = json_obj(obj, "queueData")
        name = _str_or_none(o.get("brokerName"), "brokerName")
        if name is None:
            raise BodyError("queueData without brokerName")
        return cls(
            broker_name=name,
            read_queue_nums=json_int(o.get("readQueueNums"), "readQueueNums"),
            write_queue_nums=json_int(o.get("writeQueueNums"), "writeQueueNums"),
            perm=json_int(o.get("perm"), "perm"),
            topic_sys_flag=json_int(o.get("topicSysFlag", o.get("topicSynFlag")), "topicSysFlag"),
        )


def broker_data_obj(
    cluster: str, name: str, addrs: dict[int, str], enable_acting_master: bool, zone_name: str | None
) -> dict[str, Any]:
    """A BrokerData as fastjson orders it: the one encoding of both broker records (see :class:`BrokerData`)."""
    obj: dict[str, Any] = {
        "brokerAddrs": dict(sorted(addrs.items())),
        "brokerName": name,
        "cluster": cluster,
        "enableActingMaster": enable_acting_master,
    }
    if zone_name is not None:
        obj["zoneName"] = zone_name
    return obj


@dataclass(slots=True)
class BrokerData:
    """A BrokerData as a peer sends it: parsed and checked, read by clients (``master_addr``).

    The NameServer's route table keeps its own record of a broker,
    :class:`namesrv.route_model.BrokerEntry`, with the same fields under
    the table's names: that one is changed in place by every registration
    and never parsed, this one is a value read off the wire and never
    changed. They share their encoding (:func:`broker_data_obj`).
    """

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]
    enable_acting_master: bool = False
    zone_name: str | None = None

    def to_obj(self) -> dict[str, Any]:
        return broker_data_obj(self.cluster, self.broker_name, self.broker_addrs, self.enable_acting_master,
                               self.zone_name)

    @classmethod
    def from_obj(cls, obj: Any) -> BrokerData:
        o = json_obj(obj, "brokerData")
        addrs = json_obj(o.get("brokerAddrs"), "brokerAddrs")
        return cls(
            cluster=_str_or_none(o.get("cluster"), "cluster") or "",
            broker_name=_str_or_none(o.get("brokerName"), "brokerName") or "",
            broker_addrs={json_int(k, "brokerId", bits=64): _scalar_text(v, "brokerAddrs value") for k, v in addrs.items()},
            enable_acting_master=_bool(o.get("enableActingMaster")),
            zone_name=_str_or_none(o.get("zoneName"), "zoneName"),
        )

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(0)


@dataclass(slots=True)
class TopicRouteData:
    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None
    topic_queue_mapping_by_broker: dict[str, Any] | None = None

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "brokerDatas": [b.to_obj() for b in self.broker_datas],
            "filterServerTable": dict(self.filter_server_table),
        }
        if self.order_topic_conf is not None:
            obj["orderTopicConf"] = self.order_topic_conf
        obj["queueDatas"] = [q.to_obj() for q in self.queue_datas]
        if self.topic_queue_mapping_by_broker:
            obj["topicQueueMappingByBroker"] = self.topic_queue_mapping_by_broker
        return obj

    def encode(self, *, standard: bool) -> bytes:
        return fastjson.dumps(self.to_obj(), standard=standard)

    @classmethod
    def from_obj(cls, obj: Any) -> TopicRouteData:
        o = json_obj(obj, "route")
        qds = o.get("queueDatas") or []
        bds = o.get("brokerDatas") or []
        if not isinstance(qds, list) or not isinstance(bds, list):
            raise BodyError("queueDatas and brokerDatas must be arrays")
        fst = json_obj(o.get("filterServerTable"), "filterServerTable")
        return cls(
            queue_datas=[QueueData.from_obj(q) for q in qds],
            broker_datas=[BrokerData.from_obj(b) for b in bds],
            filter_server_table={str(k): json_string_list(v, "filterServerTable entry") for k, v in fst.items()},
            order_topic_conf=_str_or_none(o.get("orderTopicConf"), "orderTopicConf"),
            topic_queue_mapping_by_broker=o.get("topicQueueMappingByBroker"),
        )

    @classmethod
    def decode(cls, body: bytes) -> TopicRouteData:
        return cls.from_obj(fastjson.loads(body))


@dataclass(slots=True)
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, list[str]]

    @classmethod
    def decode(cls, body: bytes) -> ClusterInfo:
        o = json_obj(fastjson.loads(body), "cluster info")
        brokers = json_obj(o.get("brokerAddrTable"), "brokerAddrTable")
        clusters = json_obj(o.get("clusterAddrTable"), "clusterAddrTable")
        return cls(
            broker_addr_table={str(k): BrokerData.from_obj(v) for k, v in brokers.items()},
            cluster_addr_table={str(k): json_string_list(v, "clusterAddrTable entry") for k, v in clusters.items()},
        )


# --------------------------------------------------------------------------
# small bodies


def encode_topic_list(topics: Iterable[str], broker_addr: str | None = None) -> bytes:
    obj: dict[str, Any] = {}
    if broker_addr is not None:
        obj["brokerAddr"] = broker_addr
    obj["topicList"] = list(topics)
    return fastjson.dumps_fast(obj)


def parse_topic_list(body: bytes) -> tuple[list[str], str | None]:
    o = json_obj(fastjson.loads(body), "topic list")
    topics = o.get("topicList") or []
    if not isinstance(topics, list):
        raise BodyError("topicList is not an array")
    return [_scalar_text(t, "topic") for t in topics], _str_or_none(o.get("brokerAddr"), "brokerAddr")


def encode_kv_table(table: Mapping[str, str]) -> bytes:
    return fastjson.dumps_fast({"table": dict(table)})


def parse_kv_table(body: bytes) -> dict[str, str]:
    o = json_obj(fastjson.loads(body), "KV table")
    return {str(k): _scalar_text(v, "KV value") for k, v in json_obj(o.get("table"), "table").items() if v is not None}
