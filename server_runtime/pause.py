"""Telling that the process was paused (SIGSTOP, a VM frozen, swap storms) from two ticks of a timer.

A periodic task that expires peers by silence (the NameServer's broker
expiry, the reactor's idle sweep) reasons from "nothing arrived for N
seconds". After the whole process was stopped, that is false: the peers
kept sending, and what they sent waits unread in the socket buffers. When
the process runs again, its timers are all overdue at once, and a task that
expires first would drop every peer whose messages it simply has not read
yet (issue 20: a NameServer stopped for 25 s with a 15 s expiry dropped both
of its brokers on resume, whose heartbeats sat in its sockets).

A pause shows as a jump of the monotonic clock across one sleep of such a
task: it woke much later than it asked to. This module only does
that arithmetic, with the time passed in (no clock reads), so a test can
pause time instead of the process. What to do about a pause (read what is
waiting on every connection before expiring anyone) is the caller's.
"""

from __future__ import annotations

#: A tick this much (seconds) later than its interval counts as a pause. Smaller delays are the
#: loop being busy, and cost nothing: a peer's timeout is many intervals long.
PAUSE_SLACK = 1.0


def paused_for(slept_at: float, now: float, interval: float, slack: float = PAUSE_SLACK) -> float:
    """Seconds the process stood still in a sleep of ``interval`` begun at ``slept_at`` and ended at ``now``.

    Measured from the start of the sleep, not from the previous tick, so the
    tick's own work (waiting for a lock behind a long registration, say) is
    never taken for a pause. Ending up to ``slack`` late is not a pause (0.0).
    """
    late = now - slept_at - interval
    return late if late > slack else 0.0


__all__ = ["PAUSE_SLACK", "paused_for"]
