"""mqadmin commands for topic status, stats and broker config, with Apache's names, letters and columns.

``topicStatus``, ``topicClusterList``, ``updateTopicPerm``, ``statsAll``,
``clusterRT``, ``getBrokerConfig``, ``updateBrokerConfig`` (tools/command/
topic, stats, cluster, broker). The consumer-group commands are in
:mod:`mqadmin.group_admin_cli`; :func:`register` adds both. Thin: options
are checked here (bad values exit 2), the work is in
:mod:`mqadmin.broker_admin`.
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import trio
import typer

from mqadmin import broker_admin as ba
from mqadmin import group_admin_cli
from mqadmin.client import AdminClient, AdminError, PerServer, run, topic_config_text
from mqadmin.admin_opts import addr_opt, one_target
from mqadmin.cliutil import JsonOpt, NamesrvOpt, TimeoutOpt, bad_option, client_for
from mqadmin.render import Col, fit_table, out, print_json
from remoting.bodies import TopicConfig
from remoting.mqjson import java_double

TOPIC_PERMS = (2, 4, 6)


def human_millis(ms: int) -> str:
    """UtilAll.timeMillisToHumanString2: local ``yyyy-MM-dd HH:mm:ss,SSS``."""
    moment = datetime.datetime.fromtimestamp(ms / 1000)
    return moment.strftime("%Y-%m-%d %H:%M:%S,") + f"{ms % 1000:03d}"


def print_results(results: list[PerServer], ok: str, fail: str) -> None:
    for r in results:
        if r.ok:
            out.print(ok.format(addr=r.addr))
        else:
            out.print(fail.format(addr=r.addr, error=r.error), style="red")


# ---------------------------------------------------------------------------
# topics


def topic_status(
    topic: str = typer.Option(..., "-t", "--topic", help="Topic name."),
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
    topic: str = typer.Option(..., "-t", "--topic", help="Topic name."),
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
    topic: str = typer.Option(..., "-t", "--topic", help="Topic name."),
    perm: int = typer.Option(..., "-p", "--perm", help="New permission: 2 W, 4 R, 6 RW."),
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr", help="Only this master (host:port)."),
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
    addr = addr_opt("-b", broker_addr) if broker_addr is not None else None
    client = client_for(namesrv, timeout)
    result = run(_update_topic_perm, client, topic.strip(), perm, addr, cluster)
    if as_json:
        print_json(result)
    elif result["unchanged"]:
        out.print("new perm equals to the old one!")
    else:
        for r in result["brokers"]:
            if r["ok"]:
                out.print(f"update topic perm from {result['oldPerm']} to {perm} in {r['addr']} success.")
            else:
                out.print(f"update topic perm in {r['addr']} failed: {r['error']}", style="red")
        if addr is not None and result["brokers"][0]["ok"]:
            out.print(f"{result['text']}.")
    if not all(r["ok"] for r in result["brokers"]):
        raise typer.Exit(1)


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
    base: dict[str, Any] = {"topic": topic, "perm": perm, "oldPerm": old, "unchanged": False, "brokers": []}
    if addr is not None and perm == old:
        return base | {"unchanged": True}
    results = await client.create_topic_on(targets, tc)
    shown = TopicConfig(topic, tc.read_queue_nums, tc.write_queue_nums, perm, topic_sys_flag=tc.topic_sys_flag,
                        order=tc.order, attributes=known.attributes if known else {})
    return base | {"brokers": [r.to_json() for r in results], "text": topic_config_text(shown)}


# ---------------------------------------------------------------------------
# statsAll, clusterRT


def stats_all(
    active_only: bool = typer.Option(False, "-a", "--activeTopic", help="Only topics with traffic in the last 24 h."),
    topic: str | None = typer.Option(None, "-t", "--topic", help="Only this topic."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    client = client_for(namesrv, timeout)

    async def rows() -> list[ba.StatsRow]:
        async with client.pooled():
            return await ba.stats_all(client, topic.strip() if topic else None, active_only)

    found = run(rows)
    if as_json:
        print_json({"rows": [r.to_json() for r in found]})
        return
    cells = [[r.topic, r.group or "", str(r.accumulation), f"{r.in_tps:.2f}",
              "" if r.out_tps is None else f"{r.out_tps:.2f}", str(r.in_24h),
              "NO_CONSUMER" if r.out_24h is None else str(r.out_24h)] for r in found]
    out.print(fit_table([Col("#Topic"), Col("#Consumer Group"), Col("#Accumulation", 0, "right"),
                         Col("#InTPS", 0, "right"), Col("#OutTPS", 0, "right"), Col("#InMsg24Hour", 0, "right"),
                         Col("#OutMsg24Hour", 0, "right")], cells))


def cluster_rt(
    amount: int = typer.Option(100, "-a", "--amount", min=1, max=100_000, help="Messages per broker and round."),
    size: int = typer.Option(128, "-s", "--size", min=0, max=4 * 1024 * 1024, help="Message size in bytes."),
    cluster: str | None = typer.Option(None, "-c", "--cluster", help="Only this cluster (default: all)."),
    print_log: str = typer.Option("false", "-p", "--printLog", metavar="true|false", help="Print as tlog lines."),
    machine_room: str = typer.Option("noname", "-m", "--machineRoom", help="Machine room name (tlog lines)."),
    interval: float = typer.Option(10, "-i", "--interval", min=0, help="Seconds between rounds."),
    count: int | None = typer.Option(None, "--count", min=1, help="Stop after this many rounds (Java: never)."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    """Send ``-a`` messages to every broker's own topic (its broker name) and print the mean send RT."""
    tlog = print_log.strip().lower() == "true"
    client = client_for(namesrv, timeout)
    if not tlog and not as_json:
        out.print(f"{'#Cluster Name':<24}  {'#Broker Name':<24}  {'#RT':<8}  {'#successCount':<16}  {'#failCount':<16}")
    rounds = 0
    try:
        while True:
            rows = run(_rt_round, client, cluster.strip() if cluster else None, amount, b"a" * size)
            for r in rows:
                if as_json:  # one JSON object per line and round: the command may run for ever
                    sys.stdout.write(json.dumps(r) + "\n")
                    sys.stdout.flush()
                elif tlog:
                    when = datetime.datetime.now(datetime.timezone(datetime.timedelta(hours=8)))
                    rt = Decimal(str(r["rt"])).quantize(Decimal(1), ROUND_HALF_UP)
                    out.print(f"{when:%Y-%m-%d %H:%M:%S}|{machine_room}|{r['cluster']}|{r['brokerName']}|{rt}")
                else:
                    out.print(f"{r['cluster']:<24}  {r['brokerName']:<24}  {r['rt']:<8.2f}  {r['successCount']:<16}  "
                              f"{r['failCount']:<16}")
            rounds += 1
            if count is not None and rounds >= count:
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        return


