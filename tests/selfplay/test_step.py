"""One self-play step on the scripted backend + fake search, with the real rollout loop, judge, rewards,
advantages and (slow tests) the real PolicyTrainer on a tiny random-init model shared per module."""

import random

import pytest

from searchplay.selfplay.replay import ReplayBuffer
from searchplay.selfplay.seeds import SeedCursor, load_kg_seeds
from searchplay.selfplay.step import LoopState, Slot, complete_batch, filter_and_verify, propose, run_step
from searchplay.selfplay.variants import get_variant
from tests.selfplay.conftest import make_runtime
from tests.selfplay.selfplay_fakes import ScriptedBackend, question_for, write_kg_pool


@pytest.fixture()
def setup(params_factory, tokenizer, tmp_path):
    """``build(...) -> params, backend, runtime, state, variant``; pass ``trainer`` for a full step."""
    def build(variant="kg_wcr", proposer_mode="good", verifier_mode="good", trainer=None, **selfplay):
        params = params_factory(**selfplay)
        records = write_kg_pool(tmp_path / "kg", 6)
        backend = ScriptedBackend(tokenizer, [r["answer"] for r in records],
                                  {r["answer"]: r["waypoints"] for r in records}, proposer_mode, verifier_mode)
        state = LoopState(0, SeedCursor(load_kg_seeds(tmp_path / "kg")), ReplayBuffer(), random.Random(0))
        return params, backend, make_runtime(params, backend, trainer=trainer), state, get_variant(variant)
    return build


# --- fast: no trainer ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("verifier_mode", "reason"), [("good", None), ("wrong", "rag_wrong_answer"),
                                                        ("garbage", "rag_no_answer"), ("error", "rag_verifier_error")])
def test_rag_verification_fails_closed(setup, verifier_mode, reason):
    params, backend, runtime, state, variant = setup(verifier_mode=verifier_mode)
    proposals = propose(runtime, variant, state.cursor.next_batch(3))
    filter_and_verify(runtime, proposals, params, state.rng)
    assert [p.reason for p in proposals] == [reason] * 3
    assert backend.verifier_calls == (1 if verifier_mode == "error" else 3)  # one batched call raised
    assert all(len(p.trajectory.search_queries) == 2 for p in proposals)


@pytest.mark.parametrize(("proposer_mode", "reason"), [("one_search", "too_few_searches"),
                                                        ("leak", "answer_in_question"), ("no_question", "no_question")])
def test_rule_filter_rejects_before_the_verifier(setup, proposer_mode, reason):
    params, backend, runtime, state, variant = setup(proposer_mode=proposer_mode)
    proposals = propose(runtime, variant, state.cursor.next_batch(3))
    filter_and_verify(runtime, proposals, params, state.rng)
    assert [p.reason for p in proposals] == [reason] * 3 and backend.verifier_calls == 0


def test_batch_completion_strategies():
    rng = random.Random(0)
    fresh = [Slot(question_for("A"), "A", ["W"], "sg-a", "fresh", 0)]
    replay = ReplayBuffer([{"question": question_for("B"), "answer": "B", "waypoints": [], "seed_id": "sg-b"}])
    assert [s.source for s in complete_batch(fresh, 3, "replay", replay, rng)] == ["fresh", "replay", "replay"]
    assert [s.answer for s in complete_batch([], 2, "reuse", replay, rng)] == ["B", "B"]
    assert complete_batch([], 2, "replay", ReplayBuffer(), rng) == []  # no dummy problem
    replicated = complete_batch(fresh, 2, "resample", replay, rng)
    assert [(s.source, s.answer, s.proposer_index) for s in replicated] == [("fresh", "A", 0), ("replicate", "A", None)]
    assert complete_batch(fresh, 3, "none", replay, rng) == fresh


# --- slow: the real PolicyTrainer --------------------------------------------------------------------------


@pytest.mark.slow
def test_a_valid_batch_trains_both_roles(setup, trainer):
    params, backend, runtime, state, variant = setup(trainer=trainer)
    result = run_step(runtime, variant, params, state)
    m = result.metrics
    assert m["filter/valid_rate_rule"] == 1.0 and m["filter/valid_rate_rag"] == 1.0
    assert m["batch/fresh"] == 3 and m["batch/replayed"] == 0 and m["solver/rollouts"] == 9
    assert 0 < m["solver/accuracy"] < 1 and m["proposer/reward_mean"] > 0
    assert m["train/samples_proposer"] == 3 and m["train/samples_solver"] == 9
    assert m["train/groups_nonzero_advantage"] >= 1 and m["train/weights_changed"] == 1.0
    # the SSP code's schedule: a Proposer update (1 step), then a Solver update (2 mini-batch steps)
    steps = (m["train/proposer/optimizer_steps"], m["train/solver/optimizer_steps"], m["train/optimizer_steps"])
    assert steps == (1, 2, 3)
    assert m["train/proposer/grad_norm"] > 0 and m["train/solver/grad_norm"] > 0
    assert m["solver/wcr_process_reward"] > 0  # waypoint titles in <think> of wrong rollouts earn credit
    assert m["coverage/mean_incorrect"] > 0 and "coverage/spearman_rho" in m
    assert backend.updates == 1 and state.cursor.position == 3 and len(state.replay) == 3
    assert len(result.samples["proposer"]) == 3 and "<question>" in result.samples["proposer"][0]["response"]
    assert m["format/proposer_valid_rate"] == 1.0 and m["format/verifier_format_rate"] == 1.0
    assert m["format/solver_valid_rate"] == 1.0
    # the shared trainer has drifted over earlier tests too; the distance to the KL anchor only grows from 0
    assert m["train/weight_delta_l2_from_start"] > 0


