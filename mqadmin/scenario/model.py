"""The scenario model: frozen dataclasses a validated scenario file becomes, and the text each is shown with.

Apart from the parsers (:mod:`mqadmin.scenario.schema` and its consumer and
network sides) so the runner, the actions and the expectations depend on the
shapes only, not on YAML; the parsers import this module, never the other way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: fault operations, exactly one per fault action
FAULT_OPS = ("latency_ms", "reject", "hang", "resume", "clear")
#: the consumer side's actions and expectations (parsed by :mod:`mqadmin.scenario.consumer_schema`)
CONSUMER_ACTION_KINDS = ("start_consumer", "stop_consumer", "kill_consumer")
CONSUMER_EXPECT_KINDS = (
    "max_consume_lag",
    "all_consumed_within",
    "max_duplicates",
    "max_lost",
    "rebalance_within",
    "min_consumed_from",
    "max_consumed_from",
)
#: the fault proxy's actions (parsed by :mod:`mqadmin.scenario.network_schema`)
NETWORK_ACTION_KINDS = ("partition", "heal", "network_fault")
#: a network_fault's operations, exactly one per action
NETWORK_FAULT_OPS = ("refuse", "blackhole", "latency_ms", "bandwidth_kbps", "reset")


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
    auth: bool = False  # accounts on every process, as mqadmin start --auth; the clients sign
    tls: bool = False  # every process enforcing TLS, as mqadmin start --tls; the clients connect with TLS
    #: Which implementation runs each NameServer / broker group: one for all, or one each (mqadmin start's
    #: --namesrv-impl and --broker-impl): "toolkit" / "stub" (ours) or "java:VERSION".
    namesrv_impl: tuple[str, ...] = ("toolkit",)
    broker_impl: tuple[str, ...] = ("stub",)
    java_opts: tuple[str, ...] = ()  # more JVM options for every Java process (mqadmin start --java-opt)
    fault_proxy: bool | None = False  # a fault proxy on every broker->NameServer path (None only while parsing)
    client_proxy: bool = False  # brokers register the proxy's address: clients reach them through it too
    proxy: str | None = None  # Apache's RocketMQ Proxy of this version over the cluster (for gRPC clients)

    @property
    def broker_names(self) -> list[str]:
        letters = "abcdefghijklmnopqrstuvwxyz"
        return [f"broker-{letters[i]}" for i in range(self.brokers)]

    def broker_impl_of(self, name: str) -> str:
        """The implementation of broker group ``name`` (``stub``, ``java:5.3.3``)."""
        impls = self.broker_impl if len(self.broker_impl) > 1 else self.broker_impl * self.brokers
        return dict(zip(self.broker_names, impls))[name]


@dataclass(frozen=True)
class ProducerGroup:
    """Producers sharing options; each is one DefaultMQProducer, simulated unless ``client`` names a real one."""

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
    client: str = "sim"  # sim, go or java:VERSION (mqadmin.scenario.client_schema)

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
        if self.kind in CONSUMER_ACTION_KINDS:
            return _consumer_action_text(self.kind, a)
        if self.kind == "wait_until":
            assert self.condition is not None
            return f"wait_until {self.condition.describe()} (≤ {a['timeout']:g} s)"
        if self.kind == "fault":
            what = ", ".join(f"{k}={v}" for k, v in a.items() if k in FAULT_OPS)
            return f"fault {_broker_text(a)} {what}"
        if self.kind in ("kill_namesrv", "restart_namesrv"):
            return f"{self.kind} namesrv-{a['namesrv']}"
        if self.kind in NETWORK_ACTION_KINDS:
            return _network_action_text(self.kind, a)
        if self.kind == "create_topic":
            return f"create_topic {a['topic']} ({a['queues']} queues)"
        if "broker" in a:
            return f"{self.kind} {_broker_text(a)}"
        return self.kind


def _broker_text(a: Mapping[str, Any]) -> str:
    return f"{a['broker']}-{a.get('broker_id', 0)}" if "broker_id" in a else str(a["broker"])


def _consumer_action_text(kind: str, args: Mapping[str, Any]) -> str:
    if kind == "start_consumer":
        n = args.get("count", 1)
        return f"start {n} consumer{'s' if n != 1 else ''} in {args['group']}"
    which = "the newest" if args.get("consumer") is None else f"#{args['consumer']}"
    verb = "stop" if kind == "stop_consumer" else "kill"
    return f"{verb} {which} consumer of {args['group']}"


def _network_action_text(kind: str, args: Mapping[str, Any]) -> str:
    who = f"{args['broker']}-{args.get('broker_id', 0)}"
    where = (" (clients' path)" if args.get("clients") else
             "" if args.get("namesrv") is None else f" {'from' if kind == 'partition' else 'to'} namesrv-{args['namesrv']}")
    if kind != "network_fault":
        return f"{kind} {who}{where}"
    op = next(k for k in NETWORK_FAULT_OPS if k in args)
    value = {"latency_ms": lambda: f"latency {args['latency_ms']}" + (f"±{args['jitter_ms']}" if args["jitter_ms"] else "")
             + f" ms {args['stream']}", "bandwidth_kbps": lambda: f"bandwidth {args['bandwidth_kbps']} KB/s {args['stream']}",
             "blackhole": lambda: f"blackhole {args['blackhole']}"}.get(op, lambda: op)()
    return f"network_fault {who}{where}: {value}"


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
        if self.kind in CONSUMER_EXPECT_KINDS:
            return _consumer_expectation_text(self)
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


def _consumer_expectation_text(exp: Expectation) -> str:
    x = exp.extra
    who = f" ({x['consumers']})" if x.get("consumers") else ""
    after = f" after {exp.after}" if exp.after else ""
    span = exp.window.describe()
    scope = f" in {span}{after}" if span else (f" from {exp.after} on" if exp.after else "")
    t = exp.threshold
    if exp.kind == "max_consume_lag":
        return f"consume lag <= {t:g}{scope}{who}"
    if exp.kind == "all_consumed_within":
        return f"all acknowledged messages consumed within {t:g} s after the load ends{who}"
    if exp.kind == "max_duplicates":
        return f"duplicate consumptions <= {t:g}{scope}{who}"
    if exp.kind == "max_lost":
        what = "" if x.get("include_broker_loss", True) else " (not counting those lost with a memory-only broker)"
        return f"lost messages <= {t:g}{what}{who}"
    if exp.kind == "rebalance_within":
        return f"every queue has exactly one owner within {t:g} s{after}{who}"
    node = "" if x.get("broker_id") is None else f"-{x['broker_id']}"
    cmp = ">=" if exp.kind == "min_consumed_from" else "<="
    return f"consumed from {exp.broker}{node} {cmp} {t:g}{scope}{who}"


@dataclass(frozen=True)
class ConsumerGroupSpec:
    """Consumers of one group sharing options; each is one DefaultMQPushConsumer, simulated unless ``client``
    names a real one."""

    name: str
    count: int
    topics: tuple[str, ...]
    subscription: str
    start: float
    consume_from: str
    poll_interval: float
    heartbeat_interval: float
    rebalance_interval: float
    persist_interval: float
    suspend_ms: int
    consume_delay_ms: float
    consume_threads: int
    failure_rate: float
    pull_batch_size: int = 32
    pull_threshold: int = 1000
    client: str = "sim"  # sim, go, java:VERSION, grpc-python or grpc-java:VERSION (mqadmin.scenario.client_schema)
    api: str = "push"  # push, or simple (RocketMQ 5 clients: receive, ack)
    invisible_time: float = 15.0  # s: a simple consumer's messages stay invisible this long after a receive

    @property
    def group(self) -> str:
        """The consumer group name on the wire."""
        return f"scenario_{self.name}"


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


