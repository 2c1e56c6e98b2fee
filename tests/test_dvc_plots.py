"""`dvc plots show` draws the self-play curves against the iteration, from columns the stage writes: every
top-level plot of dvc.yaml names x = iteration and y columns of the committed history.csv."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
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
    for name in ("selfplay_solver_accuracy", "selfplay_learning_signal", "selfplay_weights"):  # every variant
        assert variants <= {Path(path).parent.name for path in dict(selfplay)[name]["y"]}, name


def test_rewards_of_different_variants_never_share_an_axis():
    """The Solver's and Proposer's rewards are defined per variant (WCR adds coverage credit), so a plot that
    draws one draws one variant's (a two-phase variant's phases count as one). GDCR's step reward is a
    diagnostic computed alike for every variant, so it may be compared."""
    for name, body in top_level_plots():
        with_rewards = {Path(path).parent.name.removesuffix("_phase_a") for path, columns in body["y"].items()
                        if any(column.startswith(("solver/reward", "proposer/reward")) for column in columns)}
        assert len(with_rewards) <= 1, f"{name} draws the rewards of {sorted(with_rewards)} on one axis"
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



# `dvc plots show` renders offline: .dvc/config names a page template, written by `searchplay assets`, that
# carries Vega inline; without DVC's {scripts} placeholder its CDN script tags are left out.
REMOTE_SCRIPT = re.compile(r"<script[^>]*\ssrc\s*=\s*[\"']?(https?:)?//", re.IGNORECASE)


def _skip_or_fail(message: str) -> None:
    """Skip where the embedded assets are not installed; fail under `make test` (SEARCHPLAY_REQUIRE_ASSETS=1)."""
    if os.environ.get("SEARCHPLAY_REQUIRE_ASSETS") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def vega_js() -> Path:
    from searchplay import assets, dvc_plots

    try:
        return dvc_plots.vega_js_path()
    except assets.AssetError as exc:
        _skip_or_fail(str(exc))
        raise


def test_dvc_config_names_the_generated_template_in_an_ignored_path():
    from configobj import ConfigObj

    from searchplay import dvc_plots

    configured = ConfigObj(str(ROOT / ".dvc" / "config"))["plots"]["html_template"]
    assert ROOT / ".dvc" / configured == ROOT / dvc_plots.TEMPLATE  # DVC resolves it against .dvc/
    for generated in (dvc_plots.TEMPLATE, Path("dvc_plots") / "index.html"):
        ignored = subprocess.run(["git", "check-ignore", "-q", str(generated)], cwd=ROOT, check=False)
        assert ignored.returncode == 0, f"{generated} is not in .gitignore"


def test_plots_template_carries_vega_inline(vega_js, tmp_path):
    from dvc_render.html import HTML

    from searchplay import dvc_plots

    (tmp_path / ".dvc").mkdir()
    assert dvc_plots.dvc_root(tmp_path / "reports") == tmp_path
    assert dvc_plots.ensure_template(tmp_path) == [f"wrote {tmp_path / dvc_plots.TEMPLATE} for `dvc plots show`"]
    assert dvc_plots.ensure_template(tmp_path) == []  # a second run leaves it alone
    html = (tmp_path / dvc_plots.TEMPLATE).read_text(encoding="utf-8")
    assert "{plot_divs}" in html and "{scripts}" not in html
    assert not REMOTE_SCRIPT.search(html) and "<script src" not in html
    assert vega_js.read_text(encoding="utf-8")[:2000] in html
    assert "vegaEmbed" in HTML(html).with_element("<div id='p'></div>").embed()


def test_dvc_plots_show_loads_no_remote_script(vega_js, tmp_path):
    """`dvc plots show` as a user runs it in the repository (its config, its committed histories)."""
    from searchplay import dvc_plots

    if not (ROOT / dvc_plots.TEMPLATE).is_file():
        _skip_or_fail(f"{dvc_plots.TEMPLATE} is not written yet; run `searchplay assets` (or `make setup`)")
    out = tmp_path / "plots"
    result = subprocess.run([sys.executable, "-m", "dvc", "plots", "show", "-o", str(out)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    html = (out / "index.html").read_text(encoding="utf-8")
    assert "vegaEmbed('#" in html  # the self-play curves are there...
    assert not REMOTE_SCRIPT.search(html)  # ...and draw with the inline Vega
    assert dvc_plots.VEGA.requirement in html
