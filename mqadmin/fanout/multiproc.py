"""The same run without Spark: one plain process per partition (``--engine multiprocessing``).

It exists to measure what Spark costs: the partitions, producers and
metrics are identical, only the way tasks reach a Python process differs.
Processes are spawned (not forked: the driver may have threads), so
start-up includes a fresh interpreter importing trio and simclient, much as
a Spark Python worker does on first use.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from multiprocessing.pool import Pool

from mqadmin.fanout import FanoutError
from mqadmin.fanout.partition import run_partition
from mqadmin.fanout.plan import FanoutPlan


def _run(args: tuple[int, FanoutPlan]) -> bytes:
    index, plan = args
    return run_partition(index, plan)


def parallelism() -> int:
    return max(1, os.cpu_count() or 1)


class ProcessJob:
    """One fan-out run on a process pool of ``workers`` processes."""

    def __init__(self, plan: FanoutPlan, workers: int | None = None) -> None:
        self.plan = plan
        self.workers = max(1, min(plan.partitions, workers or parallelism()))
        self._pool: Pool | None = None
        self._blobs: dict[int, bytes] = {}
        self._error: BaseException | None = None
        self._running = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._collect, name="fanout-processes", daemon=True)

    def start(self) -> None:
        self._pool = multiprocessing.get_context("spawn").Pool(self.workers)
        self._thread.start()

    def _collect(self) -> None:
        assert self._pool is not None
        try:
            tasks = [(i, self.plan) for i in range(self.plan.partitions)]
            for i, blob in enumerate(self._pool.imap(_run, tasks, chunksize=1)):
                with self._lock:
                    self._blobs[i] = blob
        except BaseException as exc:  # noqa: BLE001 (handed to the driver thread)
            self._error = exc

    def done(self) -> bool:
        return not self._thread.is_alive()

    def progress(self) -> tuple[int, int]:
        with self._lock:
            finished = len(self._blobs)
        return finished, min(self.workers, self.plan.partitions - finished)

    def cancel(self) -> None:
        if self._pool is not None:
            self._pool.terminate()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def result(self, timeout: float) -> list[bytes]:
        self._thread.join(timeout)
        try:
            if self._thread.is_alive():
                raise FanoutError(f"the worker processes did not end within {timeout:g} s")
            if self._error is not None:
                raise FanoutError(f"a worker process failed: {type(self._error).__name__}: {self._error}")
            return [self._blobs[i] for i in range(self.plan.partitions)]
        finally:
            self.close()
