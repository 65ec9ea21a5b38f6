"""The Spark engine: a quiet session (loopback-only for local masters and standalone masters on
127.0.0.1) and one task per partition.

Setup facts that matter on a laptop: the driver binds 127.0.0.1 (no
network beyond loopback), the web UI is off, Python workers talk to the JVM
over a Unix socket (``spark.python.unix.domain.socket.enabled``: it removes
a ~30 ms loopback delay per task) and run the driver's own interpreter. The
JVM's output goes to a log file, so the terminal shows only our progress.

The project's own packages are zipped and shipped with ``addPyFile``, so
workers of a real cluster need only Python, trio, msgpack and orjson (docs/fanout.md).
pyspark is imported here only, when a Spark run starts.

Failures are one line saying what was tried: a ``spark://`` master is first
dialled over plain TCP (no JVM yet), and a worker that cannot import the code
is reported by its own Python exception, not by Spark's wrapper around it.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.fanout import FanoutError, FanoutUsageError
from mqadmin.fanout.partition import run_partition
from mqadmin.fanout.plan import FanoutPlan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Master URLs Spark itself understands (local modes, standalone, YARN, Kubernetes).
MASTER_FORMS = re.compile(
    r"^(local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?|local-cluster\[\d+,\s*\d+,\s*\d+\]"
    r"|spark://[^\s/]+(:\d+)?(,[^\s/]+(:\d+)?)*|yarn|k8s://\S+)$"
)
LOCAL = re.compile(r"^local(\[|$)")
#: Host names that mean this machine's loopback interface.
LOOPBACK_HOSTS = re.compile(r"^(localhost|127(\.\d{1,3}){3}|\[?::1\]?)$")
#: Seconds to try a TCP connection to a standalone master before paying for a JVM start.
MASTER_PROBE_TIMEOUT = 5.0
#: Longest a JVM start may take on a busy machine (s); remote masters add the executor wait.
JVM_START_TIMEOUT = 90.0
#: How to get pyspark (the project is not on any package index).
SPARK_INSTALL = "run pip install -e '.[spark,plot]' in the project directory"
#: Our packages that partitions import (shipped to workers as one zip).
SHIPPED = ("remoting", "simclient", "mqadmin")

LOG4J2 = """\
status = error
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
# The standalone client says at WARN why it cannot reach a master ("Failed to connect to master ...").
logger.deploy.name = org.apache.spark.deploy.client
logger.deploy.level = warn
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n
"""


def _log_reason(path: Path) -> str | None:
    """The last ERROR (else WARN) line Spark logged, e.g. "All masters are unresponsive! Giving up."."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for level in (" ERROR ", " WARN "):
        for line in reversed(lines):
            if level in line:
                text = line.split(": ", 1)[-1].strip()
                return text.split("Reason: ", 1)[-1] if "Reason: " in text else text
    return None


def check_master(master: str) -> None:
    """Refuse what no Spark would accept, before paying for a JVM start."""
    if not MASTER_FORMS.match(master.strip()):
        raise FanoutUsageError(
            f"--master {master!r} is not a Spark master URL (local, local[N], local[*], spark://HOST:PORT, yarn, k8s://...)"
        )


def is_local(master: str) -> bool:
    return bool(LOCAL.match(master.strip()))


def standalone_hosts(master: str) -> list[tuple[str, int]]:
    """(host, port) of each master of a ``spark://h1:p1,h2:p2`` URL (port 7077 when left out)."""
    text = master.strip()
    if not text.startswith("spark://"):
        return []
    hosts = []
    for part in text.removeprefix("spark://").split(","):
        host, sep, port = part.rpartition(":")
        if not sep or not port.isdigit():
            host, port = part, "7077"
        hosts.append((host.strip("[]"), int(port)))
    return hosts


def on_this_host(master: str) -> bool:
    """A local master, or a standalone master on loopback: executors run here and reach 127.0.0.1."""
    hosts = standalone_hosts(master)
    return is_local(master) or (bool(hosts) and all(LOOPBACK_HOSTS.match(h) for h, _ in hosts))


def probe_master(master: str, timeout: float = MASTER_PROBE_TIMEOUT) -> None:
    """A standalone master must accept a TCP connection: else say what was tried, before a JVM starts."""
    tried = []
    for host, port in standalone_hosts(master):
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as exc:
            why = "no answer within {:g} s".format(timeout) if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
            tried.append(f"{host}:{port}: {why}")
    if tried:
        raise FanoutError(f"cannot reach Spark master {master}: tried {'; '.join(tried)}")


#: A Python exception line at the end of a traceback: ``ModuleNotFoundError: No module named 'trio'``.
_PY_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning))(: .*)?$")


