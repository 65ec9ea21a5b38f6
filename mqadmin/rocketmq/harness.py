"""Our own RocketMQ client programs, built at first use into a cache of ours.

A scenario's load or consumer group can be Apache's Java client (``client: java:5.3.3``) or Go client
(``client: go``). What runs them are our harness programs, whose one copy of the sources is the
repository's ``interop/`` directory (the interop tests build the same files): the Java programs in
``interop/java/src/main/java/interop/harness/`` and the Go program in ``interop/go/``. mqadmin runs
from a clone of the repository (``pip install -e``), as it does for the shipped ``scenarios/``.

- Java: ``javac`` compiles the scenario programs (and the harness classes they use) against the
  version's client jars, which :func:`mqadmin.rocketmq.artifacts.resolve` provides, into
  ``~/.cache/mqadmin/harness/java/<version>-<sources hash>/classes``.
- Java gRPC (``client: grpc-java:VERSION``): ``javac`` likewise compiles the programs of
  ``interop/java/grpc-scenario/`` (with the harness classes they share) against that version of
  ``rocketmq-client-java`` into ``~/.cache/mqadmin/harness/grpc-java/<version>-<sources hash>/classes``.
- Python gRPC (``client: grpc-python``): nothing to build; ``interop/python/grpc_scenario.py`` runs in
  mqadmin's own Python, which needs PyPI's ``rocketmq-python-client`` (:func:`grpc_python_program`).
- Go: ``go build`` (modules from the Go module proxy, pinned by ``interop/go/go.sum``) into
  ``~/.cache/mqadmin/harness/go/<sources hash>/interop-go``.

A build is keyed by a hash of its sources, so an edited source builds again and an unchanged one
costs a hash of a few files. Builds of one key are serialised by a lock file. Every failure is a
:class:`HarnessError`, one line naming what is missing or what failed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mqadmin.rocketmq.artifacts import ArtifactError, Progress, _locked, cache_root, find_java, resolve

#: The one copy of the harness sources (see the module doc).
INTEROP = Path(__file__).resolve().parents[2] / "interop"
JAVA_SOURCES = INTEROP / "java" / "src" / "main" / "java"
GO_SOURCES = INTEROP / "go"
#: The Java programs a scenario runs; javac compiles the harness classes they use along with them.
PRODUCER_MAIN = "interop.harness.ScenarioProducer"
CONSUMER_MAIN = "interop.harness.ScenarioConsumer"
JAVA_PROGRAMS = (PRODUCER_MAIN, CONSUMER_MAIN)
GRPC_JAVA_SOURCES = INTEROP / "java" / "grpc-scenario"
GRPC_PRODUCER_MAIN = "interop.harness.GrpcScenarioProducer"
GRPC_CONSUMER_MAIN = "interop.harness.GrpcScenarioConsumer"
GRPC_PYTHON_PROGRAM = INTEROP / "python" / "grpc_scenario.py"
GO_BINARY_NAME = "interop-go"
BUILD_TIMEOUT = 1200.0  # s: a cold Go module cache downloads the client's modules


class HarnessError(ArtifactError):
    """A client program could not be built; the message is one line naming what is missing or failed."""


@dataclass(frozen=True)
class JavaPrograms:
    """The scenario's Java client programs compiled against one RocketMQ version (a :class:`jvm.Runnable`)."""

    version: str
    classpath: str  # our classes first, then the version's client jars
    java: str


def harness_root() -> Path:
    """``~/.cache/mqadmin/harness`` (beside the ``rocketmq/`` artifacts cache, moved by the same settings)."""
    return cache_root().parent / "harness"


def sources_hash(root: Path, suffixes: tuple[str, ...]) -> str:
    """A short hash of every file under ``root`` whose name ends with one of ``suffixes`` (path and bytes)."""
    if not root.is_dir():
        raise HarnessError(f"the client programs' sources are missing ({root}): mqadmin runs them from a clone "
                           "of its repository")
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith(suffixes)):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def java_programs(version: str, *, progress: Progress | None = None) -> JavaPrograms:
    """The Java programs for RocketMQ ``version``'s client: from the cache, or resolved and compiled now."""
    client = resolve(version, "client", progress=progress)
    where = harness_root() / "java" / f"{version}-{sources_hash(JAVA_SOURCES, ('.java',))}"
    entries = [JAVA_SOURCES / (main.replace(".", "/") + ".java") for main in JAVA_PROGRAMS]
    return _built(where, client.classpath, version, f"RocketMQ {version}", [JAVA_SOURCES], entries, progress)


