"""Master-to-slave copying of messages, so a slave can serve consumers when its master is gone.

A Java slave connects to its master's HA port and receives the commit log
byte for byte. The stub has no commit log, so a slave asks its master with
a request of our own, code **9010** (no Apache RocketMQ request uses it;
9000-9002 are the stub's other own codes), over the master's ordinary port: the body lists the slave's queues and the
offset each one has reached; the answer is the records that follow, in
the stored-message layout, at most ``MAX_REPLICA_BYTES`` per answer
(``more`` says when a next request would find more). The slave keeps them
at the master's queue offsets (:meth:`MessageStore.append_stored`), so a
consumer can switch between master and slave mid-queue, and wakes the
pulls it holds on those queues.

The slave asks again at once while there is more, every
``IDLE_POLL`` seconds otherwise (messages reach the slave within about
that, as with Java's asynchronous replication), and reconnects after
``RETRY_DELAY`` when the master is unreachable. :attr:`Replicator.master_alive`
is whether the last exchange is recent and the connection did not fail
since (a refused or broken connection counts at once, a master that stopped
answering after ``MASTER_ALIVE_WINDOW``): a slave whose master is gone
answers pulls itself instead of sending consumers back to the master (Java
learns the same from the NameServer's broker member group, every second).
"""

from __future__ import annotations

import logging
import ssl
import struct
import time
from collections.abc import Callable, Hashable

import trio

from broker_stub.common import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Reject
from broker_stub.ha_status import ByteRate
from broker_stub.store import MessageStore, StoreFullError, StoreUnavailableError, parse_record
from remoting import fastjson
from remoting.acl import Credentials
from remoting.bodies import BodyError
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, request, response_to
from remoting.names import is_legal_topic
from remoting.transport import RemotingError, RemotingTimeout, connect

log = logging.getLogger("broker_stub")

REPLICATE_CODE = 9010
MAX_REPLICA_BYTES = 1024 * 1024
MAX_REPLICA_RECORDS = 4096
IDLE_POLL = 0.05  # s between requests while the slave is caught up
RETRY_DELAY = 0.5  # s before reconnecting to an unreachable master
REQUEST_TIMEOUT = 2.0
MASTER_ALIVE_WINDOW = 3.0  # s: no exchange for that long and the master counts as gone
_I32 = struct.Struct(">i")


def replicate_request(have: list[tuple[str, int, int]], commit_offset: int = 0) -> RemotingCommand:
    """The slave's request: its queues and the next offset each one needs, and its end offset
    (``commitOffset``, what a Java slave acknowledges; :mod:`broker_stub.ha_status` shows it)."""
    body = {"offsets": [list(h) for h in have], "commitOffset": commit_offset}
    return request(REPLICATE_CODE, {}, fastjson.dumps_fast(body))


#: Called by the master after each answer: (connection, the slave's end offset, bytes sent).
OnServed = Callable[[Hashable, int, int], None]


def serve_replicate(store: MessageStore, req: RemotingCommand, conn: Hashable,
                    on_served: OnServed | None = None) -> RemotingCommand:
    """The master's answer: records after the slave's offsets, bounded in bytes and count."""
    try:
        doc = fastjson.loads(req.body) if req.body else {}
        have = {(str(t), int(q)): int(n) for t, q, n in (doc.get("offsets") or [])}
        slave_end = int(doc.get("commitOffset") or 0)
    except (BodyError, ValueError, TypeError, AttributeError) as exc:
        raise Reject(ResponseCode.INVALID_PARAMETER, f"bad replication request: {exc}") from None
    if not INT64_MIN <= slave_end <= INT64_MAX:
        raise Reject(ResponseCode.INVALID_PARAMETER, f"bad replication request: commitOffset {slave_end} is out of range")
    for (topic, queue_id), offset in have.items():  # a queue id is a Java int, an offset a long
        if not (INT32_MIN <= queue_id <= INT32_MAX and INT64_MIN <= offset <= INT64_MAX):
            raise Reject(ResponseCode.INVALID_PARAMETER,
                         f"bad replication request: queue {topic}:{queue_id} offset {offset} is out of range")
    parts: list[bytes] = []
    size = 0
    count = 0
    more = False
    for topic, queue_id in store.queue_keys():
        lo, hi = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
        start = max(have.get((topic, queue_id), lo), lo)
        if start >= hi:
            continue
        if size >= MAX_REPLICA_BYTES or count >= MAX_REPLICA_RECORDS:
            more = True
            break
        records, nxt = store.get(topic, queue_id, start, MAX_REPLICA_RECORDS - count, MAX_REPLICA_BYTES - size)
        store.get_total -= len(records)  # copying to a slave is not consumption (runtime info counts gets)
        parts.extend(records)
        count += len(records)
        size += sum(map(len, records))
        more = more or nxt < hi
    body = b"".join(parts)
    if on_served is not None:
        on_served(conn, slave_end, len(body))
    return response_to(req, ResponseCode.SUCCESS, ext_fields={"more": more}, body=body)


