"""GET_BROKER_HA_STATUS (907): the replication view ``mqadmin haStatus`` (5.x) prints.

A Java master lists each slave's HA connection (address, the commit-log
offset it acknowledged, the gap to the master's end, whether it is within
``haMaxGapNotInSync``, the bytes sent in the last second, the offset the
transfer started from); a Java slave reports its side (the master's HA
address, its own end offset, when it last read from and wrote to the master,
the bytes read in the last second). The stub's replication
(:mod:`broker_stub.replication`) is request/answer over the broker port, so
the same figures are kept per replicating connection: a slave's request
carries its end offset (``commitOffset``, its acknowledgement) and the
master counts the bytes of each answer. A slave that has not asked for
``LINK_GONE_AFTER`` seconds is no longer listed (Java drops the HA
connection when it closes). Bounded: one entry per connection that
replicates, at most ``MAX_LINKS``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from remoting.mqjson import dumps

HA_MAX_GAP_NOT_IN_SYNC = 256 * 1024 * 1024  # MessageStoreConfig.haMaxGapNotInSync
LINK_GONE_AFTER = 5.0  # s
MAX_LINKS = 64


@dataclass
class ByteRate:
    """Bytes in the current and in the last whole second (Java's transferredByteInSecond)."""

    second: int = 0
    current: int = 0
    last: int = 0

    def add(self, now: float, count: int) -> None:
        self._roll(now)
        self.current += count

    def per_second(self, now: float) -> int:
        self._roll(now)
        return self.last

    def _roll(self, now: float) -> None:
        second = int(now)
        if second != self.second:
            self.last = self.current if second == self.second + 1 else 0
            self.current = 0
            self.second = second


@dataclass
class SlaveLink:
    addr: str
    transfer_from: int  # the slave's end offset when it first asked on this connection
    ack_offset: int
    last_seen: float
    rate: ByteRate = field(default_factory=ByteRate)


class SlaveLinks:
    """The master's side: the slaves replicating from it, by connection."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.links: OrderedDict[Hashable, SlaveLink] = OrderedDict()

    def served(self, conn: Hashable, addr: str, ack_offset: int, sent_bytes: int) -> None:
        now = self.clock()
        link = self.links.get(conn)
        if link is None:
            link = self.links[conn] = SlaveLink(addr, ack_offset, ack_offset, now)
            while len(self.links) > MAX_LINKS:
                self.links.popitem(last=False)
        link.ack_offset, link.last_seen = ack_offset, now
        link.rate.add(now, sent_bytes)

    def live(self) -> list[SlaveLink]:
        now = self.clock()
        for conn in [c for c, link in self.links.items() if now - link.last_seen > LINK_GONE_AFTER]:
            del self.links[conn]
        return list(self.links.values())


def _client_info(*, master_addr: str | None = None, max_offset: int = 0, last_read: int = 0, last_write: int = 0,
                 bytes_per_second: int = 0) -> dict[str, Any]:
    """HAClientRuntimeInfo, fields in fastjson's order (``masterAddr`` left out when null)."""
    return {"lastReadTimestamp": last_read, "lastWriteTimestamp": last_write, "masterAddr": master_addr,
            "masterFlushOffset": 0, "maxOffset": max_offset, "transferredByteInSecond": bytes_per_second}


def master_status(links: SlaveLinks, max_offset: int) -> bytes:
    """A master's HARuntimeInfo."""
    now = links.clock()
    connections = []
    in_sync = 0
    for link in links.live():
        synced = abs(max_offset - link.ack_offset) <= HA_MAX_GAP_NOT_IN_SYNC
        in_sync += synced
        connections.append({"addr": link.addr, "diff": max_offset - link.ack_offset, "inSync": synced,
                            "slaveAckOffset": link.ack_offset, "transferFromWhere": link.transfer_from,
                            "transferredByteInSecond": link.rate.per_second(now)})
    return dumps({"haClientRuntimeInfo": _client_info(), "haConnectionInfo": connections,
                  "inSyncSlaveNums": in_sync, "master": True, "masterCommitLogMaxOffset": max_offset})


def slave_status(*, master_addr: str | None, max_offset: int, last_read: int, last_write: int,
                 bytes_per_second: int) -> bytes:
    """A slave's HARuntimeInfo."""
    client = _client_info(master_addr=master_addr, max_offset=max_offset, last_read=last_read,
                          last_write=last_write, bytes_per_second=bytes_per_second)
    return dumps({"haClientRuntimeInfo": client, "haConnectionInfo": [], "inSyncSlaveNums": 0, "master": False,
                  "masterCommitLogMaxOffset": 0})


__all__ = ["ByteRate", "SlaveLinks", "master_status", "slave_status"]
