"""One benchmark's scores as horizontal bars: this model, the other models, the papers' published results.

Each bar keeps its model's colour (``searchplay.colors``); a paper's published result is white with a
hatch and a grey edge, so it never reads as one of ours. Bars run sideways so that long labels
("Qwen2.5-7B-Instruct SSP [paper]") sit on their own lines instead of colliding under the axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from searchplay.colors import REFERENCE_HATCH
from searchplay.io import atomic_write

PAPER_EDGE = "#555555"


@dataclass(frozen=True)
class Bar:
    """One bar: its label, score (0-100), optional Wilson interval, colour, and whether a paper published it."""

    label: str
    value: float
    color: str
    interval: tuple[float, float] | None = None
    paper: bool = False


def benchmark_figure(title: str, bars: list[Bar], baseline: tuple[float, str] | None = None):
    """The figure: bars top to bottom in the given order, the score printed at each bar's end, error bars on
    ours, and ``baseline`` (value, legend label) as a dashed vertical line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.32 * len(bars)))
    ys = list(range(len(bars)))[::-1]
    for y, bar in zip(ys, bars, strict=True):
        style = ({"color": "white", "edgecolor": PAPER_EDGE, "hatch": REFERENCE_HATCH} if bar.paper
                 else {"color": bar.color, "edgecolor": bar.color})
        ax.barh(y, bar.value, height=0.7, **style)
        if bar.interval:
            low, high = bar.interval
            ax.errorbar(bar.value, y, xerr=[[max(0.0, bar.value - low)], [max(0.0, high - bar.value)]],
                        fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
        end = max(bar.value, bar.interval[1] if bar.interval else bar.value)
        ax.text(min(end, 100) + 1, y, f"{bar.value:.1f}", va="center", fontsize=7)
    ax.set_yticks(ys, [bar.label for bar in bars], fontsize=8)
    ax.set_xlim(0, 105)
    ax.set_xlabel("score (0-100)")
    ax.set_title(title)
    handles = [Patch(facecolor="#bbbbbb", label="ours (error bar: Wilson 95%)"),
               Patch(facecolor="white", edgecolor=PAPER_EDGE, hatch=REFERENCE_HATCH, label="published (paper)")]
    if baseline is not None:
        ax.axvline(baseline[0], color="black", linestyle="--", linewidth=1.5)
        handles.append(plt.Line2D([], [], color="black", linestyle="--", label=baseline[1]))
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def benchmark_chart(path: str | Path, title: str, bars: list[Bar],
                    baseline: tuple[float, str] | None = None) -> Path:
    """Write ``benchmark_figure`` as a PNG at ``path``."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = benchmark_figure(title, bars, baseline)
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=100)
    plt.close(fig)
    return path
