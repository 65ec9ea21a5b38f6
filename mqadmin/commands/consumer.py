"""Consumer group commands (Apache's tools/command/consumer): consumerProgress, updateSubGroup,
deleteSubGroup. The work is in :mod:`mqadmin.client.broker_admin`.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import typer

from mqadmin.client import AdminClient, run
from mqadmin.client import broker_admin as ba
from mqadmin.client.errors import AdminError
from mqadmin.client.topic_text import parse_attributes
from mqadmin.commands.options import (
    JsonOpt,
    NamesrvOpt,
    TimeoutOpt,
    bad_option,
    bool_opt,
    broker_addr_option,
    client_for,
    group_option,
    one_target,
    topic_option,
)
from mqadmin.commands.results import exit_if_any_failed, only, print_failure, print_results
from mqadmin.output.console import out, print_json
from mqadmin.output.tables import Col, fit_table
from remoting.admin_bodies import subscription_group_config
from remoting.codes import version_desc
from remoting.mqjson import MqJsonError

NA = "N/A"


#: SubscriptionGroupConfig field (as named in a validation error) -> the updateSubGroup option that sets it.
FIELD_OPTIONS = (("groupName", "-g"), ("retryQueueNums", "-q"), ("retryMaxTimes", "-r"), ("whichBroker", "-w"),
                 ("brokerId", "-i"), ("attribute", "--attributes"))


def _date(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S") if ms else NA


def consumer_progress(
    group: str | None = group_option("Consumer group (default: every group).", default=None),
    topic: str | None = topic_option("Only this topic.", "-t", "--topicName", default=None),
    show_ip: str | None = typer.Option(None, "-s", "--showClientIP", metavar="true|false", help="Add a #Client IP column."),
    cluster: str | None = typer.Option(None, "-c", "--cluster", help="Cluster name (accepted for Apache's syntax)."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    """Per queue: broker offset, consumer offset and the difference; or, without -g, one line per group.

    ``#Client IP`` needs each client's running info (GET_CONSUMER_RUNNING_INFO through the broker), which
    the broker stub does not relay, so it is N/A there."""
    ip = bool(bool_opt("-s", show_ip))
    client = client_for(namesrv, timeout)
    if group is None:
        groups = run(_all_groups, client)
        if as_json:
            print_json({"groups": groups})
            return
        rows = [[g["group"], str(g["count"]), g["version"] or ("OFFLINE" if not g["count"] else ""), g["type"] or "",
                 g["model"] or "", str(g["tps"]), str(g["diffTotal"])] for g in groups]
        out.print(fit_table([Col("#Group"), Col("#Count"), Col("#Version"), Col("#Type"), Col("#Model"),
                             Col("#TPS", 0, "right"), Col("#Diff Total", 0, "right")], rows))
        return
    stats = run(ba.examine_consume_stats, client, group.strip(), topic.strip() if topic else None)
    queues = []
    for mq, w in sorted(stats.offset_table.items()):
        queues.append({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                       "brokerOffset": w.broker_offset, "consumerOffset": w.consumer_offset,
                       "diff": w.broker_offset - w.consumer_offset, "inflight": _inflight(w.pull_offset, w.consumer_offset),
                       "lastTimestamp": w.last_timestamp or None} | ({"clientIp": None} if ip else {}))
    diff_total = sum(q["diff"] for q in queues)
    inflight_total = sum(q["inflight"] or 0 for q in queues)
    if as_json:
        print_json({"group": group, "queues": queues, "consumeTps": stats.consume_tps, "diffTotal": diff_total,
                    "inflightTotal": inflight_total})
        return
    cols = [Col("#Topic"), Col("#Broker Name"), Col("#QID"), Col("#Broker Offset", 0, "right"),
            Col("#Consumer Offset", 0, "right")] + ([Col("#Client IP")] if ip else []) + [
            Col("#Diff", 0, "right"), Col("#Inflight", 0, "right"), Col("#LastTime", 1)]
    rows = [[q["topic"], q["brokerName"], str(q["queueId"]), str(q["brokerOffset"]), str(q["consumerOffset"])]
            + ([NA] if ip else []) + [str(q["diff"]), "-" if q["inflight"] is None else str(q["inflight"]),
                                      _date(q["lastTimestamp"] or 0)]
            for q in queues]
    out.print(fit_table(cols, rows))
    out.print("")
    out.print(f"Consume TPS: {stats.consume_tps:.2f}")
    out.print(f"Consume Diff Total: {diff_total}")
    out.print(f"Consume Inflight Total: {inflight_total}")


def _inflight(pull_offset: int, consumer_offset: int) -> int | None:
    """Messages pulled and not yet committed, or None (``-``) when the broker does not say: a 4.9.x broker
    sends no pullOffset (Java 4.9.7's tool has no Inflight column), and a pull offset behind the committed
    one (not kept across a broker restart) would show a negative count."""
    return pull_offset - consumer_offset if pull_offset >= consumer_offset else None


async def _all_groups(client: AdminClient) -> list[dict[str, Any]]:
    """One entry per ``%RETRY%`` topic's group: its consumers (count, lowest version, type, model), TPS, diff."""
    async with client.pooled():
        names = [t[len(ba.RETRY_PREFIX):] for t in sorted(await client.topic_list()) if t.startswith(ba.RETRY_PREFIX)]

        async def one(name: str) -> dict[str, Any]:
            entry: dict[str, Any] = {"group": name, "count": 0, "version": None, "type": None, "model": None,
                                     "tps": 0, "diffTotal": 0}
            try:
                stats = await ba.examine_consume_stats(client, name)
                entry["tps"], entry["diffTotal"] = int(stats.consume_tps), stats.total_diff()
            except AdminError:
                pass
            try:
                cc = await ba.examine_consumer_connection(client, name)
            except AdminError:
                return entry
            entry["count"] = len(cc.connections)
            if entry["count"]:
                entry["version"] = version_desc(cc.min_version())
                entry["type"] = "PULL" if cc.consume_type == "CONSUME_ACTIVELY" else "PUSH"
                entry["model"] = cc.message_model if cc.consume_type == "CONSUME_PASSIVELY" else None
            return entry

        return await ba.gather(names, one)


def _targets(client: AdminClient, broker_addr: str | None, cluster: str | None) -> list[str]:
    one_target(broker_addr, cluster)
    if broker_addr is not None:
        return [broker_addr]
    assert cluster is not None
    masters = list(run(client.masters_of_cluster, cluster.strip()).values())
    if not masters:
        raise AdminError(f"cluster {cluster} has no master broker")
    return masters


def subscription_group_text(cfg: dict[str, Any]) -> str:
    """SubscriptionGroupConfig.toString() (Guava's toStringHelper), as updateSubGroup prints it."""
    def java(value: Any) -> str:
        if value is None:
            return "null"
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, dict):
            return "{" + ", ".join(f"{k}={java(v)}" for k, v in value.items()) + "}"
        if isinstance(value, list):
            return "[" + ", ".join(java(v) for v in value) + "]"
        return str(value)

    policy = cfg["groupRetryPolicy"]
    expo, custom = policy.get("exponentialRetryPolicy"), policy.get("customizedRetryPolicy")
    policy_text = (f"GroupRetryPolicy{{type={policy.get('type')}, exponentialRetryPolicy="
                   + (f"ExponentialRetryPolicy{{{', '.join(f'{k}={v}' for k, v in expo.items())}}}" if expo else "null")
                   + ", customizedRetryPolicy="
                   + (f"CustomizedRetryPolicy{{next={java(custom.get('next', []))}}}" if custom else "null") + "}")
    order = ["groupName", "consumeEnable", "consumeFromMinEnable", "consumeBroadcastEnable", "consumeMessageOrderly",
             "retryQueueNums", "retryMaxTimes", "groupRetryPolicy", "brokerId", "whichBrokerWhenConsumeSlowly",
             "notifyConsumerIdsChangedEnable", "groupSysFlag", "consumeTimeoutMinute", "subscriptionDataSet",
             "attributes"]
    parts = [f"{k}={policy_text if k == 'groupRetryPolicy' else java(cfg.get(k))}" for k in order]
    return "SubscriptionGroupConfig{" + ", ".join(parts) + "}"


