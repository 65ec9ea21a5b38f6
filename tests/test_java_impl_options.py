"""Choosing Java implementations for the local cluster and scenarios: what is accepted, and what is
refused in one line before anything starts (no JVM runs in this module: the refusals come first).

The Java processes themselves are tests/interop/test_java_local_cluster.py and test_java_shipped_scenarios.py.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from mqadmin.localcluster import impls
from mqadmin.localcluster.impls import Impl
from mqadmin.localcluster.state import ClusterError
from mqadmin.rocketmq import servers
from mqadmin.scenario import schema
from tests.mqadmin_procs import cli_env, mqadmin

J533, J497, J550 = Impl("java", "5.3.3"), Impl("java", "4.9.7"), Impl("java", "5.5.0")


def test_one_value_for_all_or_one_each() -> None:
    assert impls.parse("toolkit", "namesrv", 3, "--namesrv-impl") == (impls.TOOLKIT,) * 3
    assert impls.parse("toolkit, java:5.5.0", "namesrv", 2, "--namesrv-impl") == (impls.TOOLKIT, J550)
    assert impls.parse(["java:5.3.3", "stub"], "broker", 2, "--broker-impl") == (J533, impls.STUB)
    assert impls.java_versions((impls.TOOLKIT, J550), (J533, J533, J497)) == ["5.5.0", "5.3.3", "4.9.7"]
    assert J550.label == "java 5.5.0" and J550.spec == "java:5.5.0" and impls.STUB.label == "stub"


@pytest.mark.parametrize(("value", "role", "count", "message"), [
    ("java", "broker", 2, "give the RocketMQ version after java:"),
    ("java:5.3", "broker", 2, "give the RocketMQ version after java:"),
    ("stub", "namesrv", 2, "'stub' is our broker: a NameServer is toolkit or java:VERSION"),
    ("rust:1.0", "broker", 2, "unknown implementation 'rust:1.0': a broker is stub or java:VERSION"),
    ("stub,stub,stub", "broker", 2, "--broker-impl names 3 implementations for 2 broker groups"),
    ("toolkit,", "namesrv", 2, "--namesrv-impl: empty implementation"),
])
def test_bad_values_are_one_line(value: str, role: str, count: int, message: str) -> None:
    option = "--namesrv-impl" if role == "namesrv" else "--broker-impl"
    with pytest.raises(ClusterError) as caught:
        impls.parse(value, role, count, option)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def check(namesrvs: tuple[Impl, ...], brokers: tuple[Impl, ...], **changed: object) -> None:
    opts: dict[str, object] = {"register_period_ms": 30000, "broker_expired_ms": 120000, "scan_interval_ms": 5000,
                               "auth": False, "tls": False, "metrics": False, **changed}
    impls.check(namesrvs, brokers, **opts)  # type: ignore[arg-type]


def test_what_java_cannot_do_is_refused_with_whose_choice_it_is() -> None:
    check((impls.TOOLKIT,), (J533,), register_period_ms=10000)
    check((J550,), (J533, impls.STUB), broker_expired_ms=20000)  # brokers send it; 5.x Java reads it
    check((impls.TOOLKIT,), (J497,), broker_expired_ms=20000)  # ours reads brokerChannelExpiredTime
    check((J497,), (J533, impls.STUB), proxy="5.3.3")  # Apache's Proxy receives with POP: 5.x brokers serve it
    refused = [
        ({"register_period_ms": 2000}, (impls.TOOLKIT,), (J533,), "broker", "registers every 10000-60000 ms"),
        ({"scan_interval_ms": 1000}, (J497,), (impls.STUB,), "namesrv", "scans every 10 s"),
        ({"broker_expired_ms": 20000}, (J497,), (impls.STUB,), "namesrv", "after a fixed 120 s"),
        ({"broker_expired_ms": 20000}, (J550,), (J497,), "broker", "the broker java 4.9.7 cannot send"),
        ({"auth": True}, (impls.TOOLKIT,), (J533,), "broker", "--auth is for our processes only"),
        ({"metrics": True}, (J550,), (impls.STUB,), "namesrv", "--metrics is for our processes only"),
        ({"proxy": "5.3.3"}, (impls.TOOLKIT,), (impls.STUB, J497), "broker", "4.x brokers do not serve"),
    ]
    for changed, namesrvs, brokers, role, message in refused:
        with pytest.raises(impls.ImplError) as caught:
            check(namesrvs, brokers, **changed)
        assert caught.value.role == role and message in str(caught.value), (changed, caught.value)
    assert impls.brokers_send_expiry((impls.TOOLKIT, J550), 20000)
    assert not impls.brokers_send_expiry((impls.TOOLKIT,), 20000) and not impls.brokers_send_expiry((J550,), 120000)


def test_java_config_is_small_and_on_loopback(tmp_path: Path) -> None:
    props = servers.broker_properties(cluster="C", broker_name="broker-a", broker_id=1, port=20911,
                                      namesrv_addrs=["127.0.0.1:1", "127.0.0.1:2"], store=tmp_path,
                                      heartbeat_timeout_ms=20000)
    assert props["brokerRole"] == "SLAVE" and props["haListenPort"] == 20912 and props["bindAddress"] == "127.0.0.1"
    assert props["namesrvAddr"] == "127.0.0.1:1;127.0.0.1:2" and props["mappedFileSizeCommitLog"] == 16 * 2**20
    assert props["enableSlaveActingMaster"] is True and props["brokerNotActiveTimeoutMillis"] == 20000
    assert props["timerWheelEnable"] is False and "mappedFileSizeTimerLog" not in props
    popping = servers.broker_properties(cluster="C", broker_name="broker-a", broker_id=0, port=20911,
                                        namesrv_addrs=["127.0.0.1:1"], store=tmp_path, timer_wheel=True)
    assert popping["timerWheelEnable"] is True and popping["mappedFileSizeTimerLog"] == 16 * 2**20  # for --proxy
    assert servers.Sizing().with_timer_wheel().direct_memory == servers.TIMER_DIRECT_MEMORY
    text = servers.properties_text(props)
    assert "autoCreateTopicEnable=true\n" in text and "timerWheelEnable=false\n" in text
    base = servers.free_port_block(servers.PORT_OFFSETS["broker"])
    assert all(1024 < base + off < 65536 for off in (-2, 0, 1))


def cli_refusal(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``mqadmin start ARGS --dir ...``: exit 2, one line on stderr, and no cluster started."""
    directory = tmp_path / "cluster"
    done = mqadmin("start", *args, "--dir", str(directory), env=env or cli_env(tmp_path / "xdg"))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and not (directory / "cluster.json").exists()
    usage = [line.strip(" │") for line in done.stderr.splitlines() if line.startswith("│")]
    if usage:  # a usage error: Typer's box, its message inside
        return " ".join(usage)
    (line,) = done.stderr.strip().splitlines()
    return line


