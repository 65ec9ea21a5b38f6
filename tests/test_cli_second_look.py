"""Issue 22, a newcomer's second look: the careless paths and what an operator's fingers expect.

Every test runs the real CLI (its entry code in-process, or a real subprocess where a pipe, a
signal or the console script matters) against real NameServer and broker-stub processes on
127.0.0.1, and asserts the exit status and the one-line error; none of them prints a traceback.
"""

from __future__ import annotations

import functools
import io
import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio
import typer

from mqadmin.cli import app
from remoting import requests as rq
from remoting.bodies import DataVersion, TopicConfig
from remoting.codec import FrameDecoder, encode
from remoting.codes import ResponseCode
from remoting.command import response_to
from remoting.mqjson import MessageQueue, dumps
from remoting.transport import connect
from tests.mqadmin_procs import CLI, cli_env, mqadmin, procs_mentioning, running_cluster, stop_all
from tests.procs import NamesrvProcess

ROOT = Path(__file__).resolve().parent.parent
pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess  # imported here, pytest would not rewrite the plugin


def one_line(done: subprocess.CompletedProcess[str], rc: int) -> str:
    assert done.returncode == rc, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two NameServers and one broker group, shared by the tests that only read from it."""
    base = tmp_path_factory.mktemp("second-look")
    with running_cluster(base / "c", "--namesrvs", "2", "--brokers", "1", "--topics", "LookTopic",
                         env=cli_env(base / "state")) as info:
        yield info


# --------------------------------------------------------------------------- 4: restartNamesrv's words


def test_restart_namesrv_says_what_its_warm_restart_restored(tmp_path: Path) -> None:
    help_text = mqadmin("restartNamesrv", "-h").stdout
    assert "start empty" not in help_text and "route snapshot" in help_text
    env = cli_env(tmp_path / "state")
    state = tmp_path / "c"
    with running_cluster(state, "--namesrvs", "1", "--brokers", "1", env=env) as info:
        snapshot = state / "namesrv-0" / "routeSnapshot.msgpack"
        deadline = time.monotonic() + 30
        while not snapshot.exists() and time.monotonic() < deadline:  # written within a second of a change
            time.sleep(0.05)
        assert snapshot.exists()
        assert mqadmin("killNamesrv", "-i", "0", "--signal", "TERM", "--dir", str(state), env=env).returncode == 0
        done = mqadmin("restartNamesrv", "-i", "0", "--dir", str(state), env=env)
        assert done.returncode == 0, done.stderr
        assert "1 broker(s) and " in done.stdout and "restored from its route snapshot" in done.stdout, done.stdout
        # What it says is true: the route is there at once, long before the broker's next registration (30 s).
        route = mqadmin("topicRoute", "-t", "TBW102", "-n", info["namesrvAddr"].split(";")[0], "--json", env=env)
        assert route.returncode == 0 and json.loads(route.stdout)["brokerDatas"], route.stderr
        # Without a snapshot (removed while it is down), it says so instead.
        assert mqadmin("killNamesrv", "-i", "0", "--dir", str(state), env=env).returncode == 0
        snapshot.unlink()
        done = mqadmin("restartNamesrv", "-i", "0", "--dir", str(state), env=env)
        assert done.returncode == 0 and "no routes restored" in done.stdout, done.stdout


# --------------------------------------------------------------------------- 5, 11: checked before anything is sent

#: Every command whose -b is a broker address, with the other options it needs.
BROKER_ADDR_COMMANDS = {
    "updateTopic": ["-t", "T"], "brokerStatus": [], "getBrokerConfig": [], "updateBrokerConfig": ["-k", "a", "-v", "b"],
    "updateTopicPerm": ["-t", "T", "-p", "6"], "updateSubGroup": ["-g", "G"], "deleteSubGroup": ["-g", "G"],
    "consumerConnection": ["-g", "G"], "resetOffsetByTime": ["-g", "G", "-t", "T", "-s", "now", "-q", "0"],
    "brokerFault": [],
}


def test_every_broker_address_option_is_listed_here() -> None:
    """A command added later with a host:port -b is covered by the test below (or this fails)."""
    found = set()
    for name, cmd in typer.main.get_command(app).commands.items():  # type: ignore[attr-defined]
        for param in cmd.params:
            if "-b" in getattr(param, "opts", ()) and "host:port" in (param.help or ""):
                found.add(name)
    assert found == set(BROKER_ADDR_COMMANDS)


@pytest.mark.parametrize("command", sorted(BROKER_ADDR_COMMANDS))
def test_a_broker_address_without_port_is_a_usage_error(command: str) -> None:
    for value, why in (("127.0.0.1", "has no port"), ("127.0.0.1:70000", "70000 is not 1-65535")):
        line = one_line(mqadmin(command, *BROKER_ADDR_COMMANDS[command], "-b", value, "-n", "127.0.0.1:1"), 2)
        assert line.startswith("mqadmin: Invalid value for -b:") and why in line, line


def test_reject_code_is_checked_locally() -> None:
    for code in ("70000", "-40000"):  # nothing listens on port 1: a remote check would fail otherwise
        line = one_line(mqadmin("brokerFault", "-b", "127.0.0.1:1", "--reject", code), 2)
        assert "--reject" in line
    line = one_line(mqadmin("brokerFault", "-b", "127.0.0.1:1", "--latency", "-5"), 2)
    assert "--latency" in line


# --------------------------------------------------------------------------- 7: a reader that goes away


@pytest.mark.parametrize("args", [["getNamesrvConfig"], ["topicList"], ["getNamesrvConfig", "--json"], ["help"],
                                  ["watch", "--once"]])
def test_output_into_a_closed_pipe_exits_0_quietly(cluster: dict[str, Any], args: list[str], tmp_path: Path) -> None:
    env = cli_env(tmp_path / "state", NAMESRV_ADDR=cluster["namesrvAddr"])
    command = " ".join([*(f"'{c}'" for c in CLI), *args])
    # The reader is gone before the first write (true reads nothing), so every write meets a closed pipe.
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {{ sleep 1; exec {command}; }} | true"],
                          capture_output=True, text=True, timeout=60, env=env, check=False)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_repeating_command_into_head_exits_0_quietly(cluster: dict[str, Any], tmp_path: Path) -> None:
    env = cli_env(tmp_path / "state", NAMESRV_ADDR=cluster["namesrvAddr"])
    command = " ".join([*(f"'{c}'" for c in CLI), "clusterList", "-i", "1"])  # never ends unless its reader goes
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {command} | head -1"], capture_output=True, text=True,
                          timeout=60, env=env, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("#Cluster Name") and len(done.stdout.splitlines()) == 1


# --------------------------------------------------------------------------- 8: Ctrl-C


def _interrupt(args: list[str], ready: str, env: dict[str, str], stream: str = "stderr",
               timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """Run ``mqadmin args``, send SIGINT once ``ready`` appears on ``stream``, and collect the rest."""
    proc = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        pipe = proc.stderr if stream == "stderr" else proc.stdout
        assert pipe is not None
        seen = ""
        deadline = time.monotonic() + timeout
        while ready not in seen and time.monotonic() < deadline:
            line = pipe.readline()
            if not line and proc.poll() is not None:
                break
            seen += line
        assert ready in seen, seen[-3000:]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        if stream == "stderr":
            err = seen + err
        else:
            out = seen + out
        return subprocess.CompletedProcess(args, proc.returncode, out, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_ctrl_c_during_fanout_start_is_130_with_one_line(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "state", TMPDIR=str(tmp_path), PYTHONPATH=str(ROOT))
    try:
        done = _interrupt(["fanout", "--start", "--no-spark", "--producers", "4", "--duration", "120", "--rate", "2"],
                          "load starts in", env)
        assert done.returncode == 130, done.stderr[:3000] + "\n...\n" + done.stderr[-1500:]
        errors = [line for line in done.stderr.splitlines() if not line.startswith("[fanout]")]
        assert errors == ["mqadmin: interrupted; every process the run started was stopped"], done.stderr
        assert "Traceback" not in done.stderr
        assert procs_mentioning(str(tmp_path)) == []
    finally:
        for p in procs_mentioning(str(tmp_path)):
            p.kill()


def test_interrupted_scenario_writes_its_report_so_far(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "state", TMPDIR=str(tmp_path), PYTHONPATH=str(ROOT))
    report = tmp_path / "r.json"
    try:
        done = _interrupt(["scenario", "run", "broker-crash", "--report", str(report)], "t=", env)
        assert done.returncode == 130, done.stderr[:3000] + "\n...\n" + done.stderr[-1500:]
        last = done.stderr.splitlines()[-1]
        assert last.startswith("mqadmin: interrupted; every process the run started was stopped; "
                               "the run so far (t="), last
        assert f"marked interrupted) is in {report}" in last
        doc = json.loads(report.read_text())
        assert doc["interrupted"] == "interrupted" and doc["passed"] is False and doc["expectations"] == []
        assert doc["end"] > 0 and doc["sends"]["total"] > 0 and doc["actions"]
        assert procs_mentioning(str(tmp_path)) == []
    finally:
        for p in procs_mentioning(str(tmp_path)):
            p.kill()


def test_ctrl_c_in_cluster_rt_is_130(cluster: dict[str, Any]) -> None:
    done = _interrupt(["clusterRT", "-a", "2", "-i", "0.2", "-n", cluster["namesrvAddr"]], "broker-a", cli_env(),
                      stream="stdout", timeout=30)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr


def test_ctrl_c_while_the_cli_is_still_loading_is_130_quietly() -> None:
    """The SIGINT arrives exactly when mqadmin.cli imports Typer (seconds after Enter on a busy machine)."""
    at_import = ("import builtins, os, signal\n"
                 "real = builtins.__import__\n"
                 "def interrupting(name, *args, **kwargs):\n"
                 "    if name == 'typer':\n"
                 "        os.kill(os.getpid(), signal.SIGINT)\n"
                 "    return real(name, *args, **kwargs)\n"
                 "builtins.__import__ = interrupting\n")
    # The child's SIGINT disposition is set here, not inherited: `make test` run as a background job
    # ignores SIGINT, and an ignored SIGINT stays ignored (as it should) in the child.
    done = subprocess.run([*CLI[:2], at_import + CLI[2], "clusterList"], capture_output=True, text=True,
                          timeout=60, check=False, env=cli_env(),
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "")


# --------------------------------------------------------------------------- 14: help COMMAND


def test_help_command_is_apaches_form() -> None:
    for words in (["updateTopic"], ["scenario", "run"], ["clusterList"]):
        via_help = mqadmin("help", *words)
        via_h = mqadmin(*words, "-h")
        assert via_help.returncode == 0 and via_help.stdout == via_h.stdout and via_help.stderr == ""
        assert via_help.stdout.startswith(f"Usage: mqadmin {' '.join(words)} ")
    listing = mqadmin("help")
    assert listing.returncode == 0 and listing.stdout == mqadmin().stdout and "updateTopic" in listing.stdout
    line = one_line(mqadmin("help", "noSuchCommand"), 2)
    assert "no such command 'noSuchCommand'" in line and "did you mean" not in line
    line = one_line(mqadmin("help", "clusterlist"), 2)  # the same suggestions as `mqadmin clusterlist`
    assert "no such command 'clusterlist' in mqadmin; did you mean 'clusterList'" in line
    assert "did you mean 'run'?" in one_line(mqadmin("help", "scenario", "rn"), 2)


def test_a_usage_error_points_to_the_commands_own_help() -> None:
    assert one_line(mqadmin("updateTopic", "-g", "G"), 2) == "mqadmin: No such option: -g (see mqadmin updateTopic -h)"
    assert one_line(mqadmin("scenario", "run"), 2).endswith("(see mqadmin scenario run -h)")
    assert one_line(mqadmin("noSuchCommand"), 2).endswith("(see mqadmin -h)")


# --------------------------------------------------------------------------- 12: accepted but odd


def test_stop_twice_and_with_nothing_started_exits_0(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "state")
    never = tmp_path / "never"
    done = mqadmin("stop", "--dir", str(never), env=env)
    assert (done.returncode, done.stderr) == (0, "") and done.stdout == f"nothing is running: no local cluster in {never}\n"
    state = tmp_path / "c"
    with running_cluster(state, "--namesrvs", "1", "--brokers", "0", env=env) as info:
        assert mqadmin("killNamesrv", "--dir", str(state), env=env).returncode == 0  # died on its own
        done = mqadmin("stop", "--dir", str(state), env=env)
        assert done.returncode == 0 and done.stdout.startswith("nothing is running: every process"), done.stdout
        assert not procs_mentioning(str(state)) and info["procs"]
        assert mqadmin("stop", "--dir", str(state), env=env).stdout.startswith("nothing is running: no local cluster")
    stop_all(state)


def test_start_hint_is_safe_to_paste(cluster: dict[str, Any]) -> None:
    """The try: line lists commands apart: pasted whole, a | or ; would run killBroker with the rest.
    (The summary ``mqadmin start`` prints, for the cluster the fixture started with --json.)"""
    from rich.console import Console

    from mqadmin.commands.localcluster import summary
    from mqadmin.localcluster.state import ClusterState

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(summary(ClusterState.load(Path(cluster["dir"])), Path(cluster["dir"])))
    hint = next(line for line in console.export_text().splitlines() if line.startswith("try:"))
    assert "|" not in hint and ";" not in hint and "killBroker -b broker-a --dir" in hint, hint


def test_start_without_brokers_says_what_it_started(tmp_path: Path) -> None:
    state = tmp_path / "c"
    try:
        done = mqadmin("start", "--namesrvs", "1", "--brokers", "0", "--dir", str(state), env=cli_env(tmp_path / "s"))
        assert done.returncode == 0, done.stderr
        first = done.stdout.splitlines()[0] if "started" in done.stdout.splitlines()[0] else next(
            line for line in done.stdout.splitlines() if line.startswith("started"))
        assert first.startswith("started 1 NameServer(s) and no broker (--brokers 0)") and " is up" not in done.stdout
        hint = next(line for line in done.stdout.splitlines() if line.startswith("try:"))
        assert "killBroker" not in hint and "topicRoute" not in hint and "getNamesrvConfig" in hint, hint
    finally:
        stop_all(state)


def test_empty_values_are_refused_before_sending() -> None:
    for args, option in ((["sendMessage", "-t", "T", "-p", ""], "-p"),
                         (["updateKvConfig", "-s", "", "-k", "", "-v", ""], "-s"),
                         (["updateKvConfig", "-s", "ns", "-k", " ", "-v", "v"], "-k"),
                         (["updateKvConfig", "-s", "ns", "-k", "k", "-v", ""], "-v"),
                         (["deleteKvConfig", "-s", "ns", "-k", ""], "-k"),
                         (["wipeWritePerm", "-b", ""], "-b")):
        line = one_line(mqadmin(*args, "-n", "127.0.0.1:1"), 2)  # nothing listens there: refused before sending
        assert line.startswith(f"mqadmin: Invalid value for {option}:"), line
    assert "body length is zero" in mqadmin("sendMessage", "-t", "T", "-p", "", "-n", "127.0.0.1:1").stderr


def test_wipe_write_perm_of_an_unknown_broker_warns(cluster: dict[str, Any]) -> None:
    ns = cluster["namesrvAddr"]
    done = mqadmin("wipeWritePerm", "-b", "nosuchbroker", "-n", ns)
    assert done.returncode == 1
    lines = done.stdout.splitlines()  # Apache's lines, one per NameServer, as they are
    assert lines == [f"wipe write perm of broker[nosuchbroker] in name server[{a}] OK, 0" for a in ns.split(";")]
    assert one_line(done, 1) == (f"mqadmin: no NameServer knows broker nosuchbroker (asked {ns.replace(';', ', ')}): "
                                 "no topic changed (clusterList shows the broker names)")
    done = mqadmin("addWritePerm", "-b", "broker-a", "-n", ns)  # a known broker: no warning
    counts = [int(line.rsplit("OK, ", 1)[1]) for line in done.stdout.splitlines()]
    assert done.returncode == 0 and done.stderr == "" and len(counts) == 2 and min(counts) > 0, done.stdout


# --------------------------------------------------------------------------- 13: per-server lines


def test_per_server_failures_are_result_lines_on_stdout(cluster: dict[str, Any]) -> None:
    live = cluster["namesrvAddr"].split(";")[0]
    both = f"{live};127.0.0.1:1"
    for args, ok in ((["updateKvConfig", "-s", "ns", "-k", "k", "-v", "v"], f"success. [{live}]"),
                     (["deleteKvConfig", "-s", "ns", "-k", "k"], f"success. [{live}]"),
                     (["getNamesrvConfig"], f"============{live}============"),
                     (["updateNamesrvConfig", "-k", "enableTopicList", "-v", "true"], f"success! [{live}]"),
                     (["addWritePerm", "-b", "broker-a"], f"name server[{live}] OK, ")):
        done = mqadmin(*args, "-n", both, "--timeout", "2")
        # a server failed: exit 1, and the summary line on stderr (README, docs/mqadmin.md)
        assert one_line(done, 1) == "mqadmin: 1 of 2 NameServers failed: 127.0.0.1:1", (args, done.stderr)
        lines = done.stdout.splitlines()
        assert any(ok in line for line in lines), (args, done.stdout)
        assert "127.0.0.1:1: cannot connect: Connection refused" in lines, (args, done.stdout)  # ADDR: what went wrong
    # One server named by the user failing is the command's error: one mqadmin: line on stderr.
    for args in (["brokerStatus"], ["getBrokerConfig"], ["updateTopic", "-t", "T"], ["updateSubGroup", "-g", "G"]):
        done = mqadmin(*args, "-b", "127.0.0.1:1", "-n", live, "--timeout", "2")
        assert one_line(done, 1) == "mqadmin: cannot connect to 127.0.0.1:1: Connection refused", args
        assert "cannot connect" not in done.stdout


# --------------------------------------------------------------------------- 15: Apache's layout off a terminal


def test_piped_tables_are_plain_and_ignore_columns(cluster: dict[str, Any], tmp_path: Path) -> None:
    ns = cluster["namesrvAddr"]
    for args in (["topicRoute", "-t", "LookTopic", "-l"], ["topicStatus", "-t", "LookTopic"],
                 ["clusterList", "-m"], ["topicList", "-c"]):
        narrow = mqadmin(*args, "-n", ns, env=cli_env(tmp_path, columns=30), in_process=False)
        wide = mqadmin(*args, "-n", ns, env=cli_env(tmp_path, columns=300), in_process=False)
        assert narrow.returncode == 0 and wide.returncode == 0, (args, narrow.stderr)
        assert narrow.stdout == wide.stdout, args  # $COLUMNS changes nothing off a terminal
        lines = narrow.stdout.splitlines()
        assert lines[0].startswith("#") and "─" not in narrow.stdout and "\x1b[" not in narrow.stdout, narrow.stdout
        assert all(line == line.rstrip() for line in lines)
    route = mqadmin("topicRoute", "-t", "LookTopic", "-l", "-n", ns, env=cli_env(tmp_path), in_process=False)
    header, row = route.stdout.splitlines()[:2]
    assert header.split() == ["#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"]
    assert row.split("  ")[0] == "DefaultCluster" and "broker-a" in row  # columns two spaces apart


def test_broker_status_piped_is_apaches_lines(cluster: dict[str, Any], tmp_path: Path) -> None:
    broker = next(p["addr"] for p in cluster["procs"] if p["kind"] == "broker")
    done = mqadmin("brokerStatus", "-b", broker, env=cli_env(tmp_path, columns=40), in_process=False)
    assert done.returncode == 0, done.stderr
    fields = dict(line.split(": ", 1) for line in done.stdout.splitlines())  # awk -F': ' works
    assert fields[f"{'brokerVersionDesc':<32}"] == "V5_3_3"
    assert [k.rstrip() for k in fields] == sorted(k.rstrip() for k in fields)


# --------------------------------------------------------------------------- issue 23: what Java's tools print


async def _serve_like_a_497_broker(stream: trio.SocketStream) -> None:
    """GET_CONSUME_STATS answered as a 4.9.7 broker does: an offset table without ``pullOffset``."""
    decoder = FrameDecoder()
    async with stream:
        async for data in stream:
            for req in decoder.feed(data):
                table = {MessageQueue("T497", "broker-497", 0): {"brokerOffset": 10, "consumerOffset": 7,
                                                                 "lastTimestamp": 0}}
                body = dumps({"consumeTps": 0.0, "offsetTable": table})
                await stream.send_all(encode(response_to(req, ResponseCode.SUCCESS, body=body)))


async def test_consumer_progress_of_a_497_broker_shows_no_negative_inflight(namesrv: NamesrvProcess) -> None:
    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(functools.partial(trio.serve_tcp, _serve_like_a_497_broker, 0,
                                                            host="127.0.0.1"))
        broker = f"127.0.0.1:{listener.socket.getsockname()[1]}"
        async with connect(namesrv.addr) as c:
            resp = await c.invoke(rq.register_broker(
                cluster="DefaultCluster", broker_name="broker-497", broker_addr=broker, broker_id=0,
                topics=[TopicConfig("T497", 1, 1, 6), TopicConfig("%RETRY%G497", 1, 1, 6)],
                data_version=DataVersion(1, 1)))
            assert resp.code == 0
            done = await trio.to_thread.run_sync(functools.partial(
                mqadmin, "consumerProgress", "-g", "G497", "-n", namesrv.addr, "--json"))
            doc = json.loads(done.stdout)
            assert [(q["diff"], q["inflight"]) for q in doc["queues"]] == [(3, None)] and doc["inflightTotal"] == 0
            done = await trio.to_thread.run_sync(functools.partial(
                mqadmin, "consumerProgress", "-g", "G497", "-n", namesrv.addr))
            row = next(line for line in done.stdout.splitlines() if line.startswith("T497"))
            assert row.split()[-3:-1] == ["3", "-"], row  # #Diff 3, #Inflight unknown: not 0 - 7 = -7
        nursery.cancel_scope.cancel()


def test_cluster_list_hours_of_an_empty_store_are_javas(namesrv: NamesrvProcess,
                                                       start_broker: Callable[..., BrokerProcess]) -> None:
    """A broker of its own: the shared cluster's brokers have stored clusterRT's messages by now."""
    broker = start_broker("empty", namesrvAddr=namesrv.addr, brokerName="broker-empty")
    deadline = time.monotonic() + 30
    rows: list[dict[str, Any]] = []
    while not rows and time.monotonic() < deadline:
        rows = json.loads(mqadmin("clusterList", "--json", "-n", namesrv.addr).stdout)["brokers"]
    assert [r["addr"] for r in rows] == [broker.addr], rows
    since_epoch = time.time() / 3600  # nothing stored yet: earliestMessageTimeStamp -1, (now + 1 ms) / 3.6e6
    assert since_epoch - 0.1 < rows[0]["hours"] < since_epoch + 0.1, rows


# --------------------------------------------------------------------------- 6, 10: scenario files

SCENARIO = """\
name: check
duration: 30
{extra}timeline:
  - at: 1
    kill_broker: broker-a
{timeline}expect:
  - max_failed_sends: 10
