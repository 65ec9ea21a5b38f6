"""Issue 14: the paths a careless user takes, each through the real CLI entry code.

Every test asserts the exit status and that no traceback is printed; the
NameServers are real processes on 127.0.0.1 (brokers are faked by real
registrations over TCP, held open for as long as the test needs them).
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import trio

from mqadmin.client.snapshot import suspect_limit
from mqadmin.commands.results import self_command
from namesrv.liveinfo import LIVE_TABLE_CODE
from remoting import requests as rq
from remoting.bodies import DataVersion, TopicConfig
from remoting.command import request
from remoting.transport import RemotingClient, connect
from tests.mqadmin_procs import CLI, cli_env, mqadmin_on_terminal, running_cluster, stop_all
from tests.mqadmin_procs import mqadmin as run_cli
from tests.procs import NamesrvProcess

DEAD = "127.0.0.1:1"  # nothing listens on port 1


async def mqadmin(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """The CLI's entry code in a worker thread (it runs its own trio loop)."""
    done = await trio.to_thread.run_sync(functools.partial(run_cli, *args, env=env if env is not None else cli_env()))
    assert "Traceback" not in done.stdout + done.stderr
    return done.returncode, done.stdout, done.stderr


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


async def register(c: RemotingClient, name: str, addr: str, timeout_ms: int | None = None) -> None:
    resp = await c.invoke(rq.register_broker(
        cluster="DefaultCluster", broker_name=name, broker_addr=addr, broker_id=0,
        topics=[TopicConfig("TBW102", 8, 8, 7), TopicConfig("TopicA", 4, 4, 6)], data_version=DataVersion(1, 1),
        heartbeat_timeout_ms=timeout_ms))
    assert resp.code == 0


# --------------------------------------------------------------------------- 1, 2: bad paths, before any work


def test_start_dir_on_a_file_or_unwritable_place_is_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    env = cli_env(tmp_path / "state")
    for where in (str(a_file), "/proc/x", str(a_file / "sub")):
        done = run_cli("start", "--dir", where, env=env)
        assert done.returncode == 2, done.stderr
        line = one_error_line(done.stderr)
        assert line.startswith("mqadmin: Invalid value for --dir") and where in line
    done = run_cli("fanout", "--start", "--no-spark", "--dir", str(a_file), env=env)
    assert done.returncode == 2 and "is not a directory" in one_error_line(done.stderr)
    assert a_file.read_text() == "x"


def test_output_paths_are_checked_before_a_scenario_runs(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "state", TMPDIR=str(tmp_path))
    for option, path in (("--plot", "/nonexistent/p.png"), ("--report", "/nonexistent/x.json"),
                         ("--records", "/proc/x/r.msgpack"), ("--report", str(tmp_path)),
                         ("--plot", str(tmp_path / "plot.txt"))):
        done = run_cli("scenario", "run", "broker-crash", option, path, env=env)
        assert done.returncode == 2, done.stderr
        line = one_error_line(done.stderr)
        assert f"Invalid value for {option}" in line and path in line
    assert not any(p.name.startswith("mqscenario-") for p in tmp_path.iterdir())


def test_output_paths_are_checked_before_a_fanout_starts(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "state", TMPDIR=str(tmp_path))
    for option, path in (("--report", "/nonexistent/r.json"), ("--plot", "/proc/x/p.png")):
        done = run_cli("fanout", "--start", "--no-spark", option, path, env=env)
        assert done.returncode == 2 and f"Invalid value for {option}" in one_error_line(done.stderr)
    assert list(tmp_path.iterdir()) == []  # no cluster directory, nothing else


# --------------------------------------------------------------------------- 3, 4: watch


