"""The import direction docs/architecture.md states, checked on the source (every import, lazy ones too).

Each package may import only the packages listed for it below, and its own modules; anything else of
ours is a layering error. Third-party imports are free, except Typer (and Rich) where the document says
a layer has no command line (and no terminal output). A rule change belongs in docs/architecture.md first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Our top-level packages: an import of one of these is checked against the rules.
OURS = ("remoting", "namesrv", "broker_stub", "simclient", "faultproxy", "mqadmin", "tests", "bench")

#: package -> what of ours it may import (a package, or one module of it), besides its own modules.
ALLOWED: dict[str, tuple[str, ...]] = {
    "remoting": (),
    "namesrv": ("remoting",),
    "broker_stub": ("remoting", "namesrv.durable"),
    "simclient": ("remoting",),
    "faultproxy": ("remoting.logfile", "remoting.ratelog"),
    "mqadmin.client": ("remoting", "namesrv.liveinfo", "namesrv.provisional", "broker_stub.faults"),
    "mqadmin.output": (),
    "mqadmin.rocketmq": (),
    "mqadmin.localcluster": ("remoting", "mqadmin.client", "mqadmin.rocketmq", "faultproxy.client"),
    "mqadmin.scenario": ("remoting", "simclient", "namesrv.config", "mqadmin.client", "mqadmin.output",
                         "mqadmin.localcluster", "mqadmin.rocketmq", "faultproxy.client"),
    "mqadmin.fanout": ("remoting", "simclient", "mqadmin.client", "mqadmin.output", "mqadmin.localcluster",
                       "mqadmin.scenario"),
    "mqadmin.commands": ("remoting", "namesrv.config_policy", "mqadmin.client", "mqadmin.output",
                         "mqadmin.localcluster", "mqadmin.scenario", "mqadmin.fanout", "mqadmin.rocketmq",
                         "faultproxy.client"),
    "mqadmin.cli": ("remoting", "mqadmin.client", "mqadmin.commands", "mqadmin.localcluster"),
}
#: Layers without a command line (Typer), and without terminal output (Rich).
NO_TYPER = ("simclient", "faultproxy", "mqadmin.client", "mqadmin.output", "mqadmin.localcluster", "mqadmin.scenario",
            "mqadmin.fanout", "mqadmin.rocketmq")
NO_RICH = ("simclient", "faultproxy", "mqadmin.client", "mqadmin.localcluster", "mqadmin.rocketmq")
#: The command modules' shared layer: the only command modules another command module may import.
SHARED_COMMANDS = ("mqadmin.commands.options", "mqadmin.commands.results")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str) -> str:
    """The ALLOWED key a module belongs to (the longest that is a prefix of it)."""
    keys = [k for k in ALLOWED if module == k or module.startswith(k + ".")]
    if not keys:
        raise AssertionError(f"{module}: in no package of docs/architecture.md (add it there and to ALLOWED)")
    return max(keys, key=len)


def imports_of(source: str, filename: str) -> list[tuple[int, str]]:
    """(line, module) for every absolute import; ``from a import b`` gives a.b too (b may be a module)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def is_module(name: str) -> bool:
    """Whether ``name`` is a module or package of ours (in ``from x import name``, name may be a function)."""
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def product_files() -> list[Path]:
    """Every module of the product (tests and bench may import anything), but mqadmin's empty __init__."""
    files = (p for top in OURS if top not in ("tests", "bench") for p in (ROOT / top).rglob("*.py"))
    return sorted(p for p in files if p != ROOT / "mqadmin" / "__init__.py")


def violations(path: Path, source: str | None = None) -> list[str]:
    me = module_name(path)
    pkg = package_of(me)
    allowed = ALLOWED[pkg]
    found = []
    for line, name in imports_of(path.read_text() if source is None else source, str(path)):
        where = f"{path.relative_to(ROOT)}:{line}: {me} imports {name}"
        top = name.split(".")[0]
        if top == "typer" and any(within(pkg, p) for p in NO_TYPER):
            found.append(f"{where} (no Typer in {pkg})")
        if top == "rich" and any(within(pkg, p) for p in NO_RICH):
            found.append(f"{where} (no Rich in {pkg})")
        if top not in OURS or name == "mqadmin" or not is_module(name):
            continue  # third-party, mqadmin's empty __init__, or a name inside a module already checked
        if within(name, pkg):
            if pkg == "mqadmin.commands" and name not in (pkg, me, *SHARED_COMMANDS):
                found.append(f"{where} (a command module imports only {', '.join(SHARED_COMMANDS)})")
        elif not any(within(name, a) for a in allowed):
            found.append(f"{where} (allowed: {', '.join(allowed) or 'none of ours'})")
    return found


def test_every_import_goes_the_way_docs_architecture_says() -> None:
    files = product_files()
    assert len(files) > 100  # the whole product was read, not an empty glob
    problems = [v for f in files for v in violations(f)]
    assert problems == [], "\n".join(problems)


def test_mqadmin_has_no_top_level_modules_but_the_entry_point() -> None:
    """New code goes into a layer's package, where the rules above see it."""
    assert sorted(p.name for p in (ROOT / "mqadmin").glob("*.py")) == ["__init__.py", "cli.py"]
    assert imports_of((ROOT / "mqadmin" / "__init__.py").read_text(), "mqadmin/__init__.py") == []
    packages = sorted(p.name for p in (ROOT / "mqadmin").iterdir() if (p / "__init__.py").is_file())
    assert packages == ["client", "commands", "fanout", "localcluster", "output", "rocketmq", "scenario"]


def test_every_package_has_its_paragraph_in_docs_architecture() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    for package in [*ALLOWED, "tests", "bench", "interop"]:
        heading = f"`{package.replace('.', '/')}/`" if package != "mqadmin.cli" else "`mqadmin/cli.py`"
        assert heading in text, f"docs/architecture.md has no paragraph for {heading}"


@pytest.mark.parametrize(("source", "expected"), [
    ("import typer\n", "(no Typer in mqadmin.client)"),
    ("from rich.text import Text\n", "(no Rich in mqadmin.client)"),
    ("from mqadmin.commands import topic\n", "imports mqadmin.commands (allowed: remoting, namesrv.liveinfo"),
    ("from namesrv import config\n", "imports namesrv (allowed: remoting, namesrv.liveinfo"),
    ("def f():\n    from mqadmin.localcluster.state import ClusterState\n", "imports mqadmin.localcluster.state"),
])
def test_the_check_catches_a_wrong_import(source: str, expected: str) -> None:
    """The rules can fail: a client module importing Typer, Rich, a command, a NameServer module, or (lazily,
    inside a function) the local cluster is reported, with the line."""
    found = violations(ROOT / "mqadmin" / "client" / "probe.py", source)
    assert found and expected in found[0], found


def test_a_command_module_importing_another_is_caught() -> None:
    found = violations(ROOT / "mqadmin" / "commands" / "probe.py", "from mqadmin.commands.topic import route_json\n")
    assert found == ["mqadmin/commands/probe.py:1: mqadmin.commands.probe imports mqadmin.commands.topic "
                     "(a command module imports only mqadmin.commands.options, mqadmin.commands.results)"]
