import pytest

from searchplay.config import Params
from searchplay.rewards import (
    PROPOSER_REWARDS,
    SOLVER_REWARDS,
    ProposerOutcome,
    SolverGroup,
    get_solver_reward,
)


def _group(**kw):
    base = dict(correct=[True, False, False], valid=[True, True, False],
                think_texts=["Bern", "ETH Zurich then Zurich", "Zurich Switzerland ETH Zurich"],
                waypoints=["Albert Einstein", "ETH Zurich", "Zurich", "Switzerland"], answer="Bern")
    base.update(kw)
    return SolverGroup(**base)


def test_registries_hold_the_paper_rewards_under_one_signature():
    params = Params()
    assert set(SOLVER_REWARDS) >= {"binary", "wcr"} and "ssp" in PROPOSER_REWARDS
    assert SOLVER_REWARDS["binary"](_group(), params).rewards == [1.0, 0.0, 0.0]
    out = SOLVER_REWARDS["wcr"](_group(), params)
    assert out.details["coverage"] == pytest.approx([0.0, 0.5, 0.75])
    assert out.rewards == pytest.approx([1.0, 0.3 * 0.5 / 0.75, 0.0])
    assert PROPOSER_REWARDS["ssp"](ProposerOutcome(valid=True, solver_correct=[True, False, False, False]),
                                   params) == 0.75  # 1 - solve rate (at 0.5 both would read 0.5)
    assert PROPOSER_REWARDS["ssp"](ProposerOutcome(valid=False), params) == 0.0


def test_wcr_reads_alpha_and_casefold_from_params():
    params = Params.model_validate({"wcr": {"alpha": 0.6, "casefold": True}})
    out = SOLVER_REWARDS["wcr"](_group(think_texts=["", "eth zurich", ""]), params)
    assert out.rewards == pytest.approx([1.0, 0.6, 0.0])


def test_spam_guard_uses_agent_max_answer_tags():
    group = _group(answer_tag_counts=[11, 1, 1])
    assert SOLVER_REWARDS["binary"](group, Params()).rewards == [0.25, 0.0, 0.0]


def test_bad_groups_and_names_fail_clearly():
    with pytest.raises(ValueError, match="lengths"):
        _group(valid=[True])
    with pytest.raises(ValueError, match="think"):
        SOLVER_REWARDS["wcr"](_group(think_texts=[]), Params())
    with pytest.raises(KeyError, match="registered"):
        get_solver_reward("eve2")
