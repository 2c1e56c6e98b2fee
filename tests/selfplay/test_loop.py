"""``run_selfplay`` end to end on the scripted backend + fake search with the real trainer, checkpoints,
MLflow (sqlite in tmp), reports, the refusal without --resume and a resume to the same total."""

import csv
import json
import math
import sqlite3
from pathlib import Path

import pytest

from searchplay.selfplay.checkpoint import CheckpointManager, read_state
from searchplay.selfplay.loop import SelfplayError, run_selfplay, untrained_warning
from tests.selfplay.conftest import make_params, make_runtime
from tests.selfplay.selfplay_fakes import ScriptedBackend, write_kg_pool

pytestmark = pytest.mark.slow  # the real PolicyTrainer (tiny model), save/load, MLflow

# Every statistic the loop logs, by the name it is logged under (one MLflow step per iteration).
LOGGED_METRICS = [
    "solver/reward_mean", "solver/wcr_process_reward", "proposer/reward_mean", "filter/valid_rate_rule",
    "filter/valid_rate_rag", "coverage/mean_correct", "coverage/mean_incorrect", "coverage/spearman_rho",
    "coverage/accuracy_bin_0.00_0.25", "coverage/accuracy_bin_0.75_1.00", "rollout/searches_solver",
    "rollout/searches_proposer", "rollout/response_tokens_solver", "rollout/response_tokens_proposer",
    "train/entropy", "train/kl", "train/grad_norm", "throughput/tokens_per_s", "time/propose_s", "time/verify_s",
    "time/solve_s", "time/update_s", "train/groups_nonzero_advantage", "train/weights_changed",
]
# Whether the Solver improves on questions it has not seen, and whether the update reaches the bf16 weights.
CURVE_METRICS = ["solver/fresh_accuracy", "solver/fresh_rollouts", "solver/fresh_accuracy_ci_low",
                 "solver/fresh_accuracy_ci_high", "train/bf16_changed_share", "train/lr"]


def logged_metrics(db_path, run_id: str) -> dict[str, list[int]]:
    """metric name -> logged steps, read straight from the MLflow sqlite store."""
    import sqlite3

    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT key, step FROM metrics WHERE run_uuid = ? ORDER BY step", (run_id,)).fetchall()
    steps: dict[str, list[int]] = {}
    for key, step in rows:
        steps.setdefault(key, []).append(step)
    return steps


def undefined_metrics(db_path, run_id: str, iterations: list[int]) -> dict[int, set[str]]:
    """iteration -> the metrics ``undefined/iter_*.json`` names as undefined (skipped, not logged as NaN)."""
    import mlflow

    named: dict[int, set[str]] = {}
    for iteration in iterations:
        try:
            folder = mlflow.artifacts.download_artifacts(
                run_id=run_id, artifact_path=f"undefined/iter_{iteration:06d}.json", tracking_uri=f"sqlite:///{db_path}")
        except Exception:  # no undefined metric that iteration
            named[iteration] = set()
            continue
        named[iteration] = set(json.loads(Path(folder).read_text())["undefined"])
    return named


