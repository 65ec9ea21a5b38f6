"""mqadmin commands that talk to brokers: updateTopic, deleteTopic, brokerStatus, sendMessage, consumeMessage.

Names and option letters are Apache mqadmin's (tools/command/topic,
broker, message). Brokers are found through the NameServer's cluster info;
every broker call has the ``--timeout`` of the command.
"""

from __future__ import annotations

import re
import sys
import time
from datetime import datetime
from typing import Any

import typer
from rich.text import Text

from mqadmin.client import (
    TOOLS_CONSUMER_GROUP,
    AdminClient,
    AdminError,
    PerServer,
    check_addr,
    code_name,
    parse_attributes,
    run,
    topic_config_text,
)
from mqadmin.cliutil import JsonOpt, NamesrvOpt, TimeoutOpt, bad_option, client_for, error_line
from mqadmin.render import Col, fit_table, out, print_json
from remoting.bodies import TopicConfig
from remoting.codes import FLAG_UNIT, FLAG_UNIT_SUB

TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
BODY_PREVIEW = 120  # characters of a body shown in the table (--json has all)


def _bool_opt(name: str, value: str | None) -> bool:
    """Java's ``-o true`` style flags (Boolean.parseBoolean: only 'true' is true)."""
    if value is None:
        return False
    if value.strip().lower() not in ("true", "false"):
        raise bad_option(name, f"{value!r} is not true or false")
    return value.strip().lower() == "true"


def _check_topic(topic: str) -> str:
    topic = topic.strip()
    if not topic or len(topic) > 127 or not TOPIC_PATTERN.match(topic):
        raise bad_option("-t", f"topic {topic!r} must be 1-127 characters of ^[%|a-zA-Z0-9_-]+$")
    return topic


# ---------------------------------------------------------------------------
# updateTopic / deleteTopic


