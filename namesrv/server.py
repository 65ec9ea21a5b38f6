"""The NameServer process: reactor, housekeeping, graceful stop.

A graceful stop closes the listeners, stops reading requests, lets the
requests already read be answered (a KV write in progress reaches the
disk before its answer goes out; a registration still planning is abandoned
at its next slice, unapplied, and answered SYSTEM_ERROR "the NameServer is
stopping"; one already writing is finished and answered), writes the route
snapshot one last time, then closes every connection (closing them removes
their brokers, so the snapshot must come first). A final snapshot not written
``STOP_SECONDS`` after the signal is given up; its write is atomic, so the
file is the previous one.

The route snapshot is restored in the constructor, before anything listens.

Heartbeat expiry never judges a broker by a silence that was ours: after
the process was paused, the heartbeats waiting in the sockets are read
first (see :mod:`server_runtime.pause`).

Every request passes the access gate (:mod:`security.gate`) first; with
``aclEnable`` the accounts file is read in the constructor (a bad one stops
the start) and polled by the housekeeping round, a change applied to the
next request.

Connection closes and heartbeat expiry change the route table, so they take
the processor's table lock like every other change: one that happens while
a large registration is being applied (in slices) is applied after it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import trio

from namesrv.config import NamesrvConfig
from namesrv.durable import write_atomic
from namesrv.kvconfig import KVConfig
from namesrv.metrics import NamesrvMetrics
from namesrv.processor import NameServerProcessor
from namesrv.request_classes import REQUEST_CLASSES
from namesrv.snapshot import RouteSnapshots
from security.gate import AccessControl
from security.tls_context import server_gate
from server_runtime.metering import RequestMeter
from server_runtime.metrics_http import MetricsEndpoint
from server_runtime.pause import paused_for
from server_runtime.ratelog import CLIP_ARGS
from server_runtime.reactor import Processor, Reactor

log = logging.getLogger("namesrv")
log.addFilter(CLIP_ARGS)  # no client value makes a long log line, whoever logs it

SHUTDOWN_GRACE_SECONDS = 1.5
#: The whole stop, answers and final route snapshot together: past it the final snapshot is
#: given up (the last periodic one stays; brokers re-register within 30 s of a restart anyway).
STOP_SECONDS = 1.8


class NameServer:
    def __init__(self, config: NamesrvConfig, kv: KVConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        # Certificate files are read here: a bad one is a start-up error, before anything listens.
        self.tls = server_gate(config.tls_settings().resolved())
        self._write_lock = trio.Lock()
        self.processor = NameServerProcessor(
            config, kv, clock=clock, persist=self._persist, connection_count=lambda: len(self.reactor.connections)
        )
        self.access = AccessControl(config, config.rocketmqHome, log)  # reads the accounts: a bad file stops here
        gate = self.access.guard(self.processor, REQUEST_CLASSES, peer_of=self._peer_of, warn=self.processor.warn)
        # With metrics on, every request is counted on its way through (server_runtime.metering); off, nothing is.
        self.meter = RequestMeter(gate, REQUEST_CLASSES) if config.metricsPort else None
        front: Processor = self.meter if self.meter is not None else gate
        self.reactor = Reactor(
            front,
            on_close=self._connection_closed,
            max_frame=config.frameMaxLength,
            max_connections=lambda: self.config.serverMaxConnections,
            idle_seconds=lambda: float(self.config.serverChannelMaxIdleTimeSeconds),
            read_budget=config.serverTotalReadBufferBytes,
            high_water_mark=config.writeBufferHighWaterMark,
            low_water_mark=config.writeBufferLowWaterMark,
            tls=self.tls,
        )
        self._stop_event = trio.Event()
        self._nursery: trio.Nursery | None = None
        self.snapshots = RouteSnapshots(self.processor.table, config, now_ms=self.processor.now_ms)
        self.processor.restored = self.snapshots.restore()
        self.metrics: MetricsEndpoint | None = None  # listening once serve() started, with metricsPort set

    def _peer_of(self, conn_id: object) -> str | None:
        conn = self.reactor.connections.get(conn_id) if isinstance(conn_id, int) else None
        return conn.peer if conn is not None else None

    async def _persist(self, path: str, data: bytes) -> None:
        """Write a file atomically and durably off the event loop, one at a time.

        Writes are serialised in arrival order, so the last acknowledged
        change is also the last one written.
        """
        async with self._write_lock:
            await trio.to_thread.run_sync(write_atomic, path, data)

    async def serve(self, *, task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until :meth:`stop`, then drain and return."""
        address = self.reactor.listen(self.config.bindAddress, self.config.listenPort, self.config.serverSocketBacklog)
        # listenPort=0 asks for any free port; like Java, the bound one is written back so that
        # getNamesrvConfig (and a config persisted later) names the port clients actually use.
        self.config.listenPort = address[1]
        if self.meter is not None:
            self.metrics = await self._metrics_endpoint(self.meter)
        log.info("%s", self.tls.describe())
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if self.metrics is not None:
                nursery.start_soon(self.metrics.run)
            nursery.start_soon(self.reactor.run)
            nursery.start_soon(self._housekeeping)
            nursery.start_soon(self.snapshots.run)
            task_status.started(address)
            await self._stop_event.wait()
            stop_by = trio.current_time() + STOP_SECONDS
            # Registrations in progress are abandoned at their next slice, before
            # they change anything, and answered: the grace below is for answers.
            self.processor.stopping = True
            self.reactor.stop_accepting()
            self.reactor.stop_reading()
            await self._answer_in_flight()
            with trio.move_on_at(stop_by) as final:
                await self._final_snapshot()
            if final.cancelled_caught:
                log.warning("final route snapshot given up: not written within the stop's %.1f s "
                            "(the last periodic one stays)", STOP_SECONDS)
            self.reactor.close_all("server stopping")
            nursery.cancel_scope.cancel()

    async def _answer_in_flight(self) -> None:
        """Let the requests already read be answered, for up to SHUTDOWN_GRACE_SECONDS.

        A registration past its first write is finished whatever the time (bounded work: its
        topics are planned, a few hundred ms of CPU for 200,000), then its answer gets a moment
        to go out: closing its connection first would leave a request read and never answered.
        """
        grace_end = trio.current_time() + SHUTDOWN_GRACE_SECONDS
        while self.reactor.in_flight:
            if self.processor.table.must_finish:
                grace_end = max(grace_end, trio.current_time() + 0.5)
            elif trio.current_time() >= grace_end:
                return
            await trio.sleep(0.005)

    async def _metrics_endpoint(self, meter: RequestMeter) -> MetricsEndpoint:
        processor = self.processor
        collector = NamesrvMetrics(
            table=processor.table, kv=processor.kv, counters=processor.counters, meter=meter, reactor=self.reactor,
            snapshots=self.snapshots, restored=lambda: processor.restored,
        )
        endpoint = MetricsEndpoint(collector.registry(), log)
        await endpoint.listen(self.config.metricsBindAddress, self.config.metricsPort)
        log.info("metrics at %s", endpoint.url)
        return endpoint

    def _connection_closed(self, conn_id: int, peer: str, reason: str) -> None:
        self.access.forget(conn_id)
        self.processor.connection_closed(conn_id)
        if self.processor.table_lock.locked() and self._nursery is not None:
            # A registration (or other change) is under way: the close is
            # applied after it, so a close that arrived later wins.
            self._nursery.start_soon(self._close_after_lock, conn_id, peer, reason)
            return
        self._drop_brokers_of(conn_id, peer, reason)

    async def _close_after_lock(self, conn_id: int, peer: str, reason: str) -> None:
        async with self.processor.table_lock:
            self._drop_brokers_of(conn_id, peer, reason)

    def _drop_brokers_of(self, conn_id: int, peer: str, reason: str) -> None:
        gone = self.processor.table.connection_closed(conn_id)
        self.processor.counters.removed("connection_closed", len(gone))
        for removed in gone[:3]:
            log.warning(
                "broker %s %s (%s) removed: its connection %s closed (%s)",
                removed.name, removed.addr, removed.cluster, peer, reason,
            )
        if len(gone) > 3:  # one line for the rest: a connection may hold up to maxBrokersPerConnection
            log.warning("%d more brokers removed: their connection %s closed (%s)", len(gone) - 3, peer, reason)

    async def _final_snapshot(self) -> None:
        try:
            await self.snapshots.write_final()
        except Exception:  # a failed last write must not keep the server from stopping
            log.exception("final route snapshot failed")

    def stop(self) -> None:
        """Begin a graceful stop (safe to call more than once)."""
        self._stop_event.set()

    async def _housekeeping(self) -> None:
        """Expire brokers whose heartbeats stopped, every scanNotActiveBrokerInterval; reload changed accounts.

        After a pause of the process (SIGSTOP, a frozen VM), the heartbeats
        sent meanwhile are read and applied before anyone is expired.
        """
        table = self.processor.table
        while True:
            interval = self.config.scanNotActiveBrokerInterval / 1000.0
            slept_at = trio.current_time()
            await trio.sleep(interval)
            pause = paused_for(slept_at, trio.current_time(), interval)
            if pause:
                await self._catch_up(pause)
            self.processor.warn.flush()
            await self.access.reload()
            async with self.processor.table_lock:
                expired = table.scan_not_active(self.processor.now_ms())
            self.processor.counters.removed("expired", len(expired))
            for removed in expired:
                log.warning(
                    "broker %s %s (%s) expired: no heartbeat within its timeout",
                    removed.name, removed.addr, removed.cluster,
                )
                # Java closes the expired broker's channel too.
                if removed.conn is not None:
                    self.reactor.close_by_id(removed.conn, "broker expired")

    async def _catch_up(self, pause: float) -> None:
        """Read what waits on every connection, and let the registrations it holds apply."""
        log.warning(
            "the process stood still for %.1f s (stopped or starved of CPU): reading what waits on %d connections "
            "before expiring brokers", pause, len(self.reactor.connections),
        )
        await self.reactor.read_pending()
