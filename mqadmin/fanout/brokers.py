"""What the cluster says, independently of the producers: its brokers and what they stored.

Before a run the driver asks a NameServer for the brokers (an unreachable
NameServer fails here, in one line, before Spark is started), makes sure
the fan-out topics exist on every master, and reads each master's queue
offsets of those topics. After the run it reads them again: the
difference is what each broker itself counted as stored, to be compared
with the sends the producers saw succeed. Per-topic offsets (not the
broker's all-topic put total) keep other traffic on a shared cluster out of
the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from mqadmin.client import AdminClient
from mqadmin.client.errors import AdminError, NotFound
from mqadmin.client.security import UNSIGNED, ClientSecurity
from mqadmin.fanout import FanoutError
from remoting.bodies import TopicConfig
from remoting.codes import MASTER_ID
from server_runtime.climain import first_of

#: Every read of the brokers is bounded by this (s); a silent broker counts as unreachable.
PROBE_TIMEOUT = 3.0
#: Cap on offset requests per poll during a run (topics x queues x brokers).
MAX_POLL_REQUESTS = 2000


@dataclass
class ClusterView:
    """The brokers the NameServer listed before the run, and each topic's queue count per master."""

    namesrv_addrs: list[str]
    masters: dict[str, str]  # broker name -> master address
    queues: dict[tuple[str, str], int] = field(default_factory=dict)  # (broker, topic) -> queue count
    security: ClientSecurity = UNSIGNED  # how every later read of the brokers signs

    @property
    def requests(self) -> int:
        return sum(self.queues.values())


@dataclass
class StoredCount:
    """One broker's count of stored fan-out messages (sum of max offsets of the topics' queues)."""

    before: int | None = None
    after: int | None = None
    last_seen: int | None = None  # the latest successful reading (a killed broker's final word)
    last_seen_at: float | None = None  # s since the start barrier
    error: str | None = None

    @property
    def delta(self) -> int | None:
        end = self.after if self.after is not None else self.last_seen
        return None if end is None or self.before is None else end - self.before

    @property
    def reachable_at_end(self) -> bool:
        return self.after is not None


async def _probe(addrs: list[str], topics: tuple[str, ...], create: bool, queues: int, wait: float,
                 security: ClientSecurity) -> ClusterView:
    client = AdminClient(addrs, timeout=PROBE_TIMEOUT, security=security)
    async with client.pooled():
        info = await client.cluster_info()
        masters = {
            name: bd.broker_addrs[MASTER_ID]
            for name, bd in sorted(info.broker_addr_table.items())
            if MASTER_ID in bd.broker_addrs
        }
        if not masters:
            raise FanoutError(f"no master broker is registered with the NameServer(s) {';'.join(addrs)}")
        view = ClusterView(addrs, masters, security=security)
        if create:
            await _ensure_topics(client, view, topics, queues, wait)
        for topic in topics:
            try:
                route = await client.topic_route(topic)
            except NotFound:
                route = None
            for name in masters:
                qd = next((q for q in route.queue_datas if q.broker_name == name), None) if route else None
                # A topic not in the route yet (auto-created later) may still get TBW102-fallback sends.
                view.queues[(name, topic)] = max(qd.read_queue_nums, qd.write_queue_nums) if qd else 4
        return view


async def _ensure_topics(client: AdminClient, view: ClusterView, topics: tuple[str, ...], queues: int, wait: float) -> None:
    """Create topics missing from some master's route, then wait (bounded) until every NameServer routes them."""
    for topic in topics:
        try:
            route = await client.topic_route(topic)
            have = {q.broker_name for q in route.queue_datas}
        except NotFound:
            have = set()
        missing = [addr for name, addr in view.masters.items() if name not in have]
        if not missing:
            continue
        failed = [r.error for r in await client.create_topic_on(missing, TopicConfig(topic, queues, queues)) if not r.ok]
        if failed:
            raise FanoutError(f"cannot create topic {topic}: {failed[0]}")
    with trio.move_on_after(wait):
        while True:
            pending = []
            for topic in topics:
                for result in await client.topic_routes_everywhere(topic):
                    names = {q.broker_name for q in result.value.queue_datas} if result.ok else set()
                    if not set(view.masters) <= names:
                        pending.append(topic)
            if not pending:
                return
            await trio.sleep(0.1)
    # Brokers register new topics on their next registration; producers fall back to TBW102 meanwhile.


def probe(addrs: list[str], topics: tuple[str, ...], *, create: bool = True, queues: int = 8,
          wait: float = 10.0, security: ClientSecurity = UNSIGNED) -> ClusterView:
    """Brokers and topic queues of the cluster (creating missing topics); FanoutError if unreachable."""
    try:
        return trio.run(_probe, addrs, topics, create, queues, wait, security)
    except BaseException as exc:
        found = first_of(exc, FanoutError)
        if found is not None:
            raise found from None
        admin = first_of(exc, AdminError)
        if admin is not None:
            raise FanoutError(f"cannot reach the NameServer(s) {';'.join(addrs)}: {admin}") from None
        raise


async def _read(view: ClusterView, topics: tuple[str, ...], timeout: float) -> dict[str, int | str]:
    client = AdminClient([], timeout=timeout, security=view.security)
    out: dict[str, int | str] = {}

    async def one(name: str, addr: str) -> None:
        total = 0
        try:
            for topic in topics:
                for q in range(view.queues.get((name, topic), 0)):
                    total += await client.max_offset(addr, topic, q)
        except AdminError as exc:
            out[name] = str(exc)
            return
        out[name] = total

    with trio.move_on_after(timeout * 2):
        async with client.pooled(), trio.open_nursery() as nursery:
            for name, addr in view.masters.items():
                nursery.start_soon(one, name, addr)
    for name in view.masters:
        out.setdefault(name, f"no answer from {view.masters[name]} within {timeout * 2:g} s")
    return out


def read_counts(view: ClusterView, topics: tuple[str, ...], timeout: float = PROBE_TIMEOUT) -> dict[str, int | str]:
    """Per master: stored messages of ``topics`` (int) or why it could not be read (str)."""
    return trio.run(_read, view, topics, timeout)


class Counter:
    """Before / during / after readings of every master, kept as StoredCount per broker."""

    def __init__(self, view: ClusterView, topics: tuple[str, ...]) -> None:
        self.view = view
        self.topics = topics
        self.counts = {name: StoredCount() for name in view.masters}

    @property
    def pollable(self) -> bool:
        return self.view.requests <= MAX_POLL_REQUESTS

    def _apply(self, readings: dict[str, int | str], now: float, field_name: str | None) -> None:
        for name, value in readings.items():
            c = self.counts[name]
            if isinstance(value, int):
                c.last_seen, c.last_seen_at = value, now
                if field_name is not None:
                    setattr(c, field_name, value)
            elif field_name == "after":
                c.error = value

    def before(self) -> None:
        readings = read_counts(self.view, self.topics)
        bad = {n: v for n, v in readings.items() if not isinstance(v, int)}
        if bad:
            name, why = next(iter(bad.items()))
            raise FanoutError(f"cannot read the queue offsets of broker {name}: {why}")
        self._apply(readings, 0.0, "before")

    def poll(self, now: float, timeout: float = 1.0) -> None:
        """A reading during the run (best effort; keeps a killed broker's last word)."""
        self._apply(read_counts(self.view, self.topics, timeout), now, None)

    def after(self, now: float) -> None:
        self._apply(read_counts(self.view, self.topics), now, "after")
