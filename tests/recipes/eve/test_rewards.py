"""EVE-Agent's reward terms on hand-computed cases, one test per equation (EVE §2-3)."""

from __future__ import annotations

import math

import pytest

from searchplay.recipes.eve.rewards import (
    brevity_bonus,
    drzero_difficulty,
    drzero_difficulty_expectation,
    drzero_format_score,
    eve_proposer_reward,
    eve_solver_reward,
    eve_valid,
    evidence_verifier,
    is_verbatim,
)


@pytest.mark.parametrize(("k", "expected"), [(0, 0.0), (1, 1.0), (2, 0.75), (3, 0.5), (4, 0.25), (5, 0.0)])
def test_drzero_difficulty_eq2(k, expected):
    assert drzero_difficulty(k, 5) == pytest.approx(expected)


def test_drzero_difficulty_rejects_impossible_counts():
    for k, n in [(-1, 5), (6, 5), (0, 1)]:
        with pytest.raises(ValueError):
            drzero_difficulty(k, n)


def test_difficulty_expectation_eq4_matches_the_binomial_mean_and_its_maximizer():
    n = 5
    for p in (0.0, 0.1, 0.3313, 0.6, 1.0):
        mean = sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) * drzero_difficulty(k, n) for k in range(n + 1))
        assert drzero_difficulty_expectation(p, n) == pytest.approx(mean)
    p_star = 1 - n ** (-1 / (n - 1))  # Eq. 25
    assert drzero_difficulty_expectation(p_star, n) == pytest.approx(1 - p_star)  # 0.6687
    assert all(drzero_difficulty_expectation(p, n) <= drzero_difficulty_expectation(p_star, n) for p in (0.2, 0.45))


def test_evidence_verifier_eq14_is_the_difference_of_exact_match_rates():
    assert evidence_verifier([1, 1, 1, 1, 0], [1, 0, 0, 0, 0]) == pytest.approx(0.6)
    assert evidence_verifier([0] * 5, [1] * 5) == -1.0  # a misleading span
    assert evidence_verifier([1, 0, 1, 0, 1], [1, 0, 1, 0, 1]) == 0.0  # the span adds nothing
    with pytest.raises(ValueError):
        evidence_verifier([], [True])


def test_brevity_bonus_eq15_in_proposer_tokens():
    assert brevity_bonus(0) == 1.0 and brevity_bonus(64) == 0.75 and brevity_bonus(128) == 0.5
    assert brevity_bonus(256) == brevity_bonus(1000) == 0.0
    assert brevity_bonus(50, l_max=100) == 0.5
    with pytest.raises(ValueError):
        brevity_bonus(-1)


def test_eve_proposer_reward_eq16_worked_example_and_drzero_recovery():
    # F_fmt 1, R_DZ(2 of 5) 0.75, V-hat 4/5 - 1/5 = 0.6, |e| = 64 -> B 0.75
    reward = eve_proposer_reward(1.0, drzero_difficulty(2, 5), evidence_verifier([1, 1, 1, 1, 0], [1, 0, 0, 0, 0]),
                                 brevity_bonus(64))
    assert reward == pytest.approx(0.5 + 0.75 + 0.30 + 0.075) == pytest.approx(1.625)
    assert eve_proposer_reward(1.0, 0.75, 0.6, 0.75, lambda_v=0.0, lambda_b=0.0) == pytest.approx(1.25)  # Eq. 18
    assert eve_proposer_reward(0.0, 0.0, 0.0, 0.0) == 0.0  # an invalid rollout
    assert eve_proposer_reward(1.0, 1.0, 1.0, 1.0) == pytest.approx(2.1)  # the maximum


def test_eve_solver_reward_eq19_to_21():
    reward = eve_solver_reward("Paris", "Paris is the capital", "paris", "Paris is the capital of France")
    assert reward == pytest.approx(1.0 + 0.3 * (2 * 1.0 * (3 / 5) / (1.0 + 3 / 5)))  # P 3/3, R 3/5: Norm drops "the"
    assert eve_solver_reward("Lyon", "Paris is the capital", "Paris", "Paris is the capital") == pytest.approx(0.3)
    assert eve_solver_reward(None, None, "Paris", "Paris is the capital") == 0.0
    assert eve_solver_reward("Paris", None, "Paris", "x") == 1.0
    assert eve_solver_reward("Paris", "Paris", "Paris", "Paris", lambda_e=0.0) == 1.0


def test_validity_filter_rejects_empty_and_self_revealing_questions():
    assert eve_valid("Which city hosts the Louvre?", "Paris")
    assert not eve_valid("", "Paris") and not eve_valid("Where?", "") and not eve_valid(None, "Paris")
    assert not eve_valid("Is the Louvre in Paris, France?", "paris")  # Norm(a) inside Norm(q)


def test_format_score_eq9_components():
    doc = "The Louvre is an art museum in Paris."
    # h = 1: F_tool is 1 whatever the calls; 1 of 2 turns thinks; answer in the document
    assert drzero_format_score("Which city?", "Paris", 2, 1, 0, 0, 1, doc) == pytest.approx(0.25 * (1 + 0.5 + 1 + 1))
    # h = 3 with 1 call and 1 response: F_tool = min(2/3, 1)
    assert drzero_format_score("Which city?", "Paris", 2, 2, 1, 1, 3, doc) == pytest.approx(0.25 * (1 + 1 + 2 / 3 + 1))
    # h = 3 with a call that got no response: F_tool 0, and the responses leave Sigma
    assert drzero_format_score("Which city?", "France", 2, 2, 1, 0, 3, doc, ["France"]) == pytest.approx(0.25 * (1 + 1))
    # the answer found only in a response counts when the calls match the responses
    assert drzero_format_score("Which country?", "France", 2, 2, 1, 1, 2, doc, ["Paris is in France"]) == 1.0
    # 6-10 words inside Sigma: 1/2; yes/no always 1; empty question: 0
    long_doc = "one two three four five six seven"
    assert drzero_format_score("Q?", "one two three four five six", 1, 1, 0, 0, 1, long_doc) == pytest.approx(0.875)
    assert drzero_format_score("Q?", "yes", 1, 1, 0, 0, 1, "") == 1.0
    assert drzero_format_score("", "Paris", 1, 1, 0, 0, 1, doc) == 0.0


