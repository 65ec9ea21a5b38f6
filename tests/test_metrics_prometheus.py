"""A real Prometheus server scraping a local cluster started with ``mqadmin start --metrics``.

The cluster's own ``prometheus.yml`` (file-based discovery) is what Prometheus
runs on, as a user would run it. A broker is killed with ``mqadmin
killBroker``, and PromQL through Prometheus's HTTP API must show, on every
NameServer, one broker fewer alive and the removal's reason
``connection_closed``, through the Grafana dashboard's own panel queries.
A restarted NameServer comes back on a new metrics port and is found again
through the rewritten targets file. After route queries and an oversized
frame, every query of every dashboard panel must give Prometheus at least
one series with a number (no empty panel, no NaN). No wall-clock assertion:
each condition is polled with a bounded deadline. One Prometheus server and
one cluster for the module: they take most of its time.
"""

from __future__ import annotations

import io
import json
import math
import socket
import struct
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from broker_stub.topics import SELF_TEST_TOPIC  # every broker stub serves it
from mqadmin.commands.localcluster import summary
from mqadmin.localcluster.state import ClusterState
from tests.mqadmin_procs import cli_env, mqadmin, running_cluster
from tests.prometheus_server import by_label, query, running_prometheus, until

DASHBOARD = Path(__file__).resolve().parent.parent / "docs" / "grafana" / "namesrv-dashboard.json"


def panel_queries() -> dict[str, list[str]]:
    """The dashboard's panels: title -> PromQL of each target."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return {p["title"]: [t["expr"] for t in p["targets"]] for p in panels}


def printed_summary(directory: Path) -> str:
    console = Console(width=400, record=True, file=io.StringIO())
    console.print(summary(ClusterState.load(directory), directory))
    return console.export_text()


def has_number(results: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(r["value"][1])) for r in results)


def oversized_frame(addr: str) -> None:
    """A frame announcing 1 GiB: the NameServer closes this one connection (limit ``frame_size``)."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(struct.pack(">I", 1 << 30) + b"\0" * 64)
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass  # closed with a reset: as good as an orderly close


def test_prometheus_sees_a_killed_broker_on_every_namesrv(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "home")
    directory = tmp_path / "cluster"
    with running_cluster(directory, "--metrics", "--register-period", "1000", env=env) as started:
        config = Path(started["prometheusConfig"])
        assert config.is_file()
        procs = {p["name"]: p for p in started["procs"] if p["kind"] != "faultproxy"}  # the proxy serves no /metrics
        assert set(procs) == {"namesrv-0", "namesrv-1", "broker-a-0", "broker-b-0"}
        assert all(p["metricsUrl"].startswith("http://127.0.0.1:") for p in procs.values())
        printed = printed_summary(directory)  # what `mqadmin start --metrics` prints without --json
        assert all(f'{name} {p["metricsUrl"]}' in printed for name, p in procs.items()), printed
        assert f"prometheus --config.file={config} " in printed, printed
        with running_prometheus(config, tmp_path / "prometheus") as prom:
            up = until(prom, "up", lambda r: len(r) == 4 and all(v == 1 for v in by_label(r, "process").values()),
                       what="every NameServer and broker up")
            jobs = {r["metric"]["process"]: r["metric"]["job"] for r in up}
            assert jobs == {"namesrv-0": "rocketmq-namesrv", "namesrv-1": "rocketmq-namesrv",
                            "broker-a-0": "rocketmq-broker", "broker-b-0": "rocketmq-broker"}
            panels = panel_queries()
            [alive] = panels["Brokers alive"]
            [removals] = panels["Brokers removed, by reason"]
            until(prom, alive, lambda r: by_label(r, "process") == {"namesrv-0": 2, "namesrv-1": 2},
                  what="two brokers alive")

            killed = mqadmin("killBroker", "-b", "broker-a", "--dir", str(directory), env=env)
            assert killed.returncode == 0, killed.stderr

            # brokers alive dropped by one on every NameServer...
            until(prom, "max_over_time(rocketmq_namesrv_active_brokers[10m]) - rocketmq_namesrv_active_brokers",
                  lambda r: by_label(r, "process") == {"namesrv-0": 1, "namesrv-1": 1},
                  what="brokers alive dropped by one on both NameServers")
            # ... because broker-a's connection closed, and for no other reason: the dashboard's panel shows it
            until(prom, f"({removals}) > 0",
                  lambda r: {(x["metric"]["process"], x["metric"]["reason"]) for x in r}
                  == {("namesrv-0", "connection_closed"), ("namesrv-1", "connection_closed")},
                  what="removal reason connection_closed on both NameServers")
            until(prom, alive, lambda r: by_label(r, "process") == {"namesrv-0": 1, "namesrv-1": 1},
                  what="one broker alive on the Brokers alive panel")
            removed = query(prom, 'rocketmq_namesrv_brokers_removed_total{reason="connection_closed"}')
            assert by_label(removed, "process") == {"namesrv-0": 1, "namesrv-1": 1}
            until(prom, 'up{process="broker-a-0"}', lambda r: by_label(r, "process") == {"broker-a-0": 0},
                  what="the killed broker's target down")

            # a restarted NameServer gets a new metrics port; the targets file follows, Prometheus too
            old_port = procs["namesrv-0"]["metricsUrl"].split(":")[2].split("/")[0]
            restarted = mqadmin("restartNamesrv", "-i", "0", "--dir", str(directory), env=env)
            assert restarted.returncode == 0, restarted.stderr
            status = json.loads(mqadmin("status", "--dir", str(directory), "--json", env=env).stdout)
            new_url = {p["name"]: p["metricsUrl"] for p in status["procs"]}["namesrv-0"]
            new_instance = new_url.removeprefix("http://").removesuffix("/metrics")
            assert not new_instance.endswith(":" + old_port)
            until(prom, f'up{{process="namesrv-0",instance="{new_instance}"}} == 1', lambda r: len(r) == 1,
                  what="the restarted NameServer found on its new port")

            # traffic for the panels that need some: route queries (the cache panel), a refused frame
            namesrvs = [p["addr"] for p in status["procs"] if p["role"] == "namesrv"]
            assert len(namesrvs) == 2, status["procs"]
            [route_queries] = panels["Route queries"]
            deadline = time.monotonic() + 90
            while True:  # a series' first sample has no rate (the restarted NameServer's counters start
                # at its first scrape): ask again until a later scrape has seen the count grow
                for addr in namesrvs:
                    routed = mqadmin("topicRoute", "-t", SELF_TEST_TOPIC, "-n", addr, "--json", env=env)
                    assert routed.returncode == 0, routed.stderr
                rates = query(prom, route_queries)
                if len(rates) == 2 and all(float(x["value"][1]) > 0 for x in rates):
                    break
                assert time.monotonic() < deadline, f"route queries on both NameServers: last result {rates}"
                time.sleep(1)
            for addr in namesrvs:
                oversized_frame(addr)
            [refused] = panels["Refused by a bound"]
            until(prom, f'({refused}) > 0', lambda r: {x["metric"]["limit"] for x in r} == {"frame_size"},
                  what="the oversized frames refused")

            # every query of every panel: valid PromQL with at least one series that has a number
            for title, exprs in panels.items():
                for expr in exprs:
                    until(prom, expr, has_number, what=f"panel {title!r}: {expr}")
            assert query(prom, "rocketmq_namesrv_up") and query(prom, "rocketmq_broker_stub_up")