def update_topic(
    topic: str = typer.Option(..., "-t", "--topic", help="Topic name."),
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr", help="Create on this broker (host:port)."),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="Create on every master of this cluster."),
    read_queues: int = typer.Option(8, "-r", "--readQueueNums", min=1, max=1024, help="Read queues."),
    write_queues: int = typer.Option(8, "-w", "--writeQueueNums", min=1, max=1024, help="Write queues."),
    perm: int = typer.Option(6, "-p", "--perm", min=0, max=7, help="Permission: 2 W, 4 R, 6 RW."),
    order: str | None = typer.Option(None, "-o", "--order", metavar="true|false", help="Ordered topic (sets ORDER_TOPIC_CONFIG on the NameServers)."),
    unit: str | None = typer.Option(None, "-u", "--unit", metavar="true|false", help="Unit topic."),
    has_unit_sub: str | None = typer.Option(None, "-s", "--hasUnitSub", metavar="true|false", help="Has unit subscription."),
    attributes: str | None = typer.Option(None, "-a", "--attributes", help="Attributes: +a=b,+c=d,-e."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    if (broker_addr is None) == (cluster is None):
        raise bad_option("-b/-c", "give exactly one of -b brokerAddr or -c clusterName")
    sys_flag = (FLAG_UNIT if _bool_opt("-u", unit) else 0) | (FLAG_UNIT_SUB if _bool_opt("-s", has_unit_sub) else 0)
    tc = TopicConfig(_check_topic(topic), read_queues, write_queues, perm, topic_sys_flag=sys_flag,
                     order=_bool_opt("-o", order), attributes=parse_attributes(attributes))
    client = client_for(namesrv, timeout)
    brokers, order_conf, order_results = run(_update_topic, client, tc, broker_addr, cluster)
    if as_json:
        print_json({"topicConfig": tc.to_obj(), "brokers": [r.to_json() for r in brokers],
                    "orderConf": None if order_conf is None else {"value": order_conf, "namesrvs": [r.to_json() for r in order_results]}})
    else:
        for r in brokers:
            if r.ok:
                out.print(f"create topic to {r.addr} success.")
            else:
                out.print(f"create topic to {r.addr} failed: {r.error}", style="red")
        if order_conf is not None:
            scope = "cluster" if cluster else "broker"
            for r in order_results:
                if r.ok:
                    out.print(f"set {scope} orderConf. isOrder=true, orderConf=[{order_conf}] [{r.addr}]")
                else:
                    out.print(f"set {scope} orderConf failed: {r.error}", style="red")
        out.print(topic_config_text(tc))
    if not all(r.ok for r in brokers + order_results):
        raise typer.Exit(1)


async def _update_topic(
    client: AdminClient, tc: TopicConfig, broker_addr: str | None, cluster: str | None
) -> tuple[list[PerServer], str | None, list[PerServer]]:
    if broker_addr is not None:
        addr = check_addr(broker_addr)
        brokers = await client.create_topic_on([addr], tc)
        if not tc.order or not brokers[0].ok:
            return brokers, None, []
        info = await client.cluster_info()
        name = next((n for n, bd in info.broker_addr_table.items() if addr in bd.broker_addrs.values()), None)
        if name is None:
            raise AdminError(f"broker {addr} is not registered with the NameServer, so its name for the order conf is unknown")
        conf = f"{name}:{tc.write_queue_nums}"
        return brokers, conf, await client.put_order_conf(tc.topic_name, conf, whole_cluster=False)
    assert cluster is not None
    info = await client.cluster_info()
    masters = await client.masters_of_cluster(cluster, info)
    if not masters:
        raise AdminError(f"cluster {cluster} has no master broker")
    brokers = await client.create_topic_on(list(masters.values()), tc)
    if not tc.order:
        return brokers, None, []
    names = await client.brokers_of_cluster(cluster, info)
    conf = ";".join(f"{name}:{tc.write_queue_nums}" for name in names)
    return brokers, conf, await client.put_order_conf(tc.topic_name, conf, whole_cluster=True)


def delete_topic(
    topic: str = typer.Option(..., "-t", "--topic", help="Topic name."),
    cluster: str = typer.Option(..., "-c", "--clusterName", help="Delete from the masters of this cluster."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    client = client_for(namesrv, timeout)
    brokers, namesrvs = run(_delete_topic, client, topic, cluster)
    if as_json:
        print_json({"topic": topic, "cluster": cluster, "brokers": [r.to_json() for r in brokers],
                    "namesrvs": [r.to_json() for r in namesrvs]})
    else:
        for r in brokers:
            if not r.ok:
                out.print(f"delete topic [{topic}] from broker {r.addr} failed: {r.error}", style="red")
        if all(r.ok for r in brokers):
            out.print(f"delete topic [{topic}] from cluster [{cluster}] success.")
        for r in namesrvs:
            if r.ok:
                out.print(f"delete topic [{topic}] from NameServer success. [{r.addr}]")
            else:
                out.print(f"delete topic [{topic}] from NameServer failed: {r.error}", style="red")
    if not all(r.ok for r in brokers + namesrvs):
        raise typer.Exit(1)


async def _delete_topic(client: AdminClient, topic: str, cluster: str) -> tuple[list[PerServer], list[PerServer]]:
    """DELETE_TOPIC_IN_BROKER to every master, then DELETE_TOPIC_IN_NAMESRV to every NameServer (Java's order)."""
    masters = await client.masters_of_cluster(cluster)
    brokers = await client.delete_topic_in_brokers(list(masters.values()), topic)
    return brokers, await client.delete_topic_in_namesrv(topic, cluster)


# ---------------------------------------------------------------------------
# brokerStatus


def broker_status(
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr", help="Broker address (host:port)."),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="Every broker (masters and slaves) of this cluster."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    if (broker_addr is None) == (cluster is None):
        raise bad_option("-b/-c", "give exactly one of -b brokerAddr or -c clusterName")
    if broker_addr is not None:
        addrs = [check_addr(broker_addr)]
        results = run(AdminClient([], timeout=timeout).runtime_infos, addrs)  # no NameServer needed
    else:
        client = client_for(namesrv, timeout)
        results = run(_cluster_runtime_infos, client, cluster)
    if as_json:
        print_json({"brokers": [{"addr": r.addr, "reachable": r.ok, "error": r.error,
                                 "table": dict(sorted(r.value.items())) if r.ok else None} for r in results]})
    else:
        for r in results:
            if r.ok:
                rows = [[k, v] for k, v in sorted(r.value.items())]
                out.print(fit_table([Col("#Key"), Col("#Value", wrap=True)], rows, title=f"broker {r.addr}"))
    failed = [r for r in results if not r.ok]
    for r in failed:  # errors go where every other command's go: stderr, one line each
        print(f"mqadmin: {error_line(r.addr, r.error or 'no answer')}", file=sys.stderr)
    if failed:
        raise typer.Exit(1)


async def _cluster_runtime_infos(client: AdminClient, cluster: str) -> list[PerServer]:
    groups = await client.brokers_of_cluster(cluster)
    addrs = [addr for ids in groups.values() for _, addr in sorted(ids.items())]
    return await client.runtime_infos(addrs)


# ---------------------------------------------------------------------------
# sendMessage / consumeMessage


def send_message(
    topic: str = typer.Option(..., "-t", "--topic", help="Topic name."),
    body: str = typer.Option(..., "-p", "--body", help="Message body (UTF-8)."),
    keys: str | None = typer.Option(None, "-k", "--key", help="Message keys."),
    tags: str | None = typer.Option(None, "-c", "--tags", help="Message tags."),
    broker: str | None = typer.Option(None, "-b", "--broker", help="Send to this broker (name)."),
    queue_id: int | None = typer.Option(None, "-i", "--qid", min=0, help="Send to this queue (needs -b)."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    if queue_id is not None and broker is None:
        raise bad_option("-i", "Broker name must be set if the queue is chosen (-b)")
    client = client_for(namesrv, timeout)

    async def send() -> Any:
        return await client.send_message(_check_topic(topic), body.encode("utf-8"), keys=keys, tags=tags,
                                         broker_name=broker, queue_id=queue_id)

    result = run(send)
    if as_json:
        print_json(result.to_json())
        return
    row = [result.broker_name, str(result.queue_id), Text(result.status, style="green"), result.msg_id,
           str(result.queue_offset)]
    out.print(fit_table([Col("#Broker Name"), Col("#QID"), Col("#Send Result"), Col("#MsgId"), Col("#QueueOffset", 1)], [row]))


def consume_message(
    topic: str = typer.Option(..., "-t", "--topic", help="Topic name."),
    broker: str | None = typer.Option(None, "-b", "--brokerName", help="Only this broker."),
    queue_id: int | None = typer.Option(None, "-i", "--queueId", min=0, help="Only this queue (needs -b)."),
    offset: int | None = typer.Option(None, "-o", "--offset", min=0, help="Start at this queue offset (needs -i)."),
    group: str = typer.Option(TOOLS_CONSUMER_GROUP, "-g", "--consumerGroup", help="Consumer group name."),
    count: int = typer.Option(128, "-c", "--MessageNumber", min=1, max=100_000, help="At most this many messages."),
    begin: str | None = typer.Option(None, "-s", "--beginTimestamp", metavar="TIME",
                                     help="Only messages stored at or after TIME (currentTimeMillis or yyyy-MM-dd#HH:mm:ss:SSS)."),
    end: str | None = typer.Option(None, "-e", "--endTimestamp", metavar="TIME", help="Only messages stored before TIME."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    if queue_id is not None and broker is None:
        raise bad_option("-i", "Please set the brokerName (-b) before queueId")
    if offset is not None and queue_id is None:
        raise bad_option("-o", "Please set queueId (-i) before offset")
    begin_ms = None if begin is None else _timestamp("-s", begin)
    end_ms = None if end is None else _timestamp("-e", end)
    if begin_ms is not None and end_ms is not None and end_ms < begin_ms:
        raise bad_option("-e", "the end timestamp is before the begin timestamp")
    client = client_for(namesrv, timeout)

    async def consume() -> Any:
        async with client.pooled():
            return await client.consume(topic, broker_name=broker, queue_id=queue_id, offset=offset, count=count,
                                        group=group, begin_ms=begin_ms, end_ms=end_ms)

    reads = run(consume)
    msgs = [m for r in reads for m in r.messages]
    if as_json:
        print_json({"topic": topic, "messages": [m.to_json() for m in msgs], "queues": [r.to_json() for r in reads]})
    else:
        rows = [[m.broker_name, str(m.queue_id), str(m.queue_offset), m.msg_id, m.tags or "", m.keys or "",
                 time.strftime("%H:%M:%S", time.localtime(m.store_timestamp / 1000)), _preview(m.body)] for m in msgs]
        cols = [Col("#Broker Name"), Col("#QID"), Col("#Offset"), Col("#MsgId", 2), Col("#Tags", 3), Col("#Keys", 3),
                Col("#StoreTime", 4), Col("#Body", wrap=True)]
        if rows:
            out.print(fit_table(cols, rows))
        out.print(f"{len(msgs)} message(s) from {sum(1 for r in reads if r.messages)} of {len(reads)} queue(s) of {topic}")
        for r in reads:
            if r.error:
                out.print(f"{r.broker_name} queue {r.queue_id}: {r.error}", style="red")
    if any(r.error for r in reads):
        raise typer.Exit(1)


# ---------------------------------------------------------------------------
# brokerFault (ours: the broker stub's fault switchboard)


def broker_fault(
    broker: str = typer.Option(..., "-b", "--broker", help="Broker address (host:port) or broker name (via the NameServer)."),
    broker_id: int = typer.Option(0, "--id", min=0, help="With a broker name: which brokerId (0 = master)."),
    latency: int | None = typer.Option(None, "--latency", min=0, max=600_000, metavar="MS", help="Answer every send MS later."),
    reject: int | None = typer.Option(None, "--reject", metavar="CODE", help="Answer every send with response CODE."),
    remark: str | None = typer.Option(None, "--remark", help="With --reject: the remark sent back."),
    hang: bool = typer.Option(False, "--hang", help="Answer nothing (connections stay open) until --resume."),
    resume: bool = typer.Option(False, "--resume", help="End --hang; waiting requests are answered."),
    partition: str | None = typer.Option(None, "--partition", metavar="NAMESRV", help="Stop registering/heartbeating to this NameServer (host:port)."),
    heal: str | None = typer.Option(None, "--heal", metavar="NAMESRV|all", help="Undo --partition for one NameServer, or all."),
    clear: bool = typer.Option(False, "--clear", help="Back to normal: no latency, reject, hang or partition."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    """With no fault option, show the switchboard; otherwise change one thing and show the result."""
    chosen: list[tuple[str, dict[str, object]]] = []
    if latency is not None:
        chosen.append(("latency", {"millis": latency}))
    if reject is not None:
        chosen.append(("reject", {"code": reject, **({"remark": remark} if remark else {})}))
    elif remark is not None:
        raise bad_option("--remark", "only goes with --reject")
    if hang:
        chosen.append(("hang", {}))
    if resume:
        chosen.append(("resume", {}))
    if partition is not None:
        chosen.append(("partition", {"namesrv": check_addr(partition)}))
    if heal is not None:
        chosen.append(("heal", {} if heal.strip().lower() == "all" else {"namesrv": check_addr(heal)}))
    if clear:
        chosen.append(("clear", {}))
    if len(chosen) > 1:
        raise bad_option("brokerFault", "give at most one of --latency, --reject, --hang, --resume, --partition, --heal, --clear")
    action, params = chosen[0] if chosen else ("status", {})
    by_addr = ":" in broker

    async def call() -> tuple[str, dict[str, Any]]:
        # A hung broker answers nothing but fault requests, so a fresh connection is used each time.
        addr = check_addr(broker) if by_addr else await client_for(namesrv, timeout).broker_addr_of(broker, broker_id)
        return addr, await AdminClient([], timeout=timeout).broker_fault(addr, action, **params)

    addr, state = run(call)
    if as_json:
        print_json({"broker": addr, "action": action, "state": state})
        return
    rows = [
        ["send latency", f"{state.get('sendLatencyMillis', 0)} ms"],
        ["reject sends with", "-" if state.get("rejectCode") is None else code_name(int(state["rejectCode"]))],
        ["hung", "yes" if state.get("hung") else "no"],
        ["partitioned from", ", ".join(state.get("partitioned") or []) or "-"],
    ]
    title = f"broker {addr}: " + ("fault state" if action == "status" else f"{action} applied")
    out.print(fit_table([Col("#Fault"), Col("#State", wrap=True)], rows, title=title))


def _timestamp(option: str, text: str) -> int:
    """Apache mqadmin's time argument: milliseconds since the epoch, or local ``yyyy-MM-dd#HH:mm:ss:SSS``."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        raise bad_option(option, f"{text!r} is neither milliseconds since the epoch nor yyyy-MM-dd#HH:mm:ss:SSS") from None
    return int(moment.timestamp() * 1000)


def _preview(body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    return text if len(text) <= BODY_PREVIEW else text[:BODY_PREVIEW] + f"... ({len(body)} bytes)"


def register(app: typer.Typer) -> None:
    app.command("updateTopic", help="Update or create a topic on a broker or on every master of a cluster.")(update_topic)
    app.command("deleteTopic", help="Delete a topic from a cluster's brokers and from every NameServer.")(delete_topic)
    app.command("brokerStatus", help="Fetch a broker's runtime status data (GET_BROKER_RUNTIME_INFO).")(broker_status)
    app.command("sendMessage", help="Send one message (SEND_MESSAGE_V2 to a master chosen from the route).")(send_message)
    app.command("consumeMessage", help="Pull up to -c messages from each queue of a topic, oldest first.")(consume_message)
    app.command("brokerFault", help="Inject a fault into a broker stub (latency, reject, hang, partition) or show its faults.")(broker_fault)

