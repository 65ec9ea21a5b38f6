"""Which implementation runs each role of the local cluster, and what each can be asked to do.

A NameServer is ``toolkit`` (ours, the default) or ``java:VERSION`` (Apache's NamesrvStartup); a broker
group is ``stub`` (ours, the default) or ``java:VERSION`` (BrokerStartup, master and slaves alike). One
value applies to every NameServer (broker group); a comma-separated list gives one per NameServer
(broker group) in order, so ``toolkit,java:5.5.0`` makes NameServer 0 ours and NameServer 1 Java's.

:func:`check` refuses, in one line, what an implementation cannot do, before anything starts: Java has
no key for some of the cluster's timing knobs in some versions (see :mod:`mqadmin.rocketmq.servers`),
the local cluster's accounts, TLS and metrics are set up for our processes only, and a 4.x broker
can stand neither behind the clients' fault proxy nor under Apache's RocketMQ Proxy (no POP).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mqadmin.localcluster.state import ClusterError
from mqadmin.rocketmq import servers
from mqadmin.rocketmq.artifacts import VERSION

#: Our implementation of each role (the defaults).
OURS = {"namesrv": "toolkit", "broker": "stub"}
ROLE_NAMES = {"namesrv": "NameServer", "broker": "broker"}
#: The defaults of the timing knobs: a value other than these is a request an implementation must honour.
DEFAULT_SCAN_MS = 5_000
DEFAULT_EXPIRY_MS = servers.FIXED_EXPIRY_MS


@dataclass(frozen=True)
class Impl:
    """One role's implementation: ours, or Apache's Java code of a version."""

    kind: str  # "toolkit", "stub" or "java"
    version: str | None = None

    @property
    def java(self) -> bool:
        return self.kind == "java"

    @property
    def label(self) -> str:
        return f"java {self.version}" if self.java else self.kind

    @property
    def spec(self) -> str:
        """As written on the command line: ``stub``, ``java:5.3.3``."""
        return f"java:{self.version}" if self.java else self.kind


TOOLKIT = Impl("toolkit")
STUB = Impl("stub")


class ImplError(ClusterError):
    """What an implementation cannot do; ``role`` says whose choice it is (``namesrv`` or ``broker``)."""

    def __init__(self, role: str, message: str) -> None:
        super().__init__(message)
        self.role = role


def parse_one(text: str, role: str) -> Impl:
    """``toolkit``/``stub`` (ours, by role) or ``java:VERSION``; a ClusterError naming the problem."""
    value = text.strip()
    ours = OURS[role]
    if value == ours:
        return Impl(ours)
    kind, _, version = value.partition(":")
    if kind == "java" and VERSION.match(version):
        return Impl("java", version)
    if kind == "java":
        raise ClusterError(f"{value!r}: give the RocketMQ version after java:, like java:5.3.3")
    other = OURS["broker" if role == "namesrv" else "namesrv"]
    what = ROLE_NAMES[role]
    if value == other:
        raise ClusterError(f"{value!r} is our {ROLE_NAMES['broker' if role == 'namesrv' else 'namesrv']}: a {what} "
                           f"is {ours} or java:VERSION")
    raise ClusterError(f"unknown implementation {value!r}: a {what} is {ours} or java:VERSION (e.g. java:5.3.3)")


def parse(value: str | Sequence[str], role: str, count: int, option: str) -> tuple[Impl, ...]:
    """One Impl per NameServer (per broker group): one value for all, or exactly ``count`` of them."""
    items = [v for v in (value.split(",") if isinstance(value, str) else value)]
    if not items or any(not str(v).strip() for v in items):
        raise ClusterError(f"{option}: empty implementation in {value!r}")
    impls = tuple(parse_one(str(v), role) for v in items)
    if len(impls) == 1:
        return impls * count
    if len(impls) != count:
        what = "NameServers" if role == "namesrv" else "broker groups"
        raise ClusterError(f"{option} names {len(impls)} implementations for {count} {what}: give one, or one each")
    return impls


def java_versions(*impls: Iterable[Impl]) -> list[str]:
    """The Java versions the cluster needs, each once, in order of first use."""
    seen: list[str] = []
    for group in impls:
        for impl in group:
            if impl.java and impl.version not in seen:
                seen.append(impl.version or "")
    return seen


def check(namesrvs: Sequence[Impl], brokers: Sequence[Impl], *, register_period_ms: int, broker_expired_ms: int,
          scan_interval_ms: int, auth: bool, tls: bool, metrics: bool, client_proxy: bool = False,
          proxy: str | None = None) -> None:
    """A ClusterError (one line) for a request some chosen implementation cannot carry out."""
    java = [i for i in (*namesrvs, *brokers) if i.java]
    if not java:
        return
    old = next((b for b in brokers if b.java and not servers.has_bind_address(b.version or "")), None)
    if client_proxy and old is not None:
        raise ImplError("broker", f"--client-proxy is not supported for {old.label} brokers: 4.x has no bindAddress "
                                  "to listen apart from the proxy's address (use java:5.x or stub brokers)")
    no_pop = next((b for b in brokers if b.java and not servers.serves_pop(b.version or "")), None)
    if proxy is not None and no_pop is not None:
        raise ImplError("broker", f"--proxy {proxy} is not supported over {no_pop.label} brokers: the Proxy receives "
                                  "with POP, which 4.x brokers do not serve (use java:5.x or stub brokers)")
    first = java[0].label
    for flag, on in (("--auth", auth), ("--tls", tls), ("--metrics", metrics)):
        if on:
            raise ImplError("broker" if any(b.java for b in brokers) else "namesrv", f"{flag} is for our processes only: the local cluster cannot set it up on {first} "
                               "(leave it out, or use toolkit and stub)")
    low, high = servers.REGISTER_PERIOD_RANGE_MS
    java_brokers = [b for b in brokers if b.java]
    if java_brokers and not low <= register_period_ms <= high:
        raise ImplError("broker", f"register period {register_period_ms} ms: a Java broker registers every {low}-{high} ms "
                           "(Java clamps registerNameServerPeriod to that range)")
    for ns in namesrvs:
        if ns.java and not servers.scan_interval_key(ns.version or "") and scan_interval_ms != DEFAULT_SCAN_MS:
            raise ImplError("namesrv", f"scan interval {scan_interval_ms} ms: the NameServer {ns.label} scans every "
                               f"{servers.FIXED_SCAN_MS_4 // 1000} s and has no key to change it")
    if broker_expired_ms != DEFAULT_EXPIRY_MS:
        _check_expiry(namesrvs, brokers, broker_expired_ms)


def _check_expiry(namesrvs: Sequence[Impl], brokers: Sequence[Impl], expiry_ms: int) -> None:
    """A Java NameServer has no brokerChannelExpiredTime: 4.x expires a silent broker after a fixed 120 s,
    5.x after the heartbeatTimeoutMillis the broker sends (:func:`brokers_send_expiry`)."""
    for ns in namesrvs:
        if ns.java and not servers.reads_heartbeat_timeout(ns.version or ""):
            raise ImplError("namesrv", f"broker timeout {expiry_ms} ms: the NameServer {ns.label} drops a silent broker "
                               f"after a fixed {servers.FIXED_EXPIRY_MS // 1000} s")
    if brokers_send_expiry(namesrvs, expiry_ms):
        for broker in brokers:
            if broker.java and not servers.sends_heartbeat_timeout(broker.version or ""):
                raise ImplError("broker", f"broker timeout {expiry_ms} ms: a Java NameServer takes it from each broker's "
                                   f"registration, which the broker {broker.label} cannot send (5.x brokers can)")


def brokers_send_expiry(namesrvs: Sequence[Impl], expiry_ms: int) -> bool:
    """Whether the brokers must carry the broker timeout themselves: a Java NameServer is in the list and the
    timeout is not Java's fixed default. They then send it as heartbeatTimeoutMillis in each registration
    (enableSlaveActingMaster=true with brokerNotActiveTimeoutMillis), which every NameServer applies."""
    return expiry_ms != DEFAULT_EXPIRY_MS and any(ns.java for ns in namesrvs)
