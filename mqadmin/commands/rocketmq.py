"""``mqadmin rocketmq fetch VERSION``: resolve Apache RocketMQ's published jars ahead of their first use.

The local cluster, scenarios and benchmarks resolve a version on first use anyway
(:mod:`mqadmin.rocketmq.artifacts`); this does it up front, with progress, so a later ``start`` does not
wait on Maven Central. A missing ``java`` or ``mvn``, or a version that is not published, is one line
and exit 2.
"""

from __future__ import annotations

import os
import sys
import time

import typer

from mqadmin.commands.options import JsonOpt, command_group
from mqadmin.output.console import make_console, out, print_json
from mqadmin.rocketmq.artifacts import COMPONENTS, FIRST_MAJOR, ArtifactError, cache_root, cached, check_version, find_java, resolve

def artifact_failure(exc: ArtifactError) -> typer.Exit:
    """One line on stderr and exit 2: what is missing is the user's to install or correct."""
    print(f"mqadmin: {exc}", file=sys.stderr)
    return typer.Exit(2)


def _components(version: str, wanted: str | None) -> list[str]:
    check_version(version)
    names = [c.strip() for c in wanted.split(",") if c.strip()] if wanted else [
        c for c in COMPONENTS if int(version.split(".", 1)[0]) >= FIRST_MAJOR.get(c, 0)]
    for name in names:
        check_version(version, name)
    return names


def fetch_cmd(
    version: str = typer.Argument(..., metavar="VERSION", help="A published version: 4.9.7, 5.3.3, 5.5.0, ..."),
    components: str | None = typer.Option(None, "--components", metavar="A,B",
                                          help=f"Only these of {', '.join(COMPONENTS)} (default: all the version has)."),
    as_json: bool = JsonOpt,
) -> None:
    try:
        names = _components(version, components)
        find_java()
    except ArtifactError as exc:
        raise artifact_failure(exc) from None
    console = make_console(stderr=True)
    done = []
    for name in names:
        began = time.monotonic()
        fresh = cached(version, name) is None
        try:
            if fresh and console.is_terminal:
                with console.status(f"resolving RocketMQ {version} {name} with Maven ...") as status:
                    found = resolve(version, name, progress=lambda jar: status.update(
                        f"resolving RocketMQ {version} {name} with Maven: {jar}"))
            else:
                if fresh:
                    print(f"resolving RocketMQ {version} {name} with Maven ...", file=sys.stderr, flush=True)
                found = resolve(version, name)
        except ArtifactError as exc:
            raise artifact_failure(exc) from None
        jars = found.classpath.split(os.pathsep)
        done.append({"version": version, "component": name, "jars": len(jars), "fresh": fresh,
                     "seconds": round(time.monotonic() - began, 1)})
    if as_json:
        print_json({"cache": str(cache_root()), "components": done})
        return
    for row in done:
        how = f"resolved in {row['seconds']} s" if row["fresh"] else "already cached"
        out.print(f"RocketMQ {version} {row['component']}: {row['jars']} jars, {how}", highlight=False)
    out.print(f"cache: {cache_root() / version}", highlight=False)


def list_cmd(as_json: bool = JsonOpt) -> None:
    root = cache_root()
    rows = []
    for version_dir in sorted(root.iterdir()) if root.is_dir() else []:
        for name in COMPONENTS:
            try:
                found = cached(version_dir.name, name)
            except ArtifactError:
                found = None  # not a version directory of ours
            if found is not None:
                rows.append({"version": version_dir.name, "component": name,
                             "jars": len(found.classpath.split(os.pathsep))})
    if as_json:
        print_json({"cache": str(root), "components": rows})
        return
    for row in rows:
        out.print(f"{row['version']:<10} {row['component']:<7} {row['jars']} jars", highlight=False)
    out.print(f"cache: {root}" + ("" if rows else " (empty: `mqadmin rocketmq fetch 5.3.3` fills it)"),
              highlight=False)


def register(app: typer.Typer) -> None:
    rocketmq = command_group("Apache's Java RocketMQ as the local cluster, scenarios and benchmarks run it: resolve and list versions.")
    rocketmq.command("fetch", help="Resolve VERSION's jars (servers, client and, from 5.0, the Proxy) with Maven into the cache.")(fetch_cmd)
    rocketmq.command("list", help="The versions and components in the cache, and where it is.")(list_cmd)
    app.add_typer(rocketmq, name="rocketmq")
