"""``client:`` of a load or consumer group: which client program sends or consumes.

- ``sim`` (the default): simulated clients (:mod:`simclient`), many on one trio loop;
- ``java:VERSION``: Apache's Java client of that RocketMQ version (4.9.7, 5.x), run by our harness
  programs, one JVM per producer group and one per consumer;
- ``go``: Apache's Go client (rocketmq-client-go/v2), likewise.

A real client takes the group's options the way its own API does. An option it has no setting for
is an error when the file sets it, rather than a silent difference between what the file says and
what ran: :data:`UNSUPPORTED` lists them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mqadmin.rocketmq.artifacts import ArtifactError, check_version

if TYPE_CHECKING:
    from mqadmin.scenario.values import _Section

SIM = "sim"
GO = "go"
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
}


def family(client: str) -> str:
    """``sim``, ``java`` or ``go``."""
    return client.split(":", 1)[0]


def is_real(client: str) -> bool:
    return client != SIM


def java_version(client: str) -> str | None:
    """The RocketMQ version of a ``java:VERSION`` client, else None."""
    return client.split(":", 1)[1] if family(client) == "java" else None


def client_kind(value: Any) -> str:
    """A ``client:`` value: ``sim``, ``go`` or ``java:VERSION``."""
    from mqadmin.scenario.values import _Bad, text

    name = text(value)
    if name in (SIM, GO):
        return name
    if name.startswith("java:"):
        try:
            check_version(name[5:], "client")
        except ArtifactError as exc:
            raise _Bad(str(exc)) from None
        return name
    raise _Bad(f"must be sim, go or java:VERSION (e.g. java:5.3.3, java:4.9.7), got {name!r}")


def read(sec: _Section, section: str) -> str:
    """The group's ``client:``, after refusing the options that client cannot take."""
    client = sec.get("client", client_kind, SIM)
    for option, why in UNSUPPORTED.get((family(client), section), {}).items():
        if sec.has(option):
            raise sec.fail(option, f"not with client {client}: {why}")
    return client


__all__ = ["GO", "SIM", "UNSUPPORTED", "client_kind", "family", "is_real", "java_version", "read"]
