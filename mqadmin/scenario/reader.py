"""The state of one scenario file being read, and the readers of parameters every section shares."""

from __future__ import annotations

from typing import Any

from mqadmin.scenario.model import ClusterSpec, Condition, ConsumerGroupSpec, ProducerGroup, Window
from mqadmin.scenario.values import (
    MAX_DURATION,
    REQUIRED,
    _Bad,
    _Ctx,
    _Section,
    _show,
    boolean,
    choice,
    integer,
    list_of,
    number,
    text,
    topic_name,
)


class ScenarioReader:
    """One scenario file being read: what its earlier sections settled, and the parameter readers
    every section shares (the producer side in :mod:`mqadmin.scenario.schema`, the consumer and
    network sides in their own modules)."""

    def __init__(self, ctx: _Ctx) -> None:
        self.ctx = ctx
        self.cluster = ClusterSpec()
        self.topics: set[str] = set()
        self.labels: dict[str, int] = {}
        self.groups: dict[str, ProducerGroup] = {}
        self.consumer_groups: tuple[ConsumerGroupSpec, ...] = ()
        self.fault_proxy_line = 0
        self.proxy_line = 0  # the line of cluster.proxy (or of the cluster section), for its errors

    def broker(self, sec: _Section, key: str = "broker", default: Any = REQUIRED) -> str:
        names = self.cluster.broker_names

        def parse(v: Any) -> str:
            name = text(v)
            if name not in names:
                raise _Bad(f"no broker group {name!r} in the cluster (groups: {', '.join(names)})")
            return name
        return sec.get(key, parse, default)

    def broker_id(self, sec: _Section) -> int:
        return sec.get("broker_id", integer(0, self.cluster.slaves), 0)

    def namesrv(self, sec: _Section, key: str = "namesrv", default: Any = REQUIRED) -> int:
        return sec.get(key, integer(0, self.cluster.namesrvs - 1), default)

    def topic(self, sec: _Section, key: str = "topic") -> str:
        value = sec.get(key, topic_name, self.cluster.topics[0])
        self.ctx.deferred.append(("topic", value, sec.line(key), sec.path(key)))
        return value

    def after(self, sec: _Section) -> str | None:
        value = sec.get("after", text, None)
        if value is not None:
            self.ctx.deferred.append(("label", value, sec.line("after"), sec.path("after")))
        return value

    def condition(self, kind: str, sec: _Section) -> Condition:
        topic = self.topic(sec)
        namesrvs = sec.get("namesrvs", list_of(integer(0, self.cluster.namesrvs - 1)), None)
        if kind in ("route_excludes", "route_includes"):
            return Condition(kind, topic, self.broker(sec), namesrvs, sec.get("mode", choice("writable", "present"), "writable"))
        enabled = sec.get("enabled", boolean, True)
        if not enabled:
            raise sec.fail("enabled", f"{kind}: false means nothing; remove the item instead")
        if kind == "namesrvs_disagree" and namesrvs is not None and len(namesrvs) < 2:
            raise sec.fail("namesrvs", "disagreement needs at least two NameServers")
        if kind == "namesrvs_agree" and self.cluster.namesrvs < 2 and namesrvs is None:
            raise sec.fail(None, "agreement needs at least two NameServers in the cluster")
        return Condition(kind, topic, None, namesrvs)

    def broker_value(self, v: Any) -> str:
        name = text(v)
        if name not in self.cluster.broker_names:
            raise _Bad(f"no broker group {name!r} in the cluster (groups: {', '.join(self.cluster.broker_names)})")
        return name

    def window(self, sec: _Section) -> Window:
        raw = sec.raw("window")
        if raw is None:
            return Window()
        if not isinstance(raw, list) or len(raw) != 2:
            raise sec.fail("window", f"must be [from, to] in seconds (to may be null), got {_show(raw)}")
        bound = number(-MAX_DURATION, MAX_DURATION)
        try:
            lo = bound(raw[0]) if raw[0] is not None else None
            hi = bound(raw[1]) if raw[1] is not None else None
        except _Bad as exc:
            raise sec.fail("window", str(exc)) from None
        if lo is not None and hi is not None and hi <= lo:
            raise sec.fail("window", f"must end after it starts, got [{lo:g}, {hi:g}]")
        return Window(lo, hi)