def test_run_logs_every_metric_refuses_to_overwrite_and_resumes_to_the_same_total(
        tmp_path, monkeypatch, capsys, caplog, tokenizer, tiny_model_dir, trainer):
    monkeypatch.chdir(tmp_path)  # MLflow artifacts (./mlruns) stay in tmp
    params = make_params(tmp_path, tiny_model_dir, batch_size=2, keep_checkpoints=2)
    records = write_kg_pool(tmp_path / "kg", 6)
    backend = ScriptedBackend(tokenizer, [r["answer"] for r in records], {r["answer"]: r["waypoints"] for r in records})
    runtime = make_runtime(params, backend, trainer=trainer)

    final = tmp_path / "checkpoints" / "kg_wcr" / "model"
    exported_during = []
    history = run_selfplay(params, "kg_wcr", 2, runtime=runtime,
                           on_iteration=lambda iteration, row: exported_during.append(final.exists()))
    assert [row["iteration"] for row in history] == [1.0, 2.0]
    assert exported_during == [False, False] and (final / "config.json").is_file()  # the HF export: once, at the end
    out = capsys.readouterr().out
    assert "selfplay iteration 1/2 [kg_wcr]: valid rule 1.00" in out and "selfplay iteration 2/2" in out
    assert any(row["train/weights_changed"] for row in history) and "no update changed a weight" not in caplog.text
    assert any(row["train/grad_norm"] > 0 for row in history)  # a gradient moved them, not the weight decay alone

    manager = CheckpointManager(tmp_path / "checkpoints" / "kg_wcr" / "resume")
    assert [i for i, _ in manager.complete()] == [1, 2] and not list(manager.root.glob("*.partial"))
    state = read_state(manager.latest())
    assert state["iteration"] == 2 and state["cursor"] == 4 and len(state["replay"]) == 4
    assert (manager.latest() / "trainer" / "trainer_state.json").is_file() and not (manager.latest() / "model").exists()

    steps = logged_metrics(tmp_path / "mlflow.db", state["mlflow_run_id"])
    undefined = undefined_metrics(tmp_path / "mlflow.db", state["mlflow_run_id"], [1, 2])
    missing = [(name, step) for name in LOGGED_METRICS + CURVE_METRICS for step in (1, 2)
               if step not in steps.get(name, []) and name not in undefined[step]]
    assert not missing, f"neither logged nor named undefined: {missing}"
    assert steps["metrics/undefined"] == [1, 2]
    with sqlite3.connect(tmp_path / "mlflow.db") as db:  # the MLflow UI can group runs by what they trained
        tags = dict(db.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (state["mlflow_run_id"],)))
    assert tags["variant"] == "kg_wcr" and tags["trained_roles"] == "both"
    reports = tmp_path / "reports" / "kg_wcr"
    summary = json.loads((reports / "metrics.json").read_text())
    assert summary["iteration"] == 2 and summary["trend/iterations_per_third"] == 0  # 2 iterations: no thirds
    assert all(0.0 <= row["train/bf16_changed_share"] <= 1.0 for row in history)
    assert (reports / "accuracy.png").read_bytes().startswith(b"\x89PNG")
    with (reports / "history.csv").open() as handle:
        assert [row["iteration"] for row in csv.DictReader(handle)] == ["1.0", "2.0"]

    with pytest.raises(SelfplayError, match="--resume"):
        run_selfplay(params, "kg_wcr", 3, runtime=runtime)

    history = run_selfplay(params, "kg_wcr", 3, resume=True, runtime=runtime)
    assert [row["iteration"] for row in history] == [1.0, 2.0, 3.0]
    assert "selfplay iteration 3/3" in capsys.readouterr().out
    assert [i for i, _ in manager.complete()] == [2, 3]  # pruned to keep_checkpoints
    resumed = read_state(manager.latest())
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
    same = run_selfplay(params, "kg_wcr", 3, resume_if_unchanged=True, runtime=runtime)  # the DVC stage's mode
    assert len(same) == 3 and trainer.global_step == resumed_steps
    unread = make_params(tmp_path, tiny_model_dir, batch_size=2, keep_checkpoints=2, **{"evaluate.n": 3})
    kept = run_selfplay(unread, "kg_wcr", 3, resume_if_unchanged=True, runtime=runtime)  # not read: nothing to redo
    assert len(kept) == 3 and trainer.global_step == resumed_steps

    changed = make_params(tmp_path, tiny_model_dir, batch_size=2, keep_checkpoints=2, clip_high=0.3)
    (manager.root / "old.json").write_text("{}\n")  # a file of the old run beside its checkpoints
    fresh = run_selfplay(changed, "kg_wcr", 1, resume_if_unchanged=True, runtime=runtime)
    assert [row["iteration"] for row in fresh] == [1.0]  # other params: the old checkpoints went, it started over
    assert [i for i, _ in manager.complete()] == [1] and not (manager.root / "old.json").exists()
    assert {row["iteration"] for row in map(json.loads, (reports / "questions.jsonl").read_text().splitlines())} == {1}


