"""Admin client library: what mqadmin commands, scenarios and the fan-out call.

No CLI code here. Every call has a timeout and every failure is an
:class:`AdminError` whose message names the address, so callers can print
it as one line. Writes that RocketMQ sends to every NameServer go to every
NameServer, in parallel, with one result per NameServer.

Each call opens a fresh connection unless the client is inside
``async with client.pooled():``, which keeps one connection per address for
the block (for many sends or pulls in a row). :class:`SyncAdminClient` is
the same API for blocking code (Spark executors, scripts).

This module is the one import point: the calls live in layers, each a
module with one job (:mod:`mqadmin.client_core` sends and fans out,
:mod:`mqadmin.namesrv_client` talks to NameServers,
:mod:`mqadmin.broker_client` to brokers, :mod:`mqadmin.messaging_client`
sends and pulls; errors, addresses and topic text beside them), and
:class:`AdminClient` is the top layer under its historical name so that
``from mqadmin.client import X`` keeps working for every caller.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from mqadmin.addresses import check_addr, namesrv_from_env, split_addrs
from mqadmin.client_core import DEFAULT_TIMEOUT, call
from mqadmin.client_errors import AdminError, NotFound, PerServer, code_name
from mqadmin.messaging_client import (
    DEFAULT_TOPIC_QUEUE_NUMS,
    PULL_BATCH,
    PULL_STATUS,
    PULL_SYS_FLAG_SUBSCRIPTION,
    SEND_ATTEMPTS,
    SEND_STATUS,
    TOOLS_CONSUMER_GROUP,
    MessagingClient,
    PullResult,
    QueueRead,
    SendResult,
)
from mqadmin.topic_text import attributes_text, parse_attributes, topic_config_text

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_TOPIC_QUEUE_NUMS",
    "PULL_BATCH",
    "PULL_STATUS",
    "PULL_SYS_FLAG_SUBSCRIPTION",
    "SEND_ATTEMPTS",
    "SEND_STATUS",
    "TOOLS_CONSUMER_GROUP",
    "AdminClient",
    "AdminError",
    "NotFound",
    "PerServer",
    "PullResult",
    "QueueRead",
    "SendResult",
    "SyncAdminClient",
    "attributes_text",
    "call",
    "check_addr",
    "code_name",
    "namesrv_from_env",
    "parse_attributes",
    "run",
    "split_addrs",
    "topic_config_text",
]

T = TypeVar("T")


class AdminClient(MessagingClient):
    """Calls to a set of NameServers and to the brokers they know (every layer's calls)."""


def run(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run one async admin call from synchronous code."""
    return trio.run(fn, *args)


class SyncAdminClient:
    """The :class:`AdminClient` API for blocking code: each call runs in its own ``trio.run``.

    ``SyncAdminClient(["127.0.0.1:9876"]).send_message("T", b"x")`` returns a
    :class:`SendResult`; errors are the same :class:`AdminError`.
    """

    def __init__(self, namesrv_addrs: list[str], *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.aio = AdminClient(namesrv_addrs, timeout=timeout)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.aio, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        @functools.wraps(attr)
        def blocking(*args: Any, **kwargs: Any) -> Any:
            return trio.run(functools.partial(attr, *args, **kwargs))

        return blocking
