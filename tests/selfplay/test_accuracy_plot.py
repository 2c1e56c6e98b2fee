"""``accuracy.png``: fresh-question Solver accuracy per iteration, Wilson error bars, rollout counts, atomic write."""

from __future__ import annotations

import json
import math

import pytest

from searchplay.selfplay.accuracy_plot import AccuracyPoint, draw_fresh_accuracy, fresh_accuracy_points
from searchplay.selfplay.loop import write_reports
from searchplay.selfplay.metrics import fresh_accuracy

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _row(iteration: int, correct: list[list[bool]], sources: list[str]) -> dict[str, float]:
    return {"iteration": float(iteration), "solver/accuracy": 0.5, **fresh_accuracy(correct, sources)}


def test_points_are_the_iterations_with_fresh_rollouts():
    history = [_row(1, [[True, False, False]], ["fresh"]), _row(2, [[True, True, True]], ["replay"]),
               _row(3, [[True, True], [False, True]], ["fresh", "fresh"]), {"iteration": 4.0, "solver/accuracy": 1.0}]
    points = fresh_accuracy_points(history)
    assert [(p.iteration, p.rollouts) for p in points] == [(1, 3), (3, 4)]
    assert points[0].accuracy == pytest.approx(1 / 3) and points[1].accuracy == pytest.approx(0.75)
    assert all(0 <= p.low < p.accuracy < p.high <= 1 for p in points)
    assert isinstance(points[0], AccuracyPoint)


def test_the_chart_is_drawn_with_its_labels_and_written_atomically(tmp_path, monkeypatch):
    import matplotlib.figure

    history = [_row(1, [[True, False, False]], ["fresh"]), _row(2, [[True, True, True]], ["replay"]),
               _row(3, [[True, True, False]], ["fresh"])]
    saved = []
    original = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda fig, *a, **kw: (saved.append(fig.axes[0]), original(fig, *a, **kw))[1])
    path = draw_fresh_accuracy(tmp_path / "kg_wcr" / "accuracy.png", history, "kg_wcr")
    assert path.read_bytes().startswith(PNG_MAGIC)
    assert [p.name for p in path.parent.iterdir()] == ["accuracy.png"]  # no temp file left behind
    ax = saved[0]
    assert ax.get_xlabel() == "self-play iteration" and "accuracy" in ax.get_ylabel()
    assert "kg_wcr" in ax.get_title() and "1 iteration(s) without fresh questions" in ax.get_title()
    assert [t.get_text() for t in ax.texts] == ["n=3", "n=3"]
    assert all(float(tick).is_integer() for tick in ax.get_xticks())
    line = ax.lines[0]
    assert list(line.get_xdata()) == [1, 3] and list(line.get_ydata()) == pytest.approx([1 / 3, 2 / 3])


def test_one_iteration_gets_one_whole_tick(tmp_path, monkeypatch):
    import matplotlib.figure

    saved = []
    original = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda fig, *a, **kw: (saved.append(fig.axes[0]), original(fig, *a, **kw))[1])
    draw_fresh_accuracy(tmp_path / "accuracy.png", [_row(1, [[True, False, False]], ["fresh"])], "kg_wcr")
    low, high = saved[0].get_xlim()
    assert [tick for tick in saved[0].get_xticks() if low <= tick <= high] == [1.0]  # not 0.5, 0.6, ... 1.5


def test_a_run_without_fresh_rollouts_still_gets_a_chart(tmp_path):
    path = draw_fresh_accuracy(tmp_path / "accuracy.png", [{"iteration": 1.0, "solver/accuracy": 0.2}], "eve")
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_write_reports_draws_the_chart_beside_the_history(tmp_path):
    history = [_row(1, [[True, False]], ["fresh"])]
    history[0]["coverage/spearman_rho"] = math.nan
    write_reports(tmp_path / "ssp", history)
    assert sorted(p.name for p in (tmp_path / "ssp").iterdir()) == ["accuracy.png", "history.csv", "metrics.json",
                                                                     "timings.json"]
    assert (tmp_path / "ssp" / "accuracy.png").read_bytes().startswith(PNG_MAGIC)


def test_timings_stay_out_of_the_files_dvc_compares(tmp_path):
    """A rerun with the same answers must leave metrics.json and history.csv unchanged: durations and rates go
    to timings.json, per iteration."""
    history = [{**_row(i, [[True, False]], ["fresh"]), "time/iteration_s": 100.0 + i, "train/seconds": 9.0 + i,
                "throughput/tokens_per_s": 50.0} for i in (1, 2)]
    write_reports(tmp_path / "ssp", history)
    folder = tmp_path / "ssp"
    metrics = json.loads((folder / "metrics.json").read_text())
    assert "solver/accuracy" in metrics and not [k for k in metrics if "time" in k or "seconds" in k or "_per_s" in k]
    header = (folder / "history.csv").read_text().splitlines()[0].split(",")
    assert "solver/accuracy" in header and "time/iteration_s" not in header and "train/seconds" not in header
    timings = json.loads((folder / "timings.json").read_text())
    assert timings["time/iteration_s"] == 102.0
    assert [row["time/iteration_s"] for row in timings["iterations"]] == [101.0, 102.0]
