"""``client:`` of a load or consumer group: which client program sends or consumes.

- ``sim`` (the default): simulated clients (:mod:`simclient`), many on one trio loop;
- ``java:VERSION``: Apache's Java client of that RocketMQ version (4.9.7, 5.x), run by our harness
  programs, one JVM per producer group and one per consumer;
- ``go``: Apache's Go client (rocketmq-client-go/v2), likewise;
- ``grpc-python``: PyPI's RocketMQ 5 client, ``rocketmq-python-client`` (mqadmin's ``grpc`` extra), and
  ``grpc-java`` / ``grpc-java:VERSION``: Apache's ``rocketmq-client-java`` (VERSION is that artifact's,
  :data:`GRPC_JAVA_DEFAULT` when left out). RocketMQ 5 clients reach brokers only through a Proxy: a
  scenario with one runs Apache's Proxy in its cluster (``cluster.proxy``, implied when left out:
  :func:`resolve_proxy`). Their consumers are push consumers, or simple ones with ``api: simple``.

A real client takes the group's options the way its own API does. An option it has no setting for
is an error when the file sets it, rather than a silent difference between what the file says and
what ran: :data:`UNSUPPORTED` lists them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mqadmin.rocketmq.artifacts import ArtifactError, check_version

if TYPE_CHECKING:
    from mqadmin.scenario.model import ClusterSpec, ConsumerGroupSpec, ProducerGroup
    from mqadmin.scenario.values import _Section

SIM = "sim"
GO = "go"
GRPC_PYTHON = "grpc-python"
GRPC_JAVA = "grpc-java"
#: rocketmq-client-java's version when ``grpc-java`` names none (its versions are not RocketMQ's: 5.0.x).
GRPC_JAVA_DEFAULT = "5.0.7"
#: The Proxy a scenario with RocketMQ 5 clients runs when ``cluster.proxy`` is left out.
PROXY_DEFAULT = "5.3.3"
KINDS = "sim, go, java:VERSION, grpc-python or grpc-java[:VERSION]"
_GRPC_LOAD = {
    "poll_interval": "it asks the Proxy for routes every 30 s and has no setting for it",
    "latency_fault": "it has no latency fault tolerance (a failed attempt goes to the next queue)",
}
_GRPC_CONSUMERS = {
    "consume_from": "a new POP group starts where the broker chooses; the client has no setting for it",
    "poll_interval": "it asks the Proxy for routes every 30 s and has no setting for it",
    "heartbeat_interval": "it heartbeats to the Proxy every 10 s and has no setting for it",
    "rebalance_interval": "the Proxy assigns POP consumers whole brokers; there is no rebalance",
    "persist_interval": "POP consumers ack each message and keep no offsets",
    "suspend_ms": "the Proxy holds receives for its own long-polling time",
    "pull_batch_size": "its receives take up to 16 messages; no setting here",
    "pull_threshold": "it has no setting for it here",
}
#: (client family, section) -> {option: why the client cannot take it}
UNSUPPORTED: dict[tuple[str, str], dict[str, str]] = {
    ("go", "load"): {
        "poll_interval": "the Go client polls the NameServers every 30 s and has no setting for it",
        "latency_fault": "the Go client has no latency fault tolerance",
    },
    ("java", "consumers"): {
        "suspend_ms": "Java's push consumer holds its long polls 15 s and has no setting for it",
    },
    ("go", "consumers"): {
        "suspend_ms": "the Go push consumer has no setting for its long-poll time",
        "poll_interval": "the Go client polls the NameServers every 30 s and has no setting for it",
        "heartbeat_interval": "the Go client heartbeats every 30 s and has no setting for it",
        "rebalance_interval": "the Go client rebalances every 20 s and has no setting for it",
        "persist_interval": "the Go client commits offsets every 5 s and has no setting for it",
    },
    ("grpc-python", "load"): {**_GRPC_LOAD, "retries": "the Python client makes the attempts the Proxy's "
                                                       "settings say (3) and has no setting for it"},
    ("grpc-java", "load"): _GRPC_LOAD,
    ("grpc-python", "consumers"): _GRPC_CONSUMERS,
    ("grpc-java", "consumers"): _GRPC_CONSUMERS,
}


def family(client: str) -> str:
    """``sim``, ``java``, ``go``, ``grpc-python`` or ``grpc-java``."""
    return client.split(":", 1)[0]


def is_grpc(client: str) -> bool:
    """A RocketMQ 5 client, which reaches brokers through the Proxy."""
    return family(client) in (GRPC_PYTHON, GRPC_JAVA)


def grpc_java_version(client: str) -> str | None:
    """The rocketmq-client-java version of a ``grpc-java[:VERSION]`` client, else None."""
    return client.split(":", 1)[1] if family(client) == GRPC_JAVA else None


def is_real(client: str) -> bool:
    return client != SIM


def java_version(client: str) -> str | None:
    """The RocketMQ version of a ``java:VERSION`` client, else None."""
    return client.split(":", 1)[1] if family(client) == "java" else None


def client_kind(value: Any) -> str:
    """A ``client:`` value: ``sim``, ``go`` or ``java:VERSION``."""
    from mqadmin.scenario.values import _Bad, text

    name = text(value)
    if name in (SIM, GO, GRPC_PYTHON):
        return name
    if name == GRPC_JAVA:
        return f"{GRPC_JAVA}:{GRPC_JAVA_DEFAULT}"
    for prefix, component in (("java:", "client"), (f"{GRPC_JAVA}:", "grpc-client")):
        if name.startswith(prefix):
            try:
                check_version(name[len(prefix):], component)
            except ArtifactError as exc:
                raise _Bad(str(exc)) from None
            return name
    raise _Bad(f"must be {KINDS} (e.g. java:5.3.3, grpc-java:{GRPC_JAVA_DEFAULT}), got {name!r}")


def read(sec: _Section, section: str) -> str:
    """The group's ``client:``, after refusing the options that client cannot take."""
    client = sec.get("client", client_kind, SIM)
    for option, why in UNSUPPORTED.get((family(client), section), {}).items():
        if sec.has(option):
            raise sec.fail(option, f"not with client {client}: {why}")
    return client


