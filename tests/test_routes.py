"""Unit tests of namesrv.routes.RouteTable against the 5.x (5.3.3) semantics of
the protocol reference (sections 5.4-5.21 and 6).

The table is pure state: time is passed as ``now`` (ms) and connections are
plain strings here. Route answers are checked by decoding the encoded bodies,
and every cached answer is also compared with an uncached encoding of the same
state, so a stale cache entry fails a test even where the concrete values
asserted happen not to cover the stale part.
"""

from __future__ import annotations

from typing import Any

import pytest

from namesrv.routes import (
    DEFAULT_BROKER_CHANNEL_EXPIRED_MS,
    UNIT_TOPIC_FLAGS,
    RegisterOutcome,
    Registration,
    Removed,
    RouteOptions,
    RouteTable,
)
from remoting import fastjson
from remoting.bodies import (
    BodyError,
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicRouteData,
)
from remoting.register_body import RegisterBody

C1 = "cluster-1"
C2 = "cluster-2"
A0 = "10.0.0.1:10911"  # broker-a master
A1 = "10.0.0.2:10911"  # broker-a slave
A2 = "10.0.0.3:10911"  # broker-a second slave / rival master
B0 = "10.0.1.1:10911"  # broker-b master
HA_A0 = "10.0.0.1:10912"
HA_A1 = "10.0.0.2:10912"

V1 = DataVersion(counter=1, timestamp=1_000, state_version=0)
V2 = DataVersion(counter=2, timestamp=2_000, state_version=0)

RW = 6
R = 4

BASE_TOPICS: dict[str, tuple[int, int, int, int]] = {
    "T1": (4, 4, RW, 0),
    "T2": (8, 8, RW, 0),
    "T3": (2, 2, RW, 0),
}


# ----------------------------------------------------------------------
# helpers


def body(
    topics: dict[str, tuple[int, int, int, int]] | None = None,
    version: DataVersion = V1,
    *,
    filter_servers: list[str] | None = None,
    mapping_infos: dict[str, dict[str, Any]] | None = None,
) -> RegisterBody:
    return RegisterBody(
        data_version=version,
        topics=dict(BASE_TOPICS if topics is None else topics),
        filter_servers=list(filter_servers or []),
        mapping_infos=dict(mapping_infos or {}),
    )


def reg(
    addr: str = A0,
    broker_id: int = 0,
    *,
    name: str = "broker-a",
    cluster: str = C1,
    ha: str | None = None,
    acting: bool | None = False,
    zone: str | None = None,
    timeout: int | None = None,
) -> Registration:
    return Registration(
        cluster=cluster,
        addr=addr,
        name=name,
        broker_id=broker_id,
        ha_server_addr=ha,
        zone_name=zone,
        heartbeat_timeout_ms=timeout,
        enable_acting_master=acting,
    )


class Loader:
    """A load_body callable that counts its calls."""

    def __init__(self, result: RegisterBody | Exception) -> None:
        self.result = result
        self.calls = 0

    def __call__(self) -> RegisterBody:
        self.calls += 1
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def register(
    table: RouteTable,
    registration: Registration,
    register_body: RegisterBody | None = None,
    *,
    conn: str = "conn-1",
    now: float = 0,
    digest: bytes | None = None,
) -> RegisterOutcome:
    b = body() if register_body is None else register_body
    return table.register_broker(registration, lambda: b, body_digest=digest, conn=conn, now=now)


def route(table: RouteTable, topic: str, standard: bool = True) -> TopicRouteData | None:
    """The decoded cached route; also checks it equals an uncached encoding."""
    cached = table.route_body(topic, standard)
    fresh = table.encode_route(topic, standard, None)
    assert cached == fresh, f"stale cached route for {topic!r} (standard={standard})"
    return None if cached is None else TopicRouteData.decode(cached)


def both_routes(table: RouteTable, topic: str) -> TopicRouteData | None:
    """The route in both encodings; they must decode to the same thing."""
    std = route(table, topic, True)
    legacy = route(table, topic, False)
    assert std == legacy
    return std


def qd(name: str, r: int, w: int, perm: int, sysflag: int = 0) -> QueueData:
    return QueueData(name, r, w, perm, sysflag)


def bd(addrs: dict[int, str], name: str = "broker-a", cluster: str = C1, acting: bool = False, zone: str | None = None) -> BrokerData:
    return BrokerData(cluster, name, addrs, acting, zone)


def perms(table: RouteTable, name: str = "broker-a") -> dict[str, int]:
    return {t: qmap[name][3] for t, qmap in table.topic_queues.items() if name in qmap}


def snapshot(table: RouteTable) -> tuple:
    return (
        {n: (b.cluster, dict(b.addrs), b.enable_acting_master, b.zone_name) for n, b in table.brokers.items()},
        {c: list(ns) for c, ns in table.clusters.items()},
        {t: dict(q) for t, q in table.topic_queues.items()},
        {k: (v.last_update_ms, v.data_version, v.conn, v.broker_id) for k, v in table.live.items()},
        {k: list(v) for k, v in table.filter_servers.items()},
        {t: dict(m) for t, m in table.mappings.items()},
    )


# ----------------------------------------------------------------------
# masters and slaves


def test_master_registration_makes_topics_routable() -> None:
    table = RouteTable()
    out = register(table, reg(ha=HA_A0))
    assert out == RegisterOutcome(True, None, None)
    r = both_routes(table, "T1")
    assert r is not None
    assert r.queue_datas == [qd("broker-a", 4, 4, RW)]
    assert r.broker_datas == [bd({0: A0})]
    assert r.filter_server_table == {}
    assert r.order_topic_conf is None
    assert r.topic_queue_mapping_by_broker is None
    r2 = route(table, "T2")
    assert r2 is not None and r2.queue_datas == [qd("broker-a", 8, 8, RW)]
    assert route(table, "NoSuchTopic") is None
    assert sorted(table.all_topics()) == ["T1", "T2", "T3"]
    assert table.live[(C1, A0)].ha_server_addr == HA_A0


