"""The admin client library: what mqadmin commands, scenarios and the fan-out call (no Typer, no Rich).

Every call has a timeout and every failure is an :class:`~mqadmin.client.errors.AdminError`
whose message names the address, so callers can print it as one line. Writes that RocketMQ
sends to every NameServer go to every NameServer, in parallel, with one result per NameServer.

Each call opens a fresh connection unless the client is inside ``async with client.pooled():``,
which keeps one connection per address for the block (for many sends or pulls in a row).
:class:`SyncAdminClient` is the same API for blocking code (Spark executors, scripts).

The calls live in layers, each a module with one job: :mod:`.core` sends and fans out,
:mod:`.namesrv` talks to NameServers, :mod:`.broker` to brokers, :mod:`.messaging` sends and
pulls, :mod:`.broker_admin` builds Apache's cluster-wide admin views from per-broker requests;
:mod:`.errors`, :mod:`.addresses`, :mod:`.messages` and :mod:`.topic_text` sit beside them, and
:mod:`.security`: the keys every request is signed with (``security=``, or the command's context).
:class:`AdminClient` is the top of the stack; import the other names from their own modules.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from mqadmin.client.core import DEFAULT_TIMEOUT
from mqadmin.client.messaging import MessagingClient
from mqadmin.client.security import ClientSecurity

T = TypeVar("T")


class AdminClient(MessagingClient):
    """Calls to a set of NameServers and to the brokers they know (every layer's calls)."""


def run(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run one async admin call from synchronous code."""
    return trio.run(fn, *args)


class SyncAdminClient:
    """The :class:`AdminClient` API for blocking code: each call runs in its own ``trio.run``.

    ``SyncAdminClient(["127.0.0.1:9876"]).send_message("T", b"x")`` returns a
    :class:`~mqadmin.client.messaging.SendResult`; errors are the same ``AdminError``.
    """

    def __init__(
        self, namesrv_addrs: list[str], *, timeout: float = DEFAULT_TIMEOUT, security: ClientSecurity | None = None
    ) -> None:
        self.aio = AdminClient(namesrv_addrs, timeout=timeout, security=security)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.aio, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        @functools.wraps(attr)
        def blocking(*args: Any, **kwargs: Any) -> Any:
            return trio.run(functools.partial(attr, *args, **kwargs))

        return blocking
