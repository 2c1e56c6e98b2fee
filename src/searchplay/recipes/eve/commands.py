"""EVE's CLI: ``searchplay warmstart --eve`` runs the ``warmstart_eve`` stage (registered by
``searchplay.recipes.eve`` as a warm-start stage flag: ``searchplay.warmstart.commands.register_stage``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from searchplay.config import Params

EVE_FLAG_HELP = ("the warmstart_eve stage: continue the warm-start on EVE's formats (eve.warmstart_steps) for "
                 "the `eve` variant")


def eve_command(params: Params, track: bool) -> None:
    """Run the ``warmstart_eve`` stage and print its summary (``searchplay warmstart --eve``)."""
    from searchplay.cliutil import console, exit_code_for, print_error
    from searchplay.recipes.eve.warmstart import EVE_RATES, run_eve_warmstart
    from searchplay.warmstart.stage import WarmstartError

    try:
        metrics = run_eve_warmstart(params, track=track)
    except WarmstartError as exc:
        print_error("warm-start error", str(exc))
        raise typer.Exit(exit_code_for(exc)) from None
    console.print(f"EVE warm-start: {metrics['steps']} steps from the warm-start, {int(metrics['trained_tokens']):,} "
                  f"trained tokens, loss {metrics['loss_first']:.3f} -> {metrics['loss_last']:.3f} in "
                  f"{metrics['time_train_s']:.0f} s")
    for key, _ in EVE_RATES:
        console.print(f"  {key:28s} warm-start {metrics.get(key + '_before', float('nan')):.2f} -> EVE warm-start "
                      f"{metrics.get(key, float('nan')):.2f} (n={int(metrics.get('eve_check_prompts', 0))})")
    cfg = params.eve
    console.print(f"model: {cfg.warmstart_out_dir}/model; report: {cfg.warmstart_reports_dir}/metrics.json")
