"""Apache's RocketMQ Proxy in the local cluster (``mqadmin start --proxy 5.3.3``): what RocketMQ 5 clients use.

RocketMQ 5's gRPC clients (Java ``rocketmq-client-java``, Python ``rocketmq-python-client``, Go, C++, ...)
never talk to brokers: they talk to a Proxy, which reads routes from the NameServers and makes remoting
calls to the brokers. Here the Proxy is Apache's own, from Maven Central
(:func:`mqadmin.rocketmq.artifacts.resolve`, component ``proxy``, cached after the first use), started in
cluster mode over the cluster's NameServers and broker stubs (which serve POP consumption for it), with
the JVM flags of :mod:`mqadmin.rocketmq.jvm`. Its gRPC port and its remoting port are a pair (P, P+1) free
on 127.0.0.1; the Proxy, as Apache ships it, has no bind address, so the Java roles' loopback shim
(:func:`mqadmin.localcluster.java.loopback_shim`) keeps its ports on 127.0.0.1 (without a C compiler
it listens on every interface).

Like the other processes it outlives ``mqadmin start``, is recorded in ``cluster.json`` (kind ``proxy``,
its address the gRPC endpoint) and is stopped by ``mqadmin stop``.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from pathlib import Path

from mqadmin.localcluster.java import loopback_shim
from mqadmin.localcluster.state import ClusterError, ClusterState, Proc, start_ticks
from mqadmin.rocketmq.artifacts import ArtifactError, resolve
from mqadmin.rocketmq.jvm import PROXY_MAIN, java_command, java_env, rocketmq_home

BOOT = re.compile(r"rocketmq-proxy startup successfully")
BOOT_TIMEOUT = 180.0  # s: a JVM start on a busy laptop
HEAP = "256m"


def free_pair(host: str = "127.0.0.1", attempts: int = 100) -> int:
    """A port P such that P and P+1 are free on ``host`` now (the Proxy's gRPC and remoting ports)."""
    for _ in range(attempts):
        with socket.socket() as first, socket.socket() as second:
            first.bind((host, 0))
            port = first.getsockname()[1]
            if port >= 65535:
                continue
            try:
                second.bind((host, port + 1))
            except OSError:
                continue
            return port
    raise ClusterError(f"no free port pair P, P+1 on {host} for the Proxy")


def proxy_config(state: ClusterState, grpc_port: int) -> dict[str, object]:
    """The Proxy's rmq-proxy.json: cluster mode over the cluster's NameServers. One setting differs from
    Apache's defaults: a receive may ask for an invisible time down to 1 s (``minInvisibleTimeMillsForRecv``,
    10 s by default), so that redelivery can be watched in seconds on a cluster made for experiments."""
    return {"rocketMQClusterName": state.cluster, "namesrvAddr": state.namesrv_addr, "proxyMode": "cluster",
            "grpcServerPort": grpc_port, "remotingListenPort": grpc_port + 1, "localServeAddr": "127.0.0.1",
            "minInvisibleTimeMillsForRecv": 1000}


def start_proxy(state: ClusterState, version: str) -> Proc:
    """Resolve the Proxy of ``version``, start it and return its record once it is up (ClusterError if not)."""
    try:
        artifacts = resolve(version, "proxy")
    except ArtifactError as exc:
        raise ClusterError(str(exc)) from None
    work = Path(state.dir) / "proxy-0"
    work.mkdir(exist_ok=True)
    home = rocketmq_home(work / "home")
    port = free_pair()
    config = work / "rmq-proxy.json"
    config.write_text(json.dumps(proxy_config(state, port), indent=2))
    proc = Proc("proxy", "proxy-0", str(config), str(work / "proxy.log"), port=port, version=version)
    cmd = java_command(artifacts, PROXY_MAIN, ["-pc", str(config), "-pm", "cluster"], home, heap=HEAP)
    shim, _ = loopback_shim()
    with open(proc.log, "ab") as log:
        child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=work,
                                 env=java_env(home, loopback_shim=shim), start_new_session=True)  # outlives `mqadmin start`
    proc.pid = child.pid
    proc.started = start_ticks(child.pid) or 0
    _wait_boot(proc, child)
    return proc


def _wait_boot(proc: Proc, child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT
    while time.monotonic() < deadline:
        text = Path(proc.log).read_text(errors="replace") if Path(proc.log).exists() else ""
        if BOOT.search(text):
            return
        if child.poll() is not None:
            tail = [line for line in text.strip().splitlines() if line.strip()][-1:] or ["(no output)"]
            raise ClusterError(f"the Proxy exited during start (exit {child.returncode}): {tail[0][:300]} "
                               f"(log: {proc.log})")
        time.sleep(0.2)
    child.kill()
    raise ClusterError(f"the Proxy did not start within {BOOT_TIMEOUT:g} s (log: {proc.log})")
