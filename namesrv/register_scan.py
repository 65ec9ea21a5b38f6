"""Find the topic table inside a raw REGISTER_BROKER body and cut it into chunks.

Why: every broker re-sends its whole topic table on each registration
(1.7 MB of JSON for 10,000 topics) and usually nothing, or one topic, in
it changed. Parsing all of it costs about 8 ms of event-loop time, so
instead the table's bytes are cut at topic boundaries into chunks of about
``CHUNK_BYTES`` (compact form: ``CHUNK_ITEMS`` topics), every chunk is
hashed, and the route table parses only the chunks it has not seen from
that broker (see :mod:`namesrv.registration`). Chunk boundaries are found
again on the next registration by searching for the same topic keys (the
"anchors"), so adding or removing a topic changes one chunk, not every
chunk after it.

Nothing here trusts a cut. A JSON chunk is parsed as a topic table of its
own, and the body with an empty topic table must parse as a whole: a
JSON member list split at commas between members gives back exactly the
members of the whole, so if every piece parses, the union is what a full
parse gives (a wrong cut leaves a piece that does not parse). A compact
chunk must hold a whole number of length-prefixed items. A JSON body laid
out differently from what Java and our brokers write (whitespace, another
key order, a cut that fails) gets ``None`` and is parsed whole, within
``registerBodyMaxWholeParseBytes``. A compressed body has one layout: one
that does not scan is malformed and refused with BodyError (a full parse of
the same items would fail the same way), never parsed whole.

Every step of a scan advances or fails: a walk takes at least one item per
pass or raises, anchor searches are bounded in bytes, and what a scan keeps
(runs, chunks, cuts) is bounded by the topics the body declares. All of it
yields between slices of SCAN_SLICE_BYTES bytes or SCAN_SLICE_ITEMS items.

Parsing always goes through the caller's ``parse`` function (the
NameServer's ``parse_register_body``), on small synthetic bodies, so every
check it makes applies to chunks too. The module does no I/O and keeps no
state; chunk digests are Python's ``hash`` of the bytes (SipHash with a
per-process key: a 64-bit collision is what it would take to miss a
change, and a broker cannot aim for one without the key).
"""

from __future__ import annotations

import hashlib
import re
import struct
import zlib
from collections.abc import Callable, Generator
from dataclasses import dataclass

from remoting.bodies import BodyError, DataVersion, RegisterBody
from remoting.fastjson import BodyLimitError
from remoting.codes import Version

#: Target size of a JSON chunk: about 95 topics of a Java broker's table,
#: parsed in about 0.1 ms when it changed.
CHUNK_BYTES = 16 * 1024
#: A chunk that grew past this many times the target is cut again.
SPLIT_FACTOR = 4
#: Target topics per chunk of the compact (compressed) form.
CHUNK_ITEMS = 256
#: Longest topic key an anchor may hold (longer keys are not used as anchors).
MAX_ANCHOR_KEY = 255
#: Bytes hashed or searched between two yields of a scan.
SCAN_SLICE_BYTES = 1024 * 1024
#: Compact items walked between two yields of a scan.
SCAN_SLICE_ITEMS = 4096
#: Inflated bytes produced between two yields (and the bound's check step).
INFLATE_STEP = 1024 * 1024
#: Bytes hashed per step of the whole-body digest.
DIGEST_STEP = 2 * 1024 * 1024
#: Largest inflated compressed body when the caller gives no bound (that of
#: remoting.bodies); the processor passes the bound it parses bodies under.
DEFAULT_MAX_INFLATED = 256 * 1024 * 1024
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
_I32 = struct.Struct(">i")


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
        synthetic = b"\x00\x00\x00\x02{}" + _I32.pack(chunk.items) + piece + tail
        return self.parse(zlib.compress(synthetic, 0), True, self.version).topics


def _digest(view: memoryview, start: int, end: int) -> int:
    return hash(view[start:end])


# --------------------------------------------------------------------------
# JSON


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


