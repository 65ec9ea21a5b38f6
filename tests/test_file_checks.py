"""Files named by settings are read as files: a FIFO, a device, a directory or an oversize file
never hangs a server's start or fills its memory (issue 20, "Files are opened as files").

Every case runs a real ``mqnamesrv`` or ``mqbroker-stub`` process. A path the server can do
without (the route snapshot) is ignored with one log line and the server serves; a path it
needs (the KV table, a config file, the broker's topics, groups and offsets) stops the start
with one line naming the path and the problem, and no traceback. A start that hung on a FIFO
would run into the subprocess timeout and fail the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker_stub.offset_store import OFFSETS_FILE_MAX_BYTES
from broker_stub.subgroups import GROUPS_FILE_MAX_BYTES
from broker_stub.topic_store import TOPICS_FILE_MAX_BYTES
from namesrv.snapshot import MAX_SNAPSHOT_BYTES
from security.acl_accounts import MAX_FILE_BYTES as ACCOUNTS_FILE_MAX_BYTES
from remoting.codes import RequestCode
from remoting.command import request
from server_runtime.regular_file import CONFIG_FILE_MAX_BYTES, RefusedFile, read_regular_file
from security.tls_config import MAX_CONFIG_FILE_BYTES as TLS_CONFIG_FILE_MAX_BYTES
from remoting.transport import connect
from tests.broker_procs import BrokerProcess, broker_command
from tests.peers import write_accounts
from tests.procs import NamesrvProcess

#: What a server may hold at its peak after refusing a file (the issue saw 550 MB for /dev/zero).
PEAK_RSS_BOUND = 150 * 1024 * 1024
START_TIMEOUT = 60


def make_strange(path: Path, kind: str, *, oversize: int = 0) -> None:
    """Put a FIFO, a symlink to /dev/zero, a directory, or a sparse file of ``oversize`` bytes at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "dir":
        path.mkdir()
    elif kind == "oversize":
        with open(path, "wb") as fh:
            fh.truncate(oversize)  # sparse: no disk used, but fstat says it is this large
    else:
        raise AssertionError(kind)


EXPECTED = {
    "fifo": "is a FIFO, not a regular file",
    "zero": "is a character device, not a regular file",
    "dir": "is a directory, not a regular file",
    "oversize": "-byte bound",
}
KINDS = list(EXPECTED)


