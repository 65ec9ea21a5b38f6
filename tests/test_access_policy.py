"""The access decision, address patterns and accounts files as pure functions.

Non-loopback peers (10.x, 192.168.x, 2001:db8::) appear only here: tests
never listen or send beyond loopback, and the decision depends on the
peer's address string alone, so these cases need no socket.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker_stub.processor import BrokerProcessor
from broker_stub.request_classes import REQUEST_CLASSES as BROKER_CLASSES
from namesrv.request_classes import REQUEST_CLASSES as NAMESRV_CLASSES
from remoting import acl
from security.access import (
    AccessSettings,
    ConfigValueError,
    RequestClass,
    parse_classes,
    refusal,
    settings_from,
    unsigned_classes,
)
from security.acl_accounts import AccountsError, AccountsFile, parse_accounts
from security.acl_addresses import AddressPatternError, parse_list, parse_pattern, peer_ip
from remoting.command import request

C = RequestClass

ACCOUNTS_YAML = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.{1,2}
accounts:
  - accessKey: RocketMQ
    secretKey: 012345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    topicPerms:
      - topicA=DENY
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


@pytest.mark.parametrize(
    ("pattern", "inside", "outside"),
    [
        ("*", ["10.0.0.1", "::1"], []),
        ("*.*.*.*", ["1.2.3.4"], []),
        ("", [], ["127.0.0.1"]),
        ("192.168.0.1", ["192.168.0.1", "::ffff:192.168.0.1"], ["192.168.0.2"]),
        ("192.168.0.{1,2}", ["192.168.0.1", "192.168.0.2"], ["192.168.0.3"]),
        ("192.168.0.1,10.0.0.9", ["10.0.0.9"], ["10.0.0.1"]),
        ("192.168.1.*", ["192.168.1.0", "192.168.1.255"], ["192.168.2.1"]),
        ("192.168.*.1-10", ["192.168.7.1", "192.168.200.10"], ["192.168.7.11", "192.169.7.1"]),
        ("10.1-2.*.*", ["10.2.9.9"], ["10.3.0.0"]),
        ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["::2", "127.0.0.1"]),
        ("2001:db8::1-ff", ["2001:db8::ff"], ["2001:db8::100"]),
        ("2001:db8::*", ["2001:db8::abcd"], ["2001:db9::1"]),
        ("fe80::{1,2}", ["fe80::2"], ["fe80::3"]),
    ],
)
def test_address_patterns(pattern: str, inside: list[str], outside: list[str]) -> None:
    p = parse_pattern(pattern)
    assert all(p.matches(ip) for ip in inside)
    assert not any(p.matches(ip) for ip in outside)
    assert p.everyone or not p.matches("not-an-ip")


@pytest.mark.parametrize(
    "bad", ["192.168.*", "192.168.1.300", "192.168.1.5-2", "192.168.x.1", "10.0.0.{1,x}", "host.example", "1::2::*"]
)
def test_bad_address_patterns_are_errors(bad: str) -> None:
    with pytest.raises(AddressPatternError):
        parse_pattern(bad)


def test_loopback_and_peer_addresses() -> None:
    assert peer_ip("127.0.0.1:5555") == "127.0.0.1" and peer_ip("::1:5555") == "::1"
    default = parse_list("127.*.*.*;::1")
    assert default.matches("127.0.0.2") and default.matches("::1") and not default.matches("10.0.0.1")
    assert default.matches("::ffff:127.0.0.1") and not default.matches("192.0.2.2")  # a dual-stack view of IPv4


def test_accounts_file_form() -> None:
    accounts = parse_accounts(ACCOUNTS_YAML, "plain_acl.yml")
    plain, admin = accounts.by_key["RocketMQ"], accounts.by_key["rocketmq2"]
    assert not plain.admin and admin.admin
    assert plain.verifier.matches(
        acl.sign(request(105, {"topic": "T"}), acl.Credentials("RocketMQ", "012345678")).ext_fields or {}, b"", 479
    ), "secrets are read as written (012345678 is not the number 12345678)"
    assert admin.white.matches("192.168.1.7") and not plain.white.matches("192.168.1.7")
    assert accounts.global_white.matches("192.168.0.2") and not accounts.global_white.matches("192.168.0.3")
    assert accounts.unenforced == 1 and "1 with topic/group permissions (not enforced here)" in accounts.summary()
    assert parse_accounts("accounts: []", "none").by_key == {}
    with pytest.raises(AccountsError, match="empty"):
        parse_accounts("", "empty")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "at least 7"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n  - accessKey: RocketMQ\n    secretKey: 87654321\n",
         "more than once"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    admin: yes please\n", "admin must be"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    whiteRemoteAddress: 1.2\n", "whiteRemote"),
        ("globalWhiteRemoteAddresses: 10.0.0.1\n", "must be lists"),
        ("accounts: [\n", "not YAML"),
        ("- just a list\n", "expected a mapping"),
    ],
)
def test_bad_accounts_files_are_refused_whole(text: str, problem: str) -> None:
    with pytest.raises(AccountsError, match=problem):
        parse_accounts(text, "plain_acl.yml")


def test_accounts_file_watcher_keeps_the_last_good(tmp_path: Path) -> None:
    import logging

    path = tmp_path / "plain_acl.yml"
    path.write_text(ACCOUNTS_YAML)
    watched = AccountsFile(str(path), logging.getLogger("test"))
    assert not watched.changed()
    path.write_text("accounts: [")
    os.utime(path, ns=(1, 1))  # a change the stamp must see even within one mtime tick
    assert watched.changed()
    assert watched.reload() is None and "RocketMQ" in watched.accounts.by_key
    assert not watched.changed()  # one line per bad version, not one per poll
    path.write_text(ACCOUNTS_YAML.replace("RocketMQ", "RocketMQ3"))
    assert watched.changed() and watched.reload() is not None
    assert "RocketMQ3" in watched.accounts.by_key
    path.write_bytes(b"x" * (1024 * 1024 + 1))
    assert watched.reload() is None  # bounded


def _decide(cls: C | None, ip: str, settings: AccessSettings, fields: dict[str, str] | None = None) -> str | None:
    return refusal(cls, ip, fields, b"", 479, settings, unsigned_classes(ip, settings))


def test_without_accounts_only_admin_write_depends_on_the_peer() -> None:
    settings = settings_from(accounts=None, unsigned="route-read", admin_addresses="127.*.*.*;::1",
                             allow_remote_admin=False)
    for ip in ("10.0.0.5", "192.0.2.2", "2001:db8::1"):
        assert unsigned_classes(ip, settings) == frozenset(C) - {C.ADMIN_WRITE}
        assert "admin-write" in (_decide(C.ADMIN_WRITE, ip, settings) or "")
        assert _decide(None, ip, settings) is None  # unknown codes: the processor says "not supported"
    assert unsigned_classes("127.0.0.1", settings) == frozenset(C)
    opened = settings_from(accounts=None, unsigned="", admin_addresses="127.*.*.*", allow_remote_admin=True)
    assert unsigned_classes("10.0.0.5", opened) == frozenset(C)


def test_with_accounts_every_rule() -> None:
    accounts = parse_accounts(ACCOUNTS_YAML, "plain_acl.yml")
    settings = settings_from(accounts=accounts, unsigned="route-read", admin_addresses="127.*.*.*",
                             allow_remote_admin=False)
    stranger, white = "10.0.0.5", "10.10.103.7"
    assert unsigned_classes(stranger, settings) == {C.ROUTE_READ}
    assert unsigned_classes("127.0.0.1", settings) == {C.ROUTE_READ}  # loopback is no exception with accounts
    assert unsigned_classes(white, settings) == frozenset(C) - {C.ADMIN_WRITE}
    assert "unknown request codes" in (_decide(None, white, settings) or "")

    def signed(creds: acl.Credentials) -> dict[str, str]:
        return acl.sign(request(100), creds).ext_fields or {}

    user, admin = acl.Credentials("RocketMQ", "012345678"), acl.Credentials("rocketmq2", "12345678")
    assert _decide(C.CLIENT, stranger, settings, signed(user)) is None
    assert "needs an admin account" in (_decide(C.BROKER_CONTROL, stranger, settings, signed(user)) or "")
    assert _decide(C.ADMIN_WRITE, stranger, settings, signed(admin)) is None
    assert "signature" in (_decide(C.ROUTE_READ, stranger, settings, signed(acl.Credentials("rocketmq2", "x" * 8)))
                           or "")
    assert "unknown AccessKey" in (_decide(C.ROUTE_READ, white, settings, signed(acl.Credentials("nobody00", "x" * 8)))
                                   or "")
    assert "signed by an admin account" in (_decide(C.ADMIN_WRITE, white, settings) or "")
    # rocketmq2 whitelists 192.168.1.*: its AccessKey alone is enough from there (Java's rule), not elsewhere
    assert _decide(C.ADMIN_WRITE, "192.168.1.9", settings, {"AccessKey": "rocketmq2"}) is None
    assert _decide(C.ADMIN_WRITE, stranger, settings, {"AccessKey": "rocketmq2"}) is not None
    assert settings.describe().startswith("access: 2 accounts (1 admin) from plain_acl.yml")


def test_class_names_are_read_strictly() -> None:
    assert parse_classes("route-read, CLIENT") == {C.ROUTE_READ, C.CLIENT}
    assert parse_classes("") == frozenset()
    with pytest.raises(ConfigValueError, match="route-reads"):
        parse_classes("route-reads")


def test_every_code_served_has_a_class() -> None:
    """The tables cover what the processors serve (they refuse to start otherwise) and the issue's split."""
    assert {NAMESRV_CLASSES[c] for c in (105, 106, 206, 224, 304, 311, 312, 313)} == {C.ROUTE_READ}
    assert {NAMESRV_CLASSES[c] for c in (103, 104, 322, 904, 901)} == {C.BROKER_CONTROL}
    assert {NAMESRV_CLASSES[c] for c in (101, 219, 319, 9001, 9002)} == {C.ADMIN_READ}
    assert {NAMESRV_CLASSES[c] for c in (100, 102, 205, 216, 217, 318, 327)} == {C.ADMIN_WRITE}
    assert {BROKER_CLASSES[c] for c in (9000, 9010, 25, 215, 17, 207)} == {C.ADMIN_WRITE}
    assert {BROKER_CLASSES[c] for c in (12, 307, 317, 328, 907)} <= {C.CLIENT, C.ADMIN_READ}
    assert {BROKER_CLASSES[c] for c in (10, 11, 14, 15, 34, 310, 320)} == {C.CLIENT}
    with pytest.raises(RuntimeError, match="without an access class"):
        BrokerProcessor.add_handler(None, 4242, lambda req, conn: None)  # type: ignore[arg-type]


def test_broker_keys_read_from_either_form() -> None:
    from broker_stub.broker_config_admin import render_config
    from broker_stub.config import BrokerConfig, ConfigError

    assert BrokerConfig().credentials() is None
    assert BrokerConfig(accessKey="brokerKey1", secretKey="brokerSecret").credentials() == acl.Credentials(
        "brokerKey1", "brokerSecret")
    java = BrokerConfig(innerClientAuthenticationCredentials='{"accessKey":"brokerKey1","secretKey":"s3cret99"}')
    assert java.credentials() == acl.Credentials("brokerKey1", "s3cret99")
    shown = render_config(java)
    assert "s3cret99" not in shown and "innerClientAuthenticationCredentials=******" in shown
    for bad in (BrokerConfig(accessKey="brokerKey1"), BrokerConfig(innerClientAuthenticationCredentials="{oops"),
                BrokerConfig(innerClientAuthenticationCredentials="[1]"), BrokerConfig(aclUnsignedClasses="routes")):
        with pytest.raises(ConfigError):
            bad.validate()
