"""``mqadmin fanout`` end to end: a real local SparkSession, real clusters over loopback.

One SparkSession (local[2]) serves every test here and is stopped at the
end. Each test starts its own small cluster (real mqnamesrv and broker stub
processes) and stops it, pass or fail. Figures are checked against what the
broker stubs themselves report (GET_BROKER_RUNTIME_INFO), never against
the fan-out's own arithmetic alone.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from mqadmin.client import AdminClient
from mqadmin.fanout import spark
from mqadmin.fanout.report import to_json
from mqadmin.fanout.runner import FanoutOptions, run
from mqadmin.localcluster import processes
from mqadmin.localcluster.state import STATE_FILE, ClusterState
from tests.mqadmin_procs import assert_headers_start_at_values, stop_all

MQADMIN = [sys.executable, "-c", "from mqadmin.cli import entry; entry()"]


@pytest.fixture(scope="session")
def spark_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    session = spark.start_session("local[2]", work_dir=tmp_path_factory.mktemp("spark"))
    try:
        yield session
    finally:
        session.stop()


def _start_cluster(directory: Path, topics: tuple[str, ...]) -> ClusterState:
    return processes.start(directory, processes.StartOptions(namesrvs=1, brokers=2, topics=topics, topic_queues=4))


@pytest.fixture
def local_cluster(tmp_path: Path) -> Iterator[ClusterState]:
    state = _start_cluster(tmp_path / "cluster", ("FanoutTopic0", "FanoutTopic1"))
    try:
        yield state
    finally:
        processes.stop_procs(state.procs)


def put_totals(state: ClusterState) -> dict[str, int]:
    """What each live master stub says it stored in all (msgPutTotalTodayNow of GET_BROKER_RUNTIME_INFO)."""
    masters = {p.broker_name: p.addr for p in state.brokers if p.broker_id == 0 and p.alive()}

    async def read() -> dict[str, int]:
        client = AdminClient([], timeout=3.0)
        return {name: int((await client.broker_runtime_info(addr))["msgPutTotalTodayNow"]) for name, addr in masters.items()}

    return trio.run(read)


def dead_addr() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_sends_reported_are_the_sends_the_brokers_counted(spark_session: object, local_cluster: ClusterState) -> None:
    before = put_totals(local_cluster)
    opts = FanoutOptions(producers=400, topics=2, messages_per_producer=3, rate=5.0, send_timeout=10.0,
                         namesrv=local_cluster.namesrv_addr, partitions=2, start_delay=1.0)
    result = run(opts, session=spark_session)
    counted = {name: n - before[name] for name, n in put_totals(local_cluster).items()}
    doc = to_json(result)

    assert result.metrics.partitions == 2 and [p.producers for p in result.metrics.parts] == [200, 200]
    assert os.getpid() not in {p.pid for p in result.metrics.parts}  # ran in Spark's Python workers
    assert doc["sends"]["total"] == 400 * 3
    assert doc["sends"]["outcomes"]["ok"] == 400 * 3
    assert sum(counted.values()) == 400 * 3
    assert result.metrics.load.by_broker == counted  # per broker, not only in total
    assert doc["agreement"]["agree"] is True and doc["agreement"]["brokersCounted"] == 400 * 3
    assert doc["routes"]["queries"] >= 400 * 2  # every producer looked up both topics
    answered = doc["routes"]["latencyMs"]["count"]  # queries still in flight when the load ended have no latency
    assert doc["routes"]["queries"] - doc["routes"]["failures"] - 400 <= answered <= doc["routes"]["queries"]
    assert doc["resources"]["connections"] <= 2 * 3 * 2  # a shared pool per partition, not one per producer


def test_killed_broker_shows_up_as_failover(spark_session: object, tmp_path: Path) -> None:
    state = _start_cluster(tmp_path / "cluster", ("FanoutTopic0",))
    try:
        opts = FanoutOptions(producers=200, topics=1, duration=5.0, rate=5.0, poll_interval=1.0,
                             namesrv=state.namesrv_addr, cluster_dir=Path(state.dir), kills=(("broker-a", 1.5),),
                             partitions=2, start_delay=1.0)
        result = run(opts, session=spark_session)
        after = put_totals(state)
    finally:
        processes.stop_procs(state.procs)
    doc = to_json(result)
    (kill,) = doc["events"]
    assert kill["ok"] and kill["broker"] == "broker-a" and 1.4 < kill["t"] < 3.0
    (fo,) = doc["failover"]
    assert fo["broker"] == "broker-a" and fo["killedAt"] == pytest.approx(kill["t"], abs=1e-3)
    assert fo["failedAttempts"] > 0  # producers tried the dead broker ...
    assert doc["sends"]["retried"] > 0  # ... and retried elsewhere
    assert fo["stillSendingAtEnd"] is False and fo["producersRoutingAtEnd"] == 0
    assert 0 <= fo["stoppedSendingAfter"] < 3.5  # route polls every 1 s drop it
    assert doc["brokers"]["broker-a"]["lastAttempt"] < 5.0
    b = doc["agreement"]["brokers"]["broker-b"]
    assert b["agree"] is True and b["brokerCounted"] == b["producersOk"] == after["broker-b"]
    assert doc["agreement"]["brokers"]["broker-a"]["gone"] is True
    ok_share = doc["sends"]["outcomes"]["ok"] / doc["sends"]["total"]
    assert ok_share > 0.95  # retries carry the sends over to broker-b


def test_scenario_timeline_runs_on_the_fanout_cluster(spark_session: object, tmp_path: Path) -> None:
    scn = tmp_path / "crash.yaml"
    scn.write_text(
        "name: fanout-crash\n"
        "description: kill a master under fan-out load\n"
        "duration: 4\n"
        "cluster: {namesrvs: 1, brokers: 2, topics: [CrashTopic], queues: 4}\n"
        "load: {producers: 2, rate: 5, poll_interval: 1}\n"
        "timeline:\n"
        "  - at: 1\n"
        "    kill_broker: broker-a\n"
        "    label: crash\n"
        "expect:\n"
        "  - route_excludes: broker-a\n"
        "    after: crash\n"
        "    within: 2.0\n"
        "  - send_success_rate: 0.9\n"
        "  - min_sends_to: broker-b\n"
        "    min: 1\n"
        "    after: crash\n"
    )
    result = run(FanoutOptions(producers=150, scenario=scn, partitions=2, start_delay=1.0), session=spark_session)
    doc = to_json(result)
    assert doc["load"]["scenario"] == "fanout-crash" and doc["load"]["topics"] == ["CrashTopic"]
    assert doc["load"]["ratePerProducer"] == 5.0 and doc["load"]["pollInterval"] == 1.0
    assert [e["kind"] for e in doc["events"]] == ["kill_broker"] and doc["events"][0]["ok"]
    route, success, windowed = doc["scenarioVerdicts"]
    assert route["passed"] is True and route["measured"] < 2.0
    assert success["passed"] is True
    assert windowed["passed"] is None  # needs per-send records: reported, not guessed
    assert doc["failover"][0]["broker"] == "broker-a"
    assert not Path(result.cluster_dir or "/nonexistent").exists()  # the run's own cluster is gone


def test_consumers_in_the_partitions_reconcile_with_the_brokers(spark_session: object, local_cluster: ClusterState) -> None:
    """Consumers beside the producers: every acknowledged message consumed or lagging, checked against the
    offsets the groups committed on the brokers and the brokers' own queue offsets."""
    opts = FanoutOptions(producers=200, topics=2, duration=4.0, rate=5.0, namesrv=local_cluster.namesrv_addr,
                         partitions=2, start_delay=1.0, consumers=40, consumer_groups=2, drain=4.0)
    result = run(opts, session=spark_session)
    doc = to_json(result)
    cons = doc["consumers"]
    assert cons["consumers"] == 40 and cons["groups"] == 2
    assert result.consumer_rows is not None and {r["group"] for r in result.consumer_rows} == {
        "fanout_consumer_group_0", "fanout_consumer_group_1"}
    total = cons["total"]
    assert total["acknowledged"] == doc["sends"]["outcomes"]["ok"] == doc["agreement"]["brokersCounted"]
    assert total["unexplained"] == 0 and cons["reconciled"] is True
    assert total["consumed"] + total["lag"] == total["acknowledged"]
    assert total["consumed"] == total["acknowledged"]  # 4 s of drain: nothing left behind
    # the brokers agree: each group committed its queues up to their max offsets
    assert all(r["brokerLag"] == 0 for r in result.consumer_rows)
    assert cons["consumptions"] == total["consumed"] + total["other"] + total["duplicates"]
    # deliveries = distinct messages + re-deliveries, and the plot's first-delivery line adds up to the distinct
    assert cons["distinct"] + cons["redeliveries"] == cons["consumptions"]
    assert cons["distinct"] == total["consumed"] + total["other"] and cons["redeliveries"] == total["duplicates"]
    assert sum(cons["firstPerSecondSeries"]) == cons["distinct"]
    assert sum(cons["perSecondSeries"]) == cons["consumptions"]
    assert 0 < cons["latencyMs"]["p50"] < 1000


