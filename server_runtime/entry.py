"""The entry point both servers share: RocketMQ's options, the log file, serving until a signal.

``mqnamesrv`` and ``mqbroker-stub`` start the same way, as Java's
``NamesrvStartup`` and ``BrokerStartup`` do: ``-c`` loads a properties
file, ``-p`` prints every config item and exits, ``-n`` names NameServers;
then the log file is opened, the server is built, and it serves until
SIGINT or SIGTERM. What differs between the two is data
(:class:`ServerProgram`: how to load and print a config, build the server,
and word the start-up lines), so each program's ``cli.py`` is a
description, not a copy. Any failure to start is one line on stderr and a
non-zero exit (:func:`server_runtime.climain.run_app`).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import trio
import typer

from server_runtime import logfile
from server_runtime.climain import first_of, run_app
from server_runtime.metrics_http import MetricsEndpoint, MetricsListenError
from server_runtime.regular_file import RefusedFile


class StartupError(Exception):
    """The server could not start (its port is taken, its log file cannot be opened)."""


class Server(Protocol):
    """What a program serves: started in a nursery (its ``task_status`` gets where it listens), stopped once."""

    metrics: MetricsEndpoint | None

    async def serve(self, *, task_status: Any = ...) -> None: ...

    def stop(self) -> None: ...


class ServerConfig(Protocol):
    """What the entry point reads of a server's configuration."""

    logFile: str  # noqa: N815 (RocketMQ's key names)
    logFileMaxSize: int  # noqa: N815
    logFileMaxIndex: int  # noqa: N815


C = TypeVar("C", bound=ServerConfig)


@dataclass(frozen=True)
class ServerProgram(Generic[C]):
    """One server program, as data (see the module docstring)."""

    prog: str
    summary: str  # the command's help
    config_help: str  # -c
    namesrv_help: str  # -n
    log: logging.Logger
    #: Errors that end the program with one line (the config's, the accounts', TLS's, ...).
    expected: tuple[type[BaseException], ...]
    #: (-c file or None, -n value or None) -> the config; raises one of ``expected``.
    load: Callable[[str | None, str | None], C]
    #: -p: every config item, one ``key=value`` line each.
    render: Callable[[C], str]
    #: Before the event loop: read what the server needs from disk, and return how to build it.
    prepare: Callable[[C], Callable[[], Server]]
    #: host:port it listens on, for "cannot listen on ..." (a config's bind address).
    listen_addr: Callable[[C], str]
    #: (config, what ``serve`` reported when it listened) -> the boot line.
    boot_line: Callable[[C, Any], str]
    #: (config, metrics URL) -> the metrics line.
    metrics_line: Callable[[C, str], str]
    stopping: str  # what it does on a signal ("stopping", "unregistering and stopping")
    stopped: str  # the last log line
    #: (config, the server) -> lines printed once it listens, before the metrics and boot lines (the
    #: broker's VIP channel).
    listening_lines: Callable[[C, Any], list[str]] = lambda config, server: []


def server_app(program: ServerProgram[Any]) -> typer.Typer:
    """The Typer command of ``program``: ``-c``, ``-p``, ``-n``, ``-h``."""
    cli = typer.Typer(
        add_completion=False,
        context_settings={"help_option_names": ["-h", "--help"]},
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )

    @cli.command(help=program.summary)
    def main(
        config_file: str | None = typer.Option(
            None, "-c", "--configFile", metavar="FILE", help=program.config_help),
        print_config: bool = typer.Option(False, "-p", "--printConfigItem", help="Print all config items and exit."),
        namesrv_addr: str | None = typer.Option(None, "-n", "--namesrvAddr", metavar="ADDR", help=program.namesrv_help),
    ) -> None:
        start(program, config_file, print_config, namesrv_addr)

    return cli


def start(program: ServerProgram[C], config_file: str | None, print_config: bool, namesrv_addr: str | None) -> None:
    """Load the config, open the log file, and serve until a signal (or print the config and return)."""
    config = program.load(config_file, namesrv_addr)
    if print_config:
        print(program.render(config), end="")
        return
    try:
        logfile.configure(config.logFile, config.logFileMaxSize, config.logFileMaxIndex)
    except OSError as exc:
        raise StartupError(f"logFile {config.logFile} {exc}" if isinstance(exc, RefusedFile)
                           else f"cannot open logFile {config.logFile}: {exc.strerror or exc}") from None
    if config_file:
        print(f"load config properties file OK, {config_file}", flush=True)
    build = program.prepare(config)
    try:
        trio.run(_serve, program, config, build)
    except BaseException as exc:
        err = first_of(exc, OSError)
        if err is None:
            raise
        if isinstance(err, MetricsListenError):
            raise StartupError(str(err.strerror)) from None
        where = program.listen_addr(config)
        raise StartupError(f"cannot listen on {where}: {getattr(err, 'strerror', None) or err}") from None


async def _serve(program: ServerProgram[C], config: C, build: Callable[[], Server]) -> None:
    server = build()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            listening = await nursery.start(server.serve)
            for line in program.listening_lines(config, server):
                print(line, flush=True)
            if server.metrics is not None:
                print(program.metrics_line(config, server.metrics.url), flush=True)
            print(program.boot_line(config, listening), flush=True)
            async for signum in signals:
                program.log.info("received %s: %s", signal.Signals(signum).name, program.stopping)
                server.stop()
                break
    program.log.info(program.stopped)


def run_program(program: ServerProgram[Any], argv: list[str] | None = None) -> int:
    """Console-script entry point: one clear line and a non-zero exit on failure."""
    return run_app(server_app(program), program.prog, argv, (*program.expected, StartupError))
