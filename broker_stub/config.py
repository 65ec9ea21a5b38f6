"""Broker stub configuration with RocketMQ's broker keys, defaults and file format.

Field names are RocketMQ's ``broker.properties`` keys (camelCase) so a file
written for a Java broker works unchanged. The other Java keys of such a file
(``flushDiskType``, ...) are kept as Java would take them (``java_settings``)
and shown by GET_BROKER_CONFIG with every other key of a Java 5.3.3 broker
(:mod:`broker_stub.broker_config_admin`). Keys marked "extension" do not
exist in Java; they bound memory or make timing testable.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker_stub.delays import DEFAULT_DELAY_LEVELS, parse_levels
from broker_stub.java_broker_config import java_settings
from remoting.acl import Credentials
from remoting.transport import parse_addr
from security.access import ConfigValueError, parse_classes
from security.acl_addresses import LOOPBACK_PATTERNS, AddressPatternError, parse_list
from security.tls_config import TlsConfigError, TlsSettings
from server_runtime.limits import DEFAULT_TOTAL_READ_BUFFER, default_max_connections, water_marks
from server_runtime.logfile import DEFAULT_MAX_INDEX, DEFAULT_MAX_SIZE, MAX_INDEX_RANGE, MAX_SIZE_RANGE
from server_runtime.regular_file import load_properties


class ConfigError(ValueError):
    """A configuration value or file that cannot be used; the text names it."""


#: Keys UPDATE_BROKER_CONFIG may change at runtime. Everything else (ports,
#: identity, addresses) would make the broker lie about itself, so it is refused.
RUNTIME_KEYS = frozenset(
    {
        "brokerPermission",
        "autoCreateTopicEnable",
        "defaultTopicQueueNums",
        "registerNameServerPeriod",
        "forceRegister",
        "brokerHeartbeatInterval",
        "registerBrokerTimeoutMills",
        "longPollingEnable",
        "shortPollingTimeMills",
        "traceOn",
    }
)


#: Run-time bounds of UPDATE_BROKER_CONFIG: (floor, ceiling, why). A value may still move
#: toward the safe side, so a broker started with test timings can have them raised.
RUNTIME_LIMITS: dict[str, tuple[int | None, int | None, str]] = {
    # Java clamps the period to 10-60 s; past a NameServer's 120 s expiry the broker drops off the routes.
    "registerNameServerPeriod": (1000, 60_000, "the broker would expire from the NameServers between registrations"),
    "registerBrokerTimeoutMills": (1000, None, "registrations would time out"),
}
MIN_STORE_BYTES = 1024 * 1024
#: Keys whose values GET_BROKER_CONFIG masks.
SECRET_KEYS = ("secretKey", "innerClientAuthenticationCredentials")


@dataclass
class BrokerConfig:
    brokerClusterName: str = "DefaultCluster"
    brokerName: str = "broker-a"
    brokerId: int = 0
    namesrvAddr: str = field(default_factory=lambda: os.environ.get("NAMESRV_ADDR", ""))
    listenPort: int = 10911
    brokerIP1: str = "127.0.0.1"
    haListenPort: int = 0  # 0: listenPort + 1, as Java derives it
    # extension: also listen on listenPort - 2, the VIP ("fast") port a Java broker always opens
    vipChannelEnabled: bool = True
    brokerPermission: int = 6
    defaultTopicQueueNums: int = 8
    autoCreateTopicEnable: bool = True
    registerNameServerPeriod: int = 30000
    registerBrokerTimeoutMills: int = 6000
    forceRegister: bool = True
    compressedRegister: bool = False  # zlib-compressed REGISTER_BROKER body (large topic tables)
    enableSlaveActingMaster: bool = False
    brokerHeartbeatInterval: int = 1000
    brokerNotActiveTimeoutMillis: int = 10000
    serverChannelMaxIdleTimeSeconds: int = 120
    longPollingEnable: bool = True  # hold a suspend-flagged pull that found nothing
    shortPollingTimeMills: int = 1000  # how long to hold it when long polling is off
    messageDelayLevel: str = DEFAULT_DELAY_LEVELS
    regionId: str = "DefaultRegion"
    # Java's default is ~/store; empty here keeps topics in memory only, so two stubs
    # started with defaults never share a file. Set it to keep topics across restarts.
    storePathRootDir: str = ""
    traceOn: bool = True
    slaveReadEnable: bool = False  # a slave answers pulls only with this set (5.x rejects them otherwise)
    flushConsumerOffsetInterval: int = 5000  # ms between writes of config/consumerOffset.json
    # extensions
    maxMessagesPerQueue: int = 10000  # in-memory queue bound; the oldest message is dropped
    # Bytes the in-memory store may hold (records plus an estimate of their index entries and
    # of each queue's bookkeeping); beyond it the oldest messages of all queues go first.
    # 128 MiB keeps a stub under ~300 MB RSS whatever is sent to it.
    maxStoreBytes: int = 128 * 1024 * 1024
    maxAutoCreatedTopics: int = 1024  # topics the broker creates on its own (sends, retry/DLQ topics)
    maxMessageSize: int = 4 * 1024 * 1024  # Java's maxMessageSize (4 MiB)
    frameMaxLength: int = 16 * 1024 * 1024
    # default min(10000, RLIMIT_NOFILE soft limit - 128)
    serverMaxConnections: int = field(default_factory=default_max_connections)
    serverTotalReadBufferBytes: int = DEFAULT_TOTAL_READ_BUFFER  # all partial frames together
    writeBufferHighWaterMark: int = 0  # Java's keys; 0 = Netty's default (64 KiB / 32 KiB)
    writeBufferLowWaterMark: int = 0
    maxHeldPulls: int = 10000  # long-polling pulls held at once; beyond, answered at once
    maxHeldPops: int = 10000  # long-polling POP requests held at once; beyond, POLLING_FULL at once
    maxPopInFlight: int = 50000  # popped messages not yet acked or revived; beyond, a POP hands out no more
    persistMessages: bool = True  # with storePathRootDir: messages also go to per-queue files, read back on start
    maxKeyIndexEntries: int = 1_000_000  # keys QUERY_MESSAGE finds (UNIQ_KEY and KEYS words), newest; 24 bytes each
    # logging: see server_runtime/logfile.py
    logFile: str = ""  # "" = stderr; else this file, rotated by size
    logFileMaxSize: int = DEFAULT_MAX_SIZE  # bytes a log file may reach before it rotates
    logFileMaxIndex: int = DEFAULT_MAX_INDEX  # rotated files kept (logFile.1 .. logFile.N)
    #: Java broker keys the stub keeps and shows but does not act on (flushDiskType, ...), from the file or
    #: UPDATE_BROKER_CONFIG, as Java takes them (broker_stub.java_broker_config); not a key itself.
    java_settings: dict[str, str] = field(default_factory=dict, metadata={"internal": True})
    # access control (see docs/security.md). Java 4.x's aclEnable; the rest extensions.
    aclEnable: bool = False  # check requests against the accounts of aclConfigPath
    aclConfigPath: str = ""  # a plain_acl.yml; "" = $ROCKETMQ_HOME/conf/plain_acl.yml, as a Java broker
    aclUnsignedClasses: str = ""  # with accounts: classes open to unsigned requests (Java: none)
    adminAddressesWithoutAuth: str = LOOPBACK_PATTERNS  # without accounts: who may send admin-write
    allowRemoteAdminWithoutAuth: bool = False  # without accounts: admin-write from every peer
    # The keys this broker signs its own requests with (to NameServers, and a slave's to its master);
    # innerClientAuthenticationCredentials is Java 5.3's form: {"accessKey":"...","secretKey":"..."}.
    accessKey: str = ""
    secretKey: str = ""
    innerClientAuthenticationCredentials: str = ""
    # metrics (extensions, docs/metrics.md): /metrics in the Prometheus text format
    metricsPort: int = 0  # 0: no metrics; -1: any free port (printed at start)
    metricsBindAddress: str = "127.0.0.1"  # where /metrics listens; 0.0.0.0 to let other hosts scrape
    metricsTopTopics: int = 20  # topics with series of their own; the rest are counted as topic="other"
    #: The tls.* keys (Java's TlsSystemConfig; see security.tls_config): not broker.properties keys in
    #: Java, so neither listed by keys() nor shown by GET_BROKER_CONFIG.
    tls: TlsSettings = field(default_factory=TlsSettings, repr=False, metadata={"internal": True})

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if not f.metadata.get("internal")]

    @property
    def is_master(self) -> bool:
        return self.brokerId == 0

    def namesrv_list(self) -> list[str]:
        """The NameServer addresses, in file order, without duplicates."""
        out: list[str] = []
        for part in self.namesrvAddr.split(";"):
            part = part.strip()
            if part and part not in out:
                out.append(part)
        return out

    def as_properties(self) -> dict[str, str]:
        return {key: _render(getattr(self, key)) for key in self.keys()}

    def credentials(self) -> Credentials | None:
        """The keys to sign this broker's own requests with (None: it does not sign)."""
        access_key, secret_key = self.accessKey.strip(), self.secretKey.strip()
        if not access_key and self.innerClientAuthenticationCredentials.strip():
            try:
                doc = json.loads(self.innerClientAuthenticationCredentials)
            except ValueError:
                raise ConfigError("innerClientAuthenticationCredentials is not JSON") from None
            if not isinstance(doc, dict):
                raise ConfigError('innerClientAuthenticationCredentials must be {"accessKey":...,"secretKey":...}')
            access_key, secret_key = str(doc.get("accessKey") or ""), str(doc.get("secretKey") or "")
        if not access_key and not secret_key:
            return None
        if not access_key or not secret_key:
            raise ConfigError("accessKey and secretKey must be given together")
        return Credentials(access_key, secret_key)

    def parse_values(self, props: Mapping[str, str]) -> dict[str, Any]:
        """Typed values for known keys in ``props`` (unknown keys are ignored, as Java does)."""
        types = {f.name: f.type for f in dataclasses.fields(self) if not f.metadata.get("internal")}
        return {k: _parse(k, v, types[k]) for k, v in props.items() if k in types}

    def validate(self) -> None:
        if not self.brokerName.strip():
            raise ConfigError("brokerName must not be empty")
        if not self.brokerClusterName.strip():
            raise ConfigError("brokerClusterName must not be empty")
        if self.brokerId < 0:
            raise ConfigError(f"brokerId must be >= 0 (0 = master), got {self.brokerId}")
        for key in ("listenPort", "haListenPort"):
            if not 0 <= getattr(self, key) <= 65535:
                raise ConfigError(f"{key} {getattr(self, key)} is not a TCP port (0-65535)")
        if not -1 <= self.metricsPort <= 65535:
            raise ConfigError(f"metricsPort {self.metricsPort} is not a TCP port (1-65535), 0 (off) or -1 (any free port)")
        if not self.metricsBindAddress.strip():
            raise ConfigError("metricsBindAddress must not be empty (127.0.0.1 by default)")
        if not 1 <= self.metricsTopTopics <= 1000:
            raise ConfigError(f"metricsTopTopics must be 1-1000, got {self.metricsTopTopics}")
        if not 0 <= self.brokerPermission <= 7:
            raise ConfigError(f"brokerPermission must be 0-7, got {self.brokerPermission}")
        if not 1 <= self.defaultTopicQueueNums <= 1024:
            raise ConfigError(f"defaultTopicQueueNums must be 1-1024, got {self.defaultTopicQueueNums}")
        for key in (
            "registerNameServerPeriod",
            "registerBrokerTimeoutMills",
            "brokerHeartbeatInterval",
            "brokerNotActiveTimeoutMillis",
            "serverChannelMaxIdleTimeSeconds",
            "maxMessagesPerQueue",
            "maxMessageSize",
            "serverMaxConnections",
            "shortPollingTimeMills",
            "maxHeldPulls",
            "maxHeldPops",
            "maxPopInFlight",
            "flushConsumerOffsetInterval",
            "maxKeyIndexEntries",
        ):
            if getattr(self, key) <= 0:
                raise ConfigError(f"{key} must be positive, got {getattr(self, key)}")
        if self.maxStoreBytes < MIN_STORE_BYTES:
            raise ConfigError(f"maxStoreBytes must be at least {MIN_STORE_BYTES} (1 MiB), got {self.maxStoreBytes}")
        if self.maxAutoCreatedTopics < 0:
            raise ConfigError(f"maxAutoCreatedTopics must be >= 0 (0: none), got {self.maxAutoCreatedTopics}")
        for addr in self.namesrv_list():
            try:
                parse_addr(addr)
            except ValueError:
                raise ConfigError(f"namesrvAddr: {addr!r} is not host:port") from None
        try:
            parse_levels(self.messageDelayLevel)
        except ValueError as exc:
            raise ConfigError(f"messageDelayLevel: {exc}") from None
        if self.serverTotalReadBufferBytes < 1024 * 1024:
            raise ConfigError(
                f"serverTotalReadBufferBytes must be at least 1048576, got {self.serverTotalReadBufferBytes}"
            )
        try:
            water_marks(self.writeBufferHighWaterMark, self.writeBufferLowWaterMark)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        for key, (low, high) in (("logFileMaxSize", MAX_SIZE_RANGE), ("logFileMaxIndex", MAX_INDEX_RANGE)):
            if not low <= getattr(self, key) <= high:
                raise ConfigError(f"{key} must be between {low} and {high}, got {getattr(self, key)}")
        try:
            parse_classes(self.aclUnsignedClasses)
            parse_list(self.adminAddressesWithoutAuth)
        except (ConfigValueError, AddressPatternError) as exc:
            raise ConfigError(f"aclUnsignedClasses/adminAddressesWithoutAuth: {exc}") from None
        self.credentials()
        if not self.brokerIP1.strip() or ":" in self.brokerIP1:
            raise ConfigError(f"brokerIP1 must be an IPv4 address or host name, got {self.brokerIP1!r}")

    def validate_runtime(self, values: Mapping[str, Any]) -> None:
        """Check an UPDATE_BROKER_CONFIG change on a copy, so a bad value changes nothing; and refuse
        values that would take this broker off the routes now (:data:`RUNTIME_LIMITS`)."""
        trial = dataclasses.replace(self)
        for key, value in values.items():
            setattr(trial, key, value)
        trial.validate()
        for key, (floor, ceiling, why) in RUNTIME_LIMITS.items():
            new, old = getattr(trial, key), getattr(self, key)
            if floor is not None and new < floor and new < old:
                raise ConfigError(f"{key} below {floor} cannot be set at run time ({why})")
            if ceiling is not None and new > ceiling and new > old:
                raise ConfigError(f"{key} above {ceiling} cannot be set at run time ({why})")
        heartbeat = trial.brokerHeartbeatInterval
        if heartbeat > self.brokerHeartbeatInterval and heartbeat * 2 > trial.brokerNotActiveTimeoutMillis:
            raise ConfigError(
                f"brokerHeartbeatInterval {heartbeat} would leave less than two heartbeats within"
                f" brokerNotActiveTimeoutMillis ({trial.brokerNotActiveTimeoutMillis}): the broker would expire"
            )


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse(key: str, text: str, kind: Any) -> Any:
    value = text.strip()
    if kind in (bool, "bool"):
        lowered = value.lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"{key}={text!r} is not true or false")
        return lowered == "true"
    if kind in (int, "int"):
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{key}={text!r} is not an integer") from None
    return value


def load_file(path: str) -> BrokerConfig:
    """Build a config from a ``-c`` properties file."""
    props = load_properties(path, ConfigError)
    config = BrokerConfig()
    try:
        for key, value in config.parse_values(props).items():
            setattr(config, key, value)
        config.tls = TlsSettings.from_properties(props)
        config.validate()
        config.java_settings = java_settings(props, config.keys())
    except (ConfigError, TlsConfigError) as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    return config
