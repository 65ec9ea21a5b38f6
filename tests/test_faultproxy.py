"""The fault proxy against a real echo server: each fault, heal, the bounds, and hostile input.

One ``mqfaultproxy`` process and two servers (one echoes, one only records) serve the whole module;
each test makes its own paths. Times are only ever bounded from below (a latency of X delays by at
least X); nothing asserts that the busy machine was fast.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import select
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from faultproxy import cli
from faultproxy.client import FaultProxyClient, FaultProxyError, describe_faults
from tests.faultproxy_procs import PROXY, EchoServer, FaultProxyProcess, echo_server, fault_proxy, wait_for

TIMEOUT = 10.0
_names = itertools.count()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultProxyProcess]:
    with fault_proxy(tmp_path_factory.mktemp("faultproxy")) as started:
        yield started


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServer]:
    with echo_server() as server:
        yield server


@pytest.fixture(scope="module")
def recorder() -> Iterator[EchoServer]:
    with echo_server(echo=False) as server:
        yield server


@pytest.fixture
def make_path(proxy: FaultProxyProcess) -> Iterator[Callable[..., tuple[str, int]]]:
    """Create a path (name, listen port) to an upstream; every path made is deleted after the test."""
    made: list[str] = []

    def make(upstream: str, **extra: Any) -> tuple[str, int]:
        name = f"p{next(_names)}"
        body = {"name": name, "listen": "127.0.0.1:0", "upstream": upstream, **extra}
        made.append(name)
        path = proxy.client.call("POST", "/proxies", body)
        return name, int(path["listen"].rsplit(":", 1)[1])

    yield make
    for name in made:
        try:
            proxy.client.delete_path(name)
        except FaultProxyError:
            pass


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    sock.settimeout(TIMEOUT)
    return sock


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise AssertionError(f"connection closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def silent(sock: socket.socket, seconds: float = 0.5) -> bool:
    """Nothing arrives (no byte, no close) within ``seconds``."""
    sock.settimeout(seconds)
    try:
        sock.recv(1)
    except TimeoutError:
        return True
    finally:
        sock.settimeout(TIMEOUT)
    return False


# --- the data path ------------------------------------------------------------------------------


def test_bytes_cross_both_ways_intact_and_are_counted(proxy, echo, make_path) -> None:
    name, port = make_path(echo.addr)
    payload = random.Random(7).randbytes(1_000_000)  # garbage, as far as the proxy knows: any bytes pass
    with connect(port) as sock:
        sock.sendall(payload)
        assert recv_exactly(sock, len(payload)) == payload
        stats = proxy.client.path(name)["stats"]
    assert stats["bytesUpstream"] == stats["bytesDownstream"] == len(payload) and stats["accepted"] == 1


def test_latency_delays_each_way_and_jitter_keeps_the_order(proxy, echo, make_path) -> None:
    name, port = make_path(echo.addr)
    proxy.client.latency(name, 150, jitter=100)
    with connect(port) as sock:
        began = time.monotonic()
        for i in range(20):  # twenty small writes: each may get its own jitter, none may overtake another
            sock.sendall(bytes([i]) * 10)
        got = recv_exactly(sock, 200)
        elapsed = time.monotonic() - began
    assert got == b"".join(bytes([i]) * 10 for i in range(20))
    assert elapsed >= 2 * 0.050  # 150 - 100 ms at least, each way
    proxy.client.heal(name)
    assert proxy.client.path(name)["toxics"] == []


def test_latency_lower_bound_without_jitter(proxy, echo, make_path) -> None:
    name, port = make_path(echo.addr)
    proxy.client.latency(name, 200, stream="upstream")
    with connect(port) as sock:
        began = time.monotonic()
        sock.sendall(b"ping")
        assert recv_exactly(sock, 4) == b"ping"
        assert time.monotonic() - began >= 0.2


def test_bandwidth_limits_the_rate(proxy, echo, make_path) -> None:
    name, port = make_path(echo.addr)
    proxy.client.bandwidth(name, 50, stream="downstream")  # 50,000 bytes a second back to the client
    with connect(port) as sock:
        began = time.monotonic()
        sock.sendall(b"x" * 60_000)
        recv_exactly(sock, 60_000)
        elapsed = time.monotonic() - began
    # the first 100 ms slice may leave at once; the other 55,000 bytes need 1.1 s at 50 KB/s
    assert elapsed >= 1.0
    assert describe_faults(proxy.client.path(name)) == "bandwidth 50 KB/s downstream"


def test_blackhole_upstream_swallows_bytes_and_the_close_then_heal_resets(proxy, recorder, make_path) -> None:
    name, port = make_path(recorder.addr)
    before = len(recorder.conns)
    sock = connect(port)
    sock.sendall(b"before")
    wait_for(lambda: len(recorder.conns) > before and bytes(recorder.conns[before].data) == b"before")
    seen = recorder.conns[before]
    proxy.client.blackhole(name, "upstream")
    sock.sendall(b"during")
    sock.shutdown(socket.SHUT_WR)  # the client closes its side: the server must not learn it
    time.sleep(0.5)
    assert bytes(seen.data) == b"before" and seen.end is None
    assert proxy.client.path(name)["stats"]["droppedUpstream"] == len(b"during")
    # accepting goes on during a blackhole: a new connection is accepted and its bytes dropped too
    with connect(port) as other:
        other.sendall(b"new")
        time.sleep(0.2)
    proxy.client.heal(name)  # the first connection lost bytes: its stream has a hole, so it is reset
    wait_for(lambda: seen.end == "reset", what="the server side reset at heal")
    sock.close()
    with connect(port) as fresh:
        fresh.sendall(b"after")
        wait_for(lambda: any(bytes(c.data) == b"after" for c in recorder.conns), what="bytes after heal")


def test_blackhole_downstream_lets_requests_through_but_no_answer(proxy, echo, make_path) -> None:
    name, port = make_path(echo.addr)
    proxy.client.blackhole(name, "downstream")
    before = len(echo.conns)
    with connect(port) as sock:
        sock.sendall(b"question")
        wait_for(lambda: len(echo.conns) > before and bytes(echo.conns[before].data) == b"question")
        assert silent(sock)  # the echo was swallowed, and the connection stays open
    assert proxy.client.path(name)["stats"]["droppedDownstream"] == len(b"question")


def test_partition_is_silent_both_ways_and_keeps_connections(proxy, echo, make_path) -> None:
    name, port = make_path(echo.addr)
    with connect(port) as sock:
        sock.sendall(b"a")
        assert recv_exactly(sock, 1) == b"a"
        proxy.client.partition(name)
        sock.sendall(b"b")
        assert silent(sock)
        assert proxy.client.path(name)["connections"] == 1
        assert describe_faults(proxy.client.path(name)) == "partition"


def test_refuse_resets_live_connections_refuses_new_ones_and_heal_reopens_the_port(proxy, echo, make_path) -> None:
    name, port = make_path(echo.addr)
    live = connect(port)
    live.sendall(b"x")
    assert recv_exactly(live, 1) == b"x"
    assert proxy.client.refuse(name)["enabled"] is False
    with pytest.raises(ConnectionResetError):
        live.recv(1)
    live.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    assert describe_faults(proxy.client.path(name)) == "refusing"
    proxy.client.heal(name)
    with connect(port) as again:  # the same port, accepting again
        again.sendall(b"y")
        assert recv_exactly(again, 1) == b"y"


def test_reset_now_hits_every_live_connection_and_the_path_keeps_accepting(proxy, echo, make_path) -> None:
    name, port = make_path(echo.addr)
    socks = [connect(port) for _ in range(3)]
    for s in socks:
        s.sendall(b"z")
        assert recv_exactly(s, 1) == b"z"
    assert proxy.client.reset(name) == 3
    for s in socks:
        with pytest.raises(ConnectionResetError):
            s.recv(1)
        s.close()
    with connect(port) as s:
        s.sendall(b"q")
        assert recv_exactly(s, 1) == b"q"


def test_a_close_passes_as_a_half_close(proxy, recorder, make_path) -> None:
    name, port = make_path(recorder.addr)
    before = len(recorder.conns)
    with connect(port) as sock:
        sock.sendall(b"bye")
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(1) == b""  # the recorder closes its side when it sees our EOF
    wait_for(lambda: len(recorder.conns) > before and recorder.conns[before].end == "eof")
    assert bytes(recorder.conns[before].data) == b"bye"


def test_a_dead_upstream_resets_the_client(proxy, make_path) -> None:
    spare = socket.socket()
    spare.bind(("127.0.0.1", 0))
    dead = f"127.0.0.1:{spare.getsockname()[1]}"
    spare.close()  # nothing listens there now
    name, port = make_path(dead)
    with pytest.raises(ConnectionResetError):  # on loopback the reset may even beat connect()'s return
        with connect(port) as sock:
            sock.recv(1)
    assert proxy.client.path(name)["stats"]["upstreamFailed"] == 1


def test_the_connection_limit_of_a_path(proxy, echo, make_path) -> None:
    name, port = make_path(echo.addr, max_connections=2)
    kept = [connect(port) for _ in range(2)]
    for s in kept:
        s.sendall(b"k")
        assert recv_exactly(s, 1) == b"k"
    with pytest.raises(ConnectionResetError):
        with connect(port) as third:
            third.recv(1)
    assert proxy.client.path(name)["stats"]["refusedAtLimit"] == 1
    for s in kept:
        s.close()


def test_backpressure_bounds_what_the_proxy_holds(proxy, make_path) -> None:
    """A client that never reads, behind a slow path: the server's writes block instead of the proxy
    reading all of them into memory."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    name, port = make_path(f"127.0.0.1:{server.getsockname()[1]}")
    proxy.client.bandwidth(name, 100, stream="downstream")
    rss_before = psutil.Process(proxy.proc.pid).memory_info().rss
    client = connect(port)
    conn, _ = server.accept()
    conn.setblocking(False)
    sent, block = 0, b"\0" * 65536
    stuck_since = None
    with client, conn, server:
        while sent < 256 * 1024 * 1024:
            try:
                sent += conn.send(block)
                stuck_since = None
            except BlockingIOError:
                stuck_since = stuck_since or time.monotonic()
                if time.monotonic() - stuck_since > 0.5:
                    break
                time.sleep(0.01)
        rss_after = psutil.Process(proxy.proc.pid).memory_info().rss
    assert sent < 64 * 1024 * 1024, f"the proxy read {sent} bytes the client never took"  # kernel buffers, ~4 MB
    assert rss_after - rss_before < 32 * 1024 * 1024, (rss_before, rss_after)


