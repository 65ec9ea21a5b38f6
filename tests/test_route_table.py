"""The routing table as pure state: injected time, opaque connections."""

from __future__ import annotations

import json

import pytest

from namesrv.routes import Registration, RouteOptions, RouteTable
from remoting.bodies import BodyError, ClusterInfo, DataVersion, RegisterBody, TopicRouteData

C = "DefaultCluster"


def body(*topics: str, counter: int = 1, perm: int = 6, state: int = 0, sysflag: int = 0, **extra: object) -> RegisterBody:
    table = {"TBW102": (8, 8, 7, 0)}
    table.update({t: (4, 4, perm, sysflag) for t in topics})
    return RegisterBody(DataVersion(counter, 1000 + counter, state), table, **extra)  # type: ignore[arg-type]


class Loader:
    """A load_body that counts its calls."""

    def __init__(self, value: RegisterBody | Exception) -> None:
        self.value = value
        self.calls = 0

    def __call__(self) -> RegisterBody:
        self.calls += 1
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


def register(
    table: RouteTable, name: str, addr: str, broker_id: int = 0, b: RegisterBody | None = None,
    *, conn: object = "conn", now: float = 0.0, digest: bytes | None = None, cluster: str = C, **kw: object,
):  # type: ignore[no-untyped-def]
    reg = Registration(cluster, addr, name, broker_id, ha_server_addr=addr + "-ha", **kw)  # type: ignore[arg-type]
    return table.register_broker(reg, Loader(b or body("T")), body_digest=digest, conn=conn, now=now)


def route(table: RouteTable, topic: str, standard: bool = True) -> TopicRouteData | None:
    raw = table.route_body(topic, standard)
    return TopicRouteData.decode(raw) if raw is not None else None


def perms(table: RouteTable, topic: str) -> dict[str, int]:
    r = route(table, topic)
    assert r is not None
    return {q.broker_name: q.perm for q in r.queue_datas}


def test_master_slave_and_ha_addresses() -> None:
    t = RouteTable()
    early = register(t, "a", "s:1", 1)
    assert early.ok and early.master_addr is None  # no master yet
    master = register(t, "a", "m:1", 0)
    assert (master.ha_server_addr, master.master_addr) == (None, None)
    slave = register(t, "a", "s:1", 1)
    assert (slave.ha_server_addr, slave.master_addr) == ("m:1-ha", "m:1")
    r = route(t, "T")
    assert r is not None and r.broker_datas[0].broker_addrs == {0: "m:1", 1: "s:1"}
    assert len(r.queue_datas) == 1


def test_slave_topics_do_not_feed_routes() -> None:
    t = RouteTable()
    register(t, "a", "s:1", 1, body("OnlySlave"))
    assert route(t, "OnlySlave") is None


def test_data_version_decides_reapply_and_wipe_persists() -> None:
    t = RouteTable()
    register(t, "a", "m:1", b=body("T", "U"))
    assert t.wipe_write_perm("a") == 3
    assert perms(t, "T") == {"a": 4} and perms(t, "TBW102") == {"a": 5}
    register(t, "a", "m:1", b=body("T", "U"))  # same version: the wipe stays
    assert perms(t, "T") == {"a": 4}
    register(t, "a", "m:1", b=body("T", "U", counter=2))  # new version: re-applied
    assert perms(t, "T") == {"a": 6}
    t.wipe_write_perm("a")
    assert t.add_write_perm("a") == 3
    assert perms(t, "TBW102") == {"a": 6}  # add sets exactly RW
    assert t.wipe_write_perm("nobody") == 0


def test_unreported_topics_kept_unless_option() -> None:
    t = RouteTable()
    register(t, "a", "m:1", b=body("Old"))
    register(t, "a", "m:1", b=body("New", counter=2))
    assert route(t, "Old") is not None
    t2 = RouteTable(RouteOptions(delete_topic_with_broker_registration=True))
    register(t2, "a", "m:1", b=body("Old"))
    register(t2, "a", "m:1", b=body("New", counter=2))
    assert route(t2, "Old") is None and route(t2, "New") is not None