def test_slave_joins_broker_addrs_but_does_not_feed_queue_data() -> None:
    table = RouteTable()
    master_out = register(table, reg(A0, 0, ha=HA_A0))
    slave_topics = {"T1": (16, 16, R, 0), "SlaveOnly": (1, 1, RW, 0), "T2": (8, 8, RW, 0)}
    slave_out = register(table, reg(A1, 1, ha=HA_A1), body(slave_topics, V2), conn="conn-2")
    assert master_out.ha_server_addr is None and master_out.master_addr is None
    assert slave_out == RegisterOutcome(True, HA_A0, A0)
    r = both_routes(table, "T1")
    assert r is not None
    assert r.queue_datas == [qd("broker-a", 4, 4, RW)]
    assert r.broker_datas == [bd({0: A0, 1: A1})]
    assert route(table, "SlaveOnly") is None
    assert sorted(table.all_topics()) == ["T1", "T2", "T3"]
    assert table.broker_member_group("broker-a") == {0: A0, 1: A1}
    assert (C1, A1) in table.live


def test_slave_gets_master_info_only_while_master_is_live() -> None:
    table = RouteTable()
    # an old (pre-5.x) slave alone: no master address, and it is never a topic writer
    first = register(table, reg(A1, 1, ha=HA_A1, acting=None))
    assert first == RegisterOutcome(True, None, None)
    assert table.all_topics() == []
    assert table.broker_member_group("broker-a") == {1: A1}
    register(table, reg(A0, 0, ha=HA_A0), conn="conn-0")
    again = register(table, reg(A1, 1, ha=HA_A1, acting=None))
    assert again == RegisterOutcome(True, HA_A0, A0)
    table.unregister_broker(C1, A0, "broker-a")
    assert register(table, reg(A1, 1, ha=HA_A1, acting=None)) == RegisterOutcome(True, None, None)


def test_lone_5x_slave_is_prime_slave_and_feeds_topics() -> None:
    """6.3 d: a 5.x slave with the smallest id present writes topic data."""
    table = RouteTable()
    out = register(table, reg(A1, 1, acting=False))
    assert out == RegisterOutcome(True, None, None)
    assert perms(table) == {"T1": RW, "T2": RW, "T3": RW}  # acting master off: perm kept
    table2 = RouteTable()
    register(table2, reg(A1, 1, acting=True))
    assert perms(table2) == {"T1": R, "T2": R, "T3": R}  # acting master on: write wiped


def test_slave_promoted_on_same_address_replaces_its_old_id() -> None:
    table = RouteTable()
    register(table, reg(A0, 0))
    register(table, reg(A1, 1))
    table.unregister_broker(C1, A0, "broker-a")
    register(table, reg(A1, 0, ha=HA_A1), body(version=V2))
    assert table.broker_member_group("broker-a") == {0: A1}
    r = route(table, "T1")
    assert r is not None and r.broker_datas == [bd({0: A1})]


# ----------------------------------------------------------------------
# data versions and write permission


def test_same_data_version_does_not_overwrite_wiped_perm() -> None:
    table = RouteTable()
    register(table, reg())
    assert table.wipe_write_perm("broker-a") == 3
    assert perms(table) == {"T1": R, "T2": R, "T3": R}
    register(table, reg(), body(), now=1)  # equal DataVersion, no digest: body is parsed
    assert perms(table) == {"T1": R, "T2": R, "T3": R}
    r = route(table, "T1")
    assert r is not None and r.queue_datas == [qd("broker-a", 4, 4, R)]
    register(table, reg(), body(version=V2), now=2)
    assert perms(table) == {"T1": RW, "T2": RW, "T3": RW}
    r = route(table, "T1")
    assert r is not None and r.queue_datas == [qd("broker-a", 4, 4, RW)]


def test_same_data_version_with_same_digest_keeps_wiped_perm() -> None:
    table = RouteTable()
    loader = Loader(body())
    table.register_broker(reg(), loader, body_digest=b"d1", conn="c", now=0)
    table.wipe_write_perm("broker-a")
    table.register_broker(reg(), loader, body_digest=b"d1", conn="c", now=1)
    assert perms(table) == {"T1": R, "T2": R, "T3": R}
    assert loader.calls == 1
    table.register_broker(reg(), Loader(body(version=V2)), body_digest=b"d2", conn="c", now=2)
    assert perms(table) == {"T1": RW, "T2": RW, "T3": RW}


def test_state_version_is_part_of_data_version_equality() -> None:
    table = RouteTable()
    register(table, reg())
    table.wipe_write_perm("broker-a")
    register(table, reg(), body(version=DataVersion(V1.counter, V1.timestamp, 1)))
    assert perms(table) == {"T1": RW, "T2": RW, "T3": RW}


def test_wipe_and_add_write_perm_count_topics_of_that_broker_only() -> None:
    table = RouteTable()
    register(table, reg(), body({"T1": (4, 4, 7, 0), "T2": (4, 4, R, 0), "T3": (4, 4, RW, 0)}))
    register(table, reg(B0, name="broker-b"), body({"T3": (4, 4, RW, 0), "TB": (4, 4, RW, 0)}), conn="conn-b")
    assert table.wipe_write_perm("broker-a") == 3
    assert perms(table) == {"T1": 5, "T2": R, "T3": R}
    assert perms(table, "broker-b") == {"T3": RW, "TB": RW}
    assert table.wipe_write_perm("nobody") == 0
    assert table.add_write_perm("nobody") == 0
    assert table.add_write_perm("broker-a") == 3
    # perm is replaced by exactly READ|WRITE: the INHERIT bit of T1 is lost
    assert perms(table) == {"T1": RW, "T2": RW, "T3": RW}
    assert table.add_write_perm("broker-b") == 2
    r = route(table, "T1")
    assert r is not None and r.queue_datas == [qd("broker-a", 4, 4, RW)]


# ----------------------------------------------------------------------
# topics a broker stops reporting


def test_unreported_topics_are_kept_by_default() -> None:
    table = RouteTable()
    register(table, reg())
    register(table, reg(), body({"T1": (4, 4, RW, 0), "T2": (8, 8, RW, 0)}, V2))
    assert sorted(table.all_topics()) == ["T1", "T2", "T3"]
    r = route(table, "T3")
    assert r is not None and r.queue_datas == [qd("broker-a", 2, 2, RW)]


