"""Helpers shared by every stage's CLI verbs (kept apart from cli.py to avoid import cycles)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from searchplay.config import ConfigError, Params, load_params

console = Console(stderr=True)


def get_params(ctx: typer.Context, **cli_overrides) -> Params:
    """The validated params for this invocation; ``cli_overrides`` maps dotted keys to flag values."""
    obj = ctx.find_root().obj or {}
    merged = {**obj.get("overrides", {}), **{k: v for k, v in cli_overrides.items() if v is not None}}
    try:
        return load_params(obj.get("params_file", Path("params.yaml")), merged)
    except ConfigError as exc:
        console.print(f"[red]configuration error[/red]\n{exc}")
        raise typer.Exit(2) from None


EXIT_BAD_PARAMS = 2  # not retried by the Prefect tasks: a retry would fail the same way
EXIT_DATA_QUALITY = 3  # a failed Great Expectations gate: likewise deterministic


def exit_code_for(error: BaseException) -> int:
    """3 for a failed data-quality gate, 1 for any other stage failure (Prefect retries only those)."""
    from searchplay.quality import DataQualityError

    return EXIT_DATA_QUALITY if isinstance(error, DataQualityError) else 1
