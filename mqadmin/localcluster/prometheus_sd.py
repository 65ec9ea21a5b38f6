"""A Prometheus setup for the local cluster: ``prometheus.yml`` and file-based service discovery.

``mqadmin start --metrics`` gives every process a ``/metrics`` port of its
own (``metricsPort=-1``: any free port, read back from its log). This writes,
in ``<state dir>/prometheus/``:

- ``namesrv-targets.json`` and ``broker-targets.json``: Prometheus's
  ``file_sd_configs`` format, one group per process with its labels
  (``process``, ``role``, ``cluster``, and ``broker_name``/``broker_id`` for
  brokers). Rewritten (atomically) every time the cluster's record is saved,
  so a process restarted on a new port is scraped again within
  ``REFRESH_SECONDS``; a stopped one stays listed and shows ``up == 0``.
- ``prometheus.yml``: two jobs, ``rocketmq-namesrv`` and ``rocketmq-broker``,
  scraping every second (a scenario's story is told in seconds), reading
  those files.

Run Prometheus on it with ``prometheus --config.file=<dir>/prometheus.yml
--storage.tsdb.path=<dir>/data --web.listen-address=127.0.0.1:9090``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

SD_DIR = "prometheus"
CONFIG_FILE = "prometheus.yml"
TARGET_FILES = {"namesrv": "namesrv-targets.json", "broker": "broker-targets.json"}
JOBS = {"namesrv": "rocketmq-namesrv", "broker": "rocketmq-broker"}
SCRAPE_SECONDS = 1
REFRESH_SECONDS = 2


class MetricsProc(Protocol):
    kind: str
    name: str
    metrics_port: int
    broker_name: str | None
    broker_id: int | None


def sd_dir(state_dir: str | Path) -> Path:
    return Path(state_dir) / SD_DIR


def config_path(state_dir: str | Path) -> Path:
    return sd_dir(state_dir) / CONFIG_FILE


def prometheus_command(state_dir: str | Path) -> str:
    """How to watch the cluster in Prometheus (its data directory beside the config, on 127.0.0.1:9090)."""
    directory = sd_dir(state_dir)
    return (f"prometheus --config.file={config_path(state_dir)} --storage.tsdb.path={directory / 'data'} "
            "--web.listen-address=127.0.0.1:9090")


def target_groups(procs: Iterable[MetricsProc], kind: str, cluster: str) -> list[dict[str, object]]:
    """The file_sd groups of one kind of process (those with a metrics port)."""
    groups: list[dict[str, object]] = []
    for p in procs:
        if p.kind != kind or not p.metrics_port:
            continue
        labels = {"process": p.name, "role": "namesrv" if kind == "namesrv" else ("master" if p.broker_id == 0 else "slave"),
                  "cluster": cluster}
        if kind == "broker":
            labels["broker_name"] = p.broker_name or ""
            labels["broker_id"] = str(p.broker_id)
        groups.append({"targets": [f"127.0.0.1:{p.metrics_port}"], "labels": labels})
    return groups


def prometheus_yml(state_dir: str | Path) -> str:
    """The scrape configuration: one job per kind of process, targets from the files beside it."""
    directory = sd_dir(state_dir).resolve()
    jobs = "".join(
        f"  - job_name: {JOBS[kind]}\n"
        f"    file_sd_configs:\n"
        f"      - files: [{json.dumps(str(directory / TARGET_FILES[kind]))}]\n"
        f"        refresh_interval: {REFRESH_SECONDS}s\n"
        for kind in ("namesrv", "broker")
    )
    return (
        "# Written by mqadmin start --metrics for the local cluster in " + str(Path(state_dir).resolve()) + "\n"
        "global:\n"
        f"  scrape_interval: {SCRAPE_SECONDS}s\n"
        f"  scrape_timeout: {SCRAPE_SECONDS}s\n"
        f"  evaluation_interval: {SCRAPE_SECONDS}s\n"
        "scrape_configs:\n" + jobs
    )


def _replace(path: Path, text: str) -> None:
    """Write whole or not at all: Prometheus may read the file at any moment."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write(state_dir: str | Path, procs: Iterable[MetricsProc], cluster: str) -> None:
    """Write (or rewrite) the target files and prometheus.yml, when some process has a metrics port."""
    procs = list(procs)
    if not any(p.metrics_port for p in procs):
        return
    directory = sd_dir(state_dir)
    directory.mkdir(exist_ok=True)
    for kind, name in TARGET_FILES.items():
        _replace(directory / name, json.dumps(target_groups(procs, kind, cluster), indent=2) + "\n")
    _replace(directory / CONFIG_FILE, prometheus_yml(state_dir))
