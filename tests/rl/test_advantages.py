import math

import pytest

from searchplay.config import Params
from searchplay.rl import ADVANTAGE_ESTIMATORS, get_advantage_estimator, group_advantages, reinforce_advantages


def test_group_advantages_use_sample_std():
    r = [1.0, 0.225, 0.15, 0.0, 0.0]
    mean = sum(r) / 5
    std = math.sqrt(sum((x - mean) ** 2 for x in r) / 4)
    assert group_advantages(r) == pytest.approx([(x - mean) / (std + 1e-6) for x in r])
    assert group_advantages([1.0, 0.0]) == pytest.approx([1 / math.sqrt(2), -1 / math.sqrt(2)], rel=1e-5)


def test_group_advantages_edge_cases():
    assert group_advantages([1.0] * 5) == [0.0] * 5   # all correct: no signal
    assert group_advantages([0.0] * 5) == [0.0] * 5   # all wrong, no coverage: no signal
    assert group_advantages([0.7]) == [0.0]           # a group of one
    # equal rewards whose float mean rounds (0.8 by WCR's alpha 0.3 at G 6, 0.3 at G 10): exactly 0, not 1e-11,
    # so dynamic sampling does not keep them as groups with a signal
    for reward, size in ((0.8, 6), (0.3, 10), (0.1, 8), (0.7, 8)):
        assert group_advantages([reward] * size) == [0.0] * size
    with pytest.raises(ValueError, match="empty"):
        group_advantages([])


def test_reinforce_advantage_is_the_reward_or_reward_minus_batch_mean():
    assert reinforce_advantages([1.0, 0.2, 0.0]) == [1.0, 0.2, 0.0]
    assert reinforce_advantages([1.0, 0.2, 0.0], "batch_mean") == pytest.approx([0.6, -0.2, -0.4])
    with pytest.raises(ValueError, match="baseline"):
        reinforce_advantages([1.0], "ema")


def test_estimators_broadcast_over_model_tokens_only():
    params = Params()
    masks = [[1, 1, 0, 0, 1], [1, 0, 1]]
    grpo = ADVANTAGE_ESTIMATORS["grpo"]([1.0, 0.0], masks, params)
    a = 1 / math.sqrt(2)
    assert grpo[0] == pytest.approx([a, a, 0, 0, a], rel=1e-5)
    assert grpo[1] == pytest.approx([-a, 0, -a], rel=1e-5)
    rf = get_advantage_estimator("reinforce")([0.8, 0.0], masks, params)
    assert rf == [[0.8, 0.8, 0.0, 0.0, 0.8], [0.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="one per sample"):
        ADVANTAGE_ESTIMATORS["grpo"]([1.0], masks, params)
    with pytest.raises(KeyError, match="registered"):
        get_advantage_estimator("ppo")


# --- SAPO (GDCR paper Eqs. 13-14, a worked example) ---------------------------------------------


def test_gdcr_step_advantages_match_the_worked_example():
    from searchplay.rl import gdcr_step_advantages

    assert [round(a, 3) for a in gdcr_step_advantages([0.875, 1.875, 1.0])] == [-0.843, 1.0, -0.562]
    assert gdcr_step_advantages([0.7]) == [0.0]  # one step: plain GRPO
    assert gdcr_step_advantages([0.0, 0.0, 0.0]) == [0.0, 0.0, 0.0]
    assert gdcr_step_advantages([0.1] * 7) == [0.0] * 7  # equal, whatever the mean's rounding
    assert gdcr_step_advantages([]) == []
    assert max(gdcr_step_advantages([0.0] * 9 + [10.0])) == 1.0  # clipped to [-1, 1]


def test_sapo_is_grpo_at_lambda_zero_and_never_flips_the_outcome_sign():
    from searchplay.rl import group_advantages, sapo_advantages

    outcome, steps = [1.0, 0.0, 0.0], [[0.875, 1.875, 1.0], [2.0, 0.0], [0.5]]
    grpo = group_advantages(outcome)
    assert sapo_advantages(outcome, steps, lam=0.0) == [[a] * len(s) for a, s in zip(grpo, steps, strict=True)]
    for lam in (0.3, 0.5, 1.0):
        for a_o, per_step in zip(grpo, sapo_advantages(outcome, steps, lam=lam), strict=True):
            assert all(a * a_o >= 0 for a in per_step)


def test_sapo_worked_example_with_unit_outcome_advantage():
    """Digest §5.6: A_o = +1 gives (0.579, 1.5, 0.719); A_o = -1 gives (-1.421, -0.5, -1.281)."""
    from searchplay.rl import sapo_advantages

    outcome = [1.0, 0.0]  # GRPO with sample std on two rollouts: A_o = +-0.7071
    a_o = 0.5 / (0.5 ** 0.5)
    positive, negative = sapo_advantages(outcome, [[0.875, 1.875, 1.0], [0.875, 1.875, 1.0]], lam=0.5)
    assert [round(a / a_o, 3) for a in positive] == [0.579, 1.5, 0.719]
    assert [round(a / a_o, 3) for a in negative] == [-1.421, -0.5, -1.281]
    with pytest.raises(ValueError, match="one step-reward sequence"):
        sapo_advantages([1.0], [[1.0], [2.0]])


def test_sapo_estimator_broadcasts_each_step_to_its_tokens():
    from searchplay.config import Params
    from searchplay.rl import ADVANTAGE_ESTIMATORS, sapo_advantages

    params = Params()
    masks, token_steps = [[1, 1, 0, 0, 1], [1, 1]], [[0, 0, 0, 0, 1], [0, 0]]
    step_rewards = [[1.0, 0.0], [0.0]]
    tokens = ADVANTAGE_ESTIMATORS["sapo"]([1.0, 0.0], masks, params, step_rewards=step_rewards,
                                          token_steps=token_steps)
    (first, second), (third,) = sapo_advantages([1.0, 0.0], step_rewards, lam=0.5, eps=params.selfplay.adv_eps)
    assert tokens == [[first, first, 0.0, 0.0, second], [third, third]]
    with pytest.raises(ValueError, match="step_rewards and token_steps"):
        ADVANTAGE_ESTIMATORS["sapo"]([1.0, 0.0], masks, params)
