"""Message commands (Apache's tools/command/message): sendMessage and consumeMessage."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import typer
from rich.text import Text

from mqadmin.client import run
from mqadmin.client.messaging import TOOLS_CONSUMER_GROUP
from mqadmin.commands.options import JsonOpt, NamesrvOpt, TimeoutOpt, bad_option, client_for, topic_opt
from mqadmin.output.console import out, print_json
from mqadmin.output.tables import Col, fit_table

BODY_PREVIEW = 120  # characters of a body shown in the table (--json has all)


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
        return await client.send_message(topic_opt(topic), body.encode("utf-8"), keys=keys, tags=tags,
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
    app.command("sendMessage", help="Send one message (SEND_MESSAGE_V2 to a master chosen from the route).")(send_message)
    app.command("consumeMessage", help="Pull up to -c messages from each queue of a topic, oldest first.")(consume_message)
