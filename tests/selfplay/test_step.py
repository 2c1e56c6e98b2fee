"""One self-play step on the scripted backend + fake search, with the real rollout loop, judge, rewards,
advantages and PolicyTrainer (tiny random-init model)."""

import random

import pytest
from conftest import make_runtime
from selfplay_fakes import ScriptedBackend, write_kg_pool

from searchplay.selfplay.replay import ReplayBuffer
from searchplay.selfplay.seeds import SeedCursor, load_kg_seeds
from searchplay.selfplay.step import LoopState, run_step
from searchplay.selfplay.variants import get_variant

pytestmark = pytest.mark.slow  # each step runs the real PolicyTrainer: 3 forward passes over a 49k vocabulary


@pytest.fixture()
def setup(params_factory, tokenizer, tmp_path):
    def build(variant="kg_wcr", proposer_mode="good", verifier_mode="good", **selfplay):
        params = params_factory(**selfplay)
        records = write_kg_pool(tmp_path / "kg", 6)
        backend = ScriptedBackend(tokenizer, [r["answer"] for r in records],
                                  {r["answer"]: r["waypoints"] for r in records}, proposer_mode, verifier_mode)
        state = LoopState(0, SeedCursor(load_kg_seeds(tmp_path / "kg")), ReplayBuffer(), random.Random(0))
        return params, backend, make_runtime(params, backend), state, get_variant(variant)
    return build


def test_a_valid_batch_trains_both_roles(setup):
    params, backend, runtime, state, variant = setup()
    result = run_step(runtime, variant, params, state)
    m = result.metrics
    assert m["filter/valid_rate_rule"] == 1.0 and m["filter/valid_rate_rag"] == 1.0
    assert m["batch/fresh"] == 3 and m["batch/replayed"] == 0 and m["solver/rollouts"] == 9
    assert 0 < m["solver/accuracy"] < 1 and m["proposer/reward_mean"] > 0
    assert m["train/samples_proposer"] == 3 and m["train/samples_solver"] == 9
    assert m["train/groups_nonzero_advantage"] >= 1 and m["train/weights_changed"] == 1.0
    assert m["solver/wcr_process_reward"] > 0  # waypoint titles in <think> of wrong rollouts earn credit
    assert m["coverage/mean_incorrect"] > 0 and "coverage/spearman_rho" in m
    assert backend.updates == 1 and state.cursor.position == 3 and len(state.replay) == 3
    assert len(result.samples["proposer"]) == 3 and "<question>" in result.samples["proposer"][0]["response"]


def test_binary_variant_has_no_process_reward(setup):
    params, _, runtime, state, variant = setup("kg")
    assert run_step(runtime, variant, params, state).metrics["solver/wcr_process_reward"] == 0.0


@pytest.mark.parametrize(("verifier_mode", "reason"), [("wrong", "rag_wrong_answer"), ("garbage", "rag_no_answer"),
                                                        ("error", "rag_verifier_error")])
def test_rag_rejections_fail_closed_and_replay_refills(setup, verifier_mode, reason):
    params, _backend, runtime, state, variant = setup(verifier_mode=verifier_mode)
    state.replay.add([{"question": "Which entity is described by clue code c0 in this multi hop chain of facts?",
                       "answer": "Answer0", "waypoints": ["Seed0"], "seed_id": "sg-0"}])
    m = run_step(runtime, variant, params, state).metrics
    assert m["filter/valid_rate_rule"] == 1.0 and m["filter/valid_rate_rag"] == 0.0
    assert m[f"filter/rejected_{reason}"] == 3
    assert m["batch/replayed"] == 3 and m["proposer/reward_mean"] == 0.0  # replayed slots: Proposer keeps 0


def test_no_valid_question_and_empty_buffer_skips_the_solver_update(setup):
    params, backend, runtime, state, variant = setup(proposer_mode="one_search")
    m = run_step(runtime, variant, params, state).metrics
    assert m["filter/rejected_too_few_searches"] == 3 and backend.verifier_calls == 0
    assert m["batch/solver_update_skipped"] == 1.0 and m["train/samples_solver"] == 0
    assert m["train/samples_proposer"] == 3 and m["proposer/reward_mean"] == 0.0


def test_replay_buffer_is_cleared_every_reset_period(setup):
    params, _, runtime, state, variant = setup(replay_reset_every=1)
    run_step(runtime, variant, params, state)
    assert len(state.replay) == 0


def test_resample_draws_more_seeds_then_replicates(setup):
    params, _, runtime, state, variant = setup(proposer_mode="leak", batch_completion="resample",
                                               resample_max_rounds=2)
    m = run_step(runtime, variant, params, state).metrics
    assert m["proposer/resample_rounds"] == 2 and m["proposer/proposals"] == 9
    assert m["filter/rejected_answer_in_question"] == 9 and m["batch/questions"] == 0
