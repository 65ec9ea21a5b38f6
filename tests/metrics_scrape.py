"""Scrapes of a server's ``/metrics``, read with prometheus_client's own parser (what Prometheus reads)."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

import trio
from prometheus_client.parser import text_string_to_metric_families


@dataclass
class Scrape:
    text: str
    #: family name (as the text's TYPE line names it, without _total for counters) -> type
    families: dict[str, str]
    #: (sample name, sorted label pairs) -> value
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]

    def value(self, name: str, **labels: str) -> float:
        """The sample's value; KeyError (listing the name's samples) if there is none."""
        key = (name, tuple(sorted(labels.items())))
        if key not in self.samples:
            have = [k for k in self.samples if k[0] == name]
            raise KeyError(f"no sample {name}{labels}; samples of that name: {have}")
        return self.samples[key]

    def get(self, name: str, default: float = 0.0, **labels: str) -> float:
        return self.samples.get((name, tuple(sorted(labels.items()))), default)

    def series(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Every sample of ``name``, by labels."""
        return {labels: v for (n, labels), v in self.samples.items() if n == name}

    def total(self, name: str, **match: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``match``."""
        return sum(v for labels, v in self.series(name).items() if set(match.items()) <= set(labels))

    def sample_names(self) -> set[str]:
        return {name for name, _ in self.samples}


def parse(text: str) -> Scrape:
    families, samples = {}, {}
    for family in text_string_to_metric_families(text):
        families[family.name] = family.type
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return Scrape(text, families, samples)


def fetch(url: str, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain; version=")  # the text format
        return resp.read().decode()


def scrape_sync(url: str) -> Scrape:
    return parse(fetch(url))


async def scrape(url: str) -> Scrape:
    return parse(await trio.to_thread.run_sync(fetch, url))


async def until(url: str, check, timeout: float = 30.0, what: str = "condition") -> Scrape:  # type: ignore[no-untyped-def]
    """Scrape until ``check(scrape)`` holds (bounded); returns that scrape."""
    deadline = trio.current_time() + timeout
    while True:
        got = await scrape(url)
        if check(got):
            return got
        if trio.current_time() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s; last scrape:\n{got.text}")
        await trio.sleep(0.1)
