"""Connections by address, shared by many simulated producers.

Like one ``MQClientInstance``'s channel table: one remoting connection per
address, opened lazily, dropped when it breaks and reopened on the next
request. Thousands of producers share it, so a NameServer or broker sees a
handful of busy connections instead of thousands of idle ones (the request
load is the same; only the socket count differs from real clients).

* every request has a timeout, and connecting counts against it;
* a refused connection (a killed broker) fails at once, and is tried again
  on the next use, as Java does;
* concurrent first requests to an address share one connect attempt;
* requests in flight are bounded per connection (``max_in_flight``); more
  wait for a slot within their own timeout;
* connections are pipelined (:mod:`simclient.conn`): one write per
  scheduler pass carries every request queued meanwhile.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Self

import trio

from remoting.acl import Credentials
from remoting.command import RemotingCommand
from remoting.transport import ConnectError, RemotingError, RemotingTimeout
from simclient.conn import MAX_IN_FLIGHT, PipelinedConnection, open_connection

log = logging.getLogger("simclient.pool")

DEFAULT_CONNECT_TIMEOUT = 3.0  # NettyClientConfig.connectTimeoutMillis


class _Conn:
    __slots__ = ("client", "error", "ready")

    def __init__(self) -> None:
        self.client: PipelinedConnection | None = None
        self.ready = trio.Event()  # set once the connect attempt has ended, either way
        self.error: str | None = None


class ClientPool:
    """Connections by address shared by many producers (like one MQClientInstance's channel
    table): one connection per address, opened lazily with a connect timeout, dropped on
    error and reopened on next use. Must be used inside ``async with ClientPool(...) as pool:``.

    ``close_on_timeout`` closes a connection whose request timed out, as Java
    does by default (``clientCloseSocketIfTimeout``); it is off by default
    here because the connection is shared by producers that would each have
    their own in reality, and closing it would fail everyone's requests.

    ``credentials`` signs every request on every connection (accounts on the servers).
    """

    def __init__(
        self,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_in_flight: int = MAX_IN_FLIGHT,
        max_frame_length: int = 16 * 1024 * 1024,
        close_on_timeout: bool = False,
        tls: ssl.SSLContext | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self.connect_timeout = connect_timeout
        self.max_frame_length = max_frame_length
        self.close_on_timeout = close_on_timeout
        self.max_in_flight = max_in_flight
        self.tls = tls  # every connection speaks TLS (security.tls_context.client_context)
        self.credentials = credentials
        self._conns: dict[str, _Conn] = {}
        self._nursery: trio.Nursery | None = None
        self._cm: AbstractAsyncContextManager[trio.Nursery] | None = None
        self.connects = 0
        self.connect_failures = 0
        #: Called with (address, request) for each request a server sends on a pooled connection
        #: (brokers notify consumers that their group changed); must not block.
        self.request_listeners: list[Callable[[str, RemotingCommand], None]] = []
        #: Called with the address each time a new connection is established (Java's onChannelActive).
        self.connect_listeners: list[Callable[[str], None]] = []

    async def __aenter__(self) -> Self:
        if self._cm is not None:
            raise RuntimeError("ClientPool is not reentrant")
        self._cm = _connection_nursery(self)
        self._nursery = await self._cm.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._cm is not None
        try:
            return await self._cm.__aexit__(exc_type, exc, tb)
        finally:
            self._nursery = None
            self._cm = None

    def _close_all(self) -> None:
        for conn in self._conns.values():
            if conn.client is not None:
                conn.client.close("pool closed")
        self._conns.clear()

    # ------------------------------------------------------------------

    async def _hold(self, addr: str, *, task_status: trio.TaskStatus[PipelinedConnection]) -> None:
        """Connect, then run the connection's reader and writer until it breaks or is dropped."""
        client = await open_connection(
            addr,
            connect_timeout=self.connect_timeout,
            max_frame_length=self.max_frame_length,
            max_in_flight=self.max_in_flight,
            tls=self.tls,
            credentials=self.credentials,
        )
        client.on_request = self._server_request
        task_status.started(client)
        for listener in list(self.connect_listeners):
            try:
                listener(addr)
            except Exception:  # a listener bug must not break the connection
                log.exception("connect listener failed for %s", addr)
        try:
            await client.run()
        except Exception as exc:  # noqa: BLE001 (one broken connection must not take every producer down)
            log.warning("connection to %s failed: %r", addr, exc)
            client.close(f"connection failed: {exc!r}")

    def _server_request(self, addr: str, cmd: RemotingCommand) -> None:
        for listener in list(self.request_listeners):
            try:
                listener(addr, cmd)
            except Exception:  # a listener bug must not break the connection's reader
                log.exception("request listener failed for code %s from %s", cmd.code, addr)

    def connection_of(self, addr: str) -> PipelinedConnection | None:
        """The live connection to ``addr``, if any (its identity changes when it was re-opened)."""
        return self._live(addr)

    def _live(self, addr: str) -> PipelinedConnection | None:
        conn = self._conns.get(addr)
        client = conn.client if conn is not None else None
        return client if client is not None and not client.closed else None

    async def _client(self, addr: str) -> PipelinedConnection:
        """The live connection to ``addr``, connecting if needed (call under the request's timeout)."""
        if self._nursery is None:
            raise RuntimeError("ClientPool used outside 'async with'")
        for _ in range(3):
            conn = self._conns.get(addr)
            if conn is not None:
                client = conn.client
                if client is not None:
                    if not client.closed:
                        return client
                    self._discard(addr, conn)  # broke since last use: reconnect below
                elif not conn.ready.is_set():
                    await conn.ready.wait()  # someone else is connecting
                    if conn.client is not None and not conn.client.closed:
                        return conn.client
                    if conn.error is not None:
                        raise ConnectError(conn.error)
                    continue  # their attempt was cancelled: try ourselves
                else:
                    self._discard(addr, conn)
            conn = _Conn()
            self._conns[addr] = conn
            self.connects += 1
            try:
                conn.client = await self._nursery.start(self._hold, addr)
                return conn.client
            except ConnectError as exc:
                self.connect_failures += 1
                conn.error = str(exc)
                self._discard(addr, conn)
                raise
            except BaseException:
                self._discard(addr, conn)
                raise
            finally:
                conn.ready.set()
        raise ConnectError(f"cannot connect to {addr}: connect attempts kept being cancelled")

    def _discard(self, addr: str, conn: _Conn) -> None:
        if conn.client is not None:
            conn.client.close("dropped")
        if self._conns.get(addr) is conn:
            del self._conns[addr]

    def drop(self, addr: str) -> None:
        """Close the connection to ``addr`` (the next request reconnects)."""
        conn = self._conns.get(addr)
        if conn is not None:
            self._discard(addr, conn)

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send ``cmd`` to ``addr`` and wait for the answer, all within ``timeout`` seconds.

        Raises ConnectError (could not connect), RemotingTimeout (no answer in
        time) or RemotingError (the connection broke).
        """
        deadline = trio.current_time() + timeout
        client = self._live(addr)
        if client is None:
            with trio.move_on_at(deadline):
                client = await self._client(addr)
            if client is None:
                raise RemotingTimeout(f"{addr}: not connected within {timeout:g} s")
        try:
            return await client.invoke(cmd, deadline)
        except RemotingTimeout:
            if self.close_on_timeout:
                self.drop(addr)
            raise RemotingTimeout(f"{addr}: no response to request code {cmd.code} within {timeout:g} s") from None
        except RemotingError:
            self.drop(addr)
            raise

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand, timeout: float) -> None:
        """Queue a oneway request (connecting first if needed, within ``timeout``)."""
        with trio.move_on_after(timeout):
            client = self._live(addr) or await self._client(addr)
            client.send_oneway(cmd)
            return
        raise RemotingTimeout(f"{addr}: could not connect to send request code {cmd.code} within {timeout:g} s")

    @property
    def addresses(self) -> list[str]:
        return sorted(self._conns)


@asynccontextmanager
async def _connection_nursery(pool: ClientPool) -> AsyncIterator[trio.Nursery]:
    """The nursery holding the pool's connections; the caller's own exception comes out
    unwrapped (the connection tasks never raise, so a group holds only that one)."""
    try:
        async with trio.open_nursery() as nursery:
            try:
                yield nursery
            finally:
                pool._close_all()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


__all__ = ["ClientPool", "ConnectError", "RemotingError", "RemotingTimeout"]
