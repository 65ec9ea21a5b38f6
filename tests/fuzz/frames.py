"""Fuzz frames: random, random-header, mutated-valid and structured-register RocketMQ remoting frames.

Pure and deterministic: frame ``i`` of seed ``s`` is a function of ``(s, i)``
alone (its own ``random.Random``), so a finding is reproduced from the seed
and index printed with it, whatever ran before it. Nothing here touches a
socket.

Why the four families: random bytes find framing bugs (lengths, header
words); random headers find type confusion in header decoding (the
JSON/binary header is the first thing every request goes through); mutated
valid requests get past decoding into the handlers, where values of the
wrong size, shape or depth do their damage; structure-aware register
bodies (:mod:`tests.fuzz.register_bodies`, servers that handle
REGISTER_BROKER only) get corrupted item tables past inflation and odd
JSON layouts into the NameServer's chunk scan, which byte flips never do.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson

from remoting.bodies import DataVersion, TopicConfig
from remoting.register_body import encode_register_body
from tests.fuzz.encoding import binary_header, frame_bytes, json_header
from tests.fuzz.register_bodies import REGISTER_BROKER, register_frame

# Codes a server sends its clients as requests (not responses): a broker
# notifies consumers; nothing else may arrive without the response flag.
SERVER_INITIATED_CODES = frozenset({39, 40, 220, 221, 307, 309})

# The fault switchboard's code: only its harmless actions are fuzzed (a
# "hang" or "partition" would stop the broker on purpose).
FAULT_CODE = 9000
SAFE_FAULT_ACTIONS = ("reject", "clear", "status", "latency")

# Config keys an admin may legitimately use to deny service (connection
# limits, frame limits): the fuzzer does not set them, so a refused probe
# means a bug, not an admin decision the fuzzer made.
_CONFIG_KEYS = (
    "productEnvName",
    "orderMessageEnable",
    "enableAllTopicList",
    "kvConfigPath",
    "configStorePath",
    "listenPort",
    "bindAddress",
    "supportActingMaster",
    "notifyConsumerIdsChangedEnable",
    "brokerPermission",
    "longPollingEnable",
    "defaultTopicQueueNums",
    "x.y",
)


@dataclass(frozen=True, slots=True)
class Frame:
    """One fuzz frame and what it was made from (for the report)."""

    index: int
    kind: str
    code: int | None
    data: bytes


# --------------------------------------------------------------------------
# nasty values


def deep_json(depth: int, rng: random.Random) -> str:
    """A nested array or object, as text (orjson refuses to write depth > 254)."""
    if rng.random() < 0.5:
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


_NASTY_STRINGS: tuple[Callable[[random.Random], str], ...] = (
    lambda r: "",
    lambda r: "-1",
    lambda r: "0",
    lambda r: "2147483647",
    lambda r: "2147483648",
    lambda r: "-2147483649",
    lambda r: "9223372036854775807",
    lambda r: "9223372036854775808",
    lambda r: "-9223372036854775809",
    lambda r: "99999999999999999999999",
    lambda r: "1e309",
    lambda r: "NaN",
    lambda r: "true",
    lambda r: "null",
    lambda r: " 12 ",
    lambda r: "0x10",
    lambda r: "\x00",
    lambda r: "a\nkvConfigPath=/tmp/x",
    lambda r: "a\\nb\\u000a\\r",
    lambda r: "%RETRY%group",
    lambda r: "%DLQ%group",
    lambda r: "127.0.0.1:1",
    lambda r: "::1",
    lambda r: "\u00e9\u4e2d\U0001f600",
    lambda r: "TagA||TagB",
    lambda r: "*",
    lambda r: "a" * r.choice((255, 256, 4096, 65536)),
    lambda r: deep_json(r.choice((32, 300, 1000, 1100)), r),
    lambda r: '"' + '\\"' * r.choice((100, 4000)),
    lambda r: "".join(chr(r.randrange(0, 0x3000)) for _ in range(r.randrange(1, 40))),
)


def nasty_string(rng: random.Random) -> str:
    return rng.choice(_NASTY_STRINGS)(rng)


def plausible_string(rng: random.Random) -> str:
    return rng.choice(
        (
            "TopicTest",
            "TBW102",
            "DefaultCluster",
            "broker-a",
            "broker-b",
            "127.0.0.1:10911",
            "127.0.0.1:10912",
            "0",
            "1",
            "8",
            "6",
            "true",
            "false",
            "ORDER_TOPIC_CONFIG",
            "group-1",
            "CID_1",
            "TagA",
            "1700000000000",
        )
    )


# --------------------------------------------------------------------------
# valid-ish templates


_COMMON_EXT: dict[str, Callable[[random.Random], str]] = {
    "topic": lambda r: r.choice(("TopicTest", "TBW102", "Fz" + str(r.randrange(100)))),
    "brokerName": lambda r: r.choice(("broker-a", "broker-b", "fz-" + str(r.randrange(20)))),
    "brokerAddr": lambda r: f"127.0.0.1:{r.choice((10911, 10921, r.randrange(1, 65536)))}",
    "clusterName": lambda r: "DefaultCluster",
    "cluster": lambda r: "DefaultCluster",
    "brokerId": lambda r: str(r.choice((0, 1, 2))),
    "namespace": lambda r: r.choice(("ORDER_TOPIC_CONFIG", "fz", "ns")),
    "key": lambda r: r.choice(("TopicTest", "k1", "k2")),
    "value": lambda r: r.choice(("broker-a:4", "v", "")),
    "consumerGroup": lambda r: r.choice(("group-1", "CID_fz")),
    "group": lambda r: r.choice(("group-1", "CID_fz")),
    "queueId": lambda r: str(r.choice((0, 1, 3, 7, -1, 1023))),
    "queueOffset": lambda r: str(r.choice((0, 1, 100, -1))),
    "commitOffset": lambda r: str(r.choice((0, 1, 100, -1))),
    "offset": lambda r: str(r.choice((0, 1, 100, -1))),
    "maxMsgNums": lambda r: str(r.choice((1, 32, 0, -5))),
    "sysFlag": lambda r: str(r.choice((0, 2, 3, 6))),
    "suspendTimeoutMillis": lambda r: str(r.choice((0, 10, 50))),
    "subscription": lambda r: r.choice(("*", "TagA", "TagA || TagB")),
    "subVersion": lambda r: "0",
    "timestamp": lambda r: str(r.choice((0, 1700000000000))),
    "clientID": lambda r: "127.0.0.1@fz",
    "producerGroup": lambda r: "pg",
    "compressed": lambda r: r.choice(("true", "false")),
    "haServerAddr": lambda r: "127.0.0.1:10912",
    "heartbeatTimeoutMillis": lambda r: str(r.choice((1000, 120000))),
    "enableActingMaster": lambda r: r.choice(("true", "false")),
    "acceptStandardJsonOnly": lambda r: r.choice(("true", "false")),
    "delayLevel": lambda r: str(r.choice((0, 1, 3))),
    "originMsgId": lambda r: "7F0000010000000000000000",
    "originTopic": lambda r: "TopicTest",
    "maxReconsumeTimes": lambda r: "16",
    "perm": lambda r: str(r.choice((2, 4, 6))),
    "readQueueNums": lambda r: str(r.choice((1, 4, 8))),
    "writeQueueNums": lambda r: str(r.choice((1, 4, 8))),
    "topicFilterType": lambda r: "SINGLE_TAG",
    "order": lambda r: "false",
    "action": lambda r: r.choice(SAFE_FAULT_ACTIONS),
    "code": lambda r: str(r.choice((1, 14, 70000, -40000, 32767))),
    "millis": lambda r: str(r.choice((0, 5))),
}


def _send_ext(rng: random.Random) -> dict[str, str]:
    props = "TAGS\x01TagA\x02KEYS\x01k1\x02UNIQ_KEY\x017F00000100002A9F0000000000000001"
    if rng.random() < 0.5:
        props += "\x02"
    return {
        "a": "pg",
        "b": rng.choice(("TopicTest", "TBW102", "FzAuto" + str(rng.randrange(50)))),
        "c": "TBW102",
        "d": "4",
        "e": str(rng.choice((0, 1, 3))),
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": props,
        "j": "0",
        "k": "false",
        "m": "false",
        "n": "broker-a",
    }


def _register_body(rng: random.Random) -> tuple[bytes, bool]:
    compressed = rng.random() < 0.3
    topics = [
        TopicConfig(f"Fz{i}", read_queue_nums=4, write_queue_nums=4, perm=6)
        for i in range(rng.choice((0, 1, 5, 50)))
    ]
    body = encode_register_body(topics, DataVersion(rng.randrange(1000), 1700000000000, 1), compressed=compressed)
    return body, compressed


def _json_body(rng: random.Random) -> bytes:
    choice = rng.randrange(9)
    if choice == 0:
        return orjson.dumps({"counter": rng.choice((1, 2**63, "99999999999999999999999")), "timestamp": 1})
    if choice == 1:
        return orjson.dumps({"table": {"k": "v", "k2": nasty_string(rng)}})
    if choice == 2:
        return b'{"clientID":"c1","consumerDataSet":[{"groupName":"g","consumeType":"CONSUME_PASSIVELY",' \
            b'"messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":' \
            b'[{"topic":"TopicTest","subString":"*","tagsSet":[],"codeSet":[],"subVersion":0}],' \
            b'"unitMode":false}],"producerDataSet":[{"groupName":"pg"}]}'
    if choice == 3:
        return ('"' + '\\"' * rng.choice((100, 2000, 20000))).encode()
    if choice == 4:
        return deep_json(rng.choice((100, 300, 990, 1100)), rng).encode()
    if choice == 5:
        return b"productEnvName=center\\nkvConfigPath=/tmp/fz-injected\n" + (b"a\\\n" * rng.choice((1, 100, 5000)))
    if choice == 6:
        key = rng.choice(_CONFIG_KEYS)
        return f"{key}={rng.choice((plausible_string(rng), nasty_string(rng)))}\n".encode("utf-8", "replace")
    if choice == 7:
        return b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":1},' \
            b'"topicConfigTable":{"T":{"topicName":"T","readQueueNums":2147483648,"writeQueueNums":-1,"perm":99}},' \
            b'"topicQueueMappingInfoMap":' + deep_json(rng.choice((40, 990)), rng).encode() + b"},\"filterServerList\":[]}"
    return rng.randbytes(rng.randrange(0, 64))


def _body(code: int, rng: random.Random) -> bytes:
    if code == 103 and rng.random() < 0.7:
        return _register_body(rng)[0]
    if code in (10, 310, 320):
        return rng.randbytes(rng.choice((0, 10, 200)))
    if code == 318 or code == 25:
        return _json_body(rng) if rng.random() < 0.3 else f"{rng.choice(_CONFIG_KEYS)}={plausible_string(rng)}\n".encode()
    if rng.random() < 0.5:
        return _json_body(rng)
    return b""


def template(code: int, rng: random.Random) -> tuple[dict[str, str], bytes]:
    """A plausible request of ``code``: a header that a real peer might send and a fitting body."""
    if code in (10, 310, 320):
        ext = _send_ext(rng)
        if code == 10:
            long_names = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
                          "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "batch", "brokerName")
            ext = {long_names[i]: v for i, v in enumerate(ext.values()) if i < len(long_names)}
        return ext, _body(code, rng)
    keys = rng.sample(sorted(_COMMON_EXT), rng.randrange(2, 9))
    ext = {k: _COMMON_EXT[k](rng) for k in keys}
    if code == FAULT_CODE:
        ext["action"] = rng.choice(SAFE_FAULT_ACTIONS)
    if code == 103:
        body, compressed = _register_body(rng)
        ext.update(brokerName=_COMMON_EXT["brokerName"](rng), brokerAddr=_COMMON_EXT["brokerAddr"](rng),
                   clusterName="DefaultCluster", brokerId="0", compressed="true" if compressed else "false")
        if rng.random() < 0.7:
            ext["bodyCrc32"] = str(zlib.crc32(body) & 0x7FFFFFFF)
        return ext, body
    return ext, _body(code, rng)


# --------------------------------------------------------------------------
# the three families


def _random_bytes(rng: random.Random, opaque: int) -> tuple[str, int | None, bytes]:
    if rng.random() < 0.5:
        return "random-bytes", None, rng.randbytes(rng.randrange(1, 300))
    # a plausible length prefix and header word, random inside
    payload = rng.randbytes(rng.randrange(0, 300))
    header_len = rng.choice((0, 1, 4, len(payload), len(payload) + 1, 0xFFFFFF, rng.randrange(0, 400)))
    stype = rng.choice((0, 1, 1, 2, 255))
    length = rng.choice((len(payload) + 4, len(payload) + 4, 0, 3, 2**31, 0xFFFFFFFF))
    return "random-framed", None, struct.pack(">II", length, (stype << 24) | (header_len & 0xFFFFFF)) + payload


def _random_value(rng: random.Random, depth: int = 0) -> object:
    pick = rng.randrange(10)
    if pick == 0:
        return rng.choice((0, 1, -1, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 2**64 - 1))
    if pick == 1:
        return rng.random() * rng.choice((1, 1e300))
    if pick == 2:
        return rng.choice((True, False, None))
    if pick == 3 and depth < 3:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    if pick == 4 and depth < 3:
        return {plausible_string(rng): _random_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))}
    if pick == 5:
        return nasty_string(rng)
    return plausible_string(rng)


def _random_header(rng: random.Random, codes: Sequence[int], opaque: int) -> tuple[str, int | None, bytes]:
    code = rng.choice(codes) if rng.random() < 0.8 else rng.randrange(-40000, 40000)
    if rng.random() < 0.5:
        fields: dict[str, object] = {}
        for key in ("code", "language", "version", "opaque", "flag", "remark", "extFields", "serializeTypeCurrentRPC"):
            if rng.random() < 0.7:
                fields[key] = _random_value(rng)
        if rng.random() < 0.7:
            fields["code"] = code
        if rng.random() < 0.8:
            fields["opaque"] = opaque
        if isinstance(fields.get("extFields"), dict) or rng.random() < 0.5:
            fields["extFields"] = {k: _random_value(rng) for k in rng.sample(sorted(_COMMON_EXT), rng.randrange(0, 6))}
        try:
            header = json_header(fields)
        except (TypeError, orjson.JSONEncodeError):
            header = b'{"code":%d,"opaque":%d,"extFields":{"topic":%s}}' % (code, opaque, deep_json(300, rng).encode())
        return "random-json-header", code, frame_bytes(header, rng.randbytes(rng.randrange(0, 32)))
    ext = {plausible_string(rng): (nasty_string(rng) if rng.random() < 0.5 else plausible_string(rng))
           for _ in range(rng.randrange(0, 6))}
    header = binary_header(code, opaque, ext, flag=rng.choice((0, 1, 2, 3, -1)), version=rng.randrange(-2, 500),
                           language=rng.randrange(-1, 20), remark=rng.randbytes(rng.randrange(0, 8)))
    if rng.random() < 0.3:  # lie about the lengths inside
        header = bytearray(header)
        pos = rng.randrange(0, len(header))
        header[pos] = rng.randrange(256)
        header = bytes(header)
    return "random-binary-header", code, frame_bytes(header, rng.randbytes(rng.randrange(0, 32)), 1)


def _mutate_fields(ext: dict[str, str], rng: random.Random) -> dict[str, object]:
    out: dict[str, object] = dict(ext)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(5)
        if op == 0 and out:
            out.pop(rng.choice(sorted(out)))
        elif op == 1:
            out[rng.choice(sorted(_COMMON_EXT))] = nasty_string(rng)
        elif op == 2 and out:
            out[rng.choice(sorted(out))] = nasty_string(rng)
        elif op == 3 and out:
            out[rng.choice(sorted(out))] = _random_value(rng)
        else:
            out[plausible_string(rng)] = plausible_string(rng)
    return out


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randrange(1, 6)):
        op = rng.randrange(6)
        if op == 0 and buf:
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        elif op == 1 and buf:
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        elif op == 2:
            del buf[rng.randrange(len(buf) + 1):]
        elif op == 3:
            buf[0:4] = struct.pack(">I", max(0, len(buf) - 4 + rng.choice((-8, -1, 1, 8, 1 << 20))))
        elif op == 4 and len(buf) >= 8:
            buf[4:8] = struct.pack(">I", rng.randrange(0, 2**32))
        else:
            buf += rng.randbytes(rng.randrange(1, 16))
    return bytes(buf)


def _mutated_valid(rng: random.Random, codes: Sequence[int], opaque: int) -> tuple[str, int | None, bytes]:
    code = rng.choice(codes)
    ext, body = template(code, rng)
    if rng.random() < 0.7:
        fields: dict[str, object] = _mutate_fields(ext, rng) if rng.random() < 0.8 else dict(ext)
        if code == FAULT_CODE and fields.get("action") not in SAFE_FAULT_ACTIONS:
            fields["action"] = "status"
        if rng.random() < 0.3:
            body = _json_body(rng) if rng.random() < 0.5 else _mutate_bytes(body, rng)
        flag = rng.choice((0, 0, 0, 2, 1, 3))
        version = rng.choice((453, 453, 399, 0, -1, 10000))
        if rng.random() < 0.5:
            header_fields: dict[str, object] = {"code": code, "language": "JAVA", "version": version,
                                                "opaque": opaque, "flag": flag, "extFields": fields}
            try:
                header = json_header(header_fields)
            except (TypeError, orjson.JSONEncodeError):
                header = json_header({"code": code, "opaque": opaque, "extFields": ext})
            return "mutated-json", code, frame_bytes(header, body)
        text_fields = {k: v if isinstance(v, str) else orjson.dumps(v, default=str).decode() for k, v in fields.items()}
        header = binary_header(code, opaque, text_fields, flag=flag, version=version)
        return "mutated-binary", code, frame_bytes(header, body, 1)
    if rng.random() < 0.5:
        data = frame_bytes(json_header({"code": code, "opaque": opaque, "extFields": ext, "version": 453}), body)
    else:
        data = frame_bytes(binary_header(code, opaque, ext), body, 1)
    return "mutated-bytes", code, _mutate_bytes(data, rng)


def make_frame(seed: int, index: int, codes: Sequence[int]) -> Frame:
    """Frame ``index`` of the run with ``seed``, built from the server's handled ``codes``."""
    rng = random.Random(seed * 1_000_003 + index)
    opaque = index + 1
    pick = rng.random()
    if pick < 0.15:
        kind, code, data = _random_bytes(rng, opaque)
    elif pick < 0.40:
        kind, code, data = _random_header(rng, codes, opaque)
    elif pick < 0.50 and REGISTER_BROKER in codes:
        code = REGISTER_BROKER
        kind, data = register_frame(rng, opaque)
    else:
        kind, code, data = _mutated_valid(rng, codes, opaque)
    return Frame(index, kind, code, data)
