"""The EVE variant on the real rollout loop with a scripted backend and fake search: the triple and its
format score, the evidence verifier, both phases, the hand-off and a resume across it."""

import json
import random
import shutil

import pytest

from searchplay.recipes.eve.objects import EveObjects, eve_objects
from searchplay.recipes.eve.phases import run_eve_step, seed_triple, verifier_score, verify_evidence
from searchplay.recipes.eve.seeds import document_shard, load_document_seeds
from searchplay.selfplay.replay import ReplayBuffer
from searchplay.selfplay.seeds import SeedCursor
from searchplay.selfplay.step import LoopState, propose
from searchplay.selfplay.variants import get_variant
from tests.recipes.eve.eve_fakes import EveScriptedBackend, write_eve_corpus
from tests.selfplay.conftest import make_params, make_runtime


def eve_params(tmp_path, model_dir=None, **eve):
    params = make_params(tmp_path, model_dir, batch_size=4, group_size=3, iterations=2)
    params.corpus.out = str(tmp_path / "corpus" / "passages.jsonl")
    params.eve.verifier_samples = 3
    params.eve.handoff_documents = 3
    params.eve.handoff_samples = 2
    for key, value in eve.items():
        setattr(params.eve, key, value)
    return params


@pytest.fixture()
def world(tmp_path, tokenizer):
    """``build(**eve) -> params, backend, runtime, state``: document seeds of the 'proposer' shard."""
    def build(evidence_mode="verbatim", trainer=None, model_dir=None, **eve):
        params = eve_params(tmp_path, model_dir, **eve)
        write_eve_corpus(tmp_path / "corpus" / "passages.jsonl")
        seeds = load_document_seeds(params.corpus.out, "proposer", params.eve.handoff_share, params.eve.hop_weights)
        backend = EveScriptedBackend(tokenizer, evidence_mode)
        runtime = make_runtime(params, backend, trainer=trainer)
        runtime.frozen, runtime.frozen_rollouts = backend, runtime.rollouts
        return params, backend, runtime, LoopState(0, SeedCursor(seeds), ReplayBuffer(), random.Random(0))
    return build


def handoff_world(world, trainer, model_dir):
    """(params, runtime, resets) for whole runs: a real trainer, three hand-off documents, policy resets counted."""
    params, _, runtime, _ = world(trainer=trainer, model_dir=model_dir)
    params.eve.document_tokens = 64
    resets = []
    runtime.recipe = EveObjects(
        reset_policy=lambda: resets.append(True),
        handoff_documents=lambda: load_document_seeds(params.corpus.out, "handoff", params.eve.handoff_share,
                                                      params.eve.hop_weights)[:3])
    return params, runtime, resets


# --- fast ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "verbatim", "has_evidence"), [("verbatim", True, True),
                                                                ("paraphrase", False, True), ("none", False, False)])
def test_the_triple_holds_question_answer_evidence_and_a_full_format_score(world, mode, verbatim, has_evidence):
    _, _, runtime, state = world(mode)
    proposals = propose(runtime, get_variant("eve"), state.cursor.next_batch(4))
    for proposal in proposals:
        triple = seed_triple(proposal, runtime.backend.tokenizer, False)
        assert triple.valid and triple.format_score == 1.0  # think, tool (h - 1 searches) and answer all 1
        assert triple.answer.startswith("Town") and triple.question.endswith("stand today?")
        assert triple.verbatim is verbatim and bool(triple.evidence) is has_evidence
        assert proposal.trajectory.num_searches == proposal.seed.num_hops - 1
    strict = seed_triple(proposals[0], runtime.backend.tokenizer, require_verbatim=True)
    assert strict.valid is verbatim


def test_the_verifier_measures_what_the_evidence_adds(world):
    params, backend, runtime, state = world()
    proposals = propose(runtime, get_variant("eve"), state.cursor.next_batch(2))
    triples = [seed_triple(p, runtime.backend.tokenizer, False) for p in proposals]
    pairs = verify_evidence(backend, runtime.encode, triples, params, seed=0)
    assert [len(plus) for plus, _ in pairs] == [3, 3] and all(all(plus) for plus, _ in pairs)
    # without evidence the scripted verifier is right on every 3rd call only: 1 of the 3 per triple
    assert [verifier_score(pair) for pair in pairs] == [round(2 / 3, 12), round(2 / 3, 12)]
    assert backend.verifier_count == 12  # 2 x m per triple, one batched call