def root_cause(text: str) -> str | None:
    """The exception line of the last Python traceback in ``text`` (a worker's error inside Spark's)."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == "Traceback (most recent call last):"]
    if not starts:
        return None
    for line in lines[starts[-1] + 1:]:
        if line[:1] not in (" ", "\t") and _PY_EXC_LINE.match(line.strip()):
            return line.strip()
    return None


def _java_message(exc: BaseException) -> str:
    """One line for a Spark/JVM error: a worker's Python exception if there is one, else the first line."""
    text = str(exc)
    java = getattr(exc, "java_exception", None)
    if java is not None:
        with contextlib.suppress(Exception):  # the gateway may be gone
            text = str(java.toString()) + "\n" + text
    cause = root_cause(text)
    if cause is not None:
        return cause
    lines = text.strip().splitlines()
    return lines[0] if lines else type(exc).__name__


@contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """Point fds 1 and 2 at ``path`` while the JVM is launched: it inherits them for its whole life."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def package_zip(directory: Path) -> Path:
    """Zip our packages' Python files (the code partitions run) for ``addPyFile``."""
    import mqadmin
    import remoting
    import simclient

    path = directory / "mqadmin-fanout-code.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for mod in (remoting, simclient, mqadmin):
            root = Path(mod.__file__ or "").parent
            for file in sorted(root.rglob("*.py")):
                zf.write(file, str(file.relative_to(root.parent)))
    return path


def start_session(
    master: str = "local[*]",
    *,
    conf: dict[str, str] | None = None,
    work_dir: Path | None = None,
    executor_timeout: float = 60.0,
    ship_code: bool = True,
) -> SparkSession:
    """A new SparkSession for fan-out runs; raises FanoutError (one line) if Spark cannot start.

    Local masters get loopback-only settings; for any other master the
    session waits up to ``executor_timeout`` for at least one executor, so an
    unreachable cluster is an error instead of a job that waits forever.
    """
    check_master(master)
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise FanoutError(f"pyspark is not installed: {SPARK_INSTALL}, or use --engine multiprocessing") from None
    probe_master(master)
    work = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="mqadmin-fanout-spark-"))
    work.mkdir(parents=True, exist_ok=True)
    log4j = work / "log4j2.properties"
    log4j.write_text(LOG4J2)
    log_path = work / "spark.log"
    local = is_local(master)
    settings = _session_settings(master, conf, work, log4j)
    builder = SparkSession.builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = _create(builder, master, local, executor_timeout, log_path)
    try:
        sc = session.sparkContext
        sc.setLogLevel("ERROR")
        if not local:
            _wait_for_executors(session, master, executor_timeout)
        if ship_code:
            sc.addPyFile(str(package_zip(work)))
    except BaseException:
        session.stop()
        raise
    return session


def _session_settings(master: str, conf: dict[str, str] | None, work: Path, log4j: Path) -> dict[str, str]:
    """The session's Spark settings (the user's ``conf`` last) and the Python environment variables
    PySpark reads: loopback only when the master is on this host."""
    local = is_local(master)
    loopback = on_this_host(master)  # local, or a standalone master on 127.0.0.1: nothing leaves loopback
    settings: dict[str, str] = {
        "spark.app.name": "mqadmin-fanout",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.python.unix.domain.socket.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
        "spark.local.dir": str(work / "tmp"),
    }
    if loopback:
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    if local:
        os.environ["PYSPARK_PYTHON"] = sys.executable
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    given = dict(conf or {})
    extra = given.pop("spark.driver.extraJavaOptions", "").strip()
    if extra:  # the user's JVM options too, not instead of the log configuration (whose output we read)
        settings["spark.driver.extraJavaOptions"] += f" {extra}"
    settings.update(given)
    return settings