def test_multiprocessing_engine_runs_the_same_partitions(local_cluster: ClusterState) -> None:
    before = put_totals(local_cluster)
    opts = FanoutOptions(producers=100, topics=2, messages_per_producer=2, rate=5.0, send_timeout=10.0,
                         namesrv=local_cluster.namesrv_addr, engine="multiprocessing", workers=2, start_delay=1.0)
    result = run(opts)
    counted = sum(put_totals(local_cluster).values()) - sum(before.values())
    assert result.engine_text == "multiprocessing (2 processes)"
    assert result.metrics.load.ok == counted == 200
    assert to_json(result)["agreement"]["agree"] is True


def test_cli_start_run_writes_report_and_plot(tmp_path: Path) -> None:
    report, plot = tmp_path / "out.json", tmp_path / "out.png"
    try:
        proc = subprocess.run(
            [*MQADMIN, "fanout", "--start", "--dir", str(tmp_path / "c"), "--no-spark", "--producers", "60",
             "--messages-per-producer", "2", "--rate", "5", "--start-delay", "0.5", "--consumers", "12", "--drain",
             "2", "--report", str(report), "--plot", str(plot), "-q"],
            check=False, capture_output=True, text=True, timeout=120,  # consumers end 2 s after the last send
        )
    finally:
        stop_all(tmp_path / "c")  # a run killed by the timeout cannot stop its cluster itself
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(report.read_text())
    assert doc["sends"]["outcomes"]["ok"] == 120 and doc["agreement"]["brokersCounted"] == 120
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "broker-a" in proc.stdout and "route queries" in proc.stdout
    cons = doc["consumers"]  # deliveries told apart from distinct messages, on the screen and in the report
    assert cons["total"]["consumed"] == 120 and cons["distinct"] + cons["redeliveries"] == cons["consumptions"]
    assert f"{cons['consumptions']:,} deliveries ({cons['distinct']:,} distinct, " in proc.stdout
    assert ("RocketMQ delivers at least once" in proc.stdout) == (cons["redeliveries"] > 0)
    assert_headers_start_at_values(proc.stdout)  # the report's tables, piped
    state = ClusterState(dir=str(tmp_path / "c"))
    assert not (Path(state.dir) / STATE_FILE).exists()  # stopped at the end


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--master", "bogus://x"], "is not a Spark master URL"),
        (["--master", "local[2]", "--duration", "5", "--messages-per-producer", "3"], "not both"),
    ],
)
def test_cli_bad_options_give_one_line(args: list[str], message: str) -> None:
    proc = subprocess.run([*MQADMIN, "fanout", "-n", dead_addr(), *args], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2  # a bad option value (README: exit status)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("mqadmin: ")


def test_cli_unreachable_namesrv_is_one_line_before_spark_starts() -> None:
    addr = dead_addr()
    proc = subprocess.run([*MQADMIN, "fanout", "-q", "-n", addr], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip() == proc.stderr.strip().splitlines()[0]
    assert f"cannot reach the NameServer(s) {addr}" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_unreachable_spark_master_is_one_line(local_cluster: ClusterState) -> None:
    master = f"spark://{dead_addr()}"
    proc = subprocess.run(
        [*MQADMIN, "fanout", "-q", "-n", local_cluster.namesrv_addr, "--master", master, "--spark-timeout", "2"],
        check=False, capture_output=True, text=True, timeout=150,
    )
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("mqadmin: ") and master in line and "Traceback" not in proc.stderr


def test_consumer_groups_that_do_not_reconcile_fail_the_check_with_exit_1() -> None:
    """README exit statuses: a failed check is 1 (never 3), with one line saying which check."""
    from mqadmin.commands.fanout import failed_check

    row = {"group": "g0", "offsetsRead": True}
    doc: dict[str, object] = {"agreement": {"agree": True, "explained": False, "note": ""}, "scenarioVerdicts": [],
                              "consumers": {"reconciled": True, "byGroup": [row], "total": {"unexplained": 0}}}
    assert failed_check(doc) is None
    doc["consumers"] = {"reconciled": False, "byGroup": [row], "total": {"unexplained": 2}}
    assert failed_check(doc) == "the consumer groups do not reconcile: 2 acknowledged message(s) unexplained"
    doc["consumers"] = {"reconciled": False, "byGroup": [{**row, "offsetsRead": False}], "total": {"unexplained": 0}}
    assert "committed offsets of 1 group(s) could not be read" in (failed_check(doc) or "")
    doc["agreement"] = {"agree": False, "explained": False, "note": "3 missing"}
    assert failed_check(doc) == "the brokers' counts disagree with the producers': 3 missing"


def test_cli_consumer_groups_without_consumers_is_a_usage_error() -> None:
    proc = subprocess.run([*MQADMIN, "fanout", "-n", dead_addr(), "--no-spark", "--consumer-groups", "2"],
                          check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line == "mqadmin: --consumer-groups needs --consumers"


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the swallowing is the point
def test_an_interrupt_lost_in_a_finalizer_is_still_noted() -> None:
    """Python swallows an exception raised in ``__del__`` ("Exception ignored"): a Ctrl-C whose
    KeyboardInterrupt lands there must still end the run, so the handler notes the signal first."""
    import gc
    import os
    import signal as signals

    from mqadmin.fanout.runner import _signals_as_interrupt

    class RaisesInFinalizer:
        def __del__(self) -> None:
            os.kill(os.getpid(), signals.SIGINT)
            for _ in range(1000):  # the handler runs between bytecodes, here, inside the finalizer
                pass

    received: list[int] = []
    before = signals.getsignal(signals.SIGINT)
    with _signals_as_interrupt(received):
        RaisesInFinalizer()  # collected at once: its KeyboardInterrupt is printed and dropped
        gc.collect()
    assert received == [signals.SIGINT]
    assert signals.getsignal(signals.SIGINT) is before
