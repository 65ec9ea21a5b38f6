"""NameServer and broker addresses as users type them (``-n``, ``$NAMESRV_ADDR``).

Checked here, before any connection, so a typo is one clear line rather
than a connect error to a nonsense address.
"""

from __future__ import annotations

import os

from mqadmin.client.errors import AdminError
from remoting.transport import parse_addr


def check_addr(addr: str) -> str:
    """A ``host:port`` given by a user, or an :class:`AdminError` saying what is wrong.

    A port that is a number but not a TCP port gets its own message: "not a
    host:port address" would send the user looking at the syntax instead.
    """
    host, sep, port = addr.strip().rpartition(":")
    if not sep and addr.strip() and " " not in addr.strip():
        raise AdminError(f"not a host:port address: {addr.strip()!r} has no port")
    if sep and host and port.isdigit() and not 0 < int(port) < 65536:
        raise AdminError(f"port out of range in {addr.strip()!r}: {int(port)} is not 1-65535")
    try:
        parse_addr(addr)
    except ValueError as exc:
        raise AdminError(str(exc)) from None
    return addr.strip()


def split_addrs(text: str) -> list[str]:
    """``host:port;host:port`` (RocketMQ's -n syntax) -> validated addresses."""
    addrs = [a.strip() for a in text.replace(",", ";").split(";") if a.strip()]
    if not addrs:
        raise AdminError("no NameServer address given")
    return [check_addr(a) for a in addrs]


def namesrv_from_env() -> list[str] | None:
    value = os.environ.get("NAMESRV_ADDR")
    return split_addrs(value) if value else None
