"""A trio client for the remoting protocol: one connection, many requests.

Responses are matched to requests by ``opaque``; every call has a
timeout; the number of requests in flight is bounded. With an
``ssl.SSLContext`` (see :func:`security.tls_context.client_context`) the
connection speaks TLS, as a Java client with ``-Dtls.enable=true``; the
handshake counts against the connect timeout. Given credentials, the
client signs every request it sends (:func:`remoting.acl.sign`), as a
Java client with ``AclClientRPCHook`` does.
"""

from __future__ import annotations

import itertools
import logging
import os
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from remoting.acl import Credentials, sign
from remoting.codec import FrameDecoder, ProtocolError, encode
from remoting.command import RemotingCommand

log = logging.getLogger("remoting")

DEFAULT_TIMEOUT = 3.0
MAX_IN_FLIGHT = 4096
#: Bytes of a peer's first answer kept to say what it is when they are not a frame (one line of text).
PEEK_BYTES = 80


class RemotingError(Exception):
    """A request could not be completed; the message names the address."""


class RemotingTimeout(RemotingError):
    pass


class ConnectError(RemotingError):
    pass


def parse_addr(addr: str) -> tuple[str, int]:
    """``host:port`` -> (host, port), with a clear error for anything else."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not a host:port address: {addr!r}")
    return host.strip("[]"), int(port)


def _reason(exc: OSError) -> str:
    """The OS's words for a failed connect (trio wraps them in a summary)."""
    if exc.strerror:
        return exc.strerror
    cause = exc.__cause__
    inner = getattr(cause, "exceptions", None) or ([cause] if cause is not None else [])
    for err in inner:
        if isinstance(err, OSError) and err.errno:
            return os.strerror(err.errno)
    return str(exc)


class _Pending:
    __slots__ = ("event", "response")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.response: RemotingCommand | None = None


class RemotingClient:
    """Use through :func:`connect`; it owns the reader task."""

    def __init__(
        self, addr: str, stream: trio.abc.Stream, *, max_frame_length: int, credentials: Credentials | None = None
    ) -> None:
        self.addr = addr
        self.credentials = credentials
        self._stream = stream
        self._decoder = FrameDecoder(max_frame_length)
        self._pending: dict[int, _Pending] = {}
        self._opaques = itertools.count(1)
        self._send_lock = trio.Lock()
        self._slots = trio.Semaphore(MAX_IN_FLIGHT)
        self._closed: str | None = None
        #: The peer's first bytes, kept until a frame decodes: what a peer that is not RocketMQ said.
        self._first = b""
        self._framed = False

    def _next_opaque(self) -> int:
        return next(self._opaques) & 0x7FFFFFFF

    async def _reader(self) -> None:
        try:
            while True:
                data = await self._stream.receive_some(256 * 1024)
                if not data:
                    self._fail("connection closed by peer")
                    return
                if not self._framed and len(self._first) < PEEK_BYTES:
                    self._first += data[:PEEK_BYTES - len(self._first)]
                for cmd in self._decoder.feed(data):
                    self._framed = True
                    if not cmd.is_response:
                        log.debug("ignoring request %s from %s", cmd.code, self.addr)
                        continue
                    pending = self._pending.pop(cmd.opaque, None)
                    if pending is None:
                        log.debug("dropping response with unknown opaque %s from %s", cmd.opaque, self.addr)
                        continue
                    pending.response = cmd
                    pending.event.set()
        except ProtocolError as exc:
            self._fail(self._garbled(exc))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._fail(f"connection lost: {exc}")

    def _garbled(self, exc: ProtocolError) -> str:
        """Why the connection failed on bytes that are not a frame: from a peer that never sent one, it
        is not a RocketMQ server at all (an HTTP server's answer, say), which is what to tell the user."""
        if self._framed:
            return f"malformed frame from server: {exc}"
        head = self._first.replace(b"\r", b"\n").split(b"\n", 1)[0]
        if head and all(32 <= b < 127 for b in head):
            return f"not a RocketMQ server: it answered {head.decode('ascii')!r}"
        return f"not a RocketMQ server: its answer is not a remoting frame ({exc})"

    def _fail(self, reason: str) -> None:
        self._closed = reason
        for pending in self._pending.values():
            pending.event.set()
        self._pending.clear()

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def _send(self, data: bytes) -> None:
        async with self._send_lock:
            try:
                await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                self._fail(f"connection lost: {exc}")
                raise RemotingError(f"{self.addr}: {self._closed}") from None

    async def invoke(self, req: RemotingCommand, timeout: float = DEFAULT_TIMEOUT) -> RemotingCommand:
        """Send ``req`` and wait for its response (at most ``timeout`` seconds)."""
        if self._closed is not None:
            raise RemotingError(f"{self.addr}: {self._closed}")
        with trio.move_on_after(timeout) as scope:
            async with self._slots:
                req.opaque = self._next_opaque()
                pending = _Pending()
                self._pending[req.opaque] = pending
                try:
                    if self._closed is not None:  # closed while we waited for a slot: _fail missed us
                        raise RemotingError(f"{self.addr}: {self._closed}")
                    await self._send(self._encode(req))
                    await pending.event.wait()
                finally:
                    self._pending.pop(req.opaque, None)
        if scope.cancelled_caught:
            raise RemotingTimeout(f"{self.addr}: no response to request code {req.code} within {timeout:g} s")
        if pending.response is None:
            raise RemotingError(f"{self.addr}: {self._closed}")
        return pending.response

    async def invoke_oneway(self, req: RemotingCommand, timeout: float = DEFAULT_TIMEOUT) -> None:
        req.flag |= 2
        req.opaque = self._next_opaque()
        with trio.move_on_after(timeout) as scope:
            await self._send(self._encode(req))
        if scope.cancelled_caught:
            raise RemotingTimeout(f"{self.addr}: could not send request code {req.code} within {timeout:g} s")

    def _encode(self, req: RemotingCommand) -> bytes:
        return encode(sign(req, self.credentials) if self.credentials is not None else req)


