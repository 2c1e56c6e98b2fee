"""Held-out checks during and after self-play: a small evaluation curve, and the GDCR paper's RQ1.

``heldout_curve`` (every ``selfplay.eval_every`` iterations): the Solver answers the ``kg_heldout``
template questions and a few questions of one benchmark, greedily, judged like the Solver's own rollouts;
the scores become ``heldout/*`` columns of the history and MLflow curves.

RQ1: is graph distance a valid progress prior? (GDCR paper §4.2, Eqs. 16-17, Table 1.)

After self-play, the trained Solver answers the template question of every ``kg_heldout`` subgraph once,
greedily. Each non-final step's distance d_t is the smallest graph distance to the answer among the
entities it newly retrieved or cited (Eq. 16); d_t^best is its running minimum (Eq. 17). The table
compares correct with incorrect trajectories per step, and the point-biserial correlation of every step's
GDCR score with its trajectory's correctness stands beside the paper's r = 0.334. Written to
``reports/selfplay/<variant>/rq1.{csv,md,png}``; variants opt in with ``Variant.heldout_analysis``.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from searchplay.agent.prompts import solver_messages
from searchplay.io import atomic_write, write_json
from searchplay.rewards.gdcr import (
    contribution_scores,
    gdcr_trace,
    graph_distances,
    history_best,
    step_distances,
    subgraph_aliases,
    subgraph_triples,
)
from searchplay.selfplay.turns import trajectory_steps
from searchplay.templates import template_question

log = logging.getLogger(__name__)

PAPER_CORRELATION = 0.334  # GDCR paper §4.2: per-step GDCR vs final-answer correctness, p < 1e-179


def heldout_records(pool_path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The ``kg_heldout`` subgraphs of the pool, in file order (no stage trains on them)."""
    records = []
    with Path(pool_path).open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip() and (record := json.loads(line)).get("split") == "kg_heldout":
                records.append(record)
    return records[:limit] if limit else records


def record_golds(record: dict[str, Any]) -> list[str]:
    """Every answer the KG gives to a subgraph's question (``answers``), or its one ``answer`` in older pools."""
    return [str(a) for a in record.get("answers") or [record["answer"]]]


def benchmark_splits(data_dir: str | Path, name: str) -> list[Path]:
    """The files ``benchmark_questions`` reads the first of: the benchmark's test split, else its dev split."""
    return [Path(data_dir) / name / f"{split}.jsonl" for split in ("test", "dev")]


def benchmark_questions(data_dir: str | Path, name: str, n: int, seed: int) -> list[tuple[str, list[str]]]:
    """(question, golden answers) of ``n`` questions of a FlashRAG-format benchmark file, drawn as evaluation
    draws them (``sorted(Random(seed).sample(range(N), n))``); its test split, else dev."""
    import random

    from searchplay.io import jsonl_records

    folder = Path(data_dir) / name
    path = next((split for split in benchmark_splits(data_dir, name) if split.is_file()), None)
    if path is None:
        raise FileNotFoundError(f"selfplay.eval_benchmark {name!r}: no test.jsonl or dev.jsonl under {folder}; "
                                "set evaluate.data_dir or another selfplay.eval_benchmark")
    rows = [row for _, row in jsonl_records(path) if isinstance(row, dict) and row.get("question")]
    picked = sorted(random.Random(seed).sample(range(len(rows)), min(n, len(rows))))
    return [(str(rows[i]["question"]), [str(a) for a in rows[i].get("golden_answers") or []]) for i in picked]


