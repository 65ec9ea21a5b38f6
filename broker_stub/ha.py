"""Master and slave roles beyond registration: what a master serves its slaves, what a slave runs.

A master answers replication requests (:mod:`broker_stub.replication`,
code 9010) and GET_ALL_CONSUMER_OFFSET (43), which its slaves use to copy
its messages and its consumers' offsets. Both roles answer
GET_BROKER_HA_STATUS (907, :mod:`broker_stub.ha_status`). A slave runs the replicator and
the periodic sync (:mod:`broker_stub.slave_sync`) against the master
address its registration taught it, and tells the consumer handlers
whether that master is alive (while it is, the slave sends consumers back
to it, as Java 5.x does).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Hashable

import trio

from broker_stub.ha_status import SlaveLinks, master_status, slave_status
from broker_stub.offset_store import encode as encode_offsets
from broker_stub.processor import BrokerProcessor
from broker_stub.replication import REPLICATE_CODE, Replicator, serve_replicate
from broker_stub.slave_sync import GET_ALL_CONSUMER_OFFSET, SlaveSync
from broker_stub.store import MessageStore
from broker_stub.topics import TopicTable
from remoting.acl import Credentials
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to


class HighAvailability:
    def __init__(
        self,
        processor: BrokerProcessor,
        store: MessageStore,
        topics: TopicTable,
        *,
        is_master: bool,
        master_addr: Callable[[], str | None],
        ha_server_addr: Callable[[], str | None] = lambda: None,
        credentials: Credentials | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        consuming = processor.consuming
        self.links = SlaveLinks(trio.current_time)
        peer_of = processor.peer_of

        def served(conn: Hashable, slave_end: int, sent: int) -> None:
            self.links.served(conn, peer_of(conn) or "", slave_end, sent)

        processor.add_handler(REPLICATE_CODE, lambda req, conn: serve_replicate(store, req, conn, served))
        processor.add_handler(GET_ALL_CONSUMER_OFFSET, self._all_offsets)
        processor.add_handler(RequestCode.GET_BROKER_HA_STATUS, self._ha_status)
        self.processor = processor
        self.store = store
        self.master_addr = master_addr
        self.ha_server_addr = ha_server_addr
        self.replicator: Replicator | None = None
        self.sync: SlaveSync | None = None
        if is_master:
            return
        self.sync = SlaveSync(
            topics, master_addr=master_addr, set_offset=consuming.set_offset, credentials=credentials, tls=tls
        )

        keys = processor.admin.keys

        def stored(topic: str, queue_id: int) -> None:
            keys.touch(topic)
            if consuming.hold.count:
                consuming.arrived(topic, queue_id)

        self.replicator = Replicator(
            store,
            master_addr=master_addr,
            on_stored=stored,
            on_unknown_topic=lambda topic: self.sync.kick() if self.sync is not None else None,
            known_topic=lambda topic: topic in topics,
            credentials=credentials,
            tls=tls,
        )
        consuming.master_alive = lambda: self.replicator is not None and self.replicator.master_alive

    def _all_offsets(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """GET_ALL_CONSUMER_OFFSET: ConsumerOffsetSerializeWrapper (``offsetTable`` of topic@group)."""
        return response_to(req, ResponseCode.SUCCESS, body=encode_offsets(self.processor.consuming.offsets))

    def _ha_status(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        """GET_BROKER_HA_STATUS: HARuntimeInfo, the master's slaves or the slave's view of its master."""
        replicator = self.replicator
        if replicator is None:
            body = master_status(self.links, self.store.commit_offset)
        else:
            body = slave_status(
                master_addr=self.ha_server_addr() or self.master_addr(), max_offset=self.store.commit_offset,
                last_read=replicator.last_read_ms, last_write=replicator.last_write_ms,
                bytes_per_second=replicator.received.per_second(replicator.clock()))
        return response_to(req, ResponseCode.SUCCESS, body=body)

    async def run(self) -> None:
        """A slave's replication and sync, for as long as the broker runs (nothing for a master)."""
        if self.replicator is None or self.sync is None:
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.replicator.run)
            nursery.start_soon(self.sync.run)


__all__ = ["HighAvailability"]