def grpc_java_programs(version: str, *, progress: Progress | None = None) -> JavaPrograms:
    """The gRPC scenario programs for rocketmq-client-java ``version``: from the cache, or compiled now."""
    client = resolve(version, "grpc-client", progress=progress)
    key = sources_hash(GRPC_JAVA_SOURCES, (".java",)) + sources_hash(JAVA_SOURCES, (".java",))[:6]
    where = harness_root() / "grpc-java" / f"{version}-{key}"
    entries = [GRPC_JAVA_SOURCES / (main.replace(".", "/") + ".java") for main in (GRPC_PRODUCER_MAIN, GRPC_CONSUMER_MAIN)]
    return _built(where, client.classpath, version, f"rocketmq-client-java {version}",
                  [GRPC_JAVA_SOURCES, JAVA_SOURCES], entries, progress)


def grpc_python_program() -> Path:
    """The Python gRPC scenario program, once PyPI's rocketmq-python-client is importable (HarnessError)."""
    try:
        import rocketmq.v5.client  # noqa: F401 - only whether it is there
    except ImportError:
        raise HarnessError("client grpc-python needs PyPI's rocketmq-python-client in mqadmin's environment: "
                           "pip install 'rocketmq-namesrv-toolkit[grpc]' (or rocketmq-python-client==5.1.2)") from None
    if not GRPC_PYTHON_PROGRAM.is_file():
        raise HarnessError(f"the gRPC client program is missing ({GRPC_PYTHON_PROGRAM}): mqadmin runs it from a "
                           "clone of its repository")
    return GRPC_PYTHON_PROGRAM


def _built(where: Path, classpath: str, version: str, what: str, roots: list[Path], entries: list[Path],
           progress: Progress | None) -> JavaPrograms:
    """``entries`` compiled (with what they use from ``roots``) against ``classpath`` (``what``: the client
    it is, for messages) into ``where``, once."""
    classes = where / "classes"
    if not (classes / "ok").exists():
        javac = shutil.which("javac")
        if javac is None:
            raise HarnessError("javac not found on PATH: the Java scenario clients are compiled at first use "
                               "(a JDK 17, e.g. Debian's openjdk-17-jdk)")
        where.mkdir(parents=True, exist_ok=True)
        with _locked(where / ".lock"):
            if not (classes / "ok").exists():
                if progress is not None:
                    progress(f"compiling the Java client programs against {what}")
                _compile_java(javac, classpath, where, what, roots, entries)
    return JavaPrograms(version, f"{classes}{os.pathsep}{classpath}", find_java())


def _compile_java(javac: str, classpath: str, where: Path, what: str, roots: list[Path], entries: list[Path]) -> None:
    staging = Path(tempfile.mkdtemp(prefix="classes-", dir=where))
    cmd = [javac, "--release", "17", "-encoding", "UTF-8", "-nowarn", "-d", str(staging), "-cp", classpath,
           "-sourcepath", os.pathsep.join(str(r) for r in roots), *(str(e) for e in entries)]
    try:
        _run(cmd, roots[0], f"javac (the Java client programs against {what})")
        (staging / "ok").touch()
        shutil.rmtree(where / "classes", ignore_errors=True)
        os.replace(staging, where / "classes")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def go_program(*, progress: Progress | None = None) -> Path:
    """The Go client program: from the cache, or built now."""
    where = harness_root() / "go" / sources_hash(GO_SOURCES, (".go", "go.mod", "go.sum"))
    binary = where / GO_BINARY_NAME
    if binary.exists():
        return binary
    go = shutil.which("go")
    if go is None:
        raise HarnessError("go not found on PATH: the Go scenario client is built at first use (Debian's golang-go)")
    where.mkdir(parents=True, exist_ok=True)
    with _locked(where / ".lock"):
        if not binary.exists():
            if progress is not None:
                progress("building the Go client program (go build)")
            partial = where / f"{GO_BINARY_NAME}.partial"
            env = dict(os.environ, GOFLAGS="-mod=readonly -buildvcs=false")
            _run([go, "build", "-o", str(partial), "."], GO_SOURCES, "go build (the Go client program)", env)
            os.replace(partial, binary)
    return binary


def _run(cmd: list[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, errors="replace", timeout=BUILD_TIMEOUT,
                              env=env, stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        raise HarnessError(f"{what}: no result after {BUILD_TIMEOUT:.0f} s") from None
    except OSError as exc:
        raise HarnessError(f"{what}: could not run {cmd[0]}: {exc.strerror}") from None
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        first = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "no output")
        raise HarnessError(f"{what} failed (exit {done.returncode}): {first}"[:400])
