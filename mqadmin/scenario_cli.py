"""`mqadmin scenario ...`: YAML outage scenarios (run, list)."""

from __future__ import annotations

import typer

app = typer.Typer(
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="Stage outages on a local cluster from a YAML scenario and check expectations.",
)
