"""Find the topic table inside a raw REGISTER_BROKER body and cut it into chunks.

Why: every broker re-sends its whole topic table on each registration
(1.7 MB of JSON for 10,000 topics) and usually nothing, or one topic, in
it changed. Parsing all of it costs about 8 ms of event-loop time, so
instead the table's bytes are cut at topic boundaries into chunks of about
``CHUNK_BYTES`` (compact form: :data:`namesrv.registration.compact.CHUNK_ITEMS`
topics), every chunk is hashed, and the plan compares only the chunks it
has not seen from that broker, and parses only those no broker sent before
(:mod:`namesrv.registration.topics`). Chunk
boundaries are found again on the next registration by searching for the
same topic keys (the "anchors", :func:`locate`), so adding or removing a
topic changes one chunk, not every chunk after it. This module holds the
cut (:class:`Scan`, :class:`Chunk`) and the JSON form; the compressed form
is :mod:`namesrv.registration.compact`'s.

Nothing here trusts a cut. A JSON chunk is parsed as a topic table of its
own, and the body with an empty topic table must parse as a whole: a
JSON member list split at commas between members gives back exactly the
members of the whole, so if every piece parses, the union is what a full
parse gives (a wrong cut leaves a piece that does not parse). A JSON body
laid out differently from what Java and our brokers write (whitespace,
another key order, a cut that fails) gets ``None`` and is parsed whole,
within ``registerBodyMaxWholeParseBytes``.

Every step of a scan advances or fails: anchor searches are bounded in
bytes, and what a scan keeps (runs, chunks, cuts) is bounded by the topics
the body declares. All of it yields between slices of SCAN_SLICE_BYTES
bytes or SCAN_SLICE_ITEMS items.

Parsing always goes through the caller's ``parse`` function (the
NameServer's ``parse_register_body``), on small synthetic bodies, so every
check it makes applies to chunks too. The module does no I/O and keeps no
state; chunk digests are Python's ``hash`` of the bytes (SipHash with a
per-process key: a 64-bit collision is what it would take to miss a
change or to take another chunk's topics, and a broker cannot aim for one
without the key).
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Callable, Generator
from dataclasses import dataclass

from remoting.bodies import BodyError
from remoting.codes import Version
from remoting.fastjson import BodyLimitError
from remoting.register_body import RegisterBody

#: Target size of a JSON chunk: about 95 topics of a Java broker's table,
#: parsed in about 0.1 ms when it changed.
CHUNK_BYTES = 16 * 1024
#: A chunk that grew past this many times the target is cut again.
SPLIT_FACTOR = 4
#: Longest topic key an anchor may hold (longer keys are not used as anchors).
MAX_ANCHOR_KEY = 255
#: Bytes hashed or searched between two yields of a scan.
SCAN_SLICE_BYTES = 1024 * 1024
#: Compact items walked between two yields of a scan.
SCAN_SLICE_ITEMS = 4096
#: Non-anchor ``},"`` passed over between two yields while cutting a JSON table afresh.
CUT_SLICE_CANDIDATES = 4096
#: An anchor search covers at most this many times the table's bytes in all; anchors not
#: found by then are dropped (their chunks merge with the one before: only efficiency is lost).
SEARCH_BUDGET_FACTOR = 4
#: How far from the end the keys that follow the topic table are looked for.
TAIL_WINDOW = 4096
#: Keys (colons) allowed outside the topic table: static-topic mappings hold at most
#: 65,536 currIdMap entries (remoting.register_body), each info a handful of keys more.
MAX_REST_KEYS = 4 * 65_536

#: (body, compressed, version) -> the parsed body; raises BodyError.
ParseBody = Callable[[bytes, bool, int], RegisterBody]
Topics = dict[str, tuple[int, int, int, int]]

_STR = rb'"(?:[^"\\]|\\.)*"'
_DV = rb'\{(?:"[A-Za-z]+":-?\d+(?:,"[A-Za-z]+":-?\d+)*)?\}'
_WRAPPER_HEAD = rb'(?:"dataVersion":' + _DV + rb",)?(?:\"mappingDataVersion\":" + _DV + rb',)?"topicConfigTable":\{'
#: RegisterBrokerBody as fastjson writes it (keys sorted, no whitespace), up to the topic table's "{".
_BODY_HEAD = re.compile(
    rb'\{(?:"filterServerList":\[(?:' + _STR + rb"(?:," + _STR + rb')*)?\],)?"topicConfigSerializeWrapper":\{'
    + _WRAPPER_HEAD
)
#: The bare TopicConfigSerializeWrapper of brokers before 3.0.11.
_WRAPPER_ONLY_HEAD = re.compile(rb"\{" + _WRAPPER_HEAD)
_AFTER_TABLE = (b'},"topicQueueMappingDetailMap":', b'},"topicQueueMappingInfoMap":')
#: A length or a count in the compact form (big-endian, as Java writes it).
I32 = struct.Struct(">i")


@dataclass(slots=True)
class Chunk:
    """A run of whole topics: ``data[start:end]`` of the scan."""

    start: int
    end: int
    digest: int
    items: int = -1  # compact form: how many topic items it holds


@dataclass(slots=True)
class Scan:
    """A body whose topic table was located and cut (its topics not parsed yet)."""

    form: str  # "json" or "compact": chunks of one form never match the other's
    rest: RegisterBody  # everything but the topics
    data: bytes  # what chunk offsets index: the body, or the inflated compact body
    chunks: list[Chunk]
    anchors: list[bytes]  # the search keys of the cuts between chunks
    version: int
    parse: ParseBody
    declared_topics: int = -1  # compact form: the count the body states
    max_topics: int | None = None  # more topics than this: BodyError

    def parse_chunk(self, chunk: Chunk) -> Topics:
        """The topics of one chunk, through the caller's parser (BodyError if bad)."""
        piece = memoryview(self.data)[chunk.start : chunk.end]
        if self.form == "json":
            return self.parse(b'{"topicConfigTable":{' + piece + b"}}", False, 0).topics
        tail = b"\x00\x00\x00\x02[]" + (b"\x00\x00\x00\x00" if self.version >= Version.V5_0_0 else b"")
        synthetic = b"\x00\x00\x00\x02{}" + I32.pack(chunk.items) + piece + tail
        return self.parse(zlib.compress(synthetic, 0), True, self.version).topics