async def _rt_round(client: AdminClient, only: str | None, amount: int, body: bytes) -> list[dict[str, Any]]:
    info = await client.cluster_info()
    clusters = [only] if only else sorted(info.cluster_addr_table)
    rows = []
    async with client.pooled():
        for name in clusters:
            brokers = info.cluster_addr_table.get(name)
            if brokers is None:
                raise AdminError(f"cluster [{name}] not exist (clusters: {', '.join(sorted(info.cluster_addr_table))})")
            for broker in sorted(set(brokers)):
                rows.append(await _rt_broker(client, name, broker, amount, body))
    return rows


async def _rt_broker(client: AdminClient, cluster: str, broker: str, amount: int, body: bytes) -> dict[str, Any]:
    ok = failed = 0
    elapsed = 0.0
    try:
        route = await client.topic_route(broker)
    except AdminError:
        route = None
    for i in range(amount):
        start = trio.current_time()
        try:
            if route is None:
                raise AdminError(f"no route for topic {broker}")
            await client.send_message(broker, body, route=route)
            ok += 1
        except AdminError:
            failed += 1
        if i or amount == 1:  # Java leaves the first send (connection set-up) out of the mean
            elapsed += trio.current_time() - start
    rt = elapsed * 1000 / max(1, amount - 1)
    return {"cluster": cluster, "brokerName": broker, "rt": round(rt, 2), "successCount": ok, "failCount": failed}