def read_api(sec: _Section, client: str) -> tuple[str, float]:
    """A consumer group's ``api`` (push or simple) and, for a simple consumer, its ``invisible_time`` (s)."""
    from mqadmin.scenario.values import choice, number

    api = sec.get("api", choice("push", "simple"), "push")
    if api != "push" and not is_grpc(client):
        raise sec.fail("api", f"simple consumers are RocketMQ 5's: client {client} has push consumers only")
    invisible = sec.get("invisible_time", number(1, 3600), 15.0)
    if sec.has("invisible_time") and api != "simple":
        raise sec.fail("invisible_time", "is a simple consumer's (api: simple); a push consumer's is the Proxy's")
    return api, invisible


def resolve_proxy(cluster: ClusterSpec, groups: tuple[ProducerGroup, ...], consumers: tuple[ConsumerGroupSpec, ...],
                  fail: Callable[[str], Exception]) -> ClusterSpec:
    """``cluster.proxy``: the version given, else :data:`PROXY_DEFAULT` when a RocketMQ 5 client needs one
    (an operator who asks for a gRPC client means its Proxy too), else none."""
    grpc = [c for c in [*(g.client for g in groups), *(s.client for s in consumers)] if is_grpc(c)]
    proxy = cluster.proxy
    if proxy is None and grpc:
        proxy = PROXY_DEFAULT
    if proxy is not None and (cluster.auth or cluster.tls):
        raise fail(f"the Proxy{' the gRPC clients need' if cluster.proxy is None else ''} cannot be combined "
                   "with auth or tls yet")
    return dataclasses.replace(cluster, proxy=proxy)


def proxy_version(value: Any) -> str:
    """A ``cluster.proxy`` value: a RocketMQ version with a Proxy (5.0.0 on)."""
    from mqadmin.scenario.values import _Bad, text

    version = text(value)
    try:
        return check_version(version, "proxy")
    except ArtifactError as exc:
        raise _Bad(str(exc)) from None


__all__ = ["GO", "GRPC_JAVA", "GRPC_JAVA_DEFAULT", "GRPC_PYTHON", "PROXY_DEFAULT", "SIM", "UNSUPPORTED",
           "client_kind", "family", "grpc_java_version", "is_grpc", "is_real", "java_version", "proxy_version",
           "read", "read_api", "resolve_proxy"]
