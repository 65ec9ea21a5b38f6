"""TLS pieces without sockets: Java's keys, the first-bytes test, a whole handshake over memory BIOs.

The handshakes here are real (OpenSSL on both sides, a real self-signed
certificate); only the transport between the two ends is a pair of buffers.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from namesrv.config import ConfigError, NamesrvConfig
from server_runtime.connection import Connection
from security.tls_config import TlsConfigError, TlsSettings
from security.tls_context import client_context, self_signed_context, self_signed_pem, server_context
from server_runtime.tls_gate import HANDSHAKE_TIMEOUT, HANDSHAKES_PER_TURN, TlsGate, TlsRefused
from server_runtime.tls_session import (
    MAX_HANDSHAKE_BYTES,
    PLAINTEXT,
    TLS,
    UNDECIDED,
    Hello,
    PeerClosed,
    TlsError,
    TlsSession,
    classify,
)


@pytest.fixture(scope="module")
def server_ctx() -> ssl.SSLContext:
    return self_signed_context()


# ---------------------------------------------------------------------------
# Java's keys


def test_defaults_are_javas() -> None:
    settings = TlsSettings.from_properties({})
    assert settings.server_mode == "permissive"
    assert settings.test_mode is True
    assert settings.server_need_client_auth == "none"
    assert settings.self_signed
    assert not settings.client_tls  # tls.enable unset and the port is not enforcing


def test_java_keys_are_read_and_other_keys_ignored() -> None:
    settings = TlsSettings.from_properties(
        {
            "tls.server.mode": "Enforcing",
            "tls.test.mode.enable": "false",
            "tls.server.certPath": "/c.pem",
            "tls.server.keyPath": "/k.pem",
            "tls.server.keyPassword": "pw",
            "tls.client.authServer": "true",
            "tls.client.trustCertPath": "/ca.pem",
            "listenPort": "9876",
        }
    )
    assert settings.server_mode == "enforcing"
    server = (settings.server_cert_path, settings.server_key_path, settings.server_key_password)
    assert server == ("/c.pem", "/k.pem", "pw")
    assert settings.client_auth_server and settings.client_trust_cert_path == "/ca.pem"
    assert not settings.self_signed
    assert settings.client_tls  # an enforcing broker talks TLS to its NameServers, as Java's BrokerStartup
    assert not TlsSettings.from_properties({"tls.server.mode": "enforcing", "tls.enable": "false"}).client_tls


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"tls.server.mode": "strict"}, "tls.server.mode='strict' is not one of disabled, permissive, enforcing"),
        ({"tls.enable": "yes"}, "tls.enable='yes' is not true or false"),
        ({"tls.server.need.client.auth": "always"}, "is not one of none, optional, require"),
    ],
)
def test_bad_values_are_named(props: dict[str, str], message: str) -> None:
    with pytest.raises(TlsConfigError, match=message.replace("(", r"\(")):
        TlsSettings.from_properties(props)


def test_config_file_wins_except_for_mode_and_enable(tmp_path: Path) -> None:
    tls_file = tmp_path / "tls.properties"
    tls_file.write_text("tls.test.mode.enable=false\ntls.server.certPath=/from-file.pem\ntls.server.mode=disabled\n")
    settings = TlsSettings.from_properties(
        {"tls.config.file": str(tls_file), "tls.server.certPath": "/from-server.pem", "tls.server.mode": "enforcing"}
    ).resolved()
    assert settings.server_cert_path == "/from-file.pem"
    assert settings.test_mode is False
    assert settings.server_mode == "enforcing"


def test_an_explicit_config_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(TlsConfigError, match="tls.config.file .*missing.properties"):
        TlsSettings.from_properties({"tls.config.file": str(tmp_path / "missing.properties")}).resolved()


def test_namesrv_config_hides_key_passwords_from_listings_only() -> None:
    config = NamesrvConfig()
    config.extra = {"tls.server.keyPassword": "s3cret", "tls.server.mode": "permissive"}
    assert "s3cret" not in config.render(public=True)
    assert "tls.server.keyPassword=******" in config.render(public=True)
    assert "tls.server.keyPassword=s3cret" in config.render()  # what the -c file keeps
    config.extra["tls.server.mode"] = "sometimes"
    with pytest.raises(ConfigError, match="tls.server.mode"):
        config.validate()


def test_need_client_auth_without_verification_is_refused_at_start(tmp_path: Path) -> None:
    cert, key = _write_pair(tmp_path)
    settings = TlsSettings.from_properties(
        {
            "tls.test.mode.enable": "false",
            "tls.server.certPath": str(cert),
            "tls.server.keyPath": str(key),
            "tls.server.need.client.auth": "require",
        }
    )
    with pytest.raises(TlsConfigError, match="needs tls.server.authClient=true and tls.server.trustCertPath"):
        server_context(settings)


def test_trust_file_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(TlsConfigError, match=r"^tls.client.trustCertPath .*nope.pem does not exist$"):
        client_context(verify=True, trust_cert_path=str(tmp_path / "nope.pem"))
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(TlsConfigError, match="tls.client.trustCertPath .*garbage.pem"):
        client_context(verify=True, trust_cert_path=str(garbage))


# ---------------------------------------------------------------------------
# the first bytes


def test_first_bytes_tell_tls_from_frames() -> None:
    assert classify(b"\x16\x03\x01\x02\x00") == TLS
    assert classify(b"\x16") == UNDECIDED
    assert classify(b"\x16\x00\x00\x10") == PLAINTEXT  # a (huge) frame length, not a TLS record
    assert classify(b"\x00\x00\x00\x20") == PLAINTEXT


# ---------------------------------------------------------------------------
# sessions over memory BIOs


class _Client:
    """The client end of a handshake, on memory BIOs (what trio.SSLStream does over a socket)."""

    def __init__(self, ctx: ssl.SSLContext) -> None:
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing, server_side=False)

    def step(self) -> bytes:
        try:
            self.obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        return self.outgoing.read()


def _handshake(server: TlsSession, client: _Client) -> None:
    to_server = client.step()
    for _ in range(10):
        server.receive(to_server)
        client.incoming.write(server.take_output())
        to_server = client.step()
        if server.handshaken and not to_server:
            return
    raise AssertionError("handshake did not complete")


def test_a_session_carries_frames_both_ways(server_ctx: ssl.SSLContext) -> None:
    server = TlsSession(server_ctx, now=0.0)
    client = _Client(client_context())
    _handshake(server, client)
    assert server.obj.version() in ("TLSv1.2", "TLSv1.3")
    client.obj.write(b"request one" * 1000)
    client.obj.write(b"|two")
    assert server.receive(client.outgoing.read()) == b"request one" * 1000 + b"|two"
    client.incoming.write(server.encrypt(b"answer" * 5000))
    got = b""
    while len(got) < 30000:
        got += client.obj.read(65536)
    assert got == b"answer" * 5000
    # a clean close from the client ends the session
    try:
        client.obj.unwrap()
    except ssl.SSLWantReadError:
        pass
    with pytest.raises(PeerClosed):
        server.receive(client.outgoing.read())


def test_a_record_cut_anywhere_comes_out_whole(server_ctx: ssl.SSLContext) -> None:
    server = TlsSession(server_ctx, now=0.0)
    client = _Client(client_context())
    _handshake(server, client)
    client.obj.write(b"x" * 20000)
    ciphertext = client.outgoing.read()
    got = b"".join(server.receive(ciphertext[i : i + 7]) for i in range(0, len(ciphertext), 7))
    assert got == b"x" * 20000
    assert server.incoming.pending == 0  # nothing left behind once the records are complete


def test_requests_right_behind_the_finished_are_not_handshake_bytes(server_ctx: ssl.SSLContext) -> None:
    server = TlsSession(server_ctx, now=0.0)
    client = _Client(client_context())
    server.receive(client.step())  # the hello
    client.incoming.write(server.take_output())
    finished = client.step()  # the client is done (TLS 1.3): its Finished, then requests at once
    client.obj.write(b"r" * (4 * MAX_HANDSHAKE_BYTES))
    assert server.receive(finished + client.outgoing.read()) == b"r" * (4 * MAX_HANDSHAKE_BYTES)
    assert server.handshaken


def test_garbage_after_the_hello_fails_the_session(server_ctx: ssl.SSLContext) -> None:
    server = TlsSession(server_ctx, now=0.0)
    hello = _Client(client_context()).step()
    with pytest.raises(TlsError, match="handshake failed: "):
        server.receive(hello + b"\x00garbage" * 100)
    assert _record_types(server.take_output())[0] == 0x16  # its hello was answered before the garbage


def test_a_handshake_may_not_send_without_bound(server_ctx: ssl.SSLContext) -> None:
    server = TlsSession(server_ctx, now=0.0)
    # A ClientHello announcing 131,000 bytes (OpenSSL would wait for all of them), in full records.
    message = b"\x01" + (131_000).to_bytes(3, "big") + b"\x03\x03" + b"\x00" * 131_000
    with pytest.raises(TlsError, match=f"more than {MAX_HANDSHAKE_BYTES}"):
        for pos in range(0, len(message), 16384):
            chunk = message[pos : pos + 16384]
            server.receive(b"\x16\x03\x01" + len(chunk).to_bytes(2, "big") + chunk)
    assert server.handshake_bytes <= MAX_HANDSHAKE_BYTES + 16384 + 5


# ---------------------------------------------------------------------------
# the gate


@pytest.fixture
def make_conn() -> Iterator[Callable[[int], Connection]]:
    """Reactor connections (on socketpairs nothing is sent over) as a TLS server's reactor makes them."""
    socks: list[socket.socket] = []

    def make(conn_id: int) -> Connection:
        ours, theirs = socket.socketpair()
        socks.extend((ours, theirs))
        conn = Connection(conn_id, ours, "peer", 1 << 20, 0.0)
        conn.tls = Hello()
        return conn

    yield make
    for sock in socks:
        sock.close()


