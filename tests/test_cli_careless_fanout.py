"""Issue 14, the fan-out's paths: extras, masters, workers that cannot import, the report, temp dirs.

Each test runs the real ``mqadmin fanout`` as a subprocess with its own
TMPDIR, so whatever a run leaves behind is seen (and the test's tmp_path
holds it all). Clusters are started by the runs themselves (``--start``) and
stopped by them; a fixture kills anything that mentions the test's directory
even when a run or an assertion failed. Spark runs are kept to two short ones.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mqadmin_procs import procs_mentioning

ROOT = Path(__file__).resolve().parent.parent
NO_PYSPARK = "import sys; sys.modules['pyspark'] = None; from mqadmin.cli import entry; entry()"
ENTRY = "from mqadmin.cli import entry; entry()"


@pytest.fixture
def tmp(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    for p in procs_mentioning(str(tmp_path)):
        try:
            p.kill()
            p.wait(5)
        except Exception:  # noqa: BLE001 (already gone)
            pass


def fanout(tmp: Path, *args: str, code: str = ENTRY, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NAMESRV_ADDR", "COLUMNS", "PYSPARK_PYTHON")}
    env.update(TMPDIR=str(tmp), XDG_STATE_HOME=str(tmp / "state"), COLUMNS="250", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code, "fanout", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=tmp, check=False)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    return done


def last_error(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if not line.startswith("[fanout]")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def left_behind(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("mqadmin-fanout-"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_missing_pyspark_is_said_before_anything_starts(tmp: Path) -> None:
    done = fanout(tmp, "--start", "--producers", "10", code=NO_PYSPARK)
    assert done.returncode == 1
    line = last_error(done)
    assert "pyspark" in line and "pip install -e '.[spark,plot]'" in line and "rocketmq-namesrv-toolkit[" not in line
    assert "--engine multiprocessing" in line
    assert list(tmp.iterdir()) == [] and "[fanout] starting" not in done.stderr  # no cluster, no temp dir


def test_loopback_master_is_allowed_and_an_unreachable_one_says_what_was_tried(tmp: Path) -> None:
    port = free_port()
    done = fanout(tmp, "--start", "--master", f"spark://127.0.0.1:{port}", "--producers", "10", "--spark-timeout", "5")
    assert done.returncode == 1
    line = last_error(done)
    assert "cannot reach" in line and f"tried 127.0.0.1:{port}: Connection refused" in line, line
    assert "executors" not in line  # not refused as unreachable from executors: it is on this host
    assert left_behind(tmp) == [] and "[fanout] starting" not in done.stderr  # probed before anything started
    done = fanout(tmp, "--start", "--master", "spark://192.0.2.1:7077", "--producers", "10")
    assert done.returncode == 2 and "executors of spark://192.0.2.1:7077 cannot reach" in last_error(done)
    done = fanout(tmp, "--master", "bogus://x", "-n", "127.0.0.1:1")
    assert done.returncode == 2 and "is not a Spark master URL" in last_error(done)


def test_worker_import_failure_shows_the_root_cause_and_leaves_nothing(tmp: Path) -> None:
    fake = tmp / "fake-site"
    fake.mkdir()
    (fake / "trio.py").write_text("raise ModuleNotFoundError(\"No module named 'trio'\", name='trio')\n")
    done = fanout(tmp, "--start", "--master", "local[1]", "--producers", "10", "--duration", "1",
                  "--conf", f"spark.executorEnv.PYTHONPATH={fake}")
    assert done.returncode == 1
    line = last_error(done)
    assert "Spark workers cannot run the fan-out code: ModuleNotFoundError: No module named 'trio'" in line, line
    assert "An exception was thrown from the Python worker" not in line
    assert left_behind(tmp) == []  # the error names no log: the cluster and Spark work dirs are gone


def test_spark_run_leaves_no_temporary_directory(tmp: Path) -> None:
    done = fanout(tmp, "--start", "--master", "local[1]", "--producers", "20", "--duration", "1", "--rate", "5",
                  "--start-delay", "1", "--json", "-q")
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["agreement"]["agree"] is True and doc["sends"]["outcomes"]["ok"] > 0
    assert left_behind(tmp) == []


def test_report_in_waves_per_second_within_peak(tmp: Path) -> None:
    done = fanout(tmp, "--start", "--no-spark", "--workers", "2", "--partitions", "4", "--producers", "40",
                  "--duration", "2", "--rate", "5", "--start-delay", "0.5", "--json", "-q")
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    sends = doc["sends"]
    assert doc["window"]["loadSeconds"] >= 4.0  # two waves of 2 s
    assert sends["perSecond"] <= sends["peakSecond"], sends
    assert doc["routes"]["perSecond"] <= max(doc["routes"]["peakSecond"], 1), doc["routes"]


def test_report_after_a_kill_says_unchecked_not_yes(tmp: Path) -> None:
    report, plot = tmp / "r.json", tmp / "p.png"
    # The kill must land while the load runs: on a busy machine the worker processes start seconds late,
    # so the start barrier is far enough off for them all to be waiting at it (no late start).
    done = fanout(tmp, "--start", "--no-spark", "--workers", "2", "--producers", "40", "--duration", "4",
                  "--rate", "10", "--start-delay", "15", "--kill-broker", "broker-a@2", "--report", str(report),
                  "--plot", str(plot))
    assert done.returncode == 0, done.stderr[-2000:]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads(report.read_text())
    agreement = doc["agreement"]
    assert agreement["brokers"]["broker-a"]["gone"] is True
    unchecked = agreement["unchecked"]
    assert unchecked == agreement["producersOk"] - agreement["brokersCounted"] > 0, agreement
    total = next(line for line in done.stdout.splitlines() if line.startswith("total "))
    assert f"{unchecked:,} unchecked" in total and " yes " not in total, total
    assert "died with it" in total
    resources = doc["resources"]
    workers = next(line for line in done.stdout.splitlines() if line.startswith("workers:"))
    assert f"{resources['connections']} connections opened in 2 partitions" in workers
    # one per NameServer and broker per partition, plus re-opened ones; failed re-dials counted apart
    assert resources["connections"] <= 2 * 4 + 4 and resources["connectFailures"] > 0
    assert f"{resources['connectFailures']} connect attempts failed" in workers
