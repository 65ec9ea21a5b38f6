"""``mqadmin``: Apache RocketMQ's admin commands, with Rich output and --json; a local cluster runner.

This module only builds the command line: each module of :mod:`mqadmin.commands` registers its
commands (grouped as Apache's tools/command packages group them), and :func:`entry` is the
console script. The commands are listed in the help in the order they are registered here.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any


def _exit_130_while_loading(signum: int, frame: object) -> None:
    os._exit(130)  # nothing has run yet: nothing to flush or stop


# Loading the commands (Typer, Rich, trio) takes a second, several on a busy machine: a Ctrl-C meanwhile
# is exit 130 like any other, not a KeyboardInterrupt traceback from deep inside an import. A SIGINT
# the caller ignores (a background job) stays ignored.
_LOADING = threading.current_thread() is threading.main_thread() \
    and signal.getsignal(signal.SIGINT) is signal.default_int_handler
if _LOADING:
    signal.signal(signal.SIGINT, _exit_130_while_loading)

import typer  # noqa: E402

from mqadmin.client.errors import AdminError  # noqa: E402
from mqadmin.commands import (  # noqa: E402
    broker,
    cluster,
    connection,
    consumer,
    fanout,
    help,
    localcluster,
    message,
    namesrv,
    network,
    offset,
    rocketmq,
    scenario,
    stats,
    topic,
    watch,
)
from mqadmin.commands.options import OPTION_SPELLINGS, add_signing, command_group, spellings  # noqa: E402
from mqadmin.commands.results import is_reader_gone, reader_gone  # noqa: E402
from mqadmin.localcluster.state import ClusterError  # noqa: E402
from server_runtime.climain import run_app  # noqa: E402

if _LOADING:
    signal.signal(signal.SIGINT, signal.default_int_handler)

app = command_group("RocketMQ admin commands (Apache mqadmin names and options), a local cluster runner and a live view.")

for commands_of_group in (topic, cluster, namesrv, broker, network, message, consumer, connection, offset, stats, watch,
                          localcluster, scenario, fanout, rocketmq, help):
    commands_of_group.register(app)
add_signing(app)


def full_summaries(app: typer.Typer) -> None:
    """Give every command (and group) of ``app`` its whole first sentence as the summary shown by
    ``mqadmin`` alone: Click would cut it to fit 80 columns with "...", even on a wide terminal; with
    an explicit summary it wraps instead."""
    def given(value: Any) -> str | None:  # Typer wraps unset values in DefaultPlaceholder
        return value if isinstance(value, str) and value.strip() else None

    infos: list[Any] = [*app.registered_commands, *app.registered_groups]
    for info in infos:
        sub = getattr(info, "typer_instance", None)
        if sub is not None:
            full_summaries(sub)
        help_text = given(info.help) or (given(sub.info.help) if sub is not None else None)
        if given(info.short_help) is None and help_text is not None:
            first = help_text.strip().split("\n\n", 1)[0]
            info.short_help = " ".join(first.split(". ", 1)[0].split()).rstrip(".") + "."


def main(argv: list[str]) -> int:
    """Run one mqadmin command line; returns the exit status (``--debug``: tracebacks are not hidden)."""
    debug = "--debug" in argv
    full_summaries(app)
    root: Any = typer.main.get_command(app)
    argv = _bare_group_help(root, [a for a in argv if a != "--debug"])
    OPTION_SPELLINGS.set(_option_spellings(root, argv))  # an error names an option as the user spelled it
    try:
        return run_app(app, "mqadmin", argv, (AdminError, ClusterError), debug=debug)
    except BaseException as exc:
        if not is_reader_gone(exc):
            raise
        return reader_gone()  # `mqadmin ... | head -1`: the reader is done, so are we (exit 0, quietly)


def _option_spellings(root: Any, argv: list[str]) -> dict[str, str]:
    """Which spelling of each of its options the command named by ``argv`` was given."""
    command = root
    for word in argv:
        sub = getattr(command, "commands", {}).get(word)
        if sub is None:
            break
        command = sub
    names = [[*p.opts, *p.secondary_opts] for p in getattr(command, "params", []) if getattr(p, "opts", None)]
    return spellings(names, argv)


def _bare_group_help(root: Any, argv: list[str]) -> list[str]:
    """``mqadmin`` or ``mqadmin scenario`` alone print their help (exit 0), as Apache's mqadmin lists its commands."""
    group = root
    for word in argv:
        group = getattr(group, "commands", {}).get(word)
        if group is None:
            return argv
    return [*argv, "-h"] if hasattr(group, "commands") else argv


def entry() -> None:
    code = main(sys.argv[1:])
    try:
        sys.stdout.flush()  # the last buffered output: its reader may be gone too
    except BrokenPipeError:
        code = reader_gone()
    sys.exit(code)
