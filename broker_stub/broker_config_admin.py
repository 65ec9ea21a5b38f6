"""GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25), as a Java 5.3.3 broker answers them.

``getBrokerConfig`` shows every key of a Java 5.3.3 broker, sorted, as
``key=value`` lines (MixAll.properties2String): Java's defaults
(:mod:`broker_stub.java_broker_config`), then what depends on the machine
or the role as Java computes it (thread pools from the processor count,
``accessMessageInMemoryMaxRatio`` 30 on a slave, ``brokerRole`` from
``brokerId``, ``rocketmqHome`` from ``ROCKETMQ_HOME``), then the Java keys
set in the file or updated since (``java_settings``), then the stub's own
settings (which include its extensions, ``maxStoreBytes`` and the like).
Three deliberate differences: ``brokerIP2`` defaults to ``brokerIP1``
(Java takes the machine's first address), ``storePathCommitLog`` is always
shown (5.3.3 leaves it out until set; it names the directory the runtime
info's ``commitLogDiskRatio_<dir>`` measures), and an empty ``namesrvAddr``
is left out as Java leaves out its null one.

``updateBrokerConfig`` takes what a Java broker takes:

* a key in ``configBlackList`` (``configBlackList;brokerConfigPath``) is
  refused with NO_PERMISSION ``Can not update config in black list.``;
* a key the stub acts on at runtime (``RUNTIME_KEYS``) is checked by the
  stub's own rules (a bad value is SYSTEM_ERROR and changes nothing), then
  applied;
* a key the stub acts on only at start (ports, names, ids, paths, bounds)
  is refused with NO_PERMISSION naming it (Java would take it and go on
  registering a port it does not listen on);
* any other Java key is kept as Java would take it and shown from then on
  (a value Java cannot parse is ignored: the old one stays), and a key Java
  does not have is accepted and ignored, as Java does;
* every accepted update moves the config's data version, as Java's does.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Hashable

from broker_stub.common import Reject
from broker_stub.config import RUNTIME_KEYS, SECRET_KEYS, BrokerConfig, ConfigError
from broker_stub.java_broker_config import DERIVED, JAVA_KEYS, java_settings
from broker_stub.topics import TopicTable
from remoting import properties
from remoting.bodies import DataVersion
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to

log = logging.getLogger("broker_stub")

BLACK_LIST_REMARK = "Can not update config in black list."

Handler = Callable[[RemotingCommand, Hashable], RemotingCommand | None]


def processor_count() -> int:
    """Runtime.availableProcessors: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def machine_values(config: BrokerConfig, cpus: int) -> dict[str, str]:
    """The defaults a Java 5.3.3 broker computes from the machine, the environment and its role."""
    send = min(cpus, 4)
    values = {
        "sendMessageThreadPoolNums": send,
        "putMessageFutureThreadPoolNums": min(cpus, 4),
        "pullMessageThreadPoolNums": 16 + cpus * 2,
        "litePullMessageThreadPoolNums": 16 + cpus * 2,
        "processReplyMessageThreadPoolNums": 16 + cpus * 2,
        "queryMessageThreadPoolNums": 8 + cpus,
        "heartbeatThreadPoolNums": min(32, cpus),
        "endTransactionThreadPoolNums": max(8 + cpus * 2, send * 4),
        "clientCallbackExecutorThreads": cpus,
        "accessMessageInMemoryMaxRatio": 40 if config.is_master else 30,  # BrokerStartup: 10 less on a slave
        "brokerRole": "ASYNC_MASTER" if config.is_master else "SLAVE",
        "brokerIP2": config.brokerIP1,
        "storePathCommitLog": os.path.join(os.path.abspath(os.path.expanduser(config.storePathRootDir or ".")),
                                           "commitlog"),
    }
    home = os.environ.get("ROCKETMQ_HOME")
    if home is not None:
        values["rocketmqHome"] = home
    return {k: str(v) for k, v in values.items()}


def render_config(config: BrokerConfig, cpus: int | None = None) -> str:
    """The GET_BROKER_CONFIG body: every Java 5.3.3 key and the stub's own, sorted, ``key=value`` lines,
    with the broker's own secret keys masked (anyone who may read the config may not sign as the broker)."""
    values = {key: default for key, (_kind, default) in JAVA_KEYS.items()}
    values.update(machine_values(config, processor_count() if cpus is None else cpus))
    values.update(config.java_settings)
    values.update(config.as_properties())
    for key in SECRET_KEYS:
        if values.get(key):
            values[key] = "******"
    if not config.namesrvAddr:
        del values["namesrvAddr"]
    return "".join(f"{key}={values[key]}\n" for key in sorted(values))


class BrokerConfigAdmin:
    def __init__(self, config: BrokerConfig, topics: TopicTable, *, kick: Callable[[], None]) -> None:
        self.config = config
        self.topics = topics
        self.kick = kick
        self.version = DataVersion(0, int(time.time() * 1000), 0)

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.UPDATE_BROKER_CONFIG: self.update, RequestCode.GET_BROKER_CONFIG: self.get}

    def get(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"version": self.version.encode().decode()},
                           body=render_config(self.config).encode())

    def update(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        config = self.config
        try:
            props = properties.loads(req.body.decode("utf-8")) if req.body else {}
        except (UnicodeDecodeError, properties.PropertiesError) as exc:
            raise Reject(ResponseCode.SYSTEM_ERROR, f"bad properties body: {exc}") from None
        black_list = config.java_settings.get("configBlackList", JAVA_KEYS["configBlackList"][1])
        if any(key in black_list.split(";") for key in props):
            raise Reject(ResponseCode.NO_PERMISSION, BLACK_LIST_REMARK)
        own = set(config.keys())
        refused = sorted(k for k in props if (k in own and k not in RUNTIME_KEYS) or k in DERIVED)
        if refused:
            raise Reject(
                ResponseCode.NO_PERMISSION,
                f"Can not update config: {', '.join(refused)} (updatable at runtime: {', '.join(sorted(RUNTIME_KEYS))})",
            )
        try:
            values = config.parse_values({k: v for k, v in props.items() if k in RUNTIME_KEYS})
            config.validate_runtime(values)
        except ConfigError as exc:
            raise Reject(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        changed = {k: v for k, v in values.items() if getattr(config, k) != v}
        for key, value in changed.items():
            setattr(config, key, value)
        kept = java_settings(props, own)
        config.java_settings.update(kept)
        self.version = self.version.next(int(time.time() * 1000))
        if changed or kept:
            log.info("broker config updated: %s", {**changed, **kept})
        if "brokerPermission" in changed:
            self.topics.changed()  # re-register at once with masked perms
        elif changed:
            self.kick()  # a new period or timeout takes effect now
        return response_to(req, ResponseCode.SUCCESS)


__all__ = ["BrokerConfigAdmin", "render_config"]
