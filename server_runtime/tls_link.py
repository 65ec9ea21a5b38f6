"""The reactor's side of TLS: acting on the gate's verdicts with the connection's socket.

:class:`server_runtime.tls_gate.TlsGate` decides (classify the first bytes,
refuse, park until the test-mode certificate exists or until the next
turn's handshake quota) and touches no socket; :mod:`server_runtime.reactor`
reads and writes. This is the glue between them, kept out of the reactor
so its run loop and per-request path read as plaintext does: it sends the
handshake bytes and alerts, closes refused connections with one
rate-limited line, starts the certificate's worker task, and takes up the
connections the gate parked once they may go on.

Ciphertext read goes through the connection's TLS session and its
plaintext into the same decoder; answers are encrypted (by the reactor's
write) before they join ``out``, so the read budget and water marks bound
TLS connections as they do plaintext ones (``out`` holds ciphertext).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import trio

from remoting.codec import ProtocolError
from server_runtime.connection import Connection
from server_runtime.ratelog import RateLimitedLog
from server_runtime.tls_gate import SUMMARIES, TlsGate, TlsRefused
from server_runtime.tls_session import PeerClosed, TlsSession

#: The reactor's ways of acting on one connection.
ConnectionAction = Callable[[Connection], None]


class TlsLink:
    def __init__(
        self,
        gate: TlsGate,
        *,
        warn: RateLimitedLog,
        clock: Callable[[], float],
        close: Callable[[Connection, str], None],
        send: Callable[[Connection, bytes], None],
        set_interest: ConnectionAction,
        process: ConnectionAction,
    ) -> None:
        self.gate = gate
        self.warn = warn
        self.clock = clock
        self.close = close
        self.send = send  # bytes as they are: ciphertext, never encrypted again
        self.set_interest = set_interest
        self.process = process  # answer the frames the decoder holds
        self.nursery: trio.Nursery | None = None  # set by the reactor's run: the certificate's task

    def new_turn(self) -> None:
        """A new reactor turn: go on with the new TLS connections the last turn had no time for."""
        deferred = self.gate.new_turn()
        if deferred:
            self._resume(deferred)

    def receive(self, conn: Connection, data: bytes, now: float) -> bytes:
        """Plaintext for the decoder out of bytes read from a TLS or not yet classified connection."""
        gate = self.gate
        try:
            plain, out = gate.receive(conn, data, now)
        except TlsRefused as refusal:
            self.refuse(conn, refusal)
            return b""
        except PeerClosed:
            self.close(conn, "closed by peer")
            return b""
        if out:
            self.send(conn, out)
            if conn.closed:
                return b""
        if conn.busy or out:
            self.set_interest(conn)  # parked until the certificate is ready, or handshake bytes to flush
            if gate.start_preparing():
                assert self.nursery is not None
                self.nursery.start_soon(self._ready)
        return plain

    async def _ready(self) -> None:
        """Serve the connections that waited for the test-mode certificate (or refuse them)."""
        self._resume(await self.gate.prepare())

    def _resume(self, conns: list[Connection]) -> None:
        """Go on with connections the gate parked after their first bytes (their hello is kept)."""
        for conn in conns:
            if conn.closed:
                continue
            plain = self.receive(conn, b"", self.clock())
            if conn.closed:
                continue
            if plain:
                try:
                    conn.decoder.push(plain)
                except ProtocolError as exc:
                    self.close(conn, f"malformed frame: {exc}")
                    continue
            self.process(conn)

    def refuse(self, conn: Connection, refusal: TlsRefused) -> None:
        """Close a connection the TLS mode or handshake refuses, with one rate-limited line."""
        if refusal.output and not conn.out:
            try:
                conn.sock.send(refusal.output)  # the alert, so the peer learns why
            except OSError:
                pass
        self.warn.warning(
            f"tls-{refusal.kind}", SUMMARIES[refusal.kind],
            "closing connection from %s: %s", conn.peer, refusal.message,
        )
        self.close(conn, f"tls: {refusal.message}")

    def refuse_stalled(self, connections: Iterable[Connection], now: float) -> None:
        """Close the connections whose handshake has run too long (the gate's HANDSHAKE_TIMEOUT)."""
        for stalled, refusal in self.gate.stalled(connections, now):
            self.refuse(stalled, refusal)

    @staticmethod
    def closing(conn: Connection) -> None:
        """End a TLS session cleanly (close_notify) on a connection the reactor is closing."""
        if type(conn.tls) is TlsSession and not conn.out:
            try:
                conn.sock.send(conn.tls.close_notify())
            except OSError:
                pass  # best effort: the peer may be gone


__all__ = ["TlsLink"]