# --- the control endpoint -------------------------------------------------------------------------


def test_toxiproxy_shaped_resources(proxy, echo) -> None:
    c = proxy.client
    made = c.populate([{"name": "api-a", "listen": "127.0.0.1:0", "upstream": echo.addr},
                       {"name": "api-b", "listen": "127.0.0.1:0", "upstream": echo.addr, "enabled": False}])
    try:
        assert [(p["name"], p["enabled"]) for p in made] == [("api-a", True), ("api-b", False)]
        again = c.populate([{"name": "api-a", "listen": made[0]["listen"], "upstream": echo.addr}])
        assert again[0]["listen"] == made[0]["listen"]  # the same path: kept, not rebound
        assert {"api-a", "api-b"} <= set(c.paths())
        toxic = c.add_toxic("api-a", "latency", "upstream", {"latency": 5})
        assert toxic == {"name": "latency_upstream", "type": "latency", "stream": "upstream", "toxicity": 1.0,
                         "attributes": {"latency": 5, "jitter": 0}}
        changed = c.call("POST", "/proxies/api-a/toxics/latency_upstream", {"attributes": {"jitter": 2}})
        assert changed["attributes"] == {"latency": 5, "jitter": 2}
        assert c.call("GET", "/proxies/api-a/toxics") == [changed]
        with pytest.raises(FaultProxyError, match="already has a toxic named latency_upstream") as dup:
            c.add_toxic("api-a", "latency", "upstream", {"latency": 1})
        assert dup.value.status == 409
        c.remove_toxic("api-a", "latency_upstream")
        c.add_toxic("api-b", "blackhole", "downstream")
        c.call("POST", "/reset")  # Toxiproxy's: every path enabled, every toxic gone
        assert all(p["enabled"] and not p["toxics"] for p in c.paths().values())
        assert c.version()["toxicTypes"] == ["latency", "bandwidth", "blackhole"]
    finally:
        c.delete_path("api-a")
        c.delete_path("api-b")


