"""`mqadmin fanout`: thousands of simulated producers on PySpark."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the `fanout` command to the main app (kept here so cli.py stays small)."""