def digest_of(view: memoryview, start: int, end: int) -> int:
    """The digest of ``view[start:end]`` that names a chunk (see the module docstring)."""
    return hash(view[start:end])


# --------------------------------------------------------------------------
# anchors, and the JSON form


def _json_anchor(data: bytes, brace: int, hi: int) -> bytes | None:
    """The anchor ``},"key":{`` at ``brace`` if a plain topic key starts there."""
    key = brace + 3
    close = data.find(b'":{', key, min(key + MAX_ANCHOR_KEY + 3, hi))
    if close <= key or data.find(b'"', key, close) != -1:
        return None
    return data[brace : close + 3]


def _json_cuts(data: bytes, lo: int, hi: int) -> Generator[None, None, list[tuple[int, bytes]]]:
    """Fresh cuts in ``data[lo:hi]`` about every CHUNK_BYTES: (comma position, anchor).

    A body can hold millions of ``},"`` that are no topic boundary (inside
    strings, or before keys that make no anchor): each is a step of Python,
    so the search yields every CUT_SLICE_CANDIDATES of them.
    """
    cuts: list[tuple[int, bytes]] = []
    pos = lo
    passed = 0
    while True:
        brace = data.find(b'},"', pos + CHUNK_BYTES, hi)
        anchor = None
        while brace != -1:
            anchor = _json_anchor(data, brace, hi)
            if anchor is not None:
                break
            brace = data.find(b'},"', brace + 3, hi)
            passed += 1
            if passed >= CUT_SLICE_CANDIDATES:
                passed = 0
                yield
        if brace == -1 or anchor is None:
            return cuts
        cuts.append((brace + 1, anchor))
        pos = brace + 1
        passed += 1
        if passed >= CUT_SLICE_CANDIDATES:
            passed = 0
            yield


