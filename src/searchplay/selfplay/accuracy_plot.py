"""``reports/selfplay/<variant>/accuracy.png``: the Solver's accuracy on each iteration's fresh questions.

One point per iteration whose Proposer wrote questions that reached the Solver (``solver/fresh_accuracy``
of ``history.csv``), with its Wilson 95% interval as error bars and the number of Solver rollouts behind it
written above. Replayed questions are left out: the Solver may have trained on them already. An iteration
without fresh rollouts has no point, and the title says how many were left out. Matplotlib's Agg backend,
written atomically like the other reports (``searchplay.io.atomic_write``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from searchplay.io import atomic_write

ACCURACY_PNG = "accuracy.png"


@dataclass(frozen=True)
class AccuracyPoint:
    """One iteration's fresh-question Solver accuracy with its interval and rollout count."""

    iteration: int
    accuracy: float
    low: float
    high: float
    rollouts: int


def fresh_accuracy_points(history: Sequence[dict[str, float]]) -> list[AccuracyPoint]:
    """The iterations of ``history`` with fresh-question rollouts, as points (rows without any are skipped).

    >>> fresh_accuracy_points([{"iteration": 1.0, "solver/fresh_accuracy": 0.5, "solver/fresh_rollouts": 4.0,
    ...                         "solver/fresh_accuracy_ci_low": 0.15, "solver/fresh_accuracy_ci_high": 0.85},
    ...                        {"iteration": 2.0, "solver/fresh_accuracy": math.nan, "solver/fresh_rollouts": 0.0}])
    [AccuracyPoint(iteration=1, accuracy=0.5, low=0.15, high=0.85, rollouts=4)]
    """
    points = []
    for row in history:
        values = [row.get(f"solver/fresh_{key}", math.nan) for key in
                  ("accuracy", "accuracy_ci_low", "accuracy_ci_high", "rollouts")]
        if all(isinstance(v, int | float) and math.isfinite(v) for v in values) and values[3] > 0:
            points.append(AccuracyPoint(int(row["iteration"]), *(float(v) for v in values[:3]), int(values[3])))
    return points


def draw_fresh_accuracy(path: str | Path, history: Sequence[dict[str, float]], name: str) -> Path:
    """Draw ``fresh_accuracy_points(history)`` for the run ``name`` (its variant) into the PNG ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    path = Path(path)
    points = fresh_accuracy_points(history)
    fig, ax = plt.subplots(figsize=(7, 4))
    if points:
        xs, ys = [p.iteration for p in points], [p.accuracy for p in points]
        errors = [[p.accuracy - p.low for p in points], [p.high - p.accuracy for p in points]]
        ax.errorbar(xs, ys, yerr=errors, fmt="o-", capsize=4, label="fresh questions (Wilson 95% interval)")
        for p in points:
            ax.annotate(f"n={p.rollouts}", (p.iteration, p.high), textcoords="offset points", xytext=(0, 4),
                        ha="center", fontsize=8)
        ax.legend(loc="lower right", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no iteration had Solver rollouts on fresh questions", ha="center", va="center",
                transform=ax.transAxes, fontsize=9)
    iterations = [int(row["iteration"]) for row in history] or [1]
    ax.set_xlim(min(iterations) - 0.5, max(iterations) + 0.5)
    ax.set_ylim(0.0, 1.1)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # one iteration: one tick, "1"
    ax.set_xlabel("self-play iteration")
    ax.set_ylabel("Solver accuracy (share of correct rollouts)")
    left_out = len(history) - len(points)
    note = f"; {left_out} iteration(s) without fresh questions not drawn" if left_out else ""
    ax.set_title(f"{name}: Solver accuracy on each iteration's fresh questions\n"
                 f"error bars: Wilson 95% interval; n: Solver rollouts{note}", fontsize=9)
    fig.tight_layout()
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=100)
    plt.close(fig)
    return path
