"""Each NameServer's metrics over a scenario run: a scrape a second, the few series that tell the story.

With ``mqadmin scenario run --metrics`` every process of the run's cluster
serves ``/metrics``; this scrapes each NameServer once a second and keeps,
per scrape, brokers alive, brokers removed by reason, registrations by
outcome and route queries (every result). A scrape that fails (the
NameServer is down) is kept as ``up: 0``. A restarted NameServer has a new
metrics port: the address is read from the cluster's record at every
scrape, so it is found again. Samples are bounded by the run's duration.
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass, field
from typing import Any

import trio
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from mqadmin.localcluster.state import Proc
from mqadmin.output.tables import Col, fit_table

INTERVAL = 1.0
SCRAPE_TIMEOUT = 2.0
#: Report key -> (sample name, the label that splits it, or None for one number).
STORY: dict[str, tuple[str, str | None]] = {
    "activeBrokers": ("rocketmq_namesrv_active_brokers", None),
    "brokersRemoved": ("rocketmq_namesrv_brokers_removed_total", "reason"),
    "registrations": ("rocketmq_namesrv_registration_events_total", "result"),
    "routeQueries": ("rocketmq_namesrv_requests_total", None),  # code 105, every result
}
ROUTE_CODE = "105"


def story_of(text: str) -> dict[str, Any]:
    """The story's values in one scrape's text."""
    out: dict[str, Any] = {key: ({} if split else 0) for key, (_, split) in STORY.items()}
    wanted = {name: key for key, (name, _) in STORY.items()}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = wanted.get(sample.name)
            if key is None:
                continue
            split = STORY[key][1]
            if key == "routeQueries":
                if sample.labels.get("code") == ROUTE_CODE:
                    out[key] += int(sample.value)
            elif split is None:
                out[key] = int(sample.value)
            else:
                out[key][sample.labels.get(split, "")] = int(sample.value)
    return out


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT) as resp:
        return str(resp.read().decode())


@dataclass
class MetricsWatch:
    """Scrapes ``namesrvs`` (the cluster record's own objects) every INTERVAL from ``t0`` (trio time)."""

    namesrvs: list[Proc]
    t0: float
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    async def run(self) -> None:
        """One loop per NameServer, so a hung one (SIGSTOP: its scrape times out) delays no other."""
        async with trio.open_nursery() as nursery:
            for proc in self.namesrvs:
                nursery.start_soon(self._watch, proc)

    async def _watch(self, proc: Proc) -> None:
        next_at = trio.current_time()
        while True:
            await self._scrape(proc, trio.current_time() - self.t0)
            next_at += INTERVAL
            await trio.sleep_until(max(next_at, trio.current_time()))

    async def _scrape(self, proc: Proc, t: float) -> None:
        sample: dict[str, Any] = {"t": round(t, 3), "up": 0}
        if proc.metrics_port:
            try:
                text = await trio.to_thread.run_sync(_fetch, f"http://127.0.0.1:{proc.metrics_port}/metrics")
                sample.update(story_of(text), up=1)
            except (OSError, ValueError):
                pass  # down, restarting, or not answering in time: up 0
        self.samples.setdefault(proc.name, []).append(sample)

    def to_json(self) -> dict[str, Any]:
        return {"interval": INTERVAL, "series": list(STORY), "namesrvs": self.samples}


def render(watch: MetricsWatch | None, console: Console) -> None:
    """One row per NameServer: brokers alive (first, lowest, last), removals and registrations at the end."""
    if watch is None or not watch.samples:
        return
    rows = []
    for name, samples in sorted(watch.samples.items()):
        up = [s for s in samples if s["up"]]
        if not up:
            rows.append([name, "never answered", "", "", ""])
            continue
        alive = [s["activeBrokers"] for s in up]
        last = up[-1]
        removed = ", ".join(f"{k} {v}" for k, v in sorted(last["brokersRemoved"].items()) if v) or "none"
        registered = ", ".join(f"{k} {v}" for k, v in sorted(last["registrations"].items()) if v) or "none"
        rows.append([name, f"{alive[0]} / {min(alive)} / {alive[-1]}", removed, registered,
                     f"{last['routeQueries']} ({len(samples) - len(up)} scrapes failed)"])
    console.print()
    console.print(fit_table([Col("namesrv"), Col("brokers alive: first / lowest / last"), Col("removed", wrap=True),
                             Col("registrations", wrap=True, drop=1), Col("route queries", drop=2)],
                            rows, title=f"NameServer metrics (scraped every {INTERVAL:g} s)", console=console))
