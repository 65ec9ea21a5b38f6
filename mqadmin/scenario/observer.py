"""Watch every NameServer's routes during a scenario and keep each change with its time.

One task per NameServer polls the observed topics every ``interval`` over
its own pooled :class:`~mqadmin.client.AdminClient`, so a dead or slow
NameServer never delays the view of the others. Only changes are stored
(a route summary per NameServer and topic), which keeps a long run small
and makes "the state at time t" a lookup of the last change before t.
A change is stamped with the time its answer arrived: the NameServer
changed no later than that, and no earlier than the previous poll.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from mqadmin.client import AdminClient
from mqadmin.client.security import UNSIGNED, ClientSecurity
from mqadmin.client.errors import AdminError, NotFound
from remoting.bodies import TopicRouteData
from remoting.codes import MASTER_ID, PERM_WRITE

#: One broker group in a route: (broker ids listed, queue perm or -1 when it has no queue entry).
BrokerView = tuple[tuple[int, ...], int]
#: A route as the scenario cares about it; None = the NameServer did not answer.
Summary = dict[str, BrokerView] | None


def summarize(route: TopicRouteData) -> dict[str, BrokerView]:
    perms = {q.broker_name: q.perm for q in route.queue_datas}
    out: dict[str, BrokerView] = {}
    for bd in route.broker_datas:
        out[bd.broker_name] = (tuple(sorted(bd.broker_addrs)), perms.get(bd.broker_name, -1))
    for name, perm in perms.items():
        out.setdefault(name, ((), perm))
    return dict(sorted(out.items()))


def writable(view: BrokerView | None) -> bool:
    """Can a producer send to this group: a master and a write-permitted queue entry."""
    return view is not None and MASTER_ID in view[0] and view[1] >= 0 and bool(view[1] & PERM_WRITE)


def present(view: BrokerView | None) -> bool:
    return view is not None and bool(view[0])


def summary_text(summary: Summary) -> str:
    if summary is None:
        return "unreachable"
    if not summary:
        return "no route"
    parts = []
    for name, (ids, perm) in summary.items():
        flags = "" if writable((ids, perm)) else (" (no master)" if MASTER_ID not in ids else f" (perm {perm})")
        idtext = "" if ids == (0,) else f" ids {','.join(map(str, ids))}"
        parts.append(f"{name}{idtext}{flags}")
    return ", ".join(parts)


def summary_json(summary: Summary) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {name: {"ids": list(ids), "perm": perm, "writable": writable((ids, perm))} for name, (ids, perm) in summary.items()}


def diff_text(before: Summary, after: Summary) -> str:
    """What changed, in a few words (``-broker-a``, ``+broker-b``, ``broker-a perm 6→4``)."""
    if before is None or after is None:
        return summary_text(after) if after is None else f"answers again: {summary_text(after)}"
    out = []
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name), after.get(name)
        if b == a:
            continue
        if a is None:
            out.append(f"-{name}")
        elif b is None:
            out.append(f"+{name}" + ("" if writable(a) else f" ({summary_text({name: a}).split(' (', 1)[-1].rstrip(')')})"))
        else:
            if b[0] != a[0]:
                out.append(f"{name} ids {','.join(map(str, b[0])) or '-'}→{','.join(map(str, a[0])) or '-'}")
            if b[1] != a[1]:
                out.append(f"{name} perm {b[1]}→{a[1]}")
    return ", ".join(out) or "same"


@dataclass(frozen=True)
class RouteEvent:
    t: float  # s since time zero, when the answer showing the change arrived
    namesrv: int
    topic: str
    before: Summary
    after: Summary
    first: bool = False  # the first observation, not a change

    def to_json(self) -> dict[str, Any]:
        return {"t": round(self.t, 4), "namesrv": self.namesrv, "topic": self.topic, "first": self.first,
                "change": "initial" if self.first else diff_text(self.before, self.after),
                "route": summary_json(self.after)}


class Observer:
    """Polls routes; ``state_at(ns, topic, t)`` answers from the stored changes."""

    def __init__(
        self,
        namesrv_addrs: list[str],
        topics: tuple[str, ...],
        *,
        interval: float,
        timeout: float,
        t0: float,
        clock: Callable[[], float] = trio.current_time,
        security: ClientSecurity = UNSIGNED,
    ) -> None:
        self.addrs = list(namesrv_addrs)
        self.security = security  # route queries are open unsigned by default, not everywhere
        self.topics = topics
        self.interval = interval
        self.timeout = timeout
        self.t0 = t0
        self.clock = clock
        self.events: list[RouteEvent] = []
        self._times: dict[tuple[int, str], list[float]] = {}
        self._states: dict[tuple[int, str], list[Summary]] = {}
        self.polls = 0
        self.changed = trio.Event()  # set (and replaced) at every change: wait_until wakes on it

    def now(self) -> float:
        return self.clock() - self.t0

    def record(self, ns: int, topic: str, summary: Summary, t: float) -> None:
        key = (ns, topic)
        states = self._states.setdefault(key, [])
        if states and states[-1] == summary:
            return
        before = states[-1] if states else None
        self.events.append(RouteEvent(t, ns, topic, before, summary, first=not states))
        self._times.setdefault(key, []).append(t)
        states.append(summary)
        self.changed.set()
        self.changed = trio.Event()

    def rebase(self, t0: float) -> None:
        """Make ``t0`` time zero; what was already recorded keeps its place in time (it becomes <= 0)."""
        shift = self.t0 - t0
        self.t0 = t0
        self.events = [dataclasses.replace(e, t=e.t + shift) for e in self.events]
        self._times = {k: [t + shift for t in ts] for k, ts in self._times.items()}

    def state_at(self, ns: int, topic: str, t: float) -> Summary:
        """The last summary seen at or before ``t`` (None before the first answer)."""
        times = self._times.get((ns, topic), [])
        i = bisect.bisect_right(times, t)
        return self._states[(ns, topic)][i - 1] if i else None

    def change_times(self, topic: str, namesrvs: tuple[int, ...] | None, after: float) -> list[float]:
        out = set()
        for ns in namesrvs if namesrvs is not None else range(len(self.addrs)):
            times = self._times.get((ns, topic), [])
            out.update(times[bisect.bisect_right(times, after):])
        return sorted(out)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Poll until cancelled; ``started`` once every NameServer was asked once."""
        first_round = [trio.Event() for _ in self.addrs]
        async with trio.open_nursery() as nursery:
            for i, addr in enumerate(self.addrs):
                nursery.start_soon(self._poll_one, i, addr, first_round[i])
            for ev in first_round:
                await ev.wait()
            task_status.started()

    async def poll_once(self, ns: int, client: AdminClient) -> None:
        for topic in self.topics:
            try:
                with trio.fail_after(self.timeout * 2):
                    summary: Summary = summarize(await client.topic_route(topic))
            except NotFound:
                summary = {}
            except (AdminError, trio.TooSlowError):
                summary = None
            self.record(ns, topic, summary, self.now())
        self.polls += 1

    async def _poll_one(self, ns: int, addr: str, first: trio.Event) -> None:
        client = AdminClient([addr], timeout=self.timeout, security=self.security)
        async with client.pooled():
            while True:
                next_at = self.clock() + self.interval
                await self.poll_once(ns, client)
                first.set()
                await trio.sleep_until(next_at)
