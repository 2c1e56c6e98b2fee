"""Reports: Markdown + HTML tables and PNG charts that put a run beside the papers and other variants.

One table model (``Table``) renders to both Markdown and HTML, so the two never disagree. The
papers' numbers come from ``paper_results.yaml`` (copied from the papers' tables, each source naming its
table, metric and judge); a run is set beside the rows of its own model where the papers have them,
and otherwise beside ``evaluate.paper_reference_model``'s rows, labelled as a different model.

Every score of ours is shown with its Wilson 95% interval and n (``20.0 [3.6, 62.4] (n=5)``; bars
carry error bars), so a 5-question score reads as what it is; kg_heldout also shows its majority
baseline (the EM of always giving the training splits' most common answer). Models are ordered
base, warm-start, then the self-play variants. The comparison report also pairs each trained model with
the checkpoint it started from, question by question (exact McNemar, ``searchplay.eval.paired``), and
shows each self-play run's training budget.
"""

from __future__ import annotations

import html
import logging
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from searchplay.colors import model_color
from searchplay.eval.behaviour import (
    BehaviourComparison,
    behaviour_metrics,
    behaviour_note,
    compare_behaviours,
    evaluated_records,
    read_answers,
)
from searchplay.eval.behaviour_chart import behaviour_chart
from searchplay.eval.benchmark_chart import Bar, benchmark_chart
from searchplay.eval.benchmarks import KG_HELDOUT, PAPER_BENCHMARKS
from searchplay.eval.curves import read_histories, selfplay_curves
from searchplay.eval.glance import GLANCE_HEADER, PairTests, glance_rows, pair_tests
from searchplay.eval.glance_chart import glance_chart
from searchplay.eval.paired import (
    HEAD_TO_HEAD,
    POOLED,
    SIGNIFICANCE,
    STARTED_FROM,
    PairedComparison,
    Question,
    compare_models,
    comparison_metrics,
    format_p,
    p_phrase,
    questions_phrase,
    shared_benchmarks,
)
from searchplay.eval.scoring import GROUPS, INTERVAL_SCORES
from searchplay.eval.waypoints import (
    CoverageComparison,
    compare_coverages,
    coverage_metrics,
    coverage_note,
    heldout_waypoints,
    read_coverage,
)
from searchplay.intervals import RULE_VALID, Pooled, first_against_last, pooled_fresh_accuracy, wilson_interval
from searchplay.io import atomic_write, read_json, write_json
from searchplay.model_paths import warmstart_models

log = logging.getLogger(__name__)

PAPER_RESULTS = Path(__file__).with_name("paper_results.yaml")
GROUP_COLUMNS = (("general_qa", "GeneralQA"), ("multihop_qa", "Multi-HopQA"), ("avg", "Avg"))
LABELS = {"nq": "NQ", "triviaqa": "TriviaQA", "popqa": "PopQA", "hotpotqa": "HotpotQA",
          "2wikimultihopqa": "2Wiki", "musique": "MuSiQue", "bamboogle": "Bamboogle",
          "fanoutqa": "FanOutQA (sub-q)", "kg_heldout": "KG held-out"}
METHOD_LABELS = {"base": "base model", "ssp": "+ SSP", "kg_wcr": "+ KG+WCR (Ours)"}
INTERVAL_NOTE = "[low, high]: Wilson 95% interval of the proportion correct; n: questions asked"
OTHER_MODELS_NOTE = ("Other models are compared, with paired tests, in the compare report (`searchplay report`; "
                     "reports/compare/compare.md in the pipeline), whose stage reads every evaluation.")


@dataclass
class Table:
    """A titled table with a caption; cells are strings or numbers (numbers shown with one decimal)."""

    title: str
    header: list[str]
    rows: list[list[Any]]
    caption: str = ""
    notes: list[str] = field(default_factory=list)


BASE_FALLBACK = "models.policy (no self-play checkpoint; --allow-base)"  # run.json model_source of a stand-in

def _cell(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def to_markdown(tables: list[Table], title: str, preamble: list[str]) -> str:
    lines = [f"# {title}", "", *preamble, ""]
    for table in tables:
        lines += [f"## {table.title}", ""]
        if table.caption:
            lines += [table.caption, ""]
        lines.append("| " + " | ".join(table.header) + " |")
        lines.append("|" + "|".join("---" for _ in table.header) + "|")
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
        lines += [""] + [f"- {note}" for note in table.notes] + ([""] if table.notes else [])
    return "\n".join(lines).rstrip() + "\n"


def to_html(tables: list[Table], title: str, preamble: list[str], images: list[str]) -> str:
    esc = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>",
             "<style>body{font-family:sans-serif;max-width:1200px;margin:2em auto}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
             "text-align:right}td:first-child,th:first-child{text-align:left}img{max-width:48%;margin:4px}</style>",
             f"</head><body><h1>{esc(title)}</h1>", *[f"<p>{esc(line)}</p>" for line in preamble]]
    for table in tables:
        parts.append(f"<h2>{esc(table.title)}</h2>")
        if table.caption:
            parts.append(f"<p>{esc(table.caption)}</p>")
        parts.append("<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in table.header) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{esc(_cell(c))}</td>" for c in row) + "</tr>" for row in table.rows]
        parts.append("</table>")
        if table.notes:
            parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in table.notes) + "</ul>")
    parts += [f"<img src='{esc(image)}' alt='{esc(image)}'>" for image in images]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


@cache
def load_paper_results() -> dict[str, Any]:
    import yaml

    return yaml.safe_load(PAPER_RESULTS.read_text())["sources"]


def model_name(model: str) -> str:
    """The bare model name of a hub id or a path (``Qwen/Qwen2.5-7B-Instruct`` -> ``Qwen2.5-7B-Instruct``)."""
    return Path(model.rstrip("/")).name


def paper_rows(model: str, reference_model: str) -> tuple[list[tuple[str, dict]], bool]:
    """(label, scores) rows from every source for ``model``; else the reference model's, and False."""
    wanted = model_name(model).lower()
    same = any(row["model"].lower() == wanted for src in load_paper_results().values() for row in src["rows"])
    target = wanted if same else reference_model.lower()
    rows = [(f"{row['model']} {METHOD_LABELS.get(row['method'], row['method'])} [{key}]", row["scores"])
            for key, src in load_paper_results().items() for row in src["rows"] if row["model"].lower() == target]
    return rows, same


def model_order(names: list[str]) -> list[str]:
    """Base model first, then the warm-start, then the self-play variants by name.

    >>> model_order(["kg_wcr", "warmstart", "ssp", "base"])
    ['base', 'warmstart', 'kg_wcr', 'ssp']
    """
    order = ("base", *warmstart_models())  # the shared warm-start, then the recipes'; then the variants, by name
    return [n for n in order if n in names] + sorted(n for n in names if n not in order)


