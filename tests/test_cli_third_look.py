"""Issue 29, a newcomer's third look: the README's heal line, the summary line, names checked before
sending, Apache's layout when piped, health checks, one error prefix, ``make run`` twice.

The headline case of each item runs the console script a user types (``.venv/bin/mqadmin``) as a real
process against a real local cluster on 127.0.0.1, started as the README starts it (no ``--dir``: the
state is under ``$XDG_STATE_HOME``). A rule that applies to every command is then checked on every
command through the same entry code in-process (a process each would add minutes of interpreter
starts on a loaded machine).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from mqadmin.cli import app
from mqadmin.localcluster.state import ClusterState
from tests.mqadmin_procs import (
    assert_headers_start_at_values,
    cli_env,
    mqadmin,
    mqadmin_on_terminal,
    mqadmin_script,
    stop_all,
)
from tests.test_mqadmin_broker_admin import PRODUCER_GROUP, Client

ROOT = Path(__file__).resolve().parent.parent
TOPIC, GROUP = "LookTopic", "LookCG"


class Cluster:
    """The README's cluster with short timeouts, started with the console script and no ``--dir``."""

    def __init__(self, home: Path) -> None:
        self.env = cli_env(home)
        self.dir = home / "mqadmin" / "cluster"
        self.start_out = ""

    @property
    def state(self) -> ClusterState:
        return ClusterState.load(self.dir)

    @property
    def namesrvs(self) -> list[str]:
        return [p.addr for p in self.state.namesrvs]

    def addr(self, name: str) -> str:
        return next(p.addr for p in self.state.procs if p.name == name)

    def script(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return mqadmin_script(*args, env=dict(self.env, **env))

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return mqadmin(*args, env=self.env)

    def brokers_on(self, namesrv: str) -> set[str]:
        done = self.run("clusterList", "-n", namesrv, "--json")
        return {r["brokerName"] for r in json.loads(done.stdout)["brokers"]} if done.stdout else set()

    def wait(self, what: str, check: Callable[[], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.3)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("third-look"))
    try:
        done = c.script("start", "--register-period", "1000", "--broker-timeout", "6000", "--scan-interval", "500",
                        "--topics", TOPIC)
        assert done.returncode == 0, done.stderr
        c.start_out = done.stdout
        yield c
    finally:
        stop_all(c.dir)


def one_line(done: subprocess.CompletedProcess[str], rc: int) -> str:
    assert done.returncode == rc, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


# --------------------------------------------------------------------------- 1: the README's heal line


def test_the_readmes_partition_heals_by_name(cluster: Cluster) -> None:
    """The README's example: broker-a partitioned from the first NameServer, which drops it; healing it by
    name must find it through the other NameServer, not give up on the first one asked."""
    first, second = cluster.namesrvs
    assert cluster.script("brokerFault", "-b", "broker-a", "--partition", first).returncode == 0
    try:
        cluster.wait("the first NameServer to drop broker-a", lambda: cluster.brokers_on(first) == {"broker-b"})
        done = cluster.script("brokerFault", "-b", "broker-a", "--heal", "all")
        assert done.returncode == 0, done.stderr
        assert "heal applied" in done.stdout  # through the cluster's fault proxy: cut off from none now
        assert [line.split()[-1] for line in done.stdout.splitlines() if line.startswith("partitioned from")] == ["-"]
    finally:
        cluster.run("brokerFault", "-b", "broker-a", "--clear")
    cluster.wait("broker-a back on the first NameServer", lambda: "broker-a" in cluster.brokers_on(first))
    # A name nobody knows: the error names every NameServer asked and what it knew, and the local cluster.
    line = one_line(cluster.script("brokerFault", "-b", "broker-x"), 1)
    assert line == (f"mqadmin: broker broker-x is not known to any NameServer (asked {first}: brokers broker-a, "
                    f"broker-b; {second}: brokers broker-a, broker-b); nor is it in the local cluster in "
                    f"{cluster.dir} (brokers: broker-a, broker-b)")


def test_a_broker_every_namesrv_dropped_is_found_in_the_local_clusters_record(cluster: Cluster) -> None:
    for ns in cluster.namesrvs:
        assert cluster.run("brokerFault", "-b", "broker-b", "--partition", ns).returncode == 0
    try:
        for ns in cluster.namesrvs:
            cluster.wait(f"{ns} to drop broker-b", lambda ns=ns: cluster.brokers_on(ns) == {"broker-a"})
        done = cluster.script("brokerFault", "-b", "broker-b", "--heal", "all")
        assert done.returncode == 0 and cluster.addr("broker-b-0") in done.stdout, done.stderr
    finally:
        cluster.run("brokerFault", "-b", "broker-b", "--clear")
    for ns in cluster.namesrvs:
        cluster.wait(f"broker-b back on {ns}", lambda ns=ns: "broker-b" in cluster.brokers_on(ns))


def test_send_and_consume_by_broker_name_ask_every_namesrv(cluster: Cluster) -> None:
    line = one_line(cluster.run("sendMessage", "-t", TOPIC, "-p", "x", "-b", "broker-z"), 1)
    assert line.startswith(f"mqadmin: no NameServer routes topic {TOPIC} to broker broker-z (asked ")
    assert all(ns in line for ns in cluster.namesrvs)
    line = one_line(cluster.run("consumeMessage", "-t", TOPIC, "-b", "broker-z"), 1)
    assert "no NameServer routes topic" in line


# --------------------------------------------------------------------------- 2: the summary line


def test_a_partial_failure_ends_with_the_summary_line_on_stderr(cluster: Cluster) -> None:
    live = cluster.namesrvs[0]
    both = f"{live};127.0.0.1:1"
    done = cluster.script("updateKvConfig", "-s", "ns", "-k", "k", "-v", "v", "-n", both, "--timeout", "2")
    assert one_line(done, 1) == "mqadmin: 1 of 2 NameServers failed: 127.0.0.1:1"
    assert "127.0.0.1:1: cannot connect: Connection refused" in done.stdout.splitlines()
    # Every command that writes to several servers: the same rule.
    for args in (["deleteKvConfig", "-s", "ns", "-k", "k"], ["updateNamesrvConfig", "-k", "enableTopicList", "-v", "true"],
                 ["getNamesrvConfig"], ["addWritePerm", "-b", "broker-a"], ["wipeWritePerm", "-b", "broker-zz"],
                 ["updateTopic", "-t", "SumT", "-c", "DefaultCluster", "-o", "true"],
                 ["deleteTopic", "-t", "SumT", "-c", "DefaultCluster"],
                 ["deleteSubGroup", "-g", "SumG", "-c", "DefaultCluster"]):
        line = one_line(cluster.run(*args, "-n", both, "--timeout", "2"), 1)
        assert line.startswith("mqadmin: 1 of 2 NameServers failed: 127.0.0.1:1"), (args, line)
    # A broker of a cluster that does not answer: "brokers", with its address. Hung by its fault switch, it
    # keeps registering, so the NameServers route it however long the commands take on a busy machine.
    hung = cluster.addr("broker-b-0")
    assert cluster.run("brokerFault", "-b", "broker-b", "--hang").returncode == 0
    try:
        for args in (["brokerStatus", "-c", "DefaultCluster"], ["getBrokerConfig", "-c", "DefaultCluster"],
                     ["updateBrokerConfig", "-c", "DefaultCluster", "-k", "brokerPermission", "-v", "6"],
                     ["clusterList"]):
            line = one_line(cluster.run(*args, "--timeout", "1"), 1)
            assert line == f"mqadmin: 1 of 2 brokers failed: {hung}", (args, line)
    finally:
        cluster.run("brokerFault", "-b", hung, "--resume")


# --------------------------------------------------------------------------- 3, 4: names checked before sending

#: Every command with a topic or group name, with the other options it needs (nothing listens on port 1:
#: a command that sent anything would fail with status 1, not 2).
NAME_COMMANDS: dict[str, list[str]] = {
    "topicRoute": [], "updateTopic": ["-c", "C"], "deleteTopic": ["-c", "C"], "topicStatus": [],
    "topicClusterList": [], "updateTopicPerm": ["-p", "6", "-c", "C"], "sendMessage": ["-p", "x"],
    "consumeMessage": [], "consumerProgress": [], "updateSubGroup": ["-c", "C"], "deleteSubGroup": ["-c", "C"],
    "consumerConnection": [], "producerConnection": [], "resetOffsetByTime": ["-s", "now"], "statsAll": [],
    "watch": ["--once"],
}


def _name_options() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, cmd in typer.main.get_command(app).commands.items():  # type: ignore[attr-defined]
        for param in cmd.params:
            opts = getattr(param, "opts", [])
            if "-t" in opts or "-g" in opts:
                found.setdefault(name, []).append(opts[0])
    return found


def test_every_command_with_a_name_option_is_listed_here() -> None:
    assert set(_name_options()) == set(NAME_COMMANDS)


def test_deleting_a_bad_name_is_refused_before_anything_is_sent(cluster: Cluster) -> None:
    """The issue's two: refused locally (status 2) instead of sent to every broker and NameServer."""
    line = one_line(cluster.script("deleteTopic", "-t", "a/b", "-c", "DefaultCluster"), 2)
    assert line.startswith("mqadmin: Invalid value for -t: topic 'a/b' must be 1-127 characters of ")
    line = one_line(cluster.script("deleteSubGroup", "-g", "../g", "-c", "DefaultCluster"), 2)
    assert line.startswith("mqadmin: Invalid value for -g: group '../g' must be 1-255 characters of ")


@pytest.mark.parametrize("command", sorted(NAME_COMMANDS))
def test_every_name_is_checked_before_sending(command: str) -> None:
    options = _name_options()[command]
    for option in options:
        valid = [arg for other in options if other != option for arg in (other, "Good")]
        line = one_line(mqadmin(command, *NAME_COMMANDS[command], *valid, option, "../x", "-n", "127.0.0.1:1"), 2)
        assert line.startswith(f"mqadmin: Invalid value for {option}: "), (command, line)


def test_the_option_named_is_the_one_the_user_gave(cluster: Cluster) -> None:
    line = one_line(cluster.script("updateSubGroup", "-g", "../g", "-c", "DefaultCluster"), 2)
    assert line.startswith("mqadmin: Invalid value for -g: group '../g'"), line  # not -p, which was not given
    line = one_line(cluster.script("updateSubGroup", "--groupName", "../g", "-c", "DefaultCluster"), 2)
    assert line.startswith("mqadmin: Invalid value for --groupName: "), line
    line = one_line(mqadmin("topicRoute", "--topic=a/b", "-n", "127.0.0.1:1"), 2)
    assert line.startswith("mqadmin: Invalid value for --topic: "), line
    line = one_line(mqadmin("brokerFault", "-b", "127.0.0.1:1", "--hang", "--clear"), 2)
    assert line.startswith("mqadmin: Invalid value for --hang/--clear: give at most one of "), line
    line = one_line(mqadmin("networkFault", "--partition", "--heal", env=cluster.env), 2)
    assert line.startswith("mqadmin: Invalid value for --partition/--heal: give at most one of "), line
    line = one_line(mqadmin("updateSubGroup", "-g", "G", "-p", "{", "-b", "127.0.0.1:1"), 2)
    assert line.startswith("mqadmin: Invalid value for -p: not JSON"), line


# --------------------------------------------------------------------------- 5: Apache's layout when piped


@pytest.fixture(scope="module")
def client(cluster: Cluster) -> Iterator[Client]:
    """A consumer of GROUP on TOPIC and a producer, connected to both masters: the connection tables have rows."""
    c = Client([cluster.addr("broker-a-0"), cluster.addr("broker-b-0")])
    try:
        c.heartbeat(topic=TOPIC, group=GROUP)
        yield c
    finally:
        c.close()


def test_every_table_command_piped_puts_each_header_where_its_values_start(cluster: Cluster, client: Client) -> None:
    assert cluster.run("updateKvConfig", "-s", "LookNs", "-k", "k", "-v", "v").returncode == 0
    assert cluster.run("updateSubGroup", "-g", GROUP, "-c", "DefaultCluster").returncode == 0
    assert cluster.run("sendMessage", "-t", TOPIC, "-p", "one").returncode == 0
    assert_headers_start_at_values(cluster.start_out)  # start: the processes' table
    piped = cluster.script("clusterList")  # the issue's own case, through a real pipe
    assert piped.returncode == 0, piped.stderr
    assert_headers_start_at_values(piped.stdout, min_rows=2)
    for args in (["clusterList", "-m"], ["status"], ["topicRoute", "-t", TOPIC, "-l"], ["topicList", "-c"],
                 ["topicStatus", "-t", TOPIC], ["brokerFault", "-b", "broker-a"], ["sendMessage", "-t", TOPIC, "-p", "x"],
                 ["getKvConfig", "-s", "LookNs"], ["resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "now"],
                 ["consumerProgress"], ["consumerProgress", "-g", GROUP],  # after the reset: offsets to show
                 ["consumerConnection", "-g", GROUP], ["producerConnection", "-g", PRODUCER_GROUP, "-t", TOPIC],
                 ["statsAll"], ["networkFault"], ["networkFault", "-b", "broker-a", "--latency", "1"],
                 ["networkFault", "--heal"],
                 ["watch", "--once", "-t", TOPIC]):
        done = cluster.run(*args)
        assert done.returncode == 0, (args, done.stderr)
        assert_headers_start_at_values(done.stdout, header_starts=("#", "@")), args


def test_a_narrow_terminal_says_which_columns_it_hid(cluster: Cluster) -> None:
    done = mqadmin_on_terminal("clusterList", env=cluster.env, columns=80)
    assert done.returncode == 0, done.stderr
    table, note = done.stdout.split("not shown, ", 1)
    note = " ".join(note.split())
    assert note.startswith("80 columns too narrow: ") and "#Timer(Progress)" in note and "#Version" in note
    assert "(--json or a pipe shows all)" in note
    assert "#Timer(Progress)" not in table and all(len(line) <= 80 for line in done.stdout.splitlines())
    wide = mqadmin_on_terminal("clusterList", env=cluster.env, columns=250)
    assert wide.returncode == 0 and "not shown" not in wide.stdout and "#Timer(Progress)" in wide.stdout


# --------------------------------------------------------------------------- 7: one error prefix


def test_a_missing_scenario_has_the_common_prefix_and_points_to_scenario_list() -> None:
    line = one_line(mqadmin_script("scenario", "run", "nosuch"), 2)
    assert line == ("mqadmin: no such scenario: 'nosuch' is neither a file nor a shipped scenario "
                    "(mqadmin scenario list shows the shipped ones)")
    line = one_line(mqadmin("fanout", "--scenario", "nosuch", "--no-spark", "-n", "127.0.0.1:1"), 2)
    assert line.startswith("mqadmin: no such scenario: 'nosuch'")


@pytest.fixture
def http_peer() -> Iterator[str]:
    """A real TCP server on loopback that answers like an HTTP server to anything, then closes."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        server.close()


def test_a_peer_that_is_not_rocketmq_is_named_as_such(http_peer: str) -> None:
    line = one_line(mqadmin_script("clusterList", "-n", http_peer), 1)
    assert line == f"mqadmin: {http_peer}: not a RocketMQ server: it answered 'HTTP/1.1 400 Bad Request'"
    assert "frame length" not in line


# --------------------------------------------------------------------------- 9: make run twice


def test_make_run_again_while_it_runs_says_so_and_succeeds(cluster: Cluster) -> None:
    venv = Path(sys.executable).parent.parent
    # -o: the venv is installed already (its stamp may be older than pyproject.toml in a working copy)
    done = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "-o", f"{venv}/.installed", "run",
                           f"VENV={venv}"], capture_output=True, text=True, timeout=120, env=cluster.env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no make error noise
    assert f"the local cluster in {cluster.dir} is already running (2 NameServer(s), 2 broker(s)): nothing started" \
        in done.stdout
    assert f"export NAMESRV_ADDR='{';'.join(cluster.namesrvs)}'" in done.stdout
    assert ClusterState.load(cluster.dir).procs == cluster.state.procs  # nothing restarted


# --------------------------------------------------------------------------- 6: health checks (last: stops it)


def test_status_is_a_health_check(cluster: Cluster) -> None:
    assert cluster.script("status").returncode == 0
    assert cluster.run("killBroker", "-b", "broker-a", "--signal", "STOP").returncode == 0
    try:
        done = cluster.script("status")
        assert one_line(done, 1) == ("mqadmin: 1 of 5 processes of the local cluster are not running: "
                                     "broker-a-0 (paused (SIGSTOP))")
        assert "broker-a-0" in done.stdout  # the table is still printed
    finally:
        cluster.run("killBroker", "-b", "broker-a", "--signal", "CONT")
    proxy = cluster.state.fault_proxy
    assert proxy is not None
    os.kill(proxy.pid, signal.SIGKILL)  # the fault proxy is a process of the cluster too
    line = one_line(cluster.script("status"), 1)
    assert line == "mqadmin: 1 of 5 processes of the local cluster are not running: faultproxy (stopped)"
    # every process gone (a crash, a reboot): not healthy either, and it says how to start again
    for kill in (["killNamesrv", "-i", "0"], ["killNamesrv", "-i", "1"], ["killBroker", "-b", "broker-a"],
                 ["killBroker", "-b", "broker-b"]):
        assert cluster.run(*kill).returncode == 0, kill
    line = one_line(cluster.script("status"), 1)
    assert line.startswith("mqadmin: 5 of 5 processes of the local cluster are not running: namesrv-0 (stopped), ")
    assert line.endswith("mqadmin start starts it again)")  # as typed here: .venv/bin/mqadmin off PATH
