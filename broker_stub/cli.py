"""``mqbroker-stub``: start a broker stub, with RocketMQ's broker command-line options (server_runtime.entry)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from broker_stub.broker_config_admin import render_config
from broker_stub.config import BrokerConfig, ConfigError, load_file
from broker_stub.pop_state import PopStateError
from broker_stub.server import BrokerServer
from broker_stub.subgroups import SubscriptionGroupError
from broker_stub.topic_store import TopicStoreError
from security.acl_accounts import AccountsError
from security.tls_config import TlsConfigError
from server_runtime.entry import ServerProgram, run_program, server_app


def _load(config_file: str | None, namesrv_addr: str | None) -> BrokerConfig:
    config = load_file(config_file) if config_file else BrokerConfig()
    if namesrv_addr is not None:
        config.namesrvAddr = namesrv_addr
        config.validate()
    return config


def _prepare(config: BrokerConfig) -> Callable[[], BrokerServer]:
    server = BrokerServer(config)  # reads the saved topics: a bad file stops here with one line
    return lambda: server


def _boot_line(config: BrokerConfig, addr: str) -> str:
    line = f"The broker[{config.brokerName}, {addr}] boot success. serializeType=JSON"
    if config.namesrvAddr:
        line += f" and name server is {config.namesrvAddr}"
    return line


PROGRAM = ServerProgram(
    prog="mqbroker-stub",
    summary="Start a RocketMQ-compatible broker stub (in-memory store).",
    config_help="Broker config properties file.",
    namesrv_help="Name server address list, e.g. '127.0.0.1:9876;127.0.0.1:9877'.",
    log=logging.getLogger("broker_stub"),
    expected=(ConfigError, TopicStoreError, SubscriptionGroupError, AccountsError, TlsConfigError, PopStateError),
    load=_load,
    render=render_config,  # every key a Java 5.3.3 broker prints, with the stub's values
    prepare=_prepare,
    listen_addr=lambda config: f"{config.brokerIP1}:{config.listenPort}",
    boot_line=_boot_line,
    metrics_line=lambda config, url: f"The broker[{config.brokerName}] metrics at {url}",
    stopping="unregistering and stopping",
    stopped="broker stopped",
    listening_lines=lambda config, server: (
        [f"The broker[{config.brokerName}] VIP channel at {server.vip_addr}"] if server.vip_addr else []),
)
app = server_app(PROGRAM)


def run(argv: list[str] | None = None) -> int:
    """Console-script entry point: one clear line and a non-zero exit on failure."""
    return run_program(PROGRAM, argv)


def entry() -> None:
    sys.exit(run())


if __name__ == "__main__":
    entry()
