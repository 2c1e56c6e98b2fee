"""CLI verb of the warmstart stage (registered by searchplay.cli): ``searchplay warmstart``."""

from __future__ import annotations

import typer


def warmstart_command(
    ctx: typer.Context,
    steps: int | None = typer.Option(None, "--steps", min=1, help="optimizer steps (default: warmstart.steps)"),
    method: str | None = typer.Option(None, "--method", help="full | lora (default: warmstart.method)"),
    track: bool = typer.Option(True, "--track/--no-track", help="log an MLflow run"),
) -> None:
    """Format warm-start: SFT on demos of every role from the warm-start KG split (before self-play)."""
    from searchplay.cliutil import console, exit_code_for, get_params
    from searchplay.warmstart.stage import WarmstartError, run_warmstart

    params = get_params(ctx, **{"warmstart.steps": steps, "warmstart.method": method})
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


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to the root app."""
    app.command("warmstart")(warmstart_command)
