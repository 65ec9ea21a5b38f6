"""Apache's Java NameServer and brokers as local-cluster members: ``mqadmin start --namesrv-impl
toolkit,java:5.5.0 --broker-impl java:5.3.3,java:4.9.7 --slaves 1``, then every process fault the
runner has, and network faults through the fault proxy, on the Java processes.

One cluster for the module (JVM starts are the cost): NameServer 0 ours, NameServer 1 Java 5.5.0;
broker-a a Java 5.3.3 master and slave, broker-b a Java 4.9.7 master and slave, registering every
10 s (the fastest Java registers) with both NameServers through the fault proxy (each Java broker's
namesrvAddr names its paths). The tests run in order and each leaves every process running and every
path healed; the last one stops the cluster and looks for what is left.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from mqadmin.client import SyncAdminClient
from mqadmin.client.errors import AdminError
from tests.interop import harness_build
from tests.mqadmin_procs import cli_env, mqadmin, procs_mentioning, stop_all

TOPIC = "JavaLocalTopic"
START = ["--namesrv-impl", "toolkit,java:5.5.0", "--broker-impl", "java:5.3.3,java:4.9.7", "--slaves", "1",
         "--topics", TOPIC, "--register-period", "10000"]
IMPLS = {"namesrv-0": ("toolkit", None), "namesrv-1": ("java", "5.5.0"), "faultproxy": ("toolkit", None),
         "broker-a-0": ("java", "5.3.3"), "broker-a-1": ("java", "5.3.3"),
         "broker-b-0": ("java", "4.9.7"), "broker-b-1": ("java", "4.9.7")}


class JavaLocal:
    """The module's cluster: its directory and the commands run against it."""

    def __init__(self, directory: Path, env: dict[str, str], started: dict[str, Any]) -> None:
        self.dir = directory
        self.env = env
        self.addr = {p["name"]: p["addr"] for p in started["procs"]}
        self.namesrvs = [self.addr["namesrv-0"], self.addr["namesrv-1"]]

    def run(self, *args: str, ok: bool = True) -> Any:
        done = mqadmin(*args, env=self.env)
        assert (done.returncode == 0) == ok, (args, done.stdout, done.stderr)
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json").stdout)

    def procs(self, *, healthy: bool = True) -> dict[str, dict[str, Any]]:
        """``status --json``'s processes; ``healthy``: every one running, so status (a health check) exits 0;
        else it exits 1 with one line naming the processes that are not running."""
        done = self.run("status", "--json", ok=healthy)
        procs = {p["name"]: p for p in json.loads(done.stdout)["procs"]}
        down = [f"{name} ({p['state']})" for name, p in procs.items() if p["state"] != "running"]
        assert bool(down) != healthy, procs
        if down:
            assert done.returncode == 1 and done.stderr.count("\n") == 1 and ", ".join(down) in done.stderr
        return procs

    def route_addrs(self, namesrv: str, topic: str = "TBW102") -> dict[str, dict[int, str]]:
        """broker name -> {brokerId: addr} of a topic's route on one NameServer ({} when it has none)."""
        try:
            route = SyncAdminClient([namesrv], timeout=5.0).topic_route(topic)
        except AdminError:
            return {}
        return {b.broker_name: dict(b.broker_addrs) for b in route.broker_datas}

    def everywhere(self, holds: Callable[[dict[str, dict[int, str]]], bool], what: str,
                   timeout: float = 90.0, topic: str = "TBW102") -> None:
        """Until ``holds`` is true of the route on both NameServers (bounded; fails with ``what``)."""
        deadline = time.monotonic() + timeout
        while not all(holds(self.route_addrs(ns, topic)) for ns in self.namesrvs):
            assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}: " + \
                str([self.route_addrs(ns, topic) for ns in self.namesrvs])
            time.sleep(0.5)

    def heard_lately(self, namesrv: str, broker: str, within: float) -> bool:
        """Whether our NameServer ``namesrv`` routes ``broker`` (a process name) and heard it register in the
        last ``within`` seconds (``watch``'s lastHeard: code 9001, ours only)."""
        snap = self.json("watch", "--once", "-n", namesrv)
        row = next((b for b in snap["brokers"] if b["addr"] == self.addr[broker]), None)
        age = None if row is None else row["lastHeard"].get(namesrv)
        return age is not None and age < within

    def wait(self, holds: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while not holds():
            assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
            time.sleep(1.0)

    def stored(self, broker: str) -> int:
        """Messages of TOPIC on ``broker``'s master (the sum of its queues' max offsets)."""
        rows = self.json("topicStatus", "-t", TOPIC)["queues"]
        return sum(int(q["maxOffset"]) for q in rows if q["brokerName"] == broker)


@pytest.fixture(scope="module")
def java_local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaLocal]:
    try:
        harness_build.resolve_servers()  # normally done by `make test` before pytest: then a cache read
    except harness_build.HarnessBuildError as exc:
        pytest.fail(f"interop harness: {exc}", pytrace=False)
    base = tmp_path_factory.mktemp("java-local")
    env = cli_env(base)  # the cluster is the default one of this XDG_STATE_HOME: every command finds it
    directory = base / "mqadmin" / "cluster"
    try:
        done = mqadmin("start", *START, "--json", env=env)
        assert done.returncode == 0, done.stderr
        yield JavaLocal(directory, env, json.loads(done.stdout))
    finally:
        stop_all(directory)