def test_a_run_that_changed_no_weight_is_told_so_and_one_that_did_or_logged_nothing_is_not():
    unchanged = [{"iteration": 1.0, "train/weights_changed": 0.0}, {"iteration": 2.0, "train/weights_changed": 0.0}]
    warning = untrained_warning(unchanged, "kg_wcr")
    assert warning is not None and warning.startswith("kg_wcr: no update changed a weight in 2 iteration(s)")
    assert "the one it started from" in warning
    assert untrained_warning([*unchanged, {"iteration": 3.0, "train/weights_changed": 1.0}], "kg_wcr") is None
    assert untrained_warning([{"iteration": 1.0}, {"iteration": 2.0, "train/weights_changed": math.nan}], "x") is None
    assert untrained_warning([], "kg_wcr") is None


def test_undefined_metrics_are_skipped_counted_and_named_never_logged_as_nan():
    """MLflow draws NaN as a broken chart; an undefined point is left out and said so."""
    from searchplay.selfplay.loop import _loggable

    metrics, undefined = _loggable({"iteration": 2.0, "solver/reward_mean": 0.0, "coverage/spearman_rho": float("nan"),
                                    "coverage/mean_correct": float("nan"), "train/kl": 0.01})
    assert metrics == {"solver/reward_mean": 0.0, "train/kl": 0.01, "metrics/undefined": 2.0}
    assert undefined == ["coverage/mean_correct", "coverage/spearman_rho"]


