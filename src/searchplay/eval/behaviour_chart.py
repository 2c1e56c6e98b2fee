"""behaviour.png: what training changed, one bar per paired comparison on one scope (``behaviour_chart``).

Each comparison (A vs the checkpoint it started from, or a head-to-head pair) is one horizontal bar split at
zero: to the left the questions A searched less than B, to the right those it searched more, the ties left
out; the label gives the answers changed and the sign test's p. A model whose bar is empty changed nothing
an evaluation can see; a bar far to one side changed how it searches.
"""

from __future__ import annotations

from pathlib import Path

from searchplay.colors import model_color
from searchplay.eval.behaviour import BehaviourComparison
from searchplay.eval.paired import p_phrase
from searchplay.io import atomic_write


def behaviour_chart(path: str | Path, comparisons: list[BehaviourComparison], scope_label: str) -> Path:
    """Diverging bars of questions searched less / more per comparison (one scope), in A's colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    rows = list(reversed(comparisons))  # the first comparison on top
    fig, ax = plt.subplots(figsize=(10, 0.55 * len(rows) + 1.8))
    for y, c in enumerate(rows):
        color = model_color(c.model_a)
        ax.barh(y, c.more_searches, color=color, alpha=0.9)
        ax.barh(y, -c.fewer_searches, color=color, alpha=0.45, hatch="//")
        ax.text(1.02, y, f"more {c.more_searches}, less {c.fewer_searches}, {p_phrase(c.searches_p)}"
                f"\n{c.answers_changed} of {c.n} answers changed", transform=ax.get_yaxis_transform(),
                va="center", fontsize=8)
    if not rows:
        ax.text(0.5, 0.5, "no two models with a training relation answered the same questions",
                transform=ax.transAxes, ha="center", va="center", fontsize=9)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [c.label for c in rows], fontsize=8)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlim(-max([c.fewer_searches for c in rows] + [1]) - 1, max([c.more_searches for c in rows] + [1]) + 1)
    ax.set_xlabel("questions A searched less than B (left, hatched) | more than B (right)", fontsize=8)
    ax.set_title(f"What training changed on {scope_label}: search calls per question, paired\n"
                 "(ties not drawn; p: exact sign test of more against less)", fontsize=9)
    fig.tight_layout(rect=(0, 0, 0.78, 1))  # the right 22% holds each bar's numbers
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=100)
    plt.close(fig)
    return path