# --- slow: the real PolicyTrainer --------------------------------------------------------------------------


@pytest.mark.slow
def test_phase_a_trains_the_proposer_on_r_pro_with_hop_groups(world, trainer):
    params, _, runtime, state = world(trainer=trainer)
    result = run_eve_step(runtime, get_variant("eve"), params, state)
    m = result.metrics
    assert m["eve/phase"] == 1.0 and m["filter/valid_rate_rule"] == 1.0
    assert m["evidence/verbatim_rate"] == 1.0 and m["verifier/v_nonzero"] == 4 and m["verifier/v_mean"] > 0
    assert m["train/samples_proposer"] == 4 and m["train/samples_solver"] == 0
    assert m["train/proposer/optimizer_steps"] == 1 and m["train/weights_changed"] == 1.0
    assert m["train/proposer/grad_norm"] > 0  # a gradient, not the weight decay alone
    assert 0 < m["solver/accuracy"] < 1 and m["proposer/reward_mean"] > 0.5  # 1/2 F_fmt = 0.5 at least
    assert [q["source"] for q in result.questions] == ["eve"] * 4
    assert result.samples["proposer"][0]["evidence"].endswith(".")


@pytest.mark.slow
def test_run_selfplay_goes_from_phase_a_through_the_hand_off_to_phase_b_and_resumes(
        world, trainer, tmp_path, monkeypatch, tiny_model_dir):
    from searchplay.selfplay.checkpoint import CheckpointManager, read_state
    from searchplay.selfplay.loop import run_selfplay

    monkeypatch.chdir(tmp_path)
    params, runtime, resets = handoff_world(world, trainer, tiny_model_dir)
    history = run_selfplay(params, "eve", 1, runtime=runtime)
    assert [row["eve/phase"] for row in history] == [1.0] and not resets

    history = run_selfplay(params, "eve", 2, resume=True, runtime=runtime)
    assert [row["eve/phase"] for row in history] == [1.0, 2.0] and resets == [True]
    phase_b = history[-1]
    assert phase_b["handoff/set_size"] == 3 and phase_b["train/samples_solver"] == 12
    assert phase_b["train/samples_proposer"] == 0 and phase_b["train/weights_changed"] == 1.0
    assert phase_b["train/solver/grad_norm"] > 0  # a gradient, not the weight decay alone
    assert phase_b["solver/evidence_presence_rate"] == 1.0 and phase_b["evidence/verbatim_rate"] == 1.0
    assert phase_b["verifier/v_nonzero"] >= 1 and 0 < phase_b["solver/reward_mean"] < 1.3
    state = read_state(CheckpointManager(tmp_path / "checkpoints" / "eve" / "resume").latest())
    assert state["extra"]["phase_a_iterations"] == 1 and len(state["extra"]["solver_set"]) == 3
    assert {row["seed_id"] for row in state["extra"]["solver_set"]} <= {
        f"doc-{k}" for k in range(40) if document_shard(str(k), params.eve.handoff_share) == "handoff"}
    pool = [json.loads(line) for line in (tmp_path / "reports" / "eve" / "questions.jsonl").read_text().splitlines()]
    assert {row["iteration"] for row in pool} == {1, 2} and all(row["source"] == "eve" for row in pool)


def test_the_logprob_verifier_is_the_difference_of_teacher_forced_answer_probabilities(world, tiny_model_dir):
    from types import SimpleNamespace

    from transformers import AutoModelForCausalLM

    from searchplay.recipes.eve.phases import answer_probabilities

    params, backend, runtime, state = world(verifier="logprob")
    proposals = propose(runtime, get_variant("eve"), state.cursor.next_batch(2))
    triples = [seed_triple(p, runtime.backend.tokenizer, False) for p in proposals]
    scorer = SimpleNamespace(model=AutoModelForCausalLM.from_pretrained(tiny_model_dir), tokenizer=backend.tokenizer)
    pairs = verify_evidence(scorer, runtime.encode, triples, params, seed=0)
    assert pairs == answer_probabilities(scorer, runtime.encode, triples)  # deterministic, no sampling
    for plus, minus in pairs:
        assert 0 < plus[0] < 1 and 0 < minus[0] < 1 and plus[0] != minus[0]
        assert verifier_score((plus, minus)) == pytest.approx(plus[0] - minus[0])
    with pytest.raises(ValueError, match="transformers backend"):
        answer_probabilities(backend, runtime.encode, triples)


