"""NameServer configuration with RocketMQ's keys, defaults and file format.

Field names are RocketMQ's property keys on purpose (camelCase), so a
``namesrv.properties`` written for Java works unchanged and
GET_NAMESRV_CONFIG renders the same text a Java NameServer does. Keys
marked "extension" do not exist in Java; they make timeouts testable and
bound what one request may cost. Integer keys are Java ``int`` unless listed
in :data:`LONG_KEYS` (``long``), and are range-checked as such.

Which keys UPDATE_NAMESRV_CONFIG may change, and when a change takes effect,
is :mod:`namesrv.config_policy`'s business.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from remoting import properties
from remoting.javatypes import JavaRangeError, NotANumber, parse_int
from security.access import ConfigValueError, parse_classes
from security.acl_addresses import LOOPBACK_PATTERNS, AddressPatternError, parse_list
from security.tls_config import TlsConfigError, TlsSettings, is_secret_key
from server_runtime.limits import DEFAULT_TOTAL_READ_BUFFER, default_max_connections, water_marks
from server_runtime.logfile import DEFAULT_MAX_INDEX, DEFAULT_MAX_SIZE, MAX_INDEX_RANGE, MAX_SIZE_RANGE
from server_runtime.regular_file import load_properties

_HOME = os.path.expanduser("~")


class ConfigError(ValueError):
    """A configuration value or file that cannot be used; the text names it."""


@dataclass
class NamesrvConfig:
    # NamesrvConfig (5.3.3)
    rocketmqHome: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    kvConfigPath: str = os.path.join(_HOME, "namesrv", "kvConfig.json")
    configStorePath: str = os.path.join(_HOME, "namesrv", "namesrv.properties")
    productEnvName: str = "center"
    clusterTest: bool = False
    orderMessageEnable: bool = False
    configBlackList: str = "configBlackList;configStorePath;kvConfigPath"
    returnOrderTopicConfigToBroker: bool = True
    clientRequestThreadPoolNums: int = 8
    defaultThreadPoolNums: int = 16
    clientRequestThreadPoolQueueCapacity: int = 50000
    defaultThreadPoolQueueCapacity: int = 10000
    scanNotActiveBrokerInterval: int = 5000
    unRegisterBrokerQueueCapacity: int = 3000
    supportActingMaster: bool = False
    enableAllTopicList: bool = True
    enableTopicList: bool = True
    notifyMinBrokerIdChanged: bool = False
    enableControllerInNamesrv: bool = False
    needWaitForService: bool = False
    waitSecondsForService: int = 45
    deleteTopicWithBrokerRegistration: bool = False
    # NettyServerConfig (5.3.3)
    bindAddress: str = "0.0.0.0"
    listenPort: int = 9876
    serverWorkerThreads: int = 8
    serverCallbackExecutorThreads: int = 0
    serverSelectorThreads: int = 3
    serverOnewaySemaphoreValue: int = 256
    serverAsyncSemaphoreValue: int = 64
    serverChannelMaxIdleTimeSeconds: int = 120
    serverSocketSndBufSize: int = 0
    serverSocketRcvBufSize: int = 0
    writeBufferHighWaterMark: int = 0
    writeBufferLowWaterMark: int = 0
    serverSocketBacklog: int = 1024
    serverPooledByteBufAllocatorEnable: bool = True
    serverNettyWorkerGroupEnable: bool = True
    enableShutdownGracefully: bool = False
    shutdownWaitTimeSeconds: int = 30
    useEpollNativeSelector: bool = False
    # extensions
    brokerChannelExpiredTime: int = 120000  # default broker heartbeat timeout, ms
    frameMaxLength: int = 16 * 1024 * 1024  # Java's com.rocketmq.remoting.frameMaxLength
    # connections beyond this are refused; default min(10000, RLIMIT_NOFILE soft limit - 128)
    serverMaxConnections: int = field(default_factory=default_max_connections)
    serverTotalReadBufferBytes: int = DEFAULT_TOTAL_READ_BUFFER  # all partial frames together
    # extensions: bounds on what one request may cost
    registerBodyMaxInflatedBytes: int = 16 * 1024 * 1024  # a compressed register body inflates to at most this
    # a plain (JSON) register body is at most this (0: frameMaxLength); parsing holds the loop ~20 ms per MB
    registerBodyMaxBytes: int = 0
    #: a plain-JSON register body the scan cannot cut is parsed in one go only up to this (0: no bound);
    #: about 20 ms of loop per MiB on a busy machine
    registerBodyMaxWholeParseBytes: int = 1024 * 1024
    maxBrokers: int = 10_000  # live brokers in the route table
    maxBrokersPerConnection: int = 128  # live brokers registered over one connection (a Java broker uses one)
    registerBodyMaxTopics: int = 200_000  # topics in one REGISTER_BROKER
    #: topics in the whole route table (about 450 bytes of RSS each); a registration past it is refused
    maxTopics: int = 600_000
    registerBodyMaxJsonDepth: int = 32  # nesting of the kept parts of a register body (mapping infos)
    kvKeyMaxBytes: int = 1024  # UTF-8 bytes of a KV namespace or key
    kvValueMaxBytes: int = 64 * 1024  # UTF-8 bytes of a KV value
    kvNamespaceMaxBytes: int = 4 * 1024 * 1024  # one namespace's table as JSON (what GET_KVLIST / REGISTER_BROKER carry)
    kvTotalMaxBytes: int = 8 * 1024 * 1024  # the whole KV table as JSON (kvConfig.json)
    configUpdateMaxBytes: int = 64 * 1024  # body of one UPDATE_NAMESRV_CONFIG
    # warm restart (extensions): see namesrv/snapshot.py
    warmRestartEnable: bool = True  # write the route snapshot and restore it on start
    routeSnapshotPath: str = ""  # "" = routeSnapshot.msgpack beside kvConfigPath
    routeSnapshotIntervalMillis: int = 1000  # at most one write per interval, only after a change
    routeSnapshotMaxAgeMillis: int = 120000  # an older snapshot is ignored (Java's broker expiry)
    # logging (extensions): see server_runtime/logfile.py
    logFile: str = ""  # "" = stderr; else this file, rotated by size
    logFileMaxSize: int = DEFAULT_MAX_SIZE  # bytes a log file may reach before it rotates
    logFileMaxIndex: int = DEFAULT_MAX_INDEX  # rotated files kept (logFile.1 .. logFile.N)
    # access control (see docs/security.md): aclEnable is the Java broker's key, the rest extensions
    aclEnable: bool = False  # check requests against the accounts of aclConfigPath
    aclConfigPath: str = ""  # a plain_acl.yml; "" = <rocketmqHome>/conf/plain_acl.yml, as a Java broker
    aclUnsignedClasses: str = "route-read"  # with accounts: classes open to unsigned requests
    adminAddressesWithoutAuth: str = LOOPBACK_PATTERNS  # without accounts: who may send admin-write
    allowRemoteAdminWithoutAuth: bool = False  # without accounts: admin-write from every peer
    # metrics (extensions, docs/metrics.md): /metrics in the Prometheus text format
    metricsPort: int = 0  # 0: no metrics; -1: any free port (printed at start)
    metricsBindAddress: str = "127.0.0.1"  # where /metrics listens; 0.0.0.0 to let other hosts scrape

    #: Keys from a -c file that match no field: kept and shown, like Java.
    extra: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.routeSnapshotPath:
            self.routeSnapshotPath = default_snapshot_path(self.kvConfigPath)

    # ------------------------------------------------------------------

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if f.name != "extra"]

    def as_properties(self) -> dict[str, str]:
        """Every setting as Java's Configuration renders it (sorted later)."""
        props = dict(self.extra)
        for key in self.keys():
            props[key] = _render(getattr(self, key))
        return props

    def render(self, *, public: bool = False) -> str:
        """The config as properties text, escaped so it parses back to exactly these values.

        ``public`` (GET_NAMESRV_CONFIG) hides key passwords (``tls.server.keyPassword``):
        the file keeps them, a config listing does not show them.
        """
        props = self.as_properties()
        if public:
            props = {k: ("******" if v and is_secret_key(k) else v) for k, v in props.items()}
        return properties.store(props)

    def tls_settings(self) -> TlsSettings:
        """The ``tls.*`` keys of the config file (Java reads them as system properties)."""
        try:
            return TlsSettings.from_properties(self.extra)
        except TlsConfigError as exc:
            raise ConfigError(str(exc)) from None

    def parse_values(self, props: Mapping[str, str]) -> dict[str, Any]:
        """Typed values for the known keys in ``props``; ConfigError names a bad one."""
        types = {f.name: f.type for f in dataclasses.fields(self)}
        parsed: dict[str, Any] = {}
        for key, text in props.items():
            kind = types.get(key)
            if kind is None or key == "extra":
                continue
            parsed[key] = _parse(key, text, kind, 64 if key in LONG_KEYS else 32)
        return parsed

    def apply(self, values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            setattr(self, key, value)

    def protected_keys(self) -> set[str]:
        """Keys UPDATE_NAMESRV_CONFIG must refuse (CVE-2023-37582 class).

        Java 5.2+ refuses its black list; we also refuse every key whose
        value is a filesystem path, so no request can point the server's
        writes at a file of the caller's choice; nor the access-control keys:
        only the config file (and a restart) may open or close access.
        """
        keys = {"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome", *ACCESS_KEYS}
        keys.update(k.strip() for k in self.configBlackList.split(";") if k.strip())
        return keys

    @staticmethod
    def is_path_key(key: str) -> bool:
        lowered = key.lower()
        return "path" in lowered or lowered.endswith(("dir", "directory", "home", "file"))

    def validate(self) -> None:
        if not 0 <= self.listenPort <= 65535:
            raise ConfigError(f"listenPort {self.listenPort} is not a TCP port (0-65535)")
        if not -1 <= self.metricsPort <= 65535:
            raise ConfigError(f"metricsPort {self.metricsPort} is not a TCP port (1-65535), 0 (off) or -1 (any free port)")
        if not self.metricsBindAddress.strip():
            raise ConfigError("metricsBindAddress must not be empty (127.0.0.1 by default)")
        for key in ("scanNotActiveBrokerInterval", "brokerChannelExpiredTime", "serverChannelMaxIdleTimeSeconds"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"{key} must be positive, got {getattr(self, key)}")
        if not 1024 <= self.frameMaxLength <= 1 << 30:
            raise ConfigError(f"frameMaxLength must be between 1024 and {1 << 30}, got {self.frameMaxLength}")
        if self.serverMaxConnections <= 0:
            raise ConfigError("serverMaxConnections must be positive")
        if self.serverTotalReadBufferBytes < 1024 * 1024:
            raise ConfigError(
                f"serverTotalReadBufferBytes must be at least 1048576, got {self.serverTotalReadBufferBytes}"
            )
        try:
            water_marks(self.writeBufferHighWaterMark, self.writeBufferLowWaterMark)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        for key, (low, high) in BOUNDS.items():
            value = getattr(self, key)
            if not low <= value <= high:
                raise ConfigError(f"{key} must be between {low} and {high}, got {value}")
        try:
            parse_classes(self.aclUnsignedClasses)
            parse_list(self.adminAddressesWithoutAuth)
        except (ConfigValueError, AddressPatternError) as exc:
            raise ConfigError(f"aclUnsignedClasses/adminAddressesWithoutAuth: {exc}") from None
        for key, low in (("routeSnapshotIntervalMillis", 10), ("routeSnapshotMaxAgeMillis", 1)):
            if not low <= getattr(self, key) <= 86_400_000:
                raise ConfigError(f"{key} must be between {low} and 86400000 (one day), got {getattr(self, key)}")
        self.tls_settings()


#: The access-control keys: never changed by a request.
ACCESS_KEYS = frozenset(
    {"aclEnable", "aclConfigPath", "aclUnsignedClasses", "adminAddressesWithoutAuth", "allowRemoteAdminWithoutAuth"}
)
#: Integer keys that are Java ``long``; every other integer key is an ``int``.
LONG_KEYS = frozenset({"scanNotActiveBrokerInterval", "brokerChannelExpiredTime"})
#: The longest readiness wait a NameServer may be told to keep (seconds).
MAX_WAIT_SECONDS_FOR_SERVICE = 600
_MIB = 1024 * 1024
#: Inclusive ranges of keys whose values would otherwise disable a bound.
BOUNDS: dict[str, tuple[int, int]] = {
    "waitSecondsForService": (0, MAX_WAIT_SECONDS_FOR_SERVICE),
    "registerBodyMaxInflatedBytes": (_MIB, 1024 * _MIB),
    "registerBodyMaxBytes": (0, 1024 * _MIB),
    "registerBodyMaxWholeParseBytes": (0, 1024 * _MIB),
    "maxBrokers": (1, 10_000_000),
    "maxBrokersPerConnection": (1, 10_000_000),
    "registerBodyMaxTopics": (1, 10_000_000),
    "maxTopics": (1, 100_000_000),
    "registerBodyMaxJsonDepth": (4, 256),
    "kvKeyMaxBytes": (16, _MIB),
    "kvValueMaxBytes": (16, 64 * _MIB),
    "kvNamespaceMaxBytes": (1024, 256 * _MIB),
    "kvTotalMaxBytes": (1024, 1024 * _MIB),
    "configUpdateMaxBytes": (1024, 16 * _MIB),
    "logFileMaxSize": MAX_SIZE_RANGE,
    "logFileMaxIndex": MAX_INDEX_RANGE,
}


def default_snapshot_path(kv_config_path: str) -> str:
    """The route snapshot's default home: beside the KV config, as the NameServer's other state."""
    return os.path.join(os.path.dirname(kv_config_path), "routeSnapshot.msgpack")


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse(key: str, text: str, kind: Any, bits: int) -> Any:
    value = text.strip()
    if kind in (bool, "bool"):
        lowered = value.lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"{key}={_short(text)} is not true or false")
        return lowered == "true"
    if kind in (int, "int"):
        try:
            return parse_int(value, bits, key)
        except NotANumber:
            raise ConfigError(f"{key}={_short(text)} is not an integer") from None
        except JavaRangeError as exc:
            raise ConfigError(str(exc)) from None
    return value


def _short(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def load_file(path: str) -> NamesrvConfig:
    """Build a config from a ``-c`` properties file (configStorePath := path)."""
    props = load_properties(path, ConfigError)
    config = NamesrvConfig()
    try:
        config.apply(config.parse_values(props))
    except ConfigError as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    known = set(NamesrvConfig.keys())
    config.extra = {k: v for k, v in props.items() if k not in known}
    if not props.get("routeSnapshotPath", "").strip():
        config.routeSnapshotPath = default_snapshot_path(config.kvConfigPath)
    config.configStorePath = path
    config.validate()
    return config
