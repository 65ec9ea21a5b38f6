"""``mqadmin scenario run --metrics``: the report carries each NameServer's metrics over the run."""

from __future__ import annotations

import json
from pathlib import Path

from mqadmin.scenario.metrics_watch import STORY, story_of
from tests.test_scenario_run import base, cluster_procs, finish, start_cli  # noqa: F401  (base: a fixture)


def test_story_of_reads_the_series_from_a_scrape() -> None:
    text = (
        "# TYPE rocketmq_namesrv_active_brokers gauge\nrocketmq_namesrv_active_brokers 3.0\n"
        "# TYPE rocketmq_namesrv_brokers_removed_total counter\n"
        'rocketmq_namesrv_brokers_removed_total{reason="expired"} 2.0\n'
        "# TYPE rocketmq_namesrv_requests_total counter\n"
        'rocketmq_namesrv_requests_total{code="105",class="route-read",result="success"} 7.0\n'
        'rocketmq_namesrv_requests_total{code="105",class="route-read",result="topic_not_exist"} 1.0\n'
        'rocketmq_namesrv_requests_total{code="106",class="route-read",result="success"} 5.0\n'
    )
    assert story_of(text) == {"activeBrokers": 3, "brokersRemoved": {"expired": 2}, "registrations": {},
                              "routeQueries": 8}


def test_a_crash_scenario_report_shows_brokers_alive_and_the_removal(base: Path) -> None:  # noqa: F811
    out_json = base / "report.json"
    proc = start_cli("scenario", "run", "broker-crash", "--metrics", "--report", str(out_json), base=base)
    rc, out, err = finish(proc, timeout=120)
    assert cluster_procs(base) == []
    assert rc == 0, err[-2000:]
    assert "metrics: watch the run with prometheus --config.file=" in err
    assert "NameServer metrics (scraped every 1 s)" in out
    metrics = json.loads(out_json.read_text())["metrics"]
    assert metrics["interval"] == 1.0 and metrics["series"] == list(STORY)
    assert set(metrics["namesrvs"]) == {"namesrv-0", "namesrv-1"}
    for name, samples in metrics["namesrvs"].items():
        assert len(samples) >= 8, (name, samples)  # a 10 s run, one scrape a second
        assert all(s["up"] == 1 for s in samples), name
        assert samples[0]["activeBrokers"] == 2 and samples[-1]["activeBrokers"] == 1, name
        assert samples[0]["brokersRemoved"]["connection_closed"] == 0
        assert samples[-1]["brokersRemoved"] == {"connection_closed": 1, "expired": 0, "unregistered": 0}
        assert samples[-1]["registrations"]["applied"] >= 2  # both brokers
        assert samples[-1]["routeQueries"] > samples[0]["routeQueries"]  # producers polled routes
        times = [s["t"] for s in samples]
        assert times == sorted(times) and times[0] < 1.0
