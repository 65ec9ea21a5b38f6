"""TLS on real ``mqnamesrv`` and ``mqbroker-stub`` processes over loopback TCP (issue 19, item 4).

Each ``tls.server.mode`` against plaintext and TLS clients of our own
(``remoting.transport``, ``simclient``'s pool, a broker stub registering),
certificate files given or made in test mode, verification with a trust
certificate, start-up errors, and hostile handshakes.
"""

from __future__ import annotations

import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import trio

from remoting import requests as rq
from remoting.bodies import ClusterInfo, DataVersion, TopicConfig
from remoting.codec import FrameDecoder, encode
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from security.tls_context import client_context, self_signed_pem
from server_runtime.tls_gate import HANDSHAKE_TIMEOUT, HANDSHAKES_PER_TURN
from remoting.transport import ConnectError, RemotingError, connect
from simclient.load import LoadSpec, run_load
from simclient.pool import ClientPool
from simclient.producer_options import ProducerOptions
from remoting.codes import RequestCode
from remoting.command import request
from tests.broker_wire import create_topic, props_5x, send_v2, socket_call
from tests.peers import ADMIN, USER, write_accounts
from tests.procs import NamesrvProcess

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

ENFORCING = {"tls.server.mode": "enforcing"}
DISABLED = {"tls.server.mode": "disabled"}
PLAINTEXT_REFUSED = "plaintext on a TLS-only port (tls.server.mode=enforcing)"


def _addr(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


async def _call(addr: str, req: RemotingCommand, tls: ssl.SSLContext | None = None) -> RemotingCommand:
    async with connect(addr, tls=tls, connect_timeout=10.0) as client:
        return await client.invoke(req, 10.0)


async def _eventually_true(check, timeout: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    deadline = trio.current_time() + timeout
    while not await check():
        assert trio.current_time() < deadline, "condition not reached"
        await trio.sleep(0.1)


def _write_pair(directory: Path, name: str, password: bytes | None = None) -> tuple[Path, Path]:
    cert_pem, key_pem = self_signed_pem()
    if password is not None:
        from cryptography.hazmat.primitives import serialization

        key = serialization.load_pem_private_key(key_pem, None)
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password),
        )
    cert, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert.write_bytes(cert_pem)
    key_path.write_bytes(key_pem)
    return cert, key_path


