"""One client connection of a remoting server: its socket, decoder, unsent answers and pause reasons.

Plain state, read and changed by the reactor (:mod:`server_runtime.reactor`),
which owns the loop, by the helpers it owns (:mod:`server_runtime.read_admission`,
:mod:`server_runtime.tls_link`, :mod:`server_runtime.idle_sweep`), and by its TLS gate
(:mod:`server_runtime.tls_gate`), which classifies the first bytes and holds the
TLS session. Kept apart so all of them can name the type without importing
each other.
"""

from __future__ import annotations

import selectors
import socket

from remoting.codec import FrameDecoder
from server_runtime.tls_session import Hello, TlsSession

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE


class Connection:
    """Slots, not a dict: a server may hold ten thousand of them."""

    __slots__ = (
        "backlogged",
        "busy",
        "closed",
        "decoder",
        "held",
        "id",
        "interest",
        "last_active",
        "out",
        "peer",
        "sock",
        "starved",
        "tls",
        "unwritable",
    )

    def __init__(self, conn_id: int, sock: socket.socket, peer: str, max_frame: int, now: float) -> None:
        self.id = conn_id
        self.sock = sock
        self.peer = peer
        self.decoder = FrameDecoder(max_frame)
        self.out = bytearray()  # answers the kernel would not take yet
        self.busy = False  # an awaiting handler owns this connection
        self.closed = False
        self.last_active = now
        self.interest = READ
        self.held = 0  # bytes charged to the read budget
        self.starved = 0  # bytes wanted from the read budget and refused (0: not waiting)
        self.unwritable = False  # unsent answers passed the high mark, not yet below the low one
        self.backlogged = False  # answered a full batch this pass; more whole frames may wait
        self.tls: Hello | TlsSession | None = None  # None: plaintext (or a server without TLS)


__all__ = ["READ", "WRITE", "Connection"]