def _locate(data: bytes, anchors: list[bytes], lo: int, hi: int) -> Generator[None, None, list[tuple[int, bytes]]]:
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
    cuts = [(at + 1, anchor) for at, anchor in (yield from _locate(body, anchors, tstart, tend))]
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
            chunks.append(Chunk(start, end, _digest(view, start, end)))
            hashed += end - start
            if hashed >= SCAN_SLICE_BYTES:
                hashed = 0
                yield
    return Scan("json", rest, body, chunks, [a for _, a in out_cuts], version, parse, max_topics=max_topics)


# --------------------------------------------------------------------------
# compact (compressed) form


def inflate(
    body: bytes, limit: int, head_ok: Callable[[bytes], bool] | None = None
) -> Generator[None, None, bytes | None]:
    """zlib-inflate in steps (yielding between them), refusing more than ``limit`` bytes.

    ``head_ok`` sees the first step's output; False stops at once (None): a
    body whose start is already wrong is not inflated any further.
    """
    inflater = zlib.decompressobj()
    parts: list[bytes] = []
    total = 0
    pending = body
    try:
        while True:
            part = inflater.decompress(pending, INFLATE_STEP)
            total += len(part)
            if total > limit:
                raise BodyLimitError(f"compressed register body inflates past the size limit ({limit} bytes)")
            if not parts and head_ok is not None and not head_ok(part):
                return None
            parts.append(part)
            pending = inflater.unconsumed_tail
            if inflater.eof or (not pending and not part):
                break
            yield
    except zlib.error as exc:
        raise BodyError(f"compressed body is not a zlib stream: {exc}") from None
    if not inflater.eof:
        raise BodyError("compressed register body is truncated")
    return b"".join(parts)


def _compact_head_problem(head: bytes, max_topics: int | None) -> str | None:
    """What is wrong with the start of an inflated compressed body (None: a data version and a count).

    A data version longer than the first inflate step cannot be judged yet:
    the scan reads it once the body is inflated.
    """
    if len(head) < 8:
        return "it does not start with a data version and a topic count"
    dv_len = _I32.unpack_from(head, 0)[0]
    if dv_len < 0:
        return "its data version has a negative length"
    if 8 + dv_len > len(head):
        return None
    try:
        DataVersion.decode(head[4 : 4 + dv_len])
    except BodyError as exc:
        return f"its data version is not valid ({exc})"
    count = _I32.unpack_from(head, 4 + dv_len)[0]
    if max_topics is not None and count > max_topics:
        raise BodyLimitError(f"register body has {count} topics, more than the limit of {max_topics}")
    return "negative topic count" if count < 0 else None


def _walk(data: bytes, pos: int, count: int, stop: int) -> tuple[int, int]:
    """Skip up to ``count`` items from ``pos`` without passing ``stop``: (items, end).

    At least one item is skipped whenever ``count`` > 0 and ``pos`` < ``stop``
    (an item takes at least its 4-byte length), or BodyError.
    """
    size = len(data)
    n = 0
    unpack = _I32.unpack_from
    while n < count and pos < stop:
        if pos + 4 > size:
            raise BodyError("compressed register body is truncated inside a topic item")
        length = unpack(data, pos)[0]
        end = pos + 4 + length
        if length < 0 or end > size:
            raise BodyError("compressed register body: a topic item runs past the end of the body")
        pos = end
        n += 1
    return n, pos


def _compact_anchor(data: bytes, pos: int) -> bytes | None:
    """The anchor of the item at ``pos``: its length prefix and topic name up to the space."""
    length = _I32.unpack_from(data, pos)[0]
    space = data.find(b" ", pos + 4, min(pos + 4 + length, pos + 5 + MAX_ANCHOR_KEY))
    return None if space == -1 else data[pos : space + 1]


