"""Issue 11's reproductions that need their own server process: a restart, a low descriptor limit,
a small connection limit, or ``kill -9`` rounds (items 5, 8, 9 and the KV durability check).

Each function starts what it needs under ``workdir`` and stops it, pass or fail.
"""

from __future__ import annotations

import json
import random
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import psutil
from hostile_harness import Case, Client, Outcome, Server, answer_text, run_case
from hostile_namesrv import refusals_at_limit

from remoting import properties
from remoting import requests as rq
from remoting.codes import RequestCode, ResponseCode
from remoting.command import request
from tests.procs import NamesrvProcess

MQADMIN = [sys.executable, "-c", "from mqadmin.cli import entry; entry()"]


# --------------------------------------------------------------------------
# item 5: config-file injection and live-only keys


def injection(server: Server) -> Outcome:
    answers = []
    with Client(server.addr) as c:
        for newline in ("\\n", "\\u000a", "\\r"):
            body = f"productEnvName=center{newline}kvConfigPath=/tmp/hostile-attacker-kv.json".encode()
            answers.append(c.call(request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body)))
    text = server.proc.config_path.read_text()  # type: ignore[union-attr]
    kv_keys = [line for line in text.splitlines() if line.startswith("kvConfigPath")]
    return Outcome(
        "; ".join(answer_text(a) for a in answers) + f"; config file has {len(kv_keys)} kvConfigPath line(s)",
        {"all three refused": all(a.code == ResponseCode.SYSTEM_ERROR for a in answers),
         "no second kvConfigPath": len(kv_keys) == 1, "no attacker path in the file": "attacker" not in text},
    )


def restart_keeps_kv_path(server: Server) -> Outcome:
    """After the injection attempts: restart, then a KV write must go to the configured file."""
    proc = server.proc
    assert isinstance(proc, NamesrvProcess)
    status = server.restart()
    attacker = Path("/tmp/hostile-attacker-kv.json")
    with Client(server.addr) as c:
        put = c.call(rq.put_kv("hostile", "afterRestart", "v1"))
        conf = properties.loads(c.call(rq.get_namesrv_config()).body.decode())
    on_disk = proc.kv_path.exists() and b"afterRestart" in proc.kv_path.read_bytes()
    return Outcome(
        f"SIGTERM exit {status}; restarted; PUT {answer_text(put)}; kvConfigPath={conf.get('kvConfigPath')}",
        {"KV write in the configured file": on_disk, "no attacker file": not attacker.exists(),
         "kvConfigPath unchanged": conf.get("kvConfigPath") == str(proc.kv_path)},
    )


def live_only_keys(server: Server) -> Outcome:
    updates = {
        "listenPort": ("19876", ResponseCode.NO_PERMISSION),
        "bindAddress": ("10.0.0.1", ResponseCode.NO_PERMISSION),
        "serverMaxConnections": ("1", ResponseCode.SYSTEM_ERROR),
        "frameMaxLength": ("1024", ResponseCode.SYSTEM_ERROR),
        "serverChannelMaxIdleTimeSeconds": ("5", ResponseCode.SYSTEM_ERROR),
        "waitSecondsForService": ("100000", ResponseCode.SYSTEM_ERROR),
    }
    got = {}
    extra = [socket.create_connection(server.addr, timeout=5) for _ in range(2)]
    try:
        with Client(server.addr) as c:
            for key, (value, _) in updates.items():
                got[key] = c.call(rq.update_namesrv_config({key: value}))
    finally:
        for sock in extra:
            sock.close()
    done = subprocess.run([*MQADMIN, "getNamesrvConfig", "--classes", "--json", "-n", f"{server.addr[0]}:{server.addr[1]}"],
                          capture_output=True, text=True, timeout=60, check=False)
    classes: dict[str, Any] = {}
    if done.returncode == 0:
        shown = next(iter(json.loads(done.stdout).values()))
        classes = {k: shown[k]["class"] for k in ("listenPort", "serverMaxConnections", "frameMaxLength", "kvConfigPath")}
    return Outcome(
        "; ".join(f"{k}: {answer_text(v)}" for k, v in got.items()) + f"; classes {classes}",
        {"every key refused as documented": all(got[k].code == want for k, (_, want) in updates.items()),
         "getNamesrvConfig --classes shows live/restart/refused": classes.get("listenPort") == "refused"
         and classes.get("serverMaxConnections") == "live" and classes.get("frameMaxLength") == "restart"},
    )


