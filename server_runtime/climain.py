"""Entry-point wrapper shared by the project's command-line programs.

Typer prints usage errors as a multi-line box and lets exceptions end in a
traceback; our programs instead print one line naming the problem and exit
non-zero (``--debug`` where a program offers it shows the traceback).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import typer


def first_of(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """``exc`` itself or the first ``kind`` inside an exception group."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = first_of(inner, kind)
            if found is not None:
                return found
    return None


def run_app(
    app: typer.Typer,
    prog: str,
    argv: Sequence[str] | None,
    expected: tuple[type[BaseException], ...],
    *,
    debug: bool = False,
) -> int:
    """Run ``app``; expected errors and usage errors become one stderr line."""
    command = typer.main.get_command(app)
    try:
        result = command.main(args=list(argv) if argv is not None else None, prog_name=prog, standalone_mode=False)
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        return 130
    except BaseException as exc:
        found = first_of(exc, expected) if expected else None
        if found is not None and not debug:
            print(f"{prog}: {found}", file=sys.stderr)
            return 1
        if first_of(exc, KeyboardInterrupt) is not None:
            return 130
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):  # a usage error
            ctx = getattr(exc, "ctx", None)  # the command whose options were wrong: its own help says how
            where = ctx.command_path if ctx is not None else prog
            print(f"{prog}: {exc.format_message()} (see {where} -h)", file=sys.stderr)  # type: ignore[attr-defined]
            return int(exc.exit_code)  # type: ignore[attr-defined]
        raise
    # Without standalone mode an Exit raised by a command comes back as its code.
    return result if isinstance(result, int) else 0