def read_variant_metrics(eval_root: str | Path, models: Collection[str] | None = None) -> dict[str, dict[str, float]]:
    """``<eval_root>/<variant>/metrics.json`` for every evaluated model (of ``models`` where given), in
    ``model_order``."""
    found = {path.parent.name: path for path in Path(eval_root).glob("*/metrics.json")
             if models is None or path.parent.name in models}
    metrics = {name: read_json(found[name]) for name in model_order(list(found))}
    if shapeless := [str(found[name]) for name, value in metrics.items() if not isinstance(value, dict)]:
        raise ValueError(f"{', '.join(shapeless)}: not a JSON object of metrics (an evaluation writes one)")
    return metrics


def runs_of(models: Collection[str], runs: Iterable[str]) -> list[str]:
    """The self-play runs of ``models``: a model's own and its earlier phases' (``<variant>_phase_<name>``).

    >>> runs_of(["kg_wcr", "two"], ["gdcr", "kg_wcr", "ssp", "two", "two_phase_a"])
    ['kg_wcr', 'two', 'two_phase_a']
    """
    return [run for run in runs if run in models or run.split("_phase_", 1)[0] in models]


def score_interval(metrics: dict[str, float], benchmark: str, score: str) -> tuple[float, float, float, int] | None:
    """(score, interval low, interval high, n) of one benchmark, or None when it has no interval."""
    keys = [f"{benchmark}.{score}", f"{benchmark}.{score}_ci_low", f"{benchmark}.{score}_ci_high", f"{benchmark}.n"]
    if not all(key in metrics for key in keys):
        return None
    value, low, high, n = (metrics[key] for key in keys)
    return value, low, high, int(n)


def score_cell(metrics: dict[str, float], benchmark: str, score: str) -> Any:
    """``20.0 [3.6, 62.4] (n=5)`` where the interval is known; else the bare score (None: not run).

    >>> score_cell({"nq.em": 20.0, "nq.em_ci_low": 3.62, "nq.em_ci_high": 62.4465, "nq.n": 5}, "nq", "em")
    '20.0 [3.6, 62.4] (n=5)'
    """
    found = score_interval(metrics, benchmark, score)
    if found is None:
        return metrics.get(f"{benchmark}.{score}")
    value, low, high, n = found
    return f"{value:.1f} [{low:.1f}, {high:.1f}] (n={n})"


def _score_row(label: str, metrics: dict[str, float], score: str, benchmarks: list[str]) -> list[Any]:
    cells = [score_cell(metrics, name, score) for name in benchmarks]
    return [label, *cells, *(group_cell(metrics, key, score) for key, _ in GROUP_COLUMNS)]


def group_cell(metrics: dict[str, float], group: str, score: str) -> Any:
    """A group average as the papers define it (all its benchmarks), or labelled partial: ``"12.0 (2 of 7)"``."""
    value = metrics.get(f"{group}.{score}")
    count = metrics.get(f"{group}.num_benchmarks")
    size = len(GROUPS[group])
    if value is None or count is None or int(count) >= size:
        return value
    return f"{value:.1f} ({int(count)} of {size})"


def is_partial(metrics: dict[str, float]) -> bool:
    """True when an average covers fewer benchmarks than the papers' (a quick or single-benchmark run)."""
    return any(int(metrics.get(f"{group}.num_benchmarks", len(members))) < len(members)
               for group, members in GROUPS.items() if f"{group}.num_benchmarks" in metrics)


RETRIEVAL_NOTE = ("answer retrieved (retrieval recall, as FlashRAG's): the share of questions where a document "
                  "the model's own searches returned holds a gold answer (normalized, whole tokens); it separates "
                  "finding the answer from reading it out, and a model that never searches scores 0. The reference "
                  "row searches once with each question as the query (same index, same top-k): what copying the "
                  "question into the search tool would find")

PARTIAL_NOTE = ("An average marked '(k of m)' covers only the k benchmarks this run evaluated; the papers "
                "average all m, so such a cell is not comparable with theirs.")


def shared_value(models: dict[str, dict[str, float]], key: str) -> float | None:
    """``key``'s value where every model that has it has the same one (they shared the sample: a DVC run's models
    do); None where no model has it, or where models asked other questions and so differ (an ad-hoc evaluation).

    >>> shared_value({"a": {"x": 1.0}, "b": {}, "c": {"x": 1.0}}, "x"), shared_value({"a": {"x": 1.0}, "b": {"x": 2.0}},
    ...                                                                             "x")
    (1.0, None)
    """
    values = {metrics[key] for metrics in models.values() if key in metrics}
    return values.pop() if len(values) == 1 else None


def majority_baseline(models: dict[str, dict[str, float]]) -> float | None:
    """kg_heldout's majority-baseline EM, which every model's sample shares (``shared_value``)."""
    return shared_value(models, f"{KG_HELDOUT}.majority_baseline_em")


def reading_notes(models: dict[str, dict[str, float]], columns: list[str], score: str) -> list[str]:
    """What a comparison table can and cannot show, from its own intervals: the columns where every model
    scored 0 (they rank nothing; their interval's upper end says how much that rules out), and the columns
    where every model's interval overlaps every other's (no model shown better than another).

    >>> zero = {"nq.em": 0.0, "nq.em_ci_low": 0.0, "nq.em_ci_high": 43.4, "nq.n": 5}
    >>> reading_notes({"a": zero, "b": zero}, ["nq"], "em")[0]
    'NQ: every model scored 0 (n=5; 95% interval up to 43.4): this column ranks nothing.'
    """
    notes = []
    found = {name: {c: score_interval(m, c, score) for c in columns} for name, m in models.items()}
    zero = [c for c in columns if all(f[c] is not None and f[c][0] == 0 for f in found.values())]
    for size in dict.fromkeys(_n_label(models, c) for c in zero):
        group = [c for c in zero if _n_label(models, c) == size]
        highest = max(f[c][2] for f in found.values() for c in group)
        ranks = "this column ranks" if len(group) == 1 else "these columns rank"
        notes.append(f"{', '.join(LABELS.get(c, c) for c in group)}: every model scored 0 ({size}; 95% interval "
                     f"up to {highest:.1f}): {ranks} nothing.")
    for column in columns:
        intervals = [f[column] for f in found.values() if f[column] is not None]
        if column in zero or len(intervals) < 2 or len({value for value, *_ in intervals}) < 2:
            continue
        if max(low for _, low, _, _ in intervals) <= min(high for _, _, high, _ in intervals):
            notes.append(f"{LABELS.get(column, column)}: the scores differ, but every model's interval overlaps every "
                         "other's, so these intervals show no model better than another (the paired tests below "
                         "read KG held-out and every benchmark pooled, not this column alone).")
    return notes


QUESTION_SEARCH_LABEL = "one search with the question itself (reference, top-k)"