@pytest.mark.slow
def test_the_phases_as_two_runs_hand_off_through_the_phase_a_folder(world, trainer, tmp_path, monkeypatch,
                                                                     tiny_model_dir):
    """The pipeline's stages: `--phase a` (eve_phase_a) writes the set beside its checkpoints; `--phase b`
    (selfplay@eve) trains on it from the initial weights, in checkpoints/eve; a resumed Phase A keeps its set."""
    from searchplay.selfplay.loop import run_selfplay

    monkeypatch.chdir(tmp_path)
    params, runtime, resets = handoff_world(world, trainer, tiny_model_dir)
    history_a = run_selfplay(params, "eve", 2, runtime=runtime, phase="a")
    assert [row["eve/phase"] for row in history_a] == [1.0, 1.0] and not resets  # stays in Phase A past half
    set_path = tmp_path / "checkpoints" / "eve_phase_a" / "solver_set.jsonl"
    rows = [json.loads(line) for line in set_path.read_text().splitlines()]
    handoff = json.loads((tmp_path / "reports" / "eve_phase_a" / "handoff.json").read_text())
    assert len(rows) == 3 == handoff["handoff/set_size"] and handoff["handoff/verbatim_rate"] == 1.0
    assert handoff["handoff/v_nonzero"] >= 1 and all(row["evidence"] for row in rows)
    assert not any(key.startswith("time/") for key in handoff)  # its duration is in the run's timings.json
    assert "time/handoff_s" in json.loads((tmp_path / "reports" / "eve_phase_a" / "timings.json").read_text())
    assert (tmp_path / "reports" / "eve_phase_a" / "history.csv").is_file()
    assert not (tmp_path / "checkpoints" / "eve").exists()

    before = set_path.read_text()
    run_selfplay(params, "eve", 2, runtime=runtime, resume=True, phase="a")  # nothing to train, set kept
    assert set_path.read_text() == before
    # DVC deletes the set (an output) before it runs the stage again: the resumed run hands off again, and logs
    # the hand-off into its MLflow run, as a run killed during its hand-off had not
    from mlflow import MlflowClient

    from searchplay.selfplay.checkpoint import CheckpointManager, read_state
    from searchplay.tracking import tracking_uri

    run_id = read_state(CheckpointManager(tmp_path / "checkpoints" / "eve_phase_a" / "resume").latest())[
        "mlflow_run_id"]
    client = MlflowClient(tracking_uri(params))
    logged = len(client.get_metric_history(run_id, "handoff/set_size"))
    set_path.unlink()
    run_selfplay(params, "eve", 2, runtime=runtime, resume=True, phase="a")
    assert len(set_path.read_text().splitlines()) == 3
    assert len(client.get_metric_history(run_id, "handoff/set_size")) == logged + 1

    # started over (its checkpoints moved away, as the refusal to overwrite them says): a new Proposer, a new set
    shutil.move(tmp_path / "checkpoints" / "eve_phase_a" / "resume", tmp_path / "old-resume")
    set_path.write_text('{"question": "an earlier run\'s"}\n')
    run_selfplay(params, "eve", 2, runtime=runtime, phase="a")
    assert "an earlier run" not in set_path.read_text() and len(set_path.read_text().splitlines()) == 3

    history_b = run_selfplay(params, "eve", 1, runtime=runtime, phase="b")
    assert [row["eve/phase"] for row in history_b] == [2.0] and not resets  # a Phase B run starts from M0
    assert history_b[0]["handoff/set_size"] == 3 and history_b[0]["train/samples_solver"] == 12
    assert history_b[0]["train/weights_changed"] == 1.0 and history_b[0]["verifier/v_nonzero"] >= 1
    assert history_b[0]["train/solver/grad_norm"] > 0
    assert history_b[0]["verifier/v_set_nonzero"] >= 1  # the set's V-hat from hand-off time, beside the current one
    assert (tmp_path / "checkpoints" / "eve").is_dir() and (tmp_path / "reports" / "eve" / "history.csv").is_file()