def peak_rss(pid: int) -> int:
    """VmHWM: the most the process ever held in RAM."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def one_line_failure(cmd: list[str], cwd: Path) -> str:
    """Run a start that must fail; its stderr must be one line and no traceback."""
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=START_TIMEOUT, check=False, cwd=cwd)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


# ----------------------------------------------------------------------
# the shared reader, in process


@pytest.mark.parametrize("kind", KINDS)
def test_reader_refuses_what_is_not_a_regular_file_within_the_bound(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "f"
    make_strange(path, kind, oversize=4097)
    with pytest.raises(RefusedFile) as info:
        read_regular_file(str(path), 4096)
    assert EXPECTED[kind] in str(info.value)
    assert info.value.oversize == (kind == "oversize")


def test_reader_reads_a_file_at_the_bound_and_follows_symlinks(tmp_path: Path) -> None:
    data = os.urandom(4096)
    (tmp_path / "f").write_bytes(data)
    (tmp_path / "link").symlink_to(tmp_path / "f")
    assert read_regular_file(str(tmp_path / "link"), 4096) == data
    assert read_regular_file(str(tmp_path / "f"), 10**6) == data
    with pytest.raises(FileNotFoundError):
        read_regular_file(str(tmp_path / "missing"), 4096)


# ----------------------------------------------------------------------
# NameServer


@pytest.mark.parametrize("kind", KINDS)
def test_namesrv_ignores_a_strange_route_snapshot_and_serves(tmp_path: Path, kind: str) -> None:
    snap = tmp_path / "snap" / "routeSnapshot.msgpack"
    make_strange(snap, kind, oversize=MAX_SNAPSHOT_BYTES + 1)
    ns = NamesrvProcess(tmp_path / "ns", routeSnapshotPath=snap)
    try:
        ns.start(timeout=START_TIMEOUT)  # a FIFO opened without O_NONBLOCK never gets here
        assert ns.proc is not None
        assert peak_rss(ns.proc.pid) < PEAK_RSS_BOUND  # nothing of /dev/zero or the oversize file was read
        assert ns.terminate() == 0
    finally:
        ns.kill()
    log = ns.log()
    lines = [line for line in log.splitlines() if "route snapshot" in line and "ignored" in line]
    assert len(lines) == 1 and EXPECTED[kind] in lines[0], log
    assert "Traceback" not in log


@pytest.mark.parametrize("kind", KINDS)
def test_namesrv_refuses_a_strange_kv_file_with_one_line(tmp_path: Path, kind: str) -> None:
    kv = tmp_path / "kv" / "kvConfig.json"
    make_strange(kv, kind, oversize=2048)
    ns = NamesrvProcess(tmp_path / "ns", kvConfigPath=kv, kvTotalMaxBytes=1024)
    line = one_line_failure([sys.executable, "-m", "namesrv.cli", "-c", str(ns.config_path)], tmp_path)
    assert line.startswith(f"mqnamesrv: KV config {kv} ") and EXPECTED[kind] in line, line
    if kind == "oversize":
        assert "kvTotalMaxBytes" in line


@pytest.mark.parametrize("kind", KINDS)
def test_namesrv_refuses_a_strange_config_file_with_one_line(tmp_path: Path, kind: str) -> None:
    conf = tmp_path / "namesrv.properties"
    make_strange(conf, kind, oversize=CONFIG_FILE_MAX_BYTES + 1)
    line = one_line_failure([sys.executable, "-m", "namesrv.cli", "-c", str(conf)], tmp_path)
    assert line.startswith(f"mqnamesrv: config file {conf} ") and EXPECTED[kind] in line, line


@pytest.mark.parametrize("server", ["namesrv", "broker"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_strange_accounts_file_stops_the_start_with_one_line(tmp_path: Path, server: str, kind: str) -> None:
    accounts = tmp_path / "acl" / "plain_acl.yml"
    make_strange(accounts, kind, oversize=ACCOUNTS_FILE_MAX_BYTES + 1)
    if server == "namesrv":
        ns = NamesrvProcess(tmp_path / "ns", aclEnable=True, aclConfigPath=accounts)
        cmd, prog = [sys.executable, "-m", "namesrv.cli", "-c", str(ns.config_path)], "mqnamesrv"
    else:
        broker = BrokerProcess(tmp_path / "b", aclEnable=True, aclConfigPath=accounts)
        cmd, prog = broker_command() + ["-c", str(broker.config_path)], "mqbroker-stub"
    line = one_line_failure(cmd, tmp_path)
    assert line.startswith(f"{prog}: cannot read accounts file {accounts}: ") and EXPECTED[kind] in line, line


@pytest.mark.parametrize("server", ["namesrv", "broker"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_strange_tls_config_file_stops_the_start_with_one_line(tmp_path: Path, server: str, kind: str) -> None:
    tls_file = tmp_path / "tls" / "tls.properties"
    make_strange(tls_file, kind, oversize=TLS_CONFIG_FILE_MAX_BYTES + 1)
    if server == "namesrv":
        ns = NamesrvProcess(tmp_path / "ns", **{"tls.config.file": tls_file})
        cmd, prog = [sys.executable, "-m", "namesrv.cli", "-c", str(ns.config_path)], "mqnamesrv"
    else:
        broker = BrokerProcess(tmp_path / "b", **{"tls.config.file": tls_file})
        cmd, prog = broker_command() + ["-c", str(broker.config_path)], "mqbroker-stub"
    line = one_line_failure(cmd, tmp_path)
    assert line.startswith(f"{prog}: tls.config.file {tls_file}: ") and EXPECTED[kind] in line, line


def _wait_for_log(ns: NamesrvProcess, text: str, count: int = 1, seconds: float = 20.0) -> str:
    deadline = time.monotonic() + seconds
    while (log := ns.log()).count(text) < count:
        assert time.monotonic() < deadline, f"{text!r} x{count} not logged in time:\n{log}"
        time.sleep(0.05)
    return log


def test_namesrv_keeps_serving_when_its_accounts_file_becomes_a_fifo(tmp_path: Path) -> None:
    """The accounts file is re-read while the server runs; a FIFO renamed over it must not block
    the housekeeping round that re-reads it (the heartbeat expiry and later reloads run there)."""
    accounts = write_accounts(tmp_path / "plain_acl.yml")
    ns = NamesrvProcess(tmp_path / "ns", aclEnable=True, aclConfigPath=accounts, scanNotActiveBrokerInterval=100)
    try:
        ns.start(timeout=START_TIMEOUT)
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        os.replace(fifo, accounts)
        line = [ln for ln in _wait_for_log(ns, "not reloaded").splitlines() if "not reloaded" in ln][0]
        assert EXPECTED["fifo"] in line, line
        write_accounts(tmp_path / "plain_acl.yml")  # a good file again: the round still runs and reads it
        _wait_for_log(ns, "accounts reloaded")
        assert ns.terminate() == 0
    finally:
        ns.kill()
    assert "Traceback" not in ns.log()


# ----------------------------------------------------------------------
# broker stub


@pytest.mark.parametrize("kind", KINDS)
def test_broker_refuses_a_strange_config_file_with_one_line(tmp_path: Path, kind: str) -> None:
    conf = tmp_path / "broker.properties"
    make_strange(conf, kind, oversize=CONFIG_FILE_MAX_BYTES + 1)
    line = one_line_failure(broker_command() + ["-c", str(conf)], tmp_path)
    assert line.startswith(f"mqbroker-stub: config file {conf} ") and EXPECTED[kind] in line, line


STORE_FILES = {
    "topics.json": TOPICS_FILE_MAX_BYTES,
    "subscriptionGroup.json": GROUPS_FILE_MAX_BYTES,
    "consumerOffset.json": OFFSETS_FILE_MAX_BYTES,
}


@pytest.mark.parametrize("name", list(STORE_FILES))
@pytest.mark.parametrize("kind", KINDS)
def test_broker_refuses_strange_store_files_with_one_line(tmp_path: Path, name: str, kind: str) -> None:
    store = tmp_path / "store"
    path = store / "config" / name
    make_strange(path, kind, oversize=STORE_FILES[name] + 1)
    broker = BrokerProcess(tmp_path / "b", storePathRootDir=store)
    line = one_line_failure(broker_command() + ["-c", str(broker.config_path)], tmp_path)
    assert line.startswith(f"mqbroker-stub: {path} ") and EXPECTED[kind] in line, line


async def test_broker_starts_on_regular_store_files_behind_symlinks(tmp_path: Path) -> None:
    """The check refuses kinds, not symlinks: an operator may link a file kept elsewhere."""
    store = tmp_path / "store"
    (store / "config").mkdir(parents=True)
    elsewhere = tmp_path / "kept" / "topics.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text('{"topicConfigTable":{"Linked":{"topicName":"Linked","readQueueNums":2,'
                         '"writeQueueNums":2,"perm":6}}}')
    (store / "config" / "topics.json").symlink_to(elsewhere)
    broker = BrokerProcess(tmp_path / "b", storePathRootDir=store)
    try:
        broker.start(timeout=START_TIMEOUT)
        async with connect(broker.addr) as client:
            resp = await client.invoke(request(RequestCode.GET_ALL_TOPIC_CONFIG))
        assert "Linked" in json.loads(resp.body)["topicConfigTable"]
        assert broker.terminate() == 0
    finally:
        broker.kill()
    assert "Traceback" not in broker.log()