def question_search_recalls(models: dict[str, dict[str, float]], columns: list[str]) -> list[float | None]:
    """Per column, the retrieval recall of one search with the question itself, which every model's sample shares
    (``shared_value``: the same index, the same questions); None where no model has it or the samples differ."""
    return [shared_value(models, f"{c}.question_search_recall") for c in columns]


def question_search_row(models: dict[str, dict[str, float]], columns: list[str]) -> list[Any] | None:
    """The retrieval table's reference row, or None when no model has the reference."""
    values = question_search_recalls(models, columns)
    if all(value is None for value in values):
        return None
    return [QUESTION_SEARCH_LABEL, *values, *(None for _ in GROUP_COLUMNS)]


def _baseline_row(value: float, answer: str | None, columns: list[str], score_label: str) -> list[Any]:
    said = f"always {answer!r}" if answer else "always the most common training answer"
    label = f"kg_heldout majority baseline ({said}; EM{', not judged' if score_label != 'EM' else ''})"
    return [label, *(value if name == KG_HELDOUT else None for name in columns), *(None for _ in GROUP_COLUMNS)]


def comparison_table(run_label: str, metrics: dict[str, float], model: str, reference_model: str,
                     judge_name: str) -> Table:
    """Judge accuracy of this run and the papers' rows on the seven benchmarks. Other variants are left to the
    compare report, whose stage depends on every evaluation, so this table never shows a stale neighbour."""
    header = ["run", *(LABELS[b] for b in PAPER_BENCHMARKS), *(label for _, label in GROUP_COLUMNS)]
    rows = [_score_row(run_label, metrics, "judge_acc", list(PAPER_BENCHMARKS))]
    rows_from_papers, same = paper_rows(model, reference_model)
    partial = is_partial(metrics)
    for label, scores in rows_from_papers:  # a partial average is never set beside the papers' 7-benchmark one
        rows.append([label, *(scores.get(b) for b in PAPER_BENCHMARKS), None, None,
                     None if partial else scores.get("avg")])
    sources = load_paper_results()
    notes = [f"{key}: {src['title']}; {src['metric']}; {src['sample']}"
             for key, src in sources.items()]
    if partial:
        notes.append(PARTIAL_NOTE + " The papers' Avg is left out of this table for that reason.")
    if not same:
        notes.insert(0, f"The papers report no numbers for {model_name(model)!r}; the rows shown are "
                        f"{reference_model}'s, a different model, for reference only.")
    notes.append(f"This run's judge: {judge_name}. Paper judges differ (see above); absolute numbers are "
                 "comparable only under the same judge and sample.")
    notes.append(INTERVAL_NOTE + " (the papers' rows: 500 per benchmark, all 125 of Bamboogle)")
    notes.append(OTHER_MODELS_NOTE)
    return Table("Judge accuracy beside the papers (0-100)", header, rows,
                 caption=f"Main score: judge accuracy (judge: {judge_name}); exact match first, "
                         "the judge for the rest.",
                 notes=notes)


def _with_interval(scores: dict[str, float], score: str) -> Any:
    if f"{score}_ci_low" not in scores:
        return scores[score]
    return f"{scores[score]:.1f} [{scores[f'{score}_ci_low']:.1f}, {scores[f'{score}_ci_high']:.1f}]"


def detail_table(per_benchmark: dict[str, dict[str, float]], judge_name: str,
                 majority_answer: str | None = None) -> Table:
    """Every score of one run per benchmark; judge accuracy and EM with their 95% intervals."""
    header = ["benchmark", "n", f"judge acc ({judge_name}) [95% CI]", "judge errors", "EM [95% CI]", "F1", "sub-EM",
              "valid %", "searches/q", "answer retrieved % [95% CI]", "one search with the question %"]
    rows = [[LABELS.get(name, name), int(s["n"]), _with_interval(s, "judge_acc"), int(s["judge_errors"]),
             _with_interval(s, "em"), s["f1"], s["sub_em"], s["valid_rate"], s["mean_searches"],
             _with_interval(s, "retrieval_recall") if "retrieval_recall" in s else None,
             s.get("question_search_recall")]
            for name, s in per_benchmark.items() if s.get("n")]
    notes = ["judge errors count as not correct (fail closed) and are shown beside the score, never dropped",
             INTERVAL_NOTE, RETRIEVAL_NOTE]
    baseline = per_benchmark.get(KG_HELDOUT, {}).get("majority_baseline_em")
    if baseline is not None:
        said = f"always answering {majority_answer!r}" if majority_answer else "always the most common answer"
        notes.append(f"KG held-out majority baseline: {said} (the most common answer of the training splits) "
                     f"scores EM {baseline:.1f}; a KG score means something only above it")
    return Table("Per benchmark", header, rows, notes=notes)


Interval = tuple[float, float] | None


