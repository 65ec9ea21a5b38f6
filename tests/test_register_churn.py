"""Registrations applied in proportion to what changed, in slices (issue 12).

The route table is driven in-process with raw register bodies (the path the
server takes) and compared with the same table fed parsed bodies (the
plain, apply-everything path): the two must agree after every step of
random churn. The server tests use a real ``mqnamesrv`` over TCP.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
import trio

from namesrv.registration.body import RawBody
from namesrv.registration.compact import CHUNK_ITEMS
from namesrv.registration.topics import PLAN_SLICE_TOPICS
from namesrv.routes import APPLY_SLICE, Registration, RouteOptions, RouteTable
from namesrv.slices import run_to_end
from remoting import requests as rq
from remoting.bodies import BodyError, DataVersion, TopicConfig
from remoting.register_body import RegisterBody, encode_register_body, parse_register_body
from remoting.codec import FrameDecoder, encode
from remoting.codes import RequestCode, ResponseCode, Version
from remoting.command import request
from remoting.transport import connect
from tests.procs import NamesrvProcess

V533 = int(Version.V5_3_3)
V497 = int(Version.V4_9_7)
OLD = 30  # before 3.0.11: the body is the bare wrapper


class CountingParse:
    """parse_register_body, counting calls and topics parsed since the last ``reset``."""

    def __init__(self) -> None:
        self.calls = 0
        self.topics = 0

    def __call__(self, body: bytes, compressed: bool, version: int) -> RegisterBody:
        out = parse_register_body(body, compressed=compressed, version=version)
        self.calls += 1
        self.topics += len(out.topics)
        return out

    def reset(self) -> None:
        self.calls = self.topics = 0


def java_body(configs: list[TopicConfig], dv: DataVersion, mappings: dict[str, Any] | None = None) -> bytes:
    """A 5.x broker's JSON body: fastjson's key order, with the mapping fields Java adds."""
    wrapper = {
        "dataVersion": dv.to_obj(),
        "mappingDataVersion": {"counter": 0, "stateVersion": 0, "timestamp": 1},
        "topicConfigTable": {tc.topic_name: tc.to_obj() for tc in configs},
        "topicQueueMappingDetailMap": {},
        "topicQueueMappingInfoMap": mappings or {},
    }
    return orjson.dumps({"filterServerList": [], "topicConfigSerializeWrapper": wrapper})


FORMS = {
    "java": lambda cs, dv: (java_body(cs, dv), False, V533),
    "json": lambda cs, dv: (encode_register_body(cs, dv), False, V533),
    "wrapper": lambda cs, dv: (encode_register_body(cs, dv, version=OLD), False, OLD),
    "compact-4.9": lambda cs, dv: (encode_register_body(cs, dv, compressed=True, version=V497), True, V497),
    "compact-5": lambda cs, dv: (encode_register_body(cs, dv, compressed=True, version=V533), True, V533),
}


def reg(addr: str = "10.0.0.1:10911", name: str = "broker-a", broker_id: int = 0, acting: bool = False) -> Registration:
    return Registration("c1", addr, name, broker_id, enable_acting_master=acting)


def state(table: RouteTable) -> tuple[Any, ...]:
    """Everything a client or an admin can see, with order."""
    return (
        [(t, list(q.items())) for t, q in table.topic_queues.items()],
        {t: dict(m) for t, m in table.mappings.items()},
        {k: (v.data_version, v.applied_as_writer) for k, v in table.live.items()},
        {n: (b.addrs, b.enable_acting_master) for n, b in table.brokers.items()},
        [table.route_body(t, True) for t in list(table.topic_queues)[:50]],
    )


class Pair:
    """Two tables fed the same registrations: raw bodies (incremental) and parsed ones (full)."""

    def __init__(self, delete: bool = False) -> None:
        self.raw = RouteTable(RouteOptions(delete_topic_with_broker_registration=delete))
        self.full = RouteTable(RouteOptions(delete_topic_with_broker_registration=delete))
        self.parse = CountingParse()

    def register(self, registration: Registration, body: bytes, compressed: bool, version: int, now: float = 0) -> None:
        raw = RawBody(body, compressed, version, self.parse)
        digest = run_to_end(raw.digest())
        a = run_to_end(self.raw.register_raw(registration, raw, conn="c", now=now))
        b = self.full.register_broker(
            registration, lambda: parse_register_body(body, compressed=compressed, version=version),
            body_digest=digest, conn="c", now=now,
        )
        assert a == b
        assert state(self.raw) == state(self.full)

    def both(self, op: str, *args: Any) -> None:
        getattr(self.raw, op)(*args)
        getattr(self.full, op)(*args)


def names(rng: random.Random, n: int) -> list[str]:
    odd = ["a},\"x\":{", "ü-topic", "%RETRY%g", "t\\q"]  # no spaces: the compact form splits on them
    return [f"t{rng.randrange(10**6):06d}" if rng.random() > 0.01 else rng.choice(odd) + str(i) for i in range(n)]


@pytest.mark.parametrize("delete", [False, True])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_incremental_apply_matches_full_apply(form: str, delete: bool) -> None:
    rng = random.Random(f"{form}-{delete}")
    pair = Pair(delete)
    configs = {n: TopicConfig(n, 8, 8, 6) for n in names(rng, 2500)}
    counter = 1
    other = {n: TopicConfig(n, 4, 4, 6) for n in list(configs)[::7]}
    for step in range(45):
        op = rng.random()
        if op < 0.25:  # some topics change
            for n in rng.sample(list(configs), rng.randint(1, 20)):
                configs[n] = TopicConfig(n, rng.randint(1, 16), 8, rng.choice([2, 4, 6, 7]))
            counter += 1
        elif op < 0.4:  # topics created (anywhere in the table's order)
            items = list(configs.items())
            for n in names(rng, rng.randint(1, 60)):
                items.insert(rng.randrange(len(items) + 1), (n, TopicConfig(n, 4, 4, 6)))
            configs = dict(items)
            counter += 1
        elif op < 0.55:  # topics deleted
            for n in rng.sample(list(configs), min(len(configs) - 2, rng.randint(1, 400))):
                del configs[n]
            counter += 1
        elif op < 0.65:
            counter += 1  # a new data version, the same table
        elif op < 0.7:
            configs = dict(rng.sample(list(configs.items()), len(configs)))  # another order
        elif op < 0.75:
            pair.both("wipe_write_perm", "broker-a")
        elif op < 0.8:
            pair.both("delete_topic", rng.choice(list(pair.raw.topic_queues)))
        elif op < 0.85:
            pair.both("register_topic", f"extra-{step}", [("broker-a", 2, 2, 6, 0)])
        elif op < 0.9:  # another broker shares some topics, then leaves again
            body, c, v = FORMS[form](list(other.values()), DataVersion(step, step))
            pair.register(reg("10.0.1.1:10911", "broker-b"), body, c, v, now=step)
            if rng.random() < 0.5:
                pair.both("unregister_broker", "c1", "10.0.1.1:10911", "broker-b")
        # else: the very same body again
        body, c, v = FORMS[form](list(configs.values()), DataVersion(counter, counter))
        pair.register(reg(), body, c, v, now=step)


def test_acting_master_slave_and_returning_master_match_full_apply() -> None:
    pair = Pair()
    configs = [TopicConfig(f"t{i:05d}", 8, 8, 6) for i in range(3000)]
    body, c, v = FORMS["java"](configs, DataVersion(1, 1))
    pair.register(reg(acting=True), body, c, v)
    pair.register(reg("10.0.0.2:10911", broker_id=1, acting=True), body, c, v)
    pair.both("unregister_broker", "c1", "10.0.0.1:10911", "broker-a")  # the slave writes now, read-only
    body2, c, v = FORMS["java"](configs, DataVersion(2, 1))
    pair.register(reg("10.0.0.2:10911", broker_id=1, acting=True), body2, c, v, now=1)
    pair.register(reg(acting=True), body2, c, v, now=2)  # the master is back: write perm again
    assert {q["broker-a"][3] for q in pair.raw.topic_queues.values()} == {6}


@pytest.mark.parametrize("form", ["java", "compact-5"])
def test_cost_follows_what_changed(form: str) -> None:
    table = RouteTable()
    parse = CountingParse()
    configs = [TopicConfig(f"t{i:05d}", 8, 8, 6) for i in range(20_000)]

    def register(cs: list[TopicConfig], counter: int) -> None:
        body, c, v = FORMS[form](cs, DataVersion(counter, counter))
        parse.reset()
        assert run_to_end(table.register_raw(reg(), RawBody(body, c, v, parse), conn="c", now=counter)).ok

    register(configs, 1)
    assert parse.topics == 20_000
    cached = {t: table.route_body(t, True) for t in ("t00001", "t10000", "t19999")}
    register(configs, 2)  # a new data version, an identical table: no topic is parsed
    assert parse.topics == 0 and parse.calls == 1  # the body without its topics
    assert all(table.route_body(t, True) is body for t, body in cached.items())
    configs[10_000] = TopicConfig("t10000", 8, 8, 2)
    register(configs, 3)  # one topic changed: its chunk alone is parsed, its route alone re-encoded
    assert 1 <= parse.topics <= CHUNK_ITEMS * 4
    assert table.route_body("t00001", True) is cached["t00001"]
    assert table.route_body("t10000", True) != cached["t10000"]
    assert table.topic_queues["t10000"]["broker-a"][3] == 2
    configs.insert(5_000, TopicConfig("new-topic", 1, 1, 6))
    del configs[15_000]
    register(configs, 4)  # one added, one removed: two chunks
    assert 2 <= parse.topics <= CHUNK_ITEMS * 8
    assert "new-topic" in table.topic_queues


@pytest.mark.parametrize("form", ["json", "compact-5"])
def test_large_registration_is_sliced_and_invisible_until_applied(form: str) -> None:
    """Planned in slices changing nothing, written in slices behind the old state, shown in one step."""
    table = RouteTable()
    small, c, v = FORMS[form]([TopicConfig(f"old-{i}", 4, 4, 6) for i in range(10)], DataVersion(1, 1))
    run_to_end(table.register_raw(reg(), RawBody(small, c, v, CountingParse()), conn="c", now=0))
    before = state(table)
    old_topics = table.all_topics()
    old_route = table.route_body("old-3", True)
    configs = [TopicConfig(f"old-{i}", 8, 8, 2) for i in range(10)] + [
        TopicConfig(f"big-{i:06d}", 8, 8, 6) for i in range(60_000)
    ]
    body, c, v = FORMS[form](configs, DataVersion(2, 2))
    parse = CountingParse()
    steps = table.register_raw(reg(), RawBody(body, c, v, parse), conn="c", now=1)
    planning, writing, most = 0, 0, 0
    while True:
        parse.reset()
        was_writing = table.applying
        try:
            next(steps)
        except StopIteration as done:
            assert done.value.ok
            break
        most = max(most, parse.topics)
        if was_writing:
            assert parse.topics == 0  # the plan is done: writing parses nothing
        if table.applying:
            writing += 1
        elif writing:  # committed: what the old state held is being freed
            assert not table.before and table.route_body("big-000001", True) is not None
            continue
        else:
            planning += 1
            assert state(table) == before  # planning changes nothing at all
        # between slices: queries see the broker as it was, nothing of the new body
        assert table.route_body("old-3", True) is old_route
        assert table.route_body("big-000001", True) is None
        assert table.all_topics() == old_topics
        assert table.live[("c1", "10.0.0.1:10911")].data_version == DataVersion(1, 1)
    assert planning >= 20
    assert writing >= 60_010 // APPLY_SLICE
    assert most <= PLAN_SLICE_TOPICS + 4 * CHUNK_ITEMS
    assert not table.applying and not table.before
    assert len(table.topic_queues) == len(table.all_topics()) == 60_010
    assert table.topic_queues["old-3"]["broker-a"][3] == 2
    assert orjson.loads(table.route_body("old-3", True))["queueDatas"][0]["perm"] == 2
    assert table.route_body("big-059999", True) is not None


def test_brokers_with_the_same_table_share_chunk_contents_and_the_store_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("namesrv.routes.CHUNK_CONTENTS_SLACK", 16)
    table = RouteTable()
    table._chunk_contents_limit = 16
    configs = [TopicConfig(f"t{i:05d}", 8, 8, 6) for i in range(5000)]
    parses = []

    def counted(body: bytes, compressed: bool, version: int) -> RegisterBody:
        parses.append(len(body))
        return parse_register_body_(body, compressed, version)

    for b in range(4):
        body, c, v = FORMS["java"](configs, DataVersion(1, 1))
        run_to_end(table.register_raw(reg(f"10.0.0.{b}:1", f"broker-{b}"), RawBody(body, c, v, counted), conn=b, now=0))
        if b == 0:
            first_parses, parses[:] = len(parses), []
    records = [table._applied[f"broker-{b}"].chunks for b in range(4)]
    assert len(records[0]) > 10 and all(r.keys() == records[0].keys() for r in records)
    assert all(records[b][d].topics is records[0][d].topics for b in range(4) for d in records[0])
    # the brokers that joined parsed their bodies' rest only, none of the chunks the first one parsed
    assert first_parses > len(records[0]) and len(parses) == 3, (first_parses, parses)
    assert all(table.topic_queues[f"t{i:05d}"][f"broker-{b}"] == (f"broker-{b}", 8, 8, 6, 0)
               for i in (0, 2500, 4999) for b in range(4))
    most = 0
    for counter in range(2, 80):  # one topic changes per registration: a new digest each time
        configs[counter] = TopicConfig(configs[counter].topic_name, counter % 7 + 1, 8, 6)
        body, c, v = FORMS["java"](configs, DataVersion(counter, 1))
        run_to_end(table.register_raw(reg("10.0.0.0:1", "broker-0"), RawBody(body, c, v, parse_register_body_), conn=0, now=counter))
        in_use = {d for rec in table._applied.values() for d in rec.chunks}
        most = max(most, len(in_use))
        assert len(table._chunk_contents) <= 2 * most + 16
        assert in_use <= table._chunk_contents.keys()
    assert table.topic_queues["t00079"]["broker-0"][1] == 79 % 7 + 1


def parse_register_body_(body: bytes, compressed: bool, version: int) -> RegisterBody:
    return parse_register_body(body, compressed=compressed, version=version)


def test_change_made_while_a_registration_is_suspended_is_kept() -> None:
    """A writer that skipped the table lock: the registration notices and redoes itself."""
    table, expected = RouteTable(), RouteTable()
    shared = [TopicConfig(f"t{i:05d}", 8, 8, 6) for i in range(20_000)]
    for t in (table, expected):
        body, c, v = FORMS["json"](shared, DataVersion(1, 1))
        run_to_end(t.register_raw(reg("10.0.1.1:1", "broker-b"), RawBody(body, c, v, CountingParse()), conn="b", now=0))
    body, c, v = FORMS["json"](shared, DataVersion(1, 1))
    steps = table.register_raw(reg(), RawBody(body, c, v, CountingParse()), conn="a", now=1)
    next(steps)
    next(steps)
    table.unregister_broker("c1", "10.0.1.1:1", "broker-b")
    assert run_to_end(steps).ok
    expected.unregister_broker("c1", "10.0.1.1:1", "broker-b")
    run_to_end(expected.register_raw(reg(), RawBody(body, c, v, CountingParse()), conn="a", now=1))
    assert state(table) == state(expected)


def test_bodies_laid_out_otherwise_are_parsed_whole() -> None:
    configs = [TopicConfig(f"t{i:04d}", 8, 8, 6) for i in range(3000)]
    wrapper = {"dataVersion": DataVersion(1, 1).to_obj(), "topicConfigTable": {tc.topic_name: tc.to_obj() for tc in configs}}
    pretty = orjson.dumps({"filterServerList": [], "topicConfigSerializeWrapper": wrapper}, option=orjson.OPT_INDENT_2)
    # a later repeated key wins in a full parse: here the second table is empty
    repeated = java_body(configs, DataVersion(1, 1))[:-2] + b',"topicConfigTable":{}}}'
    for body, topics in ((pretty, 3000), (repeated, 0)):
        pair = Pair()
        pair.register(reg(), body, False, V533)
        assert len(pair.raw.topic_queues) == topics


def test_a_bad_chunk_fails_like_a_full_parse_and_changes_nothing() -> None:
    table = RouteTable()
    configs = [TopicConfig(f"t{i:05d}", 8, 8, 6) for i in range(5000)]
    good = encode_register_body(configs, DataVersion(1, 1))
    run_to_end(table.register_raw(reg(), RawBody(good, False, V533, CountingParse()), conn="c", now=0))
    before = state(table)
    body = encode_register_body(configs, DataVersion(2, 2))
    at = body.index(b'"readQueueNums":8', len(body) // 2)
    bad = body[:at] + b'"readQueueNums":"many"' + body[at + len(b'"readQueueNums":8') :]
    with pytest.raises(BodyError, match="readQueueNums"):
        run_to_end(table.register_raw(reg(), RawBody(bad, False, V533, CountingParse()), conn="c", now=1))
    assert state(table) == before


@pytest.mark.parametrize("form", ["json", "compact-5"])
def test_topic_bound_holds_for_skipped_chunks_too(form: str) -> None:
    table = RouteTable()
    configs = [TopicConfig(f"t{i:05d}", 8, 8, 6) for i in range(4000)]

    def register(cs: list[TopicConfig], counter: int) -> bool:
        body, c, v = FORMS[form](cs, DataVersion(counter, counter))
        raw = RawBody(body, c, v, CountingParse(), max_topics=4000)
        return run_to_end(table.register_raw(reg(), raw, conn="c", now=counter)).ok

    assert register(configs, 1)
    before = state(table)
    with pytest.raises(BodyError, match="4001 topics|4000"):
        register(configs + [TopicConfig("one-too-many", 1, 1, 6)], 2)
    assert state(table) == before


# --------------------------------------------------------------------------
# over TCP: route queries keep flowing, order guarantees hold


def big_register(name: str, topics: int, perm: int, counter: int, addr: str = "127.0.0.1:20911") -> Any:
    return rq.register_broker(
        cluster="DefaultCluster", broker_name=name, broker_addr=addr, broker_id=0,
        topics=[TopicConfig("TBW102", 8, 8, 7)] + [TopicConfig(f"{name}-{i:06d}", 4, 4, perm) for i in range(topics)],
        data_version=DataVersion(counter, 1), compressed=True, version=V497,
    )


async def route_perm(client: Any, topic: str) -> int | None:
    resp = await client.invoke(rq.get_route(topic), timeout=10)
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert resp.code == ResponseCode.SUCCESS
    return int(orjson.loads(resp.body)["queueDatas"][0]["perm"])


async def test_queries_flow_during_a_large_registration_and_see_it_whole(namesrv: NamesrvProcess) -> None:
    async with connect(namesrv.addr) as broker, connect(namesrv.addr) as client:
        first = await broker.invoke(big_register("big", 60_000, 6, 1), timeout=30)
        assert first.code == ResponseCode.SUCCESS
        change = big_register("big", 60_000, 2, 2)  # every topic's perm changes in one registration
        seen: list[int | None] = []
        done = trio.Event()

        async def query() -> None:
            rng = random.Random(7)
            while not done.is_set():
                seen.append(await route_perm(client, f"big-{rng.randrange(60_000):06d}"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(query)
            await trio.sleep(0.05)
            answered_before = len(seen)
            resp = await broker.invoke(change, timeout=30)
            during = len(seen) - answered_before
            done.set()
        assert resp.code == ResponseCode.SUCCESS
        assert during >= 5, "route queries stalled while the registration was applied"
        assert set(seen) <= {6, 2}
        flipped = seen.index(2) if 2 in seen else len(seen)
        assert all(p == 2 for p in seen[flipped:]), "a query saw the old state after the new one"
        assert await route_perm(client, "big-000123") == 2


def _tcp_queues(local_port: int, remote_port: int) -> tuple[int, int] | None:
    """(bytes sent and not acknowledged, bytes received and not read) of one loopback TCP socket, from /proc."""
    with open("/proc/net/tcp") as fh:
        for line in fh.readlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == local_port and int(fields[2].rsplit(":", 1)[1], 16) == remote_port:
                tx, rx = fields[4].split(":")
                return int(tx, 16), int(rx, 16)
    return None


async def _read_by_server(client_port: int, server_port: int) -> None:
    """Wait until every byte the client sent so far left its socket and the server process read them all."""
    with trio.fail_after(30):
        while True:
            await trio.sleep(0.005)
            sent = _tcp_queues(client_port, server_port)
            unread = _tcp_queues(server_port, client_port)
            if sent is not None and unread is not None and sent[0] == 0 and unread[1] == 0:
                return


async def test_unregistration_arriving_during_a_registration_wins(namesrv: NamesrvProcess) -> None:
    frame = encode(big_register("gone", 60_000, 6, 1))
    host, port = namesrv.addr.rsplit(":", 1)
    broker = await trio.open_tcp_stream(host, int(port))
    try:
        async with connect(namesrv.addr) as admin:
            async def registration_answer() -> None:
                decoder = FrameDecoder(1 << 24)
                got: list[Any] = []
                while not got:
                    data = await broker.receive_some(1 << 16)
                    assert data, "the registration's connection closed without an answer"
                    got = decoder.feed(data)
                assert got[0].code == ResponseCode.SUCCESS

            await broker.send_all(frame)
            # The registration has arrived whole (the server read every byte of it) before the
            # unregistration is sent: a fixed sleep is too short on a loaded machine.
            await _read_by_server(broker.socket.getsockname()[1], int(port))
            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(registration_answer)
                    resp = await admin.invoke(
                        rq.unregister_broker(cluster="DefaultCluster", broker_name="gone", broker_addr="127.0.0.1:20911", broker_id=0),
                        timeout=30,
                    )
                    assert resp.code == ResponseCode.SUCCESS
            # Applied after the registration (which was under way when it arrived): the broker is gone.
            # Applied before it, the registration would have brought the broker back.
            assert await route_perm(admin, "gone-000001") is None
            assert await route_perm(admin, "TBW102") is None
    finally:
        await broker.aclose()


async def test_connection_closed_during_a_registration_removes_the_broker(namesrv: NamesrvProcess) -> None:
    frame = encode(big_register("closed", 60_000, 6, 1))
    host, port = namesrv.addr.rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    await stream.send_all(frame)
    await stream.aclose()  # gone before its answer
    with trio.fail_after(20):
        while "broker closed 127.0.0.1:20911 (DefaultCluster) removed" not in namesrv.log():
            await trio.sleep(0.05)
    async with connect(namesrv.addr) as admin:
        assert await route_perm(admin, "closed-000001") is None
        info = await admin.invoke(request(RequestCode.GET_BROKER_CLUSTER_INFO))
        assert b"closed" not in info.body
