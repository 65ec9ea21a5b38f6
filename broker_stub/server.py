"""The broker process: reactor, registrar, stats ticker, topics-file writer, orderly stop.

An orderly stop first stops registering, then sends UNREGISTER_BROKER to
every NameServer (so routes drop at once rather than after an expiry), then
closes the listener, lets requests already read be answered (with messages
on disk: written, synced and their held answers sent), writes the topic
changes not yet on disk and closes the connections; all bounded in time.
Persistence (broker_stub.persistence) and the master/slave roles
(broker_stub.ha) hook in here.

With ``listenPort=0`` the port the OS picked is written back into the
config, as a Java broker does (BrokerController.startBasicService), so
GET_BROKER_CONFIG and the registration show the real port.

Like a Java broker's "fast" remoting server, the stub also listens on the
VIP port, ``listenPort - 2``, where Java clients with ``vipChannelEnabled``
(RocketMQ Dashboard's admin client, 4.x producers by default) send their
broker requests. Both listeners feed the same reactor, so the VIP port has
the same handlers, access classes, TLS, bounds and metrics as the main one.
``vipChannelEnabled=false`` (ours) turns it off. With ``listenPort=0`` the
pair is chosen together: a free port whose port - 2 is free too.
"""

from __future__ import annotations

import logging
import os
import socket

import trio

from broker_stub import pop_state, topic_store
from broker_stub.config import BrokerConfig
from broker_stub.faults import Faults
from broker_stub.ha import HighAvailability
from broker_stub.metrics import StubMetrics
from broker_stub.persistence import Persistence, load_offsets
from broker_stub.processor import BrokerProcessor
from broker_stub.registrar import Registrar
from broker_stub.request_classes import REQUEST_CLASSES
from broker_stub.store import MessageStore
from broker_stub.subgroups import SubscriptionGroups, groups_path
from broker_stub.topic_traffic import TopicTraffic
from broker_stub.topics import TopicTable, default_topics
from remoting.bodies import DataVersion, TopicConfig
from remoting.clip import clip
from remoting.command import RemotingCommand
from security.gate import AccessControl
from security.tls_context import client_context_from, server_gate
from server_runtime.metering import RequestMeter
from server_runtime.metrics_http import MetricsEndpoint
from server_runtime.ratelog import CLIP_ARGS
from server_runtime.reactor import Reactor

log = logging.getLogger("broker_stub")
log.addFilter(CLIP_ARGS)  # no client value makes a long log line, whoever logs it