@pytest.mark.parametrize(("args", "expected"), [
    (["--namesrv-impl", "jav:5"], "unknown implementation 'jav:5'"),
    (["--broker-impl", "java:5.3.3", "--auth"], "--auth is for our processes only"),
    (["--broker-impl", "java:5.3.3", "--register-period", "2000"], "registers every 10000-60000 ms"),
    (["--broker-prop", "novalue"], "is not KEY=VALUE"),
    (["--broker-impl", "stub,java:4.9.7", "--client-proxy"], "--client-proxy is not supported for java 4.9.7 brokers"),
    (["--broker-impl", "java:4.9.7", "--proxy", "5.3.3"], "--proxy 5.3.3 is not supported over java 4.9.7 brokers"),
])
def test_start_refuses_in_one_line_with_exit_2(tmp_path: Path, args: list[str], expected: str) -> None:
    assert expected in cli_refusal(tmp_path, *args)


def only(tmp_path: Path, *tools: str) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        assert found, f"{tool} is needed on this machine"
        (bin_dir / tool).symlink_to(os.path.realpath(found))
    return str(bin_dir)


@pytest.mark.parametrize(("tools", "missing"), [(("java",), "mvn not found on PATH"), ((), "java not found on PATH")])
def test_start_names_a_missing_tool_with_exit_2(tmp_path: Path, tools: tuple[str, ...], missing: str) -> None:
    env = cli_env(tmp_path / "xdg", MQADMIN_CACHE_DIR=str(tmp_path / "empty-cache"), PATH=only(tmp_path, *tools))
    line = cli_refusal(tmp_path, "--namesrv-impl", "java:5.5.0", env=env)
    assert line.startswith(f"mqadmin: {missing}"), line


def test_scenario_keys_are_checked_with_the_line(tmp_path: Path) -> None:
    base = "name: s\nduration: 5\ncluster:\n  brokers: 2\n{}load:\n  producers: 1\n  rate: 1\n{}" \
           "expect:\n  - send_success_rate: 0.5\n"
    good = schema.parse(base.format('  namesrv_impl: [toolkit, "java:5.5.0"]\n  broker_impl: java:5.3.3\n'
                                    '  register_period_ms: 10000\n  java_opts: [-Xmx256m]\n', ""))
    assert good.cluster.namesrv_impl == ("toolkit", "java:5.5.0") and good.cluster.broker_impl == ("java:5.3.3",)
    assert good.cluster.java_opts == ("-Xmx256m",) and good.cluster.broker_impl_of("broker-b") == "java:5.3.3"
    # a partition of a Java broker goes through the fault proxy, as for ours; 5.x stands behind the clients' proxy
    partitioned = schema.parse(base.format("  broker_impl: [stub, java:4.9.7]\n  register_period_ms: 10000\n",
                                           "timeline:\n  - at: 1\n    partition: broker-b\n    namesrv: 0\n"))
    assert partitioned.cluster.fault_proxy is True and partitioned.timeline[0].kind == "partition"
    behind = schema.parse(base.format("  broker_impl: java:5.3.3\n  register_period_ms: 10000\n"
                                      "  client_proxy: true\n", ""))
    assert behind.cluster.client_proxy and behind.cluster.fault_proxy is True
    refused = [
        ('  broker_impl: [stub, "java:5.3.3", stub]\n', "", ":5: cluster.broker_impl: broker_impl names 3"),
        ("  broker_impl: java:5.3.3\n  register_period_ms: 5000\n", "", ":5: cluster.broker_impl: register period 5000"),
        ('  namesrv_impl: "java:4.9.7"\n  broker_expired_ms: 10000\n', "",
         ":5: cluster.namesrv_impl: broker timeout 10000 ms"),
        ("  broker_impl: java:5.3.3\n  register_period_ms: 10000\n  message_store: memory\n", "",
         ":7: cluster.message_store: memory is the broker stub's"),
        ("  broker_impl: [stub, java:4.9.7]\n  register_period_ms: 10000\n",
         "timeline:\n  - at: 1\n    fault: broker-b\n    hang: true\n",
         ":12: timeline[1].fault: broker-b runs java:4.9.7: fault is the broker stub's fault switchboard"),
        ("  broker_impl: [stub, java:4.9.7]\n  register_period_ms: 10000\n  client_proxy: true\n", "",
         ":5: cluster.broker_impl: client_proxy is not supported for java 4.9.7 brokers"),
    ]
    for cluster, timeline, expected in refused:
        with pytest.raises(schema.ScenarioError) as caught:
            schema.parse(base.format(cluster, timeline), "s.yaml")
        assert expected in str(caught.value), (expected, str(caught.value))
