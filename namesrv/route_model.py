"""The records of the NameServer's routing table (no behaviour beyond encoding).

Kept apart from :mod:`namesrv.routes` so that the table, the registration
planner (:mod:`namesrv.registration`) and the answer cache
(:mod:`namesrv.route_answers`), which the table uses, share them without an
import cycle; :mod:`namesrv.routes` re-exports every name.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from remoting.bodies import BodyError, DataVersion, broker_data_obj

#: (brokerName, readQueueNums, writeQueueNums, perm, topicSysFlag). Tuples are
#: interned so 320,000 (topic, broker) pairs cost a pointer each.
QueueData = tuple[str, int, int, int, int]

DEFAULT_BROKER_CHANNEL_EXPIRED_MS = 120_000
SYNC_BROKER_MEMBER_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"


@dataclass(slots=True)
class BrokerEntry:
    """The table's BrokerData: one master/slave set, by brokerName.

    Not :class:`remoting.bodies.BrokerData`, the wire's value of the same
    fields, because this record is the table's own: registrations and
    departures change its addresses, acting-master flag and zone in place,
    and a route may show it with the acting master's address rewritten
    (``to_obj(addrs)``); a BrokerData is parsed from a peer and never
    changed. One encoding serves both (:func:`remoting.bodies.broker_data_obj`).
    """

    cluster: str
    name: str
    addrs: dict[int, str]
    enable_acting_master: bool = False
    zone_name: str | None = None

    def to_obj(self, addrs: dict[int, str] | None = None) -> dict[str, Any]:
        return broker_data_obj(self.cluster, self.name, self.addrs if addrs is None else addrs,
                               self.enable_acting_master, self.zone_name)


@dataclass(slots=True)
class LiveBroker:
    """BrokerLiveInfo, plus what lets an unchanged re-registration skip work."""

    cluster: str
    addr: str
    name: str
    broker_id: int
    last_update_ms: float
    timeout_ms: int
    data_version: DataVersion
    conn: Hashable
    ha_server_addr: str | None
    body_digest: bytes | None = None
    topic_count: int = 0
    applied_as_writer: bool = False
    applied_epoch: int = -1


@dataclass(slots=True)
class Registration:
    """The header of a REGISTER_BROKER request."""

    cluster: str
    addr: str
    name: str
    broker_id: int
    ha_server_addr: str | None = None
    zone_name: str | None = None
    heartbeat_timeout_ms: int | None = None
    enable_acting_master: bool | None = None  # None: a pre-5.x broker


@dataclass(slots=True)
class RegisterOutcome:
    ok: bool
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(slots=True)
class Removed:
    """A broker address dropped from the table (for logging and closing)."""

    cluster: str
    name: str
    addr: str
    conn: Hashable | None
    reason: str


@dataclass
class RouteOptions:
    """NameServer options that change what the table answers."""

    support_acting_master: bool = False
    delete_topic_with_broker_registration: bool = False
    default_timeout_ms: int = DEFAULT_BROKER_CHANNEL_EXPIRED_MS
    #: Topics the table may hold (maxTopics; None: no bound): more is refused.
    max_topics: int | None = None


class TopicTableFull(BodyError):
    """A registration would take the route table past maxTopics: refused whole, nothing changes."""

    def __init__(self, held: int, new: int, limit: int, *, exact: bool) -> None:
        more = f"{new}" if exact else f"at least {new}"
        super().__init__(
            f"topic table full: the NameServer holds {held} topics and this registration would add {more}"
            f" new ones, past maxTopics ({limit}); nothing was changed"
        )