def test_unchanged_body_skips_parsing_until_something_was_removed() -> None:
    t = RouteTable()
    reg = Registration(C, "m:1", "a", 0)
    first = Loader(body("T", "U"))
    t.register_broker(reg, first, body_digest=b"d1", conn="c", now=0)
    again = Loader(body("T", "U"))
    t.register_broker(reg, again, body_digest=b"d1", conn="c", now=1)
    assert again.calls == 0  # the heartbeat re-registration was not parsed
    t.delete_topic("U")
    assert route(t, "U") is None
    restore = Loader(body("T", "U"))
    t.register_broker(reg, restore, body_digest=b"d1", conn="c", now=2)
    assert restore.calls == 1 and route(t, "U") is not None  # 5.x re-adds missing queue data
    changed = Loader(body("T", counter=2))
    t.register_broker(reg, changed, body_digest=b"d2", conn="c", now=3)
    assert changed.calls == 1


def test_refused_and_failed_registrations_leave_no_trace() -> None:
    t = RouteTable()
    one = RegisterBody(DataVersion(1, 1), {"Only": (1, 1, 6, 0)})
    reg = Registration(C, "m:1", "a", 0)
    assert not t.register_broker(reg, Loader(one), body_digest=None, conn="c", now=0).ok
    with pytest.raises(BodyError):
        t.register_broker(reg, Loader(BodyError("bad")), body_digest=None, conn="c", now=0)
    assert t.brokers == {} and t.clusters == {} and t.live == {} and t.topic_queues == {}


def test_state_version_tie_break() -> None:
    t = RouteTable()
    register(t, "a", "old:1", b=body("T", state=5), enable_acting_master=False)
    out = register(t, "a", "new:1", b=body("T", state=1), conn="c2", enable_acting_master=False)
    assert out.ok and ("C", "new:1") not in t.live
    assert t.brokers["a"].addrs == {0: "old:1"}
    register(t, "a", "new:1", b=body("T", state=9), conn="c2", enable_acting_master=False)
    assert t.brokers["a"].addrs == {0: "new:1"}


def test_unregister_last_address_removes_everything() -> None:
    t = RouteTable()
    register(t, "a", "m:1", b=body("T"))
    register(t, "b", "n:1", b=body("T", "OnlyA"), cluster="Other")
    register(t, "a", "s:1", 1)
    t.unregister_broker(C, "m:1", "a")
    assert t.brokers["a"].addrs == {1: "s:1"}
    t.unregister_broker(C, "s:1", "a")
    assert "a" not in t.brokers and C not in t.clusters
    assert perms(t, "T") == {"b": 6}
    t.unregister_broker("Other", "n:1", "b")
    assert t.topic_queues == {} and t.clusters == {}


def test_connection_close_only_drops_its_own_brokers() -> None:
    t = RouteTable()
    register(t, "a", "m:1", conn="old")
    register(t, "a", "m:1", conn="new")  # the broker reconnected
    register(t, "b", "n:1", conn="old")
    removed = t.connection_closed("old")
    assert [r.name for r in removed] == ["b"]
    assert "a" in t.brokers and "b" not in t.brokers
    assert [r.name for r in t.connection_closed("new")] == ["a"]


def test_expiry_with_injected_time() -> None:
    t = RouteTable()  # default timeout 120,000 ms; "b" asked for 10,000
    register(t, "a", "m:1", now=0)
    register(t, "b", "n:1", now=0, heartbeat_timeout_ms=10_000)
    assert t.scan_not_active(10_000) == []  # expiry is strictly after the timeout
    assert [r.name for r in t.scan_not_active(10_001)] == ["b"]
    assert t.heartbeat(C, "m:1", 100_000)
    changed, stored = t.query_data_version(C, "m:1", DataVersion(2, 2), 200_000)
    assert changed and stored == DataVersion(1, 1001)
    assert t.scan_not_active(320_000) == []
    assert [r.reason for r in t.scan_not_active(320_001)] == ["heartbeat timeout"]
    assert t.query_data_version(C, "m:1", DataVersion(), 0) == (True, None)