def test_the_gate_applies_each_mode(server_ctx: ssl.SSLContext, make_conn: Callable[[int], Connection]) -> None:
    hello = _Client(client_context()).step()
    frame = b"\x00\x00\x00\x10" + b"\x00" * 16
    for mode, plain_ok, tls_ok in (("disabled", True, False), ("permissive", True, True), ("enforcing", False, True)):
        gate = TlsGate(mode, server_ctx)
        conn = make_conn(1)
        if plain_ok:
            assert gate.receive(conn, frame, 0.0) == (frame, b"")
            assert conn.tls is None  # plaintext from now on: no more TLS work for it
        else:
            with pytest.raises(TlsRefused, match="plaintext on a TLS-only port"):
                gate.receive(conn, frame, 0.0)
        conn = make_conn(2)
        if tls_ok:
            plain, out = gate.receive(conn, hello, 0.0)
            assert plain == b"" and out[:1] == b"\x16"  # the server's hello
            assert isinstance(conn.tls, TlsSession)
        else:
            with pytest.raises(TlsRefused, match="tls.server.mode=disabled"):
                gate.receive(conn, hello, 0.0)


def test_one_byte_is_not_enough_to_decide(server_ctx: ssl.SSLContext, make_conn: Callable[[int], Connection]) -> None:
    gate = TlsGate("permissive", server_ctx)
    conn = make_conn(1)
    assert gate.receive(conn, b"\x16", 0.0) == (b"", b"")
    assert isinstance(conn.tls, Hello)
    assert gate.receive(conn, b"\x00\x00\x10", 0.0) == (b"\x16\x00\x00\x10", b"")
    assert conn.tls is None


