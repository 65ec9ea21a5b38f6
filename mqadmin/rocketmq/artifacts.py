"""Apache RocketMQ's published jars, resolved by the user's Maven into a cache of ours.

Java RocketMQ is an ordinary dependency here: nothing is vendored. The first use of a version writes a
small pom for one *component* (the servers, the Proxy, the client) under
``~/.cache/mqadmin/rocketmq/<version>/<component>/`` and asks Maven for its runtime classpath; Maven
downloads what ~/.m2 lacks from Maven Central. The classpath is kept in ``classpath.txt`` beside the pom,
so later uses cost one file read and never run Maven (nor need it) while every jar it names is still in
~/.m2. Resolutions of the same component are serialised by a lock file, so two commands started at once
resolve it once.

Every failure is an :class:`ArtifactError` whose message is one line naming what is missing: ``java``,
``mvn``, a version Maven Central does not have, or a network failure.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

GROUP = "org.apache.rocketmq"
DEPENDENCY_PLUGIN = "3.8.1"
#: What each component puts on its classpath (artifact ids of GROUP).
COMPONENTS: dict[str, tuple[str, ...]] = {
    "server": ("rocketmq-namesrv", "rocketmq-broker", "rocketmq-tools"),
    "proxy": ("rocketmq-proxy",),
    "client": ("rocketmq-client", "rocketmq-tools"),
    # RocketMQ 5's gRPC client; its versions are its own (5.0.x), not the servers'
    "grpc-client": ("rocketmq-client-java",),
}
#: Components that exist only from a major version on (the Proxy came with 5.0).
FIRST_MAJOR = {"proxy": 5, "grpc-client": 5}
VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:-[A-Za-z0-9.]+)?$")
#: How long one Maven resolution may take (a cold ~/.m2 downloads about 100 MB for the Proxy).
RESOLVE_TIMEOUT = 1800.0
_MISSING = re.compile(r"Could not find artifact (\S+)|(\S+:\S+:\S+) was not found in")
_DOWNLOADED = re.compile(r"Downloaded from \S+: (\S+)")

Progress = Callable[[str], None]


class ArtifactError(Exception):
    """A version's artifacts could not be had; the message is one line naming what is missing."""


@dataclass(frozen=True)
class Artifacts:
    """One resolved component of one RocketMQ version: what a JVM needs to run it."""

    version: str
    component: str
    classpath: str  # os.pathsep-joined jar paths, in Maven's order
    java: str  # the java executable found on PATH

    @property
    def major(self) -> int:
        return int(self.version.split(".", 1)[0])


