import math

import pytest
import torch

from searchplay.rl.losses import low_var_kl, policy_loss_terms, token_weights


def test_clipped_surrogate_uses_asymmetric_bounds_and_dual_clip():
    old = torch.zeros(4)
    logp = torch.log(torch.tensor([1.5, 1.5, 0.5, 5.0]))
    adv = torch.tensor([1.0, -1.0, -1.0, -1.0])
    loss, clipped = policy_loss_terms(logp, old, adv, clip_low=0.2, clip_high=0.285, clip_ratio_c=3.0)
    # A>0, rho 1.5 > 1.285: clipped to 1.285; A<0, rho 1.5: unclipped 1.5 (max of losses);
    # A<0, rho 0.5: clipped to 0.8; A<0, rho 5: dual clip caps at 3
    assert loss.tolist() == pytest.approx([-1.285, 1.5, 0.8, 3.0])
    assert clipped.tolist() == [1.0, 0.0, 1.0, 0.0]


def test_ratio_one_gives_minus_advantage():
    loss, clipped = policy_loss_terms(torch.zeros(3), torch.zeros(3), torch.tensor([0.5, -2.0, 0.0]))
    assert loss.tolist() == pytest.approx([-0.5, 2.0, 0.0]) and clipped.sum() == 0


def test_low_var_kl_is_k3_zero_at_equality_and_clamped():
    assert low_var_kl(torch.tensor([-1.0]), torch.tensor([-1.0])).item() == 0.0
    p, q = -1.0, -1.5
    assert low_var_kl(torch.tensor([p]), torch.tensor([q])).item() == pytest.approx(math.exp(q - p) - (q - p) - 1)
    assert low_var_kl(torch.tensor([-30.0]), torch.tensor([0.0])).item() == 10.0


def test_token_weights_aggregate_over_the_whole_batch():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    w = token_weights(mask, "token-mean", 6, 4).flatten().tolist()
    assert w == pytest.approx([1 / 6, 1 / 6, 0, 1 / 6, 0, 0])
    w = token_weights(mask, "seq-mean-token-mean", 6, 4).flatten().tolist()
    assert w == pytest.approx([1 / 8, 1 / 8, 0, 1 / 4, 0, 0])
    w = token_weights(mask, "seq-mean-token-sum", 6, 4).flatten().tolist()
    assert w == pytest.approx([1 / 4, 1 / 4, 0, 1 / 4, 0, 0])
    with pytest.raises(ValueError, match="loss_agg_mode"):
        token_weights(mask, "seq-mean", 1, 1)


def test_token_mean_lets_zero_advantage_proposer_tokens_dilute_the_solver_gradient():
    """One combined token-mean batch: adding a long Proposer sequence with advantage 0 shrinks every
    Solver token's weight by N_solver / (N_solver + N_proposer); seq-mean-token-mean only by the
    share of sequences, and separate role updates (the SSP schedule) not at all."""
    solver = torch.tensor([[1, 1, 1, 1, 0, 0, 0, 0, 0, 0]])
    proposer = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1, 1, 1]])
    both = torch.cat([solver, proposer])
    alone = token_weights(solver, "token-mean", 4, 1)[0, 0].item()
    mixed = token_weights(both, "token-mean", 14, 2)[0, 0].item()
    assert mixed == pytest.approx(alone * 4 / 14)
    alone = token_weights(solver, "seq-mean-token-mean", 4, 1)[0, 0].item()
    mixed = token_weights(both, "seq-mean-token-mean", 14, 2)[0, 0].item()
    assert mixed == pytest.approx(alone / 2)  # independent of the Proposer's length
