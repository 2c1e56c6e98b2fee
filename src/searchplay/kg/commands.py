"""CLI verbs of the kg stage (registered by searchplay.cli)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer

kg_app = typer.Typer(help="Wikidata knowledge-graph stage: dump -> store -> LLM-guided subgraphs", no_args_is_help=True)


@kg_app.command("extract")
def extract_command(
    ctx: typer.Context,
    dump: Path | None = typer.Option(None, "--dump", help="Wikidata JSON dump (.json/.json.gz/.json.bz2)"),
    out: Path | None = typer.Option(None, "--out", help="output folder (default: kg.out_dir)"),
    selector: str | None = typer.Option(None, "--selector", help="relation selector: random|llm"),
    num_seeds: int | None = typer.Option(None, "--num-seeds", help="subgraphs to extract (kg.num_seeds)"),
    seed: int | None = typer.Option(None, "--seed", help="RNG seed (kg.seed)"),
) -> None:
    """Extract 3-7-hop subgraphs (Algorithm 1) into OUT/subgraphs.jsonl and OUT/stats.json."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from searchplay.cliutil import console, exit_code_for, get_params
    from searchplay.io import exclusive_outputs
    from searchplay.kg.pipeline import run_extract
    from searchplay.kg.readers import DumpError
    from searchplay.kg.store import StoreWriteError
    from searchplay.quality import DataQualityError

    if selector not in (None, "random", "llm"):
        console.print(f"[red]--selector must be random or llm, got {selector!r}[/red]")
        raise typer.Exit(2)
    params = get_params(ctx, **{"kg.selector": selector, "kg.num_seeds": num_seeds, "kg.seed": seed})
    out_dir = out or Path(params.kg.out_dir)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as bars:
        def progress(description: str, total: int | None) -> Callable[[int], None]:
            task = bars.add_task(description, total=total)
            return lambda n: bars.advance(task, n)

        try:
            with exclusive_outputs(out_dir, "kg extract"):
                stats = run_extract(params, str(dump) if dump else None, out_dir, progress=progress)
        except (DumpError, StoreWriteError, DataQualityError, FileNotFoundError, ValueError) as exc:
            console.print(f"[red]kg extract failed:[/red] {exc}", soft_wrap=True)
            raise typer.Exit(exit_code_for(exc)) from None
    console.print(f"{stats['subgraphs']} subgraphs -> {out_dir / 'subgraphs.jsonl'}; hops {stats['hop_histogram']}; "
                  f"answer types {stats['answer_types']}; stats -> {out_dir / 'stats.json'}")


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to the root app."""
    app.add_typer(kg_app, name="kg")
