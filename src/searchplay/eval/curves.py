"""Self-play learning curves as a PNG: one panel per concern, one line per variant (no browser, no CDN).

``dvc plots`` renders the same ``history.csv`` columns as HTML (in a browser, with the Vega-inline template
that ``searchplay assets`` writes); this chart is what the comparison report embeds. A point whose value is
undefined in an iteration (e.g. the Spearman correlation when every rollout was wrong) is not drawn,
and the panel says how many such points it left out, so a line never disappears silently.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from searchplay.colors import model_color
from searchplay.io import atomic_write

# (history.csv column, panel title, y-axis label, integer counts): quantities that mean the same for every
# variant (SSP App. B.1, the KG paper's Fig. 4, GDCR). The Solver's reward is not among them: WCR adds
# coverage credit and GDCR step rewards, so rewards of different variants are not on one scale.
PANELS = (
    ("solver/fresh_accuracy", "Solver accuracy on this iteration's new questions", "share of rollouts correct", False),
    ("solver/accuracy", "Solver correctness c_i (all questions solved)", "share of rollouts correct", False),
    ("filter/valid_rate_rule", "Proposer questions passing the rule filter", "share of proposals", False),
    ("filter/gold_checked_rate", "accepted KG questions naming the path's head\nand its last relation",
     "share of accepted questions", False),
    ("train/groups_nonzero_advantage", "Solver groups with a learning signal", "groups", True),
    ("train/bf16_changed_share", "weights whose value moved since the start, in\nthe rollout dtype (bf16 where "
     "native, else fp32)", "share of parameters", False),
    ("coverage/spearman_rho", "Spearman(coverage, correctness)", "rho", False),
    ("gdcr/step_reward_mean", "GDCR reward per step (step-level variants)", "reward per step", False),
)
MARKERS = "osD^vP*X"  # one per variant, so overlapping lines stay apart
SHARES = frozenset(column for column, _, ylabel, _ in PANELS if ylabel.startswith("share of"))  # between 0 and 1


def read_histories(selfplay_dir: str | Path) -> dict[str, list[dict[str, float]]]:
    """``variant -> rows`` of every ``<selfplay_dir>/<variant>/history.csv``, values as floats (NaN if empty)."""
    histories = {}
    for path in sorted(Path(selfplay_dir).glob("*/history.csv")):
        with path.open(encoding="utf-8") as handle:
            rows = [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(handle)]
        if rows:
            histories[path.parent.name] = rows
    return histories


def _number(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "") else math.nan
    except ValueError:
        return math.nan


def flat_range(value: float, share: bool, integer: bool) -> tuple[float, float] | None:
    """The y range of a panel whose points all equal ``value``, where matplotlib's own spreads hundredths around
    it (ticks that read as noise): a share its whole 0-1, a count the whole numbers around it; None keeps
    matplotlib's."""
    if share:
        return -0.05, 1.05
    if integer:
        return min(value, 0.0) - 0.5, value + 1.5
    return None


def selfplay_curves(path: str | Path, histories: dict[str, list[dict[str, float]]]) -> Path:
    """A 2 x 4 grid of the ``PANELS`` columns against ``iteration``, one line per variant, as a PNG."""
    fig = curves_figure(histories)  # selects the Agg backend before pyplot is imported here
    import matplotlib.pyplot as plt

    path = Path(path)
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=100)
    plt.close(fig)
    return path


def curves_figure(histories: dict[str, list[dict[str, float]]]) -> Any:
    """The figure ``selfplay_curves`` writes (matplotlib's Agg backend; the caller closes it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(2, 4, figsize=(16, 6.8))
    markers = {variant: MARKERS[k % len(MARKERS)] for k, variant in enumerate(histories)}
    offsets = {variant: 0.06 * (k - (len(histories) - 1) / 2) for k, variant in enumerate(histories)}
    iterations = [int(row["iteration"]) for rows in histories.values() for row in rows
                  if math.isfinite(row.get("iteration", math.nan))] or [1]
    first, last = min(iterations), max(iterations)
    for ax, (column, title, ylabel, integer) in zip(axes.flat, PANELS, strict=True):
        undefined, values = 0, []
        for variant, rows in histories.items():
            points = [(row["iteration"], row.get(column, math.nan)) for row in rows]
            shown = [(x, y) for x, y in points if math.isfinite(y)]
            undefined += len(points) - len(shown)
            values += [y for _, y in shown]
            if shown:  # each variant a little off the integer iteration, so equal values do not hide a line
                ax.plot([x + offsets[variant] for x, _ in shown], [y for _, y in shown], marker=markers[variant],
                        label=variant, color=model_color(variant), alpha=0.85)
        ax.set_title(title + (f"\n({undefined} undefined point(s) not drawn)" if undefined else ""), fontsize=9)
        ax.set_xlabel("iteration", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_xlim(first - 0.5, last + 0.5)  # the same whole iterations on every panel, even with one point
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # one iteration: one tick, "1"
        if integer:
            ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        limits = flat_range(values[0], column in SHARES, integer) if values and min(values) == max(values) else None
        if limits is not None:
            ax.set_ylim(*limits)
    handles = [plt.Line2D([], [], color=model_color(variant), marker=markers[variant], label=variant)
               for variant in histories]
    fig.legend(handles=handles, loc="upper right", fontsize=8, ncol=len(handles))
    fig.suptitle("Self-play, per iteration (reports/selfplay/<variant>/history.csv; a two-phase variant's first "
                 "phase as <variant>_phase_a)", fontsize=10, x=0.3)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig
