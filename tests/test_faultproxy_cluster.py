"""The fault proxy between real NameServers and broker stubs: registration through it, partitions that
expire a broker, refusals that drop it at once, heals; the local cluster's proxy through mqadmin
(networkFault, brokerFault, status, restarts); and a scenario with network faults.

Timings are short (registration every 0.5 s, expiry after 2 s) so that each fault shows in seconds;
only lower bounds are asserted (a partition cannot expire a broker before its expiry time).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqadmin.client import SyncAdminClient
from mqadmin.client.errors import AdminError
from mqadmin.localcluster.state import ClusterState
from mqadmin.scenario import report, runner, schema
from tests.broker_procs import BrokerProcess, start_broker  # noqa: F401 (a fixture)
from tests.faultproxy_procs import fault_proxy, wait_for
from tests.mqadmin_procs import cli_env, mqadmin, procs_mentioning, running_cluster
from tests.procs import NamesrvProcess

EXPIRY_MS = 2000
PERIOD_MS = 500
WAIT = 20.0  # generous: the machine may be busy


def routed(namesrv: str, topic: str = "TBW102") -> set[str]:
    """The brokers a NameServer routes ``topic`` to now (none when it does not answer)."""
    try:
        route = SyncAdminClient([namesrv], timeout=2.0).topic_route(topic)
    except AdminError:
        return set()
    return {b.broker_name for b in route.broker_datas}


def test_a_broker_behind_the_proxy_registers_expires_when_partitioned_and_drops_when_refused(
        tmp_path: Path, start_namesrv: Callable[..., NamesrvProcess],
        start_broker: Callable[..., BrokerProcess]) -> None:  # noqa: F811
    ns = start_namesrv(brokerChannelExpiredTime=EXPIRY_MS, scanNotActiveBrokerInterval=100)
    with fault_proxy(tmp_path / "proxy") as proxy:
        path = proxy.client.create_path("b.ns", "127.0.0.1:0", ns.addr)
        start_broker(namesrvAddr=path["listen"], registerNameServerPeriod=PERIOD_MS, brokerName="bx")
        wait_for(lambda: routed(ns.addr) == {"bx"}, WAIT, "registration through the proxy")
        live = proxy.client.path("b.ns")
        assert live["connections"] == 1 and live["stats"]["bytesUpstream"] > 0

        began = time.monotonic()
        proxy.client.partition("b.ns")
        wait_for(lambda: routed(ns.addr) == set(), WAIT, "expiry of the partitioned broker")
        # silence, not a closed connection: the NameServer waits for its expiry time, less at most one
        # period for the registration that had just gone through
        assert time.monotonic() - began >= (EXPIRY_MS - PERIOD_MS) / 1000 - 0.1
        assert proxy.client.path("b.ns")["connections"] == 1  # the connection stayed open all along

        proxy.client.heal("b.ns")
        wait_for(lambda: routed(ns.addr) == {"bx"}, WAIT, "registration after the heal")

        proxy.client.refuse("b.ns")  # the broker's connection is reset: the NameServer drops it at once
        wait_for(lambda: routed(ns.addr) == set(), WAIT, "the drop of a refused broker")
        assert "connection_closed" in ns.log() or "closed" in ns.log()
        proxy.client.heal("b.ns")
        wait_for(lambda: routed(ns.addr) == {"bx"}, WAIT, "registration after the refusal")


# --- the local cluster's proxy, through mqadmin ----------------------------------------------------


@dataclass
class Cluster:
    env: dict[str, str]
    dir: Path
    started: dict[str, Any]

    def run(self, *args: str) -> Any:
        return mqadmin(*args, "--dir", str(self.dir), env=self.env) if args[0] in DIR_COMMANDS else \
            mqadmin(*args, env=self.env)

    def json(self, *args: str) -> Any:
        done = self.run(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    @property
    def namesrvs(self) -> list[str]:
        return [p["addr"] for p in self.started["procs"] if p["kind"] == "namesrv"]


def state_addr(cluster: Cluster, name: str) -> str:
    return ClusterState.load(cluster.dir).find_broker(name, 0)[0].addr


DIR_COMMANDS = ("status", "networkFault", "restartBroker", "killBroker", "stop")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    home = tmp_path_factory.mktemp("state")
    directory = home / "mqadmin" / "cluster"
    env = cli_env(home)
    with running_cluster(directory, "--register-period", str(PERIOD_MS), "--broker-timeout", str(EXPIRY_MS),
                         "--scan-interval", "100", "--client-proxy", "--topics", "T1", env=env) as started:
        yield Cluster(env, directory, started)
    assert procs_mentioning(str(directory)) == []


def test_every_broker_reaches_every_namesrv_through_its_own_path(cluster: Cluster) -> None:
    status = cluster.run("status")
    assert status.returncode == 0 and "fault proxy paths" in status.stdout
    assert "broker-a-0.namesrv-1" in status.stdout and "clients.broker-b-0" in status.stdout
    proxy = cluster.json("status")["faultProxy"]
    paths = {p["name"]: p for p in proxy["paths"]}
    state = ClusterState.load(cluster.dir)
    for broker in state.brokers:  # its config names the proxy's ports, never a NameServer's own
        config = Path(broker.config).read_text()
        assert f"namesrvAddr={paths[f'{broker.name}.namesrv-0']['listen']};{paths[f'{broker.name}.namesrv-1']['listen']}" \
            in config
        assert paths[f"clients.{broker.name}"]["listen"] == f"127.0.0.2:{broker.port}"
    route = cluster.json("topicRoute", "-t", "T1")  # brokers register the clients' path's address
    assert sorted(b["brokerAddrs"]["0"] for b in route["brokerDatas"]) == sorted(
        f"127.0.0.2:{b.port}" for b in state.brokers)


def test_network_fault_partition_and_heal_one_namesrv(cluster: Cluster) -> None:
    ns0, ns1 = cluster.namesrvs
    shown = cluster.json("networkFault", "-b", "broker-a", "--to", "0", "--partition")
    assert shown["fault"] == "partition" and [p["name"] for p in shown["paths"]] == ["broker-a-0.namesrv-0"]
    assert shown["paths"][0]["faults"] == "partition"
    try:
        wait_for(lambda: routed(ns0) == {"broker-b"}, WAIT, "namesrv-0 dropping broker-a")
        assert routed(ns1) == {"broker-a", "broker-b"}  # the other NameServer still has it: they disagree
        # the switchboard's view adds the proxy's cut (by the address the broker registers)
        registered = f"127.0.0.2:{ClusterState.load(cluster.dir).find_broker('broker-a', 0)[0].port}"
        fault = cluster.json("brokerFault", "-b", registered)
        assert fault["state"]["partitioned"] == [ns0]
        for _ in range(4):  # by name too: the local cluster knows it, whichever NameServer is asked first
            assert cluster.json("brokerFault", "-b", "broker-a")["broker"] == state_addr(cluster, "broker-a")
    finally:
        healed = cluster.json("networkFault", "-b", "broker-a", "--heal")
    assert all(p["faults"] == "-" for p in healed["paths"])
    wait_for(lambda: routed(ns0) == {"broker-a", "broker-b"}, WAIT, "broker-a back on namesrv-0")


def test_broker_fault_partition_goes_through_the_proxy(cluster: Cluster) -> None:
    ns0 = cluster.namesrvs[0]
    cut = cluster.json("brokerFault", "-b", "broker-b", "--partition", ns0)
    assert cut["via"] == "faultproxy" and cut["state"]["partitioned"] == [ns0]
    assert [p["name"] for p in cut["paths"]] == ["broker-b-0.namesrv-0"]
    try:
        wait_for(lambda: routed(ns0) == {"broker-a"}, WAIT, "namesrv-0 dropping broker-b")
    finally:
        healed = cluster.json("brokerFault", "-b", "broker-b", "--heal", "all")
    assert healed["state"]["partitioned"] == []
    wait_for(lambda: routed(ns0) == {"broker-a", "broker-b"}, WAIT, "broker-b back on namesrv-0")


def test_client_path_latency_delays_sends(cluster: Cluster) -> None:
    cluster.json("networkFault", "-b", "broker-a", "--clients", "--latency", "250", "--stream", "upstream")
    try:
        began = time.monotonic()
        sent = cluster.json("sendMessage", "-t", "T1", "-p", "slow", "-b", "broker-a", "--timeout", "10")
        assert sent["sendStatus"] == "SEND_OK" and sent["brokerAddr"].startswith("127.0.0.2:")
        assert time.monotonic() - began >= 0.25
    finally:
        cluster.json("networkFault", "-b", "broker-a", "--clients", "--heal")


def test_a_dead_proxy_is_named_and_restarted_with_its_paths(cluster: Cluster) -> None:
    state = ClusterState.load(cluster.dir)
    proxy = state.fault_proxy
    assert proxy is not None
    before = {p.name: p.listen for p in state.paths}
    os.kill(proxy.pid, signal.SIGKILL)
    wait_for(lambda: not proxy.alive(), WAIT, "the proxy's death")
    down = cluster.run("networkFault")
    assert down.returncode == 1 and down.stderr.count("\n") == 1 and "fault proxy" in down.stderr
    assert "is not running" in down.stderr and "Traceback" not in down.stderr
    assert cluster.run("restartBroker", "-b", "broker-b").returncode == 0
    after = ClusterState.load(cluster.dir)
    assert after.fault_proxy is not None and after.fault_proxy.alive()
    assert after.fault_proxy.port == proxy.port and {p.name: p.listen for p in after.paths} == before
    shown = cluster.json("networkFault")["paths"] + cluster.json("networkFault", "--clients")["paths"]
    assert {p["name"]: p["listen"] for p in shown} == before and all(p["enabled"] for p in shown)
    for ns in cluster.namesrvs:
        wait_for(lambda ns=ns: routed(ns) == {"broker-a", "broker-b"}, WAIT, "both brokers routed again")


@pytest.mark.parametrize(("args", "message"), [
    (["--partition", "--refuse"], "at most one of"),
    (["--latency", "x"], "--latency"),
    (["--bandwidth", "0"], "--bandwidth"),
    (["--stream", "up", "--latency", "5"], "'up' is not upstream, downstream or both"),
    (["--stream", "upstream", "--reset"], "--stream: only goes with"),
    (["--jitter", "5"], "--jitter: only goes with --latency"),
    (["-b", "broker-z", "--heal"], "no broker broker-z"),
    (["--to", "9", "--heal"], "no NameServer '9'"),
    (["--clients", "--to", "0"], "a clients' path leads to the broker"),
    (["--id", "1"], "--id: only goes with -b"),
])
def test_network_fault_bad_input_is_one_line_exit_2(cluster: Cluster, args: list[str], message: str) -> None:
    done = cluster.run("networkFault", *args)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert done.stdout == ""


def test_without_the_proxy_brokers_dial_namesrvs_and_partition_uses_the_switchboard(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "home")
    directory = tmp_path / "plain"
    with running_cluster(directory, "--no-fault-proxy", "--namesrvs", "1", "--brokers", "1", env=env) as started:
        assert [p["kind"] for p in started["procs"]] == ["namesrv", "broker"] and started["faultProxy"] is None
        ns = started["procs"][0]["addr"]
        broker = ClusterState.load(directory).brokers[0]
        assert f"namesrvAddr={ns}\n" in Path(broker.config).read_text()
        done = mqadmin("networkFault", "--dir", str(directory), env=env)
        assert done.returncode == 1 and "has no fault proxy" in done.stderr and done.stderr.count("\n") == 1
        env_n = {**env, "NAMESRV_ADDR": ns}
        cut = mqadmin("brokerFault", "-b", broker.addr, "--partition", ns, "--json", env=env_n)
        assert cut.returncode == 0 and json.loads(cut.stdout)["state"]["partitioned"] == [ns]
    bad = mqadmin("start", "--no-fault-proxy", "--client-proxy", "--dir", str(tmp_path / "x"), env=env)
    assert bad.returncode == 2 and "--client-proxy needs the fault proxy" in bad.stderr


# --- a scenario ------------------------------------------------------------------------------------

NETWORK_SCENARIO = """\
name: network-faults
duration: 7
cluster:
  namesrvs: 2
  brokers: 2
  topics: [NetTopic]
  queues: 2
  register_period_ms: 500
  broker_expired_ms: 2000
  scan_interval_ms: 100
  client_proxy: true
