"""Stats commands (Apache's tools/command/stats): statsAll."""

from __future__ import annotations

import typer

from mqadmin.client import broker_admin as ba
from mqadmin.client import run
from mqadmin.commands.options import JsonOpt, NamesrvOpt, TimeoutOpt, client_for, topic_option
from mqadmin.output.console import out, print_json
from mqadmin.output.tables import Col, fit_table


def stats_all(
    active_only: bool = typer.Option(False, "-a", "--activeTopic", help="Only topics with traffic in the last 24 h."),
    topic: str | None = topic_option("Only this topic.", default=None),
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


def register(app: typer.Typer) -> None:
    app.command("statsAll", help="Topic and consumer TPS stats (VIEW_BROKER_STATS_DATA).")(stats_all)
