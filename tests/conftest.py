from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.procs import NamesrvProcess


@pytest.fixture
def start_namesrv(tmp_path: Path) -> Iterator[Callable[..., NamesrvProcess]]:
    """Factory for NameServer processes; every one is killed after the test."""
    started: list[NamesrvProcess] = []

    def start(name: str = "ns", **props: object) -> NamesrvProcess:
        proc = NamesrvProcess(tmp_path / name, **props).start()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()


@pytest.fixture
def namesrv(start_namesrv: Callable[..., NamesrvProcess]) -> NamesrvProcess:
    return start_namesrv()
