"""Clients that connect from a chosen loopback address, and accounts files, for the access tests.

All of 127/8 is this host's loopback, so a server bound to 127.0.0.1 sees a
client bound to 127.0.0.2 as a different peer over real sockets. The access
tests use that instead of a non-loopback interface (tests listen and send
on loopback only): the servers' ``adminAddressesWithoutAuth`` (which peers
count as local when no accounts are configured) is set to ``127.0.0.1``,
and 127.0.0.2 plays the peer from elsewhere. The decision for real
non-loopback addresses is a pure function, tested directly in
test_access_policy.py.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from remoting.acl import Credentials
from remoting.transport import RemotingClient, parse_addr

LOCAL = "127.0.0.1"
STRANGER = "127.0.0.2"

ADMIN = Credentials("adminKey01", "adminSecret01")
USER = Credentials("userKey001", "userSecret01")
WRONG = Credentials("adminKey01", "notTheSecret")
UNKNOWN = Credentials("nobodyKey1", "whatever123")


def write_accounts(path: Path, *, global_white: tuple[str, ...] = (), extra: str = "") -> Path:
    """A plain_acl.yml with an admin and a plain account (and ``extra`` YAML account items)."""
    white = "globalWhiteRemoteAddresses:\n" + "".join(f"  - {w}\n" for w in global_white) if global_white else ""
    return replace_file(
        path,
        white + "accounts:\n"
        f"  - accessKey: {ADMIN.access_key}\n    secretKey: {ADMIN.secret_key}\n    admin: true\n"
        f"  - accessKey: {USER.access_key}\n    secretKey: {USER.secret_key}\n    whiteRemoteAddress:\n"
        "    admin: false\n    topicPerms:\n      - TopicA=PUB\n"
        + extra,
    )


def replace_file(path: Path, text: str) -> Path:
    """Write ``text`` to a new file and rename it over ``path``, as an operator should (a reload never
    sees half a file)."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


@asynccontextmanager
async def connect_from(
    source: str, addr: str, credentials: Credentials | None = None
) -> AsyncIterator[RemotingClient]:
    """A remoting client whose connection comes from ``source`` (a loopback address)."""
    host, port = parse_addr(addr)
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
    await sock.bind((source, 0))
    await sock.connect((host, port))
    stream = trio.SocketStream(sock)
    client = RemotingClient(addr, stream, max_frame_length=16 * 1024 * 1024, credentials=credentials)
    async with stream, trio.open_nursery() as nursery:
        nursery.start_soon(client._reader)
        try:
            yield client
        finally:
            nursery.cancel_scope.cancel()
