"""Who may send which class of request: the decision, as a pure function of its inputs.

Every request code a server serves belongs to one class (each server's
``request_classes`` module holds its table); the class, not the code, is
what access is decided on:

- ``route-read``: route and cluster queries every client makes;
- ``client``: a broker's data path (send, pull, heartbeat, offsets);
- ``broker-control``: a broker's own calls to a NameServer (register,
  unregister, heartbeat, data version, member group);
- ``admin-read``: what tools read (configs, KV, stats, live tables);
- ``admin-write``: what changes a server or its routes (configs, KV,
  topics, permissions, deletions, the stub's faults and replication).

Without accounts (``aclEnable=false``) every class is open, except
``admin-write``, which only peers matching ``adminAddressesWithoutAuth``
(this host by default) may send, unless ``allowRemoteAdminWithoutAuth=true``.
Signatures are not looked at, as an Apache NameServer never does.

With accounts every request code must be known (an unknown one is refused)
and a request is let through when

1. it carries an ``AccessKey``: the account exists, the signature matches
   (or the peer matches the account's ``whiteRemoteAddress``, Java's rule),
   and the class is ``route-read`` or ``client`` or the account is an
   ``admin``; a request that claims an account and fails is refused even
   where an unsigned one would pass (the gate stops checking such requests
   on a connection that has proven the account, see :mod:`security.gate`);
2. it carries none: its class is one of ``aclUnsignedClasses``, or the peer
   matches ``globalWhiteRemoteAddresses`` and the class is not
   ``admin-write`` (Java lets such peers do everything; here changing a
   server always takes an admin's signature).

What is open to a peer without a signature depends only on the peer and
the settings, so a server computes it once per connection
(:func:`unsigned_classes`) and checks each request with one set lookup.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from remoting.acl import ACCESS_KEY
from remoting.request_class import RequestClass
from security.acl_accounts import Account, Accounts
from security.acl_addresses import AddressList, parse_list

#: Classes any account may use; the others need ``admin: true``.
ANY_ACCOUNT = frozenset({RequestClass.ROUTE_READ, RequestClass.CLIENT})
#: What ``globalWhiteRemoteAddresses`` opens without a signature.
GLOBAL_WHITE = frozenset(RequestClass) - {RequestClass.ADMIN_WRITE}
#: Open without accounts to every peer; admin-write is open to local peers only.
OPEN_WITHOUT_AUTH = frozenset(RequestClass) - {RequestClass.ADMIN_WRITE}


class ConfigValueError(ValueError):
    """A security setting that cannot be read."""


def parse_classes(text: str) -> frozenset[RequestClass]:
    """A comma-separated list of class names (``route-read,client``); ConfigValueError names a bad one."""
    out = set()
    for item in text.split(","):
        name = item.strip().lower()
        if not name:
            continue
        try:
            out.add(RequestClass(name))
        except ValueError:
            known = ", ".join(c.value for c in RequestClass)
            raise ConfigValueError(f"unknown request class {name!r} (known: {known})") from None
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class AccessSettings:
    """What the decision depends on besides the request and the peer."""

    accounts: Accounts | None = None  # None: authentication is off
    unsigned_classes: frozenset[RequestClass] = frozenset({RequestClass.ROUTE_READ})  # with accounts
    admin_addresses: AddressList = parse_list("127.*.*.*;::1")  # without accounts
    allow_remote_admin: bool = False  # without accounts

    def describe(self) -> str:
        """The one line a server logs at start: which classes are open to whom."""
        if self.accounts is None:
            admin = "every peer" if self.allow_remote_admin else f"peers matching {self.admin_addresses} only"
            return (
                "access: no accounts (aclEnable=false): route-read, client, broker-control and admin-read open to"
                f" every peer; admin-write to {admin}"
                + (" (allowRemoteAdminWithoutAuth=true)" if self.allow_remote_admin else "")
            )
        unsigned = ", ".join(sorted(c.value for c in self.unsigned_classes)) or "none"
        return (
            f"access: {self.accounts.summary()}; unsigned requests allowed for: {unsigned}"
            f"; route-read and client open to any account; broker-control, admin-read and admin-write need an"
            " admin account's signature"
            + (", or (except admin-write) a peer in globalWhiteRemoteAddresses" if self.accounts.global_white.patterns
               else "")
        )


def unsigned_classes(ip: str, settings: AccessSettings) -> frozenset[RequestClass]:
    """The classes a peer may use without a signature (all a server checks per connection)."""
    accounts = settings.accounts
    if accounts is None:
        if settings.allow_remote_admin or settings.admin_addresses.matches(ip):
            return frozenset(RequestClass)
        return OPEN_WITHOUT_AUTH
    if accounts.global_white.matches(ip):
        return settings.unsigned_classes | GLOBAL_WHITE
    return settings.unsigned_classes


class VerifiedRequests:
    """Signed requests whose signature already checked out, so that a repeat costs one dict lookup.

    A signature covers neither the opaque nor the flags, so a client asking
    for the same route again (every 30 s per topic, by default) sends the
    very same fields and signature; verifying it again (HMAC-SHA1 and the
    sorted concatenation, in Python) would cost about as much as answering
    the query. Kept: requests without a body, each under its fields
    serialised as JSON (:func:`fields_key`: every key and value, in the
    order they came, the signature included), with its version and the
    account that signed it. A request matches an entry only when its fields
    serialise to the same bytes and its version is equal, and an entry is
    added only once verified, so no one without a secret key can add one.

    Why one bytes key and not the fields themselves: a server with tens of
    thousands of topics keeps tens of thousands of entries, and a lookup
    that walks a stored dict and its strings misses the CPU cache at each
    step (measured: 1.5 to 6 µs per route query end to end, a third of the
    query's cost). A bytes key is one contiguous object, compared with one
    memcmp, and the (version, account) values are shared.

    Bounded: at ``limit`` entries (:data:`VERIFIED_LIMIT`, about 250 bytes
    each for a route query) the table starts over. A server builds a new one when
    its accounts change. Not thread-safe: bodies, the only requests
    verified in worker threads, never reach it.
    """

    __slots__ = ("limit", "signers", "_shared")

    def __init__(self, limit: int = 0) -> None:
        self.limit = limit or VERIFIED_LIMIT
        #: :func:`fields_key` -> (the request version, the account whose signature it is)
        self.signers: dict[bytes, tuple[int, Account]] = {}
        self._shared: dict[tuple[int, int], tuple[int, Account]] = {}  # (version, id(account)) -> value

    def __len__(self) -> int:
        return len(self.signers)

    def account_of(self, fields: Mapping[str, str], version: int) -> Account | None:
        """The account a bodiless request was verified for, if these very fields were."""
        key = fields_key(fields)
        entry = self.signers.get(key) if key is not None else None
        if entry is not None and entry[0] == version:
            return entry[1]
        return None

    def signed_by(self, account: Account, fields: Mapping[str, str], body: bytes, version: int) -> bool:
        if body:
            return account.verifier.matches(fields, body, version)
        if self.account_of(fields, version) is account:
            return True
        if not account.verifier.matches(fields, body, version):
            return False
        key = fields_key(fields)
        if key is None:
            return True  # verified, not remembered
        signers = self.signers
        if len(signers) >= self.limit:
            signers.clear()
            self._shared.clear()
        value = self._shared.setdefault((version, id(account)), (version, account))
        signers[key] = value
        return True


def fields_key(fields: Mapping[str, str]) -> bytes | None:
    """A request's ext fields as one bytes object, equal only for equal fields in the same order.

    JSON, so no two different field maps serialise alike; None for fields
    JSON cannot hold (a lone surrogate), which are then never remembered.
    """
    try:
        return orjson.dumps(fields)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None


#: Entries of a :class:`VerifiedRequests` (about 16 MB when full of route queries): room for
#: every (topic, account) of a 40,000-topic cluster, so clients' periodic route queries all hit.
VERIFIED_LIMIT = 65_536


def refusal(
    cls: RequestClass | None,
    ip: str,
    fields: Mapping[str, str] | None,
    body: bytes,
    version: int,
    settings: AccessSettings,
    open_classes: frozenset[RequestClass],
    verified: VerifiedRequests | None = None,
) -> str | None:
    """Why a request may not pass (None: it may). ``open_classes`` is :func:`unsigned_classes` of the
    peer; ``verified`` remembers signatures already checked (None: check every one)."""
    accounts = settings.accounts
    if accounts is None:
        if cls is None or cls in open_classes:
            return None  # an unknown code is the processor's to answer (not supported)
        return (
            f"{cls.value} is accepted only from {settings.admin_addresses} when no accounts are configured"
            " (aclEnable=false, allowRemoteAdminWithoutAuth=false)"
        )
    if cls is None:
        return "unknown request codes are refused while accounts are on"
    access_key = fields.get(ACCESS_KEY) if fields else None
    if access_key is None:
        if cls in open_classes:
            return None
        who = "an admin account" if cls not in ANY_ACCOUNT else "an account"
        return f"{cls.value} needs a request signed by {who} (AccessKey, Signature)"
    account = accounts.by_key.get(access_key)
    if account is None:
        return "unknown AccessKey"
    if not account.white.matches(ip):
        signed = (verified.signed_by(account, fields, body, version) if verified is not None and fields
                  else account.verifier.matches(fields or {}, body, version))
        if not signed:
            return "the signature does not match the request (check the secret key)"
    if cls not in ANY_ACCOUNT and not account.admin:
        return f"{cls.value} needs an admin account"
    return None


def default_accounts_path(rocketmq_home: str) -> str:
    """Where a Java broker looks for its accounts: ``$ROCKETMQ_HOME/conf/plain_acl.yml``."""
    return os.path.join(rocketmq_home or ".", "conf", "plain_acl.yml")


def settings_from(
    *,
    accounts: Accounts | None,
    unsigned: str,
    admin_addresses: str,
    allow_remote_admin: bool,
) -> AccessSettings:
    """Settings from the servers' keys (``aclUnsignedClasses``, ``adminAddressesWithoutAuth``, ...).

    ConfigValueError (or AddressPatternError) names a value that cannot be read.
    """
    return AccessSettings(
        accounts=accounts,
        unsigned_classes=parse_classes(unsigned),
        admin_addresses=parse_list(admin_addresses),
        allow_remote_admin=allow_remote_admin,
    )
