"""The route table's durable state: captured on the loop, exported off it, restored on start.

Kept apart from ``routes.py`` so the table stays free of files and formats;
these functions read the table, and a restore hands it the new state
(:meth:`namesrv.routes.RouteTable.replace_state`), which the table writes
itself. The work is split in three for the event loop's sake:

* :class:`Capture` runs on the loop, in steps of 5,000 topics, and keeps
  each distinct queue-data set once (most topics of a cluster share one)
  plus a name and an index per topic: a 100,000-topic, two-broker table
  takes a few tens of ms in all on the development machine, one to a few
  ms at a time;
* :func:`export` turns that copy into plain msgpack-ready data, in the
  writer's worker thread with the encoding and the write;
* :func:`restore` rebuilds a table from that data before the server listens,
  checking every value, and changes nothing unless all of it is valid.

What is kept: brokers (cluster, name, addresses by id, acting-master flag,
zone), cluster membership, topic queue data, static-topic mappings, filter
servers, and for each live broker its id, data version, heartbeat timeout,
HA address and the digest of the register body it last sent, so that its
first unchanged re-registration after a restart is as cheap as any other.
What is not: liveness times (monotonic, meaningless in another process) and
connections. A restored broker counts as heard from at the restore and has
no connection: it expires under its own heartbeat timeout unless it
registers again, which replaces its entry as any registration does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from namesrv.routes import BrokerEntry, LiveBroker, QueueData, RouteTable
from remoting.bodies import DataVersion

#: One live broker as captured: (cluster, addr, name, brokerId, timeoutMs,
#: counter, timestamp, stateVersion, haServerAddr, bodyDigest, topicCount,
#: appliedAsWriter, stale, provisionalSince). ``stale``: a topic of it was
#: removed since it last registered, so its next registration must re-apply
#: its body even if unchanged. ``provisionalSince``: for an entry restored and
#: not registered since, the wall-clock ms of the restore that first brought
#: it back (else None), so that a NameServer restarting again and again does
#: not keep a dead broker alive: its timeout runs from that first restore.
LiveRecord = tuple[str, str, str, int, int, int, int, int, str | None, bytes | None, int, bool, bool, int | None]


class StateError(ValueError):
    """Exported state that cannot be restored; the text names the part."""


@dataclass(slots=True)
class Captured:
    """A structural copy of the table, taken on the loop (see :func:`capture`)."""

    topics: list[str]
    queue_sets: list[tuple[QueueData, ...]]  # each distinct (ordered) set of queue data, once
    topic_sets: list[int]  # per topic, its index in queue_sets
    brokers: list[tuple[str, str, dict[int, str], bool, str | None]]
    clusters: list[tuple[str, list[str]]]
    live: list[LiveRecord]
    filter_servers: list[tuple[str, str, list[str]]]
    mappings: list[tuple[str, dict[str, dict[str, Any]]]]


@dataclass(slots=True)
class Restored:
    """What a restore put in the table; the entries are the table's own objects.

    A broker is provisional while ``table.live[key] is entries[key]``: any
    registration replaces the object, so identity says "not registered since".
    """

    brokers: int
    topics: int
    entries: dict[tuple[str, str], LiveBroker] = field(default_factory=dict)
    since: dict[tuple[str, str], int] = field(default_factory=dict)  # key -> provisional since (wall ms)

    def provisional(self, table: RouteTable) -> list[LiveBroker]:
        live = table.live
        return [b for key, b in self.entries.items() if live.get(key) is b]

    def is_provisional(self, table: RouteTable, key: tuple[str, str]) -> bool:
        entry = self.entries.get(key)
        return entry is not None and table.live.get(key) is entry


def live_records(table: RouteTable, restored: Restored | None = None) -> list[LiveRecord]:
    """The durable part of every live entry; also what the writer compares to spot a change."""
    entries = restored.entries if restored is not None else {}
    since = restored.since if restored is not None else {}
    return [
        (
            b.cluster, b.addr, b.name, b.broker_id, int(b.timeout_ms),
            b.data_version.counter, b.data_version.timestamp, b.data_version.state_version,
            b.ha_server_addr, b.body_digest, b.topic_count, b.applied_as_writer,
            b.applied_epoch != table.removal_epoch(b.name),
            since.get(key) if entries.get(key) is b else None,
        )
        for key, b in table.live.items()
    ]


#: Topics copied per step of a capture: one to a few ms of the loop per step.
CAPTURE_CHUNK = 5_000


class Capture:
    """A capture in steps, so the event loop can serve requests between them.

    :meth:`step` reads the next ``chunk`` topics and records each as an index
    into the distinct queue-data sets seen so far (most topics of a cluster
    share one), so a capture allocates next to nothing per topic: a large
    table does not feed the garbage collector, whose full passes over a
    100,000-topic heap would stall the loop far longer than the copy itself.
    :meth:`finish` copies the rest, which is small (brokers, clusters, live
    entries, filter servers, mappings). A change made between steps may be
    missed or half seen (a topic removed or added meanwhile); the writer
    compares ``table.generation`` as of the first step, so such a snapshot is
    rewritten one interval later, and a restore drops queue data of brokers
    it does not know.
    """

    def __init__(
        self,
        table: RouteTable,
        chunk: int = CAPTURE_CHUNK,
        restored: Restored | None = None,
        topics_of: Captured | None = None,
    ) -> None:
        """``topics_of``: an earlier capture whose topics the table still holds (its generation has
        not moved since): its topic lists are taken as they are (they are never changed) and no
        topic is read again, so a capture after a change of live entries only (a broker's new
        data version, the usual re-registration) costs next to nothing on the loop."""
        self.table = table
        self.restored = restored
        self.chunk = chunk
        self.pos = 0
        self._index: dict[tuple[QueueData, ...], int] = {}
        # The topics as queries see them (see RouteTable.queues), unless they are reused.
        self.names: list[str] = table.all_topics() if topics_of is None else []
        self.topics: list[str] = [] if topics_of is None else topics_of.topics
        self.sets: list[tuple[QueueData, ...]] = [] if topics_of is None else topics_of.queue_sets
        self.refs: list[int] = [] if topics_of is None else topics_of.topic_sets

    def step(self) -> bool:
        """Read the next chunk; True while topics remain."""
        get = self.table.queues
        index, sets, topics, refs = self._index, self.sets, self.topics, self.refs
        for name in self.names[self.pos:self.pos + self.chunk]:
            qmap = get(name)
            if not qmap:  # removed since the capture began
                continue
            key = tuple(qmap.values())  # freed at once unless it is a new set
            i = index.get(key)
            if i is None:
                i = index[key] = len(sets)
                sets.append(key)
            topics.append(name)
            refs.append(i)
        self.pos += self.chunk
        return self.pos < len(self.names)

    def finish(self) -> Captured:
        table = self.table
        return Captured(
            topics=self.topics,
            queue_sets=self.sets,
            topic_sets=self.refs,
            brokers=[(b.cluster, b.name, dict(b.addrs), b.enable_acting_master, b.zone_name)
                     for b in table.brokers.values()],
            clusters=[(c, list(names)) for c, names in table.clusters.items()],
            live=live_records(table, self.restored),
            filter_servers=[(c, a, list(s)) for (c, a), s in table.filter_servers.items()],
            # mapping infos are replaced, never changed in place, so two levels of copy suffice
            mappings=[(t, dict(m)) for t, m in table.mappings.items()],
        )


def capture(table: RouteTable) -> Captured:
    """The whole capture at once (consistent: nothing runs in between)."""
    return capture_with(table, None)


def capture_with(table: RouteTable, restored: Restored | None) -> Captured:
    """:func:`capture`, keeping when the still provisional entries of ``restored`` were first restored."""
    c = Capture(table, chunk=max(1, len(table.topic_queues)), restored=restored)
    while c.step():
        pass
    return c.finish()


def export(c: Captured) -> dict[str, Any]:
    """Plain data (lists, dicts, str, int, bytes) for msgpack; pure, safe in a worker thread."""
    return {
        "brokers": [list(b) for b in c.brokers],
        "clusters": [[name, names] for name, names in c.clusters],
        "liveBrokers": [list(r) for r in c.live],
        "queueSets": c.queue_sets,
        "topics": c.topics,
        "topicQueueSets": c.topic_sets,
        "filterServers": [list(f) for f in c.filter_servers],
        "mappings": [[t, m] for t, m in c.mappings],
    }


# ----------------------------------------------------------------------
# restore: every value checked, the table changed only at the end


def _list(v: Any, what: str, size: int | None = None) -> list[Any]:
    if not isinstance(v, list) or (size is not None and len(v) != size):
        raise StateError(f"{what}: expected a list{'' if size is None else f' of {size}'}")
    return v


def _str(v: Any, what: str) -> str:
    if type(v) is not str:
        raise StateError(f"{what}: expected a string")
    return v


def _opt_str(v: Any, what: str) -> str | None:
    return None if v is None else _str(v, what)


def _int(v: Any, what: str) -> int:
    if type(v) is not int:
        raise StateError(f"{what}: expected an integer")
    return v


def _bool(v: Any, what: str) -> bool:
    if type(v) is not bool:
        raise StateError(f"{what}: expected true or false")
    return v


def _queue_set(raw: Any, i: int) -> tuple[QueueData, ...]:
    entries = _list(raw, f"queueSets[{i}]")
    if not entries:
        raise StateError(f"queueSets[{i}]: empty")
    out = []
    for qd in entries:
        name, r, w, p, s = _list(qd, f"queueSets[{i}] entry", 5)
        out.append((_str(name, "queue brokerName"), _int(r, "readQueueNums"), _int(w, "writeQueueNums"),
                    _int(p, "perm"), _int(s, "topicSysFlag")))
    return tuple(out)


def _live(raw: Any, now: float, wall_ms: int) -> tuple[tuple[str, str], LiveBroker, int]:
    """(key, entry, provisional since): heard from at ``now``, or at its first restore if still provisional."""
    (cluster, addr, name, bid, timeout, counter, stamp, state, ha, digest, count, writer, stale, since) = _list(
        raw, "liveBrokers entry", 14)
    if digest is not None and type(digest) is not bytes:
        raise StateError("liveBrokers entry: bodyDigest must be bytes")
    since = wall_ms if since is None else min(_int(since, "provisionalSince"), wall_ms)
    info = LiveBroker(
        cluster=_str(cluster, "clusterName"),
        addr=_str(addr, "brokerAddr"),
        name=_str(name, "brokerName"),
        broker_id=_int(bid, "brokerId"),
        last_update_ms=now - (wall_ms - since),
        timeout_ms=_int(timeout, "heartbeatTimeoutMillis"),
        data_version=DataVersion(_int(counter, "counter"), _int(stamp, "timestamp"), _int(state, "stateVersion")),
        conn=None,
        ha_server_addr=_opt_str(ha, "haServerAddr"),
        body_digest=digest,
        topic_count=_int(count, "topicCount"),
        applied_as_writer=_bool(writer, "appliedAsWriter"),
        # the restored table starts every removal epoch at 0; -1 never matches it
        applied_epoch=-1 if _bool(stale, "stale") else 0,
    )
    return (info.cluster, info.addr), info, since


def restore(table: RouteTable, state: Any, now: float, wall_ms: int) -> Restored:
    """Fill an empty ``table`` from :func:`export`'s data; StateError (table untouched) if any of it is bad.

    ``now`` is the table's clock at the restore and ``wall_ms`` the wall
    clock: every restored broker counts as heard from then, except one that
    an earlier restore brought back and that has not registered since, which
    counts from that earlier restore.
    """
    if not isinstance(state, dict):
        raise StateError("the state is not a mapping")
    brokers: dict[str, BrokerEntry] = {}
    for raw in _list(state.get("brokers"), "brokers"):
        cluster, name, addrs, acting, zone = _list(raw, "brokers entry", 5)
        if not isinstance(addrs, dict):
            raise StateError("brokers entry: brokerAddrs must be a mapping")
        entry = BrokerEntry(_str(cluster, "cluster"), _str(name, "brokerName"),
                            {_int(i, "brokerId"): _str(a, "brokerAddr") for i, a in addrs.items()},
                            _bool(acting, "enableActingMaster"), _opt_str(zone, "zoneName"))
        brokers[entry.name] = entry
    clusters: dict[str, dict[str, None]] = {}
    for raw in _list(state.get("clusters"), "clusters"):
        cluster, names = _list(raw, "clusters entry", 2)
        clusters[_str(cluster, "cluster")] = {_str(n, "cluster member"): None for n in _list(names, "cluster members")}
    live: dict[tuple[str, str], LiveBroker] = {}
    since: dict[tuple[str, str], int] = {}
    for raw in _list(state.get("liveBrokers"), "liveBrokers"):
        key, info, since[key] = _live(raw, now, wall_ms)
        live[key] = info

    interned: dict[QueueData, QueueData] = {}
    sets = [_queue_set(raw, i) for i, raw in enumerate(_list(state.get("queueSets"), "queueSets"))]
    # queue data of a broker the snapshot does not list (a capture that overlapped its removal) is dropped
    templates = [{qd[0]: interned.setdefault(qd, qd) for qd in qs if qd[0] in brokers} for qs in sets]
    topics = _list(state.get("topics"), "topics")
    refs = _list(state.get("topicQueueSets"), "topicQueueSets")
    if len(topics) != len(refs):
        raise StateError("topics and topicQueueSets differ in length")
    if not all(type(t) is str for t in topics):
        raise StateError("topics: expected strings")
    if refs and not (all(type(i) is int for i in refs) and 0 <= min(refs) and max(refs) < len(templates)):
        raise StateError("topicQueueSets: index out of range")
    # topics of one queue set share its map (the table replaces maps, never changes one: namesrv.queue_maps)
    topic_queues = {t: templates[i] for t, i in zip(topics, refs) if templates[i]}

    filter_servers: dict[tuple[str, str], list[str]] = {}
    for raw in _list(state.get("filterServers", []), "filterServers"):
        cluster, addr, servers = _list(raw, "filterServers entry", 3)
        filter_servers[(_str(cluster, "cluster"), _str(addr, "brokerAddr"))] = [
            _str(s, "filter server") for s in _list(servers, "filter servers")]
    mappings: dict[str, dict[str, dict[str, Any]]] = {}
    for raw in _list(state.get("mappings", []), "mappings"):
        topic, per_broker = _list(raw, "mappings entry", 2)
        if not isinstance(per_broker, dict) or not all(type(k) is str and isinstance(v, dict) for k, v in per_broker.items()):
            raise StateError("mappings entry: expected a mapping of broker name to mapping info")
        if _str(topic, "mapping topic") in topic_queues:
            mappings[topic] = per_broker

    # all valid: the table takes the new state
    table.replace_state(brokers=brokers, clusters=clusters, live=live, topic_queues=topic_queues,
                        filter_servers=filter_servers, mappings=mappings, interned=interned)
    return Restored(brokers=len(live), topics=len(topic_queues), entries=dict(live), since=since)