def _runs(
    data: bytes,
    view: memoryview,
    start: int,
    count: int,
    found: list[int],
    known: dict[int, int],
    split: int,
) -> Generator[None, None, list[Chunk]]:
    """Split ``count`` items from ``start`` into chunks (runs of items) ending at ``found`` positions.

    A run whose bytes hash to a digest in ``known`` is taken as that many
    items without walking it (the same bytes were walked before); the rest
    are walked, CHUNK_ITEMS at a time, and a walked run longer than
    ``split`` items is cut at those steps. A found position the walk steps
    over is not an item start and is dropped.

    Every pass of the loop takes at least one item (``left`` falls) or
    raises BodyError, so it ends after at most ``count`` passes and keeps at
    most ``count`` runs: a body that declares more items than it holds runs
    out of bytes and is refused, where it once looped for ever appending
    empty runs. Walking and hashing yield every SCAN_SLICE_ITEMS items and
    SCAN_SLICE_BYTES bytes.
    """
    runs: list[Chunk] = []
    size = len(data)
    left = count
    walked = 0
    hashed = 0
    k = 0
    while left > 0:
        if start >= size:
            raise BodyError(
                f"compressed register body declares {count} topics but holds only {count - left}"
            )
        while k < len(found) and found[k] <= start:
            k += 1
        stop = found[k] if k < len(found) else size
        if k < len(found):
            digest = _digest(view, start, stop)
            items = known.get(digest, 0)
            hashed += stop - start
            if hashed >= SCAN_SLICE_BYTES:
                hashed = 0
                yield
            if 0 < items <= left:
                runs.append(Chunk(start, stop, digest, items))
                left -= items
                start = stop
                continue
        # start < stop here, so the first walk takes an item or raises
        steps: list[tuple[int, int]] = []
        pos, total = start, 0
        while total < left and pos < stop:
            n, pos = _walk(data, pos, min(CHUNK_ITEMS, left - total), stop)
            total += n
            steps.append((pos, n))
            walked += n
            if walked >= SCAN_SLICE_ITEMS:
                walked = 0
                yield
            while pos > stop:  # the walk stepped over a found position: not an item start
                found.pop(k)
                stop = found[k] if k < len(found) else size
        if total <= split:
            steps = [(pos, total)]
        for end, n in steps:
            runs.append(Chunk(start, end, _digest(view, start, end), n))
            hashed += end - start
            start = end
        if hashed >= SCAN_SLICE_BYTES:
            hashed = 0
            yield
        left -= total
    return runs


def _merge_anchorless(
    data: bytes, view: memoryview, chunks: list[Chunk]
) -> Generator[None, None, tuple[list[Chunk], list[bytes]]]:
    """Chunks whose first item has no name to find it by join the chunk before: (chunks, anchors).

    Each merged run is hashed once (hashing it again per chunk joined was
    quadratic in a body of nameless items); yields every SCAN_SLICE_ITEMS
    chunks and SCAN_SLICE_BYTES hashed.
    """
    groups: list[list[Chunk]] = []
    anchors: list[bytes] = []
    for i, chunk in enumerate(chunks):
        anchor = _compact_anchor(data, chunk.start) if i else None
        if i and anchor is None:
            groups[-1].append(chunk)
        else:
            groups.append([chunk])
            if anchor is not None:
                anchors.append(anchor)
        if i % SCAN_SLICE_ITEMS == SCAN_SLICE_ITEMS - 1:
            yield
    merged: list[Chunk] = []
    hashed = 0
    for group in groups:
        if len(group) == 1:
            merged.append(group[0])
            continue
        first, last = group[0], group[-1]
        merged.append(Chunk(first.start, last.end, _digest(view, first.start, last.end), sum(c.items for c in group)))
        hashed += last.end - first.start
        if hashed >= SCAN_SLICE_BYTES:
            hashed = 0
            yield
    return merged, anchors