def cache_root() -> Path:
    """``$MQADMIN_CACHE_DIR``, else ``$XDG_CACHE_HOME/mqadmin``, else ``~/.cache/mqadmin``; then ``rocketmq/``."""
    base = os.environ.get("MQADMIN_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "mqadmin")
    return Path(base) / "rocketmq"


def check_version(version: str, component: str = "server") -> str:
    """``version`` if it names a release (``5.3.3``, ``4.9.7``, ``5.4.0-rc1``) that has ``component``."""
    match = VERSION.match(version)
    if match is None:
        raise ArtifactError(f"RocketMQ version {version!r} is not a version number like 5.3.3")
    if component not in COMPONENTS:
        raise ArtifactError(f"unknown RocketMQ component {component!r} (one of {', '.join(COMPONENTS)})")
    first = FIRST_MAJOR.get(component, 0)
    if int(match.group(1)) < first:
        raise ArtifactError(f"RocketMQ {version} has no {component}: it exists from {first}.0.0 on")
    return version


def find_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise ArtifactError("java not found on PATH: Java RocketMQ needs a JDK 17 (e.g. Debian's openjdk-17-jdk)")
    return java


def cached(version: str, component: str = "server") -> Artifacts | None:
    """The component if an earlier resolution left a classpath whose jars are all still there."""
    check_version(version, component)
    listing = component_dir(version, component) / "classpath.txt"
    try:
        classpath = listing.read_text().strip()
    except OSError:
        return None
    jars = classpath.split(os.pathsep) if classpath else []
    if not jars or not all(os.path.isfile(jar) for jar in jars):
        return None
    return Artifacts(version, component, classpath, find_java())


def component_dir(version: str, component: str) -> Path:
    return cache_root() / version / component


def resolve(version: str, component: str = "server", *, progress: Progress | None = None) -> Artifacts:
    """The component's classpath, from the cache or else resolved by Maven now (``progress`` gets a
    line per artifact Maven downloads)."""
    found = cached(version, component)
    if found is not None:
        return found
    java = find_java()
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ArtifactError(f"mvn not found on PATH: RocketMQ {version}'s jars are resolved from Maven Central "
                            f"by Maven (e.g. Debian's maven), then cached in {cache_root()}")
    where = component_dir(version, component)
    where.mkdir(parents=True, exist_ok=True)
    with _locked(where / ".lock"):
        found = cached(version, component)  # another command may have resolved it while we waited
        if found is not None:
            return found
        (where / "pom.xml").write_text(pom(version, component))
        _run_maven(mvn, where, version, progress)
        done = cached(version, component)
    if done is None:
        raise ArtifactError(f"Maven resolved RocketMQ {version} {component} but left no usable classpath in {where}")
    return Artifacts(version, component, done.classpath, java)


def pom(version: str, component: str) -> str:
    """A pom that only declares the component's artifacts (nothing is built from it)."""
    deps = "".join(
        f"    <dependency><groupId>{GROUP}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version></dependency>\n"
        for artifact in COMPONENTS[component])
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by mqadmin: the runtime classpath of Apache RocketMQ {version} ({component}), resolved by
     `mvn dependency:build-classpath` into classpath.txt. Nothing is built from this file. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>mqadmin.rocketmq</groupId>
  <artifactId>rocketmq-{component}</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}  </dependencies>
  <build><pluginManagement><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId><artifactId>maven-dependency-plugin</artifactId>
    <version>{DEPENDENCY_PLUGIN}</version>
  </plugin></plugins></pluginManagement></build>
</project>
"""


def _run_maven(mvn: str, where: Path, version: str, progress: Progress | None) -> None:
    """Offline first (seconds when ~/.m2 has every jar), then with downloads, writing classpath.txt."""
    goal = ["dependency:build-classpath", "-Dmdep.outputFile=classpath.txt.new", "-Dmdep.includeScope=runtime"]
    output = ""
    for offline in (True, False):
        cmd = [mvn, "-B", *(["-o"] if offline else []), *goal]
        code, output = _maven(cmd, where, progress)
        if code == 0:
            os.replace(where / "classpath.txt.new", where / "classpath.txt")
            return
    raise ArtifactError(_maven_failure(output, version))


def _maven(cmd: list[str], cwd: Path, progress: Progress | None) -> tuple[int, str]:
    """Run Maven, passing each downloaded artifact to ``progress``; (exit status, its output)."""
    lines: list[str] = []
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, errors="replace")
    except OSError as exc:
        raise ArtifactError(f"could not run {cmd[0]}: {exc.strerror}") from exc
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            del lines[:-400]  # only the tail is ever reported
            got = _DOWNLOADED.search(line)
            if got and progress is not None:
                progress(got.group(1).rsplit("/", 1)[-1])
        code = proc.wait(RESOLVE_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise ArtifactError(f"Maven found no result in {RESOLVE_TIMEOUT:.0f} s ({' '.join(cmd)})") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, "".join(lines)


def _maven_failure(output: str, version: str) -> str:
    """One line for what Maven said: an unpublished version, no network, or its own first error."""
    missing = _MISSING.search(output)
    if missing is not None and GROUP in (missing.group(1) or missing.group(2) or ""):
        what = (missing.group(1) or missing.group(2)).removeprefix(GROUP + ":")
        return f"RocketMQ {version} is not published on Maven Central ({GROUP}:{what} not found)"
    if "Could not transfer" in output or "Unknown host" in output or "Connection refused" in output:
        return f"could not download RocketMQ {version} from Maven Central (network): see `mvn -X` in {cache_root()}"
    errors = [line.removeprefix("[ERROR]").strip() for line in output.splitlines() if line.startswith("[ERROR]")]
    first = next((e for e in errors if e), "no error line") if errors else output.strip().splitlines()[-1:]
    return f"Maven could not resolve RocketMQ {version}: {first if isinstance(first, str) else ''.join(first)}"[:400]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