def heldout_curve(runtime: Any, params: Any, pool_path: str | Path) -> dict[str, float]:
    """A small held-out evaluation of the current policy: kg_heldout and one benchmark, greedy,
    with the self-play judge; ``heldout/<name>_acc`` in 0-1 and the question counts."""
    from dataclasses import replace

    cfg = params.selfplay
    held_out = heldout_records(pool_path, cfg.eval_kg_n)
    sets = {"kg_heldout": [(template_question(r), record_golds(r)) for r in held_out],
            cfg.eval_benchmark: benchmark_questions(params.evaluate.data_dir, cfg.eval_benchmark, cfg.eval_n,
                                                    params.evaluate.seed)}
    items = [(name, question, golds) for name, pairs in sets.items() for question, golds in pairs]
    if not items:
        return {}
    config = replace(runtime.solver_config, temperature=0.0)
    trajectories = runtime.rollouts([runtime.encode(solver_messages(q, config.question_format)) for _, q, _ in items],
                                    "solver", config)
    verdicts = runtime.judge.judge_many([(q, t.answer, golds) for (_, q, golds), t in zip(items, trajectories,
                                                                                          strict=True)])
    scores: dict[str, float] = {}
    for name in sets:
        correct = [bool(v.correct and v.method != "error" and t.answer is not None)
                   for (owner, _, _), t, v in zip(items, trajectories, verdicts, strict=True) if owner == name]
        if correct:
            scores[f"heldout/{name}_acc"] = sum(correct) / len(correct)
            scores[f"heldout/{name}_n"] = float(len(correct))
    return scores


def trajectory_progress(trajectory: Any, record: dict[str, Any], k: float = 2.0) -> dict[str, list[Any]]:
    """Per step: GDCR r_{t,g}, d_t (Eq. 16; None when no graph entity was touched) and d_t^best (Eq. 17)."""
    triples, answer = subgraph_triples(record), str(record["answer"])
    trace = gdcr_trace(trajectory_steps(trajectory), contribution_scores(triples, answer, k), subgraph_aliases(record))
    distances = step_distances(trace, graph_distances(triples, answer))
    return {"gdcr": [step.reward for step in trace], "d": distances, "d_best": history_best(distances)}


def progress_table(progress: list[dict[str, list[Any]]], correct: list[bool]) -> list[dict[str, Any]]:
    """GDCR Table 1: mean history-best distance per non-final step, for correct and incorrect trajectories.

    Step t averages the trajectories that are still running at t (have a non-final step t) and have touched
    a graph entity by then; ``n_*`` says how many that is.
    """
    longest = max((len(p["d_best"]) - 1 for p in progress), default=0)
    rows = []
    for t in range(longest):
        row: dict[str, Any] = {"step": t + 1}
        for label, wanted in (("correct", True), ("incorrect", False)):
            values = [p["d_best"][t] for p, c in zip(progress, correct, strict=True)
                      if c is wanted and t < len(p["d_best"]) - 1 and p["d_best"][t] is not None]
            row[f"d_best_{label}"] = sum(values) / len(values) if values else None
            row[f"n_{label}"] = len(values)
        both = row["d_best_correct"], row["d_best_incorrect"]
        row["diff"] = both[0] - both[1] if None not in both else None
        rows.append(row)
    return rows


def step_correlation(progress: list[dict[str, list[Any]]], correct: list[bool]) -> tuple[float, int]:
    """Pearson (point-biserial) r between every step's GDCR and its trajectory's correctness, and the step count.

    NaN when either side has no spread (e.g. no correct trajectory).
    """
    scores = [r for p in progress for r in p["gdcr"]]
    outcomes = [float(c) for p, c in zip(progress, correct, strict=True) for _ in p["gdcr"]]
    if len(scores) < 3 or len(set(scores)) < 2 or len(set(outcomes)) < 2:
        return math.nan, len(scores)
    from scipy.stats import pearsonr

    return float(pearsonr(scores, outcomes).statistic), len(scores)


def run_heldout_analysis(runtime: Any, params: Any, out_dir: str | Path, pool_path: str | Path) -> dict[str, float]:
    """Greedy Solver rollouts on the held-out subgraphs, scored by the judge; writes rq1.{csv,md,png}."""
    from dataclasses import replace

    records = heldout_records(pool_path, params.selfplay.eval_kg_n)
    if not records:
        log.warning("no kg_heldout subgraphs in %s: the RQ1 analysis is skipped", pool_path)
        return {}
    questions = [template_question(r) for r in records]
    config = replace(runtime.solver_config, temperature=0.0)
    trajectories = runtime.rollouts([runtime.encode(solver_messages(q, config.question_format)) for q in questions],
                                    "solver", config)
    verdicts = runtime.judge.judge_many([(q, t.answer, record_golds(r))
                                         for q, t, r in zip(questions, trajectories, records, strict=True)])
    correct = [bool(v.correct and v.method != "error" and t.answer is not None)
               for v, t in zip(verdicts, trajectories, strict=True)]
    progress = [trajectory_progress(t, r, params.gdcr.k) for t, r in zip(trajectories, records, strict=True)]
    rows = progress_table(progress, correct)
    r, steps = step_correlation(progress, correct)
    summary = {"rq1/questions": float(len(records)), "rq1/accuracy": sum(correct) / len(correct),
               "rq1/steps": float(steps), "rq1/gdcr_correctness_r": r}
    write_rq1(Path(out_dir), rows, summary, [{"id": rec["id"], "question": q, "answer": rec["answer"],
                                              "prediction": t.answer, "correct": c, **p}
                                             for rec, q, t, c, p in zip(records, questions, trajectories, correct,
                                                                        progress, strict=True)])
    return summary


