"""The warmstart_eve stage: the shared warm-start continued on EVE's formats, into its own folder, on a
tiny random-init model (the stage's logic, not its effect), a tiny real LanceDB index and the warm-start split."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil

import pytest

from searchplay.recipes.eve.warmstart import eve_params, run_eve_warmstart
from searchplay.timings import split_timings
from searchplay.warmstart.stage import WarmstartError
from tests.warmstart.test_stage import tiny_params, write_chain_index, write_pool


def digest(folder):
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(folder.glob("*.safetensors")))).hexdigest()


def eve_tiny_params(tmp_path, eve_steps=24, **warmstart):
    params = tiny_params(tmp_path, **warmstart)
    params.eve.warmstart_out_dir = str(tmp_path / "checkpoints" / "warmstart_eve")
    params.eve.warmstart_reports_dir = str(tmp_path / "reports" / "warmstart_eve")
    params.eve.warmstart_steps = eve_steps
    return params


def test_eve_params_swap_only_the_outputs_and_the_step_count(tmp_path):
    params = eve_tiny_params(tmp_path, eve_steps=3)
    ours = eve_params(params)
    assert ours.warmstart.out_dir.endswith("warmstart_eve") and ours.warmstart.reports_dir.endswith("warmstart_eve")
    assert ours.warmstart.steps == 3 and params.warmstart.steps == 14  # the shared params are untouched
    assert ours.warmstart.lr == params.warmstart.lr and ours.selfplay == params.selfplay


def test_without_the_shared_warm_start_it_names_the_command_to_run_first(tmp_path):
    with pytest.raises(WarmstartError, match="searchplay warmstart"):
        run_eve_warmstart(eve_tiny_params(tmp_path), progress=False, track=False)
    with pytest.raises(WarmstartError, match="enabled is false"):
        run_eve_warmstart(eve_tiny_params(tmp_path, enabled=False), progress=False, track=False)


@pytest.mark.slow
def test_the_stage_continues_the_warm_start_on_eve_demos_into_its_own_folder(tmp_path, tiny_model_dir):
    import mlflow

    records = write_pool(tmp_path / "kg", ["warmstart"] * 10 + ["selfplay", "kg_heldout"])
    write_chain_index(tmp_path / "retrieval", records)
    params = eve_tiny_params(tmp_path, eve_steps=4)
    shared = tmp_path / "checkpoints" / "warmstart" / "model"
    shutil.copytree(tiny_model_dir, shared)
    before = digest(shared)

    metrics = run_eve_warmstart(params, progress=False)
    assert digest(shared) == before  # the other variants' starting point is untouched
    out = tmp_path / "checkpoints" / "warmstart_eve" / "model"
    assert (out / "config.json").is_file() and digest(out) != before
    assert metrics["steps"] == 4 and metrics["starts_from"] == "warmstart"
    assert metrics["demos_proposer_eve"] > 0 and metrics["demos_solver_eve"] > 0 and metrics["demos_solver"] > 0
    assert "demos_proposer_kg" not in metrics and "demos_verifier" not in metrics  # EVE's forms + the Solver only
    assert {"proposer_eve_valid_rate", "proposer_eve_valid_rate_before", "verifier_eve_answer_rate"} <= set(metrics)
    reports = tmp_path / "reports" / "warmstart_eve"
    results, timings = split_timings(metrics)  # durations go to timings.json, out of the file DVC compares
    assert json.loads((reports / "metrics.json").read_text()) == results
    assert timings and json.loads((reports / "timings.json").read_text()).items() >= timings.items()
    assert len(list(csv.DictReader((reports / "history.csv").open()))) == 4
    assert (reports / "loss.png").stat().st_size > 0
    assert set(json.loads((reports / "samples.json").read_text())) == {"before", "after", "demos"}
    assert not (tmp_path / "reports" / "warmstart").exists()  # the shared stage's reports are not written

    mlflow.set_tracking_uri(params.tracking.uri)
    runs = mlflow.search_runs(experiment_names=["searchplay-warmstart"], output_format="list")
    assert [run.info.run_name for run in runs] == ["warmstart_eve"]