def test_unreported_topics_are_removed_with_delete_option() -> None:
    table = RouteTable(RouteOptions(delete_topic_with_broker_registration=True))
    register(table, reg())
    register(table, reg(B0, name="broker-b"), body({"T2": (1, 1, RW, 0), "TB": (1, 1, RW, 0)}), conn="conn-b")
    assert route(table, "T3") is not None
    register(table, reg(), body({"T1": (4, 4, RW, 0), "TA": (3, 3, RW, 0)}, V2))
    assert sorted(table.all_topics()) == ["T1", "T2", "TA", "TB"]
    assert route(table, "T3") is None
    r = route(table, "T2")
    assert r is not None
    assert r.queue_datas == [qd("broker-b", 1, 1, RW)]
    assert r.broker_datas == [bd({0: B0}, name="broker-b")]


def test_delete_option_does_not_apply_to_brokers_with_static_topics() -> None:
    table = RouteTable(RouteOptions(delete_topic_with_broker_registration=True))
    register(table, reg())
    mapping = {"T1": {"bname": "broker-a", "topic": "T1", "totalQueues": 4, "epoch": 0}}
    register(table, reg(), body({"T1": (4, 4, RW, 0), "T2": (8, 8, RW, 0)}, V2, mapping_infos=mapping))
    assert sorted(table.all_topics()) == ["T1", "T2", "T3"]


def test_delete_option_enabled_at_runtime_applies_to_an_unchanged_body() -> None:
    """5.x deletes unreported topics on *every* writer registration, so
    turning the option on (UPDATE_NAMESRV_CONFIG) must take effect on the next
    registration even when the broker keeps sending the very same body."""
    table = RouteTable()
    full = Loader(body())
    table.register_broker(reg(), full, body_digest=b"full", conn="c", now=0)
    smaller = Loader(body({"T1": (4, 4, RW, 0), "T2": (8, 8, RW, 0)}, V2))
    table.register_broker(reg(), smaller, body_digest=b"small", conn="c", now=1)
    table.register_broker(reg(), smaller, body_digest=b"small", conn="c", now=2)
    assert sorted(table.all_topics()) == ["T1", "T2", "T3"]
    assert route(table, "T3") is not None
    table.options.delete_topic_with_broker_registration = True
    table.register_broker(reg(), smaller, body_digest=b"small", conn="c", now=3)
    assert sorted(table.all_topics()) == ["T1", "T2"]
    assert route(table, "T3") is None
    # and once the table agrees with the body, the fast path is back
    calls = smaller.calls
    table.register_broker(reg(), smaller, body_digest=b"small", conn="c", now=4)
    assert smaller.calls == calls
    assert table.live[(C1, A0)].last_update_ms == 4


def test_delete_option_removes_topic_registered_via_register_topic() -> None:
    table = RouteTable(RouteOptions(delete_topic_with_broker_registration=True))
    loader = Loader(body())
    table.register_broker(reg(), loader, body_digest=b"d", conn="c", now=0)
    table.register_topic("Extra", [("broker-a", 2, 2, RW, 0)])
    assert "Extra" in table.all_topics()
    table.register_broker(reg(), loader, body_digest=b"d", conn="c", now=1)
    assert "Extra" not in table.all_topics()
    assert route(table, "Extra") is None


# ----------------------------------------------------------------------
# delete topic


def two_cluster_table() -> RouteTable:
    table = RouteTable()
    register(table, reg())
    register(table, reg(B0, name="broker-b", cluster=C2), body({"T1": (2, 2, RW, 0), "TB": (2, 2, RW, 0)}), conn="conn-b")
    return table


def test_delete_topic_without_cluster_removes_it_entirely() -> None:
    table = two_cluster_table()
    assert route(table, "T1") is not None
    table.delete_topic("T1")
    assert route(table, "T1") is None
    assert "T1" not in table.all_topics()
    assert table.topics_by_cluster(C2) == ["TB"]
    table.delete_topic("NoSuchTopic")  # no error, no change
    assert sorted(table.all_topics()) == ["T2", "T3", "TB"]


def test_delete_topic_with_cluster_removes_only_that_clusters_queues() -> None:
    table = two_cluster_table()
    table.delete_topic("T1", C1)
    r = both_routes(table, "T1")
    assert r is not None
    assert r.queue_datas == [qd("broker-b", 2, 2, RW)]
    assert r.broker_datas == [bd({0: B0}, name="broker-b", cluster=C2)]
    table.delete_topic("T1", "unknown-cluster")
    r = route(table, "T1")
    assert r is not None and r.queue_datas == [qd("broker-b", 2, 2, RW)]
    table.delete_topic("T1", C2)
    assert route(table, "T1") is None
    assert "T1" not in table.all_topics()


def test_deleted_topic_returns_on_next_registration_with_unchanged_body() -> None:
    table = RouteTable()
    register(table, reg())
    table.delete_topic("T2")
    assert route(table, "T2") is None
    register(table, reg(), body(), now=1)
    r = route(table, "T2")
    assert r is not None and r.queue_datas == [qd("broker-a", 8, 8, RW)]


def test_digest_fast_path_skips_parsing_unless_a_topic_was_removed() -> None:
    table = RouteTable()
    loader = Loader(body())
    assert table.register_broker(reg(), loader, body_digest=b"same", conn="c", now=0).ok
    assert loader.calls == 1
    assert table.register_broker(reg(), loader, body_digest=b"same", conn="c", now=5).ok
    assert loader.calls == 1  # nothing changed: liveness only
    assert table.live[(C1, A0)].last_update_ms == 5
    table.delete_topic("T2")
    assert route(table, "T2") is None
    assert table.register_broker(reg(), loader, body_digest=b"same", conn="c", now=6).ok
    assert loader.calls == 2
    r = route(table, "T2")
    assert r is not None and r.queue_datas == [qd("broker-a", 8, 8, RW)]
    # and once restored, an identical registration is cheap again
    table.register_broker(reg(), loader, body_digest=b"same", conn="c", now=7)
    assert loader.calls == 2