# --------------------------------------------------------------------------
# item 8: EMFILE


class LowFdNamesrv(NamesrvProcess):
    """A NameServer started under ``ulimit -n`` ``nofile``."""

    def __init__(self, workdir: Path, nofile: int, **props: object) -> None:
        super().__init__(workdir, **props)
        self.nofile = nofile

    def start(self, timeout: float = 15.0) -> NamesrvProcess:
        limit = self.nofile

        def lower() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "namesrv.cli", "-c", str(self.config_path)],
                                         stdout=subprocess.PIPE, stderr=log, cwd=self.workdir, preexec_fn=lower)
        self.addr = self._wait_for_boot(timeout)
        return self


def emfile(server: Server, connections: int = 700, seconds: float = 3.0) -> Outcome:
    cpu = psutil.Process(server.pid)
    socks: list[socket.socket] = []
    before = server.log_size()
    try:
        for _ in range(connections):
            socks.append(socket.create_connection(server.addr, timeout=5))
        time.sleep(0.5)
        used = sum(cpu.cpu_times()[:2])
        time.sleep(seconds)
        percent = (sum(cpu.cpu_times()[:2]) - used) / seconds * 100
    finally:
        for sock in socks:
            sock.close()
    time.sleep(1.2)  # the backoff is at most 1 s: then new connections are accepted again
    new = server.log_since(before)
    lines, failed = new.count(b"\n"), new.count(b"accept failed")
    return Outcome(
        f"{connections} connections at ulimit -n 512: server CPU {percent:.1f} % over {seconds:.0f} s, "
        f"{failed} 'accept failed' lines, {lines} log lines",
        {"CPU < 10 %": percent < 10, "log lines <= 5": lines <= 5},
        {"cpu_percent": round(percent, 1), "log_lines": lines},
    )


# --------------------------------------------------------------------------
# KV durability: kill -9 during writes


