"""CLI verb of the warmstart stage (registered by searchplay.cli): ``searchplay warmstart``.

A recipe with a warm-start stage of its own adds a flag that runs it instead (``register_stage``; e.g.
``searchplay warmstart --<flag>``), registered before ``searchplay.cli`` builds the command.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from searchplay.config import Params


@dataclass(frozen=True)
class WarmstartStage:
    """A recipe's own warm-start stage, run by ``searchplay warmstart --<flag>``."""

    flag: str  # the option's name (also its keyword in the command)
    help: str
    steps_key: str  # the params key that --steps sets for this stage
    run: Callable[[Params, bool], None]  # (params, track): run the stage and print its summary


STAGES: dict[str, WarmstartStage] = {}  # flag -> stage; recipes add theirs (register_stage)


def register_stage(stage: WarmstartStage) -> None:
    """Add a ``--<flag>`` to ``searchplay warmstart`` that runs ``stage`` (a recipe's, at import)."""
    if STAGES.get(stage.flag, stage) is not stage:
        raise ValueError(f"warmstart --{stage.flag} is already registered")
    STAGES[stage.flag] = stage


def warmstart_command(
    ctx: typer.Context,
    steps: int | None = typer.Option(None, "--steps", min=1, help="optimizer steps (default: warmstart.steps)"),
    method: str | None = typer.Option(None, "--method", help="full | lora (default: warmstart.method)"),
    track: bool = typer.Option(True, "--track/--no-track", help="log an MLflow run"),
    **stages: bool,
) -> None:
    """Format warm-start: SFT on demos of every role from the warm-start KG split (before self-play)."""
    from searchplay.cliutil import console, exit_code_for, get_params, print_error
    from searchplay.warmstart.stage import WarmstartError, run_warmstart

    chosen = next((STAGES[flag] for flag, on in stages.items() if on), None)  # a recipe's stage flag, if given
    params = get_params(ctx, **{chosen.steps_key if chosen else "warmstart.steps": steps, "warmstart.method": method})
    if chosen is not None:
        chosen.run(params, track)
        return
    try:
        metrics = run_warmstart(params, track=track)
    except WarmstartError as exc:
        print_error("warm-start error", str(exc))
        raise typer.Exit(exit_code_for(exc)) from None
    if not metrics.get("enabled"):
        console.print(metrics["note"])
        return
    console.print(f"warm-start: {metrics['steps']} steps, {int(metrics['trained_tokens']):,} trained tokens of "
                  f"{int(metrics['tokens']):,}, loss {metrics['loss_first']:.3f} -> {metrics['loss_last']:.3f} "
                  f"in {metrics['time_train_s']:.0f} s")
    if not metrics["check_prompts"]:
        console.print("  no format check (warmstart.eval_prompts: 0)")
    for key in ("proposer_valid_rate", "solver_answer_rate", "verifier_format_rate", "solver_em"):
        if key in metrics:
            console.print(f"  {key:22s} base {metrics[key + '_base']:.2f} -> warm-start {metrics[key]:.2f} "
                          f"(n={metrics['check_prompts']})")
    console.print(f"model: {params.warmstart.out_dir}/model; report: {params.warmstart.reports_dir}/metrics.json")


def with_stage_flags(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with one ``--<flag>`` option per registered stage, after its own options (typer reads the
    signature)."""
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.kind is not p.VAR_KEYWORD]
    flags = [inspect.Parameter(stage.flag, inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                               default=typer.Option(False, f"--{stage.flag}", help=stage.help))
             for stage in STAGES.values()]

    def with_flags(**options: Any) -> None:
        command(**options)

    with_flags.__signature__ = inspect.Signature([*own, *flags])  # type: ignore[attr-defined]
    with_flags.__annotations__ = {p.name: p.annotation for p in (*own, *flags)}
    with_flags.__doc__ = command.__doc__
    with_flags.__wrapped__ = command  # type: ignore[attr-defined]  # the verb's own code: scripts/stage_deps.py
    return with_flags


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to the root app, with the flags of the recipes' warm-start stages."""
    app.command("warmstart")(with_stage_flags(warmstart_command))