async def open_stream(addr: str, *, connect_timeout: float, tls: ssl.SSLContext | None = None) -> trio.abc.Stream:
    """A connected stream to ``addr``, TLS once its handshake is done when ``tls`` is given.

    ConnectError with the OS's reason (a refused connection fails at once),
    the TLS failure, or the timeout, which covers connect and handshake.
    """
    host, port = parse_addr(addr)
    tcp: trio.SocketStream | None = None
    with trio.move_on_after(connect_timeout):
        try:
            tcp = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            raise ConnectError(f"cannot connect to {addr}: {_reason(exc)}") from None
        if tls is None:
            return tcp
        stream = trio.SSLStream(tcp, tls, server_hostname=host if tls.check_hostname else None)
        try:
            await stream.do_handshake()
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            await trio.aclose_forcefully(tcp)
            raise ConnectError(f"TLS handshake with {addr} failed: {_tls_reason(exc)}") from None
        return stream
    if tcp is not None:
        await trio.aclose_forcefully(tcp)
        raise ConnectError(f"TLS handshake with {addr} failed: timed out after {connect_timeout:g} s")
    raise ConnectError(f"cannot connect to {addr}: timed out after {connect_timeout:g} s")


def _tls_reason(exc: BaseException) -> str:
    """What broke a handshake: OpenSSL's reason, or the server closing the connection."""
    cause = exc.__cause__
    if isinstance(cause, ssl.SSLEOFError) or cause is None:
        return "the server closed the connection (is TLS enabled on it?)"
    if isinstance(cause, ssl.SSLError):
        return str(cause.reason or cause).lower().replace("_", " ")
    return str(cause) or type(cause).__name__


@asynccontextmanager
async def connect(
    addr: str,
    *,
    connect_timeout: float = DEFAULT_TIMEOUT,
    max_frame_length: int = 16 * 1024 * 1024,
    tls: ssl.SSLContext | None = None,
    credentials: Credentials | None = None,
) -> AsyncIterator[RemotingClient]:
    """Open a connection to ``addr`` (``host:port``) for the duration of a block: TLS with
    ``tls``; with ``credentials``, every request on it is signed."""
    stream = await open_stream(addr, connect_timeout=connect_timeout, tls=tls)
    client = RemotingClient(addr, stream, max_frame_length=max_frame_length, credentials=credentials)
    async with stream:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client._reader)
                try:
                    yield client
                finally:
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The reader never raises, so the group holds the caller's own
            # exception: give it back unwrapped.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise


__all__ = [
    "DEFAULT_TIMEOUT",
    "ConnectError",
    "RemotingClient",
    "RemotingError",
    "RemotingTimeout",
    "connect",
    "open_stream",
    "parse_addr",
]
