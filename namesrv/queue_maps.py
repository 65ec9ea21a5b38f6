"""A topic's queue-data map (broker name -> QueueData), shared between topics and never changed in place.

The brokers of a cluster usually serve the same topics with the same
settings, so thousands of topics hold equal maps. The route table lets them
hold one map object: a change to a topic's map replaces the map (a new
dict) and leaves the old one alone, and the topics that shared the old map
get one shared successor (:class:`Successors`). A broker joining a cluster
of 10,000 topics then builds a handful of maps instead of 10,000 copies,
and a reader holding a map (a query of the state before a sliced
registration, a snapshot capture) sees it whole. Maps are built here; only
:class:`namesrv.routes.RouteTable` puts them into the table.
"""

from __future__ import annotations

from namesrv.route_model import QueueData

QueueMap = dict[str, QueueData]


class Successors:
    """The maps that replace old ones for one change of one broker name's queue data.

    Made once per distinct old map (and QueueData), so topics that shared
    a map share its successor. Lives for one change (one registration's
    write, one removal): it keeps every old map it was given alive, so an
    ``id`` it remembers is never reused by another map meanwhile.
    """

    __slots__ = ("name", "latest", "_made")

    def __init__(self, name: str) -> None:
        self.name = name
        #: id(old map) -> (old map, QueueData, successor) of the last with_queue of that map: the
        #: caller's loop may look here first and call with_queue only when it misses (a call per
        #: topic cost more than the copy it saves, as measured on a 10,000-topic join).
        self.latest: dict[int, tuple[QueueMap | None, QueueData, QueueMap]] = {}
        self._made: dict[tuple[int, int], tuple[QueueMap | None, QueueMap]] = {}

    def with_queue(self, old: QueueMap | None, qd: QueueData) -> QueueMap:
        """``old`` with this name's QueueData set to ``qd`` (its place in the order kept)."""
        latest = self.latest.get(id(old))
        if latest is not None and latest[1] is qd:
            return latest[2]
        key = (id(old), id(qd))
        made = self._made.get(key)
        if made is None:
            made = self._made[key] = (old, {**old, self.name: qd} if old else {self.name: qd})
        self.latest[id(old)] = (old, qd, made[1])
        return made[1]

    def without(self, old: QueueMap) -> QueueMap:
        """``old`` without this name's QueueData (empty: the topic leaves the table)."""
        key = (id(old), 0)
        made = self._made.get(key)
        if made is None:
            name = self.name
            made = self._made[key] = (old, {n: qd for n, qd in old.items() if n != name})
        return made[1]
