"""Java NameServers and brokers as processes: their config files, ports, sizes and command lines.

What it takes to run Apache's published ``NamesrvStartup`` and ``BrokerStartup`` on a laptop, shared
by the local cluster (:mod:`mqadmin.localcluster.java`), scenarios and the interop tests:

* **Ports.** Java takes fixed port numbers from its config. A NameServer uses one; a broker uses its
  ``listenPort``, ``listenPort - 2`` (the "fast" channel clients may use for sends) and ``listenPort + 1``
  (HA, where its slaves connect). :func:`free_port_block` picks ports that are free now; a start that
  loses the race prints ``Address already in use`` (:func:`lost_port_race`) and is retried on new ones.
* **Sizes.** A default broker maps a 1 GB commit log file and a 6 MB consume queue file per queue, and
  sizes its heap from the machine. :class:`Sizing` holds the runner's small defaults: heaps of tens of
  MB, 16 MB commit log files, 120 KB consume queue files, a small index.
* **Loopback.** 5.x NameServers and brokers bind their main port to ``bindAddress``; a broker's HA and
  fast ports, and every 4.9.7 port, bind to every interface. The LD_PRELOAD shim of
  :mod:`mqadmin.rocketmq.loopback` turns those binds into 127.0.0.1 binds.
* **What Java reads.** Which of the local cluster's timing knobs each version has a key for (the
  ``*_KEY`` facts below), checked by the runner before it starts anything.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass, replace
from pathlib import Path

from mqadmin.rocketmq.jvm import BROKER_MAIN, NAMESRV_MAIN, Runnable, java_command

#: The line each prints on stdout once it serves (both 4.9.7 and 5.x).
NAMESRV_BOOT = re.compile(r"The Name Server boot success")
BROKER_BOOT = re.compile(r"The broker\[[^\]]*\] boot success")
#: The port offsets each role listens on, from its configured listenPort.
PORT_OFFSETS: dict[str, tuple[int, ...]] = {"namesrv": (0,), "broker": (-2, 0, 1)}
MAIN_CLASS = {"namesrv": NAMESRV_MAIN, "broker": BROKER_MAIN}

#: A Java broker registers every registerNameServerPeriod clamped to this range (BrokerController).
REGISTER_PERIOD_RANGE_MS = (10_000, 60_000)
#: How long a Java NameServer keeps a silent broker when the broker sends no heartbeatTimeoutMillis:
#: a constant of RouteInfoManager in every version (there is no brokerChannelExpiredTime key).
FIXED_EXPIRY_MS = 120_000
#: 4.9.7's NameServer scans for silent brokers every 10 s, fixed; 5.x reads scanNotActiveBrokerInterval.
FIXED_SCAN_MS_4 = 10_000


@dataclass(frozen=True)
class Sizing:
    """How big each Java process may grow: the runner's laptop defaults, overridable one by one.

    ``java_opts`` are appended to every JVM's command line after the runner's own flags, so a later
    ``-Xmx512m`` wins over the heap chosen here (HotSpot takes the last of a repeated flag).
    """

    namesrv_heap: str = "48m"
    broker_heap: str = "128m"
    #: Initial heap: small, so a JVM only takes (and touches) what it uses.
    initial_heap: str = "16m"
    direct_memory: str = "64m"
    commitlog_file_bytes: int = 16 * 1024 * 1024
    consume_queue_entries: int = 6_000  # 20 bytes each: 120 KB files
    java_opts: tuple[str, ...] = ()

    def heap(self, role: str) -> str:
        return self.namesrv_heap if role == "namesrv" else self.broker_heap

    def with_timer_wheel(self) -> Sizing:
        """A broker's sizing with its timer wheel on: each timer and POP revive thread holds a direct
        buffer of maxMessageSize (4 MB), more than the default direct memory allows."""
        return replace(self, direct_memory=TIMER_DIRECT_MEMORY)


#: Direct memory of a broker whose timer wheel is on (a cap, not a reservation).
TIMER_DIRECT_MEMORY = "256m"


def major(version: str) -> int:
    return int(version.split(".", 1)[0])


def scan_interval_key(version: str) -> bool:
    """Whether this version's NameServer reads scanNotActiveBrokerInterval (5.x) or scans every 10 s (4.x)."""
    return major(version) >= 5


def sends_heartbeat_timeout(version: str) -> bool:
    """Whether this version's broker can send its own expiry (heartbeatTimeoutMillis, 5.x: with
    enableSlaveActingMaster=true, the value of brokerNotActiveTimeoutMillis)."""
    return major(version) >= 5


def reads_heartbeat_timeout(version: str) -> bool:
    """Whether this version's NameServer expires a broker after the heartbeatTimeoutMillis the broker
    sent (5.x) rather than always after :data:`FIXED_EXPIRY_MS` (4.x)."""
    return major(version) >= 5


