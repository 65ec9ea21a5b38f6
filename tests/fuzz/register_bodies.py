"""Structure-aware REGISTER_BROKER frames: a valid header, a body broken where its structure is.

Why: flipping bytes of a compressed body almost always breaks the zlib
stream, so random mutation never gets a corrupted *item table* past
inflation; and a JSON body flipped at random rarely keeps the layout the
NameServer's chunk scan (``namesrv/registration/scan.py``) looks for, so the
scan's cutting never meets a hostile body. Here a body is built from its
parts (compressed form: data version, topic count, length-prefixed topic
items, filter servers, mapping infos; JSON form: the text as brokers lay it
out, one entry per topic), the parts are corrupted (counts, lengths, item
boundaries, truncation, duplicated, dropped and odd items, keys repeated or
reordered) and only then compressed, sometimes into a bad zlib stream.

Half of the frames first register a valid body of the same broker (two
requests in one frame), so the corrupted body meets a table that remembers
that broker's chunks: the incremental scan (anchors, known chunk digests)
is fuzzed too, not only a first registration.

Pure and deterministic, like :mod:`tests.fuzz.frames`: everything comes
from the ``random.Random`` the caller passes.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Callable

import orjson

from remoting.bodies import DataVersion, TopicConfig
from remoting.register_body import encode_register_body
from tests.fuzz.encoding import binary_header, frame_bytes, json_header

_I32 = struct.Struct(">i")
REGISTER_BROKER = 103
#: Header versions: 5.3.3, 5.0.0 (mapping infos in the compressed form), 4.9.4 (none), 3.0.11, 3.0.10 (bare wrapper).
VERSIONS = (479, 479, 479, 413, 401, 37, 36)
_V5_0_0 = 413
_V3_0_11 = 37
#: Opaque offset of the second request in a two-request frame (fits an int32 for any frame index).
SECOND_OPAQUE = 1 << 30

Segment = tuple[str, bytes]  # (kind, bytes as written): "dv", "count", "item", "fs", "mcount", "mapping"


def _lp(data: bytes) -> bytes:
    return _I32.pack(len(data)) + data


def base_topics(rng: random.Random) -> list[TopicConfig]:
    """A broker's topic table: few topics, or enough for several chunks (256 items, 16 KB of JSON)."""
    count = rng.choice((0, 1, 2, 7, 60, 300, 600))
    prefix = rng.choice(("FzT", "fz-topic-", "%RETRY%fz", "T"))
    return [
        TopicConfig(f"{prefix}{i}", read_queue_nums=rng.choice((1, 4, 8)), write_queue_nums=8, perm=6)
        for i in range(count)
    ]


def evolve(topics: list[TopicConfig], rng: random.Random) -> list[TopicConfig]:
    """The same broker's table a little later: some topics added, dropped or changed."""
    out = list(topics)
    for _ in range(rng.randrange(0, 4)):
        op = rng.randrange(3)
        if op == 0:
            out.insert(rng.randrange(len(out) + 1), TopicConfig(f"FzNew{rng.randrange(10_000)}", 4, 4, 6))
        elif op == 1 and out:
            del out[rng.randrange(len(out))]
        elif out:
            i = rng.randrange(len(out))
            old = out[i]
            out[i] = TopicConfig(old.topic_name, old.read_queue_nums % 16 + 1, old.write_queue_nums, old.perm)
    return out


# --------------------------------------------------------------------------
# the compressed form


def compact_segments(topics: list[TopicConfig], dv: DataVersion, version: int, rng: random.Random) -> list[Segment]:
    """The parts of an inflated compressed body, each as written (length prefix included)."""
    attrs = version >= _V5_0_0
    segs: list[Segment] = [("dv", _lp(dv.encode())), ("count", _I32.pack(len(topics)))]
    segs += [("item", _lp(tc.encode_compact(with_attributes=attrs).encode())) for tc in topics]
    servers = rng.choice(([], [], ["127.0.0.1:1"]))
    segs.append(("fs", _lp(orjson.dumps(servers))))
    if version >= _V5_0_0:
        infos = []
        if rng.random() < 0.2:
            infos = [orjson.dumps({"bname": "fz", "currIdMap": {"0": 0}, "epoch": 1, "topic": "FzT0", "totalQueues": 1})]
        segs.append(("mcount", _I32.pack(len(infos))))
        segs += [("mapping", _lp(info)) for info in infos]
    return segs


