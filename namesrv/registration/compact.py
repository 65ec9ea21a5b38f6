"""The compact (compressed) form of a REGISTER_BROKER body, cut into runs of topic items.

Part of the scan (:mod:`namesrv.registration.scan`, where the cut and its
anchors are described): a compressed body is inflated in steps under a
bound, its length-prefixed topic items are walked ``CHUNK_ITEMS`` at a time
(or skipped as a run whose digest is known), and the runs become chunks.
A compressed body has one layout: one that does not scan is malformed and
refused with BodyError (a full parse of the same items would fail the same
way), never parsed whole.

Every step advances or fails: a walk takes at least one item per pass or
raises, and what it keeps is bounded by the topics the body declares.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Generator

from namesrv.registration.scan import (
    I32,
    MAX_ANCHOR_KEY,
    SCAN_SLICE_BYTES,
    SCAN_SLICE_ITEMS,
    SPLIT_FACTOR,
    Chunk,
    ParseBody,
    Scan,
    digest_of,
    locate,
)
from remoting.bodies import BodyError, DataVersion
from remoting.fastjson import BodyLimitError

#: Target topics per chunk of the compact form.
CHUNK_ITEMS = 256
#: Inflated bytes produced between two yields (and the bound's check step).
INFLATE_STEP = 1024 * 1024

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
    dv_len = I32.unpack_from(head, 0)[0]
    if dv_len < 0:
        return "its data version has a negative length"
    if 8 + dv_len > len(head):
        return None
    try:
        DataVersion.decode(head[4 : 4 + dv_len])
    except BodyError as exc:
        return f"its data version is not valid ({exc})"
    count = I32.unpack_from(head, 4 + dv_len)[0]
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
    unpack = I32.unpack_from
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
    length = I32.unpack_from(data, pos)[0]
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
            digest = digest_of(view, start, stop)
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
            runs.append(Chunk(start, end, digest_of(view, start, end), n))
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
        merged.append(Chunk(first.start, last.end, digest_of(view, first.start, last.end), sum(c.items for c in group)))
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
    dv_len = I32.unpack_from(data, 0)[0]
    if dv_len < 0 or 8 + dv_len > len(data):
        raise BodyError("compressed register body: the data version runs past the end of the body")
    count = I32.unpack_from(data, 4 + dv_len)[0]
    items_start = 8 + dv_len
    if count < 0:
        raise BodyError("negative topic count")
    if max_topics is not None and count > max_topics:
        raise BodyLimitError(f"register body has {count} topics, more than the limit of {max_topics}")
    if count > (len(data) - items_start) // 4:  # every item takes at least its 4-byte length
        raise BodyError(f"compressed register body declares {count} topics in {len(data) - items_start} bytes")
    view = memoryview(data)
    found = [at for at, _ in (yield from locate(data, anchors, items_start, len(data)))]
    split = SPLIT_FACTOR * CHUNK_ITEMS if anchors else CHUNK_ITEMS
    chunks = yield from _runs(data, view, items_start, count, found, known, split)
    merged, out_anchors = yield from _merge_anchorless(data, view, chunks)
    end = merged[-1].end if merged else items_start
    rest = parse(zlib.compress(data[: 4 + dv_len] + b"\x00\x00\x00\x00" + view[end:], 0), True, version)
    return Scan("compact", rest, data, merged, out_anchors, version, parse, count, max_topics)
