"""Which connections the reactor may read, given the global read budget.

:class:`server_runtime.limits.ReadBudget` is pure arithmetic on byte counts; this
is the reactor's use of it per connection, kept out of the reactor's run
loop and its reading and writing: what each connection is charged (the
whole declared length of its partial frame, or what it buffered while it
is not reading), the queue of connections refused a charge, in arrival
order, and admitting them oldest first as room frees up. A refused
connection (``starved``) is not read until it is admitted; the reactor
asks :meth:`ReadAdmission.account` after every pass over a connection's
frames and :meth:`ReadAdmission.release` when it closes one.
"""

from __future__ import annotations

from collections.abc import Callable

from server_runtime.connection import Connection
from server_runtime.limits import ReadBudget
from server_runtime.memtrim import Trimmer


class ReadAdmission:
    def __init__(self, budget: ReadBudget, trimmer: Trimmer, set_interest: Callable[[Connection], None]) -> None:
        self.budget = budget
        self.trimmer = trimmer
        self.set_interest = set_interest  # the reactor's: an admitted connection is read again
        self.starved: dict[int, Connection] = {}  # insertion order = arrival order

    def account(self, conn: Connection) -> None:
        """Charge the read budget for what this connection holds and is about to receive."""
        decoder = conn.decoder
        buffered = decoder.buffered
        if conn.busy or conn.unwritable or conn.backlogged:
            want = buffered  # not reading: whole frames wait, a partial one needs no room yet
        else:
            want = decoder.partial_frame_size or buffered
        if want == conn.held and not conn.starved:
            return
        budget = self.budget
        was_waiting = bool(conn.starved)
        if budget.resize(conn.held, want, was_waiting):
            shrunk = want < conn.held
            if shrunk:
                self.trimmer.note_freed(conn.held - want)  # a big frame done: its buffer is free
            if was_waiting:
                budget.waiting -= conn.held
                conn.starved = 0
                self.starved.pop(conn.id, None)
            conn.held = want
            if shrunk and self.starved:
                self.wake()
        else:
            if was_waiting:
                budget.waiting -= conn.held
            conn.held = budget.overdraw(conn.held, buffered)
            budget.waiting += conn.held
            conn.starved = want
            self.starved[conn.id] = conn

    def release(self, conn: Connection) -> None:
        """Give back what a closed connection held, and admit the frames waiting for that room."""
        if self.starved.pop(conn.id, None) is not None:
            self.budget.waiting -= conn.held
        if conn.held:
            self.budget.release(conn.held)
            conn.held = 0
            self.wake()

    def wake(self) -> None:
        """Admit waiting frames that fit now, oldest first."""
        budget = self.budget
        for conn in list(self.starved.values()):
            if budget.resize(conn.held, conn.starved, waiting=True):
                budget.waiting -= conn.held
                conn.held = conn.starved
                conn.starved = 0
                del self.starved[conn.id]
                self.set_interest(conn)


__all__ = ["ReadAdmission"]
