"""Build the interop harness once: the Java programs (Maven, both RocketMQ versions), the Go
client program, and the loopback bind shim; and warm mqadmin's own builds of the scenario clients.

The sources are interop/'s, the one copy mqadmin's scenarios build too
(:mod:`mqadmin.rocketmq.harness`): the Go program is that module's build, in its cache, and the
scenario's Java programs are compiled there for both versions, so no test pays for a first use.

Run by ``make test`` before pytest (``python -m tests.interop.harness_build``) and again by the
session fixtures, which find everything up to date and return at once. A missing JDK, Maven, Go,
C compiler or registry is an error that says so: the interop suite is part of CI, never skipped.

Maven first tries offline (``-o``: every artifact already in ~/.m2, no network and a few seconds
less), then online. Each module writes its runtime classpath to ``target/classpath.txt``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mqadmin.rocketmq import artifacts, harness, loopback
from mqadmin.scenario.client_schema import GRPC_JAVA_DEFAULT

REPO = Path(__file__).resolve().parents[2]
INTEROP = REPO / "interop"
JAVA_DIR = INTEROP / "java"
BUILD_DIR = INTEROP / "build"
SHIM = BUILD_DIR / "libloopback_bind.so"
# Touched after a successful Maven build: Maven leaves an unchanged classpath.txt untouched, so its
# own mtime cannot tell a stale build from a fresh one.
JAVA_STAMP = BUILD_DIR / "java.stamp"

# RocketMQ version -> Maven module directory.
JAVA_MODULES = {"4.9.7": "v4", "5.3.3": "v5"}
JAVA_VERSIONS = tuple(JAVA_MODULES)
#: The versions the local-cluster tests run as NameServers and brokers (`mqadmin start --broker-impl java:V`),
#: resolved into mqadmin's cache here so that no test waits on Maven.
SERVER_VERSIONS = ("4.9.7", "5.3.3", "5.5.0")
#: The other modules, built with the same `mvn compile`: our RocketMQ 5 gRPC client program
#: (rocketmq-client-java) and our dashboard-calls program (rocketmq-tools 5.3.3).
GRPC_CLIENT, DASHBOARD_ADMIN = "grpc-client", "admin-5.3.3"
EXTRA_MODULES = {GRPC_CLIENT: "grpc", DASHBOARD_ADMIN: "admin5"}
#: Modules that only bring artifacts into ~/.m2 before the tests: Apache's Proxy 5.3.3, which the tests run
#: through `mqadmin start --proxy` (mqadmin.rocketmq resolves it from ~/.m2 then, offline and at once).
WARM_MODULES = ("proxy",)


class HarnessBuildError(RuntimeError):
    """The harness could not be built; the message says what is missing or what failed."""


@dataclass(frozen=True)
class JavaBuild:
    """One RocketMQ version's harness: our classes plus that version's jars."""

    version: str
    classpath: str
    java: str


def _tool(name: str, why: str) -> str:
    found = shutil.which(name)
    if not found:
        raise HarnessBuildError(f"{name} not found on PATH: {why}")
    return found


def _newest_mtime(paths: list[Path]) -> float:
    newest = 0.0
    for base in paths:
        files = [base] if base.is_file() else [p for p in base.rglob("*") if p.is_file()]
        for path in files:
            newest = max(newest, path.stat().st_mtime)
    return newest


def _up_to_date(outputs: list[Path], inputs: list[Path]) -> bool:
    if not all(out.exists() for out in outputs):
        return False
    return min(out.stat().st_mtime for out in outputs) >= _newest_mtime(inputs)


def _run(cmd: list[str], cwd: Path, what: str, timeout: float, env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise HarnessBuildError(f"{what}: no result after {timeout:.0f} s ({' '.join(cmd)})") from None
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-30:])
        raise HarnessBuildError(f"{what} failed (exit {done.returncode}): {' '.join(cmd)}\n{tail}")


def build_java() -> dict[str, JavaBuild]:
    """Compile the Java harness against 4.9.7 and 5.3.3 (downloading from Maven Central if needed)."""
    java = _tool("java", "the interop suite runs Java RocketMQ (install a JDK 17, e.g. Debian's openjdk-17-jdk)")
    mvn = _tool("mvn", "the interop suite builds its Java harness with Maven (Debian's maven)")
    modules = [*JAVA_MODULES.values(), *EXTRA_MODULES.values(), *WARM_MODULES]
    classpath_files = [JAVA_DIR / module / "target" / "classpath.txt" for module in modules]
    inputs = [JAVA_DIR / "pom.xml", JAVA_DIR / "src"] + [JAVA_DIR / m / "pom.xml" for m in modules]
    inputs += [JAVA_DIR / m / "src" for m in EXTRA_MODULES.values() if (JAVA_DIR / m / "src").exists()]
    if not all(path.exists() for path in classpath_files) or not _up_to_date([JAVA_STAMP], inputs):
        try:
            _run([mvn, "-B", "-q", "-o", "compile"], JAVA_DIR, "mvn -o compile", timeout=600)
        except HarnessBuildError:
            _run([mvn, "-B", "-q", "compile"], JAVA_DIR, "mvn compile (with downloads from Maven Central)",
                 timeout=1800)
        BUILD_DIR.mkdir(exist_ok=True)
        JAVA_STAMP.touch()
    builds = {}
    for version, module in JAVA_MODULES.items():
        builds[version] = _module_build(version, module, java)
    return builds


def _module_build(name: str, module: str, java: str) -> JavaBuild:
    target = JAVA_DIR / module / "target"
    deps = (target / "classpath.txt").read_text().strip()
    return JavaBuild(name, f"{target / 'classes'}{os.pathsep}{deps}", java)


def build_extra() -> dict[str, JavaBuild]:
    """The Proxy's classpath and our 5.x-only programs (built by :func:`build_java`, which runs first)."""
    java = build_java()["5.3.3"].java
    return {name: _module_build(name, module, java) for name, module in EXTRA_MODULES.items()}