def bar_chart(path: str | Path, title: str, labels: list[str], series: dict[str, list[float | None]],
              ylabel: str, intervals: dict[str, list[Interval]] | None = None,
              baselines: dict[int, tuple[float, str]] | None = None, caption: str = "", rotation: int = 20,
              colors: dict[str, str] | None = None) -> Path:
    """A (grouped) bar chart PNG; ``series`` maps a legend label to one value per x label (None: no bar).

    ``intervals`` gives a series' (low, high) per x label, drawn as error bars (None: no bar);
    ``baselines`` maps an x index to (value, legend label), a dashed line across that group's bars;
    ``caption`` is printed under the axes; ``rotation`` turns the x labels (degrees); ``colors`` maps a
    series to its colour (``searchplay.colors``; default: matplotlib's cycle).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    intervals, baselines = intervals or {}, baselines or {}
    width = 0.8 / max(len(series), 1)
    fig, ax = plt.subplots(figsize=(min(16, max(6, 0.9 * len(labels) * max(1, len(series)) ** 0.5 + 3)), 4.6))
    for index, (name, values) in enumerate(series.items()):
        xs = [i + index * width for i, v in enumerate(values) if v is not None]
        ys = [v for v in values if v is not None]
        ax.bar(xs, ys, width, label=name, **({"color": colors[name]} if colors and name in colors else {}))
        bars = [(i + index * width, v, ci) for i, (v, ci) in enumerate(zip(values, intervals.get(name, []),
                                                                            strict=False)) if v is not None and ci]
        if bars:
            ax.errorbar([x for x, _, _ in bars], [v for _, v, _ in bars], fmt="o", color="black", markersize=2.5,
                        ecolor="black", elinewidth=0.8, capsize=2,
                        yerr=[[max(0.0, v - ci[0]) for _, v, ci in bars], [max(0.0, ci[1] - v) for _, v, ci in bars]])
    shown: set[str] = set()
    for i, (value, label) in baselines.items():
        ax.hlines(value, i - width / 2 - 0.05, i + width * (len(series) - 0.5) + 0.05, colors="black",
                  linestyles="--", linewidth=2, label=label if label not in shown else "_nolegend_", zorder=3)
        shown.add(label)
    ax.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(labels))], labels, rotation=rotation,
                  ha="right" if rotation else "center")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 100)
    ax.set_title(title)
    if len(series) > 1 or baselines:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    if caption:
        fig.text(0.01, 0.01, caption, fontsize=7, ha="left", va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.06 if caption else 0, 1, 1))
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=100)
    plt.close(fig)
    return path


def benchmark_charts(out_dir: Path, run_label: str, per_benchmark: dict[str, dict[str, float]], model: str,
                     reference_model: str) -> list[Path]:
    """One PNG per benchmark: this run's four scores, in its model's colour, beside the papers' judge accuracy
    (hatched bars). Other variants are compared in the compare report."""
    charts = []
    rows_from_papers, _ = paper_rows(model, reference_model)
    own_color = model_color(run_label)
    for name, scores in per_benchmark.items():
        if not scores.get("n"):
            continue
        own = {f"{name}.{key}": value for key, value in scores.items()}
        bars = [Bar(f"{run_label}: judge acc", scores["judge_acc"], own_color, _interval(own, name, "judge_acc")),
                Bar(f"{run_label}: EM", scores["em"], own_color, _interval(own, name, "em")),
                Bar(f"{run_label}: F1", scores["f1"], own_color),
                Bar(f"{run_label}: sub-EM", scores["sub_em"], own_color)]
        bars += [Bar(label, paper[name], "white", paper=True) for label, paper in rows_from_papers if name in paper]
        baseline = ((scores["majority_baseline_em"], "majority baseline (EM)") if "majority_baseline_em" in scores
                    else None)
        charts.append(benchmark_chart(out_dir / "charts" / f"{name}.png",
                                      f"{LABELS.get(name, name)} (n={int(scores['n'])})", bars, baseline))
    return charts


def _interval(metrics: dict[str, float], benchmark: str, score: str) -> Interval:
    found = score_interval(metrics, benchmark, score)
    return (found[1], found[2]) if found else None


def write_run_report(out_dir: str | Path, run: dict[str, Any], per_benchmark: dict[str, dict[str, float]],
                     metrics: dict[str, float], reference_model: str) -> list[Path]:
    """report.md, report.html and charts/<benchmark>.png for one variant's evaluation. They read only this
    evaluation's results (and the papers'), so re-running one evaluation never changes another's report."""
    out_dir = Path(out_dir)
    judge_name = run["judge"]
    run_label = f"this run ({run['variant']})"
    tables = [comparison_table(run_label, metrics, run["base_model"], reference_model, judge_name),
              detail_table(per_benchmark, judge_name, run.get("kg_heldout_majority_answer"))]
    source = run.get("model_source", "")
    stand_in = f" -- NOT a {run['variant']} checkpoint: {source}" if source == BASE_FALLBACK else ""
    preamble = [f"model: {run['model']} (base: {run['base_model']}){stand_in}", f"judge: {judge_name}",
                f"main score: judge accuracy; EM / F1 / sub-EM beside it ({run.get('normalization', 'squad')} "
                "normalization)",
                f"sample: n={run['n']} per benchmark (all when smaller), seed={run['seed']}; ids in sample.json",
                f"decoding: temperature {run['temperature']}, top-{run['top_k']} search, max {run['max_turns']} turns"]
    if run.get("protocol"):
        preamble.append("protocol: " + ", ".join(f"{key} {value}" for key, value in run["protocol"].items()))
    charts = benchmark_charts(out_dir, run["variant"], per_benchmark, run["base_model"], reference_model)
    title = f"Evaluation: {run['variant']}"
    with atomic_write(out_dir / "report.md") as handle:
        handle.write(to_markdown(tables, title, preamble))
    with atomic_write(out_dir / "report.html") as handle:
        handle.write(to_html(tables, title, preamble, [str(c.relative_to(out_dir)) for c in charts]))
    return [out_dir / "report.md", out_dir / "report.html", *charts]


# --- paired comparisons (exact McNemar) and the self-play budget ----------------------------------------------

PAIRED_HEADER = ["comparison (A vs B)", "scope", "n", "both right", "only A right", "only B right", "both wrong",
                 "exact McNemar p"]
PAIRED_INTERVALS_NOTE = ("Wilson intervals of two models overlapping does not mean there is no difference: both "
                         "models answered the same questions, and this paired test, which reads only the questions "
                         "where their correctness differs, is the one to read.")


def read_correctness(eval_dir: str | Path, models: Iterable[str]) -> dict[str, dict[Question, bool]]:
    """Per model, (benchmark, id) -> the judge's verdict (``judge_correct``) of each answer of the evaluation its
    folder reports (``evaluated_records``); a record without a verdict, and a model without predictions, are left
    out."""
    correct = {}
    for model in models:
        answers = {question: bool(record["judge_correct"])
                   for question, record in evaluated_records(eval_dir, model) if "judge_correct" in record}
        if answers:
            correct[model] = answers
    return correct


def scope_label(comparison: PairedComparison | BehaviourComparison, correct: dict[str, dict[Question, bool]]) -> str:
    """``KG held-out``, or ``all benchmarks pooled (8 benchmarks)``."""
    if comparison.scope != POOLED:
        return LABELS.get(comparison.scope, comparison.scope)
    count = len(shared_benchmarks(correct.get(comparison.model_a, {}), correct.get(comparison.model_b, {})))
    return f"all benchmarks pooled ({count} benchmark{'' if count == 1 else 's'})"


def paired_note(comparison: PairedComparison, scope: str, judges: dict[str, str]) -> str:
    """One comparison in plain words, from its numbers.

    >>> paired_note(PairedComparison("kg_wcr", "warmstart", "kg_heldout", 23, 2, 6, 0, 15, 0.03125), "KG held-out", {})
    'kg_wcr vs warmstart on KG held-out: 6 questions turned right, 0 turned wrong, p = 0.031: kg_wcr is better \
(paired, exact McNemar).'
    """
    a, b = comparison.model_a, comparison.model_b
    head = f"{comparison.label} on {scope}: "
    if not comparison.discordant:
        note = (f"{head}no answer differs in correctness ({comparison.both_right} both right, {comparison.both_wrong} "
                f"both wrong of {comparison.n}): there is nothing to compare, p = 1.")
    else:
        counts = (f"{questions_phrase(comparison.only_a)} turned right, {comparison.only_b} turned wrong"
                  if STARTED_FROM.get(a) == b else
                  f"{a} alone right on {questions_phrase(comparison.only_a)}, {b} alone right on {comparison.only_b}")
        verdict = (f"{comparison.better} is better (paired, exact McNemar)" if comparison.better
                   else "no evidence of a difference")
        note = f"{head}{counts}, {p_phrase(comparison.p)}: {verdict}."
    if judges.get(a, "unknown") != judges.get(b, "unknown"):
        note += f" Judged differently ({a}: {judges.get(a)}; {b}: {judges.get(b)}): the pairing mixes two judges."
    return note


