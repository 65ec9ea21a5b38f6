"""Body models: the JSON (and compressed) payloads RocketMQ puts in frames.

Property names, ordering and optional fields follow what Java emits; every
parser accepts fastjson's bare integer keys and reports any malformed body
as :class:`BodyError` so a handler can answer SYSTEM_ERROR instead of dying.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from remoting import fastjson
from remoting.codes import PERM_INHERIT, PERM_READ, PERM_WRITE, Version
from remoting.fastjson import BodyError

__all__ = [
    "BodyError",
    "BrokerData",
    "ClusterInfo",
    "DataVersion",
    "QueueData",
    "RegisterBody",
    "TopicConfig",
    "TopicRouteData",
    "encode_kv_table",
    "encode_register_body",
    "encode_topic_list",
    "parse_kv_table",
    "parse_register_body",
    "parse_topic_list",
    "perm_to_string",
]

#: Upper bound for an inflated compressed register body (a zip bomb guard).
MAX_INFLATED_REGISTER_BODY = 256 * 1024 * 1024


def _int(value: Any, what: str, default: int = 0) -> int:
    if value is None:
        return default
    if type(value) is int:
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise BodyError(f"{what} is not an integer: {value!r}")


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return False


def _obj(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BodyError(f"{what} is not a JSON object")
    return value


def _str_or_none(value: Any, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise BodyError(f"{what} is not a string: {value!r}")


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
        o = _obj(obj, "dataVersion")
        return cls(
            counter=_int(o.get("counter"), "dataVersion.counter"),
            timestamp=_int(o.get("timestamp"), "dataVersion.timestamp"),
            state_version=_int(o.get("stateVersion"), "dataVersion.stateVersion"),
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
        o = _obj(obj, f"topic config {name!r}")
        attrs = o.get("attributes") or {}
        if not isinstance(attrs, dict):
            raise BodyError(f"attributes of topic {name!r} is not an object")
        return cls(
            topic_name=_str_or_none(o.get("topicName"), "topicName") or name,
            read_queue_nums=_int(o.get("readQueueNums"), "readQueueNums", 16),
            write_queue_nums=_int(o.get("writeQueueNums"), "writeQueueNums", 16),
            perm=_int(o.get("perm"), "perm", 6),
            topic_filter_type=str(o.get("topicFilterType") or "SINGLE_TAG"),
            topic_sys_flag=_int(o.get("topicSysFlag"), "topicSysFlag"),
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
# REGISTER_BROKER body


@dataclass(slots=True)
class RegisterBody:
    """What the NameServer needs from a REGISTER_BROKER body.

    ``topics`` maps topic name to (readQueueNums, writeQueueNums, perm,
    topicSysFlag): the NameServer never needs more, and tuples keep a
    100,000-topic registration fast.
    """

    data_version: DataVersion
    topics: dict[str, tuple[int, int, int, int]]
    filter_servers: list[str] = field(default_factory=list)
    mapping_infos: dict[str, dict[str, Any]] = field(default_factory=dict)


def _topics_from_table(table: Any) -> dict[str, tuple[int, int, int, int]]:
    out: dict[str, tuple[int, int, int, int]] = {}
    for name, tc in _obj(table, "topicConfigTable").items():
        if not isinstance(tc, dict):
            raise BodyError(f"topic config {name!r} is not an object")
        get = tc.get
        r, w, p, s = get("readQueueNums", 16), get("writeQueueNums", 16), get("perm", 6), get("topicSysFlag", 0)
        if not (type(r) is int and type(w) is int and type(p) is int and type(s) is int):
            r = _int(r, "readQueueNums", 16)
            w = _int(w, "writeQueueNums", 16)
            p = _int(p, "perm", 6)
            s = _int(s, "topicSysFlag", 0)
        tname = get("topicName")
        out[tname if isinstance(tname, str) and tname else name] = (r, w, p, s)
    return out


def _wrapper_to_body(wrapper: Any, filter_servers: list[str]) -> RegisterBody:
    w = _obj(wrapper, "topicConfigSerializeWrapper")
    mappings = _obj(w.get("topicQueueMappingInfoMap"), "topicQueueMappingInfoMap")
    return RegisterBody(
        data_version=DataVersion.from_obj(w.get("dataVersion")),
        topics=_topics_from_table(w.get("topicConfigTable")),
        filter_servers=filter_servers,
        mapping_infos={str(k): _obj(v, "mapping info") for k, v in mappings.items()},
    )


def _string_list(value: Any, what: str) -> list[str]:
    """A JSON array of strings, else BodyError (not a TypeError further on)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise BodyError(f"{what} is not a list of strings")
    return value


