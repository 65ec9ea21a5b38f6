"""Accounts from a plain_acl.yml, and the watcher that reloads the file when it changes.

The file is the one Apache RocketMQ 4.x brokers read (``conf/plain_acl.yml``)::

    globalWhiteRemoteAddresses:
      - 10.10.103.*
    accounts:
      - accessKey: RocketMQ
        secretKey: 12345678
        whiteRemoteAddress:
        admin: false

Read here: ``accounts`` (``accessKey``, ``secretKey``, ``whiteRemoteAddress``,
``admin``) and ``globalWhiteRemoteAddresses``. The per-topic and per-group
permissions (``topicPerms``, ``groupPerms``, ``defaultTopicPerm``,
``defaultGroupPerm``) are accepted and not enforced: access here is decided
per request class (see :mod:`security.access`), and the count of accounts
that carry them is reported so an operator is not misled.

Values are read as written (YAML's implicit typing is off, so a secret
``012345`` stays ``012345``). As in Java, access and secret keys have at
least 7 characters, and an access key appears once. A file that breaks any
rule is refused as a whole, with one line naming the first problem; the
watcher then keeps the last good accounts. The file may hold at most
:data:`MAX_FILE_BYTES`. An empty file is refused too: it is what a reload
sees of a file truncated to be rewritten. (Replace the file by renaming a
new one over it: a reload can also see half of a file written in place.)
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

import yaml

from remoting.acl import Verifier
from security.acl_addresses import AddressList, AddressPattern, AddressPatternError, parse_pattern
from server_runtime.regular_file import read_regular_file

#: Largest accounts file read (bytes): bounds the memory and the parse time of a reload.
MAX_FILE_BYTES = 1024 * 1024
#: Java's AclConstants: keys must be longer than 6 characters.
MIN_KEY_LENGTH = 7
_UNENFORCED = ("topicPerms", "groupPerms", "defaultTopicPerm", "defaultGroupPerm")


class AccountsError(ValueError):
    """An accounts file that cannot be used; the text names the file and the problem."""


@dataclass(frozen=True, slots=True)
class Account:
    access_key: str
    admin: bool
    white: AddressPattern  # peers that may use this access key without a signature (Java's rule)
    verifier: Verifier = field(repr=False)


@dataclass(frozen=True, slots=True)
class Accounts:
    by_key: dict[str, Account]
    global_white: AddressList
    source: str = ""
    unenforced: int = 0  # accounts with per-topic/group permissions, which are not enforced

    def summary(self) -> str:
        admins = sum(1 for a in self.by_key.values() if a.admin)
        text = f"{len(self.by_key)} accounts ({admins} admin) from {self.source or '(memory)'}"
        if self.global_white.patterns:
            text += f", globalWhiteRemoteAddresses {self.global_white}"
        if self.unenforced:
            text += f", {self.unenforced} with topic/group permissions (not enforced here)"
        return text


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)


def _flag(value: Any, where: str) -> bool:
    text = _text(value).strip().lower()
    if text in ("", "false"):
        return False
    if text == "true":
        return True
    raise AccountsError(f"{where}: admin must be true or false, got {_text(value)[:40]!r}")


def _account(raw: Any, index: int, source: str) -> Account:
    where = f"{source}: accounts[{index}]"
    if not isinstance(raw, dict):
        raise AccountsError(f"{where} is not a mapping of accessKey, secretKey, ...")
    access_key, secret_key = _text(raw.get("accessKey")).strip(), _text(raw.get("secretKey")).strip()
    if len(access_key) < MIN_KEY_LENGTH or len(secret_key) < MIN_KEY_LENGTH:
        raise AccountsError(f"{where}: accessKey and secretKey must each have at least {MIN_KEY_LENGTH} characters")
    try:
        white = parse_pattern(_text(raw.get("whiteRemoteAddress")))
    except AddressPatternError as exc:
        raise AccountsError(f"{where}: whiteRemoteAddress {exc}") from None
    return Account(access_key, _flag(raw.get("admin"), where), white, Verifier(secret_key))


def parse_accounts(text: str, source: str = "") -> Accounts:
    """The accounts of a plain_acl.yml text; AccountsError names the first problem."""
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CBaseLoader", yaml.BaseLoader))  # noqa: S506 - no tags, strings only
    except yaml.YAMLError as exc:
        raise AccountsError(f"{source}: not YAML: {str(exc).splitlines()[0]}") from None
    if doc is None or doc == "":  # also what a reload sees of a file being rewritten in place
        raise AccountsError(f"{source}: empty (write 'accounts: []' to refuse every account)")
    if not isinstance(doc, dict):
        raise AccountsError(f"{source}: expected a mapping with accounts and globalWhiteRemoteAddresses")
    raw_accounts = doc.get("accounts") or []
    raw_white = doc.get("globalWhiteRemoteAddresses") or []
    if not isinstance(raw_accounts, list) or not isinstance(raw_white, list):
        raise AccountsError(f"{source}: accounts and globalWhiteRemoteAddresses must be lists")
    by_key: dict[str, Account] = {}
    unenforced = 0
    for i, raw in enumerate(raw_accounts):
        account = _account(raw, i, source)
        if account.access_key in by_key:
            raise AccountsError(f"{source}: accessKey {account.access_key[:40]!r} appears more than once")
        by_key[account.access_key] = account
        unenforced += any(raw.get(k) not in (None, "", []) for k in _UNENFORCED)
    try:
        global_white = AddressList.parse([_text(p) for p in raw_white])
    except AddressPatternError as exc:
        raise AccountsError(f"{source}: globalWhiteRemoteAddresses {exc}") from None
    return Accounts(by_key, global_white, source, unenforced)


def read_accounts(path: str) -> Accounts:
    """Read and parse an accounts file; AccountsError on any failure.

    Read as a regular file of at most MAX_FILE_BYTES: a FIFO at the path
    would otherwise block the start, or a reload's thread, forever.
    """
    try:
        data = read_regular_file(path, MAX_FILE_BYTES)
    except OSError as exc:
        raise AccountsError(f"cannot read accounts file {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise AccountsError(f"accounts file {path} is not UTF-8") from None
    return parse_accounts(text, path)


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class AccountsFile:
    """The accounts file of a server: read at start (a failure stops the start), then polled.

    :meth:`changed` is cheap (one ``stat``) and says whether the file's
    mtime, size or inode moved since the last read; :meth:`reload` then
    reads it (the caller runs it off the event loop). A file that fails to
    read or parse keeps the last good accounts and logs one line, once per
    change of the file.
    """

    def __init__(self, path: str, log: logging.Logger) -> None:
        self.path = path
        self.log = log
        self._stamp = _stamp(path)
        self.accounts = read_accounts(path)

    def changed(self) -> bool:
        return _stamp(self.path) != self._stamp

    def reload(self) -> Accounts | None:
        """Read the file again; the new accounts, or None (kept the old ones) when it is bad."""
        self._stamp = _stamp(self.path)
        try:
            accounts = read_accounts(self.path)
        except AccountsError as exc:
            self.log.error("accounts file not reloaded, keeping the last good accounts: %s", exc)
            return None
        self.accounts = accounts
        self.log.info("accounts reloaded: %s", accounts.summary())
        return accounts