def _client_hello() -> bytes:
    """The first flight of a real TLS client."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = client_context().wrap_bio(incoming, outgoing)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def _closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes ``sock`` within ``timeout`` (whatever it sends first is read away)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


# ---------------------------------------------------------------------------
# the three modes


async def test_a_permissive_port_serves_plaintext_and_tls_clients_at_once(start_namesrv) -> None:
    ns = start_namesrv()  # Java's defaults: permissive, test mode
    tls = client_context()
    answers: dict[str, list[int]] = {"plain": [], "tls": []}

    async def client(kind: str, ctx: ssl.SSLContext | None) -> None:
        async with connect(ns.addr, tls=ctx, connect_timeout=10.0) as conn:
            for _ in range(50):
                answers[kind].append((await conn.invoke(rq.cluster_info(), 10.0)).code)
                await trio.sleep(0)

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(client, "plain", None)
            nursery.start_soon(client, "tls", tls)
    assert answers == {"plain": [ResponseCode.SUCCESS] * 150, "tls": [ResponseCode.SUCCESS] * 150}
    # one state behind both: what a plaintext client writes, a TLS client reads
    assert (await _call(ns.addr, rq.put_kv("NS", "k", "v"))).code == ResponseCode.SUCCESS
    got = await _call(ns.addr, rq.get_kv("NS", "k"), tls)
    assert (got.code, got.ext("value")) == (ResponseCode.SUCCESS, "v")
    assert "made a self-signed certificate" in ns.log()
    assert "closing connection" not in ns.log()


async def test_an_enforcing_port_refuses_plaintext_with_one_line_and_serves_tls(start_namesrv) -> None:
    ns = start_namesrv(**ENFORCING)
    for _ in range(5):
        with pytest.raises(RemotingError, match="closed by peer|connection lost"):
            await _call(ns.addr, rq.cluster_info())
    resp = await _call(ns.addr, rq.cluster_info(), client_context())
    assert resp.code == ResponseCode.SUCCESS
    assert ns.log().count(PLAINTEXT_REFUSED) == 1  # the other four are counted into a summary line


async def test_a_disabled_port_closes_a_tls_hello_with_one_line(start_namesrv) -> None:
    ns = start_namesrv(**DISABLED)
    with pytest.raises(ConnectError, match="TLS handshake with .* failed: the server closed the connection"):
        await _call(ns.addr, rq.cluster_info(), client_context())
    assert (await _call(ns.addr, rq.cluster_info())).code == ResponseCode.SUCCESS
    assert ns.log().count("TLS handshake on a port without TLS (tls.server.mode=disabled)") == 1
    assert "self-signed" not in ns.log()  # no certificate is made for a port without TLS


# ---------------------------------------------------------------------------
# certificates


async def test_our_client_verifies_the_server_with_a_trust_cert(start_namesrv, tmp_path: Path) -> None:
    cert, key = _write_pair(tmp_path, "server", password=b"changeit")
    other, _ = _write_pair(tmp_path, "other")
    ns = start_namesrv(
        **ENFORCING,
        **{
            "tls.test.mode.enable": "false",
            "tls.server.certPath": cert,
            "tls.server.keyPath": key,
            "tls.server.keyPassword": "changeit",
        },
    )
    trusted = client_context(verify=True, trust_cert_path=str(cert))
    assert (await _call(ns.addr, rq.cluster_info(), trusted)).code == ResponseCode.SUCCESS
    with pytest.raises(ConnectError, match="certificate verify failed"):
        await _call(ns.addr, rq.cluster_info(), client_context(verify=True, trust_cert_path=str(other)))
    # Java's clients do not verify by default; neither do ours
    assert (await _call(ns.addr, rq.cluster_info(), client_context())).code == ResponseCode.SUCCESS
    # the key password is in the file, not in what GET_NAMESRV_CONFIG shows
    shown = (await _call(ns.addr, rq.get_namesrv_config(), trusted)).body.decode()
    assert "tls.server.keyPassword=******" in shown and "changeit" not in shown
    assert "self-signed" not in ns.log()


def _bad_start(program: list[str], config: Path, lines: str) -> subprocess.CompletedProcess[str]:
    config.write_text(lines)
    return subprocess.run(program + ["-c", str(config)], capture_output=True, text=True, timeout=60)


def test_certificate_errors_at_start_are_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    cert, key = _write_pair(tmp_path, "good")
    _, other_key = _write_pair(tmp_path, "other")
    _, locked_key = _write_pair(tmp_path, "locked", password=b"right")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    base = f"listenPort=0\nbindAddress=127.0.0.1\nkvConfigPath={tmp_path}/kv.json\ntls.test.mode.enable=false\n"
    cases = [
        (f"tls.server.certPath={tmp_path}/missing.pem\ntls.server.keyPath={key}\n", "missing.pem does not exist"),
        (f"tls.server.certPath={garbage}\ntls.server.keyPath={key}\n", "cannot be used together"),
        (f"tls.server.certPath={cert}\ntls.server.keyPath={other_key}\n", "cannot be used together"),
        (f"tls.server.certPath={cert}\ntls.server.keyPath={locked_key}\ntls.server.keyPassword=wrong\n",
         "cannot be used together"),
        ("", "tls.server.certPath is not set"),
        ("tls.server.mode=sometimes\n", "tls.server.mode='sometimes' is not one of"),
    ]
    namesrv = [sys.executable, "-m", "namesrv.cli"]
    for i, (lines, message) in enumerate(cases):
        out = _bad_start(namesrv, tmp_path / f"ns-{i}.properties", base + lines)
        assert out.returncode != 0, (lines, out)
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("mqnamesrv: "), (lines, out.stderr)
        assert message in out.stderr, (lines, out.stderr)
    out = _bad_start(
        [sys.executable, "-m", "broker_stub.cli"], tmp_path / "broker.properties",
        f"listenPort=0\nbrokerIP1=127.0.0.1\ntls.test.mode.enable=false\ntls.server.certPath={tmp_path}/nope.pem\n"
        f"tls.server.keyPath={key}\n",
    )
    assert out.returncode != 0
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("mqbroker-stub: ")
    assert "nope.pem does not exist" in out.stderr


# ---------------------------------------------------------------------------
# the broker stub: registering over TLS, serving producers over TLS


async def _registered(ns: str, name: str) -> bool:
    resp = await _call(ns, rq.cluster_info(), client_context())
    return resp.code == ResponseCode.SUCCESS and name in ClusterInfo.decode(resp.body).broker_addr_table


async def test_brokers_register_over_tls_with_an_enforcing_namesrv(start_namesrv, start_broker) -> None:
    ns = start_namesrv(**ENFORCING)
    # tls.enable=true, as -Dtls.enable=true for a Java broker; and an enforcing broker, which uses
    # TLS for its own connections by default (Java's BrokerStartup does the same)
    start_broker("a", brokerName="broker-a", namesrvAddr=ns.addr, **{"tls.enable": "true"})
    start_broker("b", brokerName="broker-b", namesrvAddr=ns.addr, **ENFORCING)
    plain = start_broker("c", brokerName="broker-c", namesrvAddr=ns.addr)
    await _eventually_true(lambda: _registered(ns.addr, "broker-a"))
    await _eventually_true(lambda: _registered(ns.addr, "broker-b"))
    assert not await _registered(ns.addr, "broker-c")
    assert "register to" in plain.log() and PLAINTEXT_REFUSED in ns.log()


async def test_producers_send_to_an_enforcing_broker_over_tls(start_broker) -> None:
    broker = start_broker(**ENFORCING)
    body = b"over TLS " * 1000
    async with ClientPool(tls=client_context()) as pool:
        for i in range(20):
            resp = await pool.invoke(broker.addr, send_v2("TlsTopic", body + bytes([i]), props_5x(WAIT="true")), 10.0)
            assert resp.code == ResponseCode.SUCCESS, resp
    with pytest.raises(RemotingError):
        await _call(broker.addr, send_v2("TlsTopic", b"plain", props_5x(WAIT="true")))
    assert broker.log().count(PLAINTEXT_REFUSED) == 1


async def test_simulated_producers_run_over_tls_against_an_enforcing_cluster(start_namesrv, start_broker) -> None:
    ns = start_namesrv(**ENFORCING)
    start_broker("a", brokerName="broker-a", namesrvAddr=ns.addr, **ENFORCING)
    await _eventually_true(lambda: _registered(ns.addr, "broker-a"))
    spec = LoadSpec(producers=5, topics=("TlsLoad",), rate_per_producer=0, messages_per_producer=10, duration=30)
    options = ProducerOptions(namesrv_addrs=(ns.addr,), use_tls=True)
    summary = await run_load(options, spec, lambda record: None)
    assert (summary.sends, summary.ok, summary.by_broker) == (50, 50, {"broker-a": 50})
    # the same producers without TLS get no route and store nothing
    plain = await run_load(ProducerOptions(namesrv_addrs=(ns.addr,), send_timeout=1.0, mq_client_api_timeout=1.0),
                           LoadSpec(producers=1, topics=("TlsLoad",), rate_per_producer=0, messages_per_producer=2,
                                    duration=5), lambda record: None)
    assert plain.ok == 0


async def test_tls_and_accounts_together_brokers_sign_over_tls_and_a_slave_replicates(
    start_namesrv, start_broker, tmp_path: Path
) -> None:
    """Enforcing ports with accounts on: the brokers' own connections are TLS and signed at once."""
    accounts = write_accounts(tmp_path / "plain_acl.yml")
    ns = start_namesrv(**ENFORCING, aclEnable=True, aclConfigPath=accounts)
    keys = {"aclEnable": True, "aclConfigPath": accounts, "accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key}
    master = start_broker("m", brokerName="broker-a", namesrvAddr=ns.addr, **ENFORCING, **keys)
    slave = start_broker("s", brokerName="broker-a", brokerId=1, namesrvAddr=ns.addr, **ENFORCING, **keys)
    start_broker("u", brokerName="broker-unsigned", namesrvAddr=ns.addr, **ENFORCING)  # TLS, no keys
    tls = client_context()

    async def registered() -> bool:
        async with connect(ns.addr, tls=tls, credentials=USER, connect_timeout=10.0) as c:
            info = ClusterInfo.decode((await c.invoke(rq.cluster_info(), 10.0)).body)
        return set(info.broker_addr_table) == {"broker-a"} and set(info.broker_addr_table["broker-a"].broker_addrs) == {
            0, 1}

    await _eventually_true(registered)
    async with connect(master.addr, tls=tls, credentials=ADMIN, connect_timeout=10.0) as producer:
        assert (await producer.invoke(create_topic("Orders", queues=1), 10.0)).code == ResponseCode.SUCCESS
        for i in range(5):
            resp = await producer.invoke(send_v2("Orders", b"m%d" % i, props_5x(WAIT="true"), queue_id=0), 10.0)
            assert resp.code == ResponseCode.SUCCESS, resp

    async def copied() -> bool:
        async with connect(slave.addr, tls=tls, credentials=USER, connect_timeout=10.0) as c:
            resp = await c.invoke(request(RequestCode.GET_MAX_OFFSET, {"topic": "Orders", "queueId": 0}), 10.0)
        return resp.code == ResponseCode.SUCCESS and resp.ext("offset") == "5"

    await _eventually_true(copied, timeout=30.0)
    assert not await _registered_signed(ns.addr, "broker-unsigned", tls)
    assert PLAINTEXT_REFUSED not in ns.log() + master.log() + slave.log()


async def _registered_signed(ns: str, name: str, tls: ssl.SSLContext) -> bool:
    async with connect(ns, tls=tls, credentials=USER, connect_timeout=10.0) as c:
        return name in ClusterInfo.decode((await c.invoke(rq.cluster_info(), 10.0)).body).broker_addr_table


# ---------------------------------------------------------------------------
# hostile handshakes


def _open_fds(ns: NamesrvProcess) -> int:
    assert ns.proc is not None
    return psutil.Process(ns.proc.pid).num_fds()


async def test_stalled_and_garbage_handshakes_neither_hold_the_loop_nor_leak(start_namesrv) -> None:
    ns = start_namesrv()
    addr = _addr(ns.addr)
    tls = client_context()
    assert (await _call(ns.addr, rq.cluster_info(), tls)).code == ResponseCode.SUCCESS  # certificate made
    base_fds = _open_fds(ns)
    hello = _client_hello()
    stalled = [socket.create_connection(addr) for _ in range(40)]
    garbage = [socket.create_connection(addr) for _ in range(40)]
    try:
        for sock in stalled:
            sock.sendall(hello[:40])  # part of a hello, then nothing
        for sock in garbage:
            sock.sendall(hello + b"\x17\x03\x03\x00\x10" + b"\xee" * 4000)
        # both kinds of client keep being served meanwhile
        for ctx in (None, tls, None, tls):
            assert (await _call(ns.addr, rq.cluster_info(), ctx)).code == ResponseCode.SUCCESS
        assert all(_closed_by_server(sock, 10.0) for sock in garbage)
        # the stalled ones are closed once the handshake timeout passes (checked once a second)
        assert all(_closed_by_server(sock, HANDSHAKE_TIMEOUT + 20.0) for sock in stalled)
    finally:
        for sock in stalled + garbage:
            sock.close()
    deadline = time.monotonic() + 10
    while _open_fds(ns) > base_fds and time.monotonic() < deadline:
        await trio.sleep(0.1)
    assert _open_fds(ns) <= base_fds
    log = ns.log()
    assert log.count("TLS handshake failed") == 1  # 40 garbage handshakes: one line, the rest counted
    assert (await _call(ns.addr, rq.cluster_info(), tls)).code == ResponseCode.SUCCESS


def test_a_burst_of_new_tls_connections_is_answered_over_turns(start_namesrv) -> None:
    ns = start_namesrv(**ENFORCING)
    addr = _addr(ns.addr)
    ctx = client_context()
    warm = ctx.wrap_socket(socket.create_connection(addr, timeout=30))  # the test-mode certificate is made
    warm.close()
    count = 3 * HANDSHAKES_PER_TURN
    clients = []
    for _ in range(count):
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        sock = socket.create_connection(addr, timeout=30)
        clients.append((sock, ctx.wrap_bio(incoming, outgoing), incoming, outgoing))
    assert ns.proc is not None
    ns.proc.send_signal(signal.SIGSTOP)  # so that every hello is there at the server's next turn
    try:
        for sock, obj, _, outgoing in clients:
            with pytest.raises(ssl.SSLWantReadError):
                obj.do_handshake()
            sock.sendall(outgoing.read())
    finally:
        ns.proc.send_signal(signal.SIGCONT)
    # Every hello is answered with nothing else sent: the ones past a turn's quota are not
    # left waiting for some other event on the server.
    try:
        for sock, obj, incoming, outgoing in clients:
            sock.settimeout(20)
            while True:
                incoming.write(sock.recv(65536))
                try:
                    obj.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    continue
        for sock, obj, incoming, outgoing in clients:
            obj.write(encode(rq.cluster_info()))
            sock.sendall(outgoing.read())
            decoder = FrameDecoder()
            got: list[RemotingCommand] = []
            while not got:
                incoming.write(sock.recv(65536))
                try:
                    got = decoder.feed(obj.read(65536))
                except ssl.SSLWantReadError:
                    continue
            assert got[0].code == ResponseCode.SUCCESS
    finally:
        for sock, *_ in clients:
            sock.close()


def test_a_tls_client_that_never_reads_stops_being_read(start_namesrv) -> None:
    ns = start_namesrv(**ENFORCING)
    addr = _addr(ns.addr)
    ctx = client_context()
    broker = ctx.wrap_socket(socket.create_connection(addr, timeout=30))
    resp = socket_call(broker, rq.register_broker(
        cluster="C", broker_name="b", broker_addr="127.0.0.1:1", broker_id=0,
        topics=[TopicConfig(f"Topic-{i:07d}", 4, 4, 6) for i in range(20000)],
        data_version=DataVersion(1, 1), compressed=True,
    ), timeout=30.0)
    assert resp.code == ResponseCode.SUCCESS
    assert ns.proc is not None
    server = psutil.Process(ns.proc.pid)
    try:
        time.sleep(0.5)
        base = server.memory_info().rss
        sock = ctx.wrap_socket(socket.create_connection(addr, timeout=30))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        frames = []
        for opaque in range(300):  # ~100 MB of answers asked for
            req = rq.all_topics()
            req.opaque = opaque
            frames.append(encode(req))
        sock.sendall(b"".join(frames))
        peak, ends = 0, time.monotonic() + 1.5
        while time.monotonic() < ends:
            peak = max(peak, server.memory_info().rss)
            time.sleep(0.02)
        assert peak - base < 25 * 1024 * 1024, f"RSS grew {(peak - base) >> 20} MiB"
        decoder = FrameDecoder()
        got: list[RemotingCommand] = []
        deadline = time.monotonic() + 60
        while len(got) < 300 and time.monotonic() < deadline:
            data = sock.recv(1 << 20)
            assert data
            got.extend(decoder.feed(data))
        assert [r.opaque for r in got] == list(range(300))
        assert all(r.code == ResponseCode.SUCCESS for r in got)
        sock.close()
    finally:
        broker.close()
