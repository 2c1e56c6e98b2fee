"""``run_selfplay`` end to end on the scripted backend + fake search with the real trainer, checkpoints,
MLflow (sqlite in tmp), reports, the refusal without --resume and a resume to the same total."""

import csv
import json

import pytest

from searchplay.selfplay.checkpoint import CheckpointManager
from searchplay.selfplay.loop import SelfplayError, run_selfplay
from tests.selfplay.conftest import make_params, make_runtime
from tests.selfplay.selfplay_fakes import ScriptedBackend, write_kg_pool

pytestmark = pytest.mark.slow  # the real PolicyTrainer (tiny model), save/load, MLflow

# Every statistic issue 6 asks for, by the name it is logged under (one MLflow step per iteration).
ISSUE_METRICS = [
    "solver/reward_mean", "solver/wcr_process_reward", "proposer/reward_mean", "filter/valid_rate_rule",
    "filter/valid_rate_rag", "coverage/mean_correct", "coverage/mean_incorrect", "coverage/spearman_rho",
    "coverage/accuracy_bin_0.00_0.25", "coverage/accuracy_bin_0.75_1.00", "rollout/searches_solver",
    "rollout/searches_proposer", "rollout/response_tokens_solver", "rollout/response_tokens_proposer",
    "train/entropy", "train/kl", "train/grad_norm", "throughput/tokens_per_s", "time/propose_s", "time/verify_s",
    "time/solve_s", "time/update_s", "train/groups_nonzero_advantage", "train/weights_changed",
]


def logged_metrics(db_path, run_id: str) -> dict[str, list[int]]:
    """metric name -> logged steps, read straight from the MLflow sqlite store."""
    import sqlite3

    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT key, step FROM metrics WHERE run_uuid = ? ORDER BY step", (run_id,)).fetchall()
    steps: dict[str, list[int]] = {}
    for key, step in rows:
        steps.setdefault(key, []).append(step)
    return steps


def test_run_logs_every_metric_refuses_to_overwrite_and_resumes_to_the_same_total(
        tmp_path, monkeypatch, capsys, tokenizer, tiny_model_dir, trainer):
    monkeypatch.chdir(tmp_path)  # MLflow artifacts (./mlruns) stay in tmp
    params = make_params(tmp_path, tiny_model_dir, batch_size=2, keep_checkpoints=2)
    records = write_kg_pool(tmp_path / "kg", 6)
    backend = ScriptedBackend(tokenizer, [r["answer"] for r in records], {r["answer"]: r["waypoints"] for r in records})
    runtime = make_runtime(params, backend, trainer=trainer)

    history = run_selfplay(params, "kg_wcr", 2, runtime=runtime)
    assert [row["iteration"] for row in history] == [1.0, 2.0]
    out = capsys.readouterr().out
    assert "selfplay iteration 1/2 [kg_wcr]: valid rule 1.00" in out and "selfplay iteration 2/2" in out

    manager = CheckpointManager(tmp_path / "checkpoints" / "kg_wcr")
    assert [i for i, _ in manager.complete()] == [1, 2] and not list(manager.root.glob("*.partial"))
    state = json.loads((manager.latest() / "state.json").read_text())
    assert state["iteration"] == 2 and state["cursor"] == 4 and len(state["replay"]) == 4
    assert (manager.latest() / "model" / "config.json").is_file()

    steps = logged_metrics(tmp_path / "mlflow.db", state["mlflow_run_id"])
    missing = [name for name in ISSUE_METRICS if steps.get(name) != [1, 2]]
    assert not missing, f"not logged at steps 1 and 2: {missing}"
    reports = tmp_path / "reports" / "kg_wcr"
    assert json.loads((reports / "metrics.json").read_text())["iteration"] == 2
    with (reports / "history.csv").open() as handle:
        assert [row["iteration"] for row in csv.DictReader(handle)] == ["1.0", "2.0"]

    with pytest.raises(SelfplayError, match="--resume"):
        run_selfplay(params, "kg_wcr", 3, runtime=runtime)

    history = run_selfplay(params, "kg_wcr", 3, resume=True, runtime=runtime)
    assert [row["iteration"] for row in history] == [1.0, 2.0, 3.0]
    assert "selfplay iteration 3/3" in capsys.readouterr().out
    assert [i for i, _ in manager.complete()] == [2, 3]  # pruned to keep_checkpoints
    resumed = json.loads((manager.latest() / "state.json").read_text())
    resumed_steps = trainer.global_step
    assert resumed["cursor"] == 6
    assert logged_metrics(tmp_path / "mlflow.db", resumed["mlflow_run_id"])["solver/reward_mean"] == [1, 2, 3]
    with (reports / "history.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 3
    pool = [json.loads(line) for line in (reports / "questions.jsonl").read_text().splitlines()]
    assert pool and {row["iteration"] for row in pool} == {1, 2, 3}  # one gated pool, no duplicated iteration
    assert all(row["question"] and row["answer"] for row in pool)
    again = run_selfplay(params, "kg_wcr", 3, resume=True, runtime=runtime)  # nothing left to do
    assert [row["solver/reward_mean"] for row in again] == [row["solver/reward_mean"] for row in history]
    assert trainer.global_step == resumed_steps