def test_digest_fast_path_after_cluster_scoped_delete() -> None:
    table = RouteTable()
    loader = Loader(body())
    table.register_broker(reg(), loader, body_digest=b"same", conn="c", now=0)
    table.delete_topic("T1", C1)
    table.register_broker(reg(), loader, body_digest=b"same", conn="c", now=1)
    assert loader.calls == 2
    assert route(table, "T1") is not None


def test_digest_fast_path_for_slave_never_parses() -> None:
    table = RouteTable()
    register(table, reg(A0, 0, ha=HA_A0))
    loader = Loader(body())
    out1 = table.register_broker(reg(A1, 1), loader, body_digest=b"s", conn="cs", now=0)
    out2 = table.register_broker(reg(A1, 1), loader, body_digest=b"s", conn="cs", now=1)
    assert out1 == out2 == RegisterOutcome(True, HA_A0, A0)
    assert loader.calls == 1


def test_digest_fast_path_after_unregister_reapplies_topics() -> None:
    table = RouteTable()
    loader = Loader(body())
    table.register_broker(reg(), loader, body_digest=b"same", conn="c", now=0)
    table.unregister_broker(C1, A0, "broker-a")
    assert table.all_topics() == []
    table.register_broker(reg(), loader, body_digest=b"same", conn="c", now=1)
    assert loader.calls == 2
    assert sorted(table.all_topics()) == ["T1", "T2", "T3"]


# ----------------------------------------------------------------------
# refused and failed registrations


def test_first_registration_with_exactly_one_topic_is_refused() -> None:
    table = RouteTable()
    out = register(table, reg(), body({"T1": (4, 4, RW, 0)}))
    assert out.ok is False
    assert table.brokers == {}
    assert table.clusters == {}
    assert table.live == {}
    assert table.all_topics() == []
    assert ClusterInfo.decode(table.cluster_info_body()) == ClusterInfo({}, {})
    # a second broker id of a known broker is refused too (it has no address yet)
    register(table, reg())
    before = snapshot(table)
    assert register(table, reg(A1, 1), body({"X": (1, 1, RW, 0)}), conn="c2").ok is False
    assert snapshot(table) == before
    # once registered, a one-topic table is an ordinary update
    assert register(table, reg(), body({"T1": (4, 4, RW, 0)}, V2), now=1).ok is True
    assert table.live[(C1, A0)].data_version == V2


def test_zero_topic_first_registration_is_accepted() -> None:
    table = RouteTable()
    assert register(table, reg(), body({})).ok is True
    assert table.broker_member_group("broker-a") == {0: A0}
    assert table.all_topics() == []


def test_body_that_fails_to_parse_leaves_table_unchanged() -> None:
    table = RouteTable()
    with pytest.raises(BodyError):
        table.register_broker(reg(), Loader(BodyError("bad")), body_digest=b"x", conn="c", now=0)
    assert snapshot(table) == snapshot(RouteTable())
    register(table, reg(), digest=b"good", now=1)
    register(table, reg(A1, 1), conn="c2", now=1)
    cluster_before = table.cluster_info_body()
    route_before = table.route_body("T1", True)
    before = snapshot(table)
    for registration in (reg(), reg(A1, 1), reg(A2, 2), reg(B0, name="broker-b")):
        with pytest.raises(BodyError):
            table.register_broker(registration, Loader(BodyError("bad")), body_digest=b"other", conn="c3", now=50)
    assert snapshot(table) == before
    assert table.cluster_info_body() == cluster_before
    assert table.route_body("T1", True) == route_before


# ----------------------------------------------------------------------
# state version tie-break (6.3 b)


def sv(state: int, counter: int = 1) -> DataVersion:
    return DataVersion(counter=counter, timestamp=1_000, state_version=state)


def test_lower_state_version_for_a_held_id_is_ignored() -> None:
    table = RouteTable()
    register(table, reg(A0, 0, ha=HA_A0), body(version=sv(5)))
    before = snapshot(table)
    out = register(table, reg(A2, 0, ha="x:1"), body({"Z1": (1, 1, RW, 0), "Z2": (1, 1, RW, 0)}, sv(3)), conn="c2")
    assert out == RegisterOutcome(True, None, None)
    assert snapshot(table) == before
    assert (C1, A2) not in table.live
    assert table.broker_member_group("broker-a") == {0: A0}
    assert "Z1" not in table.all_topics()


def test_equal_or_higher_state_version_takes_over_the_id() -> None:
    table = RouteTable()
    register(table, reg(A0, 0), body(version=sv(5)))
    out = register(table, reg(A2, 0), body(version=sv(5, counter=2)), conn="c2")
    assert out.ok
    assert table.broker_member_group("broker-a") == {0: A2}
    register(table, reg(A0, 0), body(version=sv(6, counter=3)), conn="c3")
    assert table.broker_member_group("broker-a") == {0: A0}
    r = route(table, "T1")
    assert r is not None and r.broker_datas == [bd({0: A0})]


def test_rejected_registration_drops_live_entry_of_new_address() -> None:
    table = RouteTable()
    register(table, reg(A0, 0), body(version=sv(5)))
    register(table, reg(A2, 1), body(version=sv(1)), conn="c2")  # a slave at A2
    assert (C1, A2) in table.live
    # A2 now claims id 0 with an older state version: ignored, and (5.x) the
    # same-address entry under its old id was already removed before the check
    out = register(table, reg(A2, 0), body(version=sv(1, counter=2)), conn="c2")
    assert out == RegisterOutcome(True, None, None)
    assert (C1, A2) not in table.live
    assert table.broker_member_group("broker-a") == {0: A0}
    r = route(table, "T1")
    assert r is not None and r.broker_datas == [bd({0: A0})]
    c = ClusterInfo.decode(table.cluster_info_body())
    assert c.broker_addr_table["broker-a"].broker_addrs == {0: A0}


def test_tie_break_ignores_holder_without_live_entry() -> None:
    table = RouteTable()
    register(table, reg(A0, 0), body(version=sv(5)))
    # drop only the live entry (as a tie-break rejection does for its address)
    table._drop_live((C1, A0))
    out = register(table, reg(A2, 0), body(version=sv(1)), conn="c2")
    assert out.ok
    assert table.broker_member_group("broker-a") == {0: A2}


