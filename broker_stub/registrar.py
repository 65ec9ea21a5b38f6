"""Registration with every NameServer: on start, every period, and at once on change.

One task per NameServer, each with its own persistent connection, so a dead
or slow NameServer never delays the others and a NameServer sees this broker
go away the moment its process dies (the connection closes, §6.6). Every
call has a timeout; a NameServer that cannot be reached is tried again at
the next registration, as a Java broker does. :meth:`Registrar.kick` wakes
every task to register now (topic change, permission change, healed
partition). Given ``accessKey``/``secretKey`` (or Java 5.3's
``innerClientAuthenticationCredentials``) every request is signed, as a 5.3
broker signs its NameServer requests.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable

import trio

from broker_stub.config import BrokerConfig
from broker_stub.faults import Faults
from broker_stub.topics import TopicTable
from remoting import requests as rq
from remoting.bodies import DataVersion
from remoting.codes import ResponseCode
from remoting.transport import RemotingClient, RemotingError, connect

log = logging.getLogger("broker_stub")

UNREGISTER_TIMEOUT = 3.0  # Java: 3 s per NameServer


class Registrar:
    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicTable,
        faults: Faults,
        *,
        broker_addr: str,
        ha_addr: str,
        on_first_success: Callable[[], None] = lambda: None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.config = config
        self.topics = topics
        self.faults = faults
        self.broker_addr = broker_addr
        self.ha_addr = ha_addr
        self.master_addr: str | None = None
        self.ha_server_addr: str | None = None
        self.registered: dict[str, DataVersion] = {}  # namesrv -> last version it accepted
        self.on_first_success = on_first_success
        self.tls = tls  # NameServer connections speak TLS (tls.enable)
        self.credentials = config.credentials()  # signs every request to the NameServers when set
        self._wake = trio.Event()
        self._generation = 0
        #: (NameServer, outcome) -> registrations, for the metrics; the NameServers are the configured ones.
        self.outcomes: dict[tuple[str, str], int] = {}

    def _count(self, addr: str, outcome: str) -> None:
        """``success``, ``refused`` (an answer other than SUCCESS), ``failed`` (no answer: down, timed out),
        ``skipped`` (forceRegister=false and the NameServer already had this data version)."""
        key = (addr, outcome)
        self.outcomes[key] = self.outcomes.get(key, 0) + 1

    # ------------------------------------------------------------------

    def kick(self) -> None:
        """Register with every NameServer now (safe to call from sync code)."""
        self._generation += 1
        self._wake.set()
        self._wake = trio.Event()

    def info(self) -> dict[str, str]:
        """What registration taught us, for GET_BROKER_RUNTIME_INFO."""
        out = {"haListenAddr": self.ha_addr, "registeredNamesrvs": ";".join(sorted(self.registered))}
        if self.master_addr:
            out["masterAddr"] = self.master_addr
        if self.ha_server_addr:
            out["haServerAddr"] = self.ha_server_addr
        return out

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            for addr in self.config.namesrv_list():
                nursery.start_soon(self._serve_one, addr)

    async def _wait(self, seconds: float, seen: int) -> None:
        """Sleep for ``seconds`` or until kicked (or kicked since ``seen``)."""
        deadline = trio.current_time() + seconds
        while self._generation == seen:
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                return
            wake = self._wake
            with trio.move_on_after(remaining):
                await wake.wait()

    async def _serve_one(self, addr: str) -> None:
        """Register with one NameServer for as long as the broker runs.

        Like a Java broker, a NameServer is only (re)dialled when the broker
        registers: on start, at each period and on a topic change. A dropped
        connection (the NameServer died, or closed an expired broker's
        channel) is noticed at the next of those, not sooner, so a restarted
        NameServer stays empty for up to one period, as with Java.
        """
        period = self.config.registerNameServerPeriod / 1000.0
        while True:
            seen = self._generation
            timeout = self.config.registerBrokerTimeoutMills / 1000.0
            try:
                async with (
                    connect(addr, connect_timeout=timeout, tls=self.tls, credentials=self.credentials) as client,
                    trio.open_nursery() as nursery,
                ):
                    if self.config.enableSlaveActingMaster:
                        nursery.start_soon(self._heartbeats, addr, client)
                    redial = await self._register_loop(addr, client)
                    nursery.cancel_scope.cancel()
                if redial:  # found closed when it was time to register: dial again now
                    self.registered.pop(addr, None)
                    log.warning("name server %s: connection lost; registering on a new one", addr)
                    continue
                reason = "connection closed during the first registration"  # never a tight reconnect loop
            except RemotingError as exc:
                reason = str(exc)
                self._count(addr, "failed")  # the NameServer could not be reached
            self.registered.pop(addr, None)
            log.warning("name server %s: %s; next attempt in %.1f s or on a topic change", addr, reason, period)
            await self._wait(period, seen)

    async def _register_loop(self, addr: str, client: RemotingClient) -> bool:
        """Register now and then every period/kick, until the connection is found closed.

        Returns True when that happened at a later registration (Java replaces
        an inactive channel when it next invokes: dial again now), False when
        the connection broke during its first registration (wait a period).
        """
        first = True
        while not client.closed:
            seen = self._generation
            if not self.faults.is_partitioned(addr):
                await self._register_once(addr, client)
                if client.closed:
                    return not first
            await self._wait(self.config.registerNameServerPeriod / 1000.0, seen)
            first = False
        return True

    async def _register_once(self, addr: str, client: RemotingClient) -> None:
        config = self.config
        timeout = config.registerBrokerTimeoutMills / 1000.0
        version = self.topics.data_version
        try:
            if not config.forceRegister and not await self._needs_register(client, version, timeout):
                self._count(addr, "skipped")
                return
            req = rq.register_broker(
                cluster=config.brokerClusterName,
                broker_name=config.brokerName,
                broker_addr=self.broker_addr,
                broker_id=config.brokerId,
                topics=self.topics.registered(config.brokerPermission),
                data_version=version,
                ha_server_addr=self.ha_addr,
                compressed=config.compressedRegister,
                enable_acting_master=config.enableSlaveActingMaster,
                heartbeat_timeout_ms=config.brokerNotActiveTimeoutMillis if config.enableSlaveActingMaster else None,
            )
            resp = await client.invoke(req, timeout)
        except RemotingError as exc:
            self._count(addr, "failed")
            log.warning("register to %s failed: %s", addr, exc)
            return
        if resp.code != ResponseCode.SUCCESS:
            self._count(addr, "refused")
            log.warning("register to %s refused: code=%s remark=%s", addr, resp.code, resp.remark)
            return
        self._count(addr, "success")
        first = not self.registered
        if addr not in self.registered:
            log.info("registered to name server %s (dataVersion %s)", addr, version.counter)
        self.registered[addr] = version
        master, ha = resp.ext("masterAddr"), resp.ext("haServerAddr")
        if config.brokerId != 0:
            if master and master != self.master_addr:
                log.info("master of %s is %s (ha %s)", config.brokerName, master, ha)
            self.master_addr = master or self.master_addr
            self.ha_server_addr = ha or self.ha_server_addr
        if first:
            self.on_first_success()

    async def _needs_register(self, client: RemotingClient, version: DataVersion, timeout: float) -> bool:
        """forceRegister=false: ask QUERY_DATA_VERSION first, as Java does."""
        req = rq.query_data_version(
            cluster=self.config.brokerClusterName,
            broker_name=self.config.brokerName,
            broker_addr=self.broker_addr,
            broker_id=self.config.brokerId,
            data_version=version,
        )
        resp = await client.invoke(req, timeout)
        if resp.code != ResponseCode.SUCCESS:
            return True
        return (resp.ext("changed") or "").lower() == "true"

    async def _heartbeats(self, addr: str, client: RemotingClient) -> None:
        """5.x lightweight liveness (enableSlaveActingMaster): oneway BROKER_HEARTBEAT."""
        while not client.closed:
            await trio.sleep(self.config.brokerHeartbeatInterval / 1000.0)
            if self.faults.is_partitioned(addr):
                continue
            req = rq.broker_heartbeat(
                cluster=self.config.brokerClusterName,
                broker_name=self.config.brokerName,
                broker_addr=self.broker_addr,
                broker_id=self.config.brokerId,
            )
            try:
                await client.invoke_oneway(req, self.config.brokerHeartbeatInterval / 1000.0)
            except RemotingError as exc:
                log.debug("heartbeat to %s failed: %s", addr, exc)

    # ------------------------------------------------------------------

    async def unregister_all(self) -> None:
        """UNREGISTER_BROKER to every NameServer in parallel, 3 s each; errors logged."""
        async with trio.open_nursery() as nursery:
            for addr in self.config.namesrv_list():
                nursery.start_soon(self._unregister_one, addr)

    async def _unregister_one(self, addr: str) -> None:
        req = rq.unregister_broker(
            cluster=self.config.brokerClusterName,
            broker_name=self.config.brokerName,
            broker_addr=self.broker_addr,
            broker_id=self.config.brokerId,
        )
        with trio.move_on_after(UNREGISTER_TIMEOUT):
            try:
                async with connect(
                    addr, connect_timeout=UNREGISTER_TIMEOUT, tls=self.tls, credentials=self.credentials
                ) as client:
                    resp = await client.invoke(req, UNREGISTER_TIMEOUT)
                    log.info("unregistered from %s: code=%s", addr, resp.code)
            except RemotingError as exc:
                log.warning("unregister from %s failed: %s", addr, exc)