async def test_watch_never_counts_a_silent_namesrv_as_agreeing(namesrv: NamesrvProcess) -> None:
    both = f"{namesrv.addr};{DEAD}"
    async with connect(namesrv.addr) as c:
        await register(c, "broker-a", "127.0.0.1:10911")
        rc, stdout, stderr = await mqadmin("watch", "--once", "--json", "--timeout", "5", "-n", both)
        assert rc == 1  # a health check: one NameServer did not answer
        snap = json.loads(stdout)
        assert snap["brokers"] and snap["topics"]
        assert not any(row["agree"] for row in snap["brokers"] + snap["topics"])
        assert snap["brokers"][0]["seenBy"] == {namesrv.addr: True, DEAD: None}
        assert one_error_line(stderr) == f"mqadmin: 1 of 2 NameServer(s) did not answer: {DEAD}"
        rc, stdout, stderr = await mqadmin("watch", "--once", "--timeout", "5", "-n", both)
        assert rc == 1
        rows = [line for line in stdout.splitlines() if line.startswith(("broker-a ", "TopicA "))]
        assert len(rows) == 2 and all("unknown" in r and " yes " not in r for r in rows), stdout
        error = next(line for line in stdout.splitlines() if "cannot connect" in line)
        assert error.count(DEAD) == 1, error  # the address once, not "ADDR: cannot connect to ADDR: ..."
        # Every NameServer answers: agreement and exit 0.
        rc, stdout, _ = await mqadmin("watch", "--once", "--json", "-n", namesrv.addr)
        assert rc == 0 and all(row["agree"] for row in json.loads(stdout)["brokers"])


