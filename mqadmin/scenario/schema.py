"""Scenario files: YAML validated into frozen dataclasses, errors naming file, line and field.

A scenario has five parts::

    name / description / duration / timeout
    cluster:   NameServers, broker groups, slaves, topics, timing knobs
    load:      one producer group (a mapping) or several (a list, each with a name)
    timeline:  actions, each ``- at: SECONDS`` + one action key (+ its parameters)
    expect:    expectations, each one expectation key (+ its parameters)

Items are written flat: the kind's key carries the main parameter and the
other parameters sit beside it (``- kill_broker: broker-a`` /
``  label: crash``); a mapping as the kind's value works too. Every error
is :class:`ScenarioError`, one line ``FILE:LINE: FIELD: problem``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mqadmin.scenario import client_schema, cluster_impls, consumer_schema, network_schema
from mqadmin.scenario.model import (
    FAULT_OPS,
    Action,
    ClusterSpec,
    Condition,  # noqa: F401  (schema.Condition: a condition as the tests write it)
    Expectation,
    ProducerGroup,
    Scenario,
)
from mqadmin.scenario.overrides import Override
from mqadmin.scenario.overrides import apply as apply_overrides
from mqadmin.scenario.reader import ScenarioReader
from mqadmin.scenario.values import (
    MAX_DURATION,
    MAX_FILE_BYTES,
    ScenarioError,
    _Ctx,
    _Section,
    boolean,
    choice,
    integer,
    list_of,
    namesrv_config,
    number,
    scenario_name,
    text,
    topic_name,
)
from mqadmin.scenario.yamlnodes import LMap, LSeq, YamlError, line_of
from mqadmin.scenario.yamlnodes import load as load_yaml

# ---------------------------------------------------------------------------
# actions and expectations: one kind key per item


CONDITION_KINDS = ("route_excludes", "route_includes", "namesrvs_agree", "namesrvs_disagree")
BROKER_ACTIONS = ("kill_broker", "stop_broker", "cont_broker", "shutdown_broker", "restart_broker")
ACTION_KINDS = (
    *BROKER_ACTIONS,
    "kill_namesrv",
    "restart_namesrv",
    *network_schema.ACTION_KINDS,
    "wipe_write_perm",
    "add_write_perm",
    "create_topic",
    "fault",
    "wait_until",
    *consumer_schema.ACTION_KINDS,
)
#: The top-level fields of a scenario file: an unknown one (a typo, ``laod:``) is reported before anything
#: else, since what it was meant to say may be why a later check fails.
TOP_KEYS = ("name", "description", "duration", "timeout", "cluster", "load", "consumers", "observe", "timeline",
            "expect")
COUNT_KINDS = ("send_success_rate", "max_failed_sends", "p99_send_latency", "max_sends_to", "min_sends_to")
EXPECT_KINDS = (*CONDITION_KINDS, *COUNT_KINDS, *consumer_schema.EXPECT_KINDS)

#: the parameter a kind's own key carries (``- kill_broker: broker-a``)
MAIN_PARAM = {
    **dict.fromkeys(BROKER_ACTIONS, "broker"),
    "kill_namesrv": "namesrv",
    "restart_namesrv": "namesrv",
    **network_schema.MAIN_PARAM,
    "wipe_write_perm": "broker",
    "add_write_perm": "broker",
    "create_topic": "topic",
    "fault": "broker",
    "wait_until": "condition",
    "route_excludes": "broker",
    "route_includes": "broker",
    "namesrvs_agree": "enabled",
    "namesrvs_disagree": "enabled",
    "send_success_rate": "min",
    "max_failed_sends": "max",
    "p99_send_latency": "max_ms",
    "max_sends_to": "broker",
    "min_sends_to": "broker",
    **consumer_schema.MAIN_PARAM,
}


#: How to write a kind's main parameter, for the error when it is missing (default: `KIND: PARAM`).
MAIN_EXAMPLE = {
    "wait_until": f"`wait_until: {CONDITION_KINDS[0]}` (or {', '.join(CONDITION_KINDS[1:])}) with `broker: NAME` "
                  "beside it",
}


def _item(ctx: _Ctx, data: Any, where: str, line: int, kinds: tuple[str, ...], outer: tuple[str, ...]) -> tuple[str, _Section, _Section]:
    """Split an item into its kind, a section of its parameters (flat or nested) and the item itself."""
    item = _Section(ctx, data, where, line)
    found = [k for k in data if k in kinds]
    if len(found) != 1:
        unknown = [k for k in data if k not in kinds and k not in outer]
        if not found and unknown:
            raise item.fail(unknown[0], f"unknown kind (expected one of: {', '.join(kinds)})")
        what = "no kind" if not found else f"{len(found)} kinds ({', '.join(found)})"
        raise item.fail(None, f"needs exactly one of {', '.join(kinds)}; found {what}")
    kind = found[0]
    item.read.add(kind)
    params = LMap(data.key_lines[kind])
    value = data[kind]
    if isinstance(value, LMap):
        params = value
    elif value is not None:
        params[MAIN_PARAM[kind]] = value
        params.key_lines[MAIN_PARAM[kind]] = data.key_lines[kind]
    for k, v in data.items():
        if k == kind or k in outer:
            continue
        item.read.add(k)
        if k in params:
            raise item.fail(k, f"given twice (also inside {kind})")
        params[k] = v
        params.key_lines[k] = data.key_lines[k]
    sec = _Section(ctx, params, where)
    sec.also = (kind, *outer)
    sec.main = (kind, MAIN_PARAM[kind], MAIN_EXAMPLE.get(kind, f"`{kind}: {MAIN_PARAM[kind].upper()}`"))
    return kind, sec, item


def parse_cluster(p: ScenarioReader, sec: _Section) -> ClusterSpec:
    namesrvs = sec.get("namesrvs", integer(1, 8), 2)
    brokers = sec.get("brokers", integer(1, 26), 2)
    slaves = sec.get("slaves", integer(0, 4), 0)
    topics = sec.get("topics", list_of(topic_name, max_len=32), ("ScenarioTopic",))
    spec = ClusterSpec(
        namesrvs=namesrvs,
        brokers=brokers,
        slaves=slaves,
        topics=topics,
        queues=sec.get("queues", integer(1, 64), 4),
        register_period_ms=sec.get("register_period_ms", integer(100, 600_000), 30000),
        broker_expired_ms=sec.get("broker_expired_ms", integer(100, 600_000), 120000),
        scan_interval_ms=sec.get("scan_interval_ms", integer(10, 600_000), 5000),
        message_store=sec.get("message_store", choice("disk", "memory"), "disk"),
        broker_config=sec.get("broker_config", consumer_schema.broker_config, ()),
        namesrv_config=sec.get("namesrv_config", namesrv_config, ()),
        auth=sec.get("auth", boolean, False),
        tls=sec.get("tls", boolean, False),
        **cluster_impls.read(sec, namesrvs, brokers),
        fault_proxy=sec.get("fault_proxy", boolean, None),  # None until the timeline is read: see parse()
        client_proxy=sec.get("client_proxy", boolean, False),
        proxy=sec.get("proxy", client_schema.proxy_version, None),  # or implied by gRPC clients: see parse()
    )
    if spec.client_proxy and spec.fault_proxy is False:
        raise sec.fail("client_proxy", "needs the fault proxy (fault_proxy: true, or leave it out)")
    p.fault_proxy_line = sec.line("fault_proxy")
    p.proxy_line = sec.line("proxy")
    sec.finish()
    cluster_impls.check_cluster(sec, spec)
    return spec

def parse_group(p: ScenarioReader, sec: _Section, name: str, duration: float, first_id: int) -> ProducerGroup:
    start = sec.get("start", number(0, duration - 0.1), 0.0)
    topics = sec.get("topics", list_of(topic_name, max_len=32), p.cluster.topics)
    for t in topics:
        p.ctx.deferred.append(("topic", t, sec.line("topics"), sec.path("topics")))
    group = ProducerGroup(
        name=name,
        producers=sec.get("producers", integer(1, 200), 2),
        rate=sec.get("rate", number(0, 1000, lo_open=True), 20.0),
        message_size=sec.get("message_size", integer(0, 4 * 1024 * 1024), 256),
        topics=topics,
        start=start,
        duration=sec.get("duration", number(0, duration - start, lo_open=True), duration - start),
        poll_interval=sec.get("poll_interval", number(0.05, 3600), 30.0),
        send_timeout=sec.get("send_timeout", number(0.05, 60), 3.0),
        retries=sec.get("retries", integer(0, 16), 2),
        latency_fault=sec.get("latency_fault", boolean, False),
        first_id=first_id,
        client=client_schema.read(sec, "load"),
    )
    sec.finish()
    return group

def parse_load(p: ScenarioReader, data: Any, line: int, duration: float) -> tuple[ProducerGroup, ...]:
    if data is None:
        data = LMap(line)
    if isinstance(data, LSeq):
        if not 1 <= len(data) <= 16:
            raise p.ctx.error(data.line, "load", f"must list 1..16 producer groups, got {len(data)}")
        groups = []
        first = 0
        for i, (item, item_line) in enumerate(zip(data, data.item_lines)):
            sec = _Section(p.ctx, item, f"load[{i + 1}]", item_line)
            name = sec.get("name", text)
            if name in p.groups:
                raise sec.fail("name", f"producer group {name!r} is defined twice")
            g = parse_group(p, sec, name, duration, first)
            p.groups[name] = g
            groups.append(g)
            first += g.producers
        total = sum(g.producers for g in groups)
        if total > 400:
            raise p.ctx.error(data.line, "load", f"at most 400 producers in all, got {total}")
        return tuple(groups)
    sec = _Section(p.ctx, data, "load", line)
    name = sec.get("name", text, "producers")
    g = parse_group(p, sec, name, duration, 0)
    p.groups[name] = g
    return (g,)

def parse_action(p: ScenarioReader, data: Any, where: str, line: int, duration: float) -> Action:
    kind, sec, item = _item(p.ctx, data, where, line, ACTION_KINDS, ("at", "label"))
    at = item.get("at", number(0, duration), None)
    label = item.get("label", text, None)
    if label is not None:
        if label in p.labels:
            raise item.fail("label", f"label {label!r} already used on line {p.labels[label]}")
        p.labels[label] = item.line("label")
    item.finish()
    args: dict[str, Any] = {}
    condition = None
    if kind in cluster_impls.STUB_ONLY_ACTIONS:
        cluster_impls.check_broker_action(sec, p.cluster, kind, p.broker(sec))
    if kind in BROKER_ACTIONS:
        args["broker"] = p.broker(sec)
        args["broker_id"] = p.broker_id(sec)
    elif kind in ("kill_namesrv", "restart_namesrv"):
        args["namesrv"] = p.namesrv(sec)
        if kind == "kill_namesrv":
            args["signal"] = sec.get("signal", choice("kill", "term"), "kill")
    elif kind in network_schema.ACTION_KINDS:
        args.update(network_schema.parse_action(p, kind, sec))
    elif kind in ("wipe_write_perm", "add_write_perm"):
        args["broker"] = p.broker(sec)
    elif kind == "create_topic":
        args["topic"] = sec.get("topic", topic_name)
        p.topics.add(args["topic"])
        args["queues"] = sec.get("queues", integer(1, 64), p.cluster.queues)
        args["brokers"] = sec.get("brokers", list_of(lambda v: p.broker_value(v)), tuple(p.cluster.broker_names))
    elif kind == "fault":
        args["broker"] = p.broker(sec)
        args["broker_id"] = p.broker_id(sec)
        ops = [k for k in FAULT_OPS if sec.has(k)]
        if len(ops) != 1:
            raise sec.fail(None, f"fault needs exactly one of {', '.join(FAULT_OPS)}; found {len(ops)}")
        op = ops[0]
        if op == "latency_ms":
            args[op] = sec.get(op, integer(0, 600_000))
        elif op == "reject":
            args[op] = sec.get(op, integer(-(2**31), 2**31 - 1))
        else:
            if not sec.get(op, boolean):
                raise sec.fail(op, f"{op}: false means nothing; remove it")
            args[op] = True
    elif kind in consumer_schema.ACTION_KINDS:
        args.update(consumer_schema.parse_action(p, kind, sec))
    elif kind == "wait_until":
        cond_kind = sec.get("condition", choice(*CONDITION_KINDS))
        args["timeout"] = sec.get("timeout", number(0, MAX_DURATION, lo_open=True))
        condition = p.condition(cond_kind, sec)
    sec.finish()
    return Action(kind, item.line(kind), at, label, args, condition)

def parse_expectation(p: ScenarioReader, data: Any, where: str, line: int) -> Expectation:
    kind, sec, item = _item(p.ctx, data, where, line, EXPECT_KINDS, ())
    item.finish()
    after = p.after(sec)
    if kind in CONDITION_KINDS:
        condition = p.condition(kind, sec)
        within = sec.get("within", number(0, MAX_DURATION))
        not_before = sec.get("not_before", number(0, MAX_DURATION), None)
        if not_before is not None and not_before > within:
            raise sec.fail("not_before", f"must not exceed within ({within:g}), got {not_before:g}")
        sec.finish()
        return Expectation(kind, item.line(kind), after, condition, within, not_before)
    window = p.window(sec)
    if kind in consumer_schema.EXPECT_KINDS:
        fields_ = consumer_schema.parse_expectation(p, kind, sec)
        sec.finish()
        return Expectation(kind, item.line(kind), after, None, None, None, fields_["threshold"], window,
                           broker=fields_["broker"], extra=fields_["extra"])
    producers = sec.get("producers", text, None)
    if producers is not None and producers not in p.groups:
        raise sec.fail("producers", f"no producer group {producers!r} (groups: {', '.join(p.groups)})")
    broker = None
    outcome = "all"
    upper = None
    if kind == "send_success_rate":
        threshold = sec.get("min", number(0, 1), None)
        upper = sec.get("max", number(0, 1), None)
        if threshold is None and upper is None:
            raise sec.fail("min", "send_success_rate needs min (and/or max)")
        if threshold is not None and upper is not None and upper < threshold:
            raise sec.fail("max", f"must not be below min ({threshold:g}), got {upper:g}")
        threshold = 0.0 if threshold is None else threshold
    elif kind == "max_failed_sends":
        threshold = sec.get("max", integer(0, 10**9))
    elif kind == "p99_send_latency":
        threshold = sec.get("max_ms", number(0, 3_600_000, lo_open=True))
        outcome = sec.get("outcome", choice("all", "ok"), "all")
    else:
        broker = p.broker(sec)
        threshold = sec.get("max" if kind == "max_sends_to" else "min", integer(0, 10**9))
    sec.finish()
    return Expectation(kind, item.line(kind), after, None, None, None, float(threshold), window, producers, broker, outcome,
                       upper)


def parse(text_: str, path: str = "<scenario>", overrides: list[Override] | None = None) -> Scenario:
    """Validate a scenario text (with cluster ``overrides``, see :mod:`.overrides`); ScenarioError (one
    line) on the first problem."""
    ctx = _Ctx(path)
    try:
        data = load_yaml(text_)
    except YamlError as exc:
        raise ctx.error(exc.line, "", str(exc)) from None
    apply_overrides(data, overrides or [])
    top = _Section(ctx, data, "", 1)
    top.unknown_first(TOP_KEYS)
    p = ScenarioReader(ctx)
    name = top.get("name", scenario_name, "".join(c if c.isalnum() or c in "._-" else "_" for c in Path(path).stem)[:64] or "scenario")
    description = top.get("description", text, "")  # optional: `scenario list` shows an empty one
    if "\n" in description:
        raise top.fail("description", "must be one line (put details in the comment at the top)")
    duration = top.get("duration", number(1, MAX_DURATION))
    timeout = top.get("timeout", number(1, MAX_DURATION * 2), None)
    if timeout is not None and timeout <= duration:
        raise top.fail("timeout", f"must be longer than duration ({duration:g} s), got {timeout:g}: the load alone "
                                  "lasts the duration (leave timeout out for duration + the waits + 60 s)")
    cluster_raw = top.raw("cluster")
    p.cluster = parse_cluster(p, _Section(ctx, cluster_raw if cluster_raw is not None else LMap(top.line("cluster")), "cluster"))
    p.topics = set(p.cluster.topics)
    groups = parse_load(p, top.raw("load"), top.line("load"), duration)
    p.consumer_groups = consumer_schema.parse_consumers(p, top.raw("consumers"), top.line("consumers"), duration)
    p.cluster = client_schema.resolve_proxy(p.cluster, groups, p.consumer_groups,
                                            lambda msg: ctx.error(p.proxy_line, "cluster.proxy", msg))

    observe_interval, observe_timeout, observe_topics = parse_observe(ctx, top)
    actions = parse_timeline(p, top, duration)
    expectations = parse_expectations(p, top)
    top.finish()
    assert top.read <= set(TOP_KEYS), top.read - set(TOP_KEYS)  # TOP_KEYS lists every field read above
    check_names(p)
    p.cluster = network_schema.resolve_fault_proxy(ctx, p.cluster, actions, p.fault_proxy_line)
    waits = sum(a.args["timeout"] for a in actions if a.kind == "wait_until")
    if timeout is None:
        timeout = duration + waits + 60.0
    topics_seen = [*dict.fromkeys([t for g in groups for t in g.topics] + list(observe_topics)
                                  + [t for c in p.consumer_groups for t in c.topics]
                                  + [e.condition.topic for e in expectations if e.condition]
                                  + [a.condition.topic for a in actions if a.condition])]
    return Scenario(
        name=name,
        description=description,
        path=path,
        duration=duration,
        timeout=timeout,
        cluster=p.cluster,
        groups=groups,
        observe_interval=observe_interval,
        observe_timeout=observe_timeout,
        observe_topics=tuple(topics_seen),
        timeline=tuple(actions),
        expectations=tuple(expectations),
        consumers=p.consumer_groups,
    )


def parse_observe(ctx: _Ctx, top: _Section) -> tuple[float, float, tuple[str, ...]]:
    """The ``observe:`` section: (interval, timeout, topics)."""
    observe = _Section(ctx, top.raw("observe") if top.raw("observe") is not None else LMap(top.line("observe")), "observe")
    interval = observe.get("interval", number(0.02, 5), 0.1)
    timeout = observe.get("timeout", number(0.05, 10), 0.5)
    topics = observe.get("topics", list_of(topic_name, max_len=16), ())
    for t in topics:
        ctx.deferred.append(("topic", t, observe.line("topics"), observe.path("topics")))
    observe.finish()
    return interval, timeout, topics


def parse_timeline(p: ScenarioReader, top: _Section, duration: float) -> list[Action]:
    """The ``timeline:`` list (absent: none), its times never going back."""
    ctx = p.ctx
    timeline_raw = top.raw("timeline")
    actions: list[Action] = []
    if timeline_raw is None:
        return actions
    if not isinstance(timeline_raw, LSeq):
        raise ctx.error(line_of(timeline_raw, top.line("timeline")), "timeline", "must be a list of actions")
    if len(timeline_raw) > 200:
        raise ctx.error(timeline_raw.line, "timeline", f"at most 200 actions, got {len(timeline_raw)}")
    last_at = 0.0
    for i, (item, line) in enumerate(zip(timeline_raw, timeline_raw.item_lines)):
        action = parse_action(p, item, f"timeline[{i + 1}]", line, duration)
        if action.at is not None:
            if action.at < last_at:
                raise ctx.error(line, f"timeline[{i + 1}].at", f"must not go back in time ({action.at:g} < {last_at:g})")
            last_at = action.at
        actions.append(action)
    return actions


def parse_expectations(p: ScenarioReader, top: _Section) -> list[Expectation]:
    """The ``expect:`` list: at least one."""
    expect_raw = top.raw("expect")
    if not isinstance(expect_raw, LSeq) or not expect_raw:
        raise p.ctx.error(line_of(expect_raw, top.line("expect") if top.has("expect") else 1), "expect",
                          "must list at least one expectation")
    return [
        parse_expectation(p, item, f"expect[{i + 1}]", line)
        for i, (item, line) in enumerate(zip(expect_raw, expect_raw.item_lines))
    ]


def check_names(p: ScenarioReader) -> None:
    """Every topic and label named anywhere exists, once the whole file is read."""
    for what, value, line, where in p.ctx.deferred:
        if what == "topic" and value not in p.topics:
            raise p.ctx.error(line, where, f"topic {value!r} is neither in cluster.topics nor created by create_topic "
                                           f"(known: {', '.join(sorted(p.topics))})")
        if what == "label" and value not in p.labels:
            known = ", ".join(p.labels) or "none"
            raise p.ctx.error(line, where, f"no timeline action has label {value!r} (labels: {known})")


def load(path: str | Path, overrides: list[Override] | None = None) -> Scenario:
    """Read and validate a scenario file (with cluster ``overrides``)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ScenarioError(f"{path}: larger than {MAX_FILE_BYTES // 1024} KiB; not a scenario")
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse(content, str(path), overrides)
