"""Name the frame behind a hang: replay the frames in flight one by one, probing after each.

A hang is seen by a probe some frames after the one that caused it (the
workers keep sending meanwhile), and the driver's guess from timing can
name a bystander. Replaying the hang's span in order against a fresh
server, one frame at a time on its own connection with a fresh-connection
probe after each, names the first frame after which the server stops
answering. Bounded by a frame count and a deadline; the caller starts and
stops the server.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import trio

from remoting.codec import ProtocolError
from tests.fuzz.driver import _connect, _expectation, probe
from tests.fuzz.frames import Frame, make_frame

#: Longest span replayed (frames) and the time it may take (seconds).
MAX_SPAN = 2000
DEADLINE_SECONDS = 120.0


async def pinpoint(
    host: str,
    port: int,
    *,
    seed: int,
    codes: Sequence[int],
    span: tuple[int, int],
    probe_code: int,
    answer_wait: float = 0.2,
    probe_timeout: float = 1.0,
    confirm_timeout: float = 10.0,
) -> Frame | None:
    """The first frame of ``span`` after which fresh connections get no answer (None: not reproduced).

    As in the run, a probe left unanswered is confirmed by a second one with
    a longer wait, so a busy machine does not name an innocent frame.
    """
    first, last = span
    deadline = time.monotonic() + DEADLINE_SECONDS
    for index in range(first, min(last, first + MAX_SPAN - 1) + 1):
        if time.monotonic() > deadline:
            return None
        frame = make_frame(seed, index, codes)
        try:
            conn = await _connect(host, port)
        except OSError:
            return frame
        try:
            with trio.move_on_after(2.0):
                await conn.stream.send_all(frame.data)
            waiting, _ = _expectation(frame)  # every request of the frame: the last may be the culprit
            with trio.move_on_after(answer_wait):  # until their answers, a close or the wait is over
                while waiting and (data := await conn.stream.receive_some(1 << 20)):
                    waiting -= {cmd.opaque for cmd in conn.decoder.feed(data)}
        except (OSError, trio.BrokenResourceError, ProtocolError):
            pass
        finally:
            await conn.close()
        if await probe(host, port, probe_code, probe_timeout) is None and (
            await probe(host, port, probe_code, confirm_timeout) is None
        ):
            return frame
    return None
