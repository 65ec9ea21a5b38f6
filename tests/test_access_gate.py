"""The access gate in process: its fast paths never let through what the full check would refuse.

The processor behind the gate is a recorder (the gate is what is under
test); requests go through the real codec both ways.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable

import trio

from namesrv.request_classes import REQUEST_CLASSES
from remoting import acl
from security.access import settings_from
from security.acl_accounts import parse_accounts
from remoting.codec import FrameDecoder, decode_frame, encode
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, request, response_to
from security.gate import Gate
from server_runtime.ratelog import RateLimitedLog

ADMIN = acl.Credentials("adminKey01", "adminSecret01")
USER = acl.Credentials("userKey001", "userSecret01")
ACCOUNTS = (
    f"accounts:\n  - accessKey: {ADMIN.access_key}\n    secretKey: {ADMIN.secret_key}\n    admin: true\n"
    f"  - accessKey: {USER.access_key}\n    secretKey: {USER.secret_key}\n"
)


class Recorder:
    """Answers SUCCESS to everything and remembers the codes it was given."""

    async_codes: frozenset[int] = frozenset({100})

    def __init__(self) -> None:
        self.seen: list[int] = []

    def handle(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        self.seen.append(req.code)
        return encode(response_to(req, ResponseCode.SUCCESS))

    async def handle_async(self, req: RemotingCommand, conn: Hashable) -> bytes | None:
        return self.handle(req, conn)


def gate(accounts: bool = True, peer: str = "10.0.0.5:4000") -> tuple[Gate, Recorder]:
    inner = Recorder()
    settings = settings_from(accounts=parse_accounts(ACCOUNTS, "t") if accounts else None, unsigned="route-read",
                             admin_addresses="127.*.*.*", allow_remote_admin=False)
    return Gate(inner, REQUEST_CLASSES, settings, peer_of=lambda c: peer, warn=RateLimitedLog(logging.getLogger("t"))), inner


def wire(cmd: RemotingCommand) -> RemotingCommand:
    """As the server receives it."""
    return decode_frame(encode(cmd))


def code_of(answer: bytes | None) -> int:
    assert answer is not None
    (resp,) = FrameDecoder().feed(answer)
    return resp.code


def test_a_remembered_signature_does_not_open_other_codes() -> None:
    g, inner = gate()
    # an admin's bodiless signed request with no fields of its own: the same signature fits any code
    signed = acl.sign(request(319), ADMIN)
    assert code_of(g.handle(wire(signed), 1)) == ResponseCode.SUCCESS
    replayed = RemotingCommand(9999, ext_fields=dict(signed.ext_fields or {}))
    assert code_of(g.handle(wire(replayed), 1)) == ResponseCode.NO_PERMISSION  # unknown codes stay closed
    user = acl.sign(request(106), USER)
    assert code_of(g.handle(wire(user), 1)) == ResponseCode.SUCCESS  # route-read, remembered now
    as_admin_read = RemotingCommand(319, ext_fields=dict(user.ext_fields or {}))
    assert code_of(g.handle(wire(as_admin_read), 1)) == ResponseCode.NO_PERMISSION  # still not an admin
    assert inner.seen == [319, 106]


def test_a_tampered_field_misses_the_table_and_fails_the_check() -> None:
    g, inner = gate()
    signed = acl.sign(request(319, {"topic": "A"}), ADMIN)  # admin-read: never open unsigned, checked each time
    assert code_of(g.handle(wire(signed), 1)) == ResponseCode.SUCCESS
    tampered = RemotingCommand(319, ext_fields={**(signed.ext_fields or {}), "topic": "B"})
    assert code_of(g.handle(wire(tampered), 1)) == ResponseCode.NO_PERMISSION
    older = wire(signed)
    older.version = 300  # another version is another entry, checked again (and valid: no unique-key field)
    assert code_of(g.handle(older, 1)) == ResponseCode.SUCCESS
    route = acl.sign(request(105, {"topic": "A"}), USER)
    assert code_of(g.handle(wire(route), 2)) == ResponseCode.SUCCESS
    route_tampered = RemotingCommand(105, ext_fields={**(route.ext_fields or {}), "topic": "B"})
    assert code_of(g.handle(wire(route_tampered), 3)) == ResponseCode.NO_PERMISSION  # another connection


def test_a_connection_that_proved_an_account_sends_its_open_requests_unchecked() -> None:
    """Route-read is open unsigned: once a connection's signature for an account checked out, that
    account's route queries on it pass as unsigned ones would; nothing else does."""
    g, inner = gate()
    wrong = acl.Credentials(USER.access_key, "wrongSecret1")
    for _ in range(3):  # a wrong secret never proves anything: refused every time
        assert code_of(g.handle(wire(acl.sign(request(105, {"topic": "A"}), wrong)), 1)) == ResponseCode.NO_PERMISSION
    assert code_of(g.handle(wire(acl.sign(request(105, {"topic": "A"}), USER)), 1)) == ResponseCode.SUCCESS
    assert code_of(g.handle(wire(acl.sign(request(105, {"topic": "B"}), wrong)), 1)) == ResponseCode.SUCCESS
    assert code_of(g.handle(wire(acl.sign(request(105, {"topic": "B"}), wrong)), 2)) == ResponseCode.NO_PERMISSION
    # the account's other classes are still checked on the proven connection
    assert code_of(g.handle(wire(acl.sign(request(319), USER)), 1)) == ResponseCode.NO_PERMISSION  # not an admin
    forged_admin = acl.sign(request(105, {"topic": "A"}), acl.Credentials(ADMIN.access_key, "wrongSecret1"))
    assert code_of(g.handle(wire(forged_admin), 1)) == ResponseCode.NO_PERMISSION  # another account: checked
    g.forget(1)  # a closed connection's proof goes with it
    assert code_of(g.handle(wire(acl.sign(request(105, {"topic": "C"}), wrong)), 1)) == ResponseCode.NO_PERMISSION
    assert inner.seen == [105, 105]


