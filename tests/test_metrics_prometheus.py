"""A real Prometheus server scraping a local cluster started with ``mqadmin start --metrics``.

The cluster's own ``prometheus.yml`` (file-based discovery) is what Prometheus
runs on, as a user would run it. A broker is killed with ``mqadmin
killBroker``, and PromQL through Prometheus's HTTP API must show, on every
NameServer, one broker fewer alive and the removal's reason
``connection_closed``. A restarted NameServer comes back on a new metrics
port and is found again through the rewritten targets file. Every query
of the Grafana dashboard must be accepted by Prometheus. No wall-clock
assertion: each condition is polled with a bounded deadline.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.mqadmin_procs import cli_env, mqadmin, running_cluster
from tests.prometheus_server import by_label, query, running_prometheus, until

DASHBOARD = Path(__file__).resolve().parent.parent / "docs" / "grafana" / "namesrv-dashboard.json"


def test_prometheus_sees_a_killed_broker_on_every_namesrv(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "home")
    directory = tmp_path / "cluster"
    with running_cluster(directory, "--metrics", "--register-period", "1000", env=env) as started:
        config = Path(started["prometheusConfig"])
        assert config.is_file()
        procs = {p["name"]: p for p in started["procs"]}
        assert set(procs) == {"namesrv-0", "namesrv-1", "broker-a-0", "broker-b-0"}
        assert all(p["metricsUrl"].startswith("http://127.0.0.1:") for p in procs.values())
        with running_prometheus(config, tmp_path / "prometheus") as prom:
            up = until(prom, "up", lambda r: len(r) == 4 and all(v == 1 for v in by_label(r, "process").values()),
                       what="every NameServer and broker up")
            jobs = {r["metric"]["process"]: r["metric"]["job"] for r in up}
            assert jobs == {"namesrv-0": "rocketmq-namesrv", "namesrv-1": "rocketmq-namesrv",
                            "broker-a-0": "rocketmq-broker", "broker-b-0": "rocketmq-broker"}
            until(prom, "rocketmq_namesrv_active_brokers",
                  lambda r: by_label(r, "process") == {"namesrv-0": 2, "namesrv-1": 2}, what="two brokers alive")

            killed = mqadmin("killBroker", "-b", "broker-a", "--dir", str(directory), env=env)
            assert killed.returncode == 0, killed.stderr

            # brokers alive dropped by one on every NameServer...
            until(prom, "max_over_time(rocketmq_namesrv_active_brokers[10m]) - rocketmq_namesrv_active_brokers",
                  lambda r: by_label(r, "process") == {"namesrv-0": 1, "namesrv-1": 1},
                  what="brokers alive dropped by one on both NameServers")
            # ... because broker-a's connection closed, and for no other reason
            until(prom, 'sum by (process, reason) (rocketmq_namesrv_brokers_removed_total) > 0',
                  lambda r: {(x["metric"]["process"], x["metric"]["reason"]) for x in r}
                  == {("namesrv-0", "connection_closed"), ("namesrv-1", "connection_closed")},
                  what="removal reason connection_closed on both NameServers")
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

            # every dashboard query is valid PromQL
            for panel in json.loads(DASHBOARD.read_text())["panels"]:
                for target in panel["targets"]:
                    query(prom, target["expr"])  # AssertionError if Prometheus refuses it
            assert query(prom, "rocketmq_namesrv_up") and query(prom, "rocketmq_broker_stub_up")
