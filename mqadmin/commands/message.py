"""Message commands (Apache's tools/command/message): sendMessage and consumeMessage."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import typer
from rich.text import Text

from mqadmin.client import run
from mqadmin.client.messages import message_ext_text, message_queue_text
from mqadmin.client.messaging import TOOLS_CONSUMER_GROUP, QueueRead
from mqadmin.commands.options import JsonOpt, NamesrvOpt, TimeoutOpt, bad_option, client_for, group_option, topic_option
from mqadmin.commands.results import fail
from mqadmin.output.console import out, print_json
from mqadmin.output.tables import Col, fit_table


def send_message(
    topic: str = topic_option("Topic name."),
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
    if not body:  # Apache's client refuses it too (Validators.checkMessage: MESSAGE_ILLEGAL)
        raise bad_option("-p", "the message body length is zero")
    client = client_for(namesrv, timeout)

    async def send() -> Any:
        return await client.send_message(topic, body.encode("utf-8"), keys=keys, tags=tags,
                                         broker_name=broker, queue_id=queue_id)

    result = run(send)
    if as_json:
        print_json(result.to_json())
        return
    row = [result.broker_name, str(result.queue_id), Text(result.status, style="green"), result.msg_id,
           str(result.queue_offset)]
    out.print(fit_table([Col("#Broker Name"), Col("#QID"), Col("#Send Result"), Col("#MsgId"), Col("#QueueOffset", 1)], [row]))


def consume_message(
    topic: str = topic_option("Topic name."),
    broker: str | None = typer.Option(None, "-b", "--brokerName", help="Only this broker."),
    queue_id: int | None = typer.Option(None, "-i", "--queueId", min=0, help="Only this queue (needs -b)."),
    offset: int | None = typer.Option(None, "-o", "--offset", min=0, help="Start at this queue offset (needs -i)."),
    group: str = group_option("Consumer group name.", "-g", "--consumerGroup", default=TOOLS_CONSUMER_GROUP),
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
        _print_as_apache(topic, reads, count, by_queue=queue_id is not None)
    failed = [f"{r.broker_name} queue {r.queue_id}" for r in reads if r.error]
    if failed:  # each one's error is a result line above; stderr says why the status is 1
        fail(f"{len(failed)} of {len(reads)} queues could not be read: {', '.join(failed)}")


def _print_as_apache(topic: str, reads: list[QueueRead], count: int, by_queue: bool) -> None:
    """Apache's consumeMessage text, queue after queue: ``Consume ok``, one ``MSGID: ... BODY: ...`` line per
    message (MessageExt.toString() in the middle), then ``... print msg finished`` once the queue is read to
    its end; a queue cut short by -c is announced first, as Java does."""
    total = sum(len(r.messages) for r in reads)
    for i, r in enumerate(reads):
        mq = message_queue_text(topic, r.broker_name, r.queue_id)
        if r.error:
            out.print(f"{mq}: {r.error}", style="red")
            continue
        cut = i == len(reads) - 1 and total >= count and r.next_offset < r.max_offset
        if cut:  # Java's two wordings (sic), for one queue (-i) and for a topic's queues
            out.print(f"The oldler {count} message will be provided" if by_queue
                      else f"The older {len(r.messages)} message of the {r.queue_id} queue will be provided")
        if r.messages:
            out.print("Consume ok")
        for m in r.messages:
            out.print(f"MSGID: {m.msg_id} {message_ext_text(m)} BODY: {m.body.decode('utf-8', 'replace')}")
        if not cut:
            out.print(f"{mq} print msg finished. status=NO_NEW_MSG, offset={r.next_offset}")


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


def register(app: typer.Typer) -> None:
    app.command("sendMessage", help="Send one message (SEND_MESSAGE_V2 to a master chosen from the route).")(send_message)
    app.command("consumeMessage", help="Pull up to -c messages from each queue of a topic, oldest first.")(consume_message)