class FakeTrainer:
    """Saves and loads an empty model folder: enough for the loop's checkpoints (no training)."""

    model = None

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")

    def load(self, folder: Path) -> None:
        assert (folder / "config.json").is_file()

    def export(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        return folder


def test_a_kill_after_the_checkpoint_loses_no_mlflow_step_and_no_question_row(tmp_path, monkeypatch):
    """the resume continues the killed MLflow run, logs the iteration it lacks and puts the
    iteration's questions back into the pool, also when nothing is left to train."""
    from types import SimpleNamespace

    from mlflow import MlflowClient

    from searchplay.selfplay import loop
    from searchplay.selfplay.step import Runtime, StepResult

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("searchplay.quality.questions.validate_question_pool", lambda rows: None)
    params = make_params(tmp_path)
    write_kg_pool(tmp_path / "kg", 6)
    runtime = Runtime(backend=SimpleNamespace(update_weights=lambda model: None), verifier=None, judge=None,
                      trainer=FakeTrainer(), rollouts=None, solver_config=None, proposer_config=None, encode=None,
                      format_documents=None)

    def fake_step(runtime, variant, params, state):
        n = state.iteration + 1
        question = {"question": f"Which answer does the chain of iteration {n} lead to?", "answer": f"A{n}",
                    "source": "fresh", "solver_accuracy": 0.5}
        return StepResult({"solver/reward_mean": n / 10}, {"iteration": n}, [question])

    monkeypatch.setitem(loop.STEP_FUNCTIONS, "joint", fake_step)
    save = CheckpointManager.save

    def save_then_die(self, iteration, state, write):
        folder = save(self, iteration, state, write)
        if iteration == 2:
            raise KeyboardInterrupt  # killed right after the checkpoint, before MLflow and the pool
        return folder

    monkeypatch.setattr(CheckpointManager, "save", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        run_selfplay(params, "kg_wcr", 2, runtime=runtime)
    manager = CheckpointManager(tmp_path / "checkpoints" / "kg_wcr" / "resume")
    run_id = read_state(manager.latest())["mlflow_run_id"]
    db, client = tmp_path / "mlflow.db", MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert client.get_run(run_id).info.status == "KILLED"
    assert logged_metrics(db, run_id)["solver/reward_mean"] == [1]
    pool = tmp_path / "reports" / "kg_wcr" / "questions.jsonl"

    def pool_iterations():
        return sorted(json.loads(line)["iteration"] for line in pool.read_text().splitlines())

    assert pool_iterations() == [1]

    monkeypatch.setattr(CheckpointManager, "save", save)
    run_selfplay(params, "kg_wcr", 2, resume=True, runtime=runtime)  # nothing to train: only fills the holes
    assert logged_metrics(db, run_id)["solver/reward_mean"] == [1, 2] and pool_iterations() == [1, 2]
    assert client.get_run(run_id).info.status == "FINISHED"

    run_selfplay(params, "kg_wcr", 3, resume=True, runtime=runtime)
    assert read_state(manager.latest())["mlflow_run_id"] == run_id  # one run
    assert logged_metrics(db, run_id)["solver/reward_mean"] == [1, 2, 3]  # each step once
    assert pool_iterations() == [1, 2, 3]
    assert len(client.search_runs([client.get_run(run_id).info.experiment_id])) == 1


def test_a_resume_makes_the_pools_rows_of_its_iteration_the_checkpoints(tmp_path, monkeypatch):
    """A run that started over (other inputs) and was killed between its first checkpoint and its pool write
    finds the earlier run's rows in the persisted pool: the resume replaces them, it does not keep them."""
    from searchplay.io import read_jsonl, write_jsonl
    from searchplay.selfplay.loop import restore_question_rows

    monkeypatch.setattr("searchplay.quality.questions.validate_question_pool", lambda rows: None)
    pool = tmp_path / "questions.jsonl"
    write_jsonl(pool, [{"iteration": i, "question": "an earlier run's", "answer": "old"} for i in (1, 2, 3)])
    questions = [{"question": "this run's", "answer": "new"}]
    assert restore_question_rows(pool, 1, questions)
    assert list(read_jsonl(pool)) == [{"iteration": 1, **questions[0]}]
    assert not restore_question_rows(pool, 1, questions)  # already the checkpoint's: left as it is
    write_jsonl(pool, [{"iteration": 1, **questions[0]}])
    assert restore_question_rows(pool, 2, questions) and [r["iteration"] for r in read_jsonl(pool)] == [1, 2]


def test_gdcr_run_logs_step_credit_and_writes_the_heldout_rq1(tmp_path, monkeypatch, tokenizer, tiny_model_dir,
                                                             trainer):
    """The gdcr variant through the whole loop: step-credit metrics every iteration, then GDCR RQ1 on the
    kg_heldout subgraphs (reports/selfplay/gdcr/rq1.*, and the rq1/* metrics on the same MLflow run)."""
    from tests.selfplay.selfplay_fakes import subgraph_record

    monkeypatch.chdir(tmp_path)
    params = make_params(tmp_path, tiny_model_dir, batch_size=2)
    records = write_kg_pool(tmp_path / "kg", 6)
    heldout = [subgraph_record(10 + k, 5, split="kg_heldout") for k in range(2)]
    with (tmp_path / "kg" / "subgraphs.jsonl").open("a") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in heldout)
    backend = ScriptedBackend(tokenizer, [r["answer"] for r in records + heldout])
    runtime = make_runtime(params, backend, trainer=trainer)
    history = run_selfplay(params, "gdcr", 1, runtime=runtime)
    assert "gdcr/step_reward_mean" in history[0] and history[0]["gdcr/steps"] > 0
    reports = tmp_path / "reports" / "gdcr"
    summary = json.loads((reports / "rq1.json").read_text())
    assert summary["rq1/questions"] == 2 and (reports / "rq1.png").is_file() and (reports / "rq1.md").is_file()
    run_id = read_state(CheckpointManager(tmp_path / "checkpoints" / "gdcr" / "resume").latest())["mlflow_run_id"]
    assert "rq1/questions" in logged_metrics(tmp_path / "mlflow.db", run_id)

    # killed after its last checkpoint, before RQ1: the resumed run, with nothing left to train, runs RQ1 again
    for name in ("rq1.json", "rq1.png", "rq1.md", "rq1.csv"):
        (reports / name).unlink()
    run_selfplay(params, "gdcr", 1, runtime=runtime, resume=True)
    assert json.loads((reports / "rq1.json").read_text())["rq1/questions"] == 2 and (reports / "rq1.md").is_file()
    assert len(logged_metrics(tmp_path / "mlflow.db", run_id)["rq1/questions"]) == 2  # again, in the same run


def test_eval_every_logs_a_heldout_curve(tmp_path, monkeypatch, tokenizer, tiny_model_dir, trainer):
    """selfplay.eval_every: kg_heldout plus one benchmark, judged greedily, as heldout/* history columns and
    MLflow steps."""
    from tests.selfplay.selfplay_fakes import subgraph_record

    monkeypatch.chdir(tmp_path)
    params = make_params(tmp_path, tiny_model_dir, batch_size=2, eval_every=1, eval_n=2)
    records = write_kg_pool(tmp_path / "kg", 6)
    heldout = [subgraph_record(10 + k, 5, split="kg_heldout") for k in range(3)]
    with (tmp_path / "kg" / "subgraphs.jsonl").open("a") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in heldout)
    bench = tmp_path / "benchmarks" / "bamboogle"
    bench.mkdir(parents=True)
    bench.joinpath("test.jsonl").write_text("".join(
        json.dumps({"id": f"b{k}", "question": f"Question {k}?", "golden_answers": ["none"]}) + "\n" for k in range(4)))
    params.evaluate.data_dir = str(tmp_path / "benchmarks")
    backend = ScriptedBackend(tokenizer, [r["answer"] for r in records + heldout])
    history = run_selfplay(params, "kg_wcr", 2, runtime=make_runtime(params, backend, trainer=trainer))
    assert [row["heldout/kg_heldout_n"] for row in history] == [3.0, 3.0]
    assert [row["heldout/bamboogle_n"] for row in history] == [2.0, 2.0]
    assert all(0.0 <= row["heldout/bamboogle_acc"] <= 1.0 for row in history)
    run_id = read_state(CheckpointManager(tmp_path / "checkpoints" / "kg_wcr" / "resume").latest())["mlflow_run_id"]
    assert logged_metrics(tmp_path / "mlflow.db", run_id)["heldout/kg_heldout_acc"] == [1, 2]


