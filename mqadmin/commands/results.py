"""What every mqadmin command shares on the way out: result lines, one-line errors and exit statuses.

The exit statuses every command follows (README, "Exit status and errors"):

* 0 success;
* 1 a runtime failure: a request failed, a server did not answer, an expectation did not hold;
* 2 bad usage: an unknown option, a missing or bad option value (raised as click usage errors, or
  :func:`mqadmin.commands.options.bad_option`), an output file that cannot be written;
* 130 interrupted (Ctrl-C, SIGTERM where a command handles it).

Errors are one line on stderr starting ``mqadmin:``; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import typer

from mqadmin.client.errors import AdminError, PerServer
from mqadmin.output.console import out, print_json
from remoting.climain import first_of

#: Exit statuses (documented once, in the README).
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def per_server(results: list[PerServer], ok_line: str, fail_line: str, as_json: bool = False,
               extra: dict[str, Any] | None = None) -> None:
    """One line per server (or JSON ``{"results": [...]}``); exit 1 if any failed."""
    if as_json:
        print_json({**(extra or {}), "results": [r.to_json() for r in results]})
    else:
        print_results(results, ok_line, fail_line)
    if not all(r.ok for r in results):
        raise typer.Exit(1)


def print_results(results: list[PerServer], ok_line: str, fail_line: str) -> None:
    """``ok_line`` or ``fail_line`` (in red) per server, formatted with its ``addr``, ``value`` and ``error``."""
    for r in results:
        if r.ok:
            out.print(ok_line.format(addr=r.addr, value=r.value))
        else:
            out.print(fail_line.format(addr=r.addr, error=r.error), style="red")


def fail(message: str, code: int = EXIT_FAILED, prog: str = "mqadmin") -> NoReturn:
    """One line on stderr, then exit with ``code`` (1 unless told)."""
    print(f"{prog}: {message}", file=sys.stderr)
    raise typer.Exit(code)


@contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C inside the block ends the command with status 130 (a repeating view, a long wait)."""
    try:
        yield
    except BaseException as exc:
        if first_of(exc, KeyboardInterrupt) is None:
            raise
        raise typer.Exit(EXIT_INTERRUPTED) from None


def error_line(addr: str, error: str) -> str:
    """``addr: error`` with the address once: client errors usually name it already."""
    return error if addr in error else f"{addr}: {error}"


def write_output(path: Path, text: str) -> None:
    """Write a result file; a failure (disk full, removed directory) is one runtime-error line."""
    try:
        path.write_text(text)
    except OSError as exc:
        raise AdminError(f"cannot write {path}: {exc.strerror or exc}") from None


def self_command(argv0: str | None = None) -> str:
    """How to type ``mqadmin`` again: bare when that name on $PATH is this program, else its path.

    ``make run`` starts ``.venv/bin/mqadmin``, which is not on PATH: a hint to type a bare
    ``mqadmin`` would fail there.
    """
    argv0 = argv0 if argv0 is not None else sys.argv[0]
    if not argv0 or os.path.basename(argv0) != "mqadmin" or not os.path.isfile(argv0):
        return "mqadmin"  # run some other way (tests, python -c): nothing better to say
    on_path = shutil.which("mqadmin")
    if on_path and os.path.realpath(on_path) == os.path.realpath(argv0):
        return "mqadmin"
    rel = os.path.relpath(argv0)
    return rel if not rel.startswith("..") else os.path.abspath(argv0)