def test_routes_follow_every_change_in_both_encodings() -> None:
    t = RouteTable()
    register(t, "a", "m:1", b=body("T", "U"))
    legacy = t.route_body("T", False)
    assert legacy is not None and b'{0:"m:1"}' in legacy
    assert t.route_body("T", True) is t.route_body("U", True)  # equal queue data: one shared body
    register(t, "a", "s:1", 1)
    assert b'{0:"m:1",1:"s:1"}' in (t.route_body("T", False) or b"")
    t.wipe_write_perm("a")
    assert perms(t, "T") == {"a": 4}
    register(t, "b", "n:1", b=body("T", "U", filter_servers=["f:1"]))
    r = route(t, "T")
    assert r is not None and r.filter_server_table == {"n:1": ["f:1"]}
    t.delete_topic("T", "Nope")
    assert perms(t, "T") == {"a": 4, "b": 6}
    t.unregister_broker(C, "n:1", "b")
    assert perms(t, "T") == {"a": 4}
    t.delete_topic("T")
    assert route(t, "T") is None and route(t, "U") is not None


def test_static_topic_mapping_in_route() -> None:
    t = RouteTable()
    info = {"bname": "a", "currIdMap": {"0": 0}, "epoch": 1, "scope": "__global__", "topic": "S", "totalQueues": 1}
    register(t, "a", "m:1", b=body("S", mapping_infos={"S": info}))
    raw = t.route_body("S", True)
    assert raw is not None
    assert json.loads(raw)["topicQueueMappingByBroker"] == {"a": info}
    assert "topicQueueMappingByBroker" not in json.loads(t.route_body("TBW102", True) or b"{}")


def test_topic_lists() -> None:
    t = RouteTable()
    assert t.system_topics() == ([], None)
    register(t, "a", "m:1", b=body("Unit", sysflag=1))
    register(t, "b", "n:1", b=body("Sub", sysflag=2), cluster="Other")
    register(t, "c", "o:1", b=body("Both", sysflag=3), cluster="Other")
    assert sorted(t.all_topics()) == ["Both", "Sub", "TBW102", "Unit"]
    assert sorted(t.topics_by_cluster("Other")) == ["Both", "Sub", "TBW102"]
    assert t.topics_by_cluster("Nope") == []
    topics, addr = t.system_topics()
    assert topics == [C, "a", "Other", "b", "c"] and addr == "m:1"
    assert sorted(t.unit_topics(1)) == ["Both", "Unit"]
    assert sorted(t.unit_topics(2)) == ["Both", "Sub"]
    assert t.unit_topics(2, exclude=1) == ["Sub"]
    assert t.broker_member_group("a") == {0: "m:1"} and t.broker_member_group("x") == {}


def test_register_topic_needs_known_brokers() -> None:
    t = RouteTable()
    register(t, "a", "m:1")
    t.register_topic("New", [("a", 2, 2, 6, 0), ("ghost", 1, 1, 6, 0)])
    assert route(t, "New") is None  # a new topic with an unknown broker is not created
    t.register_topic("New", [("a", 2, 2, 6, 0)])
    assert perms(t, "New") == {"a": 6}


def test_acting_master_rewrites_route_when_enabled() -> None:
    t = RouteTable(RouteOptions(support_acting_master=True))
    register(t, "a", "m:1", b=body("T"), enable_acting_master=True)
    register(t, "a", "s:1", 1, b=body("T"), enable_acting_master=True)
    t.unregister_broker(C, "m:1", "a")
    r = route(t, "T")
    assert r is not None and r.broker_datas[0].broker_addrs == {0: "s:1"}
    assert r.queue_datas[0].perm == 4  # no master: write perm cleared


def test_cluster_info_shape() -> None:
    t = RouteTable()
    register(t, "a", "m:1")
    raw = t.cluster_info_body()
    assert raw.startswith(b'{"brokerAddrTable":{"a":{"brokerAddrs":{0:"m:1"}')
    info = ClusterInfo.decode(raw)
    assert info.cluster_addr_table == {C: ["a"]}