def test_status_names_each_implementation_and_java_listens_on_loopback_only(java_local: JavaLocal) -> None:
    procs = java_local.procs()
    assert {name: (p["impl"], p["version"]) for name, p in procs.items()} == IMPLS
    assert all(p["state"] == "running" for p in procs.values()), procs
    table = java_local.run("status").stdout
    assert "#Impl" in table and "java 5.5.0" in table and "java 4.9.7" in table and "toolkit" in table
    for name, p in procs.items():
        listening = {f"{c.laddr.ip}:{c.laddr.port}" for c in psutil.Process(p["pid"]).net_connections("tcp")
                     if c.status == psutil.CONN_LISTEN}
        assert p["addr"] in listening, (name, listening)
        assert all(a.startswith("127.0.0.1:") for a in listening), (name, listening)
        if p["kind"] == "broker":  # Java's fast (VIP) channel, listenPort - 2, shown as a stub's is
            host, port = p["addr"].rsplit(":", 1)
            assert p["vipAddr"] == f"{host}:{int(port) - 2}" and p["vipAddr"] in listening, (name, p, listening)


def test_java_brokers_reach_every_namesrv_through_the_fault_proxy(java_local: JavaLocal) -> None:
    paths = {p["name"]: p for p in java_local.json("networkFault")["paths"]}
    assert len(paths) == 4 * 2  # each broker, slaves too, to each NameServer
    for broker in ("broker-a-0", "broker-a-1", "broker-b-0", "broker-b-1"):
        props = (java_local.dir / broker / "broker.properties").read_text()
        (line,) = [line for line in props.splitlines() if line.startswith("namesrvAddr=")]
        mine = [paths[f"{broker}.namesrv-{i}"] for i in (0, 1)]
        assert line == "namesrvAddr=" + ";".join(p["listen"] for p in mine), (broker, line)
        assert [p["upstream"] for p in mine] == java_local.namesrvs
        assert all(p["connections"] >= 1 for p in mine), mine  # the Java broker is connected through each


