"""The per-benchmark chart: each model in its own colour, the papers' bars hatched white, labels that never collide."""

from __future__ import annotations

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt

from searchplay.colors import model_color
from searchplay.eval.benchmark_chart import Bar, benchmark_chart, benchmark_figure


def _bars():
    return [Bar("kg_wcr: judge acc", 12.0, model_color("kg_wcr"), (7.0, 18.0)),
            Bar("ssp: judge acc", 10.0, model_color("ssp"), (6.0, 16.0)),
            Bar("Qwen2.5-7B-Instruct SSP [ssp]", 41.2, "white", paper=True)]


def test_ours_keep_their_model_colour_and_the_paper_bar_is_hatched_white():
    fig = benchmark_figure("NQ (n=3)", _bars(), baseline=(9.9, "majority baseline (EM)"))
    ax = fig.axes[0]
    patches = sorted(ax.patches[:3], key=lambda p: -p.get_y())  # top to bottom, as given
    assert mcolors.to_hex(patches[0].get_facecolor()) == model_color("kg_wcr")
    assert mcolors.to_hex(patches[1].get_facecolor()) == model_color("ssp")
    assert mcolors.to_hex(patches[2].get_facecolor()) == "#ffffff" and patches[2].get_hatch()
    assert not patches[0].get_hatch()
    by_height = sorted(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels()), strict=True), reverse=True)
    assert [label for _, label in by_height] == [b.label for b in _bars()]
    assert ax.get_xlabel() == "score (0-100)"
    plt.close(fig)


def test_the_chart_is_a_png(tmp_path):
    path = benchmark_chart(tmp_path / "charts" / "nq.png", "NQ (n=3)", _bars())
    assert path.read_bytes()[:4] == b"\x89PNG"
