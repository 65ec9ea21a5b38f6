"""``mqnamesrv``: start a NameServer, with RocketMQ's command-line options."""

from __future__ import annotations

import logging
import signal
import sys

import trio
import typer

from namesrv.config import ConfigError, NamesrvConfig, load_file
from namesrv.kvconfig import KVConfig, KVConfigError
from namesrv.server import NameServer
from security.acl_accounts import AccountsError
from security.tls_config import TlsConfigError
from server_runtime import logfile
from server_runtime.climain import first_of, run_app
from server_runtime.metrics_http import MetricsListenError
from server_runtime.regular_file import RefusedFile

log = logging.getLogger("namesrv")


class StartupError(Exception):
    """The server could not start (e.g. its port is taken)."""

app = typer.Typer(
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.command(help="Start a RocketMQ-compatible NameServer.")
def main(
    config_file: str | None = typer.Option(
        None, "-c", "--configFile", metavar="FILE", help="Name server config properties file."
    ),
    print_config: bool = typer.Option(False, "-p", "--printConfigItem", help="Print all config items and exit."),
    namesrv_addr: str | None = typer.Option(
        None, "-n", "--namesrvAddr", metavar="ADDR", help="Accepted for RocketMQ compatibility; ignored."
    ),
) -> None:
    config = load_file(config_file) if config_file else NamesrvConfig()
    if print_config:
        for key in NamesrvConfig.keys():
            value = getattr(config, key)
            print(f"{key}={'true' if value is True else 'false' if value is False else value}")
        return
    try:
        logfile.configure(config.logFile, config.logFileMaxSize, config.logFileMaxIndex)
    except OSError as exc:
        raise ConfigError(f"logFile {config.logFile} {exc}" if isinstance(exc, RefusedFile)
                          else f"cannot open logFile {config.logFile}: {exc.strerror or exc}") from None
    if config_file:
        print(f"load config properties file OK, {config_file}", flush=True)
    kv = KVConfig(config.kvConfigPath)
    kv.load(config.kvTotalMaxBytes)
    try:
        trio.run(_serve, config, kv)
    except BaseException as exc:
        err = first_of(exc, OSError)
        if err is None:
            raise
        if isinstance(err, MetricsListenError):
            raise StartupError(str(err.strerror)) from None
        where = f"{config.bindAddress}:{config.listenPort}"
        raise StartupError(f"cannot listen on {where}: {getattr(err, 'strerror', None) or err}") from None


async def _serve(config: NamesrvConfig, kv: KVConfig) -> None:
    server = NameServer(config, kv)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(server.serve)
            if server.metrics is not None:
                print(f"The Name Server metrics at {server.metrics.url}", flush=True)
            print(f"The Name Server boot success. serializeType=JSON, address {host}:{port}", flush=True)
            async for signum in signals:
                log.info("received %s: stopping", signal.Signals(signum).name)
                server.stop()
                break
    log.info("name server stopped")


def run(argv: list[str] | None = None) -> int:
    """Console-script entry point: one clear line and a non-zero exit on failure."""
    return run_app(app, "mqnamesrv", argv, (ConfigError, KVConfigError, StartupError, AccountsError, TlsConfigError))


def entry() -> None:
    sys.exit(run())


if __name__ == "__main__":
    entry()
