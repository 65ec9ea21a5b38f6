"""When a started local cluster is usable: every NameServer routes TBW102 to every broker, and each
topic created on the masters to every master.

Asked over the wire, the same for every implementation (a Java NameServer answers these requests as
ours does), so it is also how a cluster with Java members is known to be ready.
"""

from __future__ import annotations

from collections.abc import Iterable

import trio

from mqadmin.client import AdminClient
from mqadmin.client.errors import AdminError
from mqadmin.client.security import ClientSecurity
from mqadmin.localcluster.state import ClusterError, ClusterState
from remoting.bodies import TopicConfig, TopicRouteData

#: How long one topic creation may take: a Java broker stores and registers the topic before it answers.
CREATE_TIMEOUT = 5.0


def normal_topic(name: str, queues: int) -> TopicConfig:
    """A topic as a 5.x operator creates one (`updateTopic -a +message.type=NORMAL`, the Dashboard's "Add"):
    without the type, RocketMQ Dashboard 2.x lists it as UNSPECIFIED, which its Topic page hides by
    default, so a local cluster's topics looked missing. 4.x brokers ignore the header."""
    return TopicConfig(name, queues, queues, attributes={"+message.type": "NORMAL"})


async def make_ready(state: ClusterState, topics: tuple[str, ...], queues: int, timeout: float,
                     security: ClientSecurity) -> None:
    """Wait until routable, create ``topics`` on every master, wait until they are routed too."""
    client = AdminClient([p.addr for p in state.namesrvs], timeout=1.0, security=security)
    try:
        await wait_routable(client, state, timeout)
        if topics:
            masters = [p.addr for p in state.brokers if p.broker_id == 0]
            creator = AdminClient([p.addr for p in state.namesrvs], timeout=CREATE_TIMEOUT, security=security)
            for topic in topics:
                await create_topic(creator, masters, normal_topic(topic, queues), timeout)
            await wait_routable(client, state, timeout, topics)
    except AdminError as exc:
        raise ClusterError(str(exc)) from None


async def create_topic(client: AdminClient, masters: list[str], tc: TopicConfig, timeout: float) -> None:
    """Create ``tc`` on every master, asking again those that failed until ``timeout`` (creating is
    idempotent): a Java broker that has just booted on a busy machine can take seconds to answer."""
    pending, error = masters, "no answer"
    with trio.move_on_after(timeout):
        while pending:
            results = await client.create_topic_on(pending, tc)
            failed = [(addr, r.error) for addr, r in zip(pending, results) if not r.ok]
            pending = [addr for addr, _ in failed]
            if failed:
                error = failed[0][1] or error
                await trio.sleep(0.5)
        return
    raise ClusterError(f"cannot create topic {tc.topic_name}: {error}")


async def wait_routable(client: AdminClient, state: ClusterState, timeout: float, topics: Iterable[str] = ()) -> None:
    """Until every NameServer routes TBW102 to every broker of ``state`` and each topic to every master."""
    expected: dict[str, set[int]] = {}
    for p in state.brokers:
        if p.alive():
            expected.setdefault(p.broker_name or "", set()).add(p.broker_id or 0)
    if not expected:
        return
    masters = {name for name, ids in expected.items() if 0 in ids}
    waiting = "TBW102"
    with trio.move_on_after(timeout):
        for topic in ["TBW102", *topics]:
            waiting = topic
            while True:
                results = await client.topic_routes_everywhere(topic)
                if all(r.ok and _routes_all(r.value, expected if topic == "TBW102" else None, masters) for r in results):
                    break
                await trio.sleep(0.05)
        return
    raise ClusterError(f"topic {waiting} not routed to every broker on every NameServer after {timeout:g} s "
                       f"(logs in {state.dir})")


def _routes_all(route: TopicRouteData, expected: dict[str, set[int]] | None, masters: set[str]) -> bool:
    seen = {b.broker_name: set(b.broker_addrs) for b in route.broker_datas}
    if expected is not None and any(not ids <= seen.get(name, set()) for name, ids in expected.items()):
        return False
    return masters <= {q.broker_name for q in route.queue_datas} and all(0 in seen.get(m, set()) for m in masters)
