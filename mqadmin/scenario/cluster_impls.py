"""``cluster.namesrv_impl`` and ``cluster.broker_impl``: which implementation runs each role of a scenario.

The values are the local cluster's (:mod:`mqadmin.localcluster.impls`): ``toolkit``/``stub`` or
``java:VERSION``, one for all or a list with one per NameServer (broker group). What an implementation
cannot do is refused here, with the scenario's file and line, rather than when the run starts: timing
knobs Java has no key for, the broker stub's fault switchboard (``fault``) on a Java broker, and a 4.x
Java broker behind the clients' proxy (``client_proxy``). A ``partition`` or ``heal`` of a Java broker
goes through the fault proxy, as for ours (:mod:`mqadmin.scenario.network_schema`).
"""

from __future__ import annotations

from typing import Any

from mqadmin.localcluster import impls
from mqadmin.localcluster.state import ClusterError
from mqadmin.scenario.model import ClusterSpec
from mqadmin.scenario.values import Parser, _Bad, _Section, list_of, text

#: Actions that only the broker stub can carry out, and what to use on a Java broker instead.
STUB_ONLY_ACTIONS = {
    "fault": "the broker stub's fault switchboard (on a Java broker: kill_broker, stop_broker / cont_broker, "
             "restart_broker, and partition / network_fault / heal through the fault proxy)",
}


def read(sec: _Section, namesrvs: int, brokers: int) -> dict[str, Any]:
    """The cluster section's ``namesrv_impl``, ``broker_impl`` and ``java_opts``, as ClusterSpec fields."""
    return {
        "namesrv_impl": sec.get("namesrv_impl", impl_list("namesrv", namesrvs), ("toolkit",)),
        "broker_impl": sec.get("broker_impl", impl_list("broker", brokers), ("stub",)),
        "java_opts": sec.get("java_opts", list_of(text, max_len=32), ()),
    }


def impl_list(role: str, count: int) -> Parser:
    """A string or a list of strings: one implementation for all, or one per NameServer (broker group)."""
    def parse(value: Any) -> tuple[str, ...]:
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str) for v in items):
            raise _Bad(f"must be {impls.OURS[role]} or java:VERSION, or a list of them")
        key = "namesrv_impl" if role == "namesrv" else "broker_impl"
        try:
            found = impls.parse(items, role, count, key)
        except ClusterError as exc:
            raise _Bad(str(exc).removeprefix(f"{key}: ")) from None
        specs = tuple(i.spec for i in found)
        return specs[:1] if len(set(specs)) == 1 else specs
    return parse


def check_cluster(sec: _Section, spec: ClusterSpec) -> None:
    """What the chosen implementations cannot do with the rest of the cluster section (one line, at the
    implementation's key)."""
    namesrvs = impls.parse(spec.namesrv_impl, "namesrv", spec.namesrvs, "namesrv_impl")
    brokers = impls.parse(spec.broker_impl, "broker", spec.brokers, "broker_impl")
    if spec.message_store == "memory" and any(b.java for b in brokers):
        raise sec.fail("message_store", "memory is the broker stub's: a Java broker always keeps messages on disk")
    try:
        impls.check(namesrvs, brokers, register_period_ms=spec.register_period_ms,
                    broker_expired_ms=spec.broker_expired_ms, scan_interval_ms=spec.scan_interval_ms,
                    auth=spec.auth, tls=spec.tls, metrics=False, client_proxy=spec.client_proxy)
    except impls.ImplError as exc:
        key = f"{exc.role}_impl"
        raise sec.fail(key, str(exc).replace("--auth", "auth").replace("--tls", "tls")
                       .replace("--client-proxy", "client_proxy")) from None


def check_broker_action(sec: _Section, spec: ClusterSpec, kind: str, broker: str) -> None:
    """An action the broker group's implementation cannot carry out (the stub's switchboard on Java)."""
    impl = spec.broker_impl_of(broker)
    if kind in STUB_ONLY_ACTIONS and impl.startswith("java:"):
        raise sec.fail(kind, f"{broker} runs {impl}: {kind} is {STUB_ONLY_ACTIONS[kind]}")
