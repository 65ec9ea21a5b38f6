"""The consumer side of scenario files: the ``consumers:`` section, consumer actions, consumer expectations.

Kept apart from :mod:`mqadmin.scenario.schema` (which calls in here) so the
producer-side schema stays as it was::

    consumers:                  # one group (a mapping) or several (a list, each with a name)
      name: cg                  # the group (scenario_cg on the wire)
      count: 2                  # consumers started at `start`
      topics: [ScenarioTopic]   # default: cluster.topics
      subscription: "*"         # or "TagA || TagB"
      start: 0
      consume_from: last_offset # last_offset | first_offset | timestamp (consumeFromWhere)
      poll_interval: 30         # pollNameServerInterval, s
      heartbeat_interval: 30    # heartbeatBrokerInterval, s
      rebalance_interval: 20    # rebalance wait interval, s
      persist_interval: 5       # persistConsumerOffsetInterval, s
      suspend_ms: 15000         # brokerSuspendMaxTimeMillis (long polling)
      consume_delay_ms: 0       # time each message takes: a slow consumer
      consume_threads: 20
      failure_rate: 0           # share of consumptions answered RECONSUME_LATER (sent back, retried)
      pull_batch_size: 32       # pullBatchSize
      pull_threshold: 1000      # pullThresholdForQueue: messages pulled ahead per queue before flow control
      client: sim               # sim | java:VERSION | go | grpc-python | grpc-java[:VERSION] (client_schema)
      api: push                 # push | simple (RocketMQ 5 clients only)
      invisible_time: 15        # s, a simple consumer's receive (api: simple)

Actions ``start_consumer: GROUP`` (``count``), ``stop_consumer: GROUP`` and
``kill_consumer: GROUP`` (``consumer``: its index in the group, by start
order; default the newest one running). Expectations, see
:data:`EXPECT_KINDS`. The shapes these become, and their text, are in
:mod:`mqadmin.scenario.model`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mqadmin.scenario import client_schema
from mqadmin.scenario.model import CONSUMER_ACTION_KINDS as ACTION_KINDS
from mqadmin.scenario.model import CONSUMER_EXPECT_KINDS as EXPECT_KINDS
from mqadmin.scenario.model import ConsumerGroupSpec
from mqadmin.scenario.reader import ScenarioReader
from mqadmin.scenario.values import (
    MAX_DURATION,
    _Bad,
    _Section,
    boolean,
    choice,
    integer,
    list_of,
    number,
    text,
    topic_name,
)
from mqadmin.scenario.yamlnodes import LMap, LSeq

#: the parameter each kind's own key carries
MAIN_PARAM = {
    **dict.fromkeys(ACTION_KINDS, "group"),
    "max_consume_lag": "max",
    "all_consumed_within": "seconds",
    "max_duplicates": "max",
    "max_lost": "max",
    "rebalance_within": "seconds",
    "min_consumed_from": "broker",
    "max_consumed_from": "broker",
}
MAX_CONSUMERS = 64
CONSUME_FROM = ("last_offset", "first_offset", "timestamp")


def parse_group(p: ScenarioReader, sec: _Section, name: str, duration: float) -> ConsumerGroupSpec:
    topics = sec.get("topics", list_of(topic_name, max_len=32), p.cluster.topics)
    for t in topics:
        p.ctx.deferred.append(("topic", t, sec.line("topics"), sec.path("topics")))
    spec = ConsumerGroupSpec(
        name=name,
        count=sec.get("count", integer(0, MAX_CONSUMERS), 1),
        topics=topics,
        subscription=sec.get("subscription", text, "*"),
        start=sec.get("start", number(0, duration - 0.1), 0.0),
        consume_from=sec.get("consume_from", choice(*CONSUME_FROM), "last_offset"),
        poll_interval=sec.get("poll_interval", number(0.05, 3600), 30.0),
        heartbeat_interval=sec.get("heartbeat_interval", number(0.05, 3600), 30.0),
        rebalance_interval=sec.get("rebalance_interval", number(0.1, 3600), 20.0),
        persist_interval=sec.get("persist_interval", number(0.05, 3600), 5.0),
        suspend_ms=sec.get("suspend_ms", integer(0, 60_000), 15000),
        consume_delay_ms=sec.get("consume_delay_ms", number(0, 60_000), 0.0),
        consume_threads=sec.get("consume_threads", integer(1, 256), 20),
        failure_rate=sec.get("failure_rate", number(0, 1), 0.0),
        pull_batch_size=sec.get("pull_batch_size", integer(1, 1024), 32),
        pull_threshold=sec.get("pull_threshold", integer(1, 100_000), 1000),
        client=client_schema.read(sec, "consumers"),
    )
    api, invisible = client_schema.read_api(sec, spec.client)
    spec = dataclasses.replace(spec, api=api, invisible_time=invisible)
    sec.finish()
    return spec


def parse_consumers(p: ScenarioReader, data: Any, line: int, duration: float) -> tuple[ConsumerGroupSpec, ...]:
    """The ``consumers:`` section (absent: no consumers)."""
    if data is None:
        return ()
    items = list(zip(data, data.item_lines)) if isinstance(data, LSeq) else [(data, line)]
    if isinstance(data, LSeq) and not 1 <= len(data) <= 16:
        raise p.ctx.error(data.line, "consumers", f"must list 1..16 consumer groups, got {len(data)}")
    groups: list[ConsumerGroupSpec] = []
    for i, (item, item_line) in enumerate(items):
        where = f"consumers[{i + 1}]" if isinstance(data, LSeq) else "consumers"
        sec = _Section(p.ctx, item, where, item_line)
        name = sec.get("name", text, None if isinstance(data, LSeq) else "consumers")
        if name is None:
            raise sec.fail("name", "is required when several consumer groups are listed")
        if any(g.name == name for g in groups):
            raise sec.fail("name", f"consumer group {name!r} is defined twice")
        groups.append(parse_group(p, sec, name, duration))
    total = sum(g.count for g in groups)
    if total > MAX_CONSUMERS:
        raise p.ctx.error(line, "consumers", f"at most {MAX_CONSUMERS} consumers in all, got {total}")
    return tuple(groups)


def _group_value(groups: tuple[ConsumerGroupSpec, ...]) -> Any:
    def parse(v: Any) -> str:
        name = text(v)
        if not any(g.name == name for g in groups):
            known = ", ".join(g.name for g in groups) or "none: add a consumers section"
            raise _Bad(f"no consumer group {name!r} (groups: {known})")
        return name
    return parse


def parse_action(p: ScenarioReader, kind: str, sec: _Section) -> dict[str, Any]:
    args: dict[str, Any] = {"group": sec.get("group", _group_value(p.consumer_groups))}
    if kind == "start_consumer":
        args["count"] = sec.get("count", integer(1, MAX_CONSUMERS), 1)
    else:
        args["consumer"] = sec.get("consumer", integer(0, MAX_CONSUMERS * 4), None)
    return args


def parse_expectation(p: ScenarioReader, kind: str, sec: _Section) -> dict[str, Any]:
    """The fields of a consumer expectation: threshold, broker, window and ``extra`` (group, broker id, ...)."""
    if not p.consumer_groups:
        raise sec.fail(None, f"{kind} needs a consumers section")
    extra: dict[str, Any] = {"consumers": sec.get("consumers", _group_value(p.consumer_groups), None)}
    broker = None
    if kind in ("max_consume_lag", "max_duplicates", "max_lost"):
        threshold = sec.get("max", integer(0, 10**9))
        if kind == "max_lost":
            extra["include_broker_loss"] = sec.get("include_broker_loss", boolean, True)
    elif kind in ("all_consumed_within", "rebalance_within"):
        threshold = sec.get("seconds", number(0, MAX_DURATION))
    else:
        broker = p.broker(sec)
        threshold = sec.get("min" if kind == "min_consumed_from" else "max", integer(0, 10**9))
        extra["broker_id"] = sec.get("broker_id", integer(0, p.cluster.slaves), None)
        real = [g.name for g in p.consumer_groups if client_schema.is_real(g.client)
                and extra["consumers"] in (None, g.name)]
        if extra["broker_id"] is not None and real:
            raise sec.fail("broker_id", f"group {real[0]} runs a real client, which does not say which node of "
                                        "a broker group served a pull")
    if kind == "rebalance_within" and not sec.has("after"):
        raise sec.fail(None, "rebalance_within needs after: LABEL (the change it counts from)")
    return {"threshold": float(threshold), "broker": broker, "extra": extra}


def broker_config(value: Any) -> tuple[tuple[str, str], ...]:
    """``cluster.broker_config``: extra broker.properties keys for every broker (e.g. slaveReadEnable)."""
    if not isinstance(value, LMap):
        raise _Bad("must be a mapping of broker.properties keys to values")
    out = []
    for k, v in value.items():
        if not isinstance(k, str) or not k.replace("_", "a").isalnum():
            raise _Bad(f"{k!r} is not a broker.properties key")
        if isinstance(v, bool):
            v = "true" if v else "false"
        if not isinstance(v, (str, int, float)) or "\n" in str(v):
            raise _Bad(f"{k}: must be a single-line value")
        out.append((k, str(v)))
    return tuple(out)


__all__ = [
    "ACTION_KINDS",
    "EXPECT_KINDS",
    "MAIN_PARAM",
    "ConsumerGroupSpec",
    "broker_config",
    "parse_action",
    "parse_consumers",
    "parse_expectation",
]
