"""Topic commands (Apache's tools/command/topic): topicRoute, topicList, updateTopic, deleteTopic,
topicStatus, topicClusterList, updateTopicPerm.

Names, option letters and output are Apache mqadmin's. Brokers are found through the NameServer's
cluster info or the topic's route; the broker-side work is in :mod:`mqadmin.client.broker_admin`.
"""

from __future__ import annotations

import datetime
from typing import Any

import trio
import typer

from mqadmin.client import AdminClient, run
from mqadmin.client import broker_admin as ba
from mqadmin.client.errors import AdminError, PerServer, asked
from mqadmin.client.topic_text import parse_attributes, topic_config_text
from mqadmin.commands.options import (
    JsonOpt,
    NamesrvOpt,
    TimeoutOpt,
    bad_option,
    bool_opt,
    broker_addr_option,
    client_for,
    one_target,
    topic_option,
)
from mqadmin.commands.results import exit_if_any_failed, only, print_failure, print_results
from mqadmin.output.console import out, print_json
from mqadmin.output.tables import Col, fit_table
from remoting.bodies import ClusterInfo, TopicConfig, TopicRouteData
from remoting.codes import FLAG_UNIT, FLAG_UNIT_SUB
from remoting.fastjson import java_double

TOPIC_PERMS = (2, 4, 6)


def route_json(route: TopicRouteData) -> dict[str, Any]:
    """The documented --json shape of a route (standard JSON, string ids)."""
    obj = route.to_obj()
    for bd in obj["brokerDatas"]:
        bd["brokerAddrs"] = {str(k): v for k, v in bd["brokerAddrs"].items()}
    return obj