async def test_namesrv_live_table_request_9001(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as c:
        await register(c, "broker-a", "127.0.0.1:10911")
        await register(c, "broker-b", "127.0.0.1:10921", timeout_ms=4000)
        await trio.sleep(0.3)
        resp = await c.invoke(request(LIVE_TABLE_CODE))
        assert resp.code == 0
        rows = json.loads(resp.body)["brokers"]
        assert [(r["brokerName"], r["brokerId"], r["brokerAddr"], r["heartbeatTimeoutMillis"]) for r in rows] == [
            ("broker-a", 0, "127.0.0.1:10911", 120000), ("broker-b", 0, "127.0.0.1:10921", 4000)]
        assert all(250 <= r["lastUpdateAgoMillis"] < 5000 and r["clusterName"] == "DefaultCluster" for r in rows)
        await register(c, "broker-a", "127.0.0.1:10911")  # a registration is a heartbeat: its age restarts
        rows = json.loads((await c.invoke(request(LIVE_TABLE_CODE))).body)["brokers"]
        assert rows[0]["lastUpdateAgoMillis"] < rows[1]["lastUpdateAgoMillis"]


async def test_watch_marks_a_silent_broker_suspect(namesrv: NamesrvProcess) -> None:
    # The default rule: half the broker's heartbeat timeout, at most 35 s (a 30 s period plus slack).
    assert (suspect_limit(20000, None), suspect_limit(120000, None), suspect_limit(None, None)) == (10.0, 35.0, 35.0)
    assert suspect_limit(20000, 0.5) == 0.5

    def judged_by_age(rows: dict[str, dict], limits: dict[str, float]) -> None:
        """Suspect exactly when silent past its limit (a busy machine may make any age larger)."""
        for name, limit in limits.items():
            age = rows[name]["lastHeard"][namesrv.addr]
            assert rows[name]["suspectBy"] == ([namesrv.addr] if age > limit else []), (name, age, limit)

    async with connect(namesrv.addr) as c:
        await register(c, "broker-a", "127.0.0.1:10911")  # default timeout: suspect after 35 s
        await register(c, "broker-b", "127.0.0.1:10921", timeout_ms=20000)  # suspect after 10 s, expires after 20
        rc, stdout, _ = await mqadmin("watch", "--once", "--json", "-n", namesrv.addr)
        rows = {r["broker"]: r for r in json.loads(stdout)["brokers"]}
        assert rc == 0
        judged_by_age(rows, {"broker-a": 35.0, "broker-b": 10.0})
        await trio.sleep(1.3)  # silence, as from a SIGSTOPped broker: still in every route, but its age grows
        rc, stdout, _ = await mqadmin("watch", "--once", "--json", "--suspect-after", "1", "-n", namesrv.addr)
        rows = {r["broker"]: r for r in json.loads(stdout)["brokers"]}
        assert rc == 0 and all(r["suspectBy"] == [namesrv.addr] for r in rows.values())
        assert rows["broker-b"]["lastHeard"][namesrv.addr] >= 1.2 and rows["broker-b"]["seenBy"][namesrv.addr] is True
        rc, stdout, _ = await mqadmin("watch", "--once", "--suspect-after", "1", "-n", namesrv.addr)
        line_b = next(line for line in stdout.splitlines() if line.startswith("broker-b "))
        assert re.search(r"suspect \d+s$", line_b), stdout
        await register(c, "broker-a", "127.0.0.1:10911")  # a registration is a heartbeat: broker-a is fresh again
        rc, stdout, _ = await mqadmin("watch", "--once", "--suspect-after", "1000", "-n", namesrv.addr)
        line_a = next(line for line in stdout.splitlines() if line.startswith("broker-a "))
        assert re.search(r"alive \d+s$", line_a), stdout


# --------------------------------------------------------------------------- 5, 6, 7, 17


async def test_get_namesrv_config_reports_the_bound_port(namesrv: NamesrvProcess) -> None:
    assert "listenPort=0" in (namesrv.config_path.read_text())
    rc, stdout, _ = await mqadmin("getNamesrvConfig", "--json", "-n", namesrv.addr)
    assert rc == 0 and json.loads(stdout)[namesrv.addr]["listenPort"] == namesrv.addr.rsplit(":", 1)[1]


async def test_broker_status_error_goes_to_stderr_with_the_prefix() -> None:
    rc, stdout, stderr = await mqadmin("brokerStatus", "-b", DEAD, "--timeout", "1")
    assert rc == 1 and stdout == ""
    assert one_error_line(stderr) == f"mqadmin: cannot connect to {DEAD}: Connection refused"


async def test_bad_addresses_and_signals_are_usage_errors(tmp_path: Path) -> None:
    rc, _, stderr = await mqadmin("topicRoute", "-t", "T", "-n", "localhost:98765")
    assert rc == 2 and "port out of range" in one_error_line(stderr) and "98765" in stderr
    rc, _, stderr = await mqadmin("killBroker", "-b", "broker-a", "--signal", "FOO", "--dir", str(tmp_path))
    assert rc == 2 and "unknown signal 'FOO'" in one_error_line(stderr)
    rc, _, stderr = await mqadmin("killNamesrv", "--signal", "HUP", "--dir", str(tmp_path))
    assert rc == 2 and "--signal" in one_error_line(stderr)


def _interrupt_after_first_output(args: list[str], marker: str) -> subprocess.CompletedProcess[str]:
    # SIGINT back to its default in the child: a test run started in the background (``cmd &``) ignores it,
    # and an ignored SIGINT is inherited, so Ctrl-C would never reach the command under test
    proc = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        seen = ""
        while marker not in seen and time.monotonic() < deadline:
            seen += proc.stdout.readline()
        assert marker in seen, seen
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
        return subprocess.CompletedProcess(args, proc.returncode, seen + out, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_ctrl_c_exits_130_in_repeating_commands(namesrv: NamesrvProcess) -> None:
    for args, marker in ((["clusterList", "-i", "1", "-n", namesrv.addr], "#Cluster Name"),
                         (["watch", "--interval", "0.2", "-n", namesrv.addr], "brokers as each NameServer")):
        done = _interrupt_after_first_output(args, marker)
        assert done.returncode == 130, (args, done.stderr)
        assert "Traceback" not in done.stderr + done.stdout


def test_start_hint_names_the_mqadmin_that_was_run(tmp_path: Path) -> None:
    """make run starts .venv/bin/mqadmin, which is not on PATH: the hint must not say a bare `mqadmin`."""
    bin_dir = tmp_path / "venv-bin"
    bin_dir.mkdir()
    script = bin_dir / "mqadmin"
    script.write_text(f"#!{CLI[0]}\nfrom mqadmin.cli import entry\nentry()\n")
    script.chmod(0o755)
    env = cli_env(tmp_path / "state", PATH="/usr/bin:/bin", PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    state = tmp_path / "c"
    try:
        done = subprocess.run([str(script), "start", "--dir", str(state), "--namesrvs", "1", "--brokers", "0"],
                              capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path, check=False)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        hint = next(line for line in done.stdout.splitlines() if line.startswith("try:"))
        assert "venv-bin/mqadmin clusterList" in hint and " mqadmin clusterList" not in hint, hint
    finally:
        stop_all(state)
    assert self_command(str(script)) in (os.path.relpath(script), str(script))  # relative unless above the cwd
    assert self_command("-c") == "mqadmin"


# --------------------------------------------------------------------------- 12: scenario files


def test_scenario_files_description_optional_and_typos_list_every_key(tmp_path: Path) -> None:
    (tmp_path / "bare.yaml").write_text("name: bare\nduration: 5\nexpect:\n  - send_success_rate: 0.9\n")
    done = run_cli("scenario", "list", "--dir", str(tmp_path), "--json", env=cli_env())
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["scenarios"]
    assert row["valid"] is True and row["description"] == ""
    typo = tmp_path / "typo.yaml"
    typo.write_text("name: t\nduration: 5\ntimeline:\n  - at: 1\n    kill_broker: broker-a\n    lable: crash\n")
    done = run_cli("scenario", "run", str(typo), env=cli_env())
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert line.startswith(f"mqadmin: {typo}:6: timeline[1].lable: unknown field (did you mean label?")
    expected = line.split("expected one of: ", 1)[1].rstrip(")").split(", ")
    assert {"at", "label", "kill_broker", "broker", "broker_id"} <= set(expected)


# --------------------------------------------------------------------------- 14: docs


def test_readme_links_stay_inside_the_repository() -> None:
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    assert "../shared" not in readme
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if not target.startswith(("http://", "https://")):
            assert (root / target).exists(), target
    protocol = (root / "docs" / "protocol.md").read_text()
    assert "9001" in protocol and "GET_BROKER_LIVE_TABLE" in protocol and "bare integer keys" in protocol.lower()


# --------------------------------------------------------------------------- 15, 17: what people see


def _no_trailing_spaces(text: str) -> None:
    assert all(line == line.rstrip() for line in text.splitlines()), [ln for ln in text.splitlines() if ln != ln.rstrip()]


def test_tables_fit_without_cutting_names(tmp_path: Path) -> None:
    long_topic = "AQuiteLongTopicNameThatMustNeverBeSplit"
    env = cli_env(tmp_path / "state")
    with running_cluster(tmp_path / "c", "--namesrvs", "2", "--brokers", "1", "--topics", long_topic, env=env) as info:
        ns = info["namesrvAddr"]
        # On a terminal the table fits its width, dropping low-value columns first.
        wide = mqadmin_on_terminal("clusterList", "-n", ns, env=env, columns=250)
        assert wide.returncode == 0 and "#Timer(Progress)" in wide.stdout and "#InTPS(LOAD)" in wide.stdout
        narrow = mqadmin_on_terminal("clusterList", "-n", ns, env=env, columns=160)
        assert narrow.returncode == 0, narrow.stderr
        header = narrow.stdout.splitlines()[0]
        assert "#InTPS(LOAD)" in header and "#OutTPS(LOAD)" in header and "#Timer(Progress)" not in header
        assert all(len(line) <= 160 for line in narrow.stdout.splitlines())
        watch = mqadmin_on_terminal("watch", "--once", "-n", ns, env=env, columns=80)
        assert watch.returncode == 0, watch.stderr
        assert any(line.startswith(long_topic + " ") for line in watch.stdout.splitlines()), watch.stdout
        assert all(len(line) <= 80 for line in watch.stdout.splitlines())
        # Off a terminal: every column whatever $COLUMNS says, no rule line, no trailing spaces.
        piped = run_cli("clusterList", "-n", ns, env=cli_env(columns=60))
        assert piped.returncode == 0 and "#Timer(Progress)" in piped.stdout and "─" not in piped.stdout
        _no_trailing_spaces(piped.stdout)


# --------------------------------------------------------------------------- 16: plots


def test_plot_marks_and_legends_stay_off_the_data(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mqadmin.fanout import report

    kept: list[object] = []
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig))
    n = 10
    zeros = [0] * n
    doc = {
        "timeline": {"ok": [100] * n, "failed": [0] * 8 + [20, 0], "routeQueries": [5] * n, "routeFailures": zeros,
                     "brokers": {"broker-a": {"attempts": [50] * 8 + [0, 0], "failed": [0] * 8 + [20, 0]},
                                 "broker-b": {"attempts": [50] * n, "failed": zeros}}},
        "load": {"producers": 100}, "engine": {"text": "Spark local[2]"}, "sends": {"total": 1000},
        "routes": {"queries": 50},
        "events": [{"t": 8.0, "what": "kill broker-a", "ok": True, "detail": ""},
                   {"t": 8.1, "what": "kill broker-b", "ok": False, "detail": "not running"}],
    }
    path = tmp_path / "f.png"
    report.plot(doc, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (fig,) = kept
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = fig.axes
    for ax in axes:
        legend = ax.get_legend()
        if legend is not None:  # right of its axes, never on a line
            assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1
        for text in ax.texts:
            assert text.get_rotation() == 0  # no vertical labels over the bars
    assert [t.get_text() for t in axes[0].texts] == ["1"]  # two actions 0.1 s apart share one numbered mark
    listing = [t.get_text() for t in fig.texts if "kill broker-a" in t.get_text()]
    assert listing and "kill broker-b: not running  (FAILED)" in listing[0]
    # Per-second series are steps over whole seconds: second 8's failures start at t=8, not 7.5.
    steps = [p for p in axes[1].patches if type(p).__name__ == "StepPatch"]
    assert steps and all(list(p.get_data().edges) == list(range(n + 1)) for p in steps)
    bars = axes[0].patches
    assert min(b.get_x() for b in bars) == 0 and all(float(b.get_x()).is_integer() for b in bars)
    monkeypatch.undo()
    plt.close(fig)


def test_scenario_plot_marks_and_legends_stay_off_the_data(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mqadmin.scenario import plot as scenario_plot
    from remoting.codes import PERM_READ, PERM_WRITE

    kept: list[object] = []
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig))
    both = {"broker-a": ({0: "a"}, PERM_READ | PERM_WRITE), "broker-b": ({0: "b"}, PERM_READ | PERM_WRITE)}
    one = {"broker-b": ({0: "b"}, PERM_READ | PERM_WRITE)}
    ns = SimpleNamespace
    result = ns(
        scenario=ns(name="t", description="a kill", observe_topics=["T"], cluster=ns(brokers=2),
                    groups=[ns(start=0.0, duration=10.0)]),
        records=[ns(t=i / 20, outcome="ok" if i % 40 else "timeout", broker="broker-a", attempts=1) for i in range(200)],
        end=10.0,
        observer=ns(events=[ns(namesrv=0, topic="T", t=0.1, after=both), ns(namesrv=0, topic="T", t=3.02, after=one)]),
        namesrvs=["127.0.0.1:9876"],
        actions=[ns(start=3.0, end=3.0, text="kill_broker broker-a-0", ok=True, action=ns(kind="kill_broker")),
                 ns(start=3.5, end=6.0, text="wait_until route_excludes broker-a", ok=True,
                    action=ns(kind="wait_until"))],
        consumers=None,  # no consumer groups: two panels
    )
    path = tmp_path / "s.png"
    scenario_plot.draw(result, path)  # type: ignore[arg-type]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (fig,) = kept
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    top, bottom = fig.axes
    for ax in (top, bottom):
        assert ax.get_legend().get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1
        assert all(t.get_rotation() == 0 for t in ax.texts)
    assert [t.get_text() for t in top.texts] == ["1", "2"]
    listing = next(t.get_text() for t in fig.texts if "kill_broker" in t.get_text())
    assert "t=  3.00 s  kill_broker broker-a-0" in listing
    assert "t=  3.50 s  wait until route_excludes broker-a: reached at t=6.00 s" in listing
    bars = [b for container in top.containers for b in container]
    assert bars and all(float(b.get_x()).is_integer() and b.get_width() == 1.0 for b in bars)  # whole seconds
    monkeypatch.undo()
    plt.close(fig)