def _items(segs: list[Segment]) -> list[int]:
    return [i for i, (kind, _) in enumerate(segs) if kind == "item"]


def _set_count(segs: list[Segment], rng: random.Random) -> None:
    n = len(_items(segs))
    value = rng.choice((n + 1, n + 2, n + 3, n + 4, n + 5, n + 50, n - 1, 0, -1, 2**31 - 1, -(2**31), 200_000, 200_001))
    for i, (kind, _) in enumerate(segs):
        if kind == "count":
            segs[i] = ("count", _I32.pack(value))


def _bad_length(segs: list[Segment], rng: random.Random) -> None:
    prefixed = [i for i, (kind, _) in enumerate(segs) if kind in ("dv", "item", "fs", "mapping")]
    if not prefixed:
        return
    i = rng.choice(prefixed)
    kind, data = segs[i]
    size = len(data) - 4
    value = rng.choice((size + 1, size - 1, size + 4, size - 4, 0, -1, -4, 2**31 - 1, size * 2, 1 << 24))
    segs[i] = (kind, _I32.pack(value) + data[4:])


def _merge_items(segs: list[Segment], rng: random.Random) -> None:
    """Two neighbours under one length prefix: the second's prefix becomes text."""
    items = _items(segs)
    pairs = [i for i in items if i + 1 < len(segs)]
    if not pairs:
        return
    i = rng.choice(pairs)
    first, second = segs[i][1], segs[i + 1][1]
    segs[i : i + 2] = [("item", _lp(first[4:] + second))]


def _split_item(segs: list[Segment], rng: random.Random) -> None:
    items = _items(segs)
    if not items:
        return
    i = rng.choice(items)
    text = segs[i][1][4:]
    cut = rng.randrange(len(text) + 1)
    segs[i : i + 1] = [("item", _lp(text[:cut])), ("item", _lp(text[cut:]))]


def _duplicate(segs: list[Segment], rng: random.Random) -> None:
    items = _items(segs)
    if not items:
        return
    start = rng.choice(items)
    run = segs[start : start + rng.choice((1, 1, 3, 300))]
    at = rng.choice((start, rng.choice(items)))
    segs[at:at] = run * rng.choice((1, 2, 5))


def _drop(segs: list[Segment], rng: random.Random) -> None:
    items = _items(segs)
    if items:
        start = rng.choice(items)
        del segs[start : start + rng.choice((1, 2, 257))]


def _odd_item(segs: list[Segment], rng: random.Random) -> None:
    text = rng.choice((
        b"", b" ", b"FzOdd", b"FzOdd 1 1 6", b"FzOdd 1 1 6 SINGLE_TAG {}", b"\xff\xfe 1 1 6 SINGLE_TAG",
        b"FzOdd 99999999999 1 6 SINGLE_TAG", b"FzOdd -1 -1 -1 SINGLE_TAG {}", b"A" * 300 + b" 1 1 6 SINGLE_TAG",
        b"FzOdd 1 1 6 SINGLE_TAG " + b"{" * 40, b"\x00\x00\x00\x05 1 1 6 SINGLE_TAG",
    ))
    items = _items(segs) or [2]
    at = rng.choice(items)
    segs[at:at] = [("item", _lp(text))] * rng.choice((1, 1, 2, 600))


def _drop_tail(segs: list[Segment], rng: random.Random) -> None:
    tail = [i for i, (kind, _) in enumerate(segs) if kind in ("fs", "mcount", "mapping")]
    if tail:
        del segs[rng.choice(tail) :]


def _bad_mcount(segs: list[Segment], rng: random.Random) -> None:
    for i, (kind, _) in enumerate(segs):
        if kind == "mcount":
            segs[i] = ("mcount", _I32.pack(rng.choice((1, 2, -1, 2**31 - 1, 65_537))))


def _bad_dv(segs: list[Segment], rng: random.Random) -> None:
    segs[0] = ("dv", _lp(rng.choice((b"", b"{}", b"[]", b'{"counter":"x"}', b"{" * 50, b'{"counter":1,"timestamp":1'))))


_COMPACT_OPS: tuple[Callable[[list[Segment], random.Random], None], ...] = (
    _set_count, _set_count, _bad_length, _merge_items, _split_item, _duplicate, _drop, _odd_item,
    _drop_tail, _bad_mcount, _bad_dv,
)