@pytest.mark.parametrize(("setting", "backend", "device", "on_disk"), [
    ("auto", "transformers", "cpu", True), ("auto", "transformers", "cuda", False),
    (False, "transformers", "cpu", False), (True, "transformers", "cuda", True)])
def test_frozen_backends_read_their_weights_per_call_where_the_reference_does(setting, backend, device, on_disk):
    from searchplay.config import Params
    from searchplay.selfplay.loop import frozen_backend_kwargs

    params = Params()
    params.selfplay.reference_on_disk = setting
    params.agent.backend = backend
    assert frozen_backend_kwargs(params, device) == ({"weights_on_disk": True} if on_disk else {})


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_frozen_vllm_engine_never_asks_for_sleep_mode(device):
    """vLLM's sleep mode puts an engine in CUDA's one CuMem pool per process; the policy's engine holds it, and a
    second engine asking for it fails to load its weights ('can only be used for one instance per process')."""
    from searchplay.config import Params
    from searchplay.llm.vllm_backend import engine_arguments
    from searchplay.selfplay.loop import frozen_backend_kwargs

    params = Params()
    params.agent.backend = "vllm"
    kwargs = frozen_backend_kwargs(params, device)
    assert kwargs == {"sleep": False}
    frozen = engine_arguments("m", "bfloat16", 0.3, 0, {}, can_sleep=True, **kwargs)
    policy = engine_arguments("m", "bfloat16", 0.3, 0, {}, can_sleep=True)
    assert frozen["enable_sleep_mode"] is False and policy["enable_sleep_mode"] is True
    assert "enforce_eager" not in frozen  # a GPU engine that does not sleep still captures CUDA graphs


@pytest.mark.parametrize(("variant", "verifier", "engines"), [
    ("kg_wcr", "policy", 1), ("kg_wcr", "frozen", 2), ("eve", "policy", 2), ("eve", "frozen", 2)])
def test_vllm_engines_of_a_process_share_one_device(variant, verifier, engines):
    """A frozen verifier or Solver gets an engine of its own, and all of them together take agent.vllm_memory_share."""
    from searchplay.config import Params
    from searchplay.selfplay.loop import engine_count, engine_share
    from searchplay.selfplay.variants import get_variant

    params = Params.model_validate({"agent": {"backend": "vllm", "vllm_memory_share": 0.6},
                                    "selfplay": {"verifier": verifier}})
    assert engine_count(params, get_variant(variant)) == engines
    assert engine_share(params, get_variant(variant))["memory_share"] * engines == pytest.approx(0.6)
    assert engine_share(params.model_copy(update={"agent": Params().agent}), get_variant(variant)) == {}