@pytest.mark.slow
def test_a_phase_a_run_that_built_its_runtime_frees_the_training_state_before_the_hand_off(
        world, trainer, tmp_path, monkeypatch, tiny_model_dir):
    """The stage's own process (no runtime passed in) ends Phase A by freeing AdamW's moments and the reference
    before the hand-off generates; the set is still written, and a second Phase A run has nothing to train."""
    from searchplay.selfplay import loop

    monkeypatch.chdir(tmp_path)
    params, runtime, _ = handoff_world(world, trainer, tiny_model_dir)
    released = []
    monkeypatch.setattr(runtime.trainer, "release_training_state",
                        lambda: released.append(bool(runtime.trainer.optimizer.state)))
    monkeypatch.setattr(loop, "build_runtime", lambda *args, **kwargs: runtime)
    loop.run_selfplay(params, "eve", 1, phase="a")
    assert released == [True]  # freed once, after the last update (its moments were still there)
    assert len((tmp_path / "checkpoints" / "eve_phase_a" / "solver_set.jsonl").read_text().splitlines()) == 3


@pytest.mark.slow
def test_the_one_run_hand_off_frees_phase_a_training_state_and_restarts_from_the_start(world, tiny_model_dir,
                                                                                     tmp_path):
    """`--phase all`: the Phase A trainer's AdamW moments and reference are freed before the Solver's trainer
    loads (two at once would not fit at 7B); the Proposer is kept on disk, the new trainer holds the start."""
    import torch

    from searchplay.recipes.eve.phases import PROPOSER_DIR, restart_from_initial
    from searchplay.rl import PolicyTrainer

    params, _, runtime, _ = world(model_dir=tiny_model_dir)
    params.selfplay.checkpoint_dir = str(tmp_path / "checkpoints")
    phase_a = runtime.trainer = PolicyTrainer(str(tiny_model_dir), params)
    start = next(phase_a.model.parameters()).detach().clone()
    with torch.no_grad():
        next(phase_a.model.parameters()).add_(0.5)  # as Phase A's training would
    restart_from_initial(runtime, params, str(tiny_model_dir), get_variant("eve"))
    assert phase_a._released and runtime.trainer is not phase_a
    assert torch.equal(next(runtime.trainer.model.parameters()), start)
    assert (tmp_path / "checkpoints" / "eve" / PROPOSER_DIR / "config.json").is_file()


def test_phase_b_without_a_hand_off_set_names_the_command_that_writes_it(tmp_path):
    from searchplay.recipes.eve.phases import HandoffError, phase_state

    params = eve_params(tmp_path)
    with pytest.raises(HandoffError, match="--variant eve --phase a"):
        phase_state(params, "b")
    assert phase_state(params, "a") == {"phase": "a"}
    set_path = tmp_path / "checkpoints" / "eve_phase_a" / "solver_set.jsonl"
    set_path.parent.mkdir(parents=True)
    set_path.write_text(json.dumps({"question": "q", "answer": "a", "evidence": "e"}) + "\n")
    assert phase_state(params, "b") == {"phase": "b", "phase_a_iterations": 0,
                                        "solver_set": [{"question": "q", "answer": "a", "evidence": "e"}]}


def test_a_phase_applies_to_a_phased_variant_only(tmp_path):
    from searchplay.selfplay.loop import SelfplayError, run_selfplay
    from searchplay.selfplay.phases import phases_of, run_name
    from searchplay.selfplay.variants import VARIANTS

    params = eve_params(tmp_path)
    with pytest.raises(SelfplayError, match=r"--phase 'a': 'kg_wcr' has all$"):
        run_selfplay(params, "kg_wcr", 1, phase="a")
    assert phases_of(VARIANTS["kg_wcr"]) is None and phases_of(VARIANTS["eve"]).names == ("a", "b")
    assert [run_name(VARIANTS["eve"], phase) for phase in ("all", "a", "b")] == ["eve", "eve_phase_a", "eve"]


