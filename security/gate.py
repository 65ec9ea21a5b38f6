"""The access check between a server's reactor and its request handlers.

The reactor hands every decoded request to a :class:`Gate`, which passes
it to the server's processor or answers NO_PERMISSION (16) itself, with a
remark naming the request's class and the reason, and one rate-limited log
line with the peer's address. The decision is :mod:`security.access`'s; the
gate adds what it needs from the connection (the peer) and keeps the cost
off the hot path: what a connection may send unsigned is worked out on its
first request and kept (as a set of codes shared by every connection with
the same rights), so an allowed unsigned request costs one dict lookup and
one set lookup. Only a request that is signed (with accounts on) or not in
that set takes the full check; a large signed body (a registration) is
verified in a worker thread, off the event loop.

A signed request of a code its connection may send unsigned (a signed
route query, with route-read in ``aclUnsignedClasses``) is checked in full
until that connection has sent one whose signature checked out for the
same ``AccessKey``; after that, such requests of that account pass as
unsigned ones would. Their signature could add no right, and checking it
is only there so that wrong keys are refused (a client with a wrong secret
never gets a signature through, so it is refused on every request). Even a
lookup in the table of verified requests costs about 1.5 µs, a tenth of a
route query's server CPU (BENCHMARKS.md, "Access control"). Every other
signed request is checked, each time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping
from typing import Protocol

import orjson
import trio

from remoting.acl import ACCESS_KEY, SIGNATURE
from remoting.clip import clip
from remoting.codec import encode
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.request_class import RequestClass
from security.access import (
    ANY_ACCOUNT,
    AccessSettings,
    VerifiedRequests,
    default_accounts_path,
    refusal,
    settings_from,
    unsigned_classes,
)
from security.acl_accounts import AccountsFile
from security.acl_addresses import peer_ip
from server_runtime.ratelog import RateLimitedLog
from server_runtime.reactor import Processor

_NO_KEYS: frozenset[str] = frozenset()
_NO_CODES: frozenset[int] = frozenset()
#: Signed bodies at least this large are verified in a worker thread (HMAC-SHA1 runs at
#: roughly 0.5-1 GB/s: a 16 MB registration would hold the loop for tens of ms).
OFFLOAD_BYTES = 256 * 1024


class Gate:
    """A :class:`server_runtime.reactor.Processor` that checks access, then delegates to ``inner``."""

    def __init__(
        self,
        inner: Processor,
        classes: Mapping[int, RequestClass],
        settings: AccessSettings,
        *,
        peer_of: Callable[[Hashable], str | None],
        warn: RateLimitedLog,
    ) -> None:
        self.inner = inner
        self.classes = classes
        self.peer_of = peer_of
        self.warn = warn
        self.settings = settings
        self._plain = settings.accounts is None
        self._open: dict[Hashable, frozenset[int]] = {}  # connection -> codes it may send unsigned
        self._open_classes: dict[Hashable, frozenset[RequestClass]] = {}  # connection -> the same, as classes
        self._codes_of: dict[frozenset[RequestClass], frozenset[int]] = {}
        #: connection -> the access keys it has sent a verified signature of (at most one per account)
        self._proven: dict[Hashable, set[str]] = {}
        self._verified = VerifiedRequests()
        self._signers = self._verified.signers if settings.accounts is not None else None
        #: codes any account may send once signed (the others need an admin)
        self._any_account_codes = frozenset(c for c, k in classes.items() if k in ANY_ACCOUNT)

    @property
    def async_codes(self) -> object:
        return self.inner.async_codes

    def update(self, settings: AccessSettings) -> None:
        """New settings (reloaded accounts): every connection's rights are worked out again."""
        self.settings = settings
        self._plain = settings.accounts is None
        self._open.clear()
        self._open_classes.clear()
        self._codes_of.clear()
        self._proven.clear()
        self._verified = VerifiedRequests()
        self._signers = self._verified.signers if settings.accounts is not None else None

    def forget(self, conn: Hashable) -> None:
        """A connection closed."""
        self._open.pop(conn, None)
        self._open_classes.pop(conn, None)
        self._proven.pop(conn, None)

    def _open_codes(self, conn: Hashable) -> frozenset[int]:
        classes = unsigned_classes(peer_ip(self.peer_of(conn) or ""), self.settings)
        codes = self._codes_of.get(classes)
        if codes is None:
            codes = self._codes_of[classes] = frozenset(c for c, k in self.classes.items() if k in classes)
        self._open[conn] = codes
        self._open_classes[conn] = classes
        return codes

    def _reason(self, req: RemotingCommand, ip: str, open_classes: frozenset[RequestClass]) -> str | None:
        """Why ``req`` from ``ip`` may not pass (None: it may). Safe in a worker thread for a request
        with a body (the verified-requests table only keeps bodiless ones)."""
        return refusal(self.classes.get(req.code), ip, req.ext_fields, req.body, req.version, self.settings,
                       open_classes, self._verified)

    def _refused(self, req: RemotingCommand, peer: str, reason: str) -> bytes | None:
        """Log a refusal (one line per interval) and build the NO_PERMISSION answer."""
        cls = self.classes.get(req.code)
        name = cls.value if cls is not None else "no class"
        self.warn.warning(
            "access", "refused {count} more requests for lack of access in the last {seconds} s",
            "refused request code %s (%s) from %s: %s", req.code, name, peer or "?", reason,
        )
        if req.flag & 2:
            return None  # oneway: never answered
        remark = f"access denied: request code {req.code} is {name}: {reason}"
        return encode(response_to(req, ResponseCode.NO_PERMISSION, clip(remark, 400)))

    def _passes(self, req: RemotingCommand, conn: Hashable) -> bool:
        """The fast path: a request of a code this connection may send unsigned, and unsigned, or
        accounts off, or signed by an account this connection has proven (see the module's docstring)."""
        codes = self._open.get(conn)
        if codes is None:
            codes = self._open_codes(conn)
        if req.code not in codes:
            return False
        fields = req.ext_fields
        if self._plain or not fields:
            return True
        claimed = fields.get(ACCESS_KEY)
        return claimed is None or claimed in self._proven.get(conn, _NO_KEYS)

    def _prove(self, req: RemotingCommand, conn: Hashable) -> None:
        """``req`` passed the full check: if its code is open to the connection unsigned, its account
        is proven there."""
        fields = req.ext_fields
        if fields and not self._plain and req.code in self._open.get(conn, _NO_CODES):
            claimed = fields.get(ACCESS_KEY)
            if claimed is not None:
                self._proven.setdefault(conn, set()).add(claimed)

    def handle(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        codes = self._open.get(conn)  # _passes, inlined: this is every route query's path
        if codes is None:
            codes = self._open_codes(conn)
        fields = req.ext_fields
        if req.code in codes:
            if self._plain or not fields:
                return self.inner.handle(req, conn)
            claimed = fields.get(ACCESS_KEY)
            if claimed is None or claimed in self._proven.get(conn, _NO_KEYS):
                return self.inner.handle(req, conn)
        signers = self._signers
        if signers is not None and fields and SIGNATURE in fields and not req.body:
            try:  # a signed request seen before: VerifiedRequests.account_of, inlined
                entry = signers.get(orjson.dumps(fields))
            except TypeError:
                entry = None
            if entry is not None and entry[0] == req.version:
                if req.code in self._any_account_codes or (entry[1].admin and req.code in self.classes):
                    self._prove(req, conn)
                    return self.inner.handle(req, conn)  # (an unknown code goes on to be refused)
        if self._plain and req.code not in self.classes:
            return self.inner.handle(req, conn)  # unknown without accounts: the processor's "not supported"
        peer = self.peer_of(conn) or ""
        reason = self._reason(req, peer_ip(peer), self._open_classes[conn])
        if reason is not None:
            return self._refused(req, peer, reason)
        self._prove(req, conn)
        return self.inner.handle(req, conn)

    async def handle_async(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        if not self._passes(req, conn):
            peer = self.peer_of(conn) or ""
            open_classes = self._open_classes[conn]
            if len(req.body) >= OFFLOAD_BYTES:  # a big registration's HMAC: off the event loop
                reason = await trio.to_thread.run_sync(self._reason, req, peer_ip(peer), open_classes)
            else:
                reason = self._reason(req, peer_ip(peer), open_classes)
            if reason is not None:
                return self._refused(req, peer, reason)
            self._prove(req, conn)
        return await self.inner.handle_async(req, conn)


class AccessKeys(Protocol):
    """The access-control keys both servers' configs have (see docs/security.md)."""

    aclEnable: bool
    aclConfigPath: str
    aclUnsignedClasses: str
    adminAddressesWithoutAuth: str
    allowRemoteAdminWithoutAuth: bool


class AccessControl:
    """A server's access control: its accounts file (read at construction: a bad one is a start-up
    error), the settings built from its keys, the gate, and the reload of a changed file."""

    def __init__(self, config: AccessKeys, rocketmq_home: str, log: logging.Logger) -> None:
        self.config = config
        self.log = log
        path = config.aclConfigPath or default_accounts_path(rocketmq_home)
        self.accounts_file = AccountsFile(path, log) if config.aclEnable else None
        self.gate: Gate | None = None

    def settings(self) -> AccessSettings:
        config = self.config  # its keys were checked by the config's validate()
        return settings_from(
            accounts=self.accounts_file.accounts if self.accounts_file is not None else None,
            unsigned=config.aclUnsignedClasses,
            admin_addresses=config.adminAddressesWithoutAuth,
            allow_remote_admin=config.allowRemoteAdminWithoutAuth,
        )

    def guard(
        self,
        processor: Processor,
        classes: Mapping[int, RequestClass],
        *,
        peer_of: Callable[[Hashable], str | None],
        warn: RateLimitedLog,
    ) -> Gate:
        """The gate in front of ``processor``; logs the start line (which classes are open to whom)."""
        settings = self.settings()
        self.gate = Gate(processor, classes, settings, peer_of=peer_of, warn=warn)
        level = logging.WARNING if settings.accounts is None and settings.allow_remote_admin else logging.INFO
        self.log.log(level, settings.describe())  # not an argument: the logger's ClipArgs would cut it
        return self.gate

    def forget(self, conn: Hashable) -> None:
        if self.gate is not None:
            self.gate.forget(conn)

    async def reload(self) -> None:
        """Apply a changed accounts file (read off the event loop; a bad one keeps the last good accounts)."""
        accounts_file = self.accounts_file
        if accounts_file is None or self.gate is None or not accounts_file.changed():
            return
        if await trio.to_thread.run_sync(accounts_file.reload) is not None:
            self.gate.update(self.settings())
