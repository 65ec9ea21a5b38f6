"""Scenario files: YAML validated into frozen dataclasses, errors naming file, line and field.

A scenario has five parts::

    name / description / duration / timeout
    cluster:   NameServers, broker groups, slaves, topics, timing knobs
    load:      one producer group (a mapping) or several (a list, each with a name)
    timeline:  actions, each ``- at: SECONDS`` + one action key (+ its parameters)
    expect:    expectations, each one expectation key (+ its parameters)

Items are written flat: the kind's key carries the main parameter and the
other parameters sit beside it (``- kill_broker: broker-a`` /
``  label: crash``); a mapping as the kind's value works too. Every error
is :class:`ScenarioError`, one line ``FILE:LINE: FIELD: problem``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqadmin.scenario import consumer_schema
from mqadmin.scenario.consumer_schema import ConsumerGroupSpec
from mqadmin.scenario.yamlnodes import LMap, LSeq, YamlError, line_of
from mqadmin.scenario.yamlnodes import load as load_yaml
from namesrv.config import ConfigError, NamesrvConfig

TOPIC_CHARS = set("%|abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
MAX_DURATION = 600.0
MAX_FILE_BYTES = 1024 * 1024


class ScenarioError(ValueError):
    """An invalid scenario: the message is one line naming file, line and field."""


class _Bad(ValueError):
    """A parameter value that is wrong; the caller adds where."""


# ---------------------------------------------------------------------------
# the model


@dataclass(frozen=True)
class ClusterSpec:
    namesrvs: int = 2
    brokers: int = 2
    slaves: int = 0
    topics: tuple[str, ...] = ("ScenarioTopic",)
    queues: int = 4
    register_period_ms: int = 30000  # broker registerNameServerPeriod
    broker_expired_ms: int = 120000  # NameServer brokerChannelExpiredTime
    scan_interval_ms: int = 5000  # NameServer scanNotActiveBrokerInterval
    message_store: str = "disk"  # disk: messages survive a broker restart; memory: a kill -9 loses them
    broker_config: tuple[tuple[str, str], ...] = ()  # extra broker.properties keys for every broker
    namesrv_config: tuple[tuple[str, str], ...] = ()  # more namesrv.properties keys, e.g. warmRestartEnable

    @property
    def broker_names(self) -> list[str]:
        letters = "abcdefghijklmnopqrstuvwxyz"
        return [f"broker-{letters[i]}" for i in range(self.brokers)]


@dataclass(frozen=True)
class ProducerGroup:
    """Producers sharing options; each is one simulated DefaultMQProducer."""

    name: str
    producers: int
    rate: float  # sends/s per producer
    message_size: int
    topics: tuple[str, ...]
    start: float  # s after time zero
    duration: float  # s
    poll_interval: float  # pollNameServerInterval, s
    send_timeout: float  # sendMsgTimeout, s
    retries: int  # retryTimesWhenSendFailed
    latency_fault: bool  # sendLatencyFaultEnable
    first_id: int = 0  # producer ids of this group: first_id .. first_id + producers - 1

    @property
    def ids(self) -> range:
        return range(self.first_id, self.first_id + self.producers)


@dataclass(frozen=True)
class Condition:
    """A predicate on the NameServers' routes, as the observer last saw them.

    ``route_excludes``/``route_includes``: the broker is (not) in the topic's
    route on every selected NameServer that answers (at least one must);
    ``mode`` ``writable`` asks whether producers can send to it (a master and
    a write-permitted queue entry), ``present`` whether it is listed at all.
    ``namesrvs_agree``: every selected NameServer answers with the same
    route; ``namesrvs_disagree``: two that answer differ.
    """

    kind: str
    topic: str
    broker: str | None = None
    namesrvs: tuple[int, ...] | None = None  # None: all
    mode: str = "writable"

    def describe(self) -> str:
        where = "" if self.namesrvs is None else f" on namesrv {','.join(map(str, self.namesrvs))}"
        if self.kind in ("route_excludes", "route_includes"):
            verb = "leaves" if self.kind == "route_excludes" else "is in"
            what = "writable route" if self.mode == "writable" else "route"
            return f"{self.broker} {verb} the {what} of {self.topic}{where}"
        return f"NameServers {'agree' if self.kind == 'namesrvs_agree' else 'disagree'} on {self.topic}{where}"


@dataclass(frozen=True)
class Action:
    kind: str
    line: int
    at: float | None  # None: right after the previous action
    label: str | None
    args: Mapping[str, Any] = field(default_factory=dict)
    condition: Condition | None = None  # wait_until only

    def describe(self) -> str:
        a = self.args
        if self.kind in consumer_schema.ACTION_KINDS:
            return consumer_schema.describe_action(self.kind, dict(a))
        if self.kind == "wait_until":
            assert self.condition is not None
            return f"wait_until {self.condition.describe()} (≤ {a['timeout']:g} s)"
        if self.kind == "fault":
            what = ", ".join(f"{k}={v}" for k, v in a.items() if k in FAULT_OPS)
            return f"fault {_broker_text(a)} {what}"
        if self.kind in ("kill_namesrv", "restart_namesrv"):
            return f"{self.kind} namesrv-{a['namesrv']}"
        if self.kind == "partition":
            return f"partition {_broker_text(a)} from namesrv-{a['namesrv']}"
        if self.kind == "heal":
            return f"heal {_broker_text(a)}" + ("" if a.get("namesrv") is None else f" with namesrv-{a['namesrv']}")
        if self.kind == "create_topic":
            return f"create_topic {a['topic']} ({a['queues']} queues)"
        if "broker" in a:
            return f"{self.kind} {_broker_text(a)}"
        return self.kind


def _broker_text(a: Mapping[str, Any]) -> str:
    return f"{a['broker']}-{a.get('broker_id', 0)}" if "broker_id" in a else str(a["broker"])


@dataclass(frozen=True)
class Window:
    """Seconds relative to when the ``after`` action took effect (or to time zero); None: open."""

    start: float | None = None
    end: float | None = None

    def describe(self) -> str:
        if self.start is None and self.end is None:
            return ""
        lo = "start" if self.start is None else f"{self.start:g}"
        hi = "end" if self.end is None else f"{self.end:g}"
        return f"[{lo}, {hi}] s"


@dataclass(frozen=True)
class Expectation:
    kind: str
    line: int
    after: str | None = None  # a timeline label: times and windows count from when that action took effect
    condition: Condition | None = None  # the timed kinds
    within: float | None = None
    not_before: float | None = None
    threshold: float | None = None  # min rate, max count, max ms, min count
    window: Window = Window()
    producers: str | None = None  # a producer group name; None: all
    broker: str | None = None  # max_sends_to / min_sends_to
    outcome: str = "all"  # p99_send_latency: all sends or only stored ones
    upper: float | None = None  # send_success_rate: at most this (a scenario where sends must fail)
    extra: Mapping[str, Any] = field(default_factory=dict)  # consumer expectations: group, broker id, ...

    def describe(self) -> str:
        if self.kind in consumer_schema.EXPECT_KINDS:
            return consumer_schema.describe(self)
        after = f" after {self.after}" if self.after else ""
        scope = ""
        if self.window.describe():
            scope += f" in {self.window.describe()}{after}"
        elif self.after:
            scope += f" from {self.after} on"
        if self.producers:
            scope += f" ({self.producers})"
        if self.condition is not None:
            bound = f"within {self.within:g} s{after}"
            if self.not_before is not None:
                bound = f"after {self.not_before:g}-{self.within:g} s{after.replace(' after', ' of')}"
            return f"{self.condition.describe()} {bound}"
        t = self.threshold
        if self.kind == "send_success_rate":
            if self.upper is not None:
                return f"send success rate {f'{t:g}..' if t else '<= '}{self.upper:g}{scope}"
            return f"send success rate >= {t:g}{scope}"
        if self.kind == "max_failed_sends":
            return f"failed sends <= {t:g}{scope}"
        if self.kind == "p99_send_latency":
            which = "" if self.outcome == "all" else " (stored sends)"
            return f"p99 send latency <= {t:g} ms{which}{scope}"
        if self.kind == "max_sends_to":
            return f"sends stored on {self.broker} <= {t:g}{scope}"
        if self.kind == "min_sends_to":
            return f"sends stored on {self.broker} >= {t:g}{scope}"
        return self.kind


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    path: str
    duration: float
    timeout: float
    cluster: ClusterSpec
    groups: tuple[ProducerGroup, ...]
    observe_interval: float
    observe_timeout: float
    observe_topics: tuple[str, ...]
    timeline: tuple[Action, ...]
    expectations: tuple[Expectation, ...]
    consumers: tuple[ConsumerGroupSpec, ...] = ()

    @property
    def producers(self) -> int:
        return sum(g.producers for g in self.groups)

    def group(self, name: str) -> ProducerGroup:
        return next(g for g in self.groups if g.name == name)


# ---------------------------------------------------------------------------
# value parsers: each returns the value or raises _Bad

Parser = Callable[[Any], Any]
REQUIRED: Any = object()


def integer(lo: int, hi: int) -> Parser:
    def parse(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise _Bad(f"must be an integer, got {_show(v)}")
        if not lo <= v <= hi:
            raise _Bad(f"must be {lo}..{hi}, got {v}")
        return v
    return parse


def number(lo: float, hi: float, *, lo_open: bool = False) -> Parser:
    def parse(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise _Bad(f"must be a number, got {_show(v)}")
        if v < lo or v > hi or (lo_open and v == lo):
            raise _Bad(f"must be {'>' if lo_open else '>='} {lo:g} and <= {hi:g}, got {v:g}")
        return float(v)
    return parse


def boolean(v: Any) -> bool:
    if not isinstance(v, bool):
        raise _Bad(f"must be true or false, got {_show(v)}")
    return v


def text(v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise _Bad(f"must be a non-empty string, got {_show(v)}")
    return v.strip()


def choice(*options: str) -> Parser:
    def parse(v: Any) -> str:
        if v not in options:
            raise _Bad(f"must be one of {', '.join(options)}, got {_show(v)}")
        return v
    return parse


def topic_name(v: Any) -> str:
    name = text(v)
    if len(name) > 127 or not set(name) <= TOPIC_CHARS:
        raise _Bad(f"topic {name!r} must be 1-127 characters of [%|a-zA-Z0-9_-]")
    return name


def scenario_name(v: Any) -> str:
    name = text(v)
    if len(name) > 64 or not all(c.isalnum() or c in "._-" for c in name):
        raise _Bad(f"must be 1-64 characters of letters, digits, '.', '_' and '-', got {name!r}")
    return name


#: NameServer keys the runner sets itself (or from other cluster fields); namesrv_config may not.
RUNNER_NAMESRV_KEYS = ("listenPort", "bindAddress", "scanNotActiveBrokerInterval", "brokerChannelExpiredTime")


def namesrv_config(v: Any) -> tuple[tuple[str, str], ...]:
    """``{key: value}`` of NameServer properties, checked as mqnamesrv would check them."""
    if not isinstance(v, dict):
        raise _Bad(f"must be a mapping of NameServer config keys to values, got {_show(v)}")
    known = set(NamesrvConfig.keys())
    out = []
    for key, value in v.items():
        if key not in known:
            raise _Bad(f"{key!r} is not a NameServer config key")
        if key in RUNNER_NAMESRV_KEYS:
            raise _Bad(f"{key} is set by the runner (see the other cluster fields)")
        if NamesrvConfig.is_path_key(key):
            raise _Bad(f"{key}: paths stay in the scenario's own state directory")
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (int, str)):
            value = str(value)
        else:
            raise _Bad(f"{key} must be a string, number or true/false, got {_show(value)}")
        try:
            NamesrvConfig().parse_values({key: value})
        except ConfigError as exc:
            raise _Bad(str(exc)) from None
        out.append((key, value))
    return tuple(out)


def list_of(item: Parser, *, min_len: int = 1, max_len: int = 64) -> Parser:
    def parse(v: Any) -> tuple[Any, ...]:
        values = list(v) if isinstance(v, list) else [v]
        if not min_len <= len(values) <= max_len:
            raise _Bad(f"must list {min_len}..{max_len} items, got {len(values)}")
        out = []
        for i, x in enumerate(values):
            try:
                out.append(item(x))
            except _Bad as exc:
                raise _Bad(f"item {i + 1}: {exc}") from None
        if len(set(out)) != len(out):
            raise _Bad("must not repeat an item")
        return tuple(out)
    return parse


def _show(v: Any) -> str:
    if v is None:
        return "nothing"
    if isinstance(v, (list, dict)):
        return "a list" if isinstance(v, list) else "a mapping"
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


# ---------------------------------------------------------------------------
# reading sections


class _Ctx:
    def __init__(self, path: str) -> None:
        self.path = path
        self.deferred: list[tuple[str, Any, int, str]] = []  # (what, value, line, field)

    def error(self, line: int, where: str, message: str) -> ScenarioError:
        loc = f"{self.path}:{line}" if line else self.path
        return ScenarioError(f"{loc}: {where}: {message}" if where else f"{loc}: {message}")


class _Section:
    """Typed reads from one mapping; ``finish`` rejects keys nobody read."""

    def __init__(self, ctx: _Ctx, data: Any, where: str, line: int = 0) -> None:
        if not isinstance(data, LMap):
            raise ctx.error(line_of(data, line), where, f"must be a mapping, got {_show(data)}")
        self.ctx = ctx
        self.data = data
        self.where = where
        self.read: set[str] = set()
        self.also: tuple[str, ...] = ()  # keys read elsewhere but valid here too (an item's `at`, `label`)

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def line(self, key: str | None = None) -> int:
        if key is not None and key in self.data.key_lines:
            return self.data.key_lines[key]
        return self.data.line

    def has(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str, parse: Parser, default: Any = REQUIRED) -> Any:
        self.read.add(key)
        if key not in self.data or (self.data[key] is None and default is not REQUIRED):
            if default is REQUIRED:
                raise self.ctx.error(self.data.line, self.path(key), "is required")
            return default
        try:
            return parse(self.data[key])
        except _Bad as exc:
            raise self.ctx.error(self.line(key), self.path(key), str(exc)) from None

    def raw(self, key: str) -> Any:
        self.read.add(key)
        return self.data.get(key)

    def fail(self, key: str | None, message: str) -> ScenarioError:
        return self.ctx.error(self.line(key), self.path(key) if key else self.where, message)

    def finish(self) -> None:
        for key in self.data:
            if key not in self.read:
                names = sorted(self.read | set(self.also))
                close = difflib.get_close_matches(str(key), names, n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                raise self.ctx.error(self.line(key), self.path(key),
                                     f"unknown field ({hint}expected one of: {', '.join(names)})")


# ---------------------------------------------------------------------------
# actions and expectations: one kind key per item


#: fault operations, exactly one per fault action
FAULT_OPS = ("latency_ms", "reject", "hang", "resume", "clear")
CONDITION_KINDS = ("route_excludes", "route_includes", "namesrvs_agree", "namesrvs_disagree")
BROKER_ACTIONS = ("kill_broker", "stop_broker", "cont_broker", "shutdown_broker", "restart_broker")
ACTION_KINDS = (
    *BROKER_ACTIONS,
    "kill_namesrv",
    "restart_namesrv",
    "partition",
    "heal",
    "wipe_write_perm",
    "add_write_perm",
    "create_topic",
    "fault",
    "wait_until",
    *consumer_schema.ACTION_KINDS,
)
COUNT_KINDS = ("send_success_rate", "max_failed_sends", "p99_send_latency", "max_sends_to", "min_sends_to")
EXPECT_KINDS = (*CONDITION_KINDS, *COUNT_KINDS, *consumer_schema.EXPECT_KINDS)

#: the parameter a kind's own key carries (``- kill_broker: broker-a``)
MAIN_PARAM = {
    **dict.fromkeys(BROKER_ACTIONS, "broker"),
    "kill_namesrv": "namesrv",
    "restart_namesrv": "namesrv",
    "partition": "broker",
    "heal": "broker",
    "wipe_write_perm": "broker",
    "add_write_perm": "broker",
    "create_topic": "topic",
    "fault": "broker",
    "wait_until": "condition",
    "route_excludes": "broker",
    "route_includes": "broker",
    "namesrvs_agree": "enabled",
    "namesrvs_disagree": "enabled",
    "send_success_rate": "min",
    "max_failed_sends": "max",
    "p99_send_latency": "max_ms",
    "max_sends_to": "broker",
    "min_sends_to": "broker",
    **consumer_schema.MAIN_PARAM,
}


def _item(ctx: _Ctx, data: Any, where: str, line: int, kinds: tuple[str, ...], outer: tuple[str, ...]) -> tuple[str, _Section, _Section]:
    """Split an item into its kind, a section of its parameters (flat or nested) and the item itself."""
    item = _Section(ctx, data, where, line)
    found = [k for k in data if k in kinds]
    if len(found) != 1:
        unknown = [k for k in data if k not in kinds and k not in outer]
        if not found and unknown:
            raise item.fail(unknown[0], f"unknown kind (expected one of: {', '.join(kinds)})")
        what = "no kind" if not found else f"{len(found)} kinds ({', '.join(found)})"
        raise item.fail(None, f"needs exactly one of {', '.join(kinds)}; found {what}")
    kind = found[0]
    item.read.add(kind)
    params = LMap(data.key_lines[kind])
    value = data[kind]
    if isinstance(value, LMap):
        params = value
    elif value is not None:
        params[MAIN_PARAM[kind]] = value
        params.key_lines[MAIN_PARAM[kind]] = data.key_lines[kind]
    for k, v in data.items():
        if k == kind or k in outer:
            continue
        item.read.add(k)
        if k in params:
            raise item.fail(k, f"given twice (also inside {kind})")
        params[k] = v
        params.key_lines[k] = data.key_lines[k]
    sec = _Section(ctx, params, where)
    sec.also = (kind, *outer)
    return kind, sec, item


class _Parser:
    def __init__(self, ctx: _Ctx) -> None:
        self.ctx = ctx
        self.cluster = ClusterSpec()
        self.topics: set[str] = set()
        self.labels: dict[str, int] = {}
        self.groups: dict[str, ProducerGroup] = {}
        self.consumer_groups: tuple[ConsumerGroupSpec, ...] = ()

    # --- shared parameter readers -------------------------------------

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

    # --- sections ------------------------------------------------------

    def parse_cluster(self, sec: _Section) -> ClusterSpec:
        namesrvs = sec.get("namesrvs", integer(1, 8), 2)
        brokers = sec.get("brokers", integer(1, 26), 2)
        slaves = sec.get("slaves", integer(0, 4), 0)
        topics = sec.get("topics", list_of(topic_name, max_len=32), ("ScenarioTopic",))
        spec = ClusterSpec(
            namesrvs=namesrvs,
            brokers=brokers,
            slaves=slaves,
            topics=topics,
            queues=sec.get("queues", integer(1, 64), 4),
            register_period_ms=sec.get("register_period_ms", integer(100, 600_000), 30000),
            broker_expired_ms=sec.get("broker_expired_ms", integer(100, 600_000), 120000),
            scan_interval_ms=sec.get("scan_interval_ms", integer(10, 600_000), 5000),
            message_store=sec.get("message_store", choice("disk", "memory"), "disk"),
            broker_config=sec.get("broker_config", consumer_schema.broker_config, ()),
            namesrv_config=sec.get("namesrv_config", namesrv_config, ()),
        )
        sec.finish()
        return spec

    def parse_group(self, sec: _Section, name: str, duration: float, first_id: int) -> ProducerGroup:
        start = sec.get("start", number(0, duration - 0.1), 0.0)
        topics = sec.get("topics", list_of(topic_name, max_len=32), self.cluster.topics)
        for t in topics:
            self.ctx.deferred.append(("topic", t, sec.line("topics"), sec.path("topics")))
        group = ProducerGroup(
            name=name,
            producers=sec.get("producers", integer(1, 200), 2),
            rate=sec.get("rate", number(0, 1000, lo_open=True), 20.0),
            message_size=sec.get("message_size", integer(0, 4 * 1024 * 1024), 256),
            topics=topics,
            start=start,
            duration=sec.get("duration", number(0, duration - start, lo_open=True), duration - start),
            poll_interval=sec.get("poll_interval", number(0.05, 3600), 30.0),
            send_timeout=sec.get("send_timeout", number(0.05, 60), 3.0),
            retries=sec.get("retries", integer(0, 16), 2),
            latency_fault=sec.get("latency_fault", boolean, False),
            first_id=first_id,
        )
        sec.finish()
        return group

    def parse_load(self, data: Any, line: int, duration: float) -> tuple[ProducerGroup, ...]:
        if data is None:
            data = LMap(line)
        if isinstance(data, LSeq):
            if not 1 <= len(data) <= 16:
                raise self.ctx.error(data.line, "load", f"must list 1..16 producer groups, got {len(data)}")
            groups = []
            first = 0
            for i, (item, item_line) in enumerate(zip(data, data.item_lines)):
                sec = _Section(self.ctx, item, f"load[{i + 1}]", item_line)
                name = sec.get("name", text)
                if name in self.groups:
                    raise sec.fail("name", f"producer group {name!r} is defined twice")
                g = self.parse_group(sec, name, duration, first)
                self.groups[name] = g
                groups.append(g)
                first += g.producers
            total = sum(g.producers for g in groups)
            if total > 400:
                raise self.ctx.error(data.line, "load", f"at most 400 producers in all, got {total}")
            return tuple(groups)
        sec = _Section(self.ctx, data, "load", line)
        name = sec.get("name", text, "producers")
        g = self.parse_group(sec, name, duration, 0)
        self.groups[name] = g
        return (g,)

    def parse_action(self, data: Any, where: str, line: int, duration: float) -> Action:
        kind, sec, item = _item(self.ctx, data, where, line, ACTION_KINDS, ("at", "label"))
        at = item.get("at", number(0, duration), None)
        label = item.get("label", text, None)
        if label is not None:
            if label in self.labels:
                raise item.fail("label", f"label {label!r} already used on line {self.labels[label]}")
            self.labels[label] = item.line("label")
        item.finish()
        args: dict[str, Any] = {}
        condition = None
        if kind in BROKER_ACTIONS:
            args["broker"] = self.broker(sec)
            args["broker_id"] = self.broker_id(sec)
        elif kind in ("kill_namesrv", "restart_namesrv"):
            args["namesrv"] = self.namesrv(sec)
            if kind == "kill_namesrv":
                args["signal"] = sec.get("signal", choice("kill", "term"), "kill")
        elif kind in ("partition", "heal"):
            args["broker"] = self.broker(sec)
            args["broker_id"] = self.broker_id(sec)
            args["namesrv"] = self.namesrv(sec, default=REQUIRED if kind == "partition" else None)
        elif kind in ("wipe_write_perm", "add_write_perm"):
            args["broker"] = self.broker(sec)
        elif kind == "create_topic":
            args["topic"] = sec.get("topic", topic_name)
            self.topics.add(args["topic"])
            args["queues"] = sec.get("queues", integer(1, 64), self.cluster.queues)
            args["brokers"] = sec.get("brokers", list_of(lambda v: self._broker_value(v)), tuple(self.cluster.broker_names))
        elif kind == "fault":
            args["broker"] = self.broker(sec)
            args["broker_id"] = self.broker_id(sec)
            ops = [k for k in FAULT_OPS if sec.has(k)]
            if len(ops) != 1:
                raise sec.fail(None, f"fault needs exactly one of {', '.join(FAULT_OPS)}; found {len(ops)}")
            op = ops[0]
            if op == "latency_ms":
                args[op] = sec.get(op, integer(0, 600_000))
            elif op == "reject":
                args[op] = sec.get(op, integer(-(2**31), 2**31 - 1))
            else:
                if not sec.get(op, boolean):
                    raise sec.fail(op, f"{op}: false means nothing; remove it")
                args[op] = True
        elif kind in consumer_schema.ACTION_KINDS:
            args.update(consumer_schema.parse_action(self, kind, sec))
        elif kind == "wait_until":
            cond_kind = sec.get("condition", choice(*CONDITION_KINDS))
            args["timeout"] = sec.get("timeout", number(0, MAX_DURATION, lo_open=True))
            condition = self.condition(cond_kind, sec)
        sec.finish()
        return Action(kind, item.line(kind), at, label, args, condition)

    def _broker_value(self, v: Any) -> str:
        name = text(v)
        if name not in self.cluster.broker_names:
            raise _Bad(f"no broker group {name!r} in the cluster (groups: {', '.join(self.cluster.broker_names)})")
        return name

    def parse_expectation(self, data: Any, where: str, line: int) -> Expectation:
        kind, sec, item = _item(self.ctx, data, where, line, EXPECT_KINDS, ())
        item.finish()
        after = self.after(sec)
        if kind in CONDITION_KINDS:
            condition = self.condition(kind, sec)
            within = sec.get("within", number(0, MAX_DURATION))
            not_before = sec.get("not_before", number(0, MAX_DURATION), None)
            if not_before is not None and not_before > within:
                raise sec.fail("not_before", f"must not exceed within ({within:g}), got {not_before:g}")
            sec.finish()
            return Expectation(kind, item.line(kind), after, condition, within, not_before)
        window = self.window(sec)
        if kind in consumer_schema.EXPECT_KINDS:
            fields_ = consumer_schema.parse_expectation(self, kind, sec)
            sec.finish()
            return Expectation(kind, item.line(kind), after, None, None, None, fields_["threshold"], window,
                               broker=fields_["broker"], extra=fields_["extra"])
        producers = sec.get("producers", text, None)
        if producers is not None and producers not in self.groups:
            raise sec.fail("producers", f"no producer group {producers!r} (groups: {', '.join(self.groups)})")
        broker = None
        outcome = "all"
        upper = None
        if kind == "send_success_rate":
            threshold = sec.get("min", number(0, 1), None)
            upper = sec.get("max", number(0, 1), None)
            if threshold is None and upper is None:
                raise sec.fail("min", "send_success_rate needs min (and/or max)")
            if threshold is not None and upper is not None and upper < threshold:
                raise sec.fail("max", f"must not be below min ({threshold:g}), got {upper:g}")
            threshold = 0.0 if threshold is None else threshold
        elif kind == "max_failed_sends":
            threshold = sec.get("max", integer(0, 10**9))
        elif kind == "p99_send_latency":
            threshold = sec.get("max_ms", number(0, 3_600_000, lo_open=True))
            outcome = sec.get("outcome", choice("all", "ok"), "all")
        else:
            broker = self.broker(sec)
            threshold = sec.get("max" if kind == "max_sends_to" else "min", integer(0, 10**9))
        sec.finish()
        return Expectation(kind, item.line(kind), after, None, None, None, float(threshold), window, producers, broker, outcome,
                           upper)

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


def parse(text_: str, path: str = "<scenario>") -> Scenario:
    """Validate a scenario text; ScenarioError (one line) on the first problem."""
    ctx = _Ctx(path)
    try:
        data = load_yaml(text_)
    except YamlError as exc:
        raise ctx.error(exc.line, "", str(exc)) from None
    top = _Section(ctx, data, "", 1)
    p = _Parser(ctx)
    name = top.get("name", scenario_name, "".join(c if c.isalnum() or c in "._-" else "_" for c in Path(path).stem)[:64] or "scenario")
    description = top.get("description", text, "")  # optional: `scenario list` shows an empty one
    if "\n" in description:
        raise top.fail("description", "must be one line (put details in the comment at the top)")
    duration = top.get("duration", number(1, MAX_DURATION))
    timeout = top.get("timeout", number(1, MAX_DURATION * 2), None)
    cluster_raw = top.raw("cluster")
    p.cluster = p.parse_cluster(_Section(ctx, cluster_raw if cluster_raw is not None else LMap(top.line("cluster")), "cluster"))
    p.topics = set(p.cluster.topics)
    groups = p.parse_load(top.raw("load"), top.line("load"), duration)
    p.consumer_groups = consumer_schema.parse_consumers(p, top.raw("consumers"), top.line("consumers"), duration)

    observe = _Section(ctx, top.raw("observe") if top.raw("observe") is not None else LMap(top.line("observe")), "observe")
    observe_interval = observe.get("interval", number(0.02, 5), 0.1)
    observe_timeout = observe.get("timeout", number(0.05, 10), 0.5)
    observe_topics = observe.get("topics", list_of(topic_name, max_len=16), ())
    for t in observe_topics:
        ctx.deferred.append(("topic", t, observe.line("topics"), observe.path("topics")))
    observe.finish()

    timeline_raw = top.raw("timeline")
    actions: list[Action] = []
    if timeline_raw is not None:
        if not isinstance(timeline_raw, LSeq):
            raise ctx.error(line_of(timeline_raw, top.line("timeline")), "timeline", "must be a list of actions")
        if len(timeline_raw) > 200:
            raise ctx.error(timeline_raw.line, "timeline", f"at most 200 actions, got {len(timeline_raw)}")
        last_at = 0.0
        for i, (item, line) in enumerate(zip(timeline_raw, timeline_raw.item_lines)):
            action = p.parse_action(item, f"timeline[{i + 1}]", line, duration)
            if action.at is not None:
                if action.at < last_at:
                    raise ctx.error(line, f"timeline[{i + 1}].at", f"must not go back in time ({action.at:g} < {last_at:g})")
                last_at = action.at
            actions.append(action)

    expect_raw = top.raw("expect")
    if not isinstance(expect_raw, LSeq) or not expect_raw:
        raise ctx.error(line_of(expect_raw, top.line("expect") if top.has("expect") else 1), "expect",
                        "must list at least one expectation")
    expectations = [
        p.parse_expectation(item, f"expect[{i + 1}]", line)
        for i, (item, line) in enumerate(zip(expect_raw, expect_raw.item_lines))
    ]
    top.finish()

    for what, value, line, where in ctx.deferred:
        if what == "topic" and value not in p.topics:
            raise ctx.error(line, where, f"topic {value!r} is neither in cluster.topics nor created by create_topic "
                                         f"(known: {', '.join(sorted(p.topics))})")
        if what == "label" and value not in p.labels:
            known = ", ".join(p.labels) or "none"
            raise ctx.error(line, where, f"no timeline action has label {value!r} (labels: {known})")

    waits = sum(a.args["timeout"] for a in actions if a.kind == "wait_until")
    if timeout is None:
        timeout = duration + waits + 60.0
    topics_seen = [*dict.fromkeys([t for g in groups for t in g.topics] + list(observe_topics)
                                  + [t for c in p.consumer_groups for t in c.topics]
                                  + [e.condition.topic for e in expectations if e.condition]
                                  + [a.condition.topic for a in actions if a.condition])]
    return Scenario(
        name=name,
        description=description,
        path=path,
        duration=duration,
        timeout=timeout,
        cluster=p.cluster,
        groups=groups,
        observe_interval=observe_interval,
        observe_timeout=observe_timeout,
        observe_topics=tuple(topics_seen),
        timeline=tuple(actions),
        expectations=tuple(expectations),
        consumers=p.consumer_groups,
    )


def load(path: str | Path) -> Scenario:
    """Read and validate a scenario file."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ScenarioError(f"{path}: larger than {MAX_FILE_BYTES // 1024} KiB; not a scenario")
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse(content, str(path))