def kv_kill_rounds(workdir: Path, rounds: int, seed: int = 11) -> dict[str, Any]:
    """``rounds`` times: start, check every acknowledged write survived, write, kill -9 mid-write."""
    rng = random.Random(seed)
    proc = NamesrvProcess(workdir)
    acked: dict[str, str] = {}  # key -> value acknowledged last
    lost: list[str] = []
    corrupt = 0
    writes = 0
    began = time.monotonic()
    try:
        for r in range(rounds):
            try:
                proc.start()
            except RuntimeError:
                corrupt += 1  # a NameServer that cannot read its own file
                break
            if proc.kv_path.exists():
                try:
                    table = orjson.loads(proc.kv_path.read_bytes()).get("configTable", {}).get("durable", {})
                except orjson.JSONDecodeError:
                    corrupt += 1
                    table = {}
                lost += [k for k, v in acked.items() if k.startswith("k") and table.get(k) != v]
                if int(table.get("counter", "-1")) < int(acked.get("counter", "-1")):
                    lost.append("counter")
            host, port = proc.addr.rsplit(":", 1)
            with Client((host, int(port))) as c:
                stop_at = time.monotonic() + rng.uniform(0.02, 0.25)
                i = 0
                while time.monotonic() < stop_at:
                    for key, value in ((f"k{r:03d}-{i:04d}", f"v{r}-{i}"), ("counter", str(r * 100000 + i))):
                        if c.call(rq.put_kv("durable", key, value)).code == ResponseCode.SUCCESS:
                            acked[key] = value
                            writes += 1
                    i += 1
                for j in range(8):  # in flight when the process dies: not acknowledged, may or may not land
                    c.send(rq.put_kv("durable", f"x{r:03d}-{j}", "unacked"))
                assert proc.proc is not None
                proc.proc.kill()
                proc.proc.wait(5)
        proc.start()
        host, port = proc.addr.rsplit(":", 1)
        with Client((host, int(port))) as c:
            kv = c.call(rq.kv_list("durable"))
        served = json.loads(kv.body).get("table", {}) if kv.code == ResponseCode.SUCCESS else {}
        lost += [k for k, v in acked.items() if k.startswith("k") and served.get(k) != v]
    finally:
        proc.kill()
    checks = {"0 acknowledged writes lost": not lost, "0 corrupt files": corrupt == 0}
    return {
        "case": "kv-kill-9-rounds", "item": 0, "server": "namesrv",
        "what": f"{rounds} kill -9 rounds during PUT_KV_CONFIG (issue: 620 rounds held)",
        "answer": f"{writes} writes acknowledged, {len(lost)} lost, {corrupt} corrupt files",
        "seconds": round(time.monotonic() - began, 1), "fresh_client_ms": None, "stall_max_ms": None,
        "stall_p99_ms": None, "probe_samples": None, "probe_failed": None, "baseline_stall_max_ms": None,
        "rss_peak_mb": None, "log_bytes": None, "log_lines": None,
        "figures": {"rounds": rounds, "acknowledged": writes, "lost": lost[:10], "corrupt": corrupt},
        "checks": checks, "pass": all(checks.values()),
    }


# --------------------------------------------------------------------------


def run_all(workdir: Path, kv_rounds: int, wanted: Callable[[str], bool] = lambda case_id: True) -> list[dict[str, Any]]:
    """The cases of this module whose id ``wanted`` accepts, each on its own server(s)."""
    results = []
    if wanted("5-"):
        server = Server.namesrv(workdir / "inject")
        try:
            server.measure_baseline(1.0)
            results.append(run_case(Case("5-config-injection", 5, "UPDATE_NAMESRV_CONFIG value with \\n, \\u000a, "
                                         "\\r escapes and a kvConfigPath", server, lambda: injection(server))))
            results.append(run_case(Case("5-restart-after-injection", 5, "restart, then PUT_KV_CONFIG", server,
                                         lambda: restart_keeps_kv_path(server), stall_applies=False)))
            results.append(run_case(Case("5-live-only-keys", 5, "listenPort, bindAddress, serverMaxConnections 1, "
                                         "frameMaxLength 1024, idle 5 s, waitSecondsForService 100000", server,
                                         lambda: live_only_keys(server))))
        finally:
            server.stop()
    if wanted("8-"):
        low = LowFdNamesrv(workdir / "emfile", nofile=512, serverMaxConnections=10000)
        try:
            low.start()
        except BaseException:
            low.kill()
            raise
        server = Server("namesrv", low)
        try:
            server.measure_baseline(1.0)
            results.append(run_case(Case("8-emfile", 8, "ulimit -n 512, serverMaxConnections 10000, 700 connections",
                                         server, lambda: emfile(server))))
        finally:
            server.stop()
    if wanted("9-refusals"):
        server = Server.namesrv(workdir / "limit", serverMaxConnections=4)
        try:
            server.measure_baseline(1.0)
            results.append(run_case(Case("9-refusals-at-limit", 9, "500 connections refused at serverMaxConnections",
                                         server, lambda: refusals_at_limit(server))))
        finally:
            server.stop()
    if wanted("kv-"):
        result = kv_kill_rounds(workdir / "kv", kv_rounds)
        print(f"[{'PASS' if result['pass'] else 'FAIL'}] {result['case']}: {result['what']}\n        {result['answer']}",
              flush=True)
        results.append(result)
    return results
