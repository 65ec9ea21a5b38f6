"""What every mqadmin command module shares: common options, finding the NameServers, result lines,
and the exit statuses every command follows (README, "Exit status and errors"):

* 0 success;
* 1 a runtime failure: a request failed, a server did not answer, an expectation did not hold;
* 2 bad usage: an unknown option, a missing or bad option value (raised as click usage errors, or
  :func:`bad_option`), an output file that cannot be written;
* 130 interrupted (Ctrl-C, SIGTERM where a command handles it).

Errors are one line on stderr starting ``mqadmin:``; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import typer

from mqadmin import cluster
from mqadmin.client import (
    AdminClient,
    AdminError,
    PerServer,
    namesrv_from_env,
    split_addrs,
)
from mqadmin.render import out, print_json

NamesrvOpt = typer.Option(None, "-n", "--namesrvAddr", metavar="ADDR",
                          help="NameServer(s), 'host:port;host:port' (default: $NAMESRV_ADDR, else the local cluster).")
JsonOpt = typer.Option(False, "--json", help="Print JSON (shapes in the README) instead of text.")
TimeoutOpt = typer.Option(3.0, "--timeout", min=0.05, help="Seconds to wait for each server.")


def namesrv_addrs(namesrv: str | None) -> list[str]:
    """-n, else $NAMESRV_ADDR, else the NameServers of the running local cluster."""
    if namesrv:
        try:
            return split_addrs(namesrv)
        except AdminError as exc:  # a bad option value is a usage error (exit 2)
            raise bad_option("-n", str(exc)) from None
    try:
        addrs = namesrv_from_env()
    except AdminError as exc:
        raise AdminError(f"NAMESRV_ADDR: {exc}") from None
    if addrs:
        return addrs
    try:
        state = cluster.ClusterState.load(cluster.default_dir())
    except cluster.ClusterError:
        state = None
    running = [p.addr for p in state.namesrvs if p.alive()] if state else []
    if not running:
        raise AdminError("no NameServer address: give -n host:port, set NAMESRV_ADDR or run mqadmin start")
    return running


def client_for(namesrv: str | None, timeout: float) -> AdminClient:
    return AdminClient(namesrv_addrs(namesrv), timeout=timeout)


def per_server(results: list[PerServer], ok_line: str, fail_line: str, as_json: bool = False,
               extra: dict[str, Any] | None = None) -> None:
    """One line per server (or JSON ``{"results": [...]}``); exit 1 if any failed."""
    if as_json:
        print_json({**(extra or {}), "results": [r.to_json() for r in results]})
    else:
        for r in results:
            if r.ok:
                out.print(ok_line.format(addr=r.addr, value=r.value))
            else:
                out.print(fail_line.format(addr=r.addr, error=r.error), style="red")
    if not all(r.ok for r in results):
        raise typer.Exit(1)


def bad_option(option: str, message: str) -> typer.BadParameter:
    """A usage error naming the option (one line, exit 2)."""
    return typer.BadParameter(message, param_hint=option)


#: Typer/Click settings of every mqadmin command group: -h as well as --help, and help laid out for
#: the terminal's real width (Click's default caps it at 80 and cuts command summaries with "...").
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 250}

#: How to get the optional extras: the README's command (the project is not on any package index).
SPARK_INSTALL = "run pip install -e '.[spark,plot]' in the project directory"
PLOT_INSTALL = "run pip install -e '.[plot]' in the project directory"

#: Exit statuses (documented once, in the README).
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def fail(message: str, code: int = EXIT_FAILED, prog: str = "mqadmin") -> NoReturn:
    """One line on stderr, then exit with ``code`` (1 unless told)."""
    print(f"{prog}: {message}", file=sys.stderr)
    raise typer.Exit(code)


@contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C inside the block ends the command with status 130 (a repeating view, a long wait)."""
    from remoting.climain import first_of

    try:
        yield
    except BaseException as exc:
        if first_of(exc, KeyboardInterrupt) is None:
            raise
        raise typer.Exit(EXIT_INTERRUPTED) from None


#: Image formats ``--plot`` writes (matplotlib picks the format from the suffix).
PLOT_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".webp")


def check_output(option: str, path: Path | None, suffixes: tuple[str, ...] = ()) -> Path | None:
    """Refuse an output file that cannot be written, before any work is done (a usage error, exit 2).

    Its directory must exist and be writable, the path must not be a directory, and with
    ``suffixes`` its name must end with one of them: a run that took minutes must not end in a
    failed write that loses its result.
    """
    if path is None:
        return None
    if suffixes and path.suffix.lower() not in suffixes:
        raise bad_option(option, f"{path}: the file name must end with one of {', '.join(suffixes)}")
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise bad_option(option, f"cannot write {path}: it is a directory")
    if not parent.is_dir():
        raise bad_option(option, f"cannot write {path}: directory {parent} does not exist")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise bad_option(option, f"cannot write {path}: permission denied")
        return path
    try:  # the only reliable test (root, read-only mounts, /proc): create a file there
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".mqadmin-check-"):
            pass
    except OSError as exc:
        raise bad_option(option, f"cannot write {path}: {exc.strerror or exc}") from None
    return path


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


def error_line(addr: str, error: str) -> str:
    """``addr: error`` with the address once: client errors usually name it already."""
    return error if addr in error else f"{addr}: {error}"


def has_module(name: str) -> bool:
    """Whether an optional extra (pyspark, matplotlib) can be imported, without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def full_summaries(app: typer.Typer) -> None:
    """Give every command (and group) of ``app`` its whole first sentence as the summary shown by
    ``mqadmin`` alone: Click would cut it to fit 80 columns with "...", even on a wide terminal; with
    an explicit summary it wraps instead. Covers commands registered later by any module."""
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
