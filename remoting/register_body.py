"""The REGISTER_BROKER body in its three forms, parsed under hard bounds.

A register body is the one large input a NameServer keeps: its topics become
routes and its static-topic mapping infos are echoed verbatim in every route
answer of their topic. It comes from whoever opens a connection, so parsing
refuses, with :class:`BodyError`, anything that would cost more than a
bounded amount of work or memory, or that a later encoder could choke on:

- a compressed body is inflated in 1 MiB steps and refused as soon as it
  passes ``max_inflated_bytes`` (not after inflating a 232 MB bomb);
- the topic count is checked before any topic is converted;
- numbers must fit the Java type of their field (``int``/``long``);
- mapping infos must have TopicQueueMappingInfo's shape, nested at most
  ``max_depth`` deep, and are rebuilt from their known fields only (Java
  deserialises them into that class, which drops anything else);
- JSON is counted before it is parsed (:func:`remoting.fastjson.json_items`):
  a body cannot hold more objects than its topics need nor more arrays than
  a register body ever has, so no JSON body costs more to parse than a
  legitimate registration of the same size (a 16 MB body of 5,000,000
  empty arrays took 1.7 s and 500 MB; 1,000,000 ``{}`` topics 0.55 s); the
  compressed form's JSON items share one budget.

The three forms: JSON ``RegisterBrokerBody`` (3.0.11+), a bare
``TopicConfigSerializeWrapper`` (older brokers) and the compressed binary
form (zlib over length-prefixed items).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from remoting import fastjson
from remoting.bodies import DataVersion, TopicConfig, deeper_than, json_int, json_obj, json_string_list
from remoting.codes import Version
from remoting.fastjson import BodyError, BodyLimitError
from remoting.javatypes import INT32_MAX, INT32_MIN, brief

__all__ = [
    "DEFAULT_REGISTER_LIMITS",
    "RegisterBody",
    "RegisterLimits",
    "encode_register_body",
    "parse_register_body",
]


@dataclass(frozen=True, slots=True)
class RegisterLimits:
    """Bounds on one REGISTER_BROKER body (Java has none).

    The defaults carry a 100,000-topic broker with room to spare (its
    compressed body inflates to about 4 MB; 16 MiB is 200,000 topics at 80
    bytes each) while bounding the work of a hostile body: inflating and
    reading 16 MiB costs about 70 ms of CPU here. The NameServer sets them
    from ``registerBodyMaxInflatedBytes``, ``registerBodyMaxTopics`` and
    ``registerBodyMaxJsonDepth``.
    """

    max_inflated_bytes: int = 16 * 1024 * 1024
    max_topics: int = 200_000
    max_depth: int = 32
    max_filter_servers: int = 64
    #: currIdMap entries of all mapping infos together (a static topic maps its queues: a
    #: real broker has a handful of such topics with tens of queues each).
    max_mapping_entries: int = 65_536
    #: A plain body parsed in one go holds the loop ~20-40 ms per MB: the registration
    #: cuts bodies laid out as brokers write them into chunks (each parsed alone, far
    #: smaller); one that cannot be cut is parsed whole only up to this (0: no bound).
    max_whole_json: int = 0

    @property
    def max_json_objects(self) -> int:
        """JSON objects a body may hold: a topic config and its attributes per topic, and room."""
        return 2 * self.max_topics + 65_536


DEFAULT_REGISTER_LIMITS = RegisterLimits()
#: Longest filter-server address kept (a host:port is far shorter).
MAX_FILTER_SERVER_LENGTH = 256
#: Output produced per inflate step, so the size bound is checked as we go.
_INFLATE_STEP = 1024 * 1024
#: Topic items read before the declared count is checked against the size seen so far.
_PROJECT_AFTER = 1024
#: Arrays a register body may hold: one (filterServerList) in any real one; 65,536 take
#: ~20 ms to build, where 5,000,000 took 1.7 s.
MAX_JSON_ARRAYS = 65_536
#: fastjson.json_items units all JSON items of a compressed body may take together (the data
#: version, the filter-server list, the mapping infos): ~70-100 ms of parsing at worst.
COMPRESSED_JSON_BUDGET = 2_000_000


@dataclass(slots=True)
class RegisterBody:
    """What the NameServer needs from a REGISTER_BROKER body.

    ``topics`` maps topic name to (readQueueNums, writeQueueNums, perm,
    topicSysFlag): the NameServer never needs more, and tuples keep a
    100,000-topic registration fast. ``mapping_infos`` maps topic to a
    TopicQueueMappingInfo rebuilt from its known fields (keys sorted, as
    fastjson writes them; ``currIdMap`` with integer keys).
    """

    data_version: DataVersion
    topics: dict[str, tuple[int, int, int, int]]
    filter_servers: list[str] = field(default_factory=list)
    mapping_infos: dict[str, dict[str, Any]] = field(default_factory=dict)


# --------------------------------------------------------------------------
# pieces


def _check_topic_count(count: int, limits: RegisterLimits) -> None:
    if count > limits.max_topics:
        raise BodyLimitError(f"register body has {count} topics, more than the limit of {limits.max_topics}")


def _is_int32(value: Any) -> bool:
    return type(value) is int and INT32_MIN <= value <= INT32_MAX


def _topics_from_table(table: Any, limits: RegisterLimits) -> dict[str, tuple[int, int, int, int]]:
    entries = json_obj(table, "topicConfigTable")
    _check_topic_count(len(entries), limits)
    out: dict[str, tuple[int, int, int, int]] = {}
    for name, tc in entries.items():
        if not isinstance(tc, dict):
            raise BodyError(f"topic config {brief(name)} is not an object")
        get = tc.get
        r, w, p, s = get("readQueueNums", 16), get("writeQueueNums", 16), get("perm", 6), get("topicSysFlag", 0)
        if not (_is_int32(r) and _is_int32(w) and _is_int32(p) and _is_int32(s)):
            r = json_int(r, "readQueueNums", 16)
            w = json_int(w, "writeQueueNums", 16)
            p = json_int(p, "perm", 6)
            s = json_int(s, "topicSysFlag", 0)
        tname = get("topicName")
        out[tname if isinstance(tname, str) and tname else name] = (r, w, p, s)
    return out


def _filter_list(value: Any, limits: RegisterLimits) -> list[str]:
    servers = json_string_list(value, "filterServerList")
    if len(servers) > limits.max_filter_servers:
        raise BodyLimitError(f"filterServerList has {len(servers)} entries, more than {limits.max_filter_servers}")
    if any(len(s) > MAX_FILTER_SERVER_LENGTH for s in servers):
        raise BodyLimitError(f"a filterServerList entry is longer than {MAX_FILTER_SERVER_LENGTH} characters")
    return servers


_MAPPING_STRINGS = ("bname", "scope", "topic")


def mapping_info(topic: str, value: Any, limits: RegisterLimits) -> dict[str, Any]:
    """A TopicQueueMappingInfo rebuilt from its known, type-checked fields.

    Fields: topic, scope, bname (strings), totalQueues (int), epoch (long),
    dirty (boolean), currIdMap (int -> int). Unknown fields are dropped, as
    Java's deserialisation into the class drops them.
    """
    what = f"mapping info of topic {brief(topic)}"
    if not isinstance(value, dict):
        raise BodyError(f"{what} is not a JSON object")
    if deeper_than(value, limits.max_depth):
        raise BodyLimitError(f"{what} is nested deeper than {limits.max_depth}")
    out: dict[str, Any] = {}
    for key in sorted(k for k in value if isinstance(k, str)):
        item = value[key]
        if item is None:
            continue
        if key in _MAPPING_STRINGS:
            if not isinstance(item, str):
                raise BodyError(f"{what}: {key} is not a string")
            out[key] = item
        elif key == "totalQueues":
            out[key] = json_int(item, f"{what}: totalQueues")
        elif key == "epoch":
            out[key] = json_int(item, f"{what}: epoch", bits=64)
        elif key == "dirty":
            if not isinstance(item, bool):
                raise BodyError(f"{what}: dirty is not a boolean")
            out[key] = item
        elif key == "currIdMap":
            ids = json_obj(item, f"{what}: currIdMap")
            out[key] = {
                json_int(k, f"{what}: currIdMap key"): json_int(v, f"{what}: currIdMap value") for k, v in ids.items()
            }
    return out


def _mapping_infos(value: Any, limits: RegisterLimits) -> dict[str, dict[str, Any]]:
    mappings = json_obj(value, "topicQueueMappingInfoMap")
    if len(mappings) > limits.max_topics:
        raise BodyLimitError(f"topicQueueMappingInfoMap has {len(mappings)} entries, more than {limits.max_topics}")
    _check_mapping_entries(mappings.values(), limits)
    return {str(k): mapping_info(str(k), v, limits) for k, v in mappings.items()}


def _check_mapping_entries(raw_infos: Iterable[Any], limits: RegisterLimits) -> None:
    """Refuse before converting when the currIdMaps together are larger than the bound."""
    total = sum(len(ids) for info in raw_infos if isinstance(info, dict) and isinstance(ids := info.get("currIdMap"), dict))
    if total > limits.max_mapping_entries:
        raise BodyLimitError(f"mapping infos hold {total} currIdMap entries, more than {limits.max_mapping_entries}")


def _check_json_shape(body: bytes, limits: RegisterLimits) -> None:
    """Count arrays and objects before parsing: what no register body has is refused at once."""
    arrays = body.count(b"[")
    if arrays > MAX_JSON_ARRAYS:
        raise BodyLimitError(f"register body holds {arrays} JSON arrays, more than {MAX_JSON_ARRAYS}")
    objects = body.count(b"{")
    if objects > limits.max_json_objects:
        raise BodyLimitError(
            f"register body holds {objects} JSON objects, more than {limits.max_json_objects}"
            f" (2 per topic of registerBodyMaxTopics {limits.max_topics}, and 65536)"
        )
    # Static-topic mappings: a currIdMap entry is a key and a number (no brace to count), so
    # count the keys from the mappings' start to the topic table (or the end) instead.
    start = body.find(b'"topicQueueMappingInfoMap":')
    if start != -1:
        table = body.find(b'"topicConfigTable":', start)
        keys = body.count(b":", start, table if table != -1 else len(body))
        bound = 4 * limits.max_mapping_entries
        if keys > bound:
            raise BodyLimitError(f"register body's static-topic mappings (currIdMap entries and all) hold {keys} keys, more than {bound}")


class _JsonBudget:
    """One budget for all JSON items of a compressed body, checked before each is parsed."""

    def __init__(self, units: int) -> None:
        self.left = units

    def loads(self, data: bytes, what: str) -> Any:
        cost = fastjson.json_items(data, stop_above=self.left)
        if cost > self.left:
            raise BodyLimitError(f"compressed register body: {what} takes the JSON items past the limit")
        self.left -= cost
        return fastjson.loads(data, max_legacy_items=fastjson.LEGACY_MAX_ITEMS)


def _wrapper_to_body(wrapper: Any, filter_servers: list[str], limits: RegisterLimits) -> RegisterBody:
    w = json_obj(wrapper, "topicConfigSerializeWrapper")
    return RegisterBody(
        data_version=DataVersion.from_obj(w.get("dataVersion")),
        topics=_topics_from_table(w.get("topicConfigTable"), limits),
        filter_servers=filter_servers,
        mapping_infos=_mapping_infos(w.get("topicQueueMappingInfoMap"), limits),
    )


# --------------------------------------------------------------------------
# the compressed form


class _InflatingReader:
    """Length-prefixed big-endian items read from a zlib stream as it inflates.

    Inflating on demand, in steps of at most 1 MiB, means a body whose first
    items are already wrong (a topic count past the limit, a run of zeros
    from a bomb) is refused after the first step, not after inflating up to
    ``limit`` bytes; a valid body costs the same as inflating it whole.
    """

    def __init__(self, body: bytes, limit: int) -> None:
        self._inflater = zlib.decompressobj()
        self._pending = body
        self._limit = limit
        self._inflated = 0
        self._buf = bytearray()
        self._pos = 0

    def _more(self) -> bool:
        """Inflate one more step into the buffer; False once the stream is spent."""
        inflater = self._inflater
        if inflater.eof:
            return False
        before = len(self._pending)
        try:
            chunk = inflater.decompress(self._pending, _INFLATE_STEP)
        except zlib.error as exc:
            raise BodyError(f"compressed body is not a zlib stream: {exc}") from None
        self._pending = inflater.unconsumed_tail
        self._inflated += len(chunk)
        if self._inflated > self._limit:
            raise BodyLimitError(f"compressed register body inflates past the size limit ({self._limit} bytes)")
        if not chunk and len(self._pending) == before and not inflater.eof:
            # decompressobj returns what it could from a cut-off stream without
            # complaint; a stream missing its end (or its Adler-32) is corrupt.
            raise BodyError("compressed register body is truncated")
        if self._pos > _INFLATE_STEP:  # drop what was read (amortised: linear overall)
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += chunk
        return True

    def _need(self, size: int) -> None:
        while len(self._buf) - self._pos < size:
            if not self._more():
                raise BodyError("compressed register body is truncated")

    def int32(self) -> int:
        self._need(4)
        (value,) = struct.unpack_from(">i", self._buf, self._pos)
        self._pos += 4
        return value

    def item(self) -> bytes:
        size = self.int32()
        if size < 0:
            raise BodyError("compressed register body item has a negative length")
        if size > self._limit:
            raise BodyLimitError("compressed register body item runs past the size limit")
        self._need(size)
        chunk = bytes(self._buf[self._pos : self._pos + size])
        self._pos += size
        return chunk

    def finish(self) -> None:
        """Inflate what is left (within the limit): the stream must end properly."""
        while self._more():
            self._buf.clear()
            self._pos = 0


def inflate(body: bytes, limit: int) -> bytes:
    """zlib-inflate ``body`` in steps, refusing output beyond ``limit`` bytes."""
    reader = _InflatingReader(body, limit)
    while reader._more():
        pass
    return bytes(reader._buf)


def _parse_compressed(body: bytes, version: int, limits: RegisterLimits) -> RegisterBody:
    reader = _InflatingReader(body, limits.max_inflated_bytes)
    budget = _JsonBudget(COMPRESSED_JSON_BUDGET)
    data_version = DataVersion.from_obj(budget.loads(reader.item(), "the data version"))
    count = reader.int32()
    if count < 0:
        raise BodyError("negative topic count")
    _check_topic_count(count, limits)
    topics: dict[str, tuple[int, int, int, int]] = {}
    read_bytes = 0
    for i in range(count):
        if i == _PROJECT_AFTER and read_bytes // i * count > limits.max_inflated_bytes:
            # The declared count at the size seen so far cannot fit: a bomb, refused now
            # rather than after inflating up to the limit (~75 ms for 16 MiB here).
            raise BodyLimitError(
                f"compressed register body inflates past the size limit ({limits.max_inflated_bytes} bytes):"
                f" {count} topics of about {read_bytes // i} bytes"
            )
        item = reader.item()
        read_bytes += len(item)
        try:
            parts = item.decode("utf-8").split(" ", 5)
        except UnicodeDecodeError:
            raise BodyError("topic config is not UTF-8") from None
        if len(parts) < 5:
            raise BodyError(f"topic config {brief(' '.join(parts))} has fewer than 5 fields")
        topics[parts[0]] = (
            json_int(parts[1], "readQueueNums"),
            json_int(parts[2], "writeQueueNums"),
            json_int(parts[3], "perm"),
            0,  # the compact form does not carry topicSysFlag
        )
    filter_servers = _filter_list(budget.loads(reader.item(), "filterServerList"), limits)
    mappings: dict[str, dict[str, Any]] = {}
    if version >= Version.V5_0_0:
        count = reader.int32()
        if count > limits.max_topics:
            raise BodyLimitError(f"register body has {count} mapping infos, more than {limits.max_topics}")
        entries = 0
        for _ in range(max(count, 0)):
            raw = budget.loads(reader.item(), "a mapping info")
            topic = raw.get("topic") if isinstance(raw, dict) else None
            if not isinstance(topic, str):
                raise BodyError("mapping info without a topic")
            ids = raw.get("currIdMap")
            entries += len(ids) if isinstance(ids, dict) else 0
            if entries > limits.max_mapping_entries:
                raise BodyLimitError(f"mapping infos hold more than {limits.max_mapping_entries} currIdMap entries")
            mappings[topic] = mapping_info(topic, raw, limits)
    reader.finish()
    return RegisterBody(data_version, topics, filter_servers, mappings)


# --------------------------------------------------------------------------
# entry points


def parse_register_body(
    body: bytes, *, compressed: bool, version: int, limits: RegisterLimits = DEFAULT_REGISTER_LIMITS
) -> RegisterBody:
    """Decode a REGISTER_BROKER body in whichever of its three forms it came."""
    if not body:
        return RegisterBody(DataVersion(), {})
    if compressed:
        return _parse_compressed(body, version, limits)
    _check_json_shape(body, limits)
    if limits.max_whole_json and len(body) > limits.max_whole_json:
        raise BodyLimitError(
            f"register body of {len(body)} bytes is not laid out as brokers write it, and larger than"
            f" registerBodyMaxWholeParseBytes ({limits.max_whole_json}) for a body parsed in one go"
        )
    obj = fastjson.loads(body, max_legacy_items=fastjson.LEGACY_MAX_ITEMS)
    if not isinstance(obj, dict):
        raise BodyError("register body is not a JSON object")
    if version < Version.V3_0_11:
        return _wrapper_to_body(obj, [], limits)
    return _wrapper_to_body(
        obj.get("topicConfigSerializeWrapper"), _filter_list(obj.get("filterServerList"), limits), limits
    )


def encode_register_body(
    topic_configs: Iterable[TopicConfig],
    data_version: DataVersion,
    *,
    filter_servers: Iterable[str] = (),
    compressed: bool = False,
    version: int = Version.V5_3_3,
    mapping_infos: dict[str, dict[str, Any]] | None = None,
) -> bytes:
    """A REGISTER_BROKER body as a Java broker of ``version`` builds it."""
    configs = list(topic_configs)
    servers = list(filter_servers)
    mappings = mapping_infos or {}
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
            parts.append(struct.pack(">i", len(mappings)))
            for info in mappings.values():
                data = fastjson.dumps(info)
                parts.append(struct.pack(">i", len(data)) + data)
        return zlib.compress(b"".join(parts), 9)
    wrapper: dict[str, Any] = {
        "dataVersion": data_version.to_obj(),
        "topicConfigTable": {tc.topic_name: tc.to_obj() for tc in configs},
    }
    # orjson is the fast path; mapping infos carry integer keys (currIdMap),
    # which only the fastjson-style encoder writes.
    dumps = fastjson.dumps_fast
    if mappings:
        wrapper["topicQueueMappingInfoMap"] = mappings
        dumps = fastjson.dumps
    if version < Version.V3_0_11:
        return dumps(wrapper)
    return dumps({"filterServerList": servers, "topicConfigSerializeWrapper": wrapper})
