"""GDCR RQ1 (Eqs. 16-17, Table 1) on held-out subgraphs: the table and correlation on hand-computed
progress, and the whole analysis on the scripted backend writing rq1.{csv,md,png,json}."""

from __future__ import annotations

import json
import math

import pytest

from searchplay.selfplay.heldout import (
    heldout_records,
    progress_table,
    rq1_figure,
    run_heldout_analysis,
    step_correlation,
)
from tests.selfplay.conftest import make_runtime
from tests.selfplay.selfplay_fakes import ScriptedBackend, subgraph_record


def test_progress_table_averages_running_trajectories_per_non_final_step():
    progress = [{"gdcr": [0.5, 1.0, 1.0], "d": [2.0, 0.0, None], "d_best": [2.0, 0.0, 0.0]},  # correct
                {"gdcr": [0.25, 0.0], "d": [3.0, None], "d_best": [3.0, 3.0]},  # incorrect, 1 non-final step
                {"gdcr": [0.0, 0.0, 0.0], "d": [None, None, None], "d_best": [None, None, None]}]  # incorrect
    rows = progress_table(progress, [True, False, False])
    assert rows == [{"step": 1, "d_best_correct": 2.0, "n_correct": 1, "d_best_incorrect": 3.0, "n_incorrect": 1,
                     "diff": -1.0},
                    {"step": 2, "d_best_correct": 0.0, "n_correct": 1, "d_best_incorrect": None, "n_incorrect": 0,
                     "diff": None}]


def test_rq1_figure_has_whole_steps_and_an_n_at_every_point():
    import matplotlib.pyplot as plt

    rows = [{"step": 1, "d_best_correct": 2.0, "n_correct": 4, "d_best_incorrect": 3.0, "n_incorrect": 9},
            {"step": 2, "d_best_correct": 1.0, "n_correct": 1, "d_best_incorrect": None, "n_incorrect": 0}]
    fig = rq1_figure(rows)
    ax = fig.axes[0]
    assert all(float(tick).is_integer() for tick in ax.get_xticks())
    assert sorted(text.get_text() for text in ax.texts) == ["n=1", "n=4", "n=9"]
    assert ax.get_ylabel() and ax.get_xlabel()
    plt.close(fig)
    fig = rq1_figure(rows[:1])  # one step (the main job's gdcr): one tick, not 0.9, 0.95, ...
    low, high = fig.axes[0].get_xlim()
    assert [tick for tick in fig.axes[0].get_xticks() if low <= tick <= high] == [1.0]
    plt.close(fig)


def test_step_correlation_is_point_biserial_over_steps():
    progress = [{"gdcr": [1.0, 1.0]}, {"gdcr": [0.0, 0.0]}]
    r, steps = step_correlation(progress, [True, False])
    assert steps == 4 and r == pytest.approx(1.0)
    r, _ = step_correlation(progress, [False, False])  # no correct trajectory: undefined, not 0
    assert math.isnan(r)


def test_heldout_analysis_writes_the_table_plot_and_summary(params_factory, tokenizer, tmp_path):
    records = [subgraph_record(k, 8, split="kg_heldout" if k < 3 else "selfplay") for k in range(5)]
    pool = tmp_path / "kg" / "subgraphs.jsonl"
    pool.parent.mkdir(parents=True)
    pool.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert [r["id"] for r in heldout_records(pool)] == ["sg-0", "sg-1", "sg-2"]
    params = params_factory()
    runtime = make_runtime(params, ScriptedBackend(tokenizer, [r["answer"] for r in records]))
    summary = run_heldout_analysis(runtime, params, tmp_path / "out", pool)
    assert summary["rq1/questions"] == 3 and summary["rq1/steps"] > 0
    for name in ("rq1.csv", "rq1.md", "rq1.png", "rq1.json", "rq1_trajectories.jsonl"):
        assert (tmp_path / "out" / name).exists(), name
    assert "GDCR RQ1" in (tmp_path / "out" / "rq1.md").read_text()
    rows = [json.loads(line) for line in (tmp_path / "out" / "rq1_trajectories.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(len(row["gdcr"]) == len(row["d_best"]) for row in rows)
