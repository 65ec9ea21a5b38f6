"""How the admin client reaches servers: one call, a connection pool, fan-out.

Every higher-level call (NameServer, broker, messaging) goes through
:meth:`ClientCore.invoke`, so the timeout, the pooling and the error
wording are decided in one place. ``_any`` asks one NameServer (the first
that answers, in random order, like a Java client); ``_each``/``_all`` ask
every address in parallel and keep one :class:`PerServer` result each,
because RocketMQ writes go to every NameServer and they need not agree.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Self

import trio

from mqadmin.client.errors import AdminError, NotFound, PerServer, check_answer
from mqadmin.client.security import ClientSecurity, current_security
from remoting.bodies import BodyError
from remoting.command import RemotingCommand
from remoting.transport import RemotingClient, RemotingError, connect

DEFAULT_TIMEOUT = 3.0
#: What a server enforcing TLS does to a plaintext request (it closes the connection unanswered).
_CLOSED = "connection closed by peer"


def _failure(exc: RemotingError, security: ClientSecurity | None) -> AdminError:
    """The error of a failed request; a plaintext one cut off may have met a server that needs TLS."""
    text = str(exc)
    if text.endswith(_CLOSED) and (security is None or security.tls is None):
        text += " (a server that enforces TLS does this to plaintext: try --tls)"
    return AdminError(text)


async def call(
    addr: str, req: RemotingCommand, timeout: float = DEFAULT_TIMEOUT, security: ClientSecurity | None = None
) -> RemotingCommand:
    """One request over a fresh connection to ``addr`` (signed and over TLS as ``security`` says,
    default: unsigned, plain TCP)."""
    credentials = security.credentials if security is not None else None
    tls = security.ssl_context() if security is not None else None
    try:
        async with connect(addr, connect_timeout=timeout, credentials=credentials, tls=tls) as client:
            return await client.invoke(req, timeout)
    except RemotingError as exc:
        raise _failure(exc, security) from None


class _Pool:
    """One persistent connection per address, each held open by a task of the pool's nursery."""

    def __init__(self, nursery: trio.Nursery, timeout: float, security: ClientSecurity) -> None:
        self.nursery = nursery
        self.timeout = timeout
        self.security = security
        self.conns: dict[str, RemotingClient] = {}
        self.closers: dict[str, trio.Event] = {}
        self.locks: dict[str, trio.Lock] = {}

    async def get(self, addr: str) -> RemotingClient:
        conn = self.conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        async with self.locks.setdefault(addr, trio.Lock()):
            conn = self.conns.get(addr)
            if conn is not None and not conn.closed:
                return conn
            self.drop(addr)
            conn = await self.nursery.start(self._hold, addr)
            self.conns[addr] = conn
            return conn

    def drop(self, addr: str) -> None:
        self.conns.pop(addr, None)
        closer = self.closers.pop(addr, None)
        if closer is not None:
            closer.set()

    async def _hold(self, addr: str, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        done = trio.Event()
        self.closers[addr] = done
        async with connect(addr, connect_timeout=self.timeout, credentials=self.security.credentials,
                           tls=self.security.ssl_context()) as conn:
            task_status.started(conn)
            await done.wait()


class ClientCore:
    """A set of NameServer addresses, a timeout, the keys requests are signed with, and the ways to
    send a request."""

    def __init__(
        self, namesrv_addrs: list[str], *, timeout: float = DEFAULT_TIMEOUT, security: ClientSecurity | None = None
    ) -> None:
        """``namesrv_addrs`` may be empty for broker-only calls; NameServer calls then fail clearly.
        Without ``security``, the client takes the one of the context it is built in
        (:func:`~mqadmin.client.security.using_security`; unsigned by default)."""
        self.namesrv_addrs = list(namesrv_addrs)
        self.timeout = timeout
        self.security = security if security is not None else current_security()
        self._pool: _Pool | None = None

    @asynccontextmanager
    async def pooled(self) -> AsyncIterator[Self]:
        """Reuse one connection per address for the block (many sends or pulls in a row)."""
        async with trio.open_nursery() as nursery:
            self._pool = _Pool(nursery, self.timeout, self.security)
            try:
                yield self
            finally:
                self._pool = None
                nursery.cancel_scope.cancel()

    async def invoke(self, addr: str, req: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """One request to any server, pooled when a pool is open."""
        t = self.timeout if timeout is None else timeout
        pool = self._pool
        if pool is None:
            return await call(addr, req, t, self.security)
        try:
            conn = await pool.get(addr)
            return await conn.invoke(req, t)
        except RemotingError as exc:
            pool.drop(addr)
            raise _failure(exc, self.security) from None

    async def _any(self, req_factory: Callable[[], RemotingCommand], what: str) -> tuple[str, RemotingCommand]:
        """Ask NameServers in random order until one answers (like a Java client)."""
        self._need_namesrv()
        errors = []
        for addr in random.sample(self.namesrv_addrs, len(self.namesrv_addrs)):
            try:
                return addr, check_answer(addr, await self.invoke(addr, req_factory()), what)
            except NotFound:
                raise
            except AdminError as exc:
                errors.append(str(exc))
        raise AdminError("; ".join(errors))

    async def _each(
        self,
        addrs: list[str],
        req_factory: Callable[[], RemotingCommand],
        what: str,
        parse: Callable[[RemotingCommand], Any] = lambda r: None,
        kind: str = "broker",
    ) -> list[PerServer]:
        """The same request to every address in parallel, one result each (in ``addrs`` order); ``kind``
        says what the addresses are (brokers unless told)."""
        results = [PerServer(addr, kind=kind) for addr in addrs]

        async def one(result: PerServer) -> None:
            try:
                resp = check_answer(result.addr, await self.invoke(result.addr, req_factory()), what)
                result.value = parse(resp)
            except AdminError as exc:
                result.error = str(exc)
            except (BodyError, ValueError) as exc:
                result.error = f"{result.addr}: malformed answer to {what}: {exc}"

        async with trio.open_nursery() as nursery:
            for result in results:
                nursery.start_soon(one, result)
        return results

    async def _all(
        self, req_factory: Callable[[], RemotingCommand], what: str, parse: Callable[[RemotingCommand], Any] = lambda r: None
    ) -> list[PerServer]:
        self._need_namesrv()
        return await self._each(self.namesrv_addrs, req_factory, what, parse, kind="NameServer")

    def _need_namesrv(self) -> None:
        if not self.namesrv_addrs:
            raise AdminError("no NameServer address given")
