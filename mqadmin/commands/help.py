"""``mqadmin help [COMMAND...]``: Apache mqadmin's form of asking for help (``mqadmin help updateTopic``).

The same text as ``mqadmin COMMAND -h``: the command's own help is printed by Click, so the two
can never differ. ``mqadmin help`` alone lists the commands, as ``mqadmin`` does.
"""

from __future__ import annotations

import difflib
from typing import Any

import typer

from mqadmin.output.console import write_out


def help_cmd(
    ctx: typer.Context,
    words: list[str] | None = typer.Argument(None, metavar="[COMMAND]...", help="A command (and sub-command)."),
) -> None:
    """Print the help of COMMAND, or the list of commands."""
    parent = ctx.parent
    assert parent is not None  # a command always runs inside the mqadmin group
    command: Any = parent.command
    path = [parent.info_name or "mqadmin"]
    for word in words or []:
        sub = command.get_command(parent, word) if hasattr(command, "get_command") else None
        if sub is None:
            names = list(command.list_commands(parent)) if hasattr(command, "list_commands") else []
            close = difflib.get_close_matches(word, names, n=3)  # as `mqadmin clusterlist` itself suggests
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise typer.BadParameter(f"no such command {word!r} in {' '.join(path)}{hint}", param_hint="COMMAND")
        parent = sub.make_context(word, [], parent=parent, resilient_parsing=True)
        command = sub
        path.append(word)
    write_out(parent.get_help() + "\n")


def register(app: typer.Typer) -> None:
    app.command("help", help="Print a command's help (mqadmin help updateTopic), or the list of commands.")(help_cmd)
