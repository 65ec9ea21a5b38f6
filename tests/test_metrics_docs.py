"""docs/metrics.md and the Grafana dashboard against live scrapes of both servers.

The metric tables and a scrape must agree both ways (every family scraped is
documented, every documented metric is scraped), with the documented type
and labels; every metric the dashboard queries must be in a scrape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from remoting import requests as rq
from remoting.codes import ResponseCode
from remoting.transport import connect
from tests.broker_wire import create_topic, pull, send_v2
from tests.metrics_scrape import Scrape, until
from tests.procs import NamesrvProcess

if TYPE_CHECKING:
    from tests.broker_procs import BrokerProcess

pytest_plugins = ("tests.broker_procs",)  # the start_broker fixture

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "metrics.md"
DASHBOARD = ROOT / "docs" / "grafana" / "namesrv-dashboard.json"
ROW = re.compile(r"^\| `([a-z_]+)` \| (counter|gauge|histogram) \|([^|]*)\|")
METRIC = re.compile(r"\b((?:rocketmq|process)_[a-z0-9_]+)\b")


def documented() -> dict[str, dict[str, tuple[str, set[str]]]]:
    """Section ("NameServer", "Broker stub", "Both: the process") -> metric -> (type, label names)."""
    out: dict[str, dict[str, tuple[str, set[str]]]] = {}
    section = ""
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        match = ROW.match(line)
        if match:
            labels = set(re.findall(r"`([a-z_]+)`", match.group(3)))
            out.setdefault(section, {})[match.group(1)] = (match.group(2), labels)
    return out


def scraped(got: Scrape) -> dict[str, tuple[str, set[str]]]:
    """Metric as queried (counters with _total) -> (type, label names seen on its samples)."""
    out: dict[str, tuple[str, set[str]]] = {}
    for family, kind in got.families.items():
        name = family + "_total" if kind == "counter" else family
        labels: set[str] = set()
        for (sample, pairs) in got.samples:
            if sample == name or (kind == "histogram" and sample.startswith(family + "_")):
                labels.update(k for k, _ in pairs if k != "le")
        out[name] = (kind, labels)
    return out


def compare(doc: dict[str, tuple[str, set[str]]], live: dict[str, tuple[str, set[str]]], what: str) -> None:
    assert sorted(set(live) - set(doc)) == [], f"{what}: scraped but not in docs/metrics.md"
    assert sorted(set(doc) - set(live)) == [], f"{what}: in docs/metrics.md but not scraped"
    for name, (kind, labels) in live.items():
        doc_kind, doc_labels = doc[name]
        assert kind == doc_kind, f"{name}: scraped as a {kind}, documented as a {doc_kind}"
        if labels:  # (a family without samples yet shows no labels)
            assert labels == doc_labels, f"{name}: scraped with labels {sorted(labels)}, documented {sorted(doc_labels)}"


async def live_scrapes(start_namesrv: Callable[..., NamesrvProcess],
                       start_broker: Callable[..., BrokerProcess]) -> tuple[Scrape, Scrape]:
    """A NameServer and a broker stub with metrics, after some traffic of every kind."""
    ns = start_namesrv(metricsPort=-1, routeSnapshotIntervalMillis=100)
    broker = start_broker(namesrvAddr=ns.addr, metricsPort=-1)
    async with connect(broker.addr) as client:
        assert (await client.invoke(create_topic("DocTopic"))).code == ResponseCode.SUCCESS
        assert (await client.invoke(send_v2("DocTopic", b"hello", ""))).code == ResponseCode.SUCCESS
        assert (await client.invoke(pull("DocTopic", 0, 0))).code == ResponseCode.SUCCESS
    async with connect(ns.addr) as client:
        for _ in range(16):  # route queries are timed one in 16
            await client.invoke(rq.get_route("DocTopic"))
    names = await until(ns.metrics_url, lambda s: s.get("rocketmq_namesrv_active_brokers") == 1
                        and ("rocketmq_namesrv_snapshot_age_seconds", ()) in s.samples, what="broker and snapshot")
    stub = await until(broker.metrics_url, lambda s: s.total("rocketmq_messages_out_total") == 1, what="pull counted")
    return names, stub


async def test_the_metrics_tables_match_live_scrapes(start_namesrv: Callable[..., NamesrvProcess],
                                                      start_broker: Callable[..., BrokerProcess]) -> None:
    doc = documented()
    assert set(doc) >= {"NameServer", "Broker stub", "Both: the process"}, sorted(doc)
    names, stub = await live_scrapes(start_namesrv, start_broker)
    compare({**doc["NameServer"], **doc["Both: the process"]}, scraped(names), "NameServer")
    compare({**doc["Broker stub"], **doc["Both: the process"]}, scraped(stub), "broker stub")


async def test_every_metric_the_dashboard_queries_is_scraped(start_namesrv: Callable[..., NamesrvProcess],
                                                              start_broker: Callable[..., BrokerProcess]) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels) >= 10
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    assert all(p["targets"] and p["gridPos"]["w"] > 0 for p in panels)
    queried = {m for e in exprs for m in METRIC.findall(e)}
    names, _ = await live_scrapes(start_namesrv, start_broker)
    assert queried, exprs
    assert sorted(queried - names.sample_names()) == []