def unpaired_notes(correct: dict[str, dict[Question, bool]], judges: dict[str, str]) -> list[str]:
    """Why an evaluated model (``judges``' keys) is missing from the paired comparisons, one note per model:
    it has no scored predictions, or the checkpoint it started from has none."""
    notes = []
    for model in judges:
        start = STARTED_FROM.get(model)
        if model not in correct:
            notes.append(f"{model}: no predictions with a verdict under its predictions/ folder, so it is not paired.")
        elif start and start not in correct:
            notes.append(f"{model}: not set against {start}, the checkpoint it started from, which has no "
                         "predictions here.")
    return notes


def paired_table(comparisons: list[PairedComparison], correct: dict[str, dict[Question, bool]],
                 judges: dict[str, str]) -> Table | None:
    """The "Paired comparisons (exact McNemar)" table with its reading notes; None when nothing was paired.
    ``judges`` maps every evaluated model to its judge."""
    if not comparisons:
        return None
    scopes = [scope_label(comparison, correct) for comparison in comparisons]
    rows = [[c.label, scope, c.n, c.both_right, c.only_a, c.only_b, c.both_wrong, format_p(c.p)]
            for c, scope in zip(comparisons, scopes, strict=True)]
    starts = ", ".join(f"{model} from {start}" for model, start in STARTED_FROM.items() if model in judges)
    heads = ", ".join(f"{a} against {b}" for a, b in HEAD_TO_HEAD)
    caption = (f"Each trained model against the checkpoint it started from ({starts}), and {heads} (the headline "
               "method against the SSP baseline), where both were evaluated; on KG held-out and on every "
               "benchmark both answered, pooled. Only the questions both models answered are paired, by "
               "(benchmark, id); correct = the judge's verdict behind judge accuracy.")
    notes = [paired_note(c, scope, judges) for c, scope in zip(comparisons, scopes, strict=True)]
    notes += unpaired_notes(correct, judges)
    notes += [PAIRED_INTERVALS_NOTE,
              f"only A right: questions A got right and B wrong (only B right: the reverse); p: exact two-sided "
              f"McNemar test, a binomial test of the discordant questions with p = 1/2; a difference is called "
              f"at p < {SIGNIFICANCE}."]
    return Table("Paired comparisons (exact McNemar)", PAIRED_HEADER, rows, caption=caption, notes=notes)


BEHAVIOUR_HEADER = ["comparison (A vs B)", "scope", "n", "answers changed", "A searched more", "A searched less",
                    "searches per question (A / B)", "sign test p", "answer found: only A / only B",
                    "answer found (A / B)", "McNemar p (found)"]


def behaviour_table(comparisons: list[BehaviourComparison], correct: dict[str, dict[Question, bool]]) -> Table | None:
    """The "What training changed" table: answers changed and search counts, paired as the McNemar table is;
    None when nothing was paired."""
    if not comparisons:
        return None
    scopes = [scope_label(c, correct) for c in comparisons]
    rows = [[c.label, scope, c.n, c.answers_changed, c.more_searches, c.fewer_searches,
             f"{c.mean_searches_a:.2f} / {c.mean_searches_b:.2f}", format_p(c.searches_p),
             f"{c.found_only_a} / {c.found_only_b}", f"{c.found_a} / {c.found_b}", format_p(c.found_p)]
            for c, scope in zip(comparisons, scopes, strict=True)]
    caption = ("The same pairs and questions as the paired comparisons, read for what changed rather than for "
               "correctness: a training run whose answers did not change left nothing an evaluation can see.")
    notes = [behaviour_note(c, scope) for c, scope in zip(comparisons, scopes, strict=True)]
    notes.append("answers changed: the final answer differs after the evaluation's normalization (as EM); A "
                 "searched more / less: questions where A made more / fewer search calls than B; sign test p: exact "
                 "two-sided binomial test of more against fewer (ties left out), p = 1/2; answer found: a document "
                 "the model's own searches returned holds a gold answer (the per-question retrieval recall); only "
                 "A / only B: the questions where one model's searches found it and the other's did not, with exact "
                 "McNemar. Finding the answer is not reading it out: the judge-accuracy table says how often it "
                 "was.")
    notes.append("One training run per model: a paired test says this checkpoint differs from its start on these "
                 "questions, not that another seed of the same training would (docs/runs.md has a second seed).")
    return Table("What training changed (paired)", BEHAVIOUR_HEADER, rows, caption=caption, notes=notes)


COVERAGE_HEADER = ["comparison (A vs B)", "n", "A covered more", "A covered less", "mean coverage (A / B)",
                   "sign test p", "bridge entities named (A / B of all)", "A named more / fewer", "bridges sign p"]


def coverage_table(comparisons: list[CoverageComparison]) -> Table | None:
    """The held-out waypoint coverage table (``searchplay.eval.waypoints``); None when nothing was paired."""
    if not comparisons:
        return None
    rows = [[c.label, c.n, c.more, c.less, f"{c.mean_a:.3f} / {c.mean_b:.3f}", format_p(c.p),
             f"{c.bridges_a} / {c.bridges_b} of {c.bridges}", f"{c.more_bridges} / {c.fewer_bridges}",
             format_p(c.bridges_p)] for c in comparisons]
    caption = ("The same pairs on KG held-out, read for the quantity WCR rewards: the share of the question's KG "
               "path (its waypoint titles) that a model's <think> text names, g_i of the KG-paths paper's Eq. 5 "
               "(exact substrings). No model trained on these paths.")
    notes = [coverage_note(c) for c in comparisons]
    notes.append("A covered more / less: questions whose waypoints A's reasoning names more / fewer of than B's; "
                 "sign test p: exact two-sided binomial test of more against less (ties left out), p = 1/2. More "
                 "searches give more <think> spans, so read it beside the search counts above. One training run "
                 "per model, as above.")
    notes.append("Bridge entities: the waypoints after the path's head, i.e. the entities between the one the "
                 "question names and the answer; restating the question covers the head, not them. Counted per "
                 "question and summed; their sign test pairs the questions the same way.")
    return Table("Waypoint coverage on KG held-out (paired)", COVERAGE_HEADER, rows, caption=caption, notes=notes)


# budget name -> (history.csv column summed over iterations, table header)
BUDGET_COLUMNS = {"groups": ("train/groups", "groups trained"), "rollouts": ("solver/rollouts", "Solver rollouts"),
                  "optimizer_steps": ("train/optimizer_steps", "optimizer steps"),
                  "tokens": ("train/tokens", "trained tokens")}
PHASE_A = "_phase_a"  # a two-phase variant's first phase writes its history as <variant>_phase_a