@pytest.mark.parametrize(("method", "path", "body", "status", "message"), [
    ("GET", "/nothing", None, 404, "no such resource"),
    ("DELETE", "/version", None, 405, "takes GET"),
    ("GET", "/proxies/missing", None, 404, "no path named missing"),
    ("POST", "/proxies", {"name": "bad name", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"}, 400, "path name"),
    ("POST", "/proxies", {"name": "x", "listen": "127.0.0.1:0", "upstream": "nowhere"}, 400, "upstream must be host:port"),
    ("POST", "/proxies", {"name": "x", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:0"}, 400, "must be 1..65535"),
    ("POST", "/proxies", {"name": "x", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1", "colour": 1}, 400,
     "no field 'colour'"),
    ("POST", "/proxies", [1, 2], 400, "a path is a JSON object"),
    ("POST", "/populate", {"name": "x"}, 400, "a JSON list"),
])
def test_bad_requests_get_one_error_each(proxy, method, path, body, status, message) -> None:
    with pytest.raises(FaultProxyError, match=message) as caught:
        proxy.client.call(method, path, body)
    assert caught.value.status == status


@pytest.mark.parametrize(("toxic", "message"), [
    ({"type": "earthquake"}, "toxic type must be one of"),
    ({"type": "latency", "stream": "sideways"}, "stream must be upstream or downstream"),
    ({"type": "latency", "attributes": {"latency": -1}}, "must be 0..600000"),
    ({"type": "latency", "attributes": {"latency": "fast"}}, "must be an integer"),
    ({"type": "bandwidth"}, "needs attributes.rate"),
    ({"type": "blackhole", "toxicity": 0.5}, "toxicity must be 1"),
    ({"type": "blackhole", "attributes": {"depth": 3}}, "has no field 'depth'"),
])
def test_bad_toxics_are_refused(proxy, echo, make_path, toxic, message) -> None:
    name, _ = make_path(echo.addr)
    with pytest.raises(FaultProxyError, match=message) as caught:
        proxy.client.call("POST", f"/proxies/{name}/toxics", toxic)
    assert caught.value.status == 400
    assert proxy.client.path(name)["toxics"] == []


def _raw(addr: str, data: bytes, *, close: bool = True) -> bytes:
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as sock:
        sock.settimeout(TIMEOUT)
        try:
            sock.sendall(data)
            if close:
                sock.shutdown(socket.SHUT_WR)
            out = bytearray()
            while chunk := sock.recv(65536):
                out += chunk
        except OSError:  # the proxy answered and closed before all of it was sent, or reset it
            return bytes(out) if "out" in locals() else b""
        return bytes(out)


def test_garbage_on_the_control_port_is_answered_and_the_proxy_survives(proxy) -> None:
    rng = random.Random(11)
    cases = {
        b"\x00\xff garbage\r\n\r\n": b"400",
        b"GET / HTTP/9.9\r\n\r\n": b"505",
        b"GET /version HTTP/1.1\r\n" + b"X: y\r\n" * 10_000 + b"\r\n": b"431",
        b"POST /proxies HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n": b"413",
        b"POST /proxies HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n": b"501",
        b"POST /proxies HTTP/1.1\r\nContent-Length: 5\r\n\r\n{nope": b"400",
        b"POST /proxies HTTP/1.1\r\nContent-Length: 200000\r\n\r\n" + b"[" * 100_000 + b"]" * 100_000: b"400",
        b"POST /reset HTTP/1.1\r\nOrigin: http://evil.example\r\n\r\n": b"403",
        b"GET /version HTTP/1.1\r\nUser-Agent: Mozilla/5.0\r\n\r\n": b"403",
    }
    for request, status in cases.items():
        answer = _raw(proxy.addr, request)
        assert answer.split(b"\r\n", 1)[0].split(b" ")[1] == status, (request[:60], answer[:200])
    for _ in range(50):
        _raw(proxy.addr, rng.randbytes(rng.randrange(1, 4000)))
    assert proxy.client.version()["version"]
    assert proxy.proc.poll() is None


def test_silent_control_clients_cannot_lock_out_the_others(proxy) -> None:
    """Idle connections past the limit are closed at once; a slow client is cut after its time."""
    host, port = proxy.addr.rsplit(":", 1)
    idle = [socket.create_connection((host, int(port)), timeout=TIMEOUT) for _ in range(20)]
    try:
        closed: set[socket.socket] = set()
        deadline = time.monotonic() + 1.0
        while len(closed) < 4 and time.monotonic() < deadline:
            ready, _, _ = select.select([s for s in idle if s not in closed], [], [], 0.1)
            for sock in ready:
                try:
                    if sock.recv(1) == b"":
                        closed.add(sock)
                except ConnectionResetError:
                    closed.add(sock)
        assert len(closed) == 4  # 20 idle connections, 16 served at once: the other 4 closed unanswered
    finally:
        for sock in idle:
            sock.close()
    wait_for(lambda: _answers(proxy.client), what="the control endpoint answering again")


def _answers(client: FaultProxyClient) -> bool:
    try:
        client.version()
    except FaultProxyError:
        return False
    return True


# --- the program ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "config", "message"), [
    (["--control", "nowhere"], None, "--control must be host:port"),
    (["--bogus"], None, "unrecognized arguments: --bogus"),
    ([], "not json", "is not JSON"),
    ([], json.dumps({"paths": {}}), "paths must be a list"),
    ([], json.dumps({"colour": 1}), "unknown key 'colour'"),
])
def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path, capsys, args, config, message) -> None:
    if config is not None:
        (tmp_path / "c.json").write_text(config)
        args = [*args, "-c", str(tmp_path / "c.json")]
    assert cli.main(args) == 2  # the program's own entry code, in this process
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and message in err, err


def test_the_program_says_bad_arguments_in_one_line() -> None:
    done = subprocess.run([*PROXY, "--control", "127.0.0.1"], capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "mqfaultproxy: --control must be host:port, got '127.0.0.1' (see mqfaultproxy -h)\n"


def test_a_taken_port_or_a_bad_path_is_one_line_and_exit_1(tmp_path: Path, proxy) -> None:
    taken = subprocess.run([*PROXY, "--control", proxy.addr], capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL)
    assert taken.returncode == 1 and taken.stderr.startswith("mqfaultproxy: cannot listen on ")
    assert len(taken.stderr.strip().splitlines()) == 1
    (tmp_path / "c.json").write_text(json.dumps({"paths": [{"name": "x", "listen": proxy.addr,
                                                            "upstream": "127.0.0.1:1"}]}))
    bad = subprocess.run([*PROXY, "--control", "127.0.0.1:0", "-c", str(tmp_path / "c.json")], capture_output=True,
                         text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert bad.returncode == 1 and "path x: cannot listen on" in bad.stderr, bad.stderr


def test_paths_from_the_config_file_are_served_at_boot(tmp_path: Path, echo) -> None:
    (tmp_path / "c.json").write_text(json.dumps({"paths": [{"name": "boot", "listen": "127.0.0.1:0",
                                                            "upstream": echo.addr}]}))
    with fault_proxy(tmp_path / "p", "-c", str(tmp_path / "c.json")) as started:
        port = int(started.client.path("boot")["listen"].rsplit(":", 1)[1])
        with connect(port) as sock:
            sock.sendall(b"boot")
            assert recv_exactly(sock, 4) == b"boot"
    assert started.proc.returncode == 0  # SIGTERM: a clean stop
    assert os.path.exists(started.log_path)
