"""Which keys UPDATE_NAMESRV_CONFIG may change, and what the change may be.

Java applies any key of an update to its config objects by reflection and
rewrites the ``-c`` file with it, so a request can move the listening port,
point KV writes at another file, or set a readiness wait that takes every
route offline. Here each key has a class:

- ``live``: applied at once; the next request (or housekeeping round) uses it.
- ``restart``: accepted and written to the config file; read only at start.
- ``inert``: a Java key kept and shown for compatibility; nothing here uses it.
- ``refused``: never changed at run time: paths, the black list, the
  listening address, and whatever ``configBlackList`` names.

Live keys whose new value would take routing down are refused too (see
:func:`check_update`). The table is shared with ``mqadmin getNamesrvConfig
--classes``, which shows each key's class without any request of our own:
GET_NAMESRV_CONFIG stays the properties text Java's mqadmin parses.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from namesrv.config import ACCESS_KEYS, MAX_WAIT_SECONDS_FOR_SERVICE, NamesrvConfig
from namesrv.route_model import LiveBroker

LIVE = "live"
RESTART = "restart"
INERT = "inert"
REFUSED = "refused"

#: Keys applied at once (read per request or per housekeeping round).
LIVE_KEYS = frozenset(
    {
        "orderMessageEnable",
        "returnOrderTopicConfigToBroker",
        "scanNotActiveBrokerInterval",
        "supportActingMaster",
        "enableAllTopicList",
        "enableTopicList",
        "needWaitForService",
        "waitSecondsForService",
        "deleteTopicWithBrokerRegistration",
        "serverChannelMaxIdleTimeSeconds",
        "brokerChannelExpiredTime",
        "serverMaxConnections",
        "registerBodyMaxInflatedBytes",
        "registerBodyMaxBytes",
        "registerBodyMaxWholeParseBytes",
        "maxBrokers",
        "maxBrokersPerConnection",
        "registerBodyMaxTopics",
        "maxTopics",
        "registerBodyMaxJsonDepth",
        "kvKeyMaxBytes",
        "kvValueMaxBytes",
        "kvNamespaceMaxBytes",
        "kvTotalMaxBytes",
        "configUpdateMaxBytes",
    }
)
#: Java keys with no effect in this server (thread pools, Netty switches).
INERT_KEYS = frozenset(
    {
        "productEnvName",
        "clusterTest",
        "clientRequestThreadPoolNums",
        "defaultThreadPoolNums",
        "clientRequestThreadPoolQueueCapacity",
        "defaultThreadPoolQueueCapacity",
        "unRegisterBrokerQueueCapacity",
        "notifyMinBrokerIdChanged",
        "enableControllerInNamesrv",
        "serverWorkerThreads",
        "serverCallbackExecutorThreads",
        "serverSelectorThreads",
        "serverOnewaySemaphoreValue",
        "serverAsyncSemaphoreValue",
        "serverSocketSndBufSize",
        "serverSocketRcvBufSize",
        "serverPooledByteBufAllocatorEnable",
        "serverNettyWorkerGroupEnable",
        "enableShutdownGracefully",
        "shutdownWaitTimeSeconds",
        "useEpollNativeSelector",
    }
)
#: Keys no update may change, whatever the black list says.
ALWAYS_REFUSED = frozenset(
    {"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome", "listenPort", "bindAddress",
     "metricsPort", "metricsBindAddress"}
    | ACCESS_KEYS
)

#: Run-time floors and ceilings of live keys: ``(floor, ceiling)``, None where there is none.
#: An update may not move a value below its floor (nor above its ceiling) -- unless it moves
#: it toward the safe side, so a server started with short test timings can still raise them.
LIVE_LIMITS: dict[str, tuple[int | None, int | None]] = {
    # An expiry under 1.5 x the longest period a Java broker may register at (60 s) drops
    # healthy brokers (brokerChannelExpiredTime=1 expires all of them at the next scan); one
    # over 10 min keeps a dead broker routed for as long.
    "brokerChannelExpiredTime": (90_000, 600_000),
    # A scan every few ms holds the event loop over a large table; the housekeeping also sleeps
    # a whole interval before reading the next value, so a huge one would never be undone.
    "scanNotActiveBrokerInterval": (1_000, 60_000),
    # Idle broker connections are closed, and a closed connection drops its brokers.
    "serverChannelMaxIdleTimeSeconds": (90, None),
    # Java brokers' registrations (and route answers) must still fit a frame.
    "frameMaxLength": (4 * 1024 * 1024, None),
}
#: Live keys that may not go below what the running server uses now, and what that is.
IN_USE_FLOORS: dict[str, str] = {
    "serverMaxConnections": "the connections open now",
    "maxBrokers": "the brokers registered now",
    "maxBrokersPerConnection": "the most brokers one connection registered",
    "registerBodyMaxTopics": "the most topics one live broker registered",
    "registerBodyMaxBytes": "the largest uncompressed registration of a live broker (0: no bound)",
}
MIN_LIVE_FRAME_MAX_LENGTH = LIVE_LIMITS["frameMaxLength"][0]
MIN_LIVE_IDLE_SECONDS = LIVE_LIMITS["serverChannelMaxIdleTimeSeconds"][0]


def limits_text(key: str) -> str | None:
    """What bounds a live update of ``key`` (for ``getNamesrvConfig --classes``), or None."""
    floor, ceiling = LIVE_LIMITS.get(key, (None, None))
    parts = []
    if floor is not None:
        parts.append(f"not below {floor}")
    if ceiling is not None:
        parts.append(f"not above {ceiling}")
    if key in IN_USE_FLOORS:
        parts.append(f"not below {IN_USE_FLOORS[key]}")
    return ", ".join(parts) or None


def key_class(key: str, black_list: str = "") -> str:
    """``live``, ``restart``, ``inert`` or ``refused`` for one key.

    ``black_list`` is the server's ``configBlackList`` (``;``-separated),
    whose keys are refused too. Keys listed nowhere are read once at start,
    hence ``restart``.
    """
    if key in ALWAYS_REFUSED or NamesrvConfig.is_path_key(key):
        return REFUSED
    if key in {k.strip() for k in black_list.split(";")}:
        return REFUSED
    if key in LIVE_KEYS:
        return LIVE
    if key in INERT_KEYS:
        return INERT
    return RESTART


def config_view(props: dict[str, str], with_classes: bool) -> dict[str, object]:
    """A GET_NAMESRV_CONFIG answer for display: ``{key: value}``, or with classes
    ``{key: {"value": value, "class": class}}``, live keys with their run-time
    bounds as ``"limits"`` (e.g. ``"not below 90000, not above 600000"``)."""
    if not with_classes:
        return dict(props)
    black_list = props.get("configBlackList", "")
    view: dict[str, object] = {}
    for key, value in props.items():
        entry = {"value": value, "class": key_class(key, black_list)}
        limits = limits_text(key) if entry["class"] == LIVE else None
        if limits is not None:
            entry["limits"] = limits
        view[key] = entry
    return view


_WHY = {
    "brokerChannelExpiredTime": "healthy brokers would expire between their registrations, or dead ones stay routed",
    "scanNotActiveBrokerInterval": "the scans would hold the server, or dead brokers would never expire",
    "serverChannelMaxIdleTimeSeconds": "idle broker connections would close and drop their brokers",
    "frameMaxLength": "brokers' registrations would no longer fit a frame",
}


class UpdateRefused(Exception):
    """An update the server will not apply; ``permission`` picks NO_PERMISSION."""

    def __init__(self, remark: str, *, permission: bool = False) -> None:
        super().__init__(remark)
        self.remark = remark
        self.permission = permission


@dataclass(frozen=True, slots=True)
class RuntimeState:
    """What the checks need to know about the running server (the in-use floors' values)."""

    connections: int
    uptime_seconds: float
    brokers: int = 0
    brokers_per_connection: int = 0
    topics_per_broker: int = 0
    register_body_bytes: int = 0

    def in_use(self, key: str) -> int:
        return {
            "serverMaxConnections": self.connections,
            "maxBrokers": self.brokers,
            "maxBrokersPerConnection": self.brokers_per_connection,
            "registerBodyMaxTopics": self.topics_per_broker,
            "registerBodyMaxBytes": self.register_body_bytes,
        }[key]


def observed_state(
    live: Mapping[tuple[str, str], LiveBroker], connections: int, uptime_seconds: float, body_sizes: Iterable[int]
) -> RuntimeState:
    """The running server's use of the bounds with in-use floors (one pass over the live brokers)."""
    per_conn = Counter(info.conn for info in live.values() if info.conn is not None)
    return RuntimeState(
        connections=connections,
        uptime_seconds=uptime_seconds,
        brokers=len(live),
        brokers_per_connection=max(per_conn.values(), default=0),
        topics_per_broker=max((info.topic_count for info in live.values()), default=0),
        register_body_bytes=max(body_sizes, default=0),
    )


def control_character(text: str) -> str | None:
    """The first control, format or unpaired-surrogate character of ``text``, as U+XXXX."""
    for ch in text:
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            return f"U+{ord(ch):04X}"
    return None


def check_text(props: Mapping[str, str]) -> None:
    """Refuse keys and values that carry control characters (a newline is a new key)."""
    for key, value in props.items():
        for what, text in (("key", key), ("value", value)):
            bad = control_character(text)
            if bad is not None:
                raise UpdateRefused(f"invalid config value: the {what} of {key[:60]!r} holds control character {bad}")


def check_classes(props: Mapping[str, str], current: NamesrvConfig) -> None:
    """Refuse refused-class keys; the listening address only when it would change."""
    protected = current.protected_keys()
    if any(k in protected or NamesrvConfig.is_path_key(k) for k in props):
        raise UpdateRefused("Can not update config in black list.", permission=True)
    for key in ("listenPort", "bindAddress", "metricsPort", "metricsBindAddress"):
        if key in props and props[key].strip() != str(getattr(current, key)):
            raise UpdateRefused(
                f"{key} cannot change at run time (restart-only): set it in the config file and restart",
                permission=True,
            )


def check_update(updated: NamesrvConfig, current: NamesrvConfig, state: RuntimeState) -> None:
    """Refuse new values of live keys that would take routing down now."""
    for key, (floor, ceiling) in LIVE_LIMITS.items():
        new, old = getattr(updated, key), getattr(current, key)
        if floor is not None and new < floor and new < old:
            raise UpdateRefused(f"invalid config value: {key} below {floor} cannot be set at run time ({_WHY[key]})")
        if ceiling is not None and new > ceiling and new > old:
            raise UpdateRefused(f"invalid config value: {key} above {ceiling} cannot be set at run time ({_WHY[key]})")
    for key, what in IN_USE_FLOORS.items():
        new, used = getattr(updated, key), state.in_use(key)
        if new != getattr(current, key) and new < used and not (key == "registerBodyMaxBytes" and new == 0):
            raise UpdateRefused(f"invalid config value: {key} {new} is below {what} ({used})")
    if updated.waitSecondsForService > MAX_WAIT_SECONDS_FOR_SERVICE:  # also enforced by validate()
        raise UpdateRefused(f"invalid config value: waitSecondsForService above {MAX_WAIT_SECONDS_FOR_SERVICE}")
    waiting_now = current.needWaitForService and state.uptime_seconds < current.waitSecondsForService
    waiting_after = updated.needWaitForService and state.uptime_seconds < updated.waitSecondsForService
    if waiting_after and not waiting_now:
        raise UpdateRefused(
            "invalid config value: needWaitForService/waitSecondsForService would answer "
            f"'name server not ready' to every route query for {updated.waitSecondsForService - state.uptime_seconds:.0f} s"
        )