def locate(data: bytes, anchors: list[bytes], lo: int, hi: int) -> Generator[None, None, list[tuple[int, bytes]]]:
    """Where the previous cut's anchors are now, in order from ``lo``: (position, anchor).

    Each anchor is searched from just after the one found before it, so an
    anchor that is gone (its topic left, or every topic is new) costs a
    search to ``hi``: with hundreds of anchors that was seconds of loop time
    in one go (a 200,000-topic broker re-registering new topics). Searches
    run in windows of SCAN_SLICE_BYTES with a yield between them, and all of
    them together cover at most SEARCH_BUDGET_FACTOR times the table: then
    the remaining anchors are dropped and those parts are cut afresh.
    """
    found: list[tuple[int, bytes]] = []
    budget = SEARCH_BUDGET_FACTOR * (hi - lo) + SCAN_SLICE_BYTES
    since_yield = 0
    pos = lo
    for anchor in anchors:
        start = pos
        at = -1
        while budget > 0:
            end = min(hi, start + SCAN_SLICE_BYTES + len(anchor))
            at = data.find(anchor, start, end)
            covered = (at + len(anchor) if at != -1 else end) - start
            budget -= covered
            since_yield += covered
            if since_yield >= SCAN_SLICE_BYTES:
                since_yield = 0
                yield
            if at != -1 or end >= hi:
                break
            start = end - len(anchor) + 1  # windows overlap by less than an anchor: none is missed
        if at != -1:
            found.append((at, anchor))
            pos = at + len(anchor)
        if budget <= 0:
            break
    return found


def _table_end(data: bytes, tstart: int, closer: bytes) -> int:
    """Where the topic table's closing brace should be (checked by parsing later)."""
    lo = max(tstart - 1, len(data) - TAIL_WINDOW)
    for key in _AFTER_TABLE:
        at = data.find(key, lo)
        if at != -1:
            return at
    for key in _AFTER_TABLE:  # a long tail (large static-topic mappings)
        at = data.find(key, tstart - 1)
        if at != -1:
            return at
    if data.endswith(closer):
        return len(data) - len(closer)
    return -1


def scan_json(
    body: bytes, version: int, anchors: list[bytes], parse: ParseBody, max_topics: int | None = None
) -> Generator[None, None, Scan | None]:
    """Cut a JSON register body; ``anchors`` are the previous cut's search keys."""
    head = (_BODY_HEAD if version >= Version.V3_0_11 else _WRAPPER_ONLY_HEAD).match(body)
    if head is None:
        return None
    tstart = head.end()
    tend = _table_end(body, tstart, b"}}}" if version >= Version.V3_0_11 else b"}}")
    if tend < tstart or body[tend] != 0x7D:
        return None
    if body.find(b'"topicConfigTable"', tend) != -1 or body.find(b'"topicConfigSerializeWrapper"', tend) != -1:
        return None  # a repeated key would win in a full parse
    # Everything but the topic table (data version, filter servers, static-topic
    # mappings) is small in a real body: count its keys (C speed) before parsing it.
    keys = body.count(b":", 0, tstart) + body.count(b":", tend)
    if keys > MAX_REST_KEYS:
        raise BodyLimitError(
            f"register body holds {keys} keys outside its topic table (static-topic mappings,"
            f" currIdMap entries and all), more than {MAX_REST_KEYS}"
        )
    try:
        rest = parse(body[:tstart] + memoryview(body)[tend:], False, version)
    except BodyError:
        return None
    if rest.topics:
        return None

    # An anchor not found (that topic left or changed its key): its chunk merges with the one before.
    cuts = [(at + 1, anchor) for at, anchor in (yield from locate(body, anchors, tstart, tend))]
    bounds = [tstart - 1] + [c for c, _ in cuts] + [tend]
    # Cut again where chunks grew (topics added, anchors lost) or none exist yet.
    out_cuts: list[tuple[int, bytes]] = []
    for i in range(len(bounds) - 1):
        lo, hi = bounds[i] + 1, bounds[i + 1]
        if i:
            out_cuts.append(cuts[i - 1])
        if hi - lo > SPLIT_FACTOR * CHUNK_BYTES or not anchors:
            out_cuts.extend((yield from _json_cuts(body, lo, hi)))
    view = memoryview(body)
    chunks: list[Chunk] = []
    starts = [tstart] + [c + 1 for c, _ in out_cuts]
    ends = [c for c, _ in out_cuts] + [tend]
    hashed = 0
    for start, end in zip(starts, ends):
        if end > start:
            chunks.append(Chunk(start, end, digest_of(view, start, end)))
            hashed += end - start
            if hashed >= SCAN_SLICE_BYTES:
                hashed = 0
                yield
    return Scan("json", rest, body, chunks, [a for _, a in out_cuts], version, parse, max_topics=max_topics)
