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
OURS = ("remoting", "server_runtime", "security", "namesrv", "broker_stub", "simclient", "faultproxy", "mqadmin", "tests",
        "bench")

#: package -> what of ours it may import (a package, or one module of it), besides its own modules.
ALLOWED: dict[str, tuple[str, ...]] = {
    "remoting": (),
    "server_runtime": ("remoting",),
    "security": ("remoting", "server_runtime"),
    "namesrv": ("remoting", "server_runtime", "security"),
    "broker_stub": ("remoting", "server_runtime", "security", "namesrv.durable"),
    "simclient": ("remoting", "security.tls_context"),
    "faultproxy": ("server_runtime.logfile", "server_runtime.ratelog"),
    "mqadmin.client": ("remoting", "namesrv.liveinfo", "namesrv.provisional", "broker_stub.faults",
                       "security.tls_config", "security.tls_context"),
    "mqadmin.output": (),
    "mqadmin.rocketmq": (),
    "mqadmin.localcluster": ("remoting", "server_runtime.regular_file", "security.tls_context", "mqadmin.client",
                             "mqadmin.rocketmq", "faultproxy.client"),
    "mqadmin.scenario": ("remoting", "server_runtime.climain", "simclient", "namesrv.config", "mqadmin.client",
                         "mqadmin.output", "mqadmin.localcluster", "mqadmin.rocketmq", "faultproxy.client"),
    "mqadmin.fanout": ("remoting", "server_runtime.climain", "simclient", "mqadmin.client", "mqadmin.output",
                       "mqadmin.localcluster", "mqadmin.scenario"),
    "mqadmin.commands": ("remoting", "server_runtime.climain", "namesrv.config_policy", "mqadmin.client",
                         "mqadmin.output", "mqadmin.localcluster", "mqadmin.scenario", "mqadmin.fanout",
                         "mqadmin.rocketmq", "faultproxy.client"),
    "mqadmin.cli": ("remoting", "server_runtime.climain", "mqadmin.client", "mqadmin.commands",
                    "mqadmin.localcluster"),
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


# ----------------------------------------------------------------------
# no import circles, and no long functions


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """module -> the modules of ours it imports (lazily and under TYPE_CHECKING too), from their sources.

    ``from package import name`` imports the module ``package.name`` when there is one, else the
    package itself (its ``__init__``); ``import a.b`` imports ``a.b``.
    """
    graph: dict[str, set[str]] = {}
    for me, source in sources.items():
        edges = graph.setdefault(me, set())
        for node in ast.walk(ast.parse(source, me)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in sources else node.module
                           for alias in node.names]
            else:
                continue
            edges.update(t for t in targets if t in sources and t != me)
    return graph


def circles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(tuple(sorted(component)))
    return sorted(found)


def test_the_product_has_no_import_circles() -> None:
    """Every import counts, lazy ones and TYPE_CHECKING ones too: a circle is a circle for the reader."""
    graph = import_graph({module_name(p): p.read_text() for p in product_files()})
    assert len(graph) > 100
    assert circles(graph) == [], "import circles among the product's modules"


def test_the_circle_check_finds_a_lazy_circle() -> None:
    sources = {
        "namesrv.a": "from namesrv import b\n",
        "namesrv.b": "def f():\n    from namesrv.c import g\n",
        "namesrv.c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from namesrv.a import A\n",
        "namesrv.d": "import namesrv.a\n",
    }
    assert circles(import_graph(sources)) == [("namesrv.a", "namesrv.b", "namesrv.c")]


#: The longest a product function may be, in lines (its def to its last line, docstring included).
MAX_FUNCTION_LINES = 80
#: Functions allowed to be longer: each one's docstring says why it is kept whole ("Kept whole: ...").
LONG_FUNCTIONS: set[str] = set()
def functions_of(tree: ast.AST, prefix: str = "") -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of every function, nested ones and methods included."""
    found = []
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((prefix + child.name, child))
            found += functions_of(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            found += functions_of(child, f"{prefix}{child.name}.")
        else:
            found += functions_of(child, prefix)
    return found


def long_functions(path: Path, source: str | None = None) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    where = path.relative_to(ROOT).as_posix()
    return {f"{where}:{name}": node for name, node in functions_of(tree)
            if node.end_lineno is not None and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES}


def test_no_product_function_is_longer_than_80_lines() -> None:
    """Split by step; where one stays long, it is in LONG_FUNCTIONS and its docstring says why."""
    found = {name: node for p in product_files() for name, node in long_functions(p).items()}
    unexplained = sorted(set(found) - LONG_FUNCTIONS)
    assert unexplained == [], f"functions over {MAX_FUNCTION_LINES} lines: {unexplained}"
    for name in LONG_FUNCTIONS:
        assert name in found, f"{name} is no longer long: take it off LONG_FUNCTIONS"
        assert "Kept whole:" in (ast.get_docstring(found[name]) or ""), f"{name}: its docstring says not why"


def test_the_length_check_counts_nested_functions_and_methods() -> None:
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    source = f"class C:\n    def outer(self):\n        def inner():\n            pass\n{body}\n"
    assert list(long_functions(ROOT / "namesrv" / "probe.py", source)) == ["namesrv/probe.py:C.outer"]
