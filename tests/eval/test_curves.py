"""Self-play curves: read every variant's history.csv, draw the headline columns, never drop a line silently."""

from __future__ import annotations

import math

from searchplay.eval.curves import PANELS, read_histories, selfplay_curves
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


def test_the_comparison_embeds_the_curves_when_there_are_histories(tmp_path):
    eval_dir = _eval_dir(tmp_path, {"ssp": 1, "kg_wcr": 2})
    _history(tmp_path / "selfplay" / "ssp", [_row(1, 0.1, 0)])
    written = compare_variants(eval_dir, tmp_path / "compare", tmp_path / "selfplay")
    assert [p.name for p in written][-3:] == ["compare.png", "behaviour.png", "selfplay.png"]
    assert "![selfplay](selfplay.png)" in (tmp_path / "compare" / "compare.md").read_text()
    assert "src='selfplay.png'" in (tmp_path / "compare" / "compare.html").read_text()
    without = compare_variants(eval_dir, tmp_path / "plain")
    assert not (tmp_path / "plain" / "selfplay.png").exists() and len(without) == 6
