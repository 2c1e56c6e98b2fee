import math
import random

import pytest

from searchplay.intervals import wilson_interval
from searchplay.rewards import PROPOSER_REWARDS, SOLVER_REWARDS
from searchplay.rl import ADVANTAGE_ESTIMATORS
from searchplay.selfplay.metrics import (
    coverage_statistics,
    fresh_accuracy,
    fresh_accuracy_trend,
    nonzero_advantage_groups,
)
from searchplay.selfplay.replay import ReplayBuffer, is_reset_step
from searchplay.selfplay.seeds import Seed
from searchplay.selfplay.variants import VARIANTS, get_variant
from tests.selfplay.selfplay_fakes import subgraph_record


def test_replay_buffer_samples_uniformly_roundtrips_and_clears():
    buffer = ReplayBuffer()
    assert buffer.sample(3, random.Random(0)) == []
    buffer.add([{"question": "q1", "answer": "a1"}, {"question": "q2", "answer": "a2"}])
    drawn = buffer.sample(200, random.Random(0))
    assert len(drawn) == 200 and {d["question"] for d in drawn} == {"q1", "q2"}
    assert ReplayBuffer.from_state(buffer.to_state()).entries == buffer.entries
    buffer.clear()
    assert len(buffer) == 0
    assert [s for s in range(1, 31) if is_reset_step(s, 10)] == [10, 20, 30]


def test_every_variant_resolves_in_the_registries():
    for variant in VARIANTS.values():
        assert variant.solver_reward in SOLVER_REWARDS
        assert variant.solver_advantage in ADVANTAGE_ESTIMATORS
        assert variant.proposer_advantage in ADVANTAGE_ESTIMATORS
        assert variant.proposer_reward in PROPOSER_REWARDS
    assert get_variant("kg_wcr").solver_reward == "wcr" and get_variant("kg").solver_reward == "binary"
    with pytest.raises(ValueError, match="registered"):
        get_variant("kgwcr")


def test_the_names_below_eval_are_exactly_the_registered_variants():
    from searchplay.model_paths import selfplay_variants

    assert selfplay_variants() == tuple(VARIANTS)  # built-ins and recipes alike, in registration order


def test_proposer_prompt_dispatch_by_registry():
    record = subgraph_record(0, 5)
    seed = Seed("sg-0", record["answer"], tuple(record["waypoints"]), 3, record)
    ssp = get_variant("ssp").proposer_messages(seed)
    kg = get_variant("kg_wcr").proposer_messages(seed)
    assert "The answer I provided is: Answer0." in ssp[1]["content"] and "gold_chain" not in ssp[1]["content"]
    assert '"correct_answer": "Answer0"' in kg[1]["content"]
    assert get_variant("ssp_kg_answers").proposer_messages(seed) == ssp
    draft = get_variant("kg_draft").proposer_messages(seed)
    assert draft[0] == kg[0] and '"draft_question": "What is the relation 2 of' in draft[1]["content"]
    assert [get_variant(name).proposer_sees_path for name in ("ssp", "kg", "kg_draft", "ssp_kg_answers")] == [
        False, True, True, False]
    with pytest.raises(ValueError, match="subgraph record"):
        get_variant("kg").proposer_messages(Seed("x", "Paris"))


def test_coverage_statistics_by_outcome_and_bins():
    stats = coverage_statistics([1.0, 0.5, 0.0, 0.0], [True, False, False, True])
    assert stats["coverage/mean_correct"] == 0.5 and stats["coverage/mean_incorrect"] == 0.25
    assert stats["coverage/accuracy_bin_0.00_0.25"] == 0.5 and stats["coverage/accuracy_bin_0.75_1.00"] == 1.0
    assert math.isnan(stats["coverage/accuracy_bin_0.25_0.50"])
    empty = coverage_statistics([], [])
    assert set(empty) == set(stats) and all(math.isnan(v) for k, v in empty.items() if "count" not in k)
    assert nonzero_advantage_groups([[0.0, 0.0], [0.5, -0.5], []]) == 1


def test_fresh_accuracy_counts_only_the_rollouts_on_this_iterations_questions():
    correct = [[True, False, False], [True, True, True], [False, False, True]]
    stats = fresh_accuracy(correct, ["fresh", "replay", "replicate"])  # a replicate repeats a fresh question
    assert stats["solver/fresh_accuracy"] == pytest.approx(1 / 3) and stats["solver/fresh_rollouts"] == 3
    assert (stats["solver/fresh_accuracy_ci_low"], stats["solver/fresh_accuracy_ci_high"]) == wilson_interval(1, 3)
    both = fresh_accuracy(correct, ["fresh", "fresh", "replay"])
    assert both["solver/fresh_accuracy"] == pytest.approx(4 / 6) and both["solver/fresh_rollouts"] == 6
    none = fresh_accuracy(correct, ["replay"] * 3)
    assert none["solver/fresh_rollouts"] == 0 and all(math.isnan(v) for k, v in none.items() if "rollouts" not in k)
    assert set(none) == set(stats)


def test_the_fresh_accuracy_trend_compares_the_first_and_last_third_of_the_iterations():
    def rows(*accuracies):
        return [{"solver/fresh_accuracy": a, "solver/fresh_rollouts": 20.0} for a in accuracies]

    rising = fresh_accuracy_trend(rows(0.0, 0.05, 0.1, 0.2, 0.4, 0.5))  # thirds of 2: 1/40 then 18/40
    assert rising["trend/fresh_accuracy_first_third"] == pytest.approx(0.025)
    assert rising["trend/fresh_accuracy_last_third"] == pytest.approx(0.45)
    assert rising["trend/fresh_accuracy_p"] < 0.001 and rising["trend/iterations_per_third"] == 2
    assert fresh_accuracy_trend(rows(0.5, 0.5, 0.0))["trend/fresh_accuracy_p"] == pytest.approx(1.0)
    assert math.isnan(fresh_accuracy_trend(rows(0.1, 0.2))["trend/fresh_accuracy_p"])  # no thirds
    skipped = rows(0.1, 0.2, 0.3)
    skipped[0] = {"solver/fresh_accuracy": math.nan, "solver/fresh_rollouts": 0.0}  # no fresh question
    assert math.isnan(fresh_accuracy_trend(skipped)["trend/fresh_accuracy_p"])