def scan_compact(
    body: bytes,
    version: int,
    anchors: list[bytes],
    known: dict[int, int],
    parse: ParseBody,
    max_inflated: int,
    max_topics: int | None = None,
) -> Generator[None, None, Scan]:
    """Cut a compressed register body; BodyError if it is malformed.

    ``known`` maps digests of chunks already seen to their item counts, so
    such chunks are not walked item by item again; the others are, and the
    count the body declares tells where the items end. A body this refuses
    would fail a full parse too (the same items, read the same way), so it
    is refused here rather than parsed whole in one go.
    """
    problems: list[str] = []

    def head_ok(head: bytes) -> bool:
        problem = _compact_head_problem(head, max_topics)
        if problem is not None:
            problems.append(problem)
        return problem is None

    data = yield from inflate(body, max_inflated, head_ok)
    if data is None or len(data) < 8:
        raise BodyError(f"compressed register body: {problems[0] if problems else 'it is too short'}")
    dv_len = _I32.unpack_from(data, 0)[0]
    if dv_len < 0 or 8 + dv_len > len(data):
        raise BodyError("compressed register body: the data version runs past the end of the body")
    count = _I32.unpack_from(data, 4 + dv_len)[0]
    items_start = 8 + dv_len
    if count < 0:
        raise BodyError("negative topic count")
    if max_topics is not None and count > max_topics:
        raise BodyLimitError(f"register body has {count} topics, more than the limit of {max_topics}")
    if count > (len(data) - items_start) // 4:  # every item takes at least its 4-byte length
        raise BodyError(f"compressed register body declares {count} topics in {len(data) - items_start} bytes")
    view = memoryview(data)
    found = [at for at, _ in (yield from _locate(data, anchors, items_start, len(data)))]
    split = SPLIT_FACTOR * CHUNK_ITEMS if anchors else CHUNK_ITEMS
    chunks = yield from _runs(data, view, items_start, count, found, known, split)
    merged, out_anchors = yield from _merge_anchorless(data, view, chunks)
    end = merged[-1].end if merged else items_start
    rest = parse(zlib.compress(data[: 4 + dv_len] + b"\x00\x00\x00\x00" + view[end:], 0), True, version)
    return Scan("compact", rest, data, merged, out_anchors, version, parse, count, max_topics)


# --------------------------------------------------------------------------
# a body as received


@dataclass(slots=True)
class RawBody:
    """A REGISTER_BROKER body as it arrived, and the parser that judges it."""

    body: bytes
    compressed: bool
    version: int
    parse: ParseBody
    max_inflated: int = DEFAULT_MAX_INFLATED
    max_topics: int | None = None  # None: no bound (``parse`` may have its own)

    @property
    def form(self) -> str:
        return "compact" if self.compressed else "json"

    def scan(self, anchors: list[bytes], known: dict[int, int]) -> Generator[None, None, Scan | None]:
        """Cut the body; BodyError if it is malformed.

        None: an empty body, or a JSON body laid out otherwise than brokers
        write it; parse it with :meth:`whole` (the parser bounds the size of
        a JSON body parsed in one go, ``registerBodyMaxWholeParseBytes``).
        A compressed body is never parsed whole.
        """
        if not self.body:
            return None
        if self.compressed:
            return (yield from scan_compact(
                self.body, self.version, anchors, known, self.parse, self.max_inflated, self.max_topics))
        return (yield from scan_json(self.body, self.version, anchors, self.parse, self.max_topics))

    def whole(self) -> RegisterBody:
        return self.parse(self.body, self.compressed, self.version)

    def digest(self) -> Generator[None, None, bytes | None]:
        """The body's identity for the same-body shortcut (None: empty body).

        BLAKE2b over the bytes plus the flags that change their meaning;
        hashed DIGEST_STEP bytes at a time so a 16 MB body does not hold the
        loop for 10 ms in one go.
        """
        if not self.body:
            return None
        h = hashlib.blake2b(digest_size=16)
        view = memoryview(self.body)
        for pos in range(0, len(view), DIGEST_STEP):
            if pos:
                yield
            h.update(view[pos : pos + DIGEST_STEP])
        return h.digest() + bytes([self.compressed]) + self.version.to_bytes(4, "big", signed=True)
