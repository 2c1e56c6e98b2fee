"""CLI verbs of the selfplay stage (registered by searchplay.cli, after the recipes registered their variants)."""

from __future__ import annotations

import typer


def variant_help() -> str:
    """``--variant``'s help: every registered variant."""
    from searchplay.selfplay.variants import VARIANTS

    return " | ".join(VARIANTS) + " (default: params)"


def phase_help() -> str:
    """``--phase``'s help: what each phased variant's phases do, from their declarations."""
    from searchplay.selfplay.phases import PHASED
    from searchplay.selfplay.variants import VARIANTS

    phased = [f"{name}: {PHASED[v.step].help}" for name, v in VARIANTS.items() if v.step in PHASED]
    return "all, or one phase of a phased variant, as the pipeline's stages run it" + (
        f" ({'; '.join(phased)})" if phased else "")


def _launched_elsewhere(params, variant) -> bool:
    """With ``pipeline.launch.processes`` > 1: run this same command under the launcher and wait for it (True),
    unless this process is one the launcher started, or the variant trains on one process only (False)."""
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from searchplay.cliutil import console
    from searchplay.launch import EXIT_CODES, launch_command, launched_exit_code, needs_launch
    from searchplay.selfplay import phases

    launch = params.pipeline.launch
    if not needs_launch(launch):
        return False
    if phases.one_process(variant):
        console.print(f"{variant.name} trains on one process (its phases hand off files one process writes): "
                      f"pipeline.launch.processes={launch.processes} does not apply to it")
        return False
    command = launch_command(launch, sys.argv[1:])
    console.print("$ " + " ".join(command), markup=False, highlight=False, soft_wrap=True)
    with tempfile.TemporaryDirectory(prefix="searchplay-exit-") as codes:
        code = subprocess.call(command, env={**os.environ, EXIT_CODES: codes})
        if code != 0:  # a process's bad input (2) or failed gate (3) stays so, for the flow's retry condition
            raise typer.Exit(launched_exit_code(Path(codes), code))
    return True


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to the root app."""

    @app.command("selfplay")
    def selfplay(
        ctx: typer.Context,
        variant: str = typer.Option(None, "--variant", help=variant_help()),
        iterations: int = typer.Option(None, "--iterations", min=1, help="total self-play steps (default: params)"),
        resume: bool = typer.Option(False, "--resume", help="continue from the newest checkpoint of this variant"),
        resume_if_unchanged: bool = typer.Option(
            False, "--resume-if-unchanged", help="continue where the checkpoints come from the same params, start "
            "model and code, else remove them and start over (the DVC stages' mode: a killed `dvc repro` resumes)"),
        phase: str = typer.Option("all", "--phase", help=phase_help()),
    ) -> None:
        """Search self-play training (SSP Alg. 1 with the KG Proposer / WCR), one checkpoint per iteration."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from searchplay.cliutil import console, exit_code_for, get_params, print_error
        from searchplay.selfplay import phases
        from searchplay.selfplay.checkpoint import CheckpointError
        from searchplay.selfplay.loop import SelfplayError, run_selfplay
        from searchplay.selfplay.seeds import SeedError
        from searchplay.selfplay.variants import VARIANTS

        params = get_params(ctx, **{"selfplay.variant": variant, "selfplay.iterations": iterations})
        name, total = params.selfplay.variant, params.selfplay.iterations
        if name not in VARIANTS:
            console.print(f"[red]unknown variant {name!r}[/red]; registered: {sorted(VARIANTS)}")
            raise typer.Exit(2)
        try:
            phases.check_phase(VARIANTS[name], phase)
        except ValueError as exc:
            console.print(f"[red]{exc}[/red]")
            raise typer.Exit(2) from None
        if _launched_elsewhere(params, VARIANTS[name]):
            return
        if iterations is None:
            total = phases.phase_iterations(params, VARIANTS[name], phase)
        run = phases.run_name(VARIANTS[name], phase)
        with Progress(TextColumn("selfplay {task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console) as progress:
            task = progress.add_task(run, total=total)

            def report(iteration: int, row: dict[str, float]) -> None:
                progress.update(task, completed=iteration)  # run_selfplay prints the iteration's line

            try:
                history = run_selfplay(params, name, total, resume=resume, on_iteration=report, phase=phase,
                                       resume_if_unchanged=resume_if_unchanged)
            except (SelfplayError, SeedError, CheckpointError, phases.PhaseError) as exc:
                print_error("selfplay error", str(exc))
                raise typer.Exit(exit_code_for(exc)) from None
            progress.update(task, completed=len(history))
        console.print(f"selfplay {run}: {len(history)} iterations; reports in {params.selfplay.reports_dir}/{run}/, "
                      f"the model in {params.selfplay.checkpoint_dir}/{run}/model/, checkpoints in "
                      f"{params.selfplay.checkpoint_dir}/{run}/resume/")
