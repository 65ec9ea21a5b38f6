"""NameServer configuration with RocketMQ's keys, defaults and file format.

Field names are RocketMQ's property keys on purpose (camelCase), so a
``namesrv.properties`` written for Java works unchanged and
GET_NAMESRV_CONFIG renders the same text a Java NameServer does. Keys
marked "extension" do not exist in Java; they make timeouts testable.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from remoting import properties

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
    serverMaxConnections: int = 10000  # connections beyond this are refused
    # warm restart (extensions): see namesrv/snapshot.py
    warmRestartEnable: bool = True  # write the route snapshot and restore it on start
    routeSnapshotPath: str = ""  # "" = routeSnapshot.msgpack beside kvConfigPath
    routeSnapshotIntervalMillis: int = 1000  # at most one write per interval, only after a change
    routeSnapshotMaxAgeMillis: int = 120000  # an older snapshot is ignored (Java's broker expiry)

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

    def render(self) -> str:
        return properties.dumps(self.as_properties())

    def parse_values(self, props: Mapping[str, str]) -> dict[str, Any]:
        """Typed values for the known keys in ``props``; ConfigError names a bad one."""
        types = {f.name: f.type for f in dataclasses.fields(self)}
        parsed: dict[str, Any] = {}
        for key, text in props.items():
            kind = types.get(key)
            if kind is None or key == "extra":
                continue
            parsed[key] = _parse(key, text, kind)
        return parsed

    def apply(self, values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            setattr(self, key, value)

    def protected_keys(self) -> set[str]:
        """Keys UPDATE_NAMESRV_CONFIG must refuse (CVE-2023-37582 class).

        Java 5.2+ refuses its black list; we also refuse every key whose
        value is a filesystem path, so no request can point the server's
        writes at a file of the caller's choice.
        """
        keys = {"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"}
        keys.update(k.strip() for k in self.configBlackList.split(";") if k.strip())
        return keys

    @staticmethod
    def is_path_key(key: str) -> bool:
        lowered = key.lower()
        return "path" in lowered or lowered.endswith(("dir", "directory", "home", "file"))

    def validate(self) -> None:
        if not 0 <= self.listenPort <= 65535:
            raise ConfigError(f"listenPort {self.listenPort} is not a TCP port (0-65535)")
        for key in ("scanNotActiveBrokerInterval", "brokerChannelExpiredTime", "serverChannelMaxIdleTimeSeconds"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"{key} must be positive, got {getattr(self, key)}")
        if not 1024 <= self.frameMaxLength <= 1 << 30:
            raise ConfigError(f"frameMaxLength must be between 1024 and {1 << 30}, got {self.frameMaxLength}")
        if self.serverMaxConnections <= 0:
            raise ConfigError("serverMaxConnections must be positive")
        for key, low in (("routeSnapshotIntervalMillis", 10), ("routeSnapshotMaxAgeMillis", 1)):
            if not low <= getattr(self, key) <= 86_400_000:
                raise ConfigError(f"{key} must be between {low} and 86400000 (one day), got {getattr(self, key)}")


def default_snapshot_path(kv_config_path: str) -> str:
    """The route snapshot's default home: beside the KV config, as the NameServer's other state."""
    return os.path.join(os.path.dirname(kv_config_path), "routeSnapshot.msgpack")


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


def load_file(path: str) -> NamesrvConfig:
    """Build a config from a ``-c`` properties file (configStorePath := path)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    try:
        props = properties.loads(text)
    except properties.PropertiesError as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
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
