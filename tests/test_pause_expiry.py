"""Expiry after a pause reads what waits first (issue 20, item 5).

A NameServer stopped (SIGSTOP) for twice its brokers' heartbeat timeout,
while real broker stubs keep registering, must not expire them when it runs
again: their registrations wait in its sockets. Routes are queried without
pause from before the stop until well after it; not one answer may lack a
broker.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import pytest
import trio

from remoting import requests as rq
from remoting.bodies import TopicRouteData
from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from server_runtime.pause import PAUSE_SLACK, paused_for
from remoting.transport import RemotingClient, RemotingError, connect
from tests.procs import NamesrvProcess

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

EXPIRY_MS = 3000
PAUSE_SECONDS = 2 * EXPIRY_MS / 1000.0
BROKERS = ("broker-a", "broker-b", "broker-c")


def test_a_late_wakeup_is_a_pause_and_a_punctual_one_is_not() -> None:
    # time is a parameter: no sleeping here
    assert paused_for(100.0, 105.0, 5.0) == 0.0
    assert paused_for(100.0, 105.0 + PAUSE_SLACK, 5.0) == 0.0  # late within the slack: a busy loop
    assert paused_for(100.0, 130.0, 5.0) == pytest.approx(25.0)  # SIGSTOP for 25 s
    assert paused_for(100.0, 100.2 + 1.5, 0.2, slack=1.0) == pytest.approx(1.5)
    assert paused_for(100.0, 99.0, 5.0) == 0.0  # a clock that did not move forward is no pause


async def route_names(client, topic: str) -> set[str]:  # type: ignore[no-untyped-def]
    resp = await client.invoke(rq.get_route(topic), 60.0)  # answered when the NameServer runs again
    if resp.code != ResponseCode.SUCCESS:
        return set()
    return {b.broker_name for b in TopicRouteData.decode(resp.body).broker_datas}


async def test_brokers_whose_registrations_wait_in_the_sockets_survive_a_pause(
    start_namesrv: Callable[..., NamesrvProcess], start_broker: Callable[..., BrokerProcess]
) -> None:
    # connections idle for 2 s are closed too, as a paused server might wrongly judge them
    ns = start_namesrv(scanNotActiveBrokerInterval=200, brokerChannelExpiredTime=EXPIRY_MS,
                       serverChannelMaxIdleTimeSeconds=2)
    assert ns.proc is not None
    try:
        for name in BROKERS:
            start_broker(name, brokerName=name, namesrvAddr=ns.addr,
                         registerNameServerPeriod=300, registerBrokerTimeoutMills=1000)
        async with connect(ns.addr) as client:
            with trio.fail_after(20):
                while await route_names(client, "TBW102") != set(BROKERS):
                    await trio.sleep(0.05)
            misses: list[tuple[float, set[str]]] = []
            queries = 0
            stopped_at = resumed_at = 0.0

            async def query_until(deadline: float) -> None:
                nonlocal queries
                while time.monotonic() < deadline and queries < 1_000_000:
                    sent = time.monotonic()
                    names = await route_names(client, "TBW102")
                    queries += 1
                    if names != set(BROKERS):
                        misses.append((sent, names))
                    await trio.sleep(0.002)

            async with trio.open_nursery() as nursery:
                end = time.monotonic() + 0.5 + PAUSE_SECONDS + 4.0
                nursery.start_soon(query_until, end)
                await trio.sleep(0.5)
                os.kill(ns.proc.pid, signal.SIGSTOP)
                stopped_at = time.monotonic()
                try:
                    await trio.sleep(PAUSE_SECONDS)
                finally:
                    os.kill(ns.proc.pid, signal.SIGCONT)
                resumed_at = time.monotonic()
        log = ns.log()  # before the brokers stop (their connections closing remove them)
        assert resumed_at - stopped_at >= PAUSE_SECONDS
        assert queries > 50  # the loop kept querying after the resume
        assert misses == [], (f"{len(misses)} of {queries} route queries missed a broker: {misses[:3]}; "
                              f"stopped {stopped_at:.3f}, resumed {resumed_at:.3f}; log:\n{log[-3000:]}")
    finally:
        if ns.proc is not None and ns.proc.poll() is None:
            os.kill(ns.proc.pid, signal.SIGCONT)  # a failed test must not leave it stopped
    assert "stood still" in log, log[-2000:]
    assert "expired" not in log and "removed" not in log, log[-2000:]


async def test_connections_that_kept_sending_during_a_pause_are_not_closed_as_idle(
    start_broker: Callable[..., BrokerProcess]
) -> None:
    """The idle sweep (shared by both servers) reads what waits before it judges a connection idle."""
    broker = start_broker(serverChannelMaxIdleTimeSeconds=2)
    assert broker.proc is not None
    closed: list[str] = []
    answered = 0

    async def keep_asking(client: RemotingClient) -> None:
        nonlocal answered
        for _ in range(10_000):
            if trio.current_time() > end:
                return
            try:
                resp = await client.invoke(request(RequestCode.GET_BROKER_RUNTIME_INFO), 60.0)
            except RemotingError as exc:
                closed.append(str(exc))
                return
            assert resp.code == ResponseCode.SUCCESS
            answered += 1
            await trio.sleep(0.2)

    try:
        async with AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(connect(broker.addr)) for _ in range(8)]
            end = trio.current_time() + 1.0 + 4.0 + 2.0
            async with trio.open_nursery() as nursery:
                for client in clients:
                    nursery.start_soon(keep_asking, client)
                await trio.sleep(1.0)
                os.kill(broker.proc.pid, signal.SIGSTOP)
                try:
                    await trio.sleep(4.0)  # twice the idle limit
                finally:
                    os.kill(broker.proc.pid, signal.SIGCONT)
    finally:
        if broker.proc.poll() is None:
            os.kill(broker.proc.pid, signal.SIGCONT)
    assert closed == []
    assert answered > 8 * 10