def _cell(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def write_rq1(out_dir: Path, rows: list[dict[str, Any]], summary: dict[str, float],
              trajectories: list[dict[str, Any]]) -> None:
    """rq1.csv (the table), rq1.md (table, correlation, what it can show), rq1.png, rq1_trajectories.jsonl."""
    out_dir.mkdir(parents=True, exist_ok=True)
    columns = ["step", "d_best_correct", "n_correct", "d_best_incorrect", "n_incorrect", "diff"]
    with atomic_write(out_dir / "rq1.csv") as handle:
        handle.write(",".join(columns) + "\n")
        handle.writelines(",".join("" if row[c] is None else str(row[c]) for c in columns) + "\n" for row in rows)
    with atomic_write(out_dir / "rq1_trajectories.jsonl") as handle:
        handle.writelines(json.dumps(t, ensure_ascii=False) + "\n" for t in trajectories)
    write_json(out_dir / "rq1.json", summary)
    n, correct = int(summary["rq1/questions"]), round(summary["rq1/accuracy"] * summary["rq1/questions"])
    lines = ["# GDCR RQ1: graph progress vs success on held-out subgraphs", "",
             f"{n} kg_heldout template questions, one greedy Solver rollout each after self-play; {correct} correct.",
             "History-best distance to the answer node per non-final step (GDCR Eqs. 16-17; lower is closer; "
             "the paper's Table 1 has 1.84 vs 2.82 at step 1).", "",
             "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row[c]) for c in columns) + " |" for row in rows]
    lines += ["", f"Point-biserial r between a step's GDCR and its trajectory's correctness: "
                  f"{_cell(summary['rq1/gdcr_correctness_r'])} over {int(summary['rq1/steps'])} steps "
                  f"(paper: {PAPER_CORRELATION}).",
              "With this few questions a row rests on a handful of trajectories (n columns) and a missing cell means "
              "no trajectory of that outcome reached the step: read it as a check that the analysis runs on real "
              "trajectories, not as evidence for or against the paper's claim."]
    with atomic_write(out_dir / "rq1.md") as handle:
        handle.write("\n".join(lines) + "\n")
    _plot(out_dir / "rq1.png", rows)


def _plot(path: Path, rows: list[dict[str, Any]]) -> None:
    import matplotlib.pyplot as plt

    fig = rq1_figure(rows)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def rq1_figure(rows: list[dict[str, Any]]) -> Any:
    """Mean history-best distance per step, correct against incorrect, each point labelled with its n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for label, style, offset in (("correct", "o-", (4, 6)), ("incorrect", "s--", (4, -12))):
        points = [(row["step"], row[f"d_best_{label}"], row[f"n_{label}"]) for row in rows
                  if row[f"d_best_{label}"] is not None]
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], style, label=f"{label} trajectories")
            for step, distance, count in points:
                ax.annotate(f"n={count}", (step, distance), textcoords="offset points", xytext=offset, fontsize=7)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # one step: one tick
    ax.margins(x=0.12, y=0.15)  # room for the n labels of the outermost points
    ax.set_xlabel("step (non-final search turn)")
    ax.set_ylabel("history-best distance to answer (hops)")
    ax.set_title("GDCR RQ1 on kg_heldout (n = trajectories at that step)")
    if not rows:
        ax.text(0.5, 0.5, "no non-final steps", ha="center", va="center", transform=ax.transAxes)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return fig
