"""One fuzz campaign: start the real servers, fuzz them side by side, read their logs, stop them.

The servers are real processes (the ones users run) on 127.0.0.1 with their
own files under ``workdir``; both are stopped whatever happens. The request
codes to mutate are asked of each live server (every code it does not answer
REQUEST_CODE_NOT_SUPPORTED), so a handler added later is fuzzed without
editing this file. A hang is pinned to one frame afterwards: the frames in
flight when it was seen are replayed one by one on a fresh server
(:mod:`tests.fuzz.pinpoint`).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import trio

from tests.broker_procs import BrokerProcess
from tests.fuzz.driver import Finding, RunStats, ServerFuzzer, discover_codes, scan_log
from tests.fuzz.pinpoint import pinpoint
from tests.procs import NamesrvProcess

# Every code Apache RocketMQ defines is below 1100; ours start at 9000.
CANDIDATE_CODES = tuple(range(0, 1100)) + tuple(range(9000, 9011))
PROBE_CODE = {"namesrv": 106, "broker": 28}  # GET_BROKER_CLUSTER_INFO, GET_BROKER_RUNTIME_INFO


@dataclass
class ServerResult:
    name: str
    codes: list[int]
    stats: RunStats
    seconds: float
    log_bytes: int


@dataclass
class CampaignResult:
    seed: int
    servers: list[ServerResult] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return [f for s in self.servers for f in s.stats.findings]

    def lines(self) -> list[str]:
        out = []
        for s in self.servers:
            st = s.stats
            out.append(
                f"{s.name}: {st.sent} frames in {s.seconds:.1f} s ({len(s.codes)} request codes), "
                f"{st.answered} answered, {st.closed_by_server} closed by the server, {st.unanswered} unanswered; "
                f"{st.probes} probes, slowest {st.slowest_probe * 1000:.0f} ms, {st.starved} late on a starved server; "
                f"log {s.log_bytes} bytes; "
                f"{len(st.findings)} finding(s)"
            )
        out.extend(f.line(self.seed) for f in self.findings)
        return out


def _start(name: str, workdir: Path) -> NamesrvProcess | BrokerProcess:
    if name == "namesrv":
        return NamesrvProcess(workdir / "namesrv").start()
    return BrokerProcess(workdir / "broker", brokerName="fuzz-broker", storePathRootDir=workdir / "broker" / "store").start()


def run_campaign(
    workdir: Path,
    *,
    seed: int,
    frames: int,
    seconds: float,
    start: int = 0,
    servers: Sequence[str] = ("namesrv", "broker"),
    workers: int = 8,
    progress: TextIO | None = None,
) -> CampaignResult:
    procs: dict[str, NamesrvProcess | BrokerProcess] = {}
    result = CampaignResult(seed)
    try:
        for name in servers:
            procs[name] = _start(name, workdir)
        trio.run(_fuzz_all, procs, result, seed, frames, seconds, start, workers, progress)
    finally:
        for proc in procs.values():
            proc.kill()
    for server in result.servers:
        log = procs[server.name].log_path
        text = log.read_text(errors="replace") if log.exists() else ""
        server.log_bytes = len(text.encode())
        server.stats.findings.extend(scan_log(text))
    for server in result.servers:
        for finding in server.stats.findings:
            if finding.kind in ("hang", "stall") and finding.span is not None:
                _pin_hang(server, finding, workdir / f"{server.name}-replay", seed)
    return result


def _cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a process has used; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pin_hang(server: ServerResult, finding: Finding, workdir: Path, seed: int) -> None:
    """Replay a hang's frames one by one on a fresh server and name the one that stalls it."""
    assert finding.span is not None
    proc = _start(server.name, workdir)
    try:
        host, _, port = proc.addr.rpartition(":")
        culprit = trio.run(functools.partial(
            pinpoint, host, int(port), seed=seed, codes=server.codes, span=finding.span,
            probe_code=PROBE_CODE[server.name]))
    finally:
        proc.kill()
    if culprit is None:
        finding.detail += "; replaying those frames one by one did not stall a fresh server"
    else:
        finding.frame = culprit
        finding.detail += f"; replayed one by one on a fresh server, frame {culprit.index} stalls it"


async def _fuzz_all(
    procs: dict[str, NamesrvProcess | BrokerProcess],
    result: CampaignResult,
    seed: int,
    frames: int,
    seconds: float,
    start: int,
    workers: int,
    progress: TextIO | None,
) -> None:
    fuzzers: list[ServerFuzzer] = []
    for name, proc in procs.items():
        host, _, port = proc.addr.rpartition(":")
        codes = await discover_codes(host, int(port), CANDIDATE_CODES)
        assert proc.proc is not None
        popen = proc.proc
        fuzzers.append(
            ServerFuzzer(name, host, int(port), codes, seed=seed, probe_code=PROBE_CODE[name],
                         alive=lambda p=popen: p.poll() is None, cpu=lambda p=popen: _cpu_seconds(p.pid),
                         workers=workers)
        )

    async def one(fz: ServerFuzzer) -> None:
        began = time.monotonic()
        stats = await fz.run(frames, seconds, start)
        result.servers.append(ServerResult(fz.name, fz.codes, stats, time.monotonic() - began, 0))

    async with trio.open_nursery() as outer:
        if progress is not None:
            outer.start_soon(_report_progress, fuzzers, progress)
        async with trio.open_nursery() as inner:
            for fz in fuzzers:
                inner.start_soon(one, fz)
        outer.cancel_scope.cancel()


async def _report_progress(fuzzers: list[ServerFuzzer], out: TextIO) -> None:
    """A line every 10 s for long runs (cancelled when the fuzzers are done)."""
    while True:
        await trio.sleep(10)
        print("  ".join(f"{fz.name}: {fz.stats.sent} sent, {len(fz.stats.findings)} findings" for fz in fuzzers),
              file=out, flush=True)
