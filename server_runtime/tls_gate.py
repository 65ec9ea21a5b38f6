"""What a server's port accepts: ``tls.server.mode`` applied to each new connection.

Like Netty's handler in a Java NameServer or broker, the first bytes of a
connection decide: a TLS handshake record (0x16 0x03) starts a TLS session,
anything else is a RocketMQ frame. ``disabled`` closes TLS connections,
``enforcing`` closes plaintext ones, ``permissive`` serves both on the same
port. Each refusal closes that one connection with one rate-limited log
line (raised as :class:`TlsRefused` for the reactor to act on).

The test-mode certificate is made on the first TLS connection, in a worker
thread, not at start: importing ``cryptography`` alone takes about a
second on a busy machine, and most servers (and every test) never see a
TLS client. Connections that arrive meanwhile wait, unread.

A handshake must complete within :data:`HANDSHAKE_TIMEOUT` (Netty's
default): a peer that starts one and stalls is closed by the reactor's
once-a-second sweep, long before the idle timeout.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Iterable

import trio

from remoting.clip import clip
from server_runtime.connection import Connection
from server_runtime.tls_session import (
    MAX_HANDSHAKE_BYTES,
    PLAINTEXT,
    UNDECIDED,
    Hello,
    TlsError,
    TlsSession,
    classify,
)

log = logging.getLogger("remoting")

#: The values of ``tls.server.mode`` (Java's TlsMode names).
DISABLED = "disabled"
PERMISSIVE = "permissive"
ENFORCING = "enforcing"
MODES = (DISABLED, PERMISSIVE, ENFORCING)

HANDSHAKE_TIMEOUT = 10.0
#: New TLS sessions started per reactor turn. Answering a ClientHello (key exchange, signature)
#: costs about 0.6 ms of CPU (bench/tls_costs.py), the later steps far less: a burst of new TLS connections is
#: served over several turns, with other connections and trio's tasks between them, instead of
#: in one long pass.
HANDSHAKES_PER_TURN = 16

#: Summary lines of the rate-limited refusals, by kind.
SUMMARIES = {
    "plaintext": "closed {count} more plaintext connections (tls.server.mode=enforcing) in the last {seconds} s",
    "disabled": "closed {count} more TLS connections (tls.server.mode=disabled) in the last {seconds} s",
    "failed": "closed {count} more connections whose TLS failed in the last {seconds} s",
}


class TlsRefused(Exception):
    """Close this connection: ``kind`` picks the log summary, ``output`` is an alert to send first."""

    def __init__(self, kind: str, message: str, output: bytes = b"") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.output = output


class TlsGate:
    def __init__(
        self,
        mode: str,
        context: ssl.SSLContext | None,
        *,
        make_context: Callable[[], ssl.SSLContext] | None = None,
    ) -> None:
        """``context`` None (and not disabled): ``make_context`` makes one on the first TLS connection.

        The settings' side (which certificate, test mode) is :func:`security.tls_context.server_gate`'s.
        """
        if context is None and mode != DISABLED and make_context is None:
            raise ValueError(f"tls.server.mode={mode} without a certificate needs make_context")
        self.mode = mode
        self.context = context
        self.make_context = make_context
        self.preparing = False
        self.failure: str | None = None
        self.waiting: dict[int, Connection] = {}  # for the test-mode certificate
        self.deferred: dict[int, Connection] = {}  # for the next turn's handshake quota
        self.handshake_quota = HANDSHAKES_PER_TURN

    def describe(self) -> str:
        """One line for the start-up log."""
        if self.mode == DISABLED:
            return "TLS disabled (tls.server.mode=disabled): plaintext only"
        cert = "a self-signed test-mode certificate" if self.context is None else "the configured certificate"
        both = "TLS only" if self.mode == ENFORCING else "TLS and plaintext on one port"
        return f"tls.server.mode={self.mode}: {both}, with {cert}"

    # ------------------------------------------------------------------

    def new_turn(self) -> list[Connection]:
        """A new reactor turn: a fresh handshake quota, and the connections deferred for it, unparked."""
        self.handshake_quota = HANDSHAKES_PER_TURN
        if not self.deferred:
            return []
        conns = [conn for conn in self.deferred.values() if not conn.closed]
        self.deferred.clear()
        for conn in conns:
            conn.busy = False
        return conns

    def receive(self, conn: Connection, data: bytes, now: float) -> tuple[bytes, bytes]:
        """(plaintext for the decoder, ciphertext to send) for bytes read from ``conn``.

        Raises TlsRefused (close it, logging one line) or PeerClosed. May park
        the connection (``busy``) until the test-mode certificate is ready.
        """
        tls = conn.tls
        if type(tls) is TlsSession:
            return self._session_receive(tls, data)
        assert isinstance(tls, Hello)
        return self._first_bytes(conn, tls, data, now)

    def _session_receive(self, session: TlsSession, data: bytes) -> tuple[bytes, bytes]:
        try:
            plain = session.receive(data)
        except TlsError as exc:
            raise TlsRefused("failed", f"TLS {exc}", session.take_output()) from None
        return plain, session.take_output()

    def _first_bytes(self, conn: Connection, hello: Hello, data: bytes, now: float) -> tuple[bytes, bytes]:
        seen = hello.data = hello.data + data if hello.data else data
        kind = classify(seen)
        if kind == UNDECIDED:
            return b"", b""
        if kind == PLAINTEXT:
            if self.mode == ENFORCING:
                raise TlsRefused("plaintext", "plaintext on a TLS-only port (tls.server.mode=enforcing)")
            conn.tls = None
            return seen, b""
        if self.mode == DISABLED:
            raise TlsRefused("disabled", "TLS handshake on a port without TLS (tls.server.mode=disabled)")
        if self.context is None:
            if self.failure is not None:
                raise TlsRefused("failed", f"no TLS certificate ({self.failure})")
            if len(seen) > MAX_HANDSHAKE_BYTES:
                raise TlsRefused("failed", f"TLS handshake sent more than {MAX_HANDSHAKE_BYTES} bytes")
            conn.busy = True  # unread until the certificate is ready (see prepare)
            self.waiting[conn.id] = conn
            return b"", b""
        if self.handshake_quota <= 0:
            conn.busy = True  # its hello is kept; answered next turn (see new_turn)
            self.deferred[conn.id] = conn
            return b"", b""
        self.handshake_quota -= 1
        session = conn.tls = TlsSession(self.context, now)
        return self._session_receive(session, seen)

    def start_preparing(self) -> bool:
        """True once, when connections wait and the certificate has not been asked for yet."""
        if self.waiting and not self.preparing and self.context is None and self.failure is None:
            self.preparing = True
            return True
        return False

    async def prepare(self) -> list[Connection]:
        """Make the test-mode certificate off the loop; the connections that waited for it, unparked."""
        try:
            assert self.make_context is not None  # (checked when the gate was made)
            self.context = await trio.to_thread.run_sync(self.make_context)
            log.info("TLS test mode: made a self-signed certificate for this run (clients in test mode accept it)")
        except Exception as exc:  # one line, then TLS connections are refused; plaintext goes on
            self.failure = f"{type(exc).__name__}: {clip(exc)}"
            log.error("TLS test mode: cannot make a self-signed certificate: %s", self.failure)
        waiting = [conn for conn in self.waiting.values() if not conn.closed]
        self.waiting.clear()
        for conn in waiting:
            conn.busy = False
        return waiting

    def stalled(self, connections: Iterable[Connection], now: float) -> list[tuple[Connection, TlsRefused]]:
        """Connections whose handshake has run longer than HANDSHAKE_TIMEOUT."""
        limit = now - HANDSHAKE_TIMEOUT
        return [
            (conn, TlsRefused("failed", f"TLS handshake not completed within {HANDSHAKE_TIMEOUT:g} s"))
            for conn in connections
            if type(conn.tls) is TlsSession and not conn.tls.handshaken and conn.tls.started < limit
        ]

__all__ = ["DISABLED", "ENFORCING", "HANDSHAKES_PER_TURN", "HANDSHAKE_TIMEOUT", "MODES", "PERMISSIVE", "SUMMARIES", "TlsGate",
           "TlsRefused"]