load:
  producers: 2
  rate: 10
  poll_interval: 0.5
  send_timeout: 2
timeline:
  - at: 1
    network_fault: broker-a
    clients: true
    latency_ms: 300
    stream: upstream
    label: slow
  - at: 2.5
    heal: broker-a
  - at: 3
    network_fault: broker-b
    namesrv: 0
    refuse: true
    label: refused
  - wait_until: route_excludes
    broker: broker-b
    namesrvs: [0]
    timeout: 5
  - heal: broker-b
    label: healed
  - wait_until: namesrvs_agree
    timeout: 5
expect:
  - route_excludes: broker-b
    namesrvs: [0]
    after: refused
    within: 5
  - namesrvs_agree: true
    after: healed
    within: 5
  - send_success_rate: 0.9
"""


def test_a_scenario_with_network_faults_records_them_with_their_times(tmp_path: Path) -> None:
    scn = schema.parse(NETWORK_SCENARIO, "network.yaml")
    assert scn.cluster.fault_proxy is True and scn.cluster.client_proxy is True
    result = runner.run(scn, base_dir=tmp_path)
    assert result.passed, ([(v.text, v.passed, v.measured_text, v.detail) for v in result.verdicts],
                           [(a.text, a.ok, a.detail) for a in result.actions])
    actions = {a.action.label or a.text: a for a in result.actions}
    slow = actions["slow"]
    assert slow.ok and slow.text == "network_fault broker-a-0 (clients' path): latency 300 ms upstream"
    assert slow.detail == "clients.broker-a-0: latency 300 ms upstream" and slow.start >= 1.0
    refused = actions["refused"]
    assert refused.detail == "broker-b-0.namesrv-0: refusing" and refused.start >= 3.0
    assert actions["healed"].detail.startswith("broker-b-0.namesrv-0: -")
    # sends to broker-a while its clients' path was slow took the latency at least
    slow_sends = [r for r in result.records if r.outcome == "ok" and r.broker == "broker-a" and 1.2 <= r.t <= 2.2]
    assert slow_sends and min(r.latency_ms for r in slow_sends) >= 300
    doc = report.to_json(result)
    kinds = [a["kind"] for a in doc["actions"]]
    assert kinds.count("network_fault") == 2 and kinds.count("heal") == 2
    assert all({"start", "end", "effect", "detail"} <= set(a) for a in doc["actions"])
    assert procs_mentioning(str(tmp_path)) == []
