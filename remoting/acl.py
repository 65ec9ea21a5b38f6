"""Request signatures in the form Apache RocketMQ's ACL uses (sans-IO).

A Java client with ``AclClientRPCHook`` (and a 5.3 broker given
``innerClientAuthenticationCredentials``) adds two header fields to every
request it sends, ``AccessKey`` and, when it has one, ``SecurityToken``,
then signs: the signature is Base64(HmacSHA1(secretKey, content)) where
content is the values of all header (ext) fields, ordered by key as a Java
``TreeMap`` orders strings and without ``Signature`` itself, concatenated
and encoded as UTF-8, followed by the body bytes. The result goes in the
``Signature`` field. Neither the code, the opaque nor the flags are signed,
so a captured request can be replayed: the scheme authenticates who built
a request, it does not make the channel private (that is TLS's job).

One exception on the verifying side, as a 5.3.3 broker has it: a request
of version 4.9.3 or older is checked without ``_UNIQUE_KEY_QUERY`` (those
clients added it after signing).

Everything here is a pure function of its arguments; the secret key never
appears in a repr or a log line.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

from remoting.command import RemotingCommand

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
#: Added after signing by clients of 4.9.3 and older, so not signed for them.
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
#: MQVersion ordinal of 4.9.3 (V4_9_4 is 401, each release follows its SNAPSHOT).
V4_9_3 = 399


@dataclass(frozen=True, slots=True)
class Credentials:
    """An account's keys as a client holds them (Java's SessionCredentials)."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("an access key and a secret key are both needed to sign requests")


def _java_order(fields: Mapping[str, str]) -> list[str]:
    """The keys in the order of Java's ``String.compareTo`` (UTF-16 code units).

    Python orders by code point, which differs only when a key holds a
    character beyond U+FFFF; ASCII keys (all of RocketMQ's) skip the re-sort.
    """
    keys = sorted(fields)
    if not "".join(keys).isascii():
        keys.sort(key=lambda k: k.encode("utf-16-be", "surrogatepass"))
    return keys


def signed_content(fields: Mapping[str, str], body: bytes, *, version: int | None = None) -> bytes:
    """The bytes a signature covers: field values by key order, then the body.

    ``version`` is the request's version when verifying (an old client's
    ``_UNIQUE_KEY_QUERY`` is left out); None when signing (everything but
    the signature is covered).
    """
    if version is not None and version <= V4_9_3 and UNIQUE_KEY_QUERY in fields:
        values = [fields[k] for k in _java_order(fields) if k != SIGNATURE and k != UNIQUE_KEY_QUERY]
    else:
        values = [fields[k] for k in _java_order(fields) if k != SIGNATURE]
    # Java's String.getBytes(UTF-8) writes "?" for what cannot be encoded (a lone surrogate).
    text = "".join(values).encode("utf-8", "replace")
    return text + body if body else text


class _HmacSha1:
    """HMAC-SHA1 (RFC 2104) with the key's inner and outer hash states computed once.

    ``hmac.digest(key, msg, "sha1")`` sets the key up again on every call,
    about three times the cost of the hashing itself for a route query's few
    dozen bytes; here a call copies two prepared states.
    """

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > 64:  # SHA-1's block size: longer keys are hashed first
            key = hashlib.sha1(key).digest()
        key = key.ljust(64, b"\0")
        self._inner = hashlib.sha1(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha1(bytes(b ^ 0x5C for b in key))

    def digest(self, data: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(data)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


def signature(secret_key: str, content: bytes) -> str:
    """Base64(HmacSHA1(secret_key, content)), as ``AclSigner.calSignature`` computes it."""
    return base64.b64encode(hmac.digest(secret_key.encode("utf-8", "replace"), content, "sha1")).decode("ascii")


def sign(cmd: RemotingCommand, credentials: Credentials) -> RemotingCommand:
    """Add ``AccessKey`` (and ``SecurityToken``) to ``cmd`` and sign it, in place; returns it.

    Call it last, once every header field and the body are final: a field
    set afterwards breaks the signature.
    """
    fields = dict(cmd.ext_fields or {})
    fields.pop(SIGNATURE, None)
    fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        fields[SECURITY_TOKEN] = credentials.security_token
    fields[SIGNATURE] = signature(credentials.secret_key, signed_content(fields, cmd.body))
    cmd.ext_fields = fields
    return cmd


class Verifier:
    """Checks signatures against one secret key; built once per account, used per request."""

    __slots__ = ("_mac",)

    def __init__(self, secret_key: str) -> None:
        self._mac = _HmacSha1(secret_key.encode("utf-8", "replace"))

    def __repr__(self) -> str:
        return "Verifier(<secret>)"

    def matches(self, fields: Mapping[str, str], body: bytes, version: int) -> bool:
        """Whether ``fields[Signature]`` signs ``fields`` and ``body`` (constant-time comparison)."""
        given = fields.get(SIGNATURE)
        if not given:
            return False
        expected = binascii.b2a_base64(self._mac.digest(signed_content(fields, body, version=version)), newline=False)
        return hmac.compare_digest(expected, given.encode("utf-8", "replace"))


__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "UNIQUE_KEY_QUERY",
    "Credentials",
    "Verifier",
    "sign",
    "signature",
    "signed_content",
]
