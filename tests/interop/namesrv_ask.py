"""Ask a NameServer (ours or Java's) over our own remoting client, read the answers, and wait
for an answer to change (bounded: a test waits for an event, never for a fixed time)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio

from remoting import requests as rq
from remoting.bodies import ClusterInfo, TopicRouteData
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.transport import connect


async def ask(addr: str, req: RemotingCommand, timeout: float = 10.0) -> RemotingCommand:
    async with connect(addr, connect_timeout=timeout) as client:
        return await client.invoke(req, timeout)


async def cluster_info(addr: str) -> ClusterInfo:
    resp = await ask(addr, rq.cluster_info())
    assert resp.code == ResponseCode.SUCCESS, resp
    return ClusterInfo.decode(resp.body)


async def route(addr: str, topic: str) -> TopicRouteData | None:
    resp = await ask(addr, rq.get_route(topic))
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert resp.code == ResponseCode.SUCCESS, resp
    return TopicRouteData.decode(resp.body)


async def broker_addrs(addr: str, broker_name: str) -> dict[int, str]:
    """brokerId -> address of one broker name in the NameServer's cluster info ({} when absent)."""
    data = (await cluster_info(addr)).broker_addr_table.get(broker_name)
    return dict(data.broker_addrs) if data is not None else {}


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Poll until ``check`` holds; fail with ``what`` after ``timeout`` seconds."""
    with trio.move_on_after(timeout):
        while not await check():
            await trio.sleep(0.25)
        return
    pytest.fail(f"not within {timeout:.0f} s: {what}")