def build_go() -> Path:
    """The Go client program (modules from the Go module proxy, pinned by go.sum), as mqadmin builds it."""
    try:
        return harness.go_program()
    except harness.HarnessError as exc:
        raise HarnessBuildError(str(exc)) from None


def build_scenario_clients() -> None:
    """mqadmin's scenario client programs for each version (javac into its cache; nothing when built)."""
    try:
        for version in JAVA_VERSIONS:
            harness.java_programs(version)
        harness.grpc_java_programs(GRPC_JAVA_DEFAULT)  # RocketMQ 5's gRPC client (`client: grpc-java`)
    except harness.HarnessError as exc:
        raise HarnessBuildError(str(exc)) from None


def build_shim() -> Path:
    """Compile the LD_PRELOAD shim that keeps the Java servers' listening sockets on loopback
    (the product's, mqadmin/rocketmq/loopback_bind.c)."""
    cc = _tool("cc", "the interop suite compiles mqadmin/rocketmq/loopback_bind.c (Debian's gcc)")
    try:
        return loopback.build(SHIM, cc)
    except loopback.LoopbackError as exc:
        raise HarnessBuildError(str(exc)) from None


def resolve_servers() -> list[str]:
    """Resolve the local-cluster tests' Java versions with mqadmin's own resolver (Maven, then its cache)."""
    for version in SERVER_VERSIONS:
        try:
            artifacts.resolve(version, "server")
        except artifacts.ArtifactError as exc:
            raise HarnessBuildError(str(exc)) from None
    return list(SERVER_VERSIONS)


def main() -> int:
    try:
        build_shim()
        go = build_go()
        builds = build_java()
        build_scenario_clients()
        resolve_servers()
    except HarnessBuildError as exc:
        print(f"interop harness: {exc}", file=sys.stderr)
        return 1
    print(f"interop harness ready: Java {', '.join(builds)} (and mqadmin's scenario clients), {go}, "
          f"{SHIM.relative_to(REPO)}; servers {', '.join(SERVER_VERSIONS)} in {artifacts.cache_root()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
