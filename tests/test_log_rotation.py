"""Logs rotate by size (issue 20, "Logs rotate"): real processes write lines until their log
file passes ``logFileMaxSize``; it rotates there, ``logFileMaxIndex`` old files are kept, none
passes the bound, and the newest lines are in the current file, in order.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from remoting import requests as rq
from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from remoting.transport import connect
from tests.broker_wire import create_topic
from tests.procs import BOOT_LINE, NamesrvProcess

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

MAX_SIZE = 8192
MAX_INDEX = 2
LINES = 600  # ~50 KB of log: several rotations of 8 KiB


def rotated_files(log: Path) -> list[Path]:
    """The log and its rotated files, newest first, as they are on disk."""
    return sorted(log.parent.glob(log.name + "*"), key=lambda p: int(p.suffix[1:]) if p != log else 0)


def check_rotated(log: Path, pattern: str) -> None:
    """The log rotated at the bound, kept MAX_INDEX old files, and holds the latest numbered lines in order."""
    files = rotated_files(log)
    assert [p.name for p in files] == [log.name] + [f"{log.name}.{i}" for i in range(1, MAX_INDEX + 1)]
    for p in files:
        assert p.stat().st_size <= MAX_SIZE, (p, p.stat().st_size)
    numbers = [int(n) for p in reversed(files) for n in re.findall(pattern, p.read_text())]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)  # oldest file first, no gap inside
    assert numbers == list(range(numbers[0], LINES))  # the newest lines, up to the last one sent
    assert len(numbers) < LINES  # the oldest were rotated away: the disk holds a bounded log


async def log_lines(addr: str) -> None:
    """LINES numbered NameServer log lines (each WIPE_WRITE_PERM logs one)."""
    async with connect(addr) as client:
        for i in range(LINES):
            resp = await client.invoke(rq.wipe_write_perm(f"broker-{i:05d}"))
            assert resp.code == ResponseCode.SUCCESS


async def test_namesrv_log_rotates_at_the_bound(start_namesrv: Callable[..., NamesrvProcess]) -> None:
    ns = start_namesrv(logFile="logs/ns.log", logFileMaxSize=MAX_SIZE, logFileMaxIndex=MAX_INDEX)
    log = ns.workdir / "logs" / "ns.log"  # relative to the server's working directory
    await log_lines(ns.addr)
    assert ns.terminate() == 0
    check_rotated(log, r"wipe write perm of broker broker-(\d{5})")
    assert "name server stopped" in log.read_text()
    assert "wipe write perm" not in ns.log()  # stderr carries no log line when logFile is set


async def test_broker_log_rotates_at_the_bound(start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(logFile="broker.log.d/broker.log", logFileMaxSize=MAX_SIZE, logFileMaxIndex=MAX_INDEX)
    log = broker.workdir / "broker.log.d" / "broker.log"
    async with connect(broker.addr) as client:
        for i in range(LINES):
            resp = await client.invoke(create_topic(f"T{i:05d}", queues=1))
            assert resp.code == ResponseCode.SUCCESS, resp
    assert broker.terminate() == 0
    check_rotated(log, r"topic T(\d{5}) created/updated")


@pytest.mark.parametrize(("module", "prog"), [("namesrv.cli", "mqnamesrv"), ("broker_stub.cli", "mqbroker-stub")])
def test_a_log_file_that_is_a_fifo_is_refused_with_one_line(tmp_path: Path, module: str, prog: str) -> None:
    fifo = tmp_path / "server.log"
    os.mkfifo(fifo)
    conf = tmp_path / "server.properties"
    conf.write_text(f"listenPort=0\nlogFile={fifo}\n")
    done = subprocess.run([sys.executable, "-m", module, "-c", str(conf)], capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"{prog}: logFile {fifo} is a FIFO, not a regular file"]


@pytest.mark.parametrize(("key", "value"), [("logFileMaxSize", "100"), ("logFileMaxIndex", "0")])
@pytest.mark.parametrize(("module", "prog"), [("namesrv.cli", "mqnamesrv"), ("broker_stub.cli", "mqbroker-stub")])
def test_rotation_bounds_are_checked(tmp_path: Path, module: str, prog: str, key: str, value: str) -> None:
    conf = tmp_path / "server.properties"
    conf.write_text(f"{key}={value}\n")
    done = subprocess.run([sys.executable, "-m", module, "-c", str(conf)], capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 1
    assert f"{key} must be between" in done.stderr and done.stderr.count("\n") == 1


async def test_stdout_and_stderr_redirected_to_the_log_follow_its_rotation(tmp_path: Path) -> None:
    """As under ``mqadmin start``: the process's own output goes to the log file, which it rotates."""
    log = tmp_path / "namesrv.log"
    conf = tmp_path / "namesrv.properties"
    conf.write_text(f"listenPort=0\nbindAddress=127.0.0.1\nkvConfigPath={tmp_path / 'kv.json'}\n"
                    f"logFile={log}\nlogFileMaxSize={MAX_SIZE}\nlogFileMaxIndex={MAX_INDEX}\n")
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "namesrv.cli", "-c", str(conf)], stdout=out, stderr=out,
                                stdin=subprocess.DEVNULL)
    try:
        with trio.fail_after(30):
            while not (match := BOOT_LINE.search(log.read_bytes())):
                assert proc.poll() is None, log.read_text()
                await trio.sleep(0.05)
        await log_lines(f"{match.group(1).decode()}:{match.group(2).decode()}")
        # the descriptors now name the current file, not a rotated (or deleted) one
        assert [os.readlink(f"/proc/{proc.pid}/fd/{fd}") for fd in (1, 2)] == [str(log), str(log)]
        proc.terminate()
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    check_rotated(log, r"wipe write perm of broker broker-(\d{5})")


