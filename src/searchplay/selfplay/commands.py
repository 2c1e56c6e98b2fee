"""CLI verbs of the selfplay stage (registered by searchplay.cli)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to the root app."""
