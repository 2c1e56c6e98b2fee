import pytest

from searchplay.rewards import answer_spam_guard, binary_rewards, proposer_reward, wcr_rewards


def test_wcr_vectors_from_the_notes_max_taken_over_invalid_rollouts_too():
    # Eq. 6 over the group: g_max = 1.0 comes from the invalid rollout
    r = wcr_rewards([1, 0, 0, 0, 0], [1, 1, 1, 1, 0], [0.25, 0.75, 0.5, 0.0, 1.0])
    assert r == pytest.approx([1.0, 0.225, 0.15, 0.0, 0.0])
    r = wcr_rewards([1, 0, 0, 0, 0], [1, 1, 1, 1, 1], [0.25, 0.75, 0.5, 0.0, 1.0])
    assert r == pytest.approx([1.0, 0.225, 0.15, 0.0, 0.3])


def test_wcr_all_wrong_is_rescued_by_coverage():
    assert wcr_rewards([0] * 5, [1] * 5, [0.2, 0.4, 0, 0, 0]) == pytest.approx([0.15, 0.3, 0, 0, 0])


def test_wcr_all_coverage_zero_and_all_correct():
    assert wcr_rewards([0] * 5, [1] * 5, [0.0] * 5) == [0.0] * 5
    assert wcr_rewards([1] * 3, [1] * 3, [0.0, 0.5, 1.0]) == [1.0] * 3


def test_wcr_max_includes_correct_rollouts_and_alpha_scales():
    # the correct rollout holds g_max = 0.8, so the wrong one gets 0.4 / 0.8 = 0.5 of alpha
    assert wcr_rewards([1, 0], [1, 1], [0.8, 0.4], alpha=0.5) == pytest.approx([1.0, 0.25])


def test_correct_but_invalid_rollout_gets_zero():
    assert wcr_rewards([1, 0], [0, 1], [1.0, 1.0]) == [0.0, 0.3]
    assert binary_rewards([True, True], [False, True]) == [0.0, 1.0]


def test_wcr_rejects_bad_input_with_clear_errors():
    with pytest.raises(ValueError, match="lengths"):
        wcr_rewards([1, 0], [1], [0.1, 0.2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        wcr_rewards([0], [1], [1.5])
    with pytest.raises(ValueError, match="alpha"):
        wcr_rewards([0], [1], [0.5], alpha=1.5)


def test_proposer_reward_is_one_minus_solve_rate_and_zero_for_invalid():
    assert proposer_reward([True, False, False, False, False]) == pytest.approx(0.8)
    assert proposer_reward([True] * 5) == 0.0
    assert proposer_reward([False] * 5) == 1.0
    assert proposer_reward([False] * 5, valid=False) == 0.0
    with pytest.raises(ValueError, match="valid=False"):
        proposer_reward([])


def test_answer_spam_guard_divides_by_four_above_the_limit():
    assert answer_spam_guard([1.0, 0.3, 1.0], [10, 11, 0], max_answer_tags=10) == [1.0, 0.075, 1.0]