# ----------------------------------------------------------------------
# unregister, connection close, expiry


def test_unregister_removes_address_then_broker_cluster_and_queues() -> None:
    table = RouteTable()
    register(table, reg(A0, 0, ha=HA_A0), conn="ca0")
    register(table, reg(A1, 1), conn="ca1")
    register(table, reg(B0, name="broker-b"), body({"T1": (2, 2, RW, 0), "TB": (2, 2, RW, 0)}), conn="cb")
    register(table, reg("10.9.9.9:1", name="broker-z", cluster=C2), body({"TZ": (1, 1, RW, 0), "T3": (1, 1, RW, 0)}), conn="cz")

    removed = table.unregister_broker(C1, A1, "broker-a")
    assert removed == Removed(C1, "broker-a", A1, "ca1", "unregister")
    assert table.broker_member_group("broker-a") == {0: A0}
    assert (C1, A1) not in table.live
    r = route(table, "T2")
    assert r is not None and r.broker_datas == [bd({0: A0})]

    removed = table.unregister_broker(C1, A0, "broker-a")
    assert removed == Removed(C1, "broker-a", A0, "ca0", "unregister")
    assert "broker-a" not in table.brokers
    assert table.clusters == {C1: {"broker-b": None}, C2: {"broker-z": None}}
    assert route(table, "T2") is None  # only broker-a served it
    assert "T2" not in table.all_topics()
    r = both_routes(table, "T1")
    assert r is not None
    assert r.queue_datas == [qd("broker-b", 2, 2, RW)]
    assert r.broker_datas == [bd({0: B0}, name="broker-b")]
    r = route(table, "T3")
    assert r is not None and r.queue_datas == [qd("broker-z", 1, 1, RW)]

    table.unregister_broker(C2, "10.9.9.9:1", "broker-z")
    assert table.clusters == {C1: {"broker-b": None}}  # empty cluster dropped
    assert sorted(table.all_topics()) == ["T1", "TB"]
    assert table.unregister_broker(C2, "10.9.9.9:1", "broker-z") is None
    assert table.unregister_broker(C1, "1.2.3.4:5", "broker-b") is None


def test_unregister_removes_every_id_holding_the_address() -> None:
    table = RouteTable()
    register(table, reg(A0, 0))
    register(table, reg(A1, 1), conn="c1")
    table.brokers["broker-a"].addrs[3] = A1  # a duplicate (as a 4.9.x table could hold)
    table.invalidate_all()
    removed = table.unregister_broker(C1, A1, "broker-a")
    assert removed is not None and removed.addr == A1
    assert table.broker_member_group("broker-a") == {0: A0}
    r = route(table, "T1")
    assert r is not None and r.broker_datas == [bd({0: A0})]


def test_connection_closed_removes_only_brokers_live_on_that_connection() -> None:
    table = RouteTable()
    register(table, reg(A0, 0), conn="old")
    register(table, reg(B0, name="broker-b"), body({"TB": (1, 1, RW, 0), "TB2": (1, 1, RW, 0)}), conn="old")
    register(table, reg(A1, 1), conn="slave-conn")
    register(table, reg(A0, 0), conn="new", now=1)  # broker-a master reconnected
    assert table.connection_closed("client-conn") == []
    removed = table.connection_closed("old")
    assert removed == [Removed(C1, "broker-b", B0, "old", "connection closed")]
    assert "broker-b" not in table.brokers
    assert table.broker_member_group("broker-a") == {0: A0, 1: A1}
    assert route(table, "TB") is None
    assert table.connection_closed("old") == []
    removed = table.connection_closed("new")
    assert removed == [Removed(C1, "broker-a", A0, "new", "connection closed")]
    assert table.broker_member_group("broker-a") == {1: A1}
    removed = table.connection_closed("slave-conn")
    assert [r.addr for r in removed] == [A1]
    assert table.brokers == {} and table.clusters == {} and table.live == {}
    assert table.all_topics() == []


def test_scan_not_active_uses_default_and_per_broker_timeouts() -> None:
    assert RouteOptions().default_timeout_ms == DEFAULT_BROKER_CHANNEL_EXPIRED_MS == 120_000
    table = RouteTable()
    register(table, reg(A0, 0), conn="ca", now=1_000)
    register(table, reg(B0, name="broker-b", timeout=10_000), conn="cb", now=1_000)
    assert table.live[(C1, A0)].timeout_ms == 120_000
    assert table.live[(C1, B0)].timeout_ms == 10_000
    assert table.scan_not_active(11_000) == []  # expiry is strictly "older than"
    assert table.scan_not_active(11_001) == [Removed(C1, "broker-b", B0, "cb", "heartbeat timeout")]
    assert "broker-b" not in table.brokers
    assert table.scan_not_active(121_000) == []
    assert table.scan_not_active(121_001) == [Removed(C1, "broker-a", A0, "ca", "heartbeat timeout")]
    assert table.brokers == {} and table.live == {} and table.all_topics() == []


def test_scan_not_active_honours_configured_default_timeout() -> None:
    table = RouteTable(RouteOptions(default_timeout_ms=5_000))
    register(table, reg(), now=0)
    assert table.scan_not_active(5_000) == []
    assert [r.addr for r in table.scan_not_active(5_001)] == [A0]


def test_heartbeat_and_query_data_version_refresh_liveness() -> None:
    table = RouteTable()
    register(table, reg(A0, 0), now=0)
    register(table, reg(A1, 1), conn="c1", now=0)
    assert table.heartbeat(C1, A0, 100_000) is True
    assert table.heartbeat(C1, "1.1.1.1:1", 100_000) is False
    assert table.heartbeat(C2, A0, 100_000) is False  # live key is (cluster, addr)
    assert table.query_data_version(C1, A1, V1, 110_000) == (False, V1)
    assert table.query_data_version(C1, A1, V2, 115_000) == (True, V1)  # refreshed although changed
    assert table.query_data_version(C1, "1.1.1.1:1", V1, 115_000) == (True, None)
    assert table.live[(C1, A0)].last_update_ms == 100_000
    assert table.live[(C1, A1)].last_update_ms == 115_000
    assert table.scan_not_active(120_001) == []
    assert table.scan_not_active(220_000) == []
    assert [r.addr for r in table.scan_not_active(220_001)] == [A0]
    assert table.scan_not_active(235_000) == []
    assert [r.addr for r in table.scan_not_active(235_001)] == [A1]