def test_verbatim_check_strict_and_relaxed():
    sources = ["Doc text: The Louvre is an art museum in Paris.", "Paris is the capital of France."]
    assert is_verbatim("art museum in Paris", sources)
    assert is_verbatim("the capital\nof France", sources)  # whitespace collapses
    assert not is_verbatim("Art Museum in Paris!", sources)
    assert is_verbatim("Art Museum in Paris!", sources, relaxed=True)
    assert not is_verbatim("", sources) and not is_verbatim(None, sources)
    assert not is_verbatim("museum in Paris is the capital", sources)  # spans two sources: not contiguous


# --- the registry entries the 'eve' variant names ----------------------------------------------------------


def _params(**eve):
    from searchplay.config import Params

    params = Params()
    for key, value in eve.items():
        setattr(params.eve, key, value)
    return params


def test_registered_proposer_reward_is_eq16_on_the_worked_example():
    from searchplay.rewards import PROPOSER_REWARDS, ProposerOutcome

    # F_fmt 1, k = 2 of n = 5 (R_DZ 0.75), V-hat 0.6, |e| = 64 (B 0.75): 0.5 + 0.75 + 0.3 + 0.075
    outcome = ProposerOutcome(valid=True, solver_correct=[True, True, False, False, False],
                              record={"format_score": 1.0, "verifier": 0.6, "evidence_tokens": 64})
    assert PROPOSER_REWARDS["eve"](outcome, _params()) == pytest.approx(1.625)
    assert PROPOSER_REWARDS["eve"](outcome, _params(lambda_v=0.0, lambda_b=0.0)) == pytest.approx(1.25)  # Dr. Zero
    no_evidence = ProposerOutcome(valid=True, solver_correct=[True] * 5, record={"format_score": 0.75})
    assert PROPOSER_REWARDS["eve"](no_evidence, _params()) == pytest.approx(0.375)  # U2: V = B = 0; all right: 0
    assert PROPOSER_REWARDS["eve"](ProposerOutcome(valid=False, record={"format_score": 0.0}), _params()) == 0.0


def test_registered_solver_reward_is_eq19_per_rollout():
    from searchplay.rewards import SOLVER_REWARDS, SolverGroup

    group = SolverGroup(correct=[True, False, True], valid=[True, True, False],
                        predictions=["Paris", "Lyon", "Paris"],
                        rollouts=[{"evidence": "Paris is the capital of France"}, {"evidence": None},
                                  {"evidence": "capital of France"}],
                        answer="Paris", record={"evidence": "Paris is the capital of France"})
    scored = SOLVER_REWARDS["eve"](group, _params())
    # 1 + 0.3 x 1; a wrong answer without evidence 0; an invalid rollout keeps only its evidence term
    assert scored.rewards == pytest.approx([1.3, 0.0, 0.3 * token_f1_of("capital of France")])
    with pytest.raises(ValueError, match="gold evidence"):
        SOLVER_REWARDS["eve"](SolverGroup(correct=[True], valid=[True]), _params())


def token_f1_of(prediction: str) -> float:
    from searchplay.answers import token_f1

    return token_f1(prediction, "Paris is the capital of France")


def test_hrpo_estimator_standardizes_within_hop_groups_and_broadcasts_over_model_tokens():
    from searchplay.rl import ADVANTAGE_ESTIMATORS

    advantages = ADVANTAGE_ESTIMATORS["hrpo"]([1.0, 0.0, 0.5], [[1, 0, 1], [1], [1, 1]], _params(), hops=[1, 1, 2])
    assert [[round(a, 4) for a in adv] for adv in advantages] == [[0.7071, 0.0, 0.7071], [-0.7071], [0.5, 0.5]]
    with pytest.raises(ValueError, match="hop count"):
        ADVANTAGE_ESTIMATORS["hrpo"]([1.0], [[1]], _params())


def test_hop_grouped_advantages_standardize_within_each_hop_count():
    """HRPO (EVE / Dr. Zero Eq. 5): groups of equal hop count across the batch, unbiased std, singletons R/(1+eps)."""
    from searchplay.recipes.eve.advantages import hop_grouped_advantages

    rewards = [2.0, 0.0, 1.0, 0.5, 1.5, 0.7]
    hops = [1, 1, 1, 2, 2, 4]
    advantages = hop_grouped_advantages(rewards, hops, eps=0.0)
    assert advantages[:3] == pytest.approx([1.0, -1.0, 0.0])  # mean 1, std 1
    assert advantages[3:5] == pytest.approx([-1 / math.sqrt(2), 1 / math.sqrt(2)])  # mean 1, std sqrt(0.5)
    assert advantages[5] == pytest.approx(0.7)  # a hop group of one: mean 0, std 1 (verl grpo_batch)
    assert hop_grouped_advantages([1.0, 1.0], [3, 3]) == [0.0, 0.0]
    with pytest.raises(ValueError):
        hop_grouped_advantages([1.0], [1, 2])