def split_records(body: bytes) -> list[bytes]:
    """A run of stored records, each as its own bytes; ValueError on a malformed run."""
    out = []
    pos = 0
    while pos < len(body):
        if pos + 4 > len(body):
            raise ValueError(f"truncated record at byte {pos}")
        (total,) = _I32.unpack_from(body, pos)
        if total <= 0 or pos + total > len(body):
            raise ValueError(f"record at byte {pos} claims {total} bytes")
        out.append(body[pos : pos + total])
        pos += total
    return out


class Replicator:
    """The slave's side: keep asking the master (from registration) for what follows."""

    def __init__(
        self,
        store: MessageStore,
        *,
        master_addr: Callable[[], str | None],
        on_stored: Callable[[str, int], None],
        on_unknown_topic: Callable[[str], None],
        known_topic: Callable[[str], bool],
        clock: Callable[[], float] = trio.current_time,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        credentials: Credentials | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.store = store
        self.credentials = credentials  # signs the requests when the master checks accounts
        self.master_addr = master_addr
        self.on_stored = on_stored
        self.on_unknown_topic = on_unknown_topic
        self.known_topic = known_topic
        self.tls = tls
        self.clock = clock
        self.last_ok = -float("inf")
        self.copied = 0
        self.failures = 0
        self.wall_ms = wall_ms
        self.last_write_ms = 0  # when the last request went to the master (haStatus' LastWriteTime)
        self.last_read_ms = 0  # when the last answer came back (LastReadTime)
        self.received = ByteRate()  # record bytes from the master (TransferSpeed)

    @property
    def master_alive(self) -> bool:
        return self.clock() - self.last_ok < MASTER_ALIVE_WINDOW

    def _have(self) -> list[tuple[str, int, int]]:
        store = self.store  # what is kept already, written or not yet
        return [(t, q, store.next_offset(t, q)) for t, q in store.queue_keys()]

    def apply(self, body: bytes) -> int:
        """Keep the records of one answer; returns how many were new."""
        kept = illegal = 0
        touched: set[tuple[str, int]] = set()
        unknown: set[str] = set()
        for record in split_records(body):
            msg = parse_record(record)
            if not is_legal_topic(msg.topic):  # a topic name becomes a directory: never an illegal one
                illegal += 1
                continue
            try:
                stored = self.store.append_stored(msg.topic, msg.queue_id, record)
            except StoreFullError as exc:  # bigger than this slave's maxStoreBytes allows: skip it
                log.warning("replication: a record of %s:%d not kept: %s", msg.topic, msg.queue_id, exc)
                continue
            except StoreUnavailableError:  # this slave's disk refuses writes: ask again later
                break
            if stored:
                kept += 1
                touched.add((msg.topic, msg.queue_id))
                if not self.known_topic(msg.topic):
                    unknown.add(msg.topic)
        if illegal:
            log.warning("replication: %d records skipped: their topic names are no legal topic names", illegal)
        for topic in unknown:
            self.on_unknown_topic(topic)
        for topic, queue_id in touched:
            self.on_stored(topic, queue_id)
        self.copied += kept
        self.store.put_total += kept  # a Java 4.9 slave counts replicated messages as puts (msgPutTotalTodayNow)
        return kept

    async def run(self) -> None:
        while True:
            addr = self.master_addr()
            if addr is None:
                await trio.sleep(RETRY_DELAY)
                continue
            try:
                async with connect(
                    addr, connect_timeout=REQUEST_TIMEOUT, tls=self.tls, credentials=self.credentials
                ) as client:
                    while self.master_addr() == addr and not client.closed:
                        self.last_write_ms = self.wall_ms()
                        req = replicate_request(self._have(), self.store.commit_offset)
                        resp = await client.invoke(req, REQUEST_TIMEOUT)
                        self.last_read_ms = self.wall_ms()
                        self.received.add(self.clock(), len(resp.body))
                        if resp.code != ResponseCode.SUCCESS:
                            raise RemotingError(f"{addr}: replication refused: code {resp.code} {resp.remark}")
                        try:
                            self.apply(resp.body)
                        except ValueError as exc:
                            raise RemotingError(f"{addr}: bad replication answer: {exc}") from None
                        self.last_ok = self.clock()
                        if self.store.unwritable is not None:
                            await trio.sleep(RETRY_DELAY)  # nothing is kept until its disk takes writes again
                        elif resp.ext("more") != "true":
                            await trio.sleep(IDLE_POLL)
            except RemotingError as exc:
                self.failures += 1
                if not isinstance(exc, RemotingTimeout):
                    self.last_ok = -float("inf")  # refused or broken: the master is gone now, not in a few seconds
                if self.failures == 1 or self.failures % 100 == 0:
                    log.warning("replication from master %s: %s (%d failures)", addr, exc, self.failures)
            await trio.sleep(RETRY_DELAY)


__all__ = ["REPLICATE_CODE", "Replicator", "replicate_request", "serve_replicate", "split_records"]
