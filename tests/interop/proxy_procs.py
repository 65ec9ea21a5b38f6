"""Apache's RocketMQ Proxy 5.3.3 as a process for the interop tests, in cluster mode over our servers.

The Proxy (``ProxyStartup -pm cluster``) is what RocketMQ 5's gRPC clients talk to: it reads routes from
the NameServer and turns each gRPC call into remoting requests to the brokers (SEND_MESSAGE, POP_MESSAGE,
ACK_MESSAGE, ...). It runs from the harness's ``proxy`` Maven module, with the JVM flags of the other
Java servers (small heap, C1) and the loopback shim. Its gRPC and remoting ports are a free pair
(P, P+1). ``minInvisibleTimeMillsForRecv`` is lowered to 1 s so that redelivery tests wait seconds, not
the default 10 s.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.interop.java_procs import JavaServer, free_port_block, java_command, java_env, rocketmq_home

PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"


@dataclass
class JavaProxy(JavaServer):
    main: str = PROXY_MAIN
    boot: re.Pattern[str] = re.compile(r"rocketmq-proxy startup successfully")
    namesrv_addr: str = ""
    cluster: str = "DefaultCluster"

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def port_offsets(self) -> tuple[int, ...]:
        return (0, 1)  # gRPC, remoting

    def settings(self) -> dict[str, object]:
        return {"rocketMQClusterName": self.cluster, "namesrvAddr": self.namesrv_addr, "proxyMode": "cluster",
                "grpcServerPort": self.port, "remotingListenPort": self.port + 1, "localServeAddr": "127.0.0.1",
                "minInvisibleTimeMillsForRecv": 1000}

    def start(self) -> JavaProxy:
        self.workdir.mkdir(parents=True, exist_ok=True)
        home = rocketmq_home(self.workdir / "home")
        if not self.port or self.attempts:
            self.port = free_port_block(self.port_offsets())
        self.attempts += 1
        config = self.workdir / "proxy.json"
        config.write_text(json.dumps({**self.settings(), **self.extra_props}))
        with open(self.out_path, "wb") as out:
            self.proc = subprocess.Popen(
                java_command(self.build, self.main, ["-pc", str(config), "-pm", "cluster"], home, heap=self.heap),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir,
                env=java_env(home, loopback_shim=self.loopback_shim))
        return self

    def log(self) -> str:
        logs = sorted((self.workdir / "home" / "logs").rglob("proxy*.log"))
        return "".join(p.read_text(errors="replace") for p in logs)

