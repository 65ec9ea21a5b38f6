"""The shared client pool against real NameServer processes over loopback TCP."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
import trio

from remoting import requests as rq
from remoting.codec import FrameDecoder
from remoting.codes import ResponseCode
from simclient import ClientPool
from simclient.pool import ConnectError, RemotingError, RemotingTimeout

if TYPE_CHECKING:
    from tests.procs import NamesrvProcess


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_refused_connection_fails_fast_and_is_retried_on_next_use(
    start_namesrv: Callable[..., NamesrvProcess],
) -> None:
    port = free_port()
    addr = f"127.0.0.1:{port}"
    async with ClientPool(connect_timeout=60.0) as pool:
        with trio.fail_after(30), pytest.raises(ConnectError, match="refused"):  # at once, not after 60 s
            await pool.invoke(addr, rq.get_route("T"), 60.0)
        assert pool.addresses == []  # nothing cached for a failed address
        ns = start_namesrv("late", listenPort=port)
        resp = await pool.invoke(addr, rq.get_route("T"), 2.0)
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        assert (pool.connects, pool.connect_failures) == (2, 1)
        ns.kill()  # the open connection breaks ...
        with pytest.raises(RemotingError):
            for _ in range(50):  # the first request may race the close; the connection then counts as broken
                await pool.invoke(addr, rq.get_route("T"), 2.0)
                await trio.sleep(0.02)
        start_namesrv("again", listenPort=port)
        # ... and the next use reconnects
        assert (await pool.invoke(addr, rq.get_route("T"), 2.0)).code == ResponseCode.TOPIC_NOT_EXIST


async def test_concurrent_first_requests_share_one_connection(namesrv: NamesrvProcess) -> None:
    answers: list[int] = []
    async with ClientPool() as pool:

        async def one() -> None:
            answers.append((await pool.invoke(namesrv.addr, rq.get_route("T"), 3.0)).code)

        async with trio.open_nursery() as nursery:
            for _ in range(500):
                nursery.start_soon(one)
        assert pool.connects == 1
    assert answers == [ResponseCode.TOPIC_NOT_EXIST] * 500


async def test_requests_beyond_the_in_flight_bound_wait_within_their_timeout() -> None:
    """A silent peer (accepts, never answers): 3 slots, so the 4th request cannot even be sent."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        addr = f"127.0.0.1:{listener.getsockname()[1]}"
        outcomes: list[str] = []
        async with ClientPool(max_in_flight=3) as pool:

            async def one(timeout: float) -> None:
                try:
                    await pool.invoke(addr, rq.get_route("T"), timeout)
                    outcomes.append("answer")
                except RemotingTimeout:
                    outcomes.append("timeout")

            start = trio.current_time()
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(one, 0.4)
                await trio.sleep(0.05)
                nursery.start_soon(one, 0.2)  # waits for a slot, times out first
            took = trio.current_time() - start
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(1.0)
            received = b""
            try:
                while chunk := conn.recv(65536):
                    received += chunk
            except TimeoutError:
                pass
    assert outcomes == ["timeout"] * 4
    assert took > 0.35  # the three held their slots for their whole 0.4 s
    assert len(FrameDecoder().feed(received)) == 3  # the fourth never went out


async def test_pool_must_be_entered() -> None:
    pool = ClientPool()
    with pytest.raises(RuntimeError, match="async with"):
        await pool.invoke("127.0.0.1:1", rq.get_route("T"), 0.5)


async def test_a_shorter_deadline_behind_a_longer_one_still_fires_on_time() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        addr = f"127.0.0.1:{listener.getsockname()[1]}"
        took: dict[str, float] = {}
        finished: list[str] = []
        async with ClientPool() as pool:

            async def one(name: str, timeout: float) -> None:
                start = trio.current_time()
                with pytest.raises(RemotingTimeout):
                    await pool.invoke(addr, rq.get_route("T"), timeout)
                took[name] = trio.current_time() - start
                finished.append(name)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(one, "long", 1.5)
                await trio.sleep(0.05)
                nursery.start_soon(one, "short", 0.2)
    assert finished == ["short", "long"]  # not held up behind the 1.5 s deadline
    assert took["short"] >= 0.2 and took["long"] >= 1.5  # neither before its own deadline
