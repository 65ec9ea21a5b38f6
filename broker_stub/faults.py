"""Fault switchboard: break the broker on purpose, over the wire.

Request code **9000** ``BROKER_STUB_FAULT`` (unused by Apache RocketMQ,
whose codes stop well below it) is served by the stub itself. The request
names an ``action`` in its extFields; every answer is SUCCESS with the whole
switchboard state as a JSON body, or INVALID_PARAMETER (29) with a remark.

=============  ===========================  =====================================================
action         other ext keys               effect
=============  ===========================  =====================================================
``latency``    ``millis`` (int >= 0)        every send (10/310/320) is answered that much later
``reject``     ``code``, ``remark``         every send is answered with that int16 response code
``hang``       –                            no request except 9000 is answered until ``resume``;
                                            connections stay open, requests wait (unread)
``resume``     –                            ends ``hang``; the waiting requests are answered
``partition``  ``namesrv`` (host:port)      stop registering/heartbeating to that NameServer
                                            (its connection stays open, so it sees silence)
``heal``       ``namesrv`` (optional)       undo ``partition`` for one NameServer, or all
``clear``      –                            all of the above back to normal
``status``     –                            change nothing, just answer the state
=============  ===========================  =====================================================

Send the control request on its own connection: a hung connection reads
nothing more until it is resumed.
"""

from __future__ import annotations

from typing import Any

import trio

from remoting import fastjson

FAULT_CODE = 9000
#: Response codes travel in 16 bits in a ROCKETMQ binary header (RemotingCommand.code is
#: written as a short), so a reject code outside this range could not be answered to such a client.
RESPONSE_CODE_MIN, RESPONSE_CODE_MAX = -(2**15), 2**15 - 1
ACTIONS = ("latency", "reject", "hang", "resume", "partition", "heal", "clear", "status")


class FaultError(ValueError):
    """A fault request with a missing or bad parameter."""


class Faults:
    def __init__(self) -> None:
        self.send_latency_ms = 0
        self.reject_code: int | None = None
        self.reject_remark = ""
        self.partitioned: set[str] = set()
        self._resumed = trio.Event()
        self._resumed.set()

    @property
    def hung(self) -> bool:
        return not self._resumed.is_set()

    async def wait_resumed(self) -> None:
        await self._resumed.wait()

    def is_partitioned(self, namesrv: str) -> bool:
        return namesrv in self.partitioned

    def apply(self, action: str | None, ext: dict[str, str]) -> None:
        """Change the switchboard; FaultError names what is wrong."""
        if action == "latency":
            self.send_latency_ms = _int(ext, "millis", 0, 600_000)
        elif action == "reject":
            self.reject_code = _int(
                ext, "code", RESPONSE_CODE_MIN, RESPONSE_CODE_MAX, "a response code fits in 16 bits"
            )
            self.reject_remark = ext.get("remark") or f"[BROKER_STUB_FAULT] send rejected with code {self.reject_code}"
        elif action == "hang":
            if not self.hung:
                self._resumed = trio.Event()
        elif action == "resume":
            self._resumed.set()
        elif action == "partition":
            addr = ext.get("namesrv")
            if not addr:
                raise FaultError("partition needs namesrv=host:port")
            self.partitioned.add(addr)
        elif action == "heal":
            addr = ext.get("namesrv")
            if addr:
                self.partitioned.discard(addr)
            else:
                self.partitioned.clear()
        elif action == "clear":
            self.send_latency_ms = 0
            self.reject_code = None
            self.reject_remark = ""
            self.partitioned.clear()
            self._resumed.set()
        elif action != "status":
            raise FaultError(f"unknown fault action {action!r}; expected one of {', '.join(ACTIONS)}")

    def state(self) -> dict[str, Any]:
        return {
            "hung": self.hung,
            "partitioned": sorted(self.partitioned),
            "rejectCode": self.reject_code,
            "sendLatencyMillis": self.send_latency_ms,
        }

    def state_body(self) -> bytes:
        return fastjson.dumps_fast(self.state())


def _int(ext: dict[str, str], key: str, lo: int, hi: int, why: str = "") -> int:
    text = ext.get(key)
    try:
        value = int(text) if text is not None else None
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        reason = f" ({why})" if why else ""
        raise FaultError(f"{key} must be an integer in [{lo}, {hi}]{reason}, got {text!r}")
    return value
