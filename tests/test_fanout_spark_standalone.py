"""The fan-out on a real Spark standalone cluster: a master and two workers from the installed pyspark.

What a user outgrowing one machine does first (docs/fanout.md, "A standalone cluster on one machine"):
``spark-class org.apache.spark.deploy.master.Master`` and ``...deploy.worker.Worker``, then
``mqadmin fanout --master spark://HOST:PORT``. Here every process binds 127.0.0.1 only, on ports chosen
free, with its work and log directories in the test's temporary directory, and the test stops all of
them (process groups: the workers' executors and their Python workers too) even when it fails.

The run must have used the standalone master's executors (the master's and the workers' own JSON say
which application ran executors where) and account for every stored message (the brokers' counts, the
producers' acknowledgements and the consumer groups' reconciliation agree).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pyspark
import pytest

from tests.mqadmin_procs import SCRIPT, assert_headers_start_at_values, cli_env, stop_all

SPARK_CLASS = Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"
#: JVM start-up options of every JVM of the run (daemons, executors, driver): a quick start on a busy 2-core
#: machine (the client compiler only; these JVMs do little work once started).
DAEMON_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData"
#: Generous: six JVMs start on two shared cores.
START_TIMEOUT = 180.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_env(base: Path) -> dict[str, str]:
    """What the daemons run with: nothing Spark-related inherited, everything of theirs under ``base``."""
    keep = ("PATH", "HOME", "JAVA_HOME", "LANG", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    for name in ("conf", "logs", "local"):
        (base / name).mkdir(parents=True, exist_ok=True)
    env.update(SPARK_CONF_DIR=str(base / "conf"), SPARK_LOG_DIR=str(base / "logs"), SPARK_LOCAL_DIRS=str(base / "local"),
               SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY="256m", SPARK_DAEMON_JAVA_OPTS=DAEMON_JAVA_OPTS,
               SPARK_LAUNCHER_OPTS=DAEMON_JAVA_OPTS, SPARK_WORKER_DIR=str(base / "work"))
    return env


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 (a loopback URL of ours)
        return json.loads(answer.read())


class Standalone:
    """A Spark standalone master and two workers (1 core each) on 127.0.0.1."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.ui = f"http://127.0.0.1:{self.ui_port}"
        self.env = spark_env(base)
        self.procs: list[subprocess.Popen[bytes]] = []

    def _spawn(self, name: str, *args: str) -> None:
        log = (self.base / "logs" / f"{name}.out").open("wb")
        # its own process group: the JVM, and the executors and Python workers a worker starts, end together
        self.procs.append(subprocess.Popen([str(SPARK_CLASS), *args], stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, env=self.env, start_new_session=True))
        log.close()

    def start_master(self) -> None:
        props = self.base / "conf" / "master.properties"
        props.write_text("spark.master.rest.enabled false\n")  # no REST submission port (6066) to collide on
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
                    "--webui-port", str(self.ui_port), "--properties-file", str(props))
        self.wait("the master", lambda status: status.get("status") == "ALIVE")

    def start_workers(self) -> None:
        for i in (1, 2):
            work = self.base / "work" / f"worker-{i}"
            work.mkdir(parents=True)
            self._spawn(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
                        "--webui-port", "0", "--cores", "1", "--memory", "600m", "--work-dir", str(work), self.url)

    def status(self) -> Any:
        return get_json(f"{self.ui}/json/")

    def wait(self, what: str, ready: Any, timeout: float = START_TIMEOUT) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            dead = [p.args[1] for p in self.procs if p.poll() is not None]
            assert not dead, f"{dead} exited: see {self.base / 'logs'}"
            try:
                status = self.status()
                if ready(status):
                    return status
            except OSError:
                pass  # not listening yet
            assert time.monotonic() < deadline, f"{what} not ready within {timeout:g} s: see {self.base / 'logs'}"
            time.sleep(0.5)

    def stop(self) -> None:
        """Every process of the cluster, Java ones included: TERM to each group, then KILL what is left."""
        members = []
        for p in self.procs:
            try:
                members += psutil.Process(p.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for p in self.procs:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and any(p.poll() is None for p in self.procs):
                time.sleep(0.2)
        for p in self.procs:
            if p.poll() is None:
                p.wait(10)
        for m in members:  # anything that left the groups (an executor that called setsid)
            try:
                m.kill()
            except psutil.NoSuchProcess:
                pass


def leftovers(base: Path) -> list[psutil.Process]:
    """Processes still running from ``base`` (their command line or working directory under it)."""
    found = []
    for p in psutil.process_iter(["cmdline", "cwd", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if str(base) in " ".join(p.info["cmdline"] or []) or (p.info["cwd"] or "").startswith(str(base)):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[Standalone]:
    cluster = Standalone(tmp_path / "spark")
    try:
        yield cluster
    finally:
        cluster.stop()
        left = leftovers(cluster.base)
        for p in left:
            p.kill()
        assert not left, f"left running: {[p.info['cmdline'][:3] for p in left]}"


def test_fanout_runs_on_a_standalone_master_and_two_workers(standalone: Standalone, tmp_path: Path) -> None:
    standalone.start_master()
    standalone.start_workers()  # they register while the fan-out starts its RocketMQ cluster and its driver
    report = tmp_path / "fanout.json"
    cluster_dir = tmp_path / "rocketmq"
    env = cli_env(tmp_path / "state")
    for inherited in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "SPARK_CONF_DIR", "PYSPARK_SUBMIT_ARGS"):
        env.pop(inherited, None)
    args = [str(SCRIPT), "fanout", "--master", standalone.url, "--start", "--dir", str(cluster_dir),
            "--producers", "40", "--topics", "2", "--rate", "5", "--duration", "4", "--consumers", "20", "--drain", "3",
            "--partitions", "2", "--start-delay", "3", "--spark-timeout", str(int(START_TIMEOUT)),
            "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1", "--conf", "spark.cores.max=2",
            # the first job waits for both executors (one per worker), so each partition has its own
            "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
            "--conf", f"spark.scheduler.maxRegisteredResourcesWaitingTime={int(START_TIMEOUT)}s",
            "--conf", f"spark.executor.extraJavaOptions={DAEMON_JAVA_OPTS}",
            "--conf", f"spark.driver.extraJavaOptions={DAEMON_JAVA_OPTS}",
            "--report", str(report), "-q"]
    try:
        run = subprocess.run(args, capture_output=True, text=True, timeout=START_TIMEOUT + 120, env=env,
                             check=False, start_new_session=True)
    finally:
        stop_all(cluster_dir)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    doc = json.loads(report.read_text())

    # The standalone master ran it: the application finished there, with an executor on each worker.
    status = standalone.wait("the application to finish", lambda s: any(
        a["name"] == "mqadmin-fanout" for a in s.get("completedapps", [])), timeout=60)
    (app,) = [a for a in status["completedapps"] if a["name"] == "mqadmin-fanout"]
    assert app["state"] == "FINISHED"
    workers = status["workers"]
    assert len(workers) == 2 and all(w["state"] == "ALIVE" for w in workers)
    ran_on = [w["id"] for w in workers if any(e["appid"] == app["id"] for e in
                                              get_json(f"{w['webuiaddress']}/json/")["finishedexecutors"])]
    assert len(ran_on) == 2, (app["id"], workers)
    assert doc["engine"]["name"] == "spark" and doc["engine"]["master"] == standalone.url
    parts = doc["partitions"]
    assert len(parts) == 2 and all(p["error"] is None for p in parts)
    assert len({p["pid"] for p in parts}) == 2  # two Python workers: one per executor

    # Every stored message accounted for: acknowledged = counted by the brokers = consumed or lagging.
    ok = doc["sends"]["outcomes"]["ok"]
    assert ok > 0 and doc["agreement"]["agree"] is True and doc["agreement"]["brokersCounted"] == ok
    cons = doc["consumers"]
    total = cons["total"]
    assert cons["reconciled"] is True and total["unexplained"] == 0
    assert total["acknowledged"] == ok  # two groups, one topic each: each message is one group's
    assert total["consumed"] + total["lag"] == total["acknowledged"]
    assert cons["distinct"] + cons["redeliveries"] == cons["consumptions"]
    assert_headers_start_at_values(run.stdout)  # the report's tables, piped
