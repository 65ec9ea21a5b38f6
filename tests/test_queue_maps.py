"""Topics share queue-data maps (namesrv.queue_maps): shared, yet a change to one topic is that topic's alone.

The route table is driven with raw register bodies (the server's path, written in slices past
APPLY_SLICE topics) and admin changes, and compared after every step with a plain model of
RocketMQ's semantics (topic -> broker -> queue settings) and with its own cached route answers.
A map changed in place while shared would show as a change in topics the step never named.
"""

from __future__ import annotations

import random

import orjson

from namesrv.registration.body import RawBody
from namesrv.routes import APPLY_SLICE, Registration, RouteTable
from namesrv.slices import run_to_end
from remoting.bodies import DataVersion, TopicConfig
from remoting.codes import PERM_READ, PERM_WRITE, Version
from remoting.register_body import encode_register_body, parse_register_body

TOPICS = APPLY_SLICE + 500  # past the slice: registrations of them all are written behind
ADDRS = {"broker-a": "10.0.0.1:10911", "broker-b": "10.0.0.2:10911", "broker-c": "10.0.0.3:10911"}
CLUSTER_OF = {"broker-a": "c1", "broker-b": "c1", "broker-c": "c2"}
Model = dict[str, dict[str, tuple[int, int, int, int]]]  # topic -> broker -> (read, write, perm, sysflag)


def _parse(body: bytes, compressed: bool, version: int):  # type: ignore[no-untyped-def]
    return parse_register_body(body, compressed=compressed, version=version)


def _register(table: RouteTable, name: str, configs: dict[str, TopicConfig], counter: int) -> None:
    body = encode_register_body(list(configs.values()), DataVersion(counter, counter))
    registration = Registration(CLUSTER_OF[name], ADDRS[name], name, 0)
    raw = RawBody(body, False, int(Version.V5_3_3), _parse)
    assert run_to_end(table.register_raw(registration, raw, conn=name, now=counter)).ok


def _answered(table: RouteTable, topic: str) -> dict[str, tuple[int, int, int, int]]:
    body = table.route_body(topic, True)
    assert body is not None, topic
    return {q["brokerName"]: (q["readQueueNums"], q["writeQueueNums"], q["perm"], q["topicSysFlag"])
            for q in orjson.loads(body)["queueDatas"]}


def _check(table: RouteTable, model: Model, step: str) -> None:
    held = {t: {n: qd[1:] for n, qd in qmap.items()} for t, qmap in table.topic_queues.items()}
    assert held == {t: m for t, m in model.items() if m}, step
    for topic in random.Random(step).sample(sorted(held), min(200, len(held))):
        assert _answered(table, topic) == held[topic], (step, topic)


def test_a_cluster_of_brokers_shares_a_few_maps_for_all_its_topics() -> None:
    table = RouteTable()
    configs = {f"t{i:05d}": TopicConfig(f"t{i:05d}", 8, 8, 6) for i in range(TOPICS)}
    configs["t00007"] = TopicConfig("t00007", 2, 2, 6)
    for counter, name in enumerate(("broker-a", "broker-b"), 1):
        _register(table, name, configs, counter)
    maps = {id(qmap) for qmap in table.topic_queues.values()}
    assert len(maps) == 2  # one per distinct value, not one per topic
    assert table.topic_queues["t00001"] == {"broker-a": ("broker-a", 8, 8, 6, 0), "broker-b": ("broker-b", 8, 8, 6, 0)}


def test_changes_to_shared_maps_stay_with_the_topics_they_name() -> None:
    rng = random.Random(31)
    table, model = RouteTable(), {}
    configs = {n: {f"t{i:05d}": TopicConfig(f"t{i:05d}", 8, 8, 6) for i in range(TOPICS)} for n in ADDRS}
    registered: set[str] = set()
    for step in range(40):
        op, name = rng.random(), rng.choice(sorted(ADDRS))
        if op < 0.45 or name not in registered:
            for topic in rng.sample(sorted(configs[name]), rng.choice([1, 30, TOPICS])):
                configs[name][topic] = TopicConfig(topic, rng.randint(1, 16), 8, rng.choice([2, 4, 6]))
            _register(table, name, configs[name], 100 + step)
            registered.add(name)
            for topic, tc in configs[name].items():
                model.setdefault(topic, {})[name] = (tc.read_queue_nums, tc.write_queue_nums, tc.perm, 0)
        elif op < 0.55:
            table.wipe_write_perm(name)
            for qmap in model.values():
                if name in qmap:
                    r, w, p, s = qmap[name]
                    qmap[name] = (r, w, p & ~PERM_WRITE, s)
        elif op < 0.65:
            table.add_write_perm(name)
            for qmap in model.values():
                if name in qmap:
                    qmap[name] = (*qmap[name][:2], PERM_READ | PERM_WRITE, qmap[name][3])
        elif op < 0.75:
            topic = rng.choice(sorted(t for t, m in model.items() if m))
            table.delete_topic(topic, "c1")
            for member in ("broker-a", "broker-b"):
                model[topic].pop(member, None)
        elif op < 0.85:
            table.register_topic(f"extra-{step}", [(name, 2, 2, 6, 0)])
            model[f"extra-{step}"] = {name: (2, 2, 6, 0)}
        else:
            table.unregister_broker(CLUSTER_OF[name], ADDRS[name], name)
            registered.discard(name)
            for qmap in model.values():
                qmap.pop(name, None)
        _check(table, model, f"step {step}")