def column_total(rows: list[dict[str, float]], column: str) -> float | None:
    """The sum of a history column over its rows (an empty cell counts 0); None when no row has the column."""
    values = [row[column] for row in rows if column in row]
    return sum(value for value in values if math.isfinite(value)) if values else None


def selfplay_budget(histories: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float | None]]:
    """Per self-play run, its iterations (history rows) and the totals of ``BUDGET_COLUMNS``, by name with a
    Phase A just before its variant."""
    runs = sorted(histories, key=lambda run: (run.removesuffix(PHASE_A), not run.endswith(PHASE_A)))
    return {run: {"iterations": float(len(histories[run])),
                  **{name: column_total(histories[run], column) for name, (column, _) in BUDGET_COLUMNS.items()}}
            for run in runs}


def budget_label(run: str) -> str:
    """``<variant>_phase_a`` -> ``<variant> (Phase A)``; any other run as it is."""
    return f"{run.removesuffix(PHASE_A)} (Phase A)" if run.endswith(PHASE_A) else run


def _count(value: float | None) -> str | None:
    return None if value is None else f"{round(value):,}"


def budget_table(budget: dict[str, dict[str, float | None]]) -> Table | None:
    """"Self-play budget": what each self-play run trained on, summed over its iterations; None without runs."""
    if not budget:
        return None
    header = ["self-play run", "iterations", *(label for _, label in BUDGET_COLUMNS.values())]
    rows = [[budget_label(run), *(_count(totals[name]) for name in ["iterations", *BUDGET_COLUMNS])]
            for run, totals in budget.items()]
    notes = ["Summed over the rows of each run's history.csv (one per iteration): "
             + ", ".join(f"{label} = {column}" for column, label in BUDGET_COLUMNS.values())
             + "; –: the history has no such column."]
    notes += [f"{run} is trained in two phases: its budget from its start is the {budget_label(run + PHASE_A)} "
              f"row and the {run} row together." for run in budget if run + PHASE_A in budget]
    return Table("Self-play budget", header, rows, notes=notes)


def _mean_finite(rows: list[dict[str, float]], column: str) -> float | None:
    values = [row[column] for row in rows if column in row and math.isfinite(row[column])]
    return sum(values) / len(values) if values else None


def _fresh_cell(pooled: Pooled, iterations: str) -> str | None:
    return None if not pooled.n else f"{100 * pooled.rate:.1f}% ({iterations}, n = {pooled.n})"


def _iterations_label(first: int, last: int) -> str:
    return f"it. {first}" if first == last else f"it. {first}-{last}"


def _proposer_trend_cell(first: Pooled, last: Pooled, p: float) -> str | None:
    if not (first.n and last.n):
        return None
    return (f"{100 * first.rate:.1f}% (n = {first.n}) → {100 * last.rate:.1f}% (n = {last.n}), "
            f"p = {p:.3f}")


def learning_table(histories: dict[str, list[dict[str, float]]]) -> Table | None:
    """"Self-play learning": per run, the Solver's accuracy on the fresh questions of all its iterations (with
    its Wilson interval), of its first and its last third (its first and last iteration in a two-iteration run)
    with the one-sided Fisher p (``searchplay.intervals``, the loop's ``trend/*`` test); the Proposer's share of
    questions passing the rule filter in the same two parts, with the same test; and the mean share of its
    accepted KG questions that pass the KG gold check. None without runs."""
    if not histories:
        return None

    def share(value: float | None) -> str | None:
        return None if value is None or not math.isfinite(value) else f"{100 * value:.1f}%"

    rows = []
    for run, history in histories.items():
        overall = pooled_fresh_accuracy(history)
        low, high = wilson_interval(overall.hits, overall.n)
        row: list[Any] = [budget_label(run), len(history),
                          None if not overall.n else f"{100 * overall.rate:.1f}% [{100 * low:.1f}, {100 * high:.1f}] "
                                                     f"(n = {overall.n})"]
        part = len(history) // 3 if len(history) >= 3 else len(history) // 2
        if part:
            first, last, p = first_against_last(history, part)
            proposer = first_against_last(history, part, RULE_VALID)
            row += [_fresh_cell(first, _iterations_label(1, part)),
                    _fresh_cell(last, _iterations_label(len(history) - part + 1, len(history))),
                    None if math.isnan(p) else f"{p:.3f}", _proposer_trend_cell(*proposer)]
        else:
            row += [None, None, None, None]
        rows.append([*row, share(_mean_finite(history, "filter/gold_checked_rate"))])
    header = ["self-play run", "iterations", "fresh accuracy, all iterations", "first part", "last part",
              "p (last > first)", "Proposer questions passing the rule filter: first → last part (p)",
              "accepted KG questions gold-checked"]
    notes = ["Fresh accuracy: the share of correct Solver rollouts on the fresh questions of those iterations "
             "(the Proposer's, or a template control's; replayed ones left out); [low, high]: Wilson 95% "
             "interval; n: rollouts. First and last part: the first and the last third of the iterations (it.: "
             "which), a run of two iterations its first and its second; one iteration has no parts. p: one-sided "
             "Fisher exact test on the pooled rollouts; the rollouts of one question are not independent, so it "
             "is optimistic.",
             "Proposer questions passing the rule filter: the share of the Proposer's questions in the same two "
             "parts that passed SSP's rule filter (filter/valid_rate_rule over proposer/proposals, resampled ones "
             "included), with the same one-sided Fisher test: what the Proposer's reward pays for first, since a "
             "rejected question earns 0; –: one iteration, or a Proposer without the rule filter.",
             "Gold-checked: the mean over iterations of filter/gold_checked_rate, the share of accepted questions "
             "that name their path's head entity and mention its last relation (docs/decisions/selfplay.md); "
             "–: not a KG Proposer, or no column in this run's history."]
    return Table("Self-play learning", header, rows, notes=notes)


def hops_table(variants: dict[str, dict[str, float]]) -> Table | None:
    """"KG held-out by hop count": each model's judge accuracy per path length, with n; None without the keys."""
    prefix = f"{KG_HELDOUT}.hops_"
    hops = sorted({int(key.removeprefix(prefix).removesuffix("_n")) for m in variants.values() for key in m
                   if key.startswith(prefix) and key.endswith("_n")})
    if not hops:
        return None
    counts = [sorted({int(m[f"{prefix}{h}_n"]) for m in variants.values() if f"{prefix}{h}_n" in m}) for h in hops]
    header = ["model", *(f"{h} hops (n={n[0] if n[0] == n[-1] else f'{n[0]}-{n[-1]}'})"  # 3-5: samples differed
                         for h, n in zip(hops, counts, strict=True))]
    rows = [[name, *(m.get(f"{KG_HELDOUT}.hops_{h}_judge_acc") for h in hops)] for name, m in variants.items()]
    return Table("KG held-out by hop count (judge accuracy, 0-100)", header, rows,
                 notes=["The hop count is the length of the question's path; a question names none of its "
                        "waypoints, so each hop is one more search to chain."])


