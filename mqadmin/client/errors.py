"""What every admin call fails with, and how an answer becomes a value or a failure.

Shared by the NameServer, broker and messaging calls so that every refusal
reads the same: one line, naming the address, the request and the code,
which the CLI can print as it is. :class:`NotFound` is split out because
callers treat "no such topic" as an answer, not as a fault.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from remoting.codes import ResponseCode
from remoting.command import RemotingCommand

T = TypeVar("T")


class AdminError(Exception):
    """A request failed; the message is one line naming the address."""


class NotFound(AdminError):
    """The server answered that the thing asked for does not exist."""


class ConsumerNotOnline(AdminError):
    """CONSUMER_NOT_ONLINE (206): the group has no consumer connected (Java falls back to the old reset)."""


@dataclass
class PerServer:
    """The outcome of one request to one server (NameServer or broker)."""

    addr: str
    value: Any = None
    error: str | None = None
    #: What the server is ("NameServer", "broker"), for the summary of a command that asked several.
    kind: str = field(default="server", compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return {"addr": self.addr, "ok": self.ok, "error": self.error, "value": self.value}


def asked(results: list[PerServer], describe: Callable[[Any], str]) -> str:
    """What each server asked answered, for an error that gives up after asking them all:
    ``ADDR: what it knew; ADDR: why it did not answer``."""
    parts = []
    for r in results:
        if r.ok:
            parts.append(f"{r.addr}: {describe(r.value)}")
        else:
            parts.append(error_about(r.addr, r.error or "no answer"))
    return "; ".join(parts)


def error_about(addr: str, error: str) -> str:
    """``ADDR: what went wrong``, the address once and first: client errors usually begin with it
    already (``ADDR: no response ...``); a refused connection names it inside instead."""
    if error.startswith(f"{addr}: "):
        return error
    connect = f"cannot connect to {addr}: "
    if error.startswith(connect):
        return f"{addr}: cannot connect: {error.removeprefix(connect)}"
    return f"{addr}: {error}"


def code_name(code: int) -> str:
    """The ResponseCode's name for messages, or the bare number for a code we do not know."""
    return ResponseCode(code).name if code in ResponseCode._value2member_map_ else str(code)


def check_answer(addr: str, resp: RemotingCommand, what: str, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
    """``resp`` if its code is one of ``ok``, else the one-line error every caller prints: the address,
    what was asked, the code's name and the remark's first line.

    TOPIC_NOT_EXIST and QUERY_NOT_FOUND become :class:`NotFound` so callers
    can fall back (TBW102, an empty KV value) without parsing messages;
    CONSUMER_NOT_ONLINE becomes :class:`ConsumerNotOnline` (resetOffsetByTime's fallback).
    """
    if resp.code in ok:
        return resp
    remark = (resp.remark or "").strip()
    message = f"{addr}: {what} failed: {code_name(resp.code)}" + (f" ({remark.splitlines()[0]})" if remark else "")
    if resp.code in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.QUERY_NOT_FOUND):
        raise NotFound(message)
    if resp.code == ResponseCode.CONSUMER_NOT_ONLINE:
        raise ConsumerNotOnline(message)
    raise AdminError(message)


def parse_answer(addr: str, parse: Callable[[bytes], T], body: bytes, what: str | None = None) -> T:
    """``parse(body)``, with a malformed body reported as an :class:`AdminError` naming ``addr`` (and
    the request, ``what``). A body of the wrong shape fails in the decoders with ValueError (every
    body error of ours is one), TypeError or AttributeError: all three are a malformed answer."""
    try:
        return parse(body)
    except (ValueError, TypeError, AttributeError) as exc:
        raise AdminError(f"{addr}: malformed answer{f' to {what}' if what else ''}: {exc}") from None
