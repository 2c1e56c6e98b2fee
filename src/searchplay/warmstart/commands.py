"""CLI verb of the warmstart stage (registered by searchplay.cli): ``searchplay warmstart``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from searchplay.config import Params


def warmstart_command(
    ctx: typer.Context,
    steps: int | None = typer.Option(None, "--steps", min=1, help="optimizer steps (default: warmstart.steps)"),
    method: str | None = typer.Option(None, "--method", help="full | lora (default: warmstart.method)"),
    track: bool = typer.Option(True, "--track/--no-track", help="log an MLflow run"),
    eve: bool = typer.Option(False, "--eve", help="the warmstart_eve stage: continue the warm-start on EVE's "
                             "formats (warmstart.eve_steps) for the `eve` variant"),
) -> None:
    """Format warm-start: SFT on demos of every role from the warm-start KG split (before self-play)."""
    from searchplay.cliutil import console, exit_code_for, get_params
    from searchplay.warmstart.stage import WarmstartError, run_warmstart

    params = get_params(ctx, **{"warmstart.eve_steps" if eve else "warmstart.steps": steps,
                                "warmstart.method": method})
    if eve:
        eve_command(params, track)
        return
    try:
        metrics = run_warmstart(params, track=track)
    except WarmstartError as exc:
        console.print(f"[red]warm-start error:[/red] {exc}")
        raise typer.Exit(exit_code_for(exc)) from None
    if not metrics.get("enabled"):
        console.print(metrics["note"])
        return
    console.print(f"warm-start: {metrics['steps']} steps, {int(metrics['trained_tokens']):,} trained tokens of "
                  f"{int(metrics['tokens']):,}, loss {metrics['loss_first']:.3f} -> {metrics['loss_last']:.3f} "
                  f"in {metrics['time_train_s']:.0f} s")
    for key in ("proposer_valid_rate", "solver_answer_rate", "verifier_format_rate", "solver_em"):
        console.print(f"  {key:22s} base {metrics[key + '_base']:.2f} -> warm-start {metrics[key]:.2f} "
                      f"(n={metrics['check_prompts']})")
    console.print(f"model: {params.warmstart.out_dir}/model; report: {params.warmstart.reports_dir}/metrics.json")


def eve_command(params: Params, track: bool) -> None:
    from searchplay.cliutil import console, exit_code_for
    from searchplay.warmstart.eve_stage import EVE_RATES, run_eve_warmstart
    from searchplay.warmstart.stage import WarmstartError

    try:
        metrics = run_eve_warmstart(params, track=track)
    except WarmstartError as exc:
        console.print(f"[red]warm-start error:[/red] {exc}")
        raise typer.Exit(exit_code_for(exc)) from None
    console.print(f"EVE warm-start: {metrics['steps']} steps from the warm-start, {int(metrics['trained_tokens']):,} "
                  f"trained tokens, loss {metrics['loss_first']:.3f} -> {metrics['loss_last']:.3f} in "
                  f"{metrics['time_train_s']:.0f} s")
    for key, _ in EVE_RATES:
        console.print(f"  {key:28s} warm-start {metrics.get(key + '_before', float('nan')):.2f} -> EVE warm-start "
                      f"{metrics.get(key, float('nan')):.2f} (n={int(metrics.get('eve_check_prompts', 0))})")
    cfg = params.warmstart
    console.print(f"model: {cfg.eve_out_dir}/model; report: {cfg.eve_reports_dir}/metrics.json")


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to the root app."""
    app.command("warmstart")(warmstart_command)