def budget_metrics(budget: dict[str, dict[str, float | None]]) -> dict[str, float]:
    """Flat ``budget.<run>.<name>`` entries; a column the history lacks is left out."""
    return {f"budget.{run}.{name}": value for run, totals in budget.items()
            for name, value in totals.items() if value is not None}


def score_tables(variants: dict[str, dict[str, float]], columns: list[str], baseline: float | None,
                 answer: str | None) -> list[Table]:
    """One table per score (judge accuracy first), each model a row with its intervals and reading notes."""
    tables = []
    scores = [("judge_acc", "Judge accuracy"), ("em", "EM"), ("f1", "F1"), ("sub_em", "sub-EM")]
    retrieval = any(f"{b}.retrieval_recall" in m for m in variants.values() for b in columns)
    if retrieval:
        scores.append(("retrieval_recall", "Answer retrieved by the model's searches"))
    for score, label in scores:
        header = ["model", *(LABELS.get(b, b) for b in columns), *(g for _, g in GROUP_COLUMNS)]
        rows = [_score_row(name, m, score, columns) for name, m in variants.items()]
        if baseline is not None and score in ("judge_acc", "em"):
            rows.append(_baseline_row(baseline, answer, columns, label))
        notes = [INTERVAL_NOTE, *reading_notes(variants, columns, score)] if score in INTERVAL_SCORES else []
        if score == "retrieval_recall":
            reference = question_search_row(variants, columns)
            rows += [reference] if reference else []
            notes.append(RETRIEVAL_NOTE)
        if any(is_partial(m) for m in variants.values()):
            notes.append(PARTIAL_NOTE)
        tables.append(Table(f"{label} (0-100)", header, rows, notes=notes))
    return tables


def glance_table(pairs: list[PairTests], scope: str, tests_in_report: int) -> Table | None:
    """"At a glance": each pair's four paired tests in one row (``searchplay.eval.glance``), and how many tests
    the report runs in all (``tests_in_report``: none is corrected for the others); None when nothing was
    paired."""
    if not pairs:
        return None
    where = LABELS.get(scope, "all benchmarks pooled")
    caption = (f"Each trained model against the checkpoint it started from, and the head-to-head pairs, on {where}: "
               "the same questions read four ways. Each cell counts the questions where A did more or less than "
               "B, with the exact two-sided test of those counts. Answer found: a document the model's own "
               "searches returned holds a gold answer, whether or not the model then answered with it. Path "
               "coverage is the share of the question's KG path that the reasoning names (KG-paths Eq. 5), the "
               "quantity WCR pays for. The sections below give each test in full, on the benchmarks pooled too.")
    shown = sum(test is not None for pair in pairs for test in pair.tests.values())
    notes = ["One training run per model: a difference says this checkpoint differs from its start on these "
             "questions, not that another seed of the same training would.",
             f"No correction for multiple tests: each p is read alone at p < {SIGNIFICANCE}. This table holds "
             f"{shown} tests and the paired sections below {tests_in_report}; were nothing different, about 1 in "
             f"{round(1 / SIGNIFICANCE)} would still fall below {SIGNIFICANCE} ({tests_in_report * SIGNIFICANCE:.1f} "
             f"of the {tests_in_report}), so a lone p just under {SIGNIFICANCE} is weak evidence."]
    return Table(f"At a glance: paired tests on {where}", GLANCE_HEADER, glance_rows(pairs), caption=caption,
                 notes=notes)


def paired_test_count(comparisons: list[PairedComparison], behaviours: list[BehaviourComparison],
                      coverages: list[CoverageComparison]) -> int:
    """How many exact tests the paired sections run: the p-values among their metrics."""
    keys = [*(key for c in comparisons for key in comparison_metrics(c)),
            *(key for b in behaviours for key in behaviour_metrics(b)),
            *(key for c in coverages for key in coverage_metrics(c))]
    return sum(key.endswith(("_p", ".p")) for key in keys)


def _compared_models(eval_dir: str | Path, models: Collection[str] | None) -> dict[str, dict[str, float]]:
    """``read_variant_metrics``, saying which folders under ``eval_dir`` it left out."""
    variants = read_variant_metrics(eval_dir, models)
    if models is not None and (left := sorted({p.parent.name for p in Path(eval_dir).glob("*/metrics.json")}
                                              - set(variants))):
        log.info("left out of the comparison, not models of these params: %s", ", ".join(left))
    return variants


def _compared_histories(selfplay_dir: str | Path | None, models: Collection[str] | None) -> dict[str, list]:
    """The self-play histories of ``models`` (every one where None) under ``selfplay_dir``."""
    histories = read_histories(selfplay_dir) if selfplay_dir else {}
    return histories if models is None else {run: histories[run] for run in runs_of(models, histories)}


def _with_pair_models(models: Collection[str] | None, pairs: Sequence[tuple[str, str]]) -> list[str] | None:
    """``models`` and the models of ``pairs``: a pair asked for is compared whether or not the params name them."""
    return None if models is None else [*models, *(m for pair in pairs for m in pair if m not in models)]