# ---------------------------------------------------------------------------
# broker config


def get_broker_config(
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr", help="This broker (host:port)."),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="Every broker of this cluster."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    one_target(broker_addr, cluster)
    if broker_addr is not None:
        addr = addr_opt("-b", broker_addr)
        targets = [(f"============{addr}============", addr, None)]
        client = AdminClient([], timeout=timeout)
    else:
        client = client_for(namesrv, timeout)
        assert cluster is not None
        groups = run(client.brokers_of_cluster, cluster)
        targets = []
        for ids in groups.values():
            master = ids.get(0)
            if master is not None:
                targets.append((f"============Master: {master}============", master, None))
            for bid, slave in sorted(ids.items()):
                if bid != 0:
                    targets.append((f"============My Master: {master}=====Slave: {slave}============", slave, master))

    async def fetch() -> list[PerServer]:
        async def one(target: tuple[str, str, str | None]) -> PerServer:
            try:
                return PerServer(target[1], await ba.broker_config(client, target[1]))
            except AdminError as exc:
                return PerServer(target[1], error=str(exc))

        return await ba.gather(targets, one)

    results = run(fetch)
    if as_json:
        print_json({"brokers": [{"addr": t[1], "master": t[2], "config": r.value, "error": r.error}
                                for t, r in zip(targets, results)]})
    else:
        for (title, _, _), r in zip(targets, results):
            out.print(title)
            if not r.ok:
                out.print(r.error, style="red")
                continue
            for key, value in r.value.items():
                out.print(f"{key:<50}=  {value}")
            out.print("")
    if not all(r.ok for r in results):
        raise typer.Exit(1)


def update_broker_config(
    key: str = typer.Option(..., "-k", "--key", help="Config key."),
    value: str = typer.Option(..., "-v", "--value", help="New value."),
    broker_addr: str | None = typer.Option(None, "-b", "--brokerAddr", help="This broker (host:port)."),
    cluster: str | None = typer.Option(None, "-c", "--clusterName", help="Every master of this cluster."),
    all_brokers: str | None = typer.Option(None, "-a", "--updateAllBroker", metavar="true",
                                           help="With -c: slaves too (any value, as Java's option)."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    one_target(broker_addr, cluster)
    key, value = key.strip(), value.strip()
    if not key:
        raise bad_option("-k", "the key is empty")
    if broker_addr is not None:
        addrs = [addr_opt("-b", broker_addr)]
        client = AdminClient([], timeout=timeout)
    else:
        client = client_for(namesrv, timeout)
        assert cluster is not None
        groups = run(client.brokers_of_cluster, cluster)
        addrs = [a for ids in groups.values() for bid, a in sorted(ids.items()) if bid == 0 or all_brokers is not None]
        if not addrs:
            raise AdminError(f"cluster {cluster} has no broker to update")
    results = run(ba.update_broker_config, client, addrs, key, value)
    if as_json:
        print_json({"key": key, "value": value, "results": [r.to_json() for r in results]})
    else:
        print_results(results, "update broker config success, {addr}", "update broker config failed: {error}")
    if not all(r.ok for r in results):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("topicStatus", help="Examine topic status: each queue's min/max offset and last update.")(topic_status)
    app.command("topicClusterList", help="Get the cluster(s) a topic is in.")(topic_cluster_list)
    app.command("updateTopicPerm", help="Update a topic's permission on a broker or a cluster's masters.")(update_topic_perm)
    app.command("statsAll", help="Topic and consumer TPS stats (VIEW_BROKER_STATS_DATA).")(stats_all)
    app.command("clusterRT", help="Send messages to every broker and print the send RT, every -i seconds.")(cluster_rt)
    app.command("getBrokerConfig", help="Show a broker's (or a cluster's brokers') configuration.")(get_broker_config)
    app.command("updateBrokerConfig", help="Change one broker setting on a broker or a cluster.")(update_broker_config)
    group_admin_cli.register(app)
