"""Offset commands (Apache's tools/command/offset): resetOffsetByTime."""

from __future__ import annotations

from typing import Any

import typer

from mqadmin.client import AdminClient, run
from mqadmin.client import broker_admin as ba
from mqadmin.commands.options import (
    JsonOpt,
    NamesrvOpt,
    TimeoutOpt,
    bad_option,
    bool_opt,
    broker_addr_option,
    client_for,
    group_option,
    time_opt,
    topic_option,
)
from mqadmin.output.console import out, print_json
from mqadmin.output.tables import Col, fit_table
from remoting.codes import RequestCode
from remoting.command import request


def reset_offset_by_time(
    group: str = group_option("Consumer group.", "-g", "--group"),
    topic: str = topic_option("Topic."),
    timestamp: str = typer.Option(..., "-s", "--timestamp", metavar="TIME",
                                  help="now, milliseconds since the epoch, or yyyy-MM-dd#HH:mm:ss:SSS."),
    force: str | None = typer.Option(None, "-f", "--force", metavar="true|false",
                                     help="Also move offsets forward (default true)."),
    broker_addr: str | None = broker_addr_option("With -q: this broker (host:port).", "-b", "--broker"),
    queue_id: int | None = typer.Option(None, "-q", "--queue", min=0, help="With -b: only this queue."),
    offset: int | None = typer.Option(None, "-o", "--offset", min=0, help="With -b -q: to this offset."),
    cluster: str | None = typer.Option(None, "-c", "--cluster", help="Cluster (routes LMQ and timer topics)."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    when = time_opt("-s", timestamp)
    forced = bool_opt("-f", force)
    forced = True if forced is None else forced
    group, topic = group.strip(), topic.strip()
    if (broker_addr is None) != (queue_id is None):
        raise bad_option("-b/-q", "-b and -q go together")
    if offset is not None and queue_id is None:
        raise bad_option("-o", "needs -b and -q")
    if broker_addr is not None and queue_id is not None:
        _reset_one_queue(broker_addr, group, topic, queue_id, offset, when, timestamp, as_json, timeout)
        return
    client = client_for(namesrv, timeout)

    async def reset() -> tuple[str, Any]:
        try:
            return "broker", await ba.reset_offset_by_time(client, topic, group, when, forced, cluster)
        except ba.ConsumerNotOnline:  # what Java's command does then: the old, client-side reset
            return "old", await ba.reset_offset_old(client, topic, group, when, forced, cluster)

    mode, result = run(reset)
    head = {"group": group, "topic": topic, "force": forced, "timestamp": when, "mode": mode}
    if mode == "old":
        if as_json:
            print_json(head | {"rollback": [r.to_json() for r in result]})
            return
        out.print(f"reset consumer offset by specified consumerGroup[{group}], topic[{topic}], force[{str(forced).lower()}], "
                  f"timestamp(string)[{timestamp}], timestamp(long)[{when}]")
        out.print(fit_table([Col("#brokerName"), Col("#queueId"), Col("#brokerOffset"), Col("#consumerOffset"),
                             Col("#timestampOffset"), Col("#resetOffset")],
                            [[r.broker_name, str(r.queue_id), str(r.broker_offset), str(r.consumer_offset),
                              str(r.timestamp_offset), str(r.rollback_offset)] for r in result]))
        return
    rows = sorted(result.items())
    if as_json:
        print_json(head | {"offsets": [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off}
                                       for mq, off in rows]})
        return
    out.print(f"start reset consumer offset by specified, group[{group}], topic[{topic}], force[{str(forced).lower()}], "
              f"timestamp(string)[{timestamp}], timestamp(long)[{when}]")
    out.print(fit_table([Col("#brokerName"), Col("#queueId"), Col("#offset")],
                        [[mq.broker_name, str(mq.queue_id), str(off)] for mq, off in rows]))


def _reset_one_queue(addr: str, group: str, topic: str, queue_id: int, offset: int | None, when: int, text: str,
                     as_json: bool, timeout: float) -> None:
    """``-b -q [-o]``: the queue's offset at the time (or ``-o``), committed and reset on that broker."""
    client = AdminClient([], timeout=timeout)

    async def reset() -> tuple[int, dict[Any, int]]:
        target = offset if offset is not None else await client.search_offset(addr, topic, queue_id, when)
        if target <= 0:
            return target, {}  # Java resets only to a positive offset
        # resetOffsetByQueueId: commit the offset, then have the broker reset the queue (and tell the consumers)
        await client.broker_call(addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": target}), "update offset")
        name = next(iter(await ba.reset_offset(client, addr, topic, group, 0, True, queue_id=queue_id, offset=target)),
                    None)
        return target, {name: target} if name is not None else {}

    if not as_json:
        out.print(f"start reset consumer offset by specified, group[{group}], topic[{topic}], queueId[{queue_id}], "
                  f"broker[{addr}], timestamp(string)[{text}], timestamp(long)[{when}]")
    target, done = run(reset)
    if as_json:
        print_json({"group": group, "topic": topic, "broker": addr, "queueId": queue_id, "timestamp": when,
                    "offset": target, "reset": bool(done)})
        return
    out.print(f"reset consumer offset to {target}")


def register(app: typer.Typer) -> None:
    app.command("resetOffsetByTime", help="Reset a consumer group's offsets to a time (consumers are told at once).")(reset_offset_by_time)