@pytest.mark.slow
def test_binary_variant_has_no_process_reward_and_the_buffer_resets(setup, trainer):
    params, _, runtime, state, variant = setup("kg", trainer=trainer, replay_reset_every=1)
    m = run_step(runtime, variant, params, state).metrics
    assert m["solver/wcr_process_reward"] == 0.0 and m["batch/fresh"] == 3
    assert len(state.replay) == 0 and m["replay/size"] == 0  # cleared after step 1 of a 1-step period


@pytest.mark.slow
def test_rag_rejections_are_refilled_from_replay_with_zero_proposer_reward(setup, trainer):
    params, _, runtime, state, variant = setup(verifier_mode="wrong", trainer=trainer)
    state.replay.add([{"question": question_for("Answer0"), "answer": "Answer0", "waypoints": ["Seed0"],
                       "seed_id": "sg-0"}])
    m = run_step(runtime, variant, params, state).metrics
    assert m["filter/valid_rate_rule"] == 1.0 and m["filter/valid_rate_rag"] == 0.0
    assert m["filter/rejected_rag_wrong_answer"] == 3 and m["format/verifier_format_rate"] == 1.0
    assert m["batch/replayed"] == 3 and m["train/samples_solver"] == 9
    assert m["proposer/reward_mean"] == 0.0  # replayed slots: the Proposer keeps 0


@pytest.mark.slow
def test_no_valid_question_and_empty_buffer_skips_the_solver_update(setup, trainer):
    params, backend, runtime, state, variant = setup(proposer_mode="one_search", trainer=trainer)
    m = run_step(runtime, variant, params, state).metrics
    assert m["filter/rejected_too_few_searches"] == 3 and backend.verifier_calls == 0
    assert m["batch/solver_update_skipped"] == 1.0 and m["train/samples_solver"] == 0
    assert m["train/samples_proposer"] == 3 and m["proposer/reward_mean"] == 0.0
    assert m["train/optimizer_steps"] == 1 and "train/solver/grad_norm" not in m


@pytest.mark.slow
def test_combine_update_takes_one_step_over_both_roles(setup, trainer):
    params, _, runtime, state, variant = setup(trainer=trainer, combine_update=True)
    m = run_step(runtime, variant, params, state).metrics
    assert m["train/optimizer_steps"] == 1 and "train/proposer/grad_norm" not in m


@pytest.mark.slow
def test_resample_draws_more_seeds_then_replicates(setup, trainer):
    params, _, runtime, state, variant = setup(proposer_mode="leak", batch_completion="resample",
                                               resample_max_rounds=2, trainer=trainer)
    m = run_step(runtime, variant, params, state).metrics
    assert m["proposer/resample_rounds"] == 2 and m["proposer/proposals"] == 9
    assert m["filter/rejected_answer_in_question"] == 9 and m["batch/questions"] == 0


@pytest.mark.slow
def test_dynamic_sampling_solves_more_seeds_until_a_group_has_a_signal_and_drops_the_rest(setup, trainer):
    params, backend, runtime, state, variant = setup("kg", trainer=trainer, dynamic_sampling=True)
    backend.solver_correct_every = 12  # rollouts 1-9 (round 1) all wrong; rollout 12 (round 2) right
    m = run_step(runtime, variant, params, state).metrics
    assert m["batch/dynamic_sampling_rounds"] == 1 and m["proposer/proposals"] == 6 and m["train/groups"] == 6
    assert m["train/groups_nonzero_advantage"] == 1 and m["train/groups_dropped_no_signal"] == 5
    assert m["train/samples_solver"] == 3 and m["train/samples_proposer"] == 6 and m["solver/rollouts"] == 18
    assert state.cursor.position == 6 and "train/solver/grad_norm" in m
    assert m["filter/valid_rate_rag"] == 1.0 and m["batch/fresh"] == 6  # the extra round's questions count


@pytest.mark.slow
def test_dynamic_sampling_gives_up_after_its_rounds_and_skips_the_solver_update(setup, trainer):
    params, backend, runtime, state, variant = setup("kg", trainer=trainer, dynamic_sampling=True,
                                                     dynamic_sampling_max_rounds=2)
    backend.solver_correct_every = 10**6
    m = run_step(runtime, variant, params, state).metrics
    assert m["batch/dynamic_sampling_rounds"] == 2 and m["train/groups"] == 9
    assert m["train/groups_nonzero_advantage"] == 0 and m["train/samples_solver"] == 0
    assert m["batch/solver_update_skipped"] == 1.0 and m["train/samples_proposer"] == 9


@pytest.mark.slow
def test_without_dynamic_sampling_groups_without_signal_stay_in_the_update(setup, trainer):
    params, backend, runtime, state, variant = setup("kg", trainer=trainer)
    backend.solver_correct_every = 10**6
    m = run_step(runtime, variant, params, state).metrics
    assert m["batch/dynamic_sampling_rounds"] == 0 and m["train/groups_dropped_no_signal"] == 0
    assert m["train/samples_solver"] == 9