def _zlib(data: bytes, rng: random.Random) -> bytes:
    """Compress ``data``, most often properly, sometimes into a broken or odd stream."""
    level = rng.choice((0, 1, 6, 9))
    pick = rng.randrange(12)
    if pick == 0:  # cut short
        whole = zlib.compress(data, level)
        return whole[: rng.randrange(len(whole))]
    if pick == 1:  # a flipped bit somewhere
        buf = bytearray(zlib.compress(data, level))
        buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        return bytes(buf)
    if pick == 2:  # wrong Adler-32
        whole = zlib.compress(data, level)
        return whole[:-4] + bytes(b ^ 0x5A for b in whole[-4:])
    if pick == 3:  # bytes after the end of the stream
        return zlib.compress(data, level) + rng.choice((b"\x00", rng.randbytes(16), zlib.compress(data)))
    if pick == 4:  # raw deflate or gzip instead of zlib
        comp = zlib.compressobj(level, zlib.DEFLATED, rng.choice((-15, 31)))
        return comp.compress(data) + comp.flush()
    if pick == 5:  # stored blocks whose LEN/NLEN disagree
        buf = bytearray(zlib.compress(data, 0))
        if len(buf) > 6:
            buf[rng.choice((3, 4, 5, 6))] ^= 0xFF
        return bytes(buf)
    if pick == 6:  # flushed in pieces (many blocks, empty stored blocks between them)
        comp = zlib.compressobj(level)
        out = bytearray()
        for pos in range(0, len(data), 97):
            out += comp.compress(data[pos : pos + 97]) + comp.flush(zlib.Z_SYNC_FLUSH)
        return bytes(out + comp.flush())
    return zlib.compress(data, level)


def compact_body(topics: list[TopicConfig], dv: DataVersion, version: int, rng: random.Random) -> bytes:
    """A compressed body with 1 to 3 structural faults (or none, now and then)."""
    segs = compact_segments(topics, dv, version, rng)
    for _ in range(rng.choice((0, 1, 1, 1, 2, 3))):
        rng.choice(_COMPACT_OPS)(segs, rng)
    data = b"".join(d for _, d in segs)
    if rng.random() < 0.15:  # cut at a byte, or just after a part
        data = data[: rng.randrange(len(data) + 1)]
    if rng.random() < 0.1:
        data += rng.choice((b"\x00\x00\x00\x00", _lp(b"FzExtra 1 1 6 SINGLE_TAG {}"), rng.randbytes(7)))
    return _zlib(data, rng)


# --------------------------------------------------------------------------
# the JSON form


def _entry(tc: TopicConfig) -> bytes:
    return orjson.dumps(tc.topic_name) + b":" + orjson.dumps(tc.to_obj(), option=orjson.OPT_SORT_KEYS)


_ODD_ENTRIES = (
    b'"FzOdd":{}',
    b'"FzOdd":[]',
    b'"FzOdd":{"readQueueNums":2147483648,"perm":"6"}',
    b'"Fz\\"},\\"x\\":{":{"topicName":"q"}',  # a key holding what a cut searches for
    b'"FzOdd},\\"topicQueueMappingInfoMap\\":":{}',
    b'"FzOdd":{"topicName":"FzT0","readQueueNums":1}',  # another topic's name inside
    b'"\\u0046zT0":{"readQueueNums":3}',  # an escaped spelling of an existing key
    b'"FzOdd":' + b'{"a":' * 40 + b"1" + b"}" * 40,
    b'"FzOdd" : { "readQueueNums" : 1 }',
    b'"' + b"L" * 300 + b'":{}',
)


