"""Every mqadmin command, found by walking the Typer app (so commands added later are covered too):
``-h`` works, and a bad argument is one line on stderr, exit status 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, get_args

import pytest
import typer

from mqadmin.cli import app
from tests.mqadmin_procs import CLI, cli_env, mqadmin


def _walk(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found = []
    for name, cmd in sorted(getattr(group, "commands", {}).items()):
        found.append((path + (name,), cmd))
        found.extend(_walk(cmd, path + (name,)))
    return found


COMMANDS = _walk(typer.main.get_command(app))
LEAVES = [(p, c) for p, c in COMMANDS if not hasattr(c, "commands")]
IDS = [" ".join(p) for p, _ in COMMANDS]


def test_the_walk_finds_every_kind_of_command() -> None:
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"clusterList", "watch", "start", "killBroker", "fanout", "scenario", "scenario run"} <= names
    assert len(LEAVES) >= 25


def _one_line_usage_error(done: subprocess.CompletedProcess[str], path: tuple[str, ...]) -> str:
    """One line, ending with the help to read: the command's own (``mqadmin updateTopic -h``)."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("mqadmin") and lines[0].endswith(f"(see {' '.join(('mqadmin', *path))} -h)"), lines[0]
    return lines[0]


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=IDS)
def test_help(path: tuple[str, ...], cmd: Any) -> None:
    done = mqadmin(*path, "-h", env=cli_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Usage: mqadmin {' '.join(path)}"), done.stdout[:200]
    assert done.stderr == ""


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=IDS)
def test_unknown_option_is_one_line_exit_2(path: tuple[str, ...], cmd: Any) -> None:
    line = _one_line_usage_error(mqadmin(*path, "--no-such-option", env=cli_env()), path)
    assert "--no-such-option" in line


def _numeric_option(cmd: Any) -> str | None:
    """The first option taking an int or a float (``int | None`` too)."""
    for param in cmd.params:
        ann = getattr(getattr(param, "type_descriptor", None), "annotation", None)
        kinds = get_args(ann) or (ann,)
        if getattr(param, "opts", None) and param.opts[0].startswith("-") and (int in kinds or float in kinds):
            return str(param.opts[0])
    return None


NUMERIC = [(p, c, _numeric_option(c)) for p, c in LEAVES if _numeric_option(c) is not None]


@pytest.mark.parametrize(("path", "cmd", "option"), NUMERIC, ids=[" ".join(p) for p, _, _ in NUMERIC])
def test_bad_number_is_one_line_exit_2(path: tuple[str, ...], cmd: Any, option: str) -> None:
    line = _one_line_usage_error(mqadmin(*path, option, "not-a-number", env=cli_env()), path)
    assert option in line or "Missing" in line  # a required option may be reported first


def test_bare_groups_print_their_help() -> None:
    for args in ((), ("scenario",)):
        done = mqadmin(*args, env=cli_env())
        assert done.returncode == 0 and "Commands:" in done.stdout, done.stderr


def test_bare_mqadmin_keeps_whole_summaries_at_160_columns() -> None:
    done = mqadmin(env=cli_env(columns=160))
    listing = done.stdout.split("Commands:", 1)[1]
    assert "..." not in listing, listing
    assert "Show a topic's route: brokers, addresses, queues (JSON unless -l)." in listing
    assert "Stage outages on a local cluster from a YAML scenario and check expectations." in listing


def test_debug_shows_the_traceback() -> None:
    args = ["topicRoute", "-t", "T", "-n", "127.0.0.1:1", "--timeout", "1"]
    plain = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, env=cli_env(), check=False)
    assert plain.returncode == 1 and plain.stderr.count("\n") == 1 and "Traceback" not in plain.stderr
    debug = subprocess.run([*CLI, "--debug", *args], capture_output=True, text=True, timeout=60, env=cli_env(),
                           check=False)
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "AdminError" in debug.stderr


def test_the_walk_runs_the_console_entry_code() -> None:
    # The in-process runner above is the same entry as the console script: checked once for real.
    done = subprocess.run([*CLI, "killBroker", "-b", "x", "--signal", "FOO"], capture_output=True, text=True,
                          timeout=60, env=cli_env(), check=False)
    assert "unknown signal 'FOO'" in _one_line_usage_error(done, ("killBroker",))
    assert sys.executable in CLI