def test_stalled_handshakes_are_found(server_ctx: ssl.SSLContext, make_conn: Callable[[int], Connection]) -> None:
    gate = TlsGate("permissive", server_ctx)
    hello = _Client(client_context()).step()
    slow, done = make_conn(1), make_conn(2)
    gate.receive(slow, hello[:20], 100.0)
    gate.receive(done, b"\x00\x00\x00\x10", 100.0)
    assert gate.stalled([slow, done], 100.0 + HANDSHAKE_TIMEOUT - 1) == []
    found = gate.stalled([slow, done], 100.0 + HANDSHAKE_TIMEOUT + 1)
    assert [conn for conn, _ in found] == [slow]
    assert "not completed within" in found[0][1].message


def test_new_sessions_per_turn_are_bounded_and_the_rest_wait_a_turn(
    server_ctx: ssl.SSLContext, make_conn: Callable[[int], Connection]
) -> None:
    gate = TlsGate("permissive", server_ctx)
    hello = _Client(client_context()).step()
    conns = [make_conn(i) for i in range(2 * HANDSHAKES_PER_TURN)]
    gate.new_turn()
    answered = [gate.receive(conn, hello, 0.0)[1] != b"" for conn in conns]
    assert answered == [True] * HANDSHAKES_PER_TURN + [False] * HANDSHAKES_PER_TURN
    waiting = conns[HANDSHAKES_PER_TURN:]
    assert all(conn.busy and isinstance(conn.tls, Hello) for conn in waiting)  # parked, hello kept
    plain = make_conn(99)
    assert gate.receive(plain, b"\x00\x00\x00\x10", 0.0)[0] == b"\x00\x00\x00\x10"  # plaintext never waits
    assert gate.new_turn() == waiting and not any(conn.busy for conn in waiting)
    assert all(gate.receive(conn, b"", 0.0)[1][:1] == b"\x16" for conn in waiting)
    assert gate.new_turn() == []


