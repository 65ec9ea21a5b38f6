"""``mqfaultproxy``: the fault proxy as a program.

    mqfaultproxy [-c FILE] [--control HOST:PORT] [--log-file FILE]

``FILE`` is JSON: ``{"control": "127.0.0.1:0", "logFile": "...", "paths": [{"name": ..., "listen": ...,
"upstream": ...}, ...]}`` (every key optional; the paths have the fields of ``POST /proxies``). The
paths are created before the boot line, which names the control endpoint's address (with port 0 the
system picks one)::

    The fault proxy boot success. control 127.0.0.1:41234

Bad arguments or a bad file: one line on stderr, exit 2; an address that cannot be bound: one line,
exit 1. SIGINT and SIGTERM stop it (its connections are closed, not reset).
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import trio

from faultproxy.control import ControlServer
from faultproxy.faults import FaultError, format_address, parse_address
from faultproxy.proxy import FaultProxy
from server_runtime.logfile import configure as configure_log

PROG = "mqfaultproxy"
DEFAULT_CONTROL = "127.0.0.1:8474"  # Toxiproxy's port
_CONFIG_KEYS = ("control", "logFile", "paths")
log = logging.getLogger("faultproxy")


class UsageError(Exception):
    """Bad arguments or config: exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="A TCP fault proxy (partition, latency, bandwidth, reset) with a "
                     "Toxiproxy-shaped HTTP control API.")
    parser.add_argument("-c", "--config", metavar="FILE", help="JSON: control, logFile and the paths to serve.")
    parser.add_argument("--control", metavar="HOST:PORT", help=f"Control endpoint (default {DEFAULT_CONTROL}).")
    parser.add_argument("--log-file", metavar="FILE", help="Log to this file, rotated by size (default stderr).")
    return parser


def _load_config(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        with open(path, "rb") as fh:
            config = json.loads(fh.read(16 * 1024 * 1024))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"{path} is not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise UsageError(f"{path} must hold a JSON object")
    unknown = [k for k in config if k not in _CONFIG_KEYS]
    if unknown:
        raise UsageError(f"{path}: unknown key {unknown[0]!r} (keys: {', '.join(_CONFIG_KEYS)})")
    if not isinstance(config.get("paths", []), list):
        raise UsageError(f"{path}: paths must be a list")
    return config


def _raise_descriptor_limit() -> None:
    """Every path is a listening socket and every connection two: take what the hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else hard
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError):
            pass  # as many paths as the soft limit allows, then


async def _serve(control: tuple[str, int], paths: list[Any]) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            proxy = FaultProxy(nursery)
            try:
                listeners = await trio.open_tcp_listeners(control[1], host=control[0])
            except OSError as exc:
                raise StartupError(f"cannot listen on {format_address(*control)}: {exc.strerror or exc}") from None
            try:
                await proxy.populate(paths)
            except FaultError as exc:
                raise StartupError(str(exc)) from None
            nursery.start_soon(ControlServer(proxy).serve, listeners[0])
            for extra in listeners[1:]:
                await extra.aclose()
            nursery.start_soon(_flush_logs, proxy)
            host, port = listeners[0].socket.getsockname()[:2]
            print(f"The fault proxy boot success. control {format_address(host, port)}", flush=True)
            async for signum in signals:
                log.info("%s: stopping", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()  # every link closes its two sockets (a FIN, not a reset)
                break


async def _flush_logs(proxy: FaultProxy) -> None:
    while True:
        await trio.sleep(1.0)
        proxy.ratelog.flush()


class StartupError(Exception):
    """An address could not be bound: exit 1."""


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        config = _load_config(args.config)
        control = parse_address(args.control or config.get("control") or DEFAULT_CONTROL, "--control", any_port=True)
        log_file = args.log_file if args.log_file is not None else str(config.get("logFile") or "")
        try:
            configure_log(log_file)
        except OSError as exc:
            raise UsageError(f"cannot log to {log_file}: {exc.strerror or exc}") from None
    except (UsageError, FaultError) as exc:
        print(f"{PROG}: {exc} (see {PROG} -h)", file=sys.stderr)
        return 2
    _raise_descriptor_limit()
    failed: BaseException | None = None
    interrupted = False
    try:
        trio.run(_serve, control, config.get("paths", []))
    except* StartupError as group:
        failed = group.exceptions[0]
    except* KeyboardInterrupt:
        interrupted = True
    if failed is not None:
        print(f"{PROG}: {failed}", file=sys.stderr)
        return 1
    return 130 if interrupted else 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