def test_cluster_list_and_watch_name_java_brokers_and_namesrvs(java_local: JavaLocal) -> None:
    rows = java_local.json("clusterList", "-n", java_local.namesrvs[1])["brokers"]
    seen = {(r["brokerName"], r["brokerId"]): (r["impl"], r["version"], r["reachable"]) for r in rows}
    assert seen == {("broker-a", 0): ("java 5.3.3", "V5_3_3", True), ("broker-a", 1): ("java 5.3.3", "V5_3_3", True),
                    ("broker-b", 0): ("java 4.9.7", "V4_9_7", True), ("broker-b", 1): ("java 4.9.7", "V4_9_7", True)}
    table = java_local.run("clusterList").stdout
    assert "#Impl" in table and "java 4.9.7" in table
    snap = java_local.json("watch", "--once", "-t", TOPIC)
    assert snap["errors"] == {}
    assert snap["impls"][java_local.namesrvs[0]] == "toolkit" and snap["impls"][java_local.namesrvs[1]] == "java 5.5.0"
    assert {b["addr"]: snap["impls"][b["addr"]] for b in snap["brokers"]} == {
        java_local.addr[name]: f"java {version}" for name, (_, version) in IMPLS.items() if name.startswith("broker")}
    assert all(b["agree"] for b in snap["brokers"]) and len(snap["brokers"]) == 4
    (topic,) = snap["topics"]
    assert topic["agree"] and all(sorted(r) == ["broker-a:RW-:8", "broker-b:RW-:8"] for r in topic["routes"].values())


def test_graceful_stop_then_restart_keeps_the_java_store(java_local: JavaLocal) -> None:
    sent = java_local.run("sendMessage", "-t", TOPIC, "-b", "broker-a", "-p", "kept across a restart").stdout
    assert "SEND_OK" in sent
    assert java_local.stored("broker-a") >= 1
    master = java_local.addr["broker-a-0"]
    out = java_local.run("killBroker", "-b", "broker-a", "--id", "0", "--signal", "TERM").stdout
    assert "(java 5.3.3, pid" in out and out.rstrip().endswith("stopped")
    # SIGTERM runs Java's shutdown hook: the master unregisters from both NameServers at once
    java_local.everywhere(lambda r: set(r.get("broker-a", {})) == {1}, "broker-a's master unregistered", timeout=60)
    java_local.run("restartBroker", "-b", "broker-a", "--id", "0")
    assert java_local.procs()["broker-a-0"]["addr"] == master
    java_local.everywhere(lambda r: r.get("broker-a", {}).get(0) == master, "the restarted master routed again")
    assert java_local.stored("broker-a") >= 1  # the same store: what it held before the stop is there


def all_routed(routes: dict[str, dict[int, str]]) -> bool:
    return {n: set(ids) for n, ids in routes.items()} == {"broker-a": {0, 1}, "broker-b": {0, 1}}


def test_sigstop_and_sigcont_a_java_slave_and_the_java_namesrv(java_local: JavaLocal) -> None:
    out = java_local.run("killBroker", "-b", "broker-b", "--id", "1", "--signal", "STOP").stdout
    assert out.rstrip().endswith("paused (SIGSTOP)")
    assert java_local.procs(healthy=False)["broker-b-1"]["state"] == "paused (SIGSTOP)"  # status exits 1
    out = java_local.run("killNamesrv", "-i", "1", "--signal", "STOP").stdout
    assert out.rstrip().endswith("paused (SIGSTOP)")
    assert java_local.route_addrs(java_local.namesrvs[1]) == {}  # a paused JVM answers nothing (times out)
    for command, args in (("killBroker", ("-b", "broker-b", "--id", "1")), ("killNamesrv", ("-i", "1"))):
        out = java_local.run(command, *args, "--signal", "CONT").stdout
        assert out.rstrip().endswith("running")
    procs = java_local.procs()
    assert procs["broker-b-1"]["state"] == procs["namesrv-1"]["state"] == "running"
    # a pause far shorter than the 120 s expiry: the Java NameServer answers again with every broker
    java_local.everywhere(all_routed, "every broker routed by both NameServers after SIGCONT")


def test_kill_9_and_restart_a_java_4_master(java_local: JavaLocal) -> None:
    master = java_local.addr["broker-b-0"]
    java_local.run("killBroker", "-b", "broker-b", "--id", "0")
    # a crash closes the connections: both NameServers drop the master without waiting for a timeout
    java_local.everywhere(lambda r: set(r.get("broker-b", {})) == {1}, "the killed master dropped", timeout=60)
    java_local.run("restartBroker", "-b", "broker-b", "--id", "0")
    assert java_local.procs()["broker-b-0"]["addr"] == master
    java_local.everywhere(lambda r: r.get("broker-b", {}).get(0) == master, "the restarted master routed again")