"""


def _scenario_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    line = one_line(mqadmin("scenario", "run", str(path)), 2)
    prefix = f"mqadmin: {path}:"
    assert line.startswith(prefix), line
    return line.removeprefix(prefix)


def test_scenario_unknown_top_field_comes_first(tmp_path: Path) -> None:
    no_expect = "name: check\nduration: 30\nlaod:\n  producers: 2\n"  # a typo, and no expect either
    assert _scenario_error(tmp_path, no_expect).startswith("3: laod: unknown field (did you mean load? expected one of:")


def test_scenario_timeout_shorter_than_duration_is_refused(tmp_path: Path) -> None:
    line = _scenario_error(tmp_path, SCENARIO.format(extra="timeout: 3\n", timeline=""))
    assert line.startswith("3: timeout: must be longer than duration (30 s), got 3"), line
    assert _scenario_error(tmp_path, SCENARIO.format(extra="timeout: 30\n", timeline="")).startswith("3: timeout:")


def test_scenario_wait_until_says_what_to_write(tmp_path: Path) -> None:
    wrong = "  - wait_until: {route_excludes: broker-a}\n    timeout: 5\n"
    line = _scenario_error(tmp_path, SCENARIO.format(extra="", timeline=wrong))
    assert "condition: is required" not in line
    assert line == ("6: timeline[2].wait_until: needs its condition: write `wait_until: route_excludes` (or "
                    "route_includes, namesrvs_agree, namesrvs_disagree) with `broker: NAME` beside it")


def test_scenario_number_out_of_range_says_so(tmp_path: Path) -> None:
    for value in ("1e9", "1000000000", "1.0e+9"):  # YAML 1.1 reads 1e9 as text: it is a number all the same
        line = _scenario_error(tmp_path, SCENARIO.format(extra="", timeline="").replace("duration: 30", f"duration: {value}"))
        assert line == "2: duration: must be >= 1 and <= 600, got 1e+09", line
    line = _scenario_error(tmp_path, SCENARIO.format(extra="", timeline="").replace("duration: 30", "duration: soon"))
    assert line == "2: duration: must be a number, got 'soon'"