def _create(builder: Any, master: str, local: bool, executor_timeout: float, log_path: Path) -> SparkSession:
    """``builder.getOrCreate()`` in a thread, waited for a bounded time; FanoutError (one line, from
    Spark's log where it says why) if it fails or does not answer."""
    created: list[SparkSession] = []
    failed: list[BaseException] = []

    def create() -> None:
        try:
            created.append(builder.getOrCreate())
        except BaseException as exc:  # noqa: BLE001 (handed to the caller)
            failed.append(exc)

    # A standalone master that does not answer makes getOrCreate block (Spark gives up after
    # about a minute), so it runs in a thread and we wait a bounded time.
    from pyspark import SparkContext

    with _output_to(log_path):
        creator = threading.Thread(target=create, name="spark-session", daemon=True)
        creator.start()
        # First the JVM (PySpark sets SparkContext._gateway once it answers), then, for a cluster,
        # the master's answer.
        deadline = time.monotonic() + JVM_START_TIMEOUT
        while creator.is_alive() and SparkContext._gateway is None and time.monotonic() < deadline:
            creator.join(0.1)
        if creator.is_alive() and SparkContext._gateway is not None:
            creator.join(JVM_START_TIMEOUT if local else executor_timeout)
    if failed:
        why = _log_reason(log_path) or _java_message(failed[0])
        raise FanoutError(f"cannot start Spark with master {master}: {why} (log: {log_path})")
    if not created:
        if local:
            raise FanoutError(f"Spark did not start within {JVM_START_TIMEOUT:g} s (log: {log_path})")
        why = _log_reason(log_path) or "Spark logged no reason"
        raise FanoutError(f"Spark master {master} accepted a connection but did not register the application "
                          f"within {executor_timeout:g} s (is it a Spark master, does it have free workers?): "
                          f"{why} (log: {log_path})")
    return created[0]


def _wait_for_executors(session: SparkSession, master: str, timeout: float) -> None:
    tracker = session.sparkContext.statusTracker()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(tracker.getExecutorInfos()) > 1:  # the driver counts as one
            return
        time.sleep(0.25)
    raise FanoutError(f"the application was registered with {master}, but no executor started within {timeout:g} s "
                      "(does the master have a worker with free cores and memory?)")


def parallelism(session: SparkSession) -> int:
    """How many tasks run at once: the default number of partitions."""
    return max(1, int(session.sparkContext.defaultParallelism))


def _run_one(index: int, items: Iterator[Any], plan: FanoutPlan) -> Iterator[bytes]:
    for _ in items:  # one element per partition: the partition's own index
        pass
    yield run_partition(index, plan)


class SparkJob:
    """One fan-out run on Spark: ``collect`` in a thread, progress from the status tracker."""

    def __init__(self, session: SparkSession, plan: FanoutPlan) -> None:
        self.session = session
        self.plan = plan
        self.group = f"mqadmin-fanout-{os.getpid()}-{time.monotonic_ns()}"
        self._blobs: list[bytes] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._collect, name="fanout-spark-collect", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _collect(self) -> None:
        sc = self.session.sparkContext
        try:
            sc.setJobGroup(self.group, "mqadmin fanout", interruptOnCancel=True)
            n = self.plan.partitions
            plan = self.plan
            rdd = sc.parallelize(range(n), n).mapPartitionsWithIndex(lambda i, it: _run_one(i, it, plan))
            self._blobs = rdd.collect()
        except BaseException as exc:  # noqa: BLE001 (handed to the driver thread)
            self._error = exc

    def done(self) -> bool:
        return not self._thread.is_alive()

    def progress(self) -> tuple[int, int]:
        """(partitions finished, partitions running)."""
        tracker = self.session.sparkContext.statusTracker()
        finished = running = 0
        with contextlib.suppress(Exception):  # progress is best effort; the job's own error is reported
            for job_id in tracker.getJobIdsForGroup(self.group):
                info = tracker.getJobInfo(job_id)
                for stage_id in info.stageIds if info else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        finished += stage.numCompletedTasks
                        running += stage.numActiveTasks
        return finished, running

    def cancel(self) -> None:
        with contextlib.suppress(Exception):  # session already gone
            self.session.sparkContext.cancelJobGroup(self.group)

    def result(self, timeout: float) -> list[bytes]:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise FanoutError(f"the Spark job did not end within {timeout:g} s of being cancelled")
        if self._error is not None:
            raise FanoutError(f"the Spark job failed: {_java_message(self._error)}")
        assert self._blobs is not None
        return self._blobs


def _warm(items: Iterator[Any]) -> Iterator[int]:
    """Import what a partition needs (so the real tasks start at once, and a worker that cannot fails here)."""
    import trio  # noqa: F401

    import mqadmin.fanout.partition  # noqa: F401

    for _ in items:
        pass
    yield os.getpid()


def warm_up(session: SparkSession, partitions: int) -> int:
    """Start ``partitions`` Python workers and import the fan-out code in them; returns how many distinct
    worker processes answered. FanoutError (one line) if the workers cannot run it."""
    sc = session.sparkContext
    try:
        pids = sc.parallelize(range(partitions), partitions).mapPartitions(_warm).collect()
    except Exception as exc:  # noqa: BLE001 (Py4J/PythonException: one line)
        raise FanoutError(f"Spark workers cannot run the fan-out code: {_java_message(exc)} "
                          "(the workers' Python needs trio, msgpack and orjson: see docs/fanout.md)") from None
    return len(set(pids))