def test_kill_and_restart_the_java_namesrv_on_its_address(java_local: JavaLocal) -> None:
    java_namesrv = java_local.namesrvs[1]
    out = java_local.run("killNamesrv", "-i", "1").stdout
    assert "(java 5.5.0, pid" in out and out.rstrip().endswith("stopped")
    assert java_local.route_addrs(java_namesrv) == {}
    out = java_local.run("restartNamesrv", "-i", "1").stdout
    assert "java 5.5.0" in out and java_namesrv in out
    assert java_local.procs()["namesrv-1"]["addr"] == java_namesrv
    # a Java NameServer comes back empty; every broker registers again within its 10 s period
    java_local.everywhere(all_routed, "every broker registered again with the restarted Java NameServer")


def test_silent_partition_of_a_java_broker_from_our_namesrv_and_heal(java_local: JavaLocal) -> None:
    ours, java_ns = java_local.namesrvs
    assert java_local.heard_lately(ours, "broker-a-0", within=15)
    out = java_local.run("brokerFault", "-b", "broker-a", "--partition", ours).stdout
    assert "broker-a-0.namesrv-0" in out and ours in out
    # nothing crosses the path: the Java 5.3.3 master's registrations stop reaching our NameServer, while
    # the Java NameServer, on another path, still routes it
    java_local.wait(lambda: not java_local.heard_lately(ours, "broker-a-0", within=15),
                    "our NameServer stops hearing the partitioned Java master")
    assert java_local.route_addrs(java_ns).get("broker-a", {}).get(0) == java_local.addr["broker-a-0"]
    out = java_local.run("brokerFault", "-b", "broker-a", "--heal", "all").stdout
    assert "partitioned from" in out
    java_local.wait(lambda: java_local.heard_lately(ours, "broker-a-0", within=15),
                    "our NameServer hears the healed Java master register again")
    java_local.everywhere(all_routed, "every broker routed by both NameServers after the heal")


def test_refused_path_makes_the_java_namesrv_drop_a_java_4_broker_until_healed(java_local: JavaLocal) -> None:
    ours, java_ns = java_local.namesrvs
    done = java_local.json("networkFault", "-b", "broker-b", "--id", "0", "--to", "1", "--refuse")
    assert [p["name"] for p in done["paths"]] == ["broker-b-0.namesrv-1"] and not done["paths"][0]["enabled"]
    # refusing resets the live connection: the Java NameServer sees it close and drops the 4.9.7 master at
    # once; our NameServer, on another path, keeps it
    java_local.wait(lambda: set(java_local.route_addrs(java_ns).get("broker-b", {})) == {1},  # the slave stays
                    "the Java NameServer drops the master whose path refuses", timeout=60)
    assert java_local.route_addrs(ours).get("broker-b", {}).get(0) == java_local.addr["broker-b-0"]
    java_local.run("networkFault", "-b", "broker-b", "--id", "0", "--to", "1", "--heal")
    java_local.everywhere(all_routed, "the healed master registered again with the Java NameServer")


def test_brokerfault_says_what_works_on_a_java_broker(java_local: JavaLocal) -> None:
    for option in ("--hang", "--reject=17", "--latency=100"):
        done = java_local.run("brokerFault", "-b", "broker-a", option, ok=False)
        assert done.returncode == 1 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert "runs java 5.3.3, which has no fault switchboard" in done.stderr
        assert "killBroker" in done.stderr and "--partition/--heal" in done.stderr
    shown = java_local.json("brokerFault", "-b", "broker-b")  # the proxy's view: all there is on Java
    assert shown["via"] == "faultproxy" and shown["state"]["partitioned"] == []


def test_stop_leaves_no_java_process_behind(java_local: JavaLocal) -> None:
    pids = [p["pid"] for p in java_local.procs().values()]
    out = java_local.run("stop").stdout
    assert out.startswith("stopped 7 processes"), out
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert procs_mentioning(str(java_local.dir)) == []