# ----------------------------------------------------------------------
# route cache and encodings


def test_route_encodings_standard_and_legacy() -> None:
    table = RouteTable()
    register(table, reg(A0, 0))
    register(table, reg(A1, 1), conn="c1")
    std = table.route_body("T1", True)
    legacy = table.route_body("T1", False)
    assert std is not None and legacy is not None
    assert std == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},'
        b'"brokerName":"broker-a","cluster":"cluster-1","enableActingMaster":false}],'
        b'"filterServerTable":{},'
        b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
    )
    assert legacy == std.replace(b'"0":', b"0:").replace(b'"1":', b"1:")
    assert TopicRouteData.decode(legacy) == TopicRouteData.decode(std)


def test_topics_with_equal_queue_data_share_one_body() -> None:
    table = RouteTable()
    register(table, reg(), body({"X1": (4, 4, RW, 0), "X2": (4, 4, RW, 0), "X3": (8, 8, RW, 0)}))
    for standard in (True, False):
        b1 = table.route_body("X1", standard)
        b2 = table.route_body("X2", standard)
        b3 = table.route_body("X3", standard)
        assert b1 is not None and b1 is b2
        assert b3 is not None and b3 != b1
    assert table.route_body("X1", True) != table.route_body("X1", False)


def test_route_cache_follows_every_kind_of_change() -> None:
    table = RouteTable()
    register(table, reg(A0, 0, ha=HA_A0), body({"T1": (4, 4, RW, 0), "T2": (4, 4, RW, 0)}), conn="ca0")
    for topic in ("T1", "T2"):
        r = both_routes(table, topic)
        assert r is not None and r.broker_datas == [bd({0: A0})]

    # new slave
    register(table, reg(A1, 1), conn="ca1")
    r = both_routes(table, "T1")
    assert r is not None and r.broker_datas == [bd({0: A0, 1: A1})]

    # wipe write perm (T2 stays shared with nothing; T1 as well)
    table.wipe_write_perm("broker-a")
    for topic in ("T1", "T2"):
        r = both_routes(table, topic)
        assert r is not None and r.queue_datas == [qd("broker-a", 4, 4, R)]
    table.add_write_perm("broker-a")
    r = both_routes(table, "T2")
    assert r is not None and r.queue_datas == [qd("broker-a", 4, 4, RW)]

    # filter servers of the master, then of the slave, then gone
    register(table, reg(A0, 0, ha=HA_A0), body({"T1": (4, 4, RW, 0), "T2": (4, 4, RW, 0)}, V2, filter_servers=["10.0.0.1:9999"]), conn="ca0")
    r = both_routes(table, "T2")
    assert r is not None and r.filter_server_table == {A0: ["10.0.0.1:9999"]}
    register(table, reg(A1, 1), body(version=V2, filter_servers=["10.0.0.2:9999"]), conn="ca1")
    r = both_routes(table, "T1")
    assert r is not None and r.filter_server_table == {A0: ["10.0.0.1:9999"], A1: ["10.0.0.2:9999"]}
    table.unregister_broker(C1, A1, "broker-a")  # its filter servers go with it
    r = both_routes(table, "T1")
    assert r is not None
    assert r.filter_server_table == {A0: ["10.0.0.1:9999"]}
    assert r.broker_datas == [bd({0: A0})]
    register(table, reg(A0, 0), body({"T1": (4, 4, RW, 0), "T2": (4, 4, RW, 0)}, DataVersion(3, 3_000)), conn="ca0")
    r = both_routes(table, "T1")
    assert r is not None and r.filter_server_table == {}

    # a second broker joining a topic
    register(table, reg(B0, name="broker-b"), body({"T1": (2, 2, RW, 0), "TB": (2, 2, RW, 0)}), conn="cb")
    r = both_routes(table, "T1")
    assert r is not None
    assert r.queue_datas == [qd("broker-a", 4, 4, RW), qd("broker-b", 2, 2, RW)]
    assert r.broker_datas == [bd({0: A0}), bd({0: B0}, name="broker-b")]

    # delete topic (cluster-scoped keeps nothing here: both brokers are in C1)
    table.delete_topic("T2")
    assert both_routes(table, "T2") is None

    # unregister a broker: its queue data leaves T1
    table.unregister_broker(C1, B0, "broker-b")
    r = both_routes(table, "T1")
    assert r is not None
    assert r.queue_datas == [qd("broker-a", 4, 4, RW)]
    assert r.broker_datas == [bd({0: A0})]
    assert both_routes(table, "TB") is None

    # zone name and acting-master flag changes show up in BrokerData
    register(table, reg(A0, 0, zone="zone-1", acting=True), body({"T1": (4, 4, RW, 0), "T2": (4, 4, RW, 0)}, DataVersion(3, 3_000)), conn="ca0")
    r = both_routes(table, "T1")
    assert r is not None and r.broker_datas == [bd({0: A0}, acting=True, zone="zone-1")]
    assert b'"zoneName":"zone-1"' in (table.route_body("T1", False) or b"")


def test_route_cache_follows_support_acting_master_toggle() -> None:
    table = RouteTable()
    register(table, reg(A0, 0, acting=True), conn="ca0")
    register(table, reg(A1, 1, acting=True), conn="ca1")
    table.unregister_broker(C1, A0, "broker-a")
    r = both_routes(table, "T1")
    assert r is not None
    assert r.queue_datas == [qd("broker-a", 4, 4, R)]
    assert r.broker_datas == [bd({1: A1}, acting=True)]
    table.options.support_acting_master = True
    table.invalidate_all()
    r = both_routes(table, "T1")
    assert r is not None and r.broker_datas == [bd({0: A1}, acting=True)]
    assert b'"brokerAddrs":{0:"10.0.0.2:10911"}' in (table.route_body("T1", False) or b"")
    table.options.support_acting_master = False
    table.invalidate_all()
    r = both_routes(table, "T1")
    assert r is not None and r.broker_datas == [bd({1: A1}, acting=True)]


