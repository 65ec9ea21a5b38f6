"""What every mqadmin command shares on the way out: result lines, one-line errors and exit statuses.

The exit statuses every command follows (README, "Exit status and errors"):

* 0 success;
* 1 a runtime failure: a request failed, a server did not answer, an expectation did not hold;
* 2 bad usage: an unknown option, a missing or bad option value (raised as click usage errors, or
  :func:`mqadmin.commands.options.bad_option`), an output file that cannot be written;
* 130 interrupted (Ctrl-C, SIGTERM where a command handles it);
* 0 as well when stdout's reader goes away (``mqadmin topicList | head -1``): see :func:`reader_gone`.

Two kinds of failure, two places:

* a command that sends one request to several servers (every NameServer, every master of a cluster)
  prints one result line per server on stdout, Apache's words for a server that answered and
  ``ADDR: what went wrong`` for one that did not (:func:`print_results`); if any server failed, one
  summary line on stderr names them (``mqadmin: 1 of 2 NameServers failed: ADDR``) and the exit
  status is 1 (:func:`exit_if_any_failed`);
* a command-level error (bad input the servers refused, the one server named by ``-b`` or every
  NameServer not answering, a run that failed) is one line on stderr starting ``mqadmin:``;
  ``--debug`` shows the traceback instead.
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

from mqadmin.client.errors import AdminError, PerServer, error_about
from mqadmin.output.console import ReaderGone, out, print_json
from server_runtime.climain import first_of

#: Exit statuses (documented once, in the README).
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def per_server(results: list[PerServer], ok_line: str, as_json: bool = False,
               extra: dict[str, Any] | None = None) -> None:
    """One line per server (or JSON ``{"results": [...]}``); exit 1 if any failed."""
    if as_json:
        print_json({**(extra or {}), "results": [r.to_json() for r in results]})
    else:
        print_results(results, ok_line)
    exit_if_any_failed(results)


def print_results(results: list[PerServer], ok_line: str) -> None:
    """The per-server result lines, on stdout: ``ok_line`` (Apache's words, formatted with the server's
    ``addr`` and the answer's ``value``) for a server that answered, ``ADDR: what went wrong`` (in red)
    for one that did not."""
    for r in results:
        if r.ok:
            out.print(ok_line.format(addr=r.addr, value=r.value))
        else:
            print_failure(r)


def print_failure(r: PerServer, doing: str = "") -> None:
    """A per-server failure line, ``ADDR: what went wrong`` (``ADDR: doing: what went wrong`` when the
    command does several things on each server), on stdout with the other result lines."""
    line = error_line(r.addr, r.error or "no answer")
    if doing:
        line = f"{r.addr}: {doing}: {line.removeprefix(f'{r.addr}: ')}"
    out.print(line, style="red")


def exit_if_any_failed(results: list[PerServer], also: str | None = None) -> None:
    """Exit status 1 when any server failed (its line is printed already), after one summary line on
    stderr naming the failed servers (``mqadmin: 1 of 2 NameServers failed: ADDR``); ``also``: a
    further finding of the command, which fails it too and is told on the same line."""
    summary = failure_summary(results)
    parts = [p for p in (summary, also) if p]
    if parts:
        fail("; ".join(parts))


#: How the summary names several servers of a kind.
_PLURALS = {"NameServer": "NameServers", "broker": "brokers"}


def failure_summary(results: list[PerServer]) -> str | None:
    """``1 of 2 NameServers failed: ADDR`` (one clause per kind of server asked, ``; `` between), or
    None when every server answered."""
    asked: dict[str, dict[str, bool]] = {}  # kind -> address -> every request to it succeeded
    for r in results:
        of_kind = asked.setdefault(r.kind, {})
        of_kind[r.addr] = of_kind.get(r.addr, True) and r.ok
    clauses = []
    for kind, addrs in asked.items():
        failed = [addr for addr, ok in addrs.items() if not ok]
        if failed:
            name = _PLURALS.get(kind, f"{kind}s") if len(addrs) > 1 else kind
            clauses.append(f"{len(failed)} of {len(addrs)} {name} failed: {', '.join(failed)}")
    return "; ".join(clauses) or None


def only(results: list[PerServer]) -> PerServer:
    """The result of a request to the one server the user named (``-b``): its failure is the command's
    error, one ``mqadmin:`` line on stderr (exit 1), as for any command that asks one server."""
    (result,) = results
    if not result.ok:
        raise AdminError(result.error or f"{result.addr}: no answer")
    return result


def is_reader_gone(exc: BaseException) -> bool:
    """Whether ``exc`` (or one inside an exception group) says stdout's reader went away."""
    return first_of(exc, ReaderGone) is not None or first_of(exc, BrokenPipeError) is not None


def reader_gone() -> int:
    """stdout's reader closed the pipe: stop writing, say nothing, exit 0.

    A reader that stops reading (``head -1``) got what it wanted; a script under ``set -o pipefail``
    must not fail because of it. stdout is pointed at /dev/null so that the interpreter's last flush
    cannot fail again.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (tests): nothing to protect
        pass
    return 0


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
    """``ADDR: what went wrong``, the address once and first (:func:`~mqadmin.client.errors.error_about`)."""
    return error_about(addr, error)


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