def update_sub_group(
    group: str = group_option("Consumer group name."),
    broker_addr: str | None = broker_addr_option("On this broker (host:port)."),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="On every master of this cluster."),
    consume_enable: str | None = typer.Option(None, "-s", "--consumeEnable", metavar="true|false", help="Consume enable."),
    from_min: str | None = typer.Option(None, "-m", "--consumeFromMinEnable", metavar="true|false", help="From min offset."),
    broadcast: str | None = typer.Option(None, "-d", "--consumeBroadcastEnable", metavar="true|false", help="Broadcast."),
    orderly: str | None = typer.Option(None, "-o", "--consumeMessageOrderly", metavar="true|false", help="Orderly."),
    retry_queues: int | None = typer.Option(None, "-q", "--retryQueueNums", min=0, max=1024, help="Retry queue nums."),
    retry_max: int | None = typer.Option(None, "-r", "--retryMaxTimes", min=-1, help="Retry max times."),
    retry_policy: str | None = typer.Option(None, "-p", "--groupRetryPolicy", metavar="JSON",
                                            help='Retry policy, e.g. {"type":"EXPONENTIAL","exponentialRetryPolicy":'
                                                 '{"initial":5000,"max":7200000,"multiplier":2}}.'),
    broker_id: int | None = typer.Option(None, "-i", "--brokerId", min=0, help="Consume from this broker id."),
    slow_broker: int | None = typer.Option(None, "-w", "--whichBrokerWhenConsumeSlowly", min=0,
                                           help="Broker id when consuming slowly."),
    notify: str | None = typer.Option(None, "-a", "--notifyConsumerIdsChanged", metavar="true|false",
                                      help="Notify consumers when the group changes."),
    attributes: str | None = typer.Option(None, "--attributes", help="Attributes: +a=b,+c=d,-e."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    # Java's command starts from consumeBroadcastEnable=false and consumeFromMinEnable=false
    raw: dict[str, Any] = {"groupName": group.strip(), "consumeBroadcastEnable": False, "consumeFromMinEnable": False}
    for key, option, value in (("consumeEnable", "-s", consume_enable), ("consumeFromMinEnable", "-m", from_min),
                               ("consumeBroadcastEnable", "-d", broadcast), ("consumeMessageOrderly", "-o", orderly),
                               ("notifyConsumerIdsChangedEnable", "-a", notify)):
        if value is not None:
            raw[key] = bool_opt(option, value)
    for key, number in (("retryQueueNums", retry_queues), ("retryMaxTimes", retry_max), ("brokerId", broker_id),
                        ("whichBrokerWhenConsumeSlowly", slow_broker)):
        if number is not None:
            raw[key] = number
    if retry_policy is not None:
        try:
            raw["groupRetryPolicy"] = json.loads(retry_policy)
        except ValueError as exc:
            raise bad_option("-p", f"not JSON: {exc}") from None
    if attributes is not None:
        try:
            raw["attributes"] = parse_attributes(attributes)
        except AdminError as exc:
            raise bad_option("--attributes", str(exc)) from None
    try:
        cfg = subscription_group_config(raw)
    except MqJsonError as exc:
        option = next((o for field, o in FIELD_OPTIONS if field in str(exc)), "-p" if retry_policy is not None else None)
        if option is None:  # no option of the user's is to blame: name none rather than one not given
            raise typer.BadParameter(str(exc)) from None
        raise bad_option(option, str(exc)) from None
    client = client_for(namesrv, timeout) if cluster is not None else AdminClient([], timeout=timeout)
    results = run(ba.update_sub_group, client, _targets(client, broker_addr, cluster), cfg)
    if as_json:
        print_json({"config": cfg, "brokers": [r.to_json() for r in results]})
    else:
        if broker_addr is not None:
            only(results)
        print_results(results, "create subscription group to {addr} success.")
        out.print(subscription_group_text(cfg))
    exit_if_any_failed(results)


def delete_sub_group(
    group: str = group_option("Subscription group name."),
    broker_addr: str | None = broker_addr_option("From this broker (host:port)."),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="From every master of this cluster, "
                                       "and its %RETRY% and %DLQ% topics from the cluster."),
    remove_offset: str | None = typer.Option(None, "-r", "--removeOffset", metavar="true|false",
                                             help="Also remove the group's consumer offsets."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    clean = bool(bool_opt("-r", remove_offset))
    group = group.strip()
    client = client_for(namesrv, timeout) if cluster is not None else AdminClient([], timeout=timeout)
    targets = _targets(client, broker_addr, cluster)

    async def delete() -> tuple[list[Any], list[Any]]:
        results = await ba.delete_sub_group(client, targets, group, clean)
        topics = []
        if cluster is not None:  # Java removes the group's retry and dead-letter topics from the cluster too
            for topic in (ba.RETRY_PREFIX + group, ba.DLQ_PREFIX + group):
                topics.append((topic, await client.delete_topic_in_brokers(targets, topic),
                               await client.delete_topic_in_namesrv(topic, cluster)))
        return results, topics

    results, topics = run(delete)
    if as_json:
        print_json({"group": group, "brokers": [r.to_json() for r in results],
                    "topics": [{"topic": t, "brokers": [r.to_json() for r in b], "namesrvs": [r.to_json() for r in n]}
                               for t, b, n in topics]})
    else:
        if broker_addr is not None:
            only(results)
        where = f" in cluster [{cluster}]" if cluster is not None else ""
        print_results(results, f"delete subscription group [{group}] from broker [{{addr}}]{where} success.")
        for topic, brokers, namesrvs in topics:
            for r in brokers + namesrvs:
                if not r.ok:
                    print_failure(r, f"delete topic [{topic}]")
    exit_if_any_failed(results + [r for _, brokers, namesrvs in topics for r in brokers + namesrvs])


def register(app: typer.Typer) -> None:
    app.command("consumerProgress", help="Query a consumer group's progress (or every group's), and its TPS.")(consumer_progress)
    app.command("updateSubGroup", help="Create or update a subscription group on a broker or a cluster's masters.")(update_sub_group)
    app.command("deleteSubGroup", help="Delete a subscription group from a broker or a cluster.")(delete_sub_group)
