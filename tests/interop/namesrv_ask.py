"""Ask a NameServer (ours or Java's) over our own remoting client, and read the answers."""

from __future__ import annotations

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
