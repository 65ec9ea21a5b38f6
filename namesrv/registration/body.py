"""A REGISTER_BROKER body as it arrived: its form, its digest, its cut, and its whole parse.

The plan (:mod:`namesrv.registration.plan`) asks a body for its digest
(the same-body shortcut), for its cut into chunks (:mod:`.scan` for JSON,
:mod:`.compact` for the compressed form), or, when a JSON body cannot be
cut, for its whole parse. While a large body is registered the cyclic
garbage collector is paused (:class:`QuietGC`).
"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Callable, Generator
from dataclasses import dataclass
from types import TracebackType

from namesrv.registration.compact import scan_compact
from namesrv.registration.scan import ParseBody, Scan, scan_json
from remoting.register_body import RegisterBody

#: Bytes hashed per step of the whole-body digest.
DIGEST_STEP = 2 * 1024 * 1024
#: Largest inflated compressed body when the caller gives no bound (that of
#: remoting.bodies); the processor passes the bound it parses bodies under.
DEFAULT_MAX_INFLATED = 256 * 1024 * 1024
#: Bodies from this size on are registered with the cyclic GC paused (see QuietGC):
#: about 40,000 topics compressed, 2,000 as JSON.
GC_PAUSE_BODY_BYTES = 128 * 1024

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


class QuietGC:
    """The cyclic GC paused while a large body is registered, and what lived through it frozen.

    A registration allocates hundreds of thousands of small tuples, which
    trigger collections, and every collection walks the large sets and
    dicts the registration holds meanwhile (25-45 ms each here for a
    200,000-topic body, on the loop). Nothing of a registration forms
    reference cycles, so refcounting frees it all the same.

    After a registration that wrote many topics (``wrote_many()`` true at
    the end), what lives then is frozen (``gc.freeze``): full collections
    walk every entry of the route table's dicts, 25-45 ms with a million
    topics, and frozen objects are out of their reach. The young
    generations are collected first; only reference cycles that were
    already old garbage then stay uncollected (the NameServer makes few), a
    price paid once per large change of the table, not per registration.
    """

    def __init__(self, body_bytes: int, wrote_many: Callable[[], bool]) -> None:
        self.active = body_bytes >= GC_PAUSE_BODY_BYTES and gc.isenabled()
        self.wrote_many = wrote_many

    def __enter__(self) -> QuietGC:
        if self.active:
            gc.disable()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.active:
            gc.collect(1)  # what was allocated meanwhile and is garbage now (young objects only: a few ms)
            if self.wrote_many():
                gc.freeze()
            gc.enable()
