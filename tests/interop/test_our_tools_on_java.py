"""Our mqadmin and simulated clients against the Java 5.3.3 NameServer and Java brokers: the
same figures as Java's own mqadmin prints for the same cluster.

Our CLI runs as a subprocess with ``--json`` (what a user scripts); Java's mqadmin runs in the
session's AdminRunner JVM; both read the ``java_cluster``'s Java NameServer.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from remoting import fastjson
from simclient import ClientPool, ConsumerOptions, ProducerOptions, SimConsumer, SimProducer
from tests.interop.clusters import JavaCluster
from tests.interop.java_procs import AdminRunners
from tests.interop.namesrv_ask import eventually, route
from tests.mqadmin_procs import cli_env

TOPIC, GROUP, COUNT = "OursOnJava", "OursOnJavaGroup", 24
MQADMIN = [str(Path(sys.executable).parent / "mqadmin")]


def ours(*args: str) -> Any:
    """Our mqadmin as a user runs it: a subprocess, --json."""
    done = subprocess.run([*MQADMIN, *args, "--json"], capture_output=True, text=True, timeout=120,
                          env=cli_env(), check=False)
    assert done.returncode == 0, f"mqadmin {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout)


def java_rows(stdout: str, first_column: str) -> list[list[str]]:
    """The data rows of a Java mqadmin table whose rows start with ``first_column``."""
    return [line.split() for line in stdout.splitlines() if line.split()[:1] == [first_column]]


async def _produce_and_consume(ns: str) -> list[str]:
    async with ClientPool() as pool:
        producer = SimProducer(ProducerOptions(namesrv_addrs=(ns,)), pool)
        sent = []
        for i in range(COUNT):
            record = await producer.send(TOPIC, f"ours-{i}".encode(), tags="TagA" if i % 2 else "TagB")
            assert record.outcome == "ok", record
            sent.append(record.msg_id)
        await producer.close()
    consumed: list[Any] = []
    options = ConsumerOptions(namesrv_addrs=(ns,), group=GROUP, subscriptions=((TOPIC, "*"),),
                              consume_from="first_offset", persist_consumer_offset_interval=0.5,
                              rebalance_interval=2.0)
    async with ClientPool() as pool:
        consumer = SimConsumer(options, pool, emit=consumed.append)
        async with trio.open_nursery() as nursery:
            await nursery.start(consumer.run)
            with trio.fail_after(120):
                while len({r.msg_id for r in consumed if r.outcome == "ok"}) < COUNT:
                    await trio.sleep(0.2)
            await consumer.shutdown()
            nursery.cancel_scope.cancel()
    return sent


async def test_our_tools_and_java_mqadmin_agree_on_a_java_cluster(java_cluster: JavaCluster,
                                                                  java_admin: AdminRunners) -> None:
    ns = java_cluster.java_namesrv.addr
    java = java_admin["5.3.3"]
    master = java_cluster.brokers[("5.3.3", 0)]
    created = await trio.to_thread.run_sync(ours, "updateTopic", "-n", ns, "-b", master.addr, "-t", TOPIC,
                                            "-r", "4", "-w", "4")
    assert [b["ok"] for b in created["brokers"]] == [True]

    async def routed() -> bool:
        return await route(ns, TOPIC) is not None
    await eventually(routed, 60, "the Java broker registered the topic")
    await _produce_and_consume(ns)

    # clusterList: the same brokers, ids, addresses and versions. A slave that boots late on a busy
    # machine can register between the two reads: both are read again until they show every broker.
    rows: list[list[list[str]]] = []

    async def same_cluster() -> bool:
        our_cluster = await trio.to_thread.run_sync(ours, "clusterList", "-n", ns)
        their_cluster = java.run("clusterList", "-n", ns)["stdout"]
        rows[:] = [sorted([b["cluster"], b["brokerName"], str(b["brokerId"]), b["addr"], b["version"]]
                          for b in our_cluster["brokers"]),
                   sorted(r[:5] for c in ("Java4", "Java5") for r in java_rows(their_cluster, c))]
        return rows[0] == rows[1] and len(rows[0]) == len(java_cluster.brokers)
    with trio.move_on_after(90):
        while not await same_cluster():
            await trio.sleep(1)
    our_rows, their_rows = rows
    assert len(our_rows) == len(java_cluster.brokers), our_rows
    assert our_rows == their_rows

    # topicRoute: the same route object.
    our_route = await trio.to_thread.run_sync(ours, "topicRoute", "-n", ns, "-t", TOPIC)
    their_route = fastjson.loads(java.run("topicRoute", "-n", ns, "-t", TOPIC)["stdout"])
    for obj in (our_route, their_route):
        for data in obj["brokerDatas"]:
            data["brokerAddrs"] = {str(k): v for k, v in data["brokerAddrs"].items()}
    assert our_route["brokerDatas"] == their_route["brokerDatas"]
    assert our_route["queueDatas"] == their_route["queueDatas"]

    # topicStatus: each queue's min and max offsets.
    our_status = await trio.to_thread.run_sync(ours, "topicStatus", "-n", ns, "-t", TOPIC)
    their_status = java.run("topicStatus", "-n", ns, "-t", TOPIC)["stdout"]
    assert sorted([q["brokerName"], str(q["queueId"]), str(q["minOffset"]), str(q["maxOffset"])]
                  for q in our_status["queues"]) == sorted(r[:4] for r in java_rows(their_status, master.broker_name))
    assert sum(q["maxOffset"] for q in our_status["queues"]) == COUNT

    # consumerProgress: each queue's broker and consumer offsets, and the diff total.
    async def committed() -> bool:
        progress = await trio.to_thread.run_sync(ours, "consumerProgress", "-n", ns, "-g", GROUP)
        return sum(q["consumerOffset"] for q in progress["queues"] if q["topic"] == TOPIC) == COUNT
    await eventually(committed, 60, "the consumer's offsets reached the broker")
    our_progress = await trio.to_thread.run_sync(ours, "consumerProgress", "-n", ns, "-g", GROUP)
    their_progress = java.run("consumerProgress", "-n", ns, "-g", GROUP)["stdout"]
    assert sorted([q["topic"], q["brokerName"], str(q["queueId"]), str(q["brokerOffset"]), str(q["consumerOffset"])]
                  for q in our_progress["queues"]) == \
        sorted(r[:5] for r in java_rows(their_progress, TOPIC) + java_rows(their_progress, f"%RETRY%{GROUP}"))
    total = re.search(r"^(?:Consume )?Diff Total:\s*(\d+)", their_progress, re.M)
    assert total and int(total.group(1)) == our_progress["diffTotal"] == 0, their_progress