def json_body(topics: list[TopicConfig], dv: DataVersion, version: int, rng: random.Random) -> bytes:
    """A JSON body laid out as brokers write it, with 1 to 3 structural faults (or none)."""
    entries = [_entry(tc) for tc in topics]
    dv_text = orjson.dumps(dv.to_obj())
    mapping = b""
    for _ in range(rng.choice((0, 1, 1, 1, 2, 3))):
        op = rng.randrange(10)
        if op == 0 and entries:  # the same topic again, beside it or far away
            i = rng.randrange(len(entries))
            entries.insert(rng.choice((i, rng.randrange(len(entries) + 1))), entries[i])
        elif op == 1 and entries:
            i = rng.randrange(len(entries))
            del entries[i : i + rng.choice((1, 2, 200))]
        elif op == 2:
            entries.insert(rng.randrange(len(entries) + 1), rng.choice(_ODD_ENTRIES))
        elif op == 3 and entries:  # a separator or brace lost or doubled
            i = rng.randrange(len(entries))
            entries[i] = rng.choice((entries[i][:-1], entries[i] + b",", entries[i] + b"}", b"," + entries[i]))
        elif op == 4 and entries:  # whitespace where brokers write none
            i = rng.randrange(len(entries))
            entries[i] = entries[i].replace(b":", b" : ", 1)
        elif op == 5:
            mapping = b',"topicQueueMappingInfoMap":' + rng.choice((
                b"{}", b"[]", b'{"FzT0":{"bname":"fz","currIdMap":{"0":0},"topic":"FzT0","totalQueues":1}}',
                b'{"x":' + b"[" * 60 + b"]" * 60 + b"}",
            ))
        elif op == 6:
            dv_text = rng.choice((b"{}", b'{"counter":-1}', b'{"timestamp":1,"counter":2}', b'{"counter":1.5}'))
        elif op == 7 and entries:  # entries shuffled (a cut's anchor moves)
            rng.shuffle(entries)
        elif op == 8:  # numbers of a real entry pushed past Java's int
            i = rng.randrange(len(entries)) if entries else -1
            if i >= 0:
                entries[i] = entries[i].replace(b'"writeQueueNums":8', b'"writeQueueNums":9999999999')
        else:
            entries.extend(entries[: rng.choice((1, 50, 400))])
    table = b'"topicConfigTable":{' + b",".join(entries) + b"}"
    wrapper_parts = [b'"dataVersion":' + dv_text, table]
    if rng.random() < 0.1:
        wrapper_parts.reverse()  # another key order
    if rng.random() < 0.05:
        wrapper_parts.append(b'"topicConfigTable":{"FzDup":{}}')  # a repeated key (the last wins in a full parse)
    wrapper = b"{" + b",".join(wrapper_parts) + mapping + b"}"
    if version < _V3_0_11:
        body = wrapper
    else:
        body = b'{"filterServerList":' + rng.choice((b"[]", b'["127.0.0.1:1"]', b"[1]")) + b',"topicConfigSerializeWrapper":' + wrapper + b"}"
    if rng.random() < 0.1:
        body = body[: rng.randrange(len(body) + 1)]
    return body


# --------------------------------------------------------------------------
# the frames


def _request(opaque: int, name: str, addr: str, body: bytes, compressed: bool, version: int, rng: random.Random) -> bytes:
    """A REGISTER_BROKER request whose header a real broker could have sent (JSON or binary header)."""
    ext = {
        "brokerName": name, "brokerAddr": addr, "clusterName": "FuzzCluster", "brokerId": "0",
        "haServerAddr": "127.0.0.1:1", "compressed": "true" if compressed else "false",
    }
    if version >= _V5_0_0:
        ext["enableActingMaster"] = "false"
    if rng.random() < 0.8:
        ext["bodyCrc32"] = str(zlib.crc32(body) & 0x7FFFFFFF)
    if rng.random() < 0.5:
        fields = {"code": REGISTER_BROKER, "language": "JAVA", "version": version, "opaque": opaque, "flag": 0,
                  "extFields": ext}
        return frame_bytes(json_header(fields), body)
    return frame_bytes(binary_header(REGISTER_BROKER, opaque, ext, version=version), body, 1)


def register_frame(rng: random.Random, opaque: int) -> tuple[str, bytes]:
    """One REGISTER_BROKER with a structurally broken body; in "register-pair" a valid one of the same broker first."""
    name = f"fz-reg-{rng.randrange(8)}"
    addr = f"127.0.0.1:{20000 + rng.randrange(8)}"
    version = rng.choice(VERSIONS)
    compressed = rng.random() < 0.6 and version >= _V3_0_11
    topics = base_topics(rng)
    counter = rng.randrange(1, 1000)
    data = b""
    kind = "register-structured"
    if rng.random() < 0.5:
        kind = "register-pair"
        valid = encode_register_body(topics, DataVersion(counter, 1700000000000, 0), compressed=compressed, version=version)
        data += _request(opaque + SECOND_OPAQUE, name, addr, valid, compressed, version, rng)
        topics = evolve(topics, rng)
        counter += rng.choice((0, 1))  # the same data version or the next one
    dv = DataVersion(counter, 1700000000000, 0)
    body = (compact_body if compressed else json_body)(topics, dv, version, rng)
    if rng.random() < 0.03:
        compressed = not compressed  # the flag lies
    return kind, data + _request(opaque, name, addr, body, compressed, version, rng)
