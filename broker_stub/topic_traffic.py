"""Messages and bytes put and pulled per topic, as bounded metric series: the busiest N topics plus ``other``.

A stub may hold thousands of topics; a series per topic would let a client
(auto-creating topics by sending) grow what every scrape carries without
bound. So the metrics name at most ``top`` topics, the busiest ones (by
messages put and pulled, with a five-minute half-life, so the series follow
where the traffic is now), and count the rest under ``other``.

The series stay Prometheus counters, never going down: a topic that gets a
series starts it at zero (its earlier traffic stays counted in ``other``),
and one that loses its series leaves what it counted to ``other``. So
``sum(rate(...))`` over all series is always the broker's whole traffic.

Fed once a second from the statistics' per-second accumulators
(:meth:`broker_stub.stats.BrokerStats.flush`), so it costs nothing per message
and lags by at most a second. At most ``MAX_TOPICS`` topics are tracked (the
least recently active is forgotten first; its traffic stays in the totals).
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict
from collections.abc import Iterable

#: Topics tracked at most (as the statistics' sets).
MAX_TOPICS = 10_000
#: Half-life of a topic's activity score, in seconds.
HALF_LIFE_SECONDS = 300.0
OTHER = "other"
#: Indexes into a topic's counters.
MSGS_IN, BYTES_IN, MSGS_OUT, BYTES_OUT = range(4)

Counts = list[int]


class _Topic:
    __slots__ = ("counts", "score", "stamp")

    def __init__(self) -> None:
        self.counts: Counts = [0, 0, 0, 0]
        self.score = 0.0  # decayed messages in and out, as of ``stamp``
        self.stamp = 0.0


class TopicTraffic:
    def __init__(self, top: int, max_topics: int = MAX_TOPICS) -> None:
        self.top = top
        self.max_topics = max_topics
        self.topics: OrderedDict[str, _Topic] = OrderedDict()  # least recently active first
        self.totals: Counts = [0, 0, 0, 0]
        self.shown: dict[str, Counts] = {}  # topic with a series -> its counts when the series began
        self._decay = math.log(2) / HALF_LIFE_SECONDS

    def add(self, now: float, puts: Iterable[tuple[str, int, int]], gets: Iterable[tuple[str, int, int]]) -> None:
        """One second's traffic: (topic, messages, bytes) put and pulled; ``now`` in seconds."""
        for topic, messages, size in puts:
            self._count(now, topic, MSGS_IN, messages, size)
        for topic, messages, size in gets:
            self._count(now, topic, MSGS_OUT, messages, size)

    def _count(self, now: float, name: str, at: int, messages: int, size: int) -> None:
        topic = self.topics.get(name)
        if topic is None:
            topic = self.topics[name] = _Topic()
            topic.stamp = now
            while len(self.topics) > self.max_topics:
                gone, _ = self.topics.popitem(last=False)
                self.shown.pop(gone, None)
        else:
            self.topics.move_to_end(name)
        topic.counts[at] += messages
        topic.counts[at + 1] += size
        self.totals[at] += messages
        self.totals[at + 1] += size
        topic.score = topic.score * math.exp(-self._decay * (now - topic.stamp)) + messages
        topic.stamp = now

    def forget(self, name: str) -> None:
        """A topic was deleted: no more series for it (its traffic stays in the totals)."""
        self.topics.pop(name, None)
        self.shown.pop(name, None)

    def snapshot(self) -> list[tuple[str, _Topic]]:
        """What :meth:`ranking` reads, copied on the loop (a C-speed copy, about 1 ms per 30,000 topics)."""
        return list(self.topics.items())

    def ranking(self, now: float, topics: list[tuple[str, _Topic]]) -> list[str]:
        """The ``top`` busiest of a :meth:`snapshot` at ``now``: O(topics), so scrapes run it in a worker
        thread (it only reads numbers the loop may be updating; a ranking a second old is as good).
        A topic named ``other`` never gets a series of its own (that is the label of the rest)."""
        decay = self._decay
        return [name for _, name in heapq.nlargest(
            self.top,
            ((t.score * math.exp(-decay * (now - t.stamp)), name) for name, t in topics if t.score > 0 and name != OTHER),
        )]

    def series(self, ranked: list[str]) -> list[tuple[str, Counts]]:
        """(topic or ``other``, counts) for a ranking: the series a scrape shows (see the module doc)."""
        wanted = [name for name in ranked if name in self.topics]
        keep = set(wanted)
        for name in [n for n in self.shown if n not in keep]:
            del self.shown[name]
        out: list[tuple[str, Counts]] = []
        rest = list(self.totals)
        for name in wanted:
            counts = self.topics[name].counts
            base = self.shown.setdefault(name, list(counts))
            values = [c - b for c, b in zip(counts, base)]
            out.append((name, values))
            rest = [r - v for r, v in zip(rest, values)]
        out.append((OTHER, rest))
        return out
