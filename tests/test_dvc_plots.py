"""`dvc plots show` draws the self-play curves against the iteration, from columns the stage writes (issue 14,
item 10): every top-level plot of dvc.yaml names x = iteration and y columns of the committed history.csv."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def top_level_plots() -> list[tuple[str, dict]]:
    plots = yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"]
    return [(name, body) for entry in plots for name, body in entry.items()]


def test_every_selfplay_plot_is_against_the_iteration_and_covers_every_variant():
    from searchplay.config import load_params

    variants = set(load_params(ROOT / "params.yaml").pipeline.variants)
    runs = variants | {f"{name}_phase_a" for name in variants}  # a two-phase variant's Phase A has its own history
    selfplay = [(name, body) for name, body in top_level_plots() if name.startswith("selfplay_")]
    assert len(selfplay) >= 4
    for name, body in selfplay:
        assert body["x"] == "iteration", name
        assert {Path(path).parent.name for path in body["y"]} <= runs, name
    for name in ("selfplay_rewards", "selfplay_learning_signal", "selfplay_weights"):  # every variant has these
        assert variants <= {Path(path).parent.name for path in dict(selfplay)[name]["y"]}, name
    warmstart = dict(top_level_plots())["warmstart_loss"]
    assert warmstart["x"] == "step" and warmstart["y"] == {"reports/warmstart/history.csv": ["loss"]}


@pytest.mark.parametrize(("name", "body"), top_level_plots())
def test_plotted_columns_are_in_the_committed_history(name, body):
    for path, columns in body["y"].items():
        history = ROOT / path
        if not history.is_file():
            pytest.skip(f"{path} is not committed")
        with history.open(encoding="utf-8") as handle:
            header = next(csv.reader(handle))
        assert not set(columns) - set(header), f"{name}: {path} has no column {sorted(set(columns) - set(header))}"
