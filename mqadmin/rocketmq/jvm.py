"""The command line of a Java RocketMQ JVM sized for a laptop or a test: small heaps, a quick start.

Shared by the local cluster runner, scenarios, the benchmarks and the interop tests, so that every
Java NameServer, broker, Proxy and client of ours starts the same way. Anything that has a
``java`` executable, a ``classpath`` and a ``version`` (:class:`mqadmin.rocketmq.artifacts.Artifacts`,
the interop harness's builds) can be started.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
ADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"

# What JDK 17 must open for RocketMQ: direct-buffer cleaners, mmap internals, reflection in fastjson.
ADD_OPENS = [
    f"--add-opens=java.base/{pkg}=ALL-UNNAMED"
    for pkg in ("java.lang", "java.lang.reflect", "java.io", "java.nio", "java.util", "java.util.concurrent",
                "java.net", "sun.nio.ch", "jdk.internal.misc")
] + ["--add-exports=java.base/sun.nio.ch=ALL-UNNAMED", "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED"]

# C1 only and one GC thread: these JVMs live for seconds to hours on a busy 2-core machine, where C2's
# compile threads and a parallel GC would only compete with the processes under test.
# (Not -XX:-BytecodeVerificationRemote: it saves about a quarter of the start-up CPU, but with it
# 5.3.3's clients failed their first request here, RemotingSendRequestException, every time.)
BASE_JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-Djava.net.preferIPv4Stack=true",
                  "-Dfile.encoding=UTF-8"]

# 4.9.7 reads logback_<role>.xml from $ROCKETMQ_HOME/conf and fails without it; 5.x ships its own.
LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5level [%thread] %logger{{0}} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


class Runnable(Protocol):
    """What a JVM command line needs of a resolved RocketMQ version."""

    @property
    def java(self) -> str: ...

    @property
    def classpath(self) -> str: ...


def rocketmq_home(directory: Path) -> Path:
    """A ROCKETMQ_HOME with the logback files 4.9.7 insists on (5.x ships its own configs)."""
    conf = directory / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    for name in ("namesrv", "broker", "tools", "proxy"):
        (conf / f"logback_{name}.xml").write_text(LOGBACK.format(log=directory / "logs" / f"{name}.log"))
    return directory


def java_command(build: Runnable, main: str, args: list[str], home: Path, *, heap: str = "128m",
                 direct: str = "128m", props: dict[str, str] | None = None,
                 extra_flags: list[str] | None = None) -> list[str]:
    """The command line of one JVM running ``main`` from ``build``'s classpath, its logs under ``home``."""
    flags = [f"-Xms{heap}", f"-Xmx{heap}", f"-XX:MaxDirectMemorySize={direct}", *BASE_JVM_FLAGS, *ADD_OPENS,
             f"-Duser.home={home}", f"-Drocketmq.home.dir={home}", "-Drocketmq.client.logRoot=" + str(home / "logs"),
             *(extra_flags or [])]
    flags += [f"-D{key}={value}" for key, value in (props or {}).items()]
    return [build.java, *flags, "-cp", build.classpath, main, *args]


def java_env(home: Path, *, loopback_shim: Path | None = None) -> dict[str, str]:
    """The environment of a RocketMQ JVM: none of the caller's RocketMQ or Java settings leak in."""
    env = {k: v for k, v in os.environ.items() if k not in ("NAMESRV_ADDR", "JAVA_TOOL_OPTIONS", "CLASSPATH")}
    env["ROCKETMQ_HOME"] = str(home)
    if loopback_shim is not None:
        env["LD_PRELOAD"] = str(loopback_shim)
    return env