async def _broker_log_settings(addr: str) -> tuple[str, str, str]:
    async with connect(addr) as client:
        resp = await client.invoke(request(RequestCode.GET_BROKER_CONFIG))
    settings = dict(line.split("=", 1) for line in resp.body.decode().splitlines() if "=" in line)
    return settings["logFile"], settings["logFileMaxSize"], settings["logFileMaxIndex"]


def test_mqadmin_start_gives_each_process_a_rotating_log(tmp_path: Path) -> None:
    """The local runner sets logFile to each process's log; a restart finds its boot line after a rotation."""
    from mqadmin.localcluster import processes
    from tests.mqadmin_procs import stop_all

    directory = tmp_path / "cluster"
    rotation = (("logFileMaxSize", str(MAX_SIZE)), ("logFileMaxIndex", str(MAX_INDEX)))
    try:
        state = processes.start(directory, processes.StartOptions(namesrvs=1, brokers=1, namesrv_props=rotation,
                                                              broker_props=rotation))
        ns = state.namesrvs[0]
        log = Path(ns.log)
        trio.run(log_lines, ns.addr)  # the runner runs trio itself: this test is synchronous
        assert [os.readlink(f"/proc/{ns.pid}/fd/{fd}") for fd in (1, 2)] == [str(log), str(log)]
        processes.stop_procs([ns])
        check_rotated(log, r"wipe write perm of broker broker-(\d{5})")
        # nearly full: the restarted server's first log line rotates the file before its boot line
        with open(log, "ab") as fh:
            fh.write(b"x" * (MAX_SIZE - log.stat().st_size - 2) + b"\n")
        processes.restart(ns)
        assert ns.alive() and log.stat().st_size < MAX_SIZE // 2
        assert BOOT_LINE.search(log.read_bytes())
        broker = state.brokers[0]
        broker_log = Path(broker.log)
        assert broker_log.exists() and "boot success" in broker_log.read_text()
        # the broker logs to the same file itself, with the bounds it was given
        assert [os.readlink(f"/proc/{broker.pid}/fd/{fd}") for fd in (1, 2)] == [str(broker_log)] * 2
        broker_settings = trio.run(_broker_log_settings, broker.addr)
        assert broker_settings == (str(broker_log), str(MAX_SIZE), str(MAX_INDEX))
    finally:
        stop_all(directory)


async def test_both_servers_rotate_at_50_mib_keeping_5_files_by_default(
    start_namesrv: Callable[..., NamesrvProcess], start_broker: Callable[..., BrokerProcess]
) -> None:
    """The defaults the issue asks for, as the running servers report them."""
    ns = start_namesrv()
    broker = start_broker(namesrvAddr=ns.addr)
    for addr, req in ((ns.addr, rq.get_namesrv_config()), (broker.addr, request(RequestCode.GET_BROKER_CONFIG))):
        async with connect(addr) as client:
            resp = await client.invoke(req)
        assert resp.code == ResponseCode.SUCCESS
        settings = dict(line.split("=", 1) for line in resp.body.decode().splitlines() if "=" in line)
        assert (settings["logFile"], settings["logFileMaxSize"], settings["logFileMaxIndex"]) == ("", "52428800", "5")
