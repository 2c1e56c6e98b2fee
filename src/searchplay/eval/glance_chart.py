"""glance.png: the "At a glance" table as a picture (``glance_chart``).

Four panels share one row per model pair: correctness, search counts, whether its searches returned a gold
answer, waypoint coverage. In each, a bar split
at zero counts the questions where A did less than B (left, hatched) and more (right), ties left out, in A's
colour; its p is written beside it, in bold where the test calls a difference. A pair that changed nothing has
empty rows; the papers' claim for a trained model is a bar far to the right in the first panel.
"""

from __future__ import annotations

from pathlib import Path

from searchplay.colors import model_color
from searchplay.eval.glance import TESTS, PairTests
from searchplay.eval.paired import SIGNIFICANCE, p_phrase
from searchplay.io import atomic_write

PANEL_TITLES = {"correct": "correct answers\n(exact McNemar)", "searches": "search calls\n(exact sign test)",
                "found": "answer in its search results\n(exact McNemar)",
                "coverage": "path coverage g_i\n(exact sign test)"}


def glance_chart(path: str | Path, pairs: list[PairTests], scope_label: str) -> Path:
    """Diverging bars of questions where A did less / more than B, one panel per paired test."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    rows = list(reversed(pairs))  # the first pair on top
    fig, axes = plt.subplots(1, len(TESTS), figsize=(15, 0.5 * len(rows) + 2.0), sharey=True)
    for ax, name in zip(axes, TESTS, strict=True):
        counted = [pair.tests.get(name) for pair in rows]
        reach = max([max(t.more, t.less) for t in counted if t] + [1])
        for y, (pair, test) in enumerate(zip(rows, counted, strict=True)):
            if test is None:
                ax.text(0, y, "not measured", ha="center", va="center", fontsize=7, color="grey")
                continue
            color = model_color(pair.model_a)
            ax.barh(y, test.more, color=color, alpha=0.9)
            ax.barh(y, -test.less, color=color, alpha=0.45, hatch="//")
            ax.text(reach * 1.05, y, f"less {test.less}, more {test.more}\n{p_phrase(test.p)}", va="center", fontsize=7,
                    weight="bold" if test.sign else "normal")
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlim(-reach * 1.05, reach * 2.1)  # the right half of each panel holds the counts and p
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title(PANEL_TITLES[name], fontsize=9)
        ax.set_xlabel("questions: A less (left) | A more (right)", fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
    axes[0].set_yticks(range(len(rows)), [pair.label for pair in rows], fontsize=8)
    if not rows:
        axes[1].text(0.5, 0.5, "no two models with a training relation answered the same questions",
                     transform=axes[1].transAxes, ha="center", va="center", fontsize=9)
    fig.suptitle(f"Paired tests on {scope_label}, A vs B on the questions both answered (bold: p < {SIGNIFICANCE})",
                 fontsize=10)
    fig.tight_layout()
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=100)
    plt.close(fig)
    return path