def test_static_topic_mapping_is_included_and_not_shared() -> None:
    table = RouteTable()
    mapping = {
        "bname": "broker-a",
        "currIdMap": {0: 0, 1: 1},
        "dirty": False,
        "epoch": 7,
        "scope": "__global__",
        "topic": "ST",
        "totalQueues": 2,
    }
    register(table, reg(), body({"ST": (4, 4, RW, 0), "T1": (4, 4, RW, 0)}, mapping_infos={"ST": mapping}))
    std = table.route_body("ST", True)
    legacy = table.route_body("ST", False)
    assert std is not None and legacy is not None
    assert std is not table.route_body("T1", True)
    r = TopicRouteData.decode(std)
    assert r.queue_datas == [qd("broker-a", 4, 4, RW)]
    assert r.topic_queue_mapping_by_broker == {
        "broker-a": {
            "bname": "broker-a",
            "currIdMap": {"0": 0, "1": 1},
            "dirty": False,
            "epoch": 7,
            "scope": "__global__",
            "topic": "ST",
            "totalQueues": 2,
        }
    }
    assert b'"currIdMap":{"0":0,"1":1}' in std
    assert b'"currIdMap":{0:0,1:1}' in legacy
    assert TopicRouteData.decode(legacy) == r
    t1 = route(table, "T1")
    assert t1 is not None and t1.topic_queue_mapping_by_broker is None
    assert b"topicQueueMappingByBroker" not in (table.route_body("T1", True) or b"")
    # a same-version re-registration does not touch the mapping; a deleted
    # topic loses it
    table.delete_topic("ST")
    assert route(table, "ST") is None
    assert "ST" not in table.mappings


def test_route_without_registered_broker_is_none() -> None:
    table = RouteTable()
    register(table, reg())
    table.brokers.clear()  # queue data left without BrokerData (6.8 step 2)
    table.invalidate_all()
    assert table.route_body("T1", True) is None


# ----------------------------------------------------------------------
# acting master route rewrite (6.8 step 5)


def acting_table(support: bool = True) -> RouteTable:
    table = RouteTable(RouteOptions(support_acting_master=support))
    sync = "rmq_sys_SYNC_BROKER_MEMBER_broker-a"
    topics = {"T1": (4, 4, RW, 0), sync: (1, 1, RW, 0)}
    register(table, reg(A0, 0, acting=True), body(topics), conn="ca0")
    register(table, reg(A1, 1, acting=True), body(topics), conn="ca1")
    register(table, reg(A2, 2, acting=True), body(topics), conn="ca2")
    return table


def test_acting_master_rewrite_when_master_is_gone() -> None:
    table = acting_table()
    r = both_routes(table, "T1")
    assert r is not None and r.broker_datas == [bd({0: A0, 1: A1, 2: A2}, acting=True)]
    table.unregister_broker(C1, A0, "broker-a")
    assert perms(table) == {"T1": R, "rmq_sys_SYNC_BROKER_MEMBER_broker-a": R}  # 6.5 step 2
    r = both_routes(table, "T1")
    assert r is not None
    assert r.queue_datas == [qd("broker-a", 4, 4, R)]
    assert r.broker_datas == [bd({0: A1, 2: A2}, acting=True)]
    # the broker-member sync topic is never rewritten
    s = both_routes(table, "rmq_sys_SYNC_BROKER_MEMBER_broker-a")
    assert s is not None and s.broker_datas == [bd({1: A1, 2: A2}, acting=True)]
    # the stored table is not rewritten
    assert table.broker_member_group("broker-a") == {1: A1, 2: A2}


def test_acting_master_rewrite_needs_option_flag_and_no_write_perm() -> None:
    table = acting_table(support=False)
    table.unregister_broker(C1, A0, "broker-a")
    r = both_routes(table, "T1")
    assert r is not None and r.broker_datas == [bd({1: A1, 2: A2}, acting=True)]

    table = acting_table()
    table.unregister_broker(C1, A0, "broker-a")
    table.add_write_perm("broker-a")  # writable again: no rewrite
    r = both_routes(table, "T1")
    assert r is not None and r.broker_datas == [bd({1: A1, 2: A2}, acting=True)]

    # a broker without enableActingMaster is never rewritten
    table = RouteTable(RouteOptions(support_acting_master=True))
    register(table, reg(A1, 1, acting=False))
    table.wipe_write_perm("broker-a")
    r = both_routes(table, "T1")
    assert r is not None and r.broker_datas == [bd({1: A1})]


def test_prime_slave_with_acting_master_registers_read_only_and_is_rewritten() -> None:
    table = RouteTable(RouteOptions(support_acting_master=True))
    register(table, reg(A2, 2, acting=True), conn="c2")
    register(table, reg(A1, 1, acting=True), body(version=V2), conn="c1")
    assert perms(table) == {"T1": R, "T2": R, "T3": R}
    r = both_routes(table, "T1")
    assert r is not None
    assert r.queue_datas == [qd("broker-a", 4, 4, R)]
    assert r.broker_datas == [bd({0: A1, 2: A2}, acting=True)]
    # the master comes back with a new version: write perm restored, no rewrite
    register(table, reg(A0, 0, acting=True), body(version=DataVersion(3, 3_000)), conn="c0")
    r = both_routes(table, "T1")
    assert r is not None
    assert r.queue_datas == [qd("broker-a", 4, 4, RW)]
    assert r.broker_datas == [bd({0: A0, 1: A1, 2: A2}, acting=True)]


# ----------------------------------------------------------------------
# cluster info and topic lists


