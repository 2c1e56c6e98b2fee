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

from searchplay.io import atomic_write

# (history.csv column, panel title): the headline quantities of SSP App. B.1, the KG paper's Fig. 4 and GDCR
PANELS = (
    ("solver/reward_mean", "Solver reward r_i"),
    ("solver/accuracy", "Solver correctness c_i"),
    ("filter/valid_rate_rule", "valid questions (rule filter)"),
    ("train/groups_nonzero_advantage", "Solver groups with a learning signal"),
    ("train/weight_delta_l2_from_start", "||theta - theta_0||_2 since self-play started"),
    ("coverage/spearman_rho", "Spearman(coverage, correctness)"),
    ("gdcr/step_reward_mean", "GDCR per step (step-level variants)"),
    ("gdcr/positive_step_advantage_share", "share of steps with A_t,g > 0"),
)


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


def selfplay_curves(path: str | Path, histories: dict[str, list[dict[str, float]]]) -> Path:
    """A 2 x 4 grid of the ``PANELS`` columns against ``iteration``, one line per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, axes = plt.subplots(2, 4, figsize=(16, 6.5))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {variant: palette[k % len(palette)] for k, variant in enumerate(histories)}  # one per run, every panel
    for ax, (column, title) in zip(axes.flat, PANELS, strict=True):
        undefined = 0
        for variant, rows in histories.items():
            points = [(row["iteration"], row.get(column, math.nan)) for row in rows]
            shown = [(x, y) for x, y in points if math.isfinite(y)]
            undefined += len(points) - len(shown)
            if shown:
                ax.plot([x for x, _ in shown], [y for _, y in shown], marker="o", label=variant,
                        color=colors[variant])
        ax.set_title(title + (f"\n({undefined} undefined point(s) not drawn)" if undefined else ""), fontsize=9)
        ax.set_xlabel("iteration", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.get_major_locator().set_params(integer=True)
    handles = [plt.Line2D([], [], color=colors[variant], marker="o", label=variant) for variant in histories]
    fig.legend(handles=handles, loc="upper right", fontsize=8, ncol=len(handles))
    fig.suptitle("Self-play, per iteration (reports/selfplay/<variant>/history.csv; a two-phase variant's first "
                 "phase as <variant>_phase_a)", fontsize=10, x=0.3)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=100)
    plt.close(fig)
    return path