def serves_pop(version: str) -> bool:
    """Whether this version's broker serves POP consumption (5.x), which Apache's RocketMQ Proxy receives
    with for its gRPC clients (4.x brokers answer POP requests with "request code not supported")."""
    return major(version) >= 5


def has_bind_address(version: str) -> bool:
    """Whether this version's broker reads bindAddress (5.x), so that it can listen on 127.0.0.1 while it
    registers another address (4.x binds every interface and registers brokerIP1)."""
    return major(version) >= 5


def free_port_block(offsets: tuple[int, ...] = (0,), host: str = "127.0.0.1") -> int:
    """A port P such that P+offset is free on ``host`` for every offset (now; a start may still race)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind((host, 0))
            base = probe.getsockname()[1]
        if not all(1024 < base + off < 65536 for off in offsets):
            continue
        held: list[socket.socket] = []
        try:
            for off in offsets:
                sock = socket.socket()
                held.append(sock)
                sock.bind((host, base + off))
            return base
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
    raise OSError(f"no free port block {offsets} on {host}")


def lost_port_race(output: str) -> bool:
    """Whether a Java server's output says one of its ports was taken between choice and bind."""
    return "Address already in use" in output


def namesrv_properties(*, port: int, workdir: Path, scan_interval_ms: int | None = None) -> dict[str, object]:
    """A NameServer's namesrv.properties: its port on loopback, its files in ``workdir``."""
    props: dict[str, object] = {
        "listenPort": port, "bindAddress": "127.0.0.1",
        "kvConfigPath": workdir / "kvConfig.json", "configStorePath": workdir / "namesrv.properties",
    }
    if scan_interval_ms is not None:
        props["scanNotActiveBrokerInterval"] = scan_interval_ms
    return props


def broker_properties(*, cluster: str, broker_name: str, broker_id: int, port: int, namesrv_addrs: list[str],
                      store: Path, sizing: Sizing = Sizing(), register_period_ms: int = 30_000,
                      heartbeat_timeout_ms: int | None = None, timer_wheel: bool = False) -> dict[str, object]:
    """A broker's broker.properties: a master (id 0) or a slave of ``broker_name``, on loopback, its store
    in ``store`` (kept across restarts), small mapped files.

    ``heartbeat_timeout_ms``: the expiry the broker asks every NameServer to apply to it (5.x); Java
    sends it only with enableSlaveActingMaster=true, which also makes it send a BROKER_HEARTBEAT every
    second between registrations.

    ``timer_wheel``: the timer wheel on (its log in files of the commit log's size), as a 5.x broker needs
    it to serve POP (Apache's RocketMQ Proxy receives with POP); off, it saves a large mapped file.
    """
    props: dict[str, object] = {
        "brokerClusterName": cluster, "brokerName": broker_name, "brokerId": broker_id,
        "brokerRole": "ASYNC_MASTER" if broker_id == 0 else "SLAVE",
        "namesrvAddr": ";".join(namesrv_addrs), "listenPort": port, "haListenPort": port + 1,
        "bindAddress": "127.0.0.1", "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1",
        "storePathRootDir": store, "storePathCommitLog": store / "commitlog",
        "mappedFileSizeCommitLog": sizing.commitlog_file_bytes,
        "mappedFileSizeConsumeQueue": sizing.consume_queue_entries * 20,
        "maxIndexNum": 20_000, "maxHashSlotNum": 5_000, "timerWheelEnable": False,
        "flushDiskType": "ASYNC_FLUSH", "autoCreateTopicEnable": True, "autoCreateSubscriptionGroup": True,
        "registerNameServerPeriod": register_period_ms, "diskMaxUsedSpaceRatio": 95,
    }
    if heartbeat_timeout_ms is not None:
        props.update(enableSlaveActingMaster=True, brokerNotActiveTimeoutMillis=heartbeat_timeout_ms)
    if timer_wheel:
        props.update(timerWheelEnable=True, mappedFileSizeTimerLog=sizing.commitlog_file_bytes)
    return props


def properties_text(props: dict[str, object]) -> str:
    """Java ``.properties`` lines (booleans as Java writes them)."""
    def text(value: object) -> str:
        return ("true" if value else "false") if isinstance(value, bool) else str(value)

    return "".join(f"{key}={text(value)}\n" for key, value in props.items())


def server_command(build: Runnable, role: str, config: Path, home: Path, sizing: Sizing = Sizing(), *,
                   system_props: dict[str, str] | None = None) -> list[str]:
    """The command line of a NameServer or broker JVM reading ``config``, its logs under ``home``."""
    flags = [f"-Xms{sizing.initial_heap}", *sizing.java_opts]
    return java_command(build, MAIN_CLASS[role], ["-c", str(config)], home, heap=sizing.heap(role),
                        direct=sizing.direct_memory, props=system_props, extra_flags=flags)
