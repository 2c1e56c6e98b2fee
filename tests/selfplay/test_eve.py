"""The EVE variant on the real rollout loop with a scripted backend and fake search: the triple and its
format score, the evidence verifier, document seeds, both phases, the hand-off and a resume across it."""

import json
import random

import pytest

from searchplay.selfplay.eve import run_eve_step, seed_triple, verifier_score, verify_evidence
from searchplay.selfplay.replay import ReplayBuffer
from searchplay.selfplay.seeds import SeedCursor, document_shard, load_document_seeds
from searchplay.selfplay.step import LoopState, propose
from searchplay.selfplay.variants import get_variant
from tests.selfplay.conftest import make_params, make_runtime
from tests.selfplay.selfplay_fakes import EveScriptedBackend, write_eve_corpus


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


# --- fast ------------------------------------------------------------------------------------------------


def test_document_seeds_split_the_corpus_into_disjoint_shards_with_hop_counts(tmp_path):
    write_eve_corpus(tmp_path / "passages.jsonl", 200)
    proposer = load_document_seeds(tmp_path / "passages.jsonl", "proposer", 0.2, [4, 3, 2, 1])
    handoff = load_document_seeds(tmp_path / "passages.jsonl", "handoff", 0.2, [4, 3, 2, 1])
    assert not {s.seed_id for s in proposer} & {s.seed_id for s in handoff}
    assert len(proposer) + len(handoff) == 200 and 20 <= len(handoff) <= 60
    hops = [s.num_hops for s in proposer]
    assert set(hops) == {1, 2, 3, 4} and hops.count(1) > hops.count(4)  # 4:3:2:1
    assert proposer[0].record["document"].startswith("(Title: Landmark") and proposer[0].answer == ""
    assert document_shard("7", 0.2) == document_shard("7", 0.2)  # stable


def test_document_seeds_fail_clearly_without_a_corpus(tmp_path):
    from searchplay.selfplay.seeds import SeedError

    with pytest.raises(SeedError, match="searchplay corpus build"):
        load_document_seeds(tmp_path / "absent.jsonl", "proposer", 0.2, [1.0])


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
    assert 0 < m["solver/accuracy"] < 1 and m["proposer/reward_mean"] > 0.5  # 1/2 F_fmt = 0.5 at least
    assert [q["source"] for q in result.questions] == ["eve"] * 4
    assert result.samples["proposer"][0]["evidence"].endswith(".")


@pytest.mark.slow
def test_run_selfplay_goes_from_phase_a_through_the_hand_off_to_phase_b_and_resumes(
        world, trainer, tmp_path, monkeypatch, tiny_model_dir):
    from searchplay.selfplay.checkpoint import CheckpointManager
    from searchplay.selfplay.loop import run_selfplay

    monkeypatch.chdir(tmp_path)
    params, _, runtime, _ = world(trainer=trainer, model_dir=tiny_model_dir)
    params.eve.document_tokens = 64
    resets = []
    runtime.reset_policy = lambda: resets.append(True)
    runtime.handoff_documents = lambda: load_document_seeds(params.corpus.out, "handoff", params.eve.handoff_share,
                                                            params.eve.hop_weights)[:3]
    history = run_selfplay(params, "eve", 1, runtime=runtime)
    assert [row["eve/phase"] for row in history] == [1.0] and not resets

    history = run_selfplay(params, "eve", 2, resume=True, runtime=runtime)
    assert [row["eve/phase"] for row in history] == [1.0, 2.0] and resets == [True]
    phase_b = history[-1]
    assert phase_b["handoff/set_size"] == 3 and phase_b["train/samples_solver"] == 12
    assert phase_b["train/samples_proposer"] == 0 and phase_b["train/weights_changed"] == 1.0
    assert phase_b["solver/evidence_presence_rate"] == 1.0 and phase_b["evidence/verbatim_rate"] == 1.0
    assert phase_b["verifier/v_nonzero"] >= 1 and 0 < phase_b["solver/reward_mean"] < 1.3
    state = json.loads((CheckpointManager(tmp_path / "checkpoints" / "eve").latest() / "state.json").read_text())
    assert state["extra"]["phase_a_iterations"] == 1 and len(state["extra"]["solver_set"]) == 3
    assert {row["seed_id"] for row in state["extra"]["solver_set"]} <= {
        f"doc-{k}" for k in range(40) if document_shard(str(k), params.eve.handoff_share) == "handoff"}
    pool = [json.loads(line) for line in (tmp_path / "reports" / "eve" / "questions.jsonl").read_text().splitlines()]
    assert {row["iteration"] for row in pool} == {1, 2} and all(row["source"] == "eve" for row in pool)


def test_the_logprob_verifier_is_the_difference_of_teacher_forced_answer_probabilities(world, tiny_model_dir):
    from types import SimpleNamespace

    from transformers import AutoModelForCausalLM

    from searchplay.selfplay.eve import answer_probabilities

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
