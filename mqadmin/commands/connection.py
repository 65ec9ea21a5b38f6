"""Connection commands (Apache's tools/command/connection): consumerConnection, producerConnection."""

from __future__ import annotations

import typer

from mqadmin.client import AdminClient, run
from mqadmin.client import broker_admin as ba
from mqadmin.commands.options import (
    JsonOpt,
    NamesrvOpt,
    TimeoutOpt,
    broker_addr_option,
    client_for,
    group_option,
    topic_option,
)
from mqadmin.output.console import out, print_json
from mqadmin.output.tables import Col, fit_table
from remoting.codes import version_desc


def consumer_connection(
    group: str = group_option("Consumer group.", "-g", "--consumerGroup"),
    broker_addr: str | None = broker_addr_option("Ask this broker (host:port)."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    if broker_addr is not None:
        cc = run(ba.examine_consumer_connection, AdminClient([], timeout=timeout), group.strip(), broker_addr)
    else:
        cc = run(ba.examine_consumer_connection, client_for(namesrv, timeout), group.strip())
    subs = [(topic, str(sd.get("subString", ""))) for topic, sd in sorted(cc.subscriptions.items())]
    if as_json:
        print_json({"group": group, "connections": [c.to_java() | {"versionDesc": version_desc(c.version)}
                                                    for c in cc.connections],
                    "subscriptions": [{"topic": t, "subExpression": s} for t, s in subs],
                    "consumeType": cc.consume_type, "messageModel": cc.message_model,
                    "consumeFromWhere": cc.consume_from_where})
        return
    out.print(fit_table([Col("#ClientId"), Col("#ClientAddr"), Col("#Language"), Col("#Version")],
                        [[c.client_id, c.client_addr, c.language, version_desc(c.version)] for c in cc.connections]))
    out.print("")
    out.print("Below is subscription:")
    out.print(fit_table([Col("#Topic"), Col("#SubExpression", wrap=True)], [[t, s] for t, s in subs]))
    out.print("")
    out.print(f"ConsumeType: {cc.consume_type}")
    out.print(f"MessageModel: {cc.message_model}")
    out.print(f"ConsumeFromWhere: {cc.consume_from_where}")


def producer_connection(
    group: str = group_option("Producer group.", "-g", "--producerGroup"),
    topic: str = topic_option("A topic the group sends to (its brokers are asked)."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    conns = run(ba.examine_producer_connection, client_for(namesrv, timeout), group.strip(), topic.strip())
    if as_json:
        print_json({"group": group, "topic": topic,
                    "connections": [c.to_java() | {"versionDesc": version_desc(c.version)} for c in conns]})
        return
    out.print(fit_table([Col("#"), Col("#ClientId"), Col("#ClientAddr"), Col("#Language"), Col("#Version")],
                        [[f"{i:04d}", c.client_id, c.client_addr, c.language, version_desc(c.version)]
                         for i, c in enumerate(conns, 1)]))


def register(app: typer.Typer) -> None:
    app.command("consumerConnection", help="Query a consumer group's connections and subscriptions.")(consumer_connection)
    app.command("producerConnection", help="Query a producer group's connections.")(producer_connection)