def compare_variants(eval_dir: str | Path, out: str | Path, selfplay_dir: str | Path | None = None,
                     kg_pool: str | Path | None = None, pairs: Sequence[tuple[str, str]] = (),
                     models: Collection[str] | None = None) -> list[Path]:
    """compare.md/.html/metrics.json and a grouped bar chart over every variant under ``eval_dir`` (of ``models``
    and their self-play runs where given); with ``selfplay_dir``, also the variants' self-play curves
    (``selfplay.png``) and training budgets from their history.csv; with ``kg_pool`` (``subgraphs.jsonl``), the
    held-out waypoint coverage. Right after the judge-accuracy table come the paired comparisons (exact McNemar
    on each model's predictions) and the self-play budget. ``pairs`` adds (A, B) comparisons (e.g. two seeds)."""
    variants = _compared_models(eval_dir, _with_pair_models(models, pairs))
    if not variants:
        raise FileNotFoundError(f"no <variant>/metrics.json under {eval_dir}; run `searchplay evaluate` first")
    check_pairs(pairs, variants, eval_dir)
    out = Path(out)
    judges = {name: _judge_of(Path(eval_dir) / name) for name in variants}
    benchmarks = [b for b in PAPER_BENCHMARKS if any(f"{b}.judge_acc" in m for m in variants.values())]
    extra = sorted({k.split(".")[0] for m in variants.values() for k in m} - set(PAPER_BENCHMARKS)
                   - {key for key, _ in GROUP_COLUMNS})
    columns = benchmarks + extra
    baseline = majority_baseline(variants)
    answer = next((a for a in (_run_of(Path(eval_dir) / n).get("kg_heldout_majority_answer") for n in variants)
                   if a), None)
    tables = score_tables(variants, columns, baseline, answer)
    tables[0].notes += [f"{name}: judge {judge}" for name, judge in judges.items()]
    correct = read_correctness(eval_dir, variants)
    comparisons = compare_models(correct, KG_HELDOUT, pairs)
    behaviours = compare_behaviours(read_answers(eval_dir, variants), KG_HELDOUT, pairs)
    coverages = (compare_coverages(read_coverage(eval_dir, variants, heldout_waypoints(kg_pool)), pairs)
                 if kg_pool and Path(kg_pool).exists() else [])
    histories = _compared_histories(selfplay_dir, models)
    budget = selfplay_budget(histories)
    learning = learning_table(histories)
    tables[1:1] = [table for table in (paired_table(comparisons, correct, judges), behaviour_table(behaviours, correct),
                                        coverage_table(coverages), budget_table(budget), learning,
                                        hops_table(variants)) if table]
    scope = KG_HELDOUT if any(b.scope == KG_HELDOUT for b in behaviours) else POOLED
    pairs = pair_tests(comparisons, behaviours, coverages, scope)
    glance = glance_table(pairs, scope, paired_test_count(comparisons, behaviours, coverages))
    tables[:0] = [glance] if glance else []
    preamble = [f"models: {', '.join(variants)} (base = models.policy, warmstart = the warm-start checkpoint, "
                "the rest = each recipe's warm-start, or each variant after self-play)",
                f"judges: {', '.join(sorted(set(judges.values())))}"]
    charts = [glance_chart(out / "glance.png", pairs, LABELS.get(scope, "all benchmarks pooled")),  # a DVC plot
              compare_chart(out / "compare.png", variants, columns, baseline)]
    if any(f"{b}.retrieval_recall" in m for m in variants.values() for b in columns):
        charts.append(compare_chart(out / "retrieval.png", variants, columns, None, "retrieval_recall"))
    charts.append(behaviour_chart(out / "behaviour.png", [b for b in behaviours if b.scope == scope],  # a DVC plot
                                  LABELS.get(scope, "all benchmarks pooled")))
    if histories:
        charts.append(selfplay_curves(out / "selfplay.png", histories))
    images = "".join(f"\n![{chart.stem}]({chart.name})\n" for chart in charts)
    with atomic_write(out / "compare.md") as handle:
        handle.write(to_markdown(tables, "Models compared", preamble) + images)
    with atomic_write(out / "compare.html") as handle:
        handle.write(to_html(tables, "Models compared", preamble, [chart.name for chart in charts]))
    merged = {f"{name}.{key}": value for name, m in variants.items() for key, value in m.items()}
    merged |= {key: value for comparison in comparisons for key, value in comparison_metrics(comparison).items()}
    merged |= {key: value for behaviour in behaviours for key, value in behaviour_metrics(behaviour).items()}
    merged |= {key: value for coverage in coverages for key, value in coverage_metrics(coverage).items()}
    write_json(out / "metrics.json", merged | budget_metrics(budget))
    return [out / "compare.md", out / "compare.html", out / "metrics.json", *charts]


class PairError(ValueError):
    """A ``--pair`` that cannot be compared; the message names the pair."""


def check_pairs(pairs: Sequence[tuple[str, str]], variants: Mapping[str, object], eval_dir: str | Path) -> None:
    """A ``PairError`` naming the first pair that compares a model with itself or names one not evaluated
    under ``eval_dir``, so a typo is not a comparison silently left out."""
    for model_a, model_b in pairs:
        if model_a == model_b:
            raise PairError(f"pair {model_a}:{model_b} compares a model with itself")
        for model in (model_a, model_b):
            if model not in variants:
                raise PairError(f"pair {model_a}:{model_b}: no {model}/metrics.json under {eval_dir} "
                                f"(evaluated: {', '.join(variants)})")


def _run_of(variant_dir: Path) -> dict[str, Any]:
    run_file = variant_dir / "run.json"
    return read_json(run_file) if run_file.exists() else {}


def _judge_of(variant_dir: Path) -> str:
    return _run_of(variant_dir).get("judge", "unknown")


def _n_label(models: dict[str, dict[str, float]], benchmark: str) -> str:
    """``n=5``, or ``n=4-5`` when the models were asked different numbers of questions."""
    sizes = sorted({int(m[f"{benchmark}.n"]) for m in models.values() if f"{benchmark}.n" in m})
    if not sizes:
        return "n=?"
    return f"n={sizes[0]}" if len(sizes) == 1 else f"n={sizes[0]}-{sizes[-1]}"


COMPARE_CHARTS = {"judge_acc": ("Judge accuracy by model (95% intervals)", "judge accuracy (0-100)"),
                  "retrieval_recall": ("Questions whose searches retrieved a gold answer, by model (95% intervals)",
                                       "answer retrieved (% of questions)")}


def compare_chart(path: Path, models: dict[str, dict[str, float]], columns: list[str],
                  baseline: float | None, score: str = "judge_acc") -> Path:
    """compare.png: ``score`` (judge accuracy; or retrieval recall for retrieval.png) per benchmark and model
    with Wilson 95% error bars, n under each benchmark, and the kg_heldout majority baseline as a dashed line."""
    counts = sorted({int(m["avg.num_benchmarks"]) for m in models.values() if "avg.num_benchmarks" in m})
    covered = "paper benchmarks" if counts in ([], [len(PAPER_BENCHMARKS)]) else \
        f"{'/'.join(map(str, counts))} of {len(PAPER_BENCHMARKS)} paper benchmarks"
    labels = [f"{LABELS.get(b, b)}\n{_n_label(models, b)}" for b in columns] + [f"Avg\n({covered})"]
    series = {name: [m.get(f"{b}.{score}") for b in columns] + [m.get(f"avg.{score}")]
              for name, m in models.items()}
    intervals = {name: [_interval(m, b, score) for b in columns] + [None] for name, m in models.items()}
    baselines = ({columns.index(KG_HELDOUT): (baseline, "kg_heldout majority baseline (EM)")}
                 if baseline is not None and KG_HELDOUT in columns else None)
    if score == "retrieval_recall":
        baselines = {i: (value, "one search with the question itself") for i, value
                     in enumerate(question_search_recalls(models, columns)) if value is not None}
    sizes = ", ".join(f"{LABELS.get(b, b)} {_n_label(models, b)}" for b in columns)
    caption = (f"Error bars: Wilson 95% interval over n questions per benchmark ({sizes}); "
               "Avg: unweighted mean of the paper benchmarks, no interval.")
    title, axis = COMPARE_CHARTS[score]
    return bar_chart(path, title, labels, series, axis, intervals=intervals, baselines=baselines, caption=caption,
                     rotation=0, colors={name: model_color(name) for name in models})
