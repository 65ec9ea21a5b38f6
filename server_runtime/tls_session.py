"""One server-side TLS connection as a pure byte transformer over ``ssl`` memory BIOs.

The reactor owns the socket: it hands each read's ciphertext to
:meth:`TlsSession.receive` and gets plaintext for the frame decoder back,
and turns answers into ciphertext with :meth:`TlsSession.encrypt`. Nothing
here blocks or touches a socket, so a handshake never holds the loop
longer than OpenSSL's own work on the bytes that arrived.

Bounds: what the session holds besides OpenSSL's fixed buffers is at most
one partial TLS record of ciphertext (16 KiB + overhead) in the incoming
BIO, since every receive drains all whole records into plaintext; the
outgoing BIO is emptied after every call. Before the handshake completes
a peer may send at most :data:`MAX_HANDSHAKE_BYTES` (a ClientHello is a
few hundred bytes; client certificate chains are rarely above 16 KiB).
"""

from __future__ import annotations

import ssl

#: First bytes of every TLS handshake record (content type 22, major version 3). A
#: RocketMQ frame starting with them would declare a length of over 369 MB.
TLS_RECORD_START = 0x16
TLS_MAJOR_VERSION = 0x03
#: The largest TLS record on the wire: 16 KiB of plaintext plus header and cipher overhead.
MAX_RECORD_BYTES = 16 * 1024 + 256 + 5
#: Ciphertext a peer may send before its handshake completes.
MAX_HANDSHAKE_BYTES = 64 * 1024
#: Plaintext taken out of OpenSSL per call (it returns one record at most anyway).
READ_CHUNK = 256 * 1024

PLAINTEXT = "plaintext"
TLS = "tls"
UNDECIDED = "undecided"


def classify(first: bytes) -> str:
    """What the first bytes of a connection are: TLS, plaintext, or too few to tell (one byte 0x16)."""
    if first[0] != TLS_RECORD_START:
        return PLAINTEXT
    if len(first) < 2:
        return UNDECIDED
    return TLS if first[1] == TLS_MAJOR_VERSION else PLAINTEXT


class TlsError(Exception):
    """The peer's TLS failed (bad handshake, bad record, too much before the handshake); the text says how."""


class PeerClosed(Exception):
    """The peer ended its TLS session (close_notify)."""


class Hello:
    """The first bytes of a connection, until they are classified and a TLS context is ready."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = b""


class TlsSession:
    __slots__ = ("handshake_bytes", "handshaken", "incoming", "obj", "outgoing", "started")

    def __init__(self, context: ssl.SSLContext, now: float) -> None:
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.handshaken = False
        self.handshake_bytes = 0
        self.started = now

    def receive(self, data: bytes) -> bytes:
        """The plaintext that ``data`` completes (b"" while the handshake or a record is incomplete).

        Raises TlsError or PeerClosed; afterwards :meth:`take_output` holds
        what must be sent (handshake messages, session tickets, alerts).
        """
        self.incoming.write(data)
        if not self.handshaken:
            self.handshake_bytes += len(data)
            try:
                self.obj.do_handshake()
            except ssl.SSLWantReadError:
                # Checked only while incomplete: the read that completes a handshake may carry
                # any number of requests behind the client's Finished.
                if self.handshake_bytes > MAX_HANDSHAKE_BYTES:
                    raise TlsError(f"handshake sent more than {MAX_HANDSHAKE_BYTES} bytes") from None
                return b""
            except ssl.SSLError as exc:
                raise TlsError(f"handshake failed: {_reason(exc)}") from None
            self.handshaken = True
        chunks: list[bytes] = []
        read = self.obj.read
        try:
            while True:
                chunk = read(READ_CHUNK)
                if not chunk:  # no data raises SSLWantReadError: empty means the peer's close_notify
                    raise PeerClosed()
                chunks.append(chunk)
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            raise PeerClosed() from None
        except ssl.SSLError as exc:
            raise TlsError(f"bad record: {_reason(exc)}") from None
        if len(chunks) == 1:
            return chunks[0]
        return b"".join(chunks)

    def take_output(self) -> bytes:
        """Ciphertext produced and not yet taken (empty most of the time)."""
        return self.outgoing.read() if self.outgoing.pending else b""

    def encrypt(self, data: bytes) -> bytes:
        """``data`` as TLS records (a memory BIO never blocks, so everything is written)."""
        view = memoryview(data)
        write = self.obj.write
        while view:
            view = view[write(view):]
        return self.outgoing.read()

    def close_notify(self) -> bytes:
        """The alert that ends the session cleanly (empty before the handshake completed)."""
        if not self.handshaken:
            return b""
        try:
            self.obj.unwrap()
        except ssl.SSLError:
            pass  # the peer's own close_notify is not awaited
        return self.take_output()


def _reason(exc: ssl.SSLError) -> str:
    text = exc.reason or (exc.args[-1] if exc.args else "") or str(exc)
    return str(text).lower().replace("_", " ")


__all__ = ["MAX_HANDSHAKE_BYTES", "MAX_RECORD_BYTES", "Hello", "PeerClosed", "TlsError", "TlsSession", "classify"]
