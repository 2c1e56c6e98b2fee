"""Self-play curves: read every variant's history.csv, draw the headline columns, never drop a line silently."""

from __future__ import annotations

import math

from searchplay.eval.curves import PANELS, SHARES, curves_figure, flat_range, read_histories, selfplay_curves
from searchplay.eval.report import compare_variants
from tests.eval.test_report import _eval_dir

COLUMNS = ["iteration", *(panel[0] for panel in PANELS)]


def _history(folder, rows):
    """history.csv with ``rows`` of {column: value} (a column left out is an empty cell)."""
    folder.mkdir(parents=True)
    lines = [",".join(COLUMNS)] + [",".join("" if row.get(c) is None else str(row[c]) for c in COLUMNS)
                                   for row in rows]
    (folder / "history.csv").write_text("\n".join(lines) + "\n")


def _row(iteration, accuracy, groups, rho=None):
    return {"iteration": iteration, "solver/fresh_accuracy": accuracy, "solver/accuracy": accuracy,
            "filter/valid_rate_rule": 1.0, "train/groups_nonzero_advantage": groups, "coverage/spearman_rho": rho}


def test_every_panel_has_a_y_label_and_no_reward_shares_an_axis_across_variants():
    assert all(title and ylabel for _, title, ylabel, _ in PANELS)
    assert "solver/reward_mean" not in COLUMNS  # WCR and GDCR rewards are on other scales than binary c_i
    assert [column for column, *_, integer in PANELS if integer] == ["train/groups_nonzero_advantage"]


def test_histories_are_read_per_variant_with_empty_cells_as_nan(tmp_path):
    _history(tmp_path / "ssp", [_row(1, 0.1, 0), _row(2, 0.2, 1, 0.3)])
    _history(tmp_path / "kg_wcr", [_row(1, 0.3, 3, 0.5)])
    histories = read_histories(tmp_path)
    assert list(histories) == ["kg_wcr", "ssp"] and len(histories["ssp"]) == 2
    assert math.isnan(histories["ssp"][0]["coverage/spearman_rho"]) and histories["ssp"][1]["iteration"] == 2.0
    chart = selfplay_curves(tmp_path / "out" / "selfplay.png", histories)
    assert chart.read_bytes()[:4] == b"\x89PNG"


def test_one_iteration_reads_as_one_whole_iteration_and_flat_panels_get_their_whole_range(tmp_path):
    import matplotlib.pyplot as plt

    _history(tmp_path / "kg_wcr", [_row(1, 0.0, 0)])  # the quick run: one iteration, no Solver signal
    fig = curves_figure(read_histories(tmp_path))
    try:
        panels = {column: ax for (column, *_), ax in zip(PANELS, fig.axes, strict=False)}
        for ax in panels.values():
            assert [tick for tick in ax.get_xticks() if 0.5 <= tick <= 1.5] == [1.0]  # not 0.6, 0.8, ...
        assert panels["solver/accuracy"].get_ylim() == (-0.05, 1.05)  # a share of 0 on its 0-1 scale
        groups = panels["train/groups_nonzero_advantage"]
        assert groups.get_ylim() == (-0.5, 1.5)
        assert [tick for tick in groups.get_yticks() if -0.5 <= tick <= 1.5] == [0.0, 1.0]
    finally:
        plt.close(fig)
    assert {"solver/accuracy", "filter/valid_rate_rule", "train/bf16_changed_share"} <= SHARES
    assert "coverage/spearman_rho" not in SHARES and flat_range(0.3, share=False, integer=False) is None
    assert flat_range(3.0, share=False, integer=True) == (-0.5, 4.5)


def test_the_comparison_embeds_the_curves_when_there_are_histories(tmp_path):
    eval_dir = _eval_dir(tmp_path, {"ssp": 1, "kg_wcr": 2})
    _history(tmp_path / "selfplay" / "ssp", [_row(1, 0.1, 0)])
    written = compare_variants(eval_dir, tmp_path / "compare", tmp_path / "selfplay")
    assert [p.name for p in written][-3:] == ["compare.png", "behaviour.png", "selfplay.png"]
    assert "![selfplay](selfplay.png)" in (tmp_path / "compare" / "compare.md").read_text()
    assert "src='selfplay.png'" in (tmp_path / "compare" / "compare.html").read_text()
    without = compare_variants(eval_dir, tmp_path / "plain")
    assert not (tmp_path / "plain" / "selfplay.png").exists() and len(without) == 6
