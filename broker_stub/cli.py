"""``mqbroker-stub``: start a broker stub, with RocketMQ's broker command-line options."""

from __future__ import annotations

import logging
import signal
import sys

import trio
import typer

from broker_stub.broker_config_admin import render_config
from broker_stub.config import BrokerConfig, ConfigError, load_file
from broker_stub.pop_state import PopStateError
from broker_stub.server import BrokerServer
from broker_stub.subgroups import SubscriptionGroupError
from broker_stub.topic_store import TopicStoreError
from remoting import logfile
from remoting.acl_accounts import AccountsError
from remoting.climain import first_of, run_app
from remoting.metrics_http import MetricsListenError
from remoting.regular_file import RefusedFile
from remoting.tls_config import TlsConfigError

log = logging.getLogger("broker_stub")


class StartupError(Exception):
    """The broker could not start (e.g. its port is taken)."""


app = typer.Typer(
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.command(help="Start a RocketMQ-compatible broker stub (in-memory store).")
def main(
    config_file: str | None = typer.Option(
        None, "-c", "--configFile", metavar="FILE", help="Broker config properties file."
    ),
    print_config: bool = typer.Option(False, "-p", "--printConfigItem", help="Print all config items and exit."),
    namesrv_addr: str | None = typer.Option(
        None, "-n", "--namesrvAddr", metavar="ADDR", help="Name server address list, e.g. '127.0.0.1:9876;127.0.0.1:9877'."
    ),
) -> None:
    config = load_file(config_file) if config_file else BrokerConfig()
    if namesrv_addr is not None:
        config.namesrvAddr = namesrv_addr
        config.validate()
    if print_config:  # every key a Java 5.3.3 broker prints, with the stub's values
        print(render_config(config), end="")
        return
    try:
        logfile.configure(config.logFile, config.logFileMaxSize, config.logFileMaxIndex)
    except OSError as exc:
        raise ConfigError(f"logFile {config.logFile} {exc}" if isinstance(exc, RefusedFile)
                          else f"cannot open logFile {config.logFile}: {exc.strerror or exc}") from None
    if config_file:
        print(f"load config properties file OK, {config_file}", flush=True)
    server = BrokerServer(config)  # reads the saved topics: a bad file stops here with one line
    try:
        trio.run(_serve, server)
    except BaseException as exc:
        err = first_of(exc, OSError)
        if err is None:
            raise
        if isinstance(err, MetricsListenError):
            raise StartupError(str(err.strerror)) from None
        where = f"{config.brokerIP1}:{config.listenPort}"
        raise StartupError(f"cannot listen on {where}: {getattr(err, 'strerror', None) or err}") from None


async def _serve(server: BrokerServer) -> None:
    config = server.config
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            addr = await nursery.start(server.serve)
            if server.vip_addr:
                print(f"The broker[{config.brokerName}] VIP channel at {server.vip_addr}", flush=True)
            if server.metrics is not None:
                print(f"The broker[{config.brokerName}] metrics at {server.metrics.url}", flush=True)
            line = f"The broker[{config.brokerName}, {addr}] boot success. serializeType=JSON"
            if config.namesrvAddr:
                line += f" and name server is {config.namesrvAddr}"
            print(line, flush=True)
            async for signum in signals:
                log.info("received %s: unregistering and stopping", signal.Signals(signum).name)
                server.stop()
                break
    log.info("broker stopped")


def run(argv: list[str] | None = None) -> int:
    """Console-script entry point: one clear line and a non-zero exit on failure."""
    return run_app(
        app,
        "mqbroker-stub",
        argv,
        (ConfigError, StartupError, TopicStoreError, SubscriptionGroupError, AccountsError, TlsConfigError,
         PopStateError),
    )


def entry() -> None:
    sys.exit(run())


if __name__ == "__main__":
    entry()