@pytest.mark.parametrize(("iterations", "given_a", "given_b", "expected"),
                         [(2, None, None, (1, 1)), (1, None, None, (1, 1)), (5, None, None, (3, 2)),
                          (4, 1, None, (1, 3)), (4, None, 7, (2, 7))])
def test_phase_iterations_split_selfplay_iterations(tmp_path, iterations, given_a, given_b, expected):
    from searchplay.recipes.eve.phases import phase_a_iterations, phase_b_iterations, phase_run_name

    params = eve_params(tmp_path, phase_a_iterations=given_a, phase_b_iterations=given_b)
    params.selfplay.iterations = iterations
    assert (phase_a_iterations(params), phase_b_iterations(params)) == expected
    assert [phase_run_name("eve", p) for p in ("a", "b", "all")] == ["eve_phase_a", "eve", "eve"]


class HashEmbedder:
    """A test fake for ``build_index``: a fixed 8-d vector per passage from its text's hash (no model)."""

    name, dimension, e5_prefixes = "test-hash", 8, False

    def encode_passages(self, passages, show_progress=False):
        import numpy as np

        rows = [np.random.default_rng(abs(hash(p)) % 2**32).normal(size=8) for p in passages]
        return np.array(rows, dtype=np.float32)


def test_the_corpus_selector_picks_phase_a_documents_and_learns_from_the_triples(world, tmp_path):
    """eve.selector: the picks carry a task-type line into the Proposer prompt, the valid triples feed both
    bandits, and the selector's state rides in the checkpoint (state.extra) so a resumed run restores it."""
    from searchplay.recipes.eve.corpus_selector import TASK_TYPES
    from searchplay.recipes.eve.phases import phase_a_seeds, selector_feedback
    from searchplay.retrieval.index import build_index

    params, _, runtime, state = world(selector=True, selector_k0=3)
    params.index.dir = str(tmp_path / "index")
    build_index(params.corpus.out, params.index.dir, params.index.table, HashEmbedder(), ann_threshold=1_000_000,
                fts=False, show_progress=False)
    seeds, picks = phase_a_seeds(runtime, params, state)
    proposals = propose(runtime, get_variant("eve"), seeds)
    triples = [seed_triple(p, runtime.backend.tokenizer, False) for p in proposals]
    correct = {k: [True, False] for k in range(4)}
    m = selector_feedback(runtime, state, picks, list(enumerate(triples)), [1.0] * 4, correct)
    assert m["selector/clusters"] == 3 and m["selector/feedback_rows"] == 4 and 0 < m["selector/run_reward"] <= 1
    saved = state.extra["selector"]
    assert sum(saved["cluster_bandit"]["counts"]) == 3 + 4  # a virtual pull per arm, one per fed-back triple
    assert sum(saved["task_bandit"]["counts"]) == len(TASK_TYPES) + 4
    state.iteration = 1
    seeds, picks = phase_a_seeds(runtime, params, state)
    assert len(seeds) == 4 and all(seed.record["task_type"] in TASK_TYPES for seed in seeds)
    prompt = get_variant("eve").proposer_messages(seeds[0])[1]["content"]
    assert prompt.endswith(seeds[0].record["task_line"]) and prompt.splitlines()[-1].startswith("Question type:")
    eve_objects(runtime).selector = None  # a resumed run: rebuilt from the checkpoint's state, same picks
    again, picks_again = phase_a_seeds(runtime, params, state)
    assert picks_again == picks and [s.seed_id for s in again] == [s.seed_id for s in seeds]


def test_without_the_selector_phase_a_draws_documents_in_the_seeded_order(world):
    from searchplay.recipes.eve.phases import phase_a_seeds

    params, _, runtime, state = world()
    order = [seed.seed_id for seed in state.cursor.seeds[:4]]
    seeds, picks = phase_a_seeds(runtime, params, state)
    assert picks is None and [s.seed_id for s in seeds] == order and "task_line" not in seeds[0].record
