"""``mqnamesrv``: start a NameServer, with RocketMQ's command-line options (server_runtime.entry)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from namesrv.config import ConfigError, NamesrvConfig, load_file
from namesrv.kvconfig import KVConfig, KVConfigError
from namesrv.server import NameServer
from security.acl_accounts import AccountsError
from security.tls_config import TlsConfigError
from server_runtime.entry import ServerProgram, run_program, server_app


def _load(config_file: str | None, namesrv_addr: str | None) -> NamesrvConfig:
    """-n is accepted for RocketMQ compatibility and ignored."""
    return load_file(config_file) if config_file else NamesrvConfig()


def _render(config: NamesrvConfig) -> str:
    lines = []
    for key in NamesrvConfig.keys():
        value = getattr(config, key)
        lines.append(f"{key}={'true' if value is True else 'false' if value is False else value}\n")
    return "".join(lines)


def _prepare(config: NamesrvConfig) -> Callable[[], NameServer]:
    kv = KVConfig(config.kvConfigPath)
    kv.load(config.kvTotalMaxBytes)
    return lambda: NameServer(config, kv)


PROGRAM = ServerProgram(
    prog="mqnamesrv",
    summary="Start a RocketMQ-compatible NameServer.",
    config_help="Name server config properties file.",
    namesrv_help="Accepted for RocketMQ compatibility; ignored.",
    log=logging.getLogger("namesrv"),
    expected=(ConfigError, KVConfigError, AccountsError, TlsConfigError),
    load=_load,
    render=_render,
    prepare=_prepare,
    listen_addr=lambda config: f"{config.bindAddress}:{config.listenPort}",
    boot_line=lambda config, address: (
        f"The Name Server boot success. serializeType=JSON, address {address[0]}:{address[1]}"),
    metrics_line=lambda config, url: f"The Name Server metrics at {url}",
    stopping="stopping",
    stopped="name server stopped",
)
app = server_app(PROGRAM)


def run(argv: list[str] | None = None) -> int:
    """Console-script entry point: one clear line and a non-zero exit on failure."""
    return run_program(PROGRAM, argv)


def entry() -> None:
    sys.exit(run())


if __name__ == "__main__":
    entry()