def test_new_settings_forget_remembered_signatures_and_rights() -> None:
    g, inner = gate()
    signed = acl.sign(request(105, {"topic": "A"}), USER)
    assert code_of(g.handle(wire(signed), 1)) == ResponseCode.SUCCESS
    without_user = settings_from(
        accounts=parse_accounts(ACCOUNTS.split("  - accessKey: userKey001")[0], "t"), unsigned="route-read",
        admin_addresses="127.*.*.*", allow_remote_admin=False)
    g.update(without_user)
    assert code_of(g.handle(wire(signed), 1)) == ResponseCode.NO_PERMISSION  # the account is gone
    unproven = acl.sign(request(105, {"topic": "B"}), USER)
    assert code_of(g.handle(wire(unproven), 1)) == ResponseCode.NO_PERMISSION  # and so is its proof


def test_oneway_refusals_are_not_answered_and_accounts_off_ignores_signatures() -> None:
    g, inner = gate(accounts=False)
    assert g.handle(wire(request(100, {"namespace": "n", "key": "k", "value": "v"}, oneway=True)), 1) is None
    assert code_of(g.handle(wire(acl.sign(request(105, {"topic": "A"}), acl.Credentials("nobody00", "x" * 8))), 1)) == 0
    local, inner = gate(accounts=False, peer="127.0.0.1:4000")
    assert code_of(local.handle(wire(request(318)), 1)) == ResponseCode.SUCCESS


async def test_big_signed_bodies_are_verified_off_the_loop() -> None:
    g, inner = gate()
    body = b"x" * (512 * 1024)
    good = acl.sign(request(100, {"namespace": "n"}, body), ADMIN)
    bad = acl.sign(request(100, {"namespace": "n"}, body), acl.Credentials(ADMIN.access_key, "wrongSecret1"))
    with trio.fail_after(10):
        assert code_of(await g.handle_async(wire(good), 1)) == ResponseCode.SUCCESS
        assert code_of(await g.handle_async(wire(bad), 1)) == ResponseCode.NO_PERMISSION
    assert inner.seen == [100]