async def test_the_test_mode_certificate_is_made_once_for_the_waiting(make_conn: Callable[[int], Connection]) -> None:
    made: list[int] = []

    def make() -> ssl.SSLContext:
        made.append(1)
        return self_signed_context()

    gate = TlsGate("permissive", None, make_context=make)
    hello = _Client(client_context()).step()
    first, second = make_conn(1), make_conn(2)
    assert gate.receive(first, hello, 0.0) == (b"", b"")
    assert first.busy and gate.start_preparing()
    assert gate.receive(second, hello, 0.0) == (b"", b"")
    assert not gate.start_preparing()  # already under way
    assert await gate.prepare() == [first, second]
    assert made == [1] and not first.busy
    plain, out = gate.receive(first, b"", 0.0)  # the hello it sent while waiting is answered now
    assert out[:1] == b"\x16"


async def test_a_failed_test_mode_certificate_refuses_tls_only(make_conn: Callable[[int], Connection]) -> None:
    def broken() -> ssl.SSLContext:
        raise OSError("no entropy today")

    gate = TlsGate("permissive", None, make_context=broken)
    hello = _Client(client_context()).step()
    conn = make_conn(1)
    gate.receive(conn, hello, 0.0)
    assert gate.start_preparing()
    await gate.prepare()
    with pytest.raises(TlsRefused, match="no TLS certificate .*no entropy today"):
        gate.receive(conn, b"", 0.0)
    plain_conn = make_conn(2)
    assert gate.receive(plain_conn, b"\x00\x00\x00\x10", 0.0)[0] == b"\x00\x00\x00\x10"


def _record_types(data: bytes) -> list[int]:
    types, pos = [], 0
    while pos + 5 <= len(data):
        types.append(data[pos])
        pos += 5 + int.from_bytes(data[pos + 3 : pos + 5], "big")
    return types


def _write_pair(tmp_path: Path, name: str = "server") -> tuple[Path, Path]:
    cert_pem, key_pem = self_signed_pem()
    cert, key = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    cert.write_bytes(cert_pem)
    key.write_bytes(key_pem)
    return cert, key
