"""The local cluster's record (cluster.json) is read by the one bounded loader (server_runtime.regular_file)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mqadmin.localcluster.state import STATE_MAX_BYTES, ClusterError, ClusterState


def error_of(directory: Path) -> str:
    with pytest.raises(ClusterError) as caught:
        ClusterState.load(directory)
    return str(caught.value)


def test_no_record_says_there_is_no_cluster(tmp_path: Path) -> None:
    assert error_of(tmp_path) == f"no local cluster in {tmp_path} (start one with: mqadmin start)"


def test_a_fifo_in_its_place_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "cluster.json")
    assert error_of(tmp_path) == f"the cluster record {tmp_path / 'cluster.json'} is a FIFO, not a regular file"


def test_an_oversized_or_broken_record_is_one_line(tmp_path: Path) -> None:
    record = tmp_path / "cluster.json"
    record.write_bytes(b" " * (STATE_MAX_BYTES + 1))
    assert error_of(tmp_path) == (f"the cluster record {record} is {STATE_MAX_BYTES + 1} bytes, "
                                  f"larger than the {STATE_MAX_BYTES}-byte bound")
    record.write_text("{broken")
    assert error_of(tmp_path).startswith(f"cannot read {record}: ")
    record.write_text('{"dir": "x"}')
    assert error_of(tmp_path) == f"cannot read {record}: unexpected content ('procs')"