def test_cluster_info_body_shape() -> None:
    table = RouteTable()
    assert table.cluster_info_body() == b'{"brokerAddrTable":{},"clusterAddrTable":{}}'
    register(table, reg(A0, 0))
    register(table, reg(A1, 1), conn="c1")
    register(table, reg(B0, name="broker-b", zone="z1"), conn="cb")
    register(table, reg("10.9.9.9:1", name="broker-z", cluster=C2, acting=True), conn="cz")
    raw = table.cluster_info_body()
    assert raw.startswith(
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
        b'"brokerName":"broker-a","cluster":"cluster-1","enableActingMaster":false},'
    )
    assert b'"zoneName":"z1"' in raw
    assert raw.endswith(b'"clusterAddrTable":{"cluster-1":["broker-a","broker-b"],"cluster-2":["broker-z"]}}')
    info = ClusterInfo.decode(raw)
    assert info.broker_addr_table == {
        "broker-a": bd({0: A0, 1: A1}),
        "broker-b": bd({0: B0}, name="broker-b", zone="z1"),
        "broker-z": bd({0: "10.9.9.9:1"}, name="broker-z", cluster=C2, acting=True),
    }
    assert info.cluster_addr_table == {C1: ["broker-a", "broker-b"], C2: ["broker-z"]}
    table.unregister_broker(C1, A1, "broker-a")
    table.unregister_broker(C2, "10.9.9.9:1", "broker-z")
    info = ClusterInfo.decode(table.cluster_info_body())
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: A0}
    assert set(info.broker_addr_table) == {"broker-a", "broker-b"}
    assert info.cluster_addr_table == {C1: ["broker-a", "broker-b"]}


def test_cluster_info_follows_a_broker_name_joining_another_cluster() -> None:
    table = RouteTable()
    register(table, reg())
    assert ClusterInfo.decode(table.cluster_info_body()).cluster_addr_table == {C1: ["broker-a"]}
    register(table, reg(cluster=C2), conn="c2", now=1)
    assert table.topics_by_cluster(C2) == ["T1", "T2", "T3"]
    assert ClusterInfo.decode(table.cluster_info_body()).cluster_addr_table == {C1: ["broker-a"], C2: ["broker-a"]}


def test_all_topics_and_topics_by_cluster() -> None:
    table = two_cluster_table()
    assert sorted(table.all_topics()) == ["T1", "T2", "T3", "TB"]
    assert sorted(table.topics_by_cluster(C1)) == ["T1", "T2", "T3"]
    assert sorted(table.topics_by_cluster(C2)) == ["T1", "TB"]
    assert table.topics_by_cluster("unknown") == []
    assert RouteTable().all_topics() == []


def test_system_topics() -> None:
    table = RouteTable()
    assert table.system_topics() == ([], None)
    register(table, reg(A1, 1, acting=None))  # old slave first: lowest id is 1
    register(table, reg(B0, name="broker-b"), conn="cb")
    register(table, reg("10.9.9.9:1", name="broker-z", cluster=C2), conn="cz")
    topics, addr = table.system_topics()
    assert topics == [C1, "broker-a", "broker-b", C2, "broker-z"]
    assert addr == A1
    register(table, reg(A0, 0), conn="c0")
    assert table.system_topics()[1] == A0
    for a, n, c in ((A0, "broker-a", C1), (A1, "broker-a", C1), (B0, "broker-b", C1), ("10.9.9.9:1", "broker-z", C2)):
        table.unregister_broker(c, a, n)
    assert table.system_topics() == ([], None)


def test_unit_topic_lists_use_first_queue_data_flags() -> None:
    table = RouteTable()
    register(
        table,
        reg(),
        body({"Plain": (1, 1, RW, 0), "Unit": (1, 1, RW, 1), "Sub": (1, 1, RW, 2), "Both": (1, 1, RW, 3), "Mixed": (1, 1, RW, 0)}),
    )
    # "Mixed": first QueueData (broker-a) has no flag, the second one has both
    register(table, reg(B0, name="broker-b"), body({"Mixed": (1, 1, RW, 3), "Other": (1, 1, RW, 1)}), conn="cb")

    def listed(kind: str) -> list[str]:
        want, exclude = UNIT_TOPIC_FLAGS[kind]
        return sorted(table.unit_topics(want, exclude))

    assert listed("unit") == ["Both", "Other", "Unit"]
    assert listed("unit_sub") == ["Both", "Sub"]
    assert listed("unit_sub_ununit") == ["Sub"]
    r = route(table, "Both")
    assert r is not None and r.queue_datas == [qd("broker-a", 1, 1, RW, 3)]


def test_broker_member_group() -> None:
    table = RouteTable()
    register(table, reg(A1, 1), conn="c1")
    register(table, reg(A0, 0), conn="c0")
    group = table.broker_member_group("broker-a")
    assert group == {0: A0, 1: A1}
    assert list(group) == [0, 1]
    assert table.broker_member_group("nobody") == {}
    assert fastjson.dumps({"brokerAddrs": group}) == b'{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}}'


def test_register_topic() -> None:
    table = RouteTable()
    register(table, reg())
    register(table, reg(B0, name="broker-b"), body({"TB": (1, 1, RW, 0), "TB2": (1, 1, RW, 0)}), conn="cb")
    # unknown broker aborts a new topic completely
    table.register_topic("New", [("broker-a", 2, 2, RW, 0), ("ghost", 2, 2, RW, 0)])
    assert "New" not in table.all_topics()
    assert route(table, "New") is None
    table.register_topic("New", [])
    assert "New" not in table.all_topics()
    # known brokers: created
    table.register_topic("New", [("broker-a", 2, 2, RW, 0), ("broker-b", 3, 3, R, 0)])
    r = both_routes(table, "New")
    assert r is not None
    assert r.queue_datas == [qd("broker-a", 2, 2, RW), qd("broker-b", 3, 3, R)]
    assert r.broker_datas == [bd({0: A0}), bd({0: B0}, name="broker-b")]
    # existing topic: entries before an unknown broker are applied, then it stops
    table.register_topic("T1", [("broker-b", 5, 5, RW, 0), ("ghost", 1, 1, RW, 0), ("broker-a", 9, 9, RW, 0)])
    r = both_routes(table, "T1")
    assert r is not None
    assert r.queue_datas == [qd("broker-a", 4, 4, RW), qd("broker-b", 5, 5, RW)]
    # replacing an existing entry
    table.register_topic("T1", [("broker-a", 7, 7, R, 0)])
    r = both_routes(table, "T1")
    assert r is not None
    assert r.queue_datas == [qd("broker-a", 7, 7, R), qd("broker-b", 5, 5, RW)]