SHUTDOWN_GRACE_SECONDS = 1.5
FLUSH_GRACE_SECONDS = 3.0  # last topics-file write on an orderly stop
BACKLOG = 1024
VIP_PORT_OFFSET = 2  # Java's fast remoting server: listenPort - 2
PAIR_ATTEMPTS = 50  # tries at a free port pair when listenPort=0
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
        self.vip_addr = ""  # "" while the VIP port is off (vipChannelEnabled=false) or not yet bound
        self.topics = TopicTable(
            default_topics(
                config.brokerClusterName, config.brokerName, config.defaultTopicQueueNums, config.autoCreateTopicEnable
            ),
            on_change=self._kick,
            max_auto_created=config.maxAutoCreatedTopics,
        )
        # Read before serving, so a broken topics file is a start-up error, not a half-started broker.
        self.topics_file = topic_store.topics_path(config.storePathRootDir) if config.storePathRootDir else None
        self.saver: topic_store.TopicSaver | None = None
        if self.topics_file:
            self.topics.restore(*topic_store.load(self.topics_file), source=self.topics_file)
            self.saver = topic_store.TopicSaver(self.topics_file, self._topics_snapshot)
            self.topics.on_change = self._topics_changed
        self.subgroups = SubscriptionGroups(groups_path(config.storePathRootDir) if config.storePathRootDir else None)
        self.saved_offsets = load_offsets(config)  # consumerOffset.json, read before serving as well
        self.pop_file = pop_state.state_path(config.storePathRootDir) if config.storePathRootDir else None
        self.pop_saved = pop_state.read(self.pop_file) if self.pop_file else {}  # popInFlight.json, likewise
        self.pop_state: pop_state.PopState | None = None
        self.persistence: Persistence | None = None
        # Certificates are read here too: a bad file stops the start with one line.
        tls = config.tls.resolved()
        self.tls = server_gate(tls)
        #: The broker's own connections (NameServers, a slave's master): TLS with tls.enable=true, or by
        #: default when its port is enforcing, as a Java broker (BrokerStartup's useTLS).
        self.client_tls = client_context_from(tls) if tls.client_tls else None
        # The accounts are read before serving too: a bad file is a start-up error.
        self.access = AccessControl(config, os.environ.get("ROCKETMQ_HOME", ""), log)
        self.metrics: MetricsEndpoint | None = None  # listening once serve() started, with metricsPort set

    def stop(self) -> None:
        """Begin an orderly stop (safe to call more than once)."""
        self._stop_event.set()

    def _topics_snapshot(self) -> tuple[list[TopicConfig], DataVersion]:
        return self.topics.configs(), self.topics.data_version

    def _topics_changed(self) -> None:
        """Have the change written (off the loop; topic requests await it), and register now."""
        assert self.saver is not None
        self.saver.changed()
        self._kick()

    def _kick(self) -> None:
        if self.registrar is not None:
            self.registrar.kick()

    async def serve(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen, register and serve until :meth:`stop`; then unregister and drain."""
        config = self.config
        reactor = self._open_reactor()
        topics = self.topics
        store = MessageStore(config.brokerIP1, config.listenPort, config.maxMessagesPerQueue,
                             max_bytes=config.maxStoreBytes)
        await self._start_processor(reactor, store)
        assert self.processor is not None and self.registrar is not None
        persistence = self._open_persistence(reactor, store)
        self._open_pop_state()
        registrar = self.registrar
        ha = HighAvailability(self.processor, store, topics, is_master=config.is_master,
                              master_addr=lambda: registrar.master_addr, ha_server_addr=lambda: registrar.ha_server_addr,
                              credentials=registrar.credentials, tls=self.client_tls)
        async with trio.open_nursery() as nursery:
            if self.metrics is not None:
                nursery.start_soon(self.metrics.run)
            nursery.start_soon(reactor.run)
            nursery.start_soon(self._tick)
            nursery.start_soon(self._timers)
            nursery.start_soon(ha.run)
            nursery.start_soon(self.processor.admin.keys.run)
            if persistence is not None:
                nursery.start_soon(persistence.run)
            if self.saver is not None:
                nursery.start_soon(self.saver.run)
            if self.pop_state is not None:
                nursery.start_soon(self.pop_state.run, reactor.write_to)
            registering = trio.CancelScope()
            nursery.start_soon(self._register, registering)
            task_status.started(self.addr)
            await self._stop_event.wait()
            registering.cancel()
            await self._drain(reactor, persistence)
            nursery.cancel_scope.cancel()

    def _open_reactor(self) -> Reactor:
        """The reactor, listening (and on the VIP port); the bound port written back into the config (and the
        HA port derived)."""
        config = self.config
        reactor = Reactor(
            None,  # type: ignore[arg-type]  # set by _start_processor: the processor needs the bound port
            on_close=self._connection_closed,
            on_response=self._client_response,
            max_frame=config.frameMaxLength,
            max_connections=lambda: config.serverMaxConnections,
            idle_seconds=lambda: float(config.serverChannelMaxIdleTimeSeconds),
            read_budget=config.serverTotalReadBufferBytes,
            high_water_mark=config.writeBufferHighWaterMark,
            low_water_mark=config.writeBufferLowWaterMark,
            tls=self.tls,
        )
        self.reactor = reactor
        port, vip_port = _listen(reactor, bind_host(config), config.listenPort, vip=config.vipChannelEnabled)
        config.listenPort = port
        if vip_port is not None:
            self.vip_addr = f"{bind_host(config)}:{vip_port}"
        if config.haListenPort <= 0:
            # Java's BrokerStartup sets haListenPort = listenPort + 1 before binding (so a Java
            # broker given port 0 would try HA port 1); the stub has no HA listener and derives
            # it from the bound port, the address it registers as haServerAddr.
            config.haListenPort = port + 1 if port < 65535 else port - 1
        self.addr = f"{config.brokerIP1}:{port}"
        return reactor

    async def _start_processor(self, reactor: Reactor, store: MessageStore) -> None:
        """The registrar and the processor, behind the access guard (and the request meter, with metrics)."""
        config = self.config
        ha_addr = f"{config.brokerIP1}:{config.haListenPort}"
        self.registrar = Registrar(
            config, self.topics, self.faults, broker_addr=self.addr, ha_addr=ha_addr, tls=self.client_tls
        )
        log.info("%s; to name servers: %s", self.tls.describe(), "TLS" if self.client_tls else "plaintext")
        self.processor = BrokerProcessor(
            config,
            self.topics,
            store,
            self.faults,
            broker_addr=self.addr,
            peer_of=self._peer_of,
            kick=self._kick,
            registration_info=self.registrar.info,
            write_to=reactor.write_to,
            topics_durable=self.saver.durable if self.saver is not None else None,
            subgroups=self.subgroups,
        )
        reactor.processor = self.access.guard(self.processor, REQUEST_CLASSES, peer_of=self._peer_of,
                                              warn=self.processor.warn)
        if config.metricsPort:
            # every request counted on its way through (server_runtime.metering); without metrics, nothing is
            meter = RequestMeter(reactor.processor, REQUEST_CLASSES)
            reactor.processor = meter
            self.metrics = await self._metrics_endpoint(meter, store)

    def _open_persistence(self, reactor: Reactor, store: MessageStore) -> Persistence | None:
        """Messages and offsets read back from storePathRootDir (None: memory only), then written as they come."""
        assert self.processor is not None
        self.persistence = persistence = Persistence.open(self.config, store, self.processor.consuming,
                                                          self.saved_offsets)
        if persistence is not None:
            persistence.on_readable = self.processor.admin.keys.touch
            self.processor.sending.store_busy = lambda: persistence.busy
            if persistence.files is not None:
                persistence.hold_answers(reactor.write_to)
                self.processor.sending.hold_answer = persistence.hold_answer
                self.processor.consuming.hold_answer = persistence.hold_answer
        return persistence

    def _open_pop_state(self) -> None:
        """POP in-flight state read back from popInFlight.json; after the offsets: its POP positions override
        consumerOffset.json's."""
        assert self.processor is not None
        if self.pop_file is not None:
            self.pop_state = pop_state.PopState(self.pop_file, self.processor.pop, self.processor.consuming,
                                                self.processor.sending.timers)
            self.pop_state.restore(self.pop_saved)
            self.processor.pop.hold_answer = self.pop_state.hold_answer

    async def _drain(self, reactor: Reactor, persistence: Persistence | None) -> None:
        """Unregister, stop taking requests, let those in flight finish, write what is held, close."""
        assert self.registrar is not None
        await self.registrar.unregister_all()
        reactor.stop_accepting()
        reactor.stop_reading()
        with trio.move_on_after(SHUTDOWN_GRACE_SECONDS):
            while reactor.in_flight:
                await trio.sleep(0.005)
        if persistence is not None:  # written and synced, held answers sent, before connections close
            await persistence.close()
        if self.pop_state is not None:
            with trio.move_on_after(FLUSH_GRACE_SECONDS), trio.CancelScope(shield=True):
                await self.pop_state.flush()
        if self.saver is not None:
            with trio.move_on_after(FLUSH_GRACE_SECONDS):
                try:
                    await self.saver.flush()
                except OSError:
                    pass  # logged by the saver
        reactor.close_all("broker stopping")

    async def _metrics_endpoint(self, meter: RequestMeter, store: MessageStore) -> MetricsEndpoint:
        assert self.processor is not None and self.registrar is not None
        config = self.config
        traffic = TopicTraffic(config.metricsTopTopics)
        self.processor.admin.stats.traffic = traffic
        collector = StubMetrics(
            config=config, topics=self.topics, store=store, traffic=traffic, sending=self.processor.sending,
            faults=self.faults, clients=self.processor.consuming.clients, registrar=self.registrar, meter=meter,
            reactor=self.reactor,
        )
        endpoint = MetricsEndpoint(collector.registry(), log, prepare=collector.prepare)
        await endpoint.listen(config.metricsBindAddress, config.metricsPort)
        log.info("metrics at %s", endpoint.url)
        return endpoint

    async def _register(self, scope: trio.CancelScope) -> None:
        assert self.registrar is not None
        with scope:
            await self.registrar.run()

    async def _tick(self) -> None:
        """Once a second: sample the put/get totals for the runtime-info rates; reload changed accounts."""
        while True:
            if self.processor is not None:
                self.processor.tick()
            await self.access.reload()
            await trio.sleep(1.0)

    async def _timers(self) -> None:
        """Answer held pulls whose suspend time is over and put retries that are due; often while
        there are any (long-polling answers are late by at most TIMER_BUSY_SECONDS), rarely otherwise."""
        assert self.processor is not None
        consuming = self.processor.consuming
        while True:
            try:
                self.processor.timers()
            except Exception as exc:  # this task ending would end the broker: log it, go on
                self.processor.warn.warning("timers", "timers failed {count} more times in the last {seconds} s",
                                            "timers failed: %s: %s", type(exc).__name__, clip(exc))
            busy = consuming.waiting or len(consuming.delays) or self.processor.pop.busy() or self._timer_soon()
            await trio.sleep(TIMER_BUSY_SECONDS if busy else TIMER_IDLE_SECONDS)

    def _timer_soon(self) -> bool:
        """Whether a timer message is due within a second (then the timers run every few ms)."""
        assert self.processor is not None
        due = self.processor.sending.timers.next_due()
        return due is not None and due - self.processor.pop.now_ms() < 1000

    def _peer_of(self, conn_id: object) -> str | None:
        conn = self.reactor.connections.get(conn_id) if isinstance(conn_id, int) else None
        return conn.peer if conn is not None else None

    def _client_response(self, conn_id: int, resp: RemotingCommand) -> None:
        """A client answered a request the broker sent it (GET_CONSUMER_RUNNING_INFO, relayed)."""
        if self.processor is not None:
            self.processor.admin.relay.response(conn_id, resp)

    def _connection_closed(self, conn_id: int, peer: str, reason: str) -> None:
        self.access.forget(conn_id)
        if self.processor is not None:
            self.processor.connection_closed(conn_id)


def bind_host(config: BrokerConfig) -> str:
    """Where the broker listens: Java 5.x's ``bindAddress`` when the file names one, else ``brokerIP1``.

    A broker may listen on one address and register another (``brokerIP1``), e.g. behind a proxy
    that listens on the registered address (``mqadmin start --client-proxy``). Java's default,
    ``0.0.0.0`` (every interface), is not taken: the stub listens on ``brokerIP1`` then, as it
    always did, never on every interface.
    """
    bind = config.java_settings.get("bindAddress", "").strip()
    return bind if bind and bind != "0.0.0.0" else config.brokerIP1


def vip_port_of(port: int) -> int:
    """The VIP port a Java broker derives from its listen port (BrokerController: never below 0)."""
    return max(port - VIP_PORT_OFFSET, 0)


def _listen(reactor: Reactor, host: str, port: int, *, vip: bool) -> tuple[int, int | None]:
    """Bind the main port and (with ``vip``) the VIP port; returns both (None: no VIP port).

    An explicit port whose VIP port is taken fails the start, as a Java broker's would. With port 0
    a pair that is free right now is picked first; losing a race for it fails the start too.
    """
    if not vip:
        return reactor.listen(host, port, BACKLOG)[1], None
    if port == 0:
        port = _free_pair(host)
    _, bound = reactor.listen(host, port, BACKLOG)
    try:
        _, vip_bound = reactor.listen(host, vip_port_of(bound), BACKLOG)
    except OSError as exc:
        raise OSError(exc.errno, f"{exc.strerror or exc} (the VIP port {vip_port_of(bound)}, listenPort - 2; "
                                 "vipChannelEnabled=false turns it off)") from None
    return bound, vip_bound


def _free_pair(host: str) -> int:
    """A port P above 1024 such that P and P - 2 are both free on ``host`` now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(PAIR_ATTEMPTS):
        with socket.socket(family, socket.SOCK_STREAM) as main, socket.socket(family, socket.SOCK_STREAM) as fast:
            main.bind((host, 0))
            candidate = main.getsockname()[1]
            if candidate - VIP_PORT_OFFSET <= 1024:
                continue
            try:
                fast.bind((host, candidate - VIP_PORT_OFFSET))
            except OSError:
                continue
            return candidate
    raise OSError(f"no free port pair P, P-{VIP_PORT_OFFSET} on {host} after {PAIR_ATTEMPTS} tries")
