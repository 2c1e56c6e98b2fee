"""CLI verbs of the eval stage (registered by searchplay.cli): ``evaluate`` and ``report``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from searchplay.cliutil import console, get_params, print_error
from searchplay.model_paths import selfplay_variants


def _split(text: str | None) -> list[str] | None:
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


def evaluate_command(
    ctx: typer.Context,
    model: str | None = typer.Option(None, "--model", help="model path or hub id (default: by --variant: base -> "
                                     "models.policy, warmstart -> the warm-start checkpoint, a self-play variant "
                                     "-> its latest checkpoint)"),
    benchmarks: str | None = typer.Option(None, "--benchmarks", help="comma-separated, e.g. nq,triviaqa,bamboogle "
                                          "(also fanoutqa, kg_heldout)"),
    data_dir: str | None = typer.Option(None, "--data-dir", help="folder of <name>/{test,dev}.jsonl"),
    n: int | None = typer.Option(None, "--n", help="questions per benchmark (all when fewer); kg_heldout's number is "
                                 "evaluate.kg_heldout_n (--set evaluate.kg_heldout_n=N before the verb)"),
    seed: int | None = typer.Option(None, "--seed", help="sampling seed"),
    out: str | None = typer.Option(None, "--out", help="output root; results go to <out>/<variant>/"),
    variant: str | None = typer.Option(None, "--variant", help="base, warmstart or a self-play variant; also the "
                                       "output folder's name (default: selfplay.variant)"),
    track: bool = typer.Option(True, "--track/--no-track", help="log to MLflow (off for partial fan-out runs)"),
    register: bool = typer.Option(False, "--register/--no-register", help="register an evaluated self-play "
                                  "checkpoint in the MLflow model registry (the pipeline's evaluate stages do)"),
    allow_base: bool = typer.Option(False, "--allow-base", help="a self-play variant without a checkpoint: score "
                                    "the base model under its name (run.json and the report say so) instead of "
                                    "failing"),
    replace: bool = typer.Option(False, "--replace", help="replace an evaluation in the output folder that asked "
                                 "more benchmarks or questions (without it such a run stops before anything loads)"),
) -> None:
    """Answer the QA benchmarks with the Solver; write metrics, predictions, report and charts."""
    from searchplay.cliutil import EXIT_BAD_PARAMS, exit_code_for, print_error
    from searchplay.eval.benchmarks import BenchmarkError, HubUnreachableError
    from searchplay.eval.evaluate import ModelNotFoundError, evaluable_variants, evaluate
    from searchplay.eval.replacement import ReportWouldShrinkError
    from searchplay.llm.judge import JudgeOutageError
    from searchplay.quality import DataQualityError
    from searchplay.retrieval.index import RetrievalIndexError

    if variant is not None and variant not in evaluable_variants():
        print_error("unknown variant", f"--variant {variant!r}; one of {', '.join(evaluable_variants())}")
        raise typer.Exit(EXIT_BAD_PARAMS)

    # the params logged with the run are the ones it used: a self-play variant's evaluation names that variant
    selfplay_variant = variant if variant in selfplay_variants() else None
    params = get_params(ctx, **{"evaluate.model": model, "evaluate.benchmarks": _split(benchmarks),
                                "evaluate.data_dir": data_dir, "evaluate.n": n, "evaluate.seed": seed,
                                "evaluate.out_dir": out, "selfplay.variant": selfplay_variant})
    refuse_a_file_as_output(Path(params.evaluate.out_dir), name := variant or params.selfplay.variant)
    try:
        result = evaluate(params, name, track=track, register=register, allow_base=allow_base, replace=replace)
    except (BenchmarkError, DataQualityError, HubUnreachableError) as exc:
        print_error("benchmark error", str(exc))
        raise typer.Exit(exit_code_for(exc)) from None
    except ModelNotFoundError as exc:
        print_error("model not found", str(exc))
        raise typer.Exit(exit_code_for(exc)) from None
    except ReportWouldShrinkError as exc:
        print_error("evaluation kept", str(exc))
        raise typer.Exit(EXIT_BAD_PARAMS) from None
    except RetrievalIndexError as exc:
        print_error("retrieval index", str(exc))
        raise typer.Exit(exit_code_for(exc)) from None
    except JudgeOutageError as exc:
        print_error("judge outage", str(exc))
        raise typer.Exit(1) from None
    _print_scores(result)


def refuse_a_file_as_output(out_root: Path, name: str) -> None:
    """Exit 2 in one line where the output root or its ``<name>`` folder is a file: found now, not after the
    model, the index and the embedder have loaded."""
    import errno

    from searchplay.cliutil import EXIT_UNWRITABLE, path_error_message, print_error

    for place in (out_root, out_root / name):
        if place.is_file():  # the message the root command gives a file where a folder belongs, written later
            print_error("output error", path_error_message(FileExistsError(errno.EEXIST, "File exists", str(place))))
            raise typer.Exit(EXIT_UNWRITABLE)


def _print_scores(result: Any) -> None:
    """One line per benchmark (judge accuracy and EM with their intervals, F1, sub-EM, errors), the average."""
    judge = result.run["judge"]
    console.print(f"judge: {judge}; model: {result.run['model']}")
    for bench, scores in result.per_benchmark.items():
        if not scores.get("n"):
            console.print(f"  {bench:16s} n=   0  (no questions)")
            continue
        baseline = (f"  majority baseline EM {scores['majority_baseline_em']:5.1f}"
                    if "majority_baseline_em" in scores else "")
        console.print(f"  {bench:16s} n={int(scores['n']):4d}  judge acc {scores['judge_acc']:5.1f} "
                      f"[{scores['judge_acc_ci_low']:.1f}, {scores['judge_acc_ci_high']:.1f}]  "
                      f"EM {scores['em']:5.1f} [{scores['em_ci_low']:.1f}, {scores['em_ci_high']:.1f}]  "
                      f"F1 {scores['f1']:5.1f}  sub-EM {scores['sub_em']:5.1f}  "
                      f"judge errors {int(scores['judge_errors'])}  skipped records {int(scores['skipped_records'])}"
                      f"{baseline}")
    if "avg.judge_acc" in result.metrics:
        console.print(f"  average (judge: {judge}) {result.metrics['avg.judge_acc']:.1f} over "
                      f"{int(result.metrics['avg.num_benchmarks'])} paper benchmarks")
    console.print(f"report: {result.out_dir / 'report.md'}")


def report_command(
    ctx: typer.Context,
    eval_dir: Path = typer.Option(Path("reports/eval"), "--eval-dir", help="folder of <variant>/metrics.json"),
    out: Path = typer.Option(Path("reports/compare"), "--out", help="where compare.md/.html/metrics.json go"),
    selfplay_dir: Path = typer.Option(Path("reports/selfplay"), "--selfplay-dir",
                                      help="folder of <variant>/history.csv for the self-play curves (selfplay.png) "
                                      "and budgets"),
    kg_pool: Path = typer.Option(Path("data/kg/subgraphs.jsonl"), "--kg-pool",
                                 help="the KG pool whose kg_heldout paths give the held-out waypoint coverage "
                                 "(left out when missing)"),
    track: bool = typer.Option(True, "--track/--no-track", help="log the paired comparisons and self-play budgets "
                               "to MLflow"),
    pair: list[str] = typer.Option([], "--pair", help="A:B, two model folders under --eval-dir to compare with "
                                   "the paired tests too (e.g. two seeds); repeat for more"),
    models: str | None = typer.Option(None, "--models", help="comma-separated model folders to compare (default: "
                                      "params.yaml's pipeline.references and pipeline.variants; all: every folder)"),
) -> None:
    """Compare every evaluated variant: tables, paired tests, self-play budgets and curves, a merged metrics file."""
    from contextlib import nullcontext

    from searchplay.eval.report import PairError, compare_variants
    from searchplay.eval.report_tracking import log_comparison
    from searchplay.tracking import start_run

    every = get_params(ctx)
    pairs, chosen = report_models(eval_dir, pair, models, [*every.pipeline.references, *every.pipeline.variants])
    params = every if track else None
    # the run spans the work; it logs only the params its DVC stage depends on (the models it compares), none
    # outside DVC, so the MLflow UI's image cards show the charts rather than hundreds of params above them
    with start_run(params, "report", "compare", only=()) if params is not None else nullcontext():
        try:
            written = compare_variants(eval_dir, out, selfplay_dir, kg_pool, pairs, chosen)
        except FileNotFoundError as exc:  # nothing evaluated: a retry finds the same folder
            print_error("report error", str(exc))
            raise typer.Exit(2) from None
        except ValueError as exc:  # a pair's models (PairError), or an input that does not parse (named)
            print_error("--pair" if isinstance(exc, PairError) else "report error", str(exc))
            raise typer.Exit(2) from None
        if params is not None:
            log_comparison(out)
    console.print("\n".join(str(path) for path in written))
    if params is not None:
        from searchplay.tracking import chart_view_url

        views = (("the evaluations (under `mlflow ui`)", "evaluate"),
                 ("the comparison, glance.png and its paired tests", "report"))
        for what, stage in views:  # an experiment this store does not hold has no view to name
            if url := chart_view_url(params, stage):
                console.print(f"MLflow chart view of {what}: {url}")


def report_models(eval_dir: Path, pair: list[str], models: str | None,
                  default: list[str]) -> tuple[list[tuple[str, str]], list[str] | None]:
    """``--pair`` and ``--models`` read: the pairs and the models to compare (None: every folder). A pair not
    written A:B, or a model named in ``--models`` with no evaluation under ``eval_dir``, exits 2 naming it."""
    try:
        pairs = [parse_pair(text) for text in pair]
    except ValueError as exc:
        print_error("--pair", str(exc))
        raise typer.Exit(2) from None
    if models in (None, "all"):  # the params' own models may be missing: a partial pipeline
        return pairs, None if models == "all" else default
    chosen = _split(models) or default
    if missing := [m for m in chosen if not (eval_dir / m / "metrics.json").is_file()]:
        print_error("--models", f"no {', '.join(f'{m}/metrics.json' for m in missing)} under {eval_dir}")
        raise typer.Exit(2)
    return pairs, chosen


def parse_pair(text: str) -> tuple[str, str]:
    """``"A:B"`` as the model pair (A, B); a ``ValueError`` saying the expected form otherwise.

    >>> parse_pair("kg_wcr_seed1:kg_wcr_seed0")
    ('kg_wcr_seed1', 'kg_wcr_seed0')
    """
    model_a, sep, model_b = text.partition(":")
    if not sep or not model_a.strip() or not model_b.strip() or ":" in model_b:
        raise ValueError(f"{text!r} is not A:B, two model folder names joined by one ':'")
    return model_a.strip(), model_b.strip()


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to the root app."""
    app.command("evaluate")(evaluate_command)
    app.command("report")(report_command)
