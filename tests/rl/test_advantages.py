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
