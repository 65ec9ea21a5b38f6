"""The broker process: reactor, registrar, stats ticker, orderly stop.

An orderly stop first stops registering, then sends UNREGISTER_BROKER to
every NameServer (so routes drop at once rather than after an expiry), then
closes the listener, lets requests already read be answered and closes the
connections; all bounded in time.
"""

from __future__ import annotations

import logging

import trio

from broker_stub import topic_store
from broker_stub.config import BrokerConfig
from broker_stub.faults import Faults
from broker_stub.processor import BrokerProcessor
from broker_stub.registrar import Registrar
from broker_stub.store import MessageStore
from broker_stub.subgroups import SubscriptionGroups, groups_path
from broker_stub.topics import TopicTable, default_topics
from remoting.reactor import Reactor

log = logging.getLogger("broker_stub")

SHUTDOWN_GRACE_SECONDS = 1.5
BACKLOG = 1024
TIMER_BUSY_SECONDS = 0.01  # how often held pulls and due retries are checked while there are any
TIMER_IDLE_SECONDS = 0.1


class BrokerServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.faults = Faults()
        self._stop_event = trio.Event()
        self.registrar: Registrar | None = None
        self.processor: BrokerProcessor | None = None
        self.addr = ""
        self.topics = TopicTable(
            default_topics(
                config.brokerClusterName, config.brokerName, config.defaultTopicQueueNums, config.autoCreateTopicEnable
            ),
            on_change=self._kick,
        )
        # Read before serving, so a broken topics file is a start-up error, not a half-started broker.
        self.topics_file = topic_store.topics_path(config.storePathRootDir) if config.storePathRootDir else None
        if self.topics_file:
            self.topics.restore(*topic_store.load(self.topics_file))
            self.topics.on_change = self._topics_changed
        self.subgroups = SubscriptionGroups(groups_path(config.storePathRootDir) if config.storePathRootDir else None)

    def stop(self) -> None:
        """Begin an orderly stop (safe to call more than once)."""
        self._stop_event.set()

    def _topics_changed(self) -> None:
        """Save the table before the change is answered (an error here answers SYSTEM_ERROR), then register."""
        assert self.topics_file is not None
        topic_store.save(self.topics_file, self.topics.configs(), self.topics.data_version)
        self._kick()

    def _kick(self) -> None:
        if self.registrar is not None:
            self.registrar.kick()

    async def serve(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen, register and serve until :meth:`stop`; then unregister and drain."""
        config = self.config
        reactor = Reactor(
            None,  # type: ignore[arg-type]  # set below: the processor needs the bound port
            on_close=self._connection_closed,
            max_frame=config.frameMaxLength,
            max_connections=lambda: config.serverMaxConnections,
            idle_seconds=lambda: float(config.serverChannelMaxIdleTimeSeconds),
        )
        self.reactor = reactor
        _, port = reactor.listen(config.brokerIP1, config.listenPort, BACKLOG)
        self.addr = f"{config.brokerIP1}:{port}"
        ha_addr = f"{config.brokerIP1}:{config.haListenPort or port + 1}"
        topics = self.topics
        store = MessageStore(config.brokerIP1, port, config.maxMessagesPerQueue)
        self.registrar = Registrar(config, topics, self.faults, broker_addr=self.addr, ha_addr=ha_addr)
        self.processor = BrokerProcessor(
            config,
            topics,
            store,
            self.faults,
            broker_addr=self.addr,
            peer_of=self._peer_of,
            kick=self._kick,
            registration_info=self.registrar.info,
            write_to=reactor.write_to,
            subgroups=self.subgroups,
        )
        reactor.processor = self.processor
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reactor.run)
            nursery.start_soon(self._tick)
            nursery.start_soon(self._timers)
            registering = trio.CancelScope()
            nursery.start_soon(self._register, registering)
            task_status.started(self.addr)
            await self._stop_event.wait()
            registering.cancel()
            await self.registrar.unregister_all()
            reactor.stop_accepting()
            reactor.stop_reading()
            with trio.move_on_after(SHUTDOWN_GRACE_SECONDS):
                while reactor.in_flight:
                    await trio.sleep(0.005)
            reactor.close_all("broker stopping")
            nursery.cancel_scope.cancel()

    async def _register(self, scope: trio.CancelScope) -> None:
        assert self.registrar is not None
        with scope:
            await self.registrar.run()

    async def _tick(self) -> None:
        """Once a second: sample the put/get totals for the runtime-info rates."""
        while True:
            if self.processor is not None:
                self.processor.tick()
            await trio.sleep(1.0)

    async def _timers(self) -> None:
        """Answer held pulls whose suspend time is over and put retries that are due; often while
        there are any (long-polling answers are late by at most TIMER_BUSY_SECONDS), rarely otherwise."""
        assert self.processor is not None
        consuming = self.processor.consuming
        while True:
            self.processor.timers()
            busy = consuming.hold.count or len(consuming.delays)
            await trio.sleep(TIMER_BUSY_SECONDS if busy else TIMER_IDLE_SECONDS)

    def _peer_of(self, conn_id: object) -> str | None:
        conn = self.reactor.connections.get(conn_id) if isinstance(conn_id, int) else None
        return conn.peer if conn is not None else None

    def _connection_closed(self, conn_id: int, peer: str, reason: str) -> None:
        if self.processor is not None:
            self.processor.connection_closed(conn_id)
