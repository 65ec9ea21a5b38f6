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
from collections.abc import Mapping
from dataclasses import dataclass

from namesrv.config import MAX_WAIT_SECONDS_FOR_SERVICE, NamesrvConfig

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
    {"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome", "listenPort", "bindAddress"}
)

#: Run-time floors: lower values would cut brokers off or refuse their frames.
MIN_LIVE_FRAME_MAX_LENGTH = 4 * 1024 * 1024
#: 1.5 x the longest registration period of a Java broker (60 s): idle
#: broker connections are closed, and a closed connection drops the broker.
MIN_LIVE_IDLE_SECONDS = 90


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
    """A GET_NAMESRV_CONFIG answer for display: ``{key: value}``, or with
    classes ``{key: {"value": value, "class": class}}``."""
    if not with_classes:
        return dict(props)
    black_list = props.get("configBlackList", "")
    return {k: {"value": v, "class": key_class(k, black_list)} for k, v in props.items()}


class UpdateRefused(Exception):
    """An update the server will not apply; ``permission`` picks NO_PERMISSION."""

    def __init__(self, remark: str, *, permission: bool = False) -> None:
        super().__init__(remark)
        self.remark = remark
        self.permission = permission


@dataclass(frozen=True, slots=True)
class RuntimeState:
    """What the checks need to know about the running server."""

    connections: int
    uptime_seconds: float


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
    for key in ("listenPort", "bindAddress"):
        if key in props and props[key].strip() != str(getattr(current, key)):
            raise UpdateRefused(
                f"{key} cannot change at run time (restart-only): set it in the config file and restart",
                permission=True,
            )


def check_update(updated: NamesrvConfig, current: NamesrvConfig, state: RuntimeState) -> None:
    """Refuse new values of live keys that would take routing down now."""
    if updated.serverMaxConnections != current.serverMaxConnections and updated.serverMaxConnections < state.connections:
        raise UpdateRefused(
            f"invalid config value: serverMaxConnections {updated.serverMaxConnections} is below "
            f"the {state.connections} connections open now"
        )
    if updated.frameMaxLength != current.frameMaxLength and updated.frameMaxLength < MIN_LIVE_FRAME_MAX_LENGTH:
        raise UpdateRefused(
            f"invalid config value: frameMaxLength below {MIN_LIVE_FRAME_MAX_LENGTH} cannot be set at run time"
        )
    idle = updated.serverChannelMaxIdleTimeSeconds
    if idle != current.serverChannelMaxIdleTimeSeconds and idle < MIN_LIVE_IDLE_SECONDS:
        raise UpdateRefused(
            f"invalid config value: serverChannelMaxIdleTimeSeconds below {MIN_LIVE_IDLE_SECONDS} "
            "cannot be set at run time (idle broker connections would close and drop their brokers)"
        )
    if updated.waitSecondsForService > MAX_WAIT_SECONDS_FOR_SERVICE:  # also enforced by validate()
        raise UpdateRefused(f"invalid config value: waitSecondsForService above {MAX_WAIT_SECONDS_FOR_SERVICE}")
    waiting_now = current.needWaitForService and state.uptime_seconds < current.waitSecondsForService
    waiting_after = updated.needWaitForService and state.uptime_seconds < updated.waitSecondsForService
    if waiting_after and not waiting_now:
        raise UpdateRefused(
            "invalid config value: needWaitForService/waitSecondsForService would answer "
            f"'name server not ready' to every route query for {updated.waitSecondsForService - state.uptime_seconds:.0f} s"
        )