def topic_route(
    topic: str = topic_option("Topic name."),
    list_format: bool = typer.Option(False, "-l", "--list", help="One row per broker."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    route = run(client_for(namesrv, timeout).topic_route, topic)
    if as_json or not list_format:
        print_json(route_json(route))
        return
    queues = {q.broker_name: q for q in route.queue_datas}
    rows = []
    total_r = total_w = 0
    for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
        q = queues.get(bd.broker_name)
        r, w = (q.read_queue_nums, q.write_queue_nums) if q else (0, 0)
        total_r, total_w = total_r + r, total_w + w
        addrs = "{" + ", ".join(f"{k}={v}" for k, v in sorted(bd.broker_addrs.items())) + "}"
        rows.append([bd.cluster, bd.broker_name, addrs, str(r), str(w), str(q.perm) if q else "-"])
    cols = [Col("#ClusterName"), Col("#BrokerName"), Col("#BrokerAddrs", wrap=True), Col("#ReadQueue"),
            Col("#WriteQueue"), Col("#Perm")]
    footer = [["Total:", str(len(route.broker_datas)), "", str(total_r), str(total_w), ""]]
    out.print(fit_table(cols, rows, footer_rows=footer))


def topic_list(
    cluster_mode: bool = typer.Option(False, "-c", "--clusterModel", help="Show each topic's cluster and consumer groups."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    client = client_for(namesrv, timeout)
    if not cluster_mode:
        topics = sorted(run(client.topic_list))
        if as_json:
            print_json({"topicList": topics})
        else:
            for t in topics:
                out.print(t)
        return
    rows = run(_topic_clusters, client)
    if as_json:
        print_json({"topics": rows})
        return
    cells = [[r["cluster"] or "", r["topic"], group] for r in rows for group in (r["consumerGroups"] or [""])]
    out.print(fit_table([Col("#Cluster Name"), Col("#Topic"), Col("#Consumer Group", wrap=True)], cells))


async def _topic_clusters(client: AdminClient) -> list[dict[str, Any]]:
    """TopicListSubCommand -c: each topic's cluster (of its first broker) and consumer groups (code 300)."""
    async with client.pooled():
        info = await client.cluster_info()
        topics = [t for t in sorted(await client.topic_list()) if not t.startswith(("%RETRY%", "%DLQ%"))]
        rows: list[dict[str, Any]] = [{"topic": t, "cluster": None, "consumerGroups": []} for t in topics]
        limit = trio.CapacityLimiter(16)

        async def fill(row: dict[str, Any]) -> None:
            async with limit:
                try:
                    route = await client.topic_route(row["topic"])
                    if not route.broker_datas:
                        return
                    first = route.broker_datas[0]
                    row["cluster"] = _cluster_of(info, first.broker_name)
                    addr = first.master_addr or next(iter(first.broker_addrs.values()), None)
                    if addr:
                        row["consumerGroups"] = await client.topic_consumer_groups(addr, row["topic"])
                except AdminError:
                    pass  # Java prints the row with what it has

        async with trio.open_nursery() as nursery:
            for row in rows:
                nursery.start_soon(fill, row)
    return rows


def _cluster_of(info: ClusterInfo, broker_name: str) -> str | None:
    return next((c for c, names in info.cluster_addr_table.items() if broker_name in names), None)


def update_topic(
    topic: str = topic_option("Topic name."),
    broker_addr: str | None = broker_addr_option("Create on this broker (host:port)."),
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
    one_target(broker_addr, cluster)
    sys_flag = (FLAG_UNIT if bool_opt("-u", unit) else 0) | (FLAG_UNIT_SUB if bool_opt("-s", has_unit_sub) else 0)
    tc = TopicConfig(topic, read_queues, write_queues, perm, topic_sys_flag=sys_flag,
                     order=bool(bool_opt("-o", order)), attributes=parse_attributes(attributes))
    client = client_for(namesrv, timeout)
    brokers, order_conf, order_results = run(_update_topic, client, tc, broker_addr, cluster)
    if broker_addr is not None and not as_json:
        only(brokers)
    if as_json:
        print_json({"topicConfig": tc.to_obj(), "brokers": [r.to_json() for r in brokers],
                    "orderConf": None if order_conf is None else {"value": order_conf, "namesrvs": [r.to_json() for r in order_results]}})
    else:
        print_results(brokers, "create topic to {addr} success.")
        if order_conf is not None:
            scope = "cluster" if cluster else "broker"
            print_results(order_results, f"set {scope} orderConf. isOrder=true, orderConf=[{order_conf}] [{{addr}}]")
        out.print(topic_config_text(tc))
    exit_if_any_failed(brokers + order_results)


async def _update_topic(
    client: AdminClient, tc: TopicConfig, broker_addr: str | None, cluster: str | None
) -> tuple[list[PerServer], str | None, list[PerServer]]:
    if broker_addr is not None:
        addr = broker_addr
        brokers = await client.create_topic_on([addr], tc)
        if not tc.order or not brokers[0].ok:
            return brokers, None, []
        infos = await client.cluster_infos_everywhere()  # each NameServer: one may have dropped the broker
        name = next((n for r in infos if r.ok for n, bd in r.value.broker_addr_table.items()
                     if addr in bd.broker_addrs.values()), None)
        if name is None:
            held = asked(infos, lambda info: f"brokers {', '.join(sorted(info.broker_addr_table)) or 'none'}")
            raise AdminError(f"broker {addr} is not registered with any NameServer (asked {held}), so its name for "
                             "the order conf is unknown")
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
    topic: str = topic_option("Topic name."),
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
                print_failure(r)
        if all(r.ok for r in brokers):
            out.print(f"delete topic [{topic}] from cluster [{cluster}] success.")
        print_results(namesrvs, f"delete topic [{topic}] from NameServer success. [{{addr}}]")
    exit_if_any_failed(brokers + namesrvs)


async def _delete_topic(client: AdminClient, topic: str, cluster: str) -> tuple[list[PerServer], list[PerServer]]:
    """DELETE_TOPIC_IN_BROKER to every master, then DELETE_TOPIC_IN_NAMESRV to every NameServer (Java's order)."""
    masters = await client.masters_of_cluster(cluster)
    brokers = await client.delete_topic_in_brokers(list(masters.values()), topic)
    return brokers, await client.delete_topic_in_namesrv(topic, cluster)


def human_millis(ms: int) -> str:
    """UtilAll.timeMillisToHumanString2: local ``yyyy-MM-dd HH:mm:ss,SSS``."""
    moment = datetime.datetime.fromtimestamp(ms / 1000)
    return moment.strftime("%Y-%m-%d %H:%M:%S,") + f"{ms % 1000:03d}"


def topic_status(
    topic: str = topic_option("Topic name."),
    cluster: str | None = typer.Option(None, "-c", "--cluster", help="Ask the brokers of this cluster (its route)."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    client = client_for(namesrv, timeout)
    table = run(ba.examine_topic_stats, client, topic.strip(), cluster.strip() if cluster else None)
    queues = sorted(table.offset_table.items())
    if as_json:
        print_json({"topic": topic, "topicPutTps": table.topic_put_tps, "queues": [
            {"brokerName": mq.broker_name, "queueId": mq.queue_id, "minOffset": o.min_offset,
             "maxOffset": o.max_offset, "lastUpdated": o.last_update_timestamp or None} for mq, o in queues]})
        return
    rows = [[mq.broker_name, str(mq.queue_id), str(o.min_offset), str(o.max_offset),
             human_millis(o.last_update_timestamp) if o.last_update_timestamp > 0 else ""] for mq, o in queues]
    out.print(fit_table([Col("#Broker Name"), Col("#QID"), Col("#Min Offset"), Col("#Max Offset"),
                         Col("#Last Updated", 1)], rows))
    out.print("")
    out.print(f"Topic Put TPS: {java_double(table.topic_put_tps)}")


def topic_cluster_list(
    topic: str = topic_option("Topic name."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    clusters = run(ba.topic_clusters, client_for(namesrv, timeout), topic.strip())
    if as_json:
        print_json({"topic": topic, "clusters": clusters})
        return
    for name in clusters:
        out.print(name)


def update_topic_perm(
    topic: str = topic_option("Topic name."),
    perm: int = typer.Option(..., "-p", "--perm", help="New permission: 2 W, 4 R, 6 RW."),
    broker_addr: str | None = broker_addr_option("Only this master (host:port)."),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="Every master of this cluster."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    """The topic keeps its queue numbers and sys flag from the route (as Java's command); unlike Java's, also
    its order flag and attributes, read from the broker (GET_TOPIC_CONFIG) when it has them."""
    one_target(broker_addr, cluster)
    if perm not in TOPIC_PERMS:
        raise bad_option("-p", f"perm {perm} is not one of 2 (W), 4 (R), 6 (RW)")
    addr = broker_addr
    client = client_for(namesrv, timeout)
    result = run(_update_topic_perm, client, topic.strip(), perm, addr, cluster)
    results: list[PerServer] = result.pop("results")
    if as_json:
        print_json(result | {"brokers": [r.to_json() for r in results]})
    elif result["unchanged"]:
        out.print("new perm equals to the old one!")
    else:
        if addr is not None:
            only(results)
        print_results(results, f"update topic perm from {result['oldPerm']} to {perm} in {{addr}} success.")
        if addr is not None:
            out.print(f"{result['text']}.")
    exit_if_any_failed(results)


async def _update_topic_perm(client: AdminClient, topic: str, perm: int, addr: str | None,
                             cluster: str | None) -> dict[str, Any]:
    route = await client.topic_route(topic)
    if not route.queue_datas:
        raise AdminError(f"topic {topic} has no queues in its route")
    first = route.queue_datas[0]
    old = first.perm
    if addr is not None:
        name = next((bd.broker_name for bd in route.broker_datas if bd.master_addr == addr), None)
        if name is None:
            raise AdminError(f"updateTopicPerm error broker not exit or broker is not master! ({addr} is not a master "
                             f"of topic {topic})")
        old = next((q.perm for q in route.queue_datas if q.broker_name == name), old)
        targets = [addr]
    else:
        assert cluster is not None
        targets = list((await client.masters_of_cluster(cluster)).values())
        if not targets:
            raise AdminError(f"cluster {cluster} has no master broker")
    tc = TopicConfig(topic, first.read_queue_nums, first.write_queue_nums, perm, topic_sys_flag=first.topic_sys_flag)
    known = await ba.topic_config_of(client, targets[0], topic)
    if known is not None:
        tc.order, tc.attributes = known.order, {f"+{k}": v for k, v in known.attributes.items()}
    base: dict[str, Any] = {"topic": topic, "perm": perm, "oldPerm": old, "unchanged": False, "results": []}
    if addr is not None and perm == old:
        return base | {"unchanged": True}
    results = await client.create_topic_on(targets, tc)
    shown = TopicConfig(topic, tc.read_queue_nums, tc.write_queue_nums, perm, topic_sys_flag=tc.topic_sys_flag,
                        order=tc.order, attributes=known.attributes if known else {})
    return base | {"results": results, "text": topic_config_text(shown)}


def register(app: typer.Typer) -> None:
    app.command("topicRoute", help="Show a topic's route: brokers, addresses, queues (JSON unless -l).")(topic_route)
    app.command("topicList", help="List every topic the NameServer knows (-c: with cluster and consumer groups).")(topic_list)
    app.command("updateTopic", help="Update or create a topic on a broker or on every master of a cluster.")(update_topic)
    app.command("deleteTopic", help="Delete a topic from a cluster's brokers and from every NameServer.")(delete_topic)
    app.command("topicStatus", help="Examine topic status: each queue's min/max offset and last update.")(topic_status)
    app.command("topicClusterList", help="Get the cluster(s) a topic is in.")(topic_cluster_list)
    app.command("updateTopicPerm", help="Update a topic's permission on a broker or a cluster's masters.")(update_topic_perm)