def _filter_list(value: Any) -> list[str]:
    return _string_list(value, "filterServerList")


class _Reader:
    """Big-endian length-prefixed items of a compressed register body."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def int32(self) -> int:
        if self.pos + 4 > len(self.data):
            raise BodyError("compressed register body is truncated")
        (value,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return value

    def item(self) -> bytes:
        size = self.int32()
        if size < 0 or self.pos + size > len(self.data):
            raise BodyError("compressed register body item runs past its end")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk


def _inflate(body: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(body, MAX_INFLATED_REGISTER_BODY)
    except zlib.error as exc:
        raise BodyError(f"compressed body is not a zlib stream: {exc}") from None
    if inflater.unconsumed_tail:
        raise BodyError("compressed register body inflates past the size limit")
    if not inflater.eof:
        # decompressobj returns what it could from a cut-off stream without
        # complaint; a stream missing its end (or its Adler-32) is corrupt.
        raise BodyError("compressed register body is truncated")
    return data


def _parse_compressed(body: bytes, version: int) -> RegisterBody:
    reader = _Reader(_inflate(body))
    data_version = DataVersion.decode(reader.item())
    count = reader.int32()
    if count < 0:
        raise BodyError("negative topic count")
    topics: dict[str, tuple[int, int, int, int]] = {}
    for _ in range(count):
        try:
            parts = reader.item().decode("utf-8").split(" ", 5)
        except UnicodeDecodeError:
            raise BodyError("topic config is not UTF-8") from None
        if len(parts) < 5:
            raise BodyError(f"topic config {' '.join(parts)!r} has fewer than 5 fields")
        topics[parts[0]] = (
            _int(parts[1], "readQueueNums"),
            _int(parts[2], "writeQueueNums"),
            _int(parts[3], "perm"),
            0,  # the compact form does not carry topicSysFlag
        )
    filter_servers = _filter_list(fastjson.loads(reader.item()))
    mappings: dict[str, dict[str, Any]] = {}
    if version >= Version.V5_0_0:
        for _ in range(max(reader.int32(), 0)):
            info = _obj(fastjson.loads(reader.item()), "mapping info")
            topic = info.get("topic")
            if isinstance(topic, str):
                mappings[topic] = info
    return RegisterBody(data_version, topics, filter_servers, mappings)


def parse_register_body(body: bytes, *, compressed: bool, version: int) -> RegisterBody:
    """Decode a REGISTER_BROKER body in whichever of its three forms it came."""
    if not body:
        return RegisterBody(DataVersion(), {})
    if compressed:
        return _parse_compressed(body, version)
    obj = fastjson.loads(body)
    if not isinstance(obj, dict):
        raise BodyError("register body is not a JSON object")
    if version < Version.V3_0_11:
        return _wrapper_to_body(obj, [])
    return _wrapper_to_body(obj.get("topicConfigSerializeWrapper"), _filter_list(obj.get("filterServerList")))


def encode_register_body(
    topic_configs: Iterable[TopicConfig],
    data_version: DataVersion,
    *,
    filter_servers: Iterable[str] = (),
    compressed: bool = False,
    version: int = Version.V5_3_3,
) -> bytes:
    """A REGISTER_BROKER body as a Java broker of ``version`` builds it."""
    configs = list(topic_configs)
    servers = list(filter_servers)
    if compressed:
        parts = []
        dv = data_version.encode()
        parts.append(struct.pack(">i", len(dv)) + dv)
        parts.append(struct.pack(">i", len(configs)))
        with_attributes = version >= Version.V5_0_0  # 4.9.x decodes exactly 5 fields
        for tc in configs:
            text = tc.encode_compact(with_attributes=with_attributes).encode()
            parts.append(struct.pack(">i", len(text)) + text)
        fs = fastjson.dumps_fast(servers)
        parts.append(struct.pack(">i", len(fs)) + fs)
        if version >= Version.V5_0_0:
            parts.append(struct.pack(">i", 0))
        return zlib.compress(b"".join(parts), 9)
    wrapper: dict[str, Any] = {
        "dataVersion": data_version.to_obj(),
        "topicConfigTable": {tc.topic_name: tc.to_obj() for tc in configs},
    }
    if version < Version.V3_0_11:
        return fastjson.dumps_fast(wrapper)
    return fastjson.dumps_fast({"filterServerList": servers, "topicConfigSerializeWrapper": wrapper})


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
        o = _obj(obj, "queueData")
        name = _str_or_none(o.get("brokerName"), "brokerName")
        if name is None:
            raise BodyError("queueData without brokerName")
        return cls(
            broker_name=name,
            read_queue_nums=_int(o.get("readQueueNums"), "readQueueNums"),
            write_queue_nums=_int(o.get("writeQueueNums"), "writeQueueNums"),
            perm=_int(o.get("perm"), "perm"),
            topic_sys_flag=_int(o.get("topicSysFlag", o.get("topicSynFlag")), "topicSysFlag"),
        )


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]
    enable_acting_master: bool = False
    zone_name: str | None = None

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "brokerAddrs": dict(sorted(self.broker_addrs.items())),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
            "enableActingMaster": self.enable_acting_master,
        }
        if self.zone_name is not None:
            obj["zoneName"] = self.zone_name
        return obj

    @classmethod
    def from_obj(cls, obj: Any) -> BrokerData:
        o = _obj(obj, "brokerData")
        addrs = _obj(o.get("brokerAddrs"), "brokerAddrs")
        return cls(
            cluster=_str_or_none(o.get("cluster"), "cluster") or "",
            broker_name=_str_or_none(o.get("brokerName"), "brokerName") or "",
            broker_addrs={_int(k, "brokerId"): str(v) for k, v in addrs.items()},
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
        o = _obj(obj, "route")
        qds = o.get("queueDatas") or []
        bds = o.get("brokerDatas") or []
        if not isinstance(qds, list) or not isinstance(bds, list):
            raise BodyError("queueDatas and brokerDatas must be arrays")
        fst = _obj(o.get("filterServerTable"), "filterServerTable")
        return cls(
            queue_datas=[QueueData.from_obj(q) for q in qds],
            broker_datas=[BrokerData.from_obj(b) for b in bds],
            filter_server_table={str(k): _string_list(v, "filterServerTable entry") for k, v in fst.items()},
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
        o = _obj(fastjson.loads(body), "cluster info")
        brokers = _obj(o.get("brokerAddrTable"), "brokerAddrTable")
        clusters = _obj(o.get("clusterAddrTable"), "clusterAddrTable")
        return cls(
            broker_addr_table={str(k): BrokerData.from_obj(v) for k, v in brokers.items()},
            cluster_addr_table={str(k): _string_list(v, "clusterAddrTable entry") for k, v in clusters.items()},
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
    o = _obj(fastjson.loads(body), "topic list")
    topics = o.get("topicList") or []
    if not isinstance(topics, list):
        raise BodyError("topicList is not an array")
    return [str(t) for t in topics], _str_or_none(o.get("brokerAddr"), "brokerAddr")


def encode_kv_table(table: Mapping[str, str]) -> bytes:
    return fastjson.dumps_fast({"table": dict(table)})


def parse_kv_table(body: bytes) -> dict[str, str]:
    o = _obj(fastjson.loads(body), "KV table")
    return {str(k): str(v) for k, v in _obj(o.get("table"), "table").items() if v is not None}
