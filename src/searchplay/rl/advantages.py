"""Advantage estimators: GRPO for the Solver, REINFORCE for the Proposer, SAPO for step-level credit.

Each registered estimator maps sequence rewards to PER-TOKEN advantages over the response tokens of
each sample: the sequence advantage is broadcast over model tokens (loss_mask 1) and is 0 on
environment tokens (``<information>``, loss_mask 0), which the loss excludes anyway.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from searchplay.config import Params


def group_advantages(rewards: Sequence[float], eps: float = 1e-6) -> list[float]:
    """GRPO group-relative advantage A_i = (r_i - mean(r)) / (std(r) + eps) (SSP Eq. 3; KG-paths Eq. 10).

    std is the SAMPLE std (ddof = 1), as verl's GRPO (``torch.std``, unbiased). A group of one has no
    spread and gets 0 (verl instead uses mean 0, std 1 there; the Proposer uses ``reinforce_advantages``).

    >>> [round(a, 4) for a in group_advantages([1.0, 0.0, 0.0, 0.0, 0.0])]
    [1.7889, -0.4472, -0.4472, -0.4472, -0.4472]
    >>> group_advantages([1.0, 1.0]), group_advantages([0.3] * 10)  # exactly 0: r - mean would round to 1e-17
    ([0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    """
    n = len(rewards)
    if n == 0:
        raise ValueError("group_advantages: empty group (a verified question has G >= 1 Solver rollouts)")
    if n == 1 or max(rewards) == min(rewards):  # no spread, no signal (dynamic sampling drops such groups)
        return [0.0] * n
    mean = sum(rewards) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (n - 1))
    return [(r - mean) / (std + eps) for r in rewards]


def reinforce_advantages(rewards: Sequence[float], baseline: str = "none") -> list[float]:
    """REINFORCE advantage R_p - b for the Proposer (SSP Eq. 5; KG-paths Eq. 9).

    ``baseline="none"``: b = 0, advantage = reward (SSP Eq. 5 and the SSP code, which runs verl GRPO
    with one sample per group: mean 0, std 1). ``"batch_mean"``: b = mean of the batch's rewards.

    >>> reinforce_advantages([0.8, 0.0])
    [0.8, 0.0]
    >>> reinforce_advantages([0.8, 0.0], baseline="batch_mean")
    [0.4, -0.4]
    """
    if baseline == "none":
        return [float(r) for r in rewards]
    if baseline == "batch_mean":
        b = sum(rewards) / len(rewards) if rewards else 0.0
        return [r - b for r in rewards]
    raise ValueError(f"unknown REINFORCE baseline {baseline!r}; expected 'none' or 'batch_mean'")


def broadcast_to_tokens(advantages: Sequence[float], loss_masks: Sequence[Sequence[int]]) -> list[list[float]]:
    """Sequence advantage on every model token, 0 on environment tokens.

    >>> broadcast_to_tokens([0.5], [[1, 0, 1]])
    [[0.5, 0.0, 0.5]]
    """
    if len(advantages) != len(loss_masks):
        raise ValueError(f"{len(advantages)} advantages for {len(loss_masks)} samples; expected one per sample")
    return [[a if m else 0.0 for m in mask] for a, mask in zip(advantages, loss_masks, strict=True)]


def gdcr_step_advantages(step_rewards: Sequence[float], eps: float = 1e-6) -> list[float]:
    """A_{t,g}: one trajectory's GDCR sequence z-normalized over its own steps and clipped to [-1, 1] (GDCR Eq. 13).

    Population std (docs/decisions/rl.md "GDCR"); a single step or equal rewards give 0 (plain GRPO).

    >>> [round(a, 3) for a in gdcr_step_advantages([0.875, 1.875, 1.0])]
    [-0.843, 1.0, -0.562]
    """
    if not step_rewards or max(step_rewards) == min(step_rewards):
        return [0.0] * len(step_rewards)
    mean = sum(step_rewards) / len(step_rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in step_rewards) / len(step_rewards))
    return [max(-1.0, min(1.0, (r - mean) / (std + eps))) for r in step_rewards]


def sapo_advantages(outcome_rewards: Sequence[float], gdcr_sequences: Sequence[Sequence[float]], lam: float = 0.5,
                    eps: float = 1e-6) -> list[list[float]]:
    """SAPO per-step advantages of one group: A_t = A_o + lam * |A_o| * A_{t,g} (GDCR paper Eqs. 13-14).

    A_o is the group-normalized outcome advantage (``group_advantages``, the same as GRPO, so lam = 0 is
    exactly GRPO); A_{t,g} from ``gdcr_step_advantages``. For lam <= 1 a step never changes the sign of A_o.

    >>> [[round(a, 3) for a in steps] for steps in sapo_advantages([1.0, 0.0], [[0.875, 1.875, 1.0], [0.5]])]
    [[0.409, 1.061, 0.508], [-0.707]]
    """
    if len(outcome_rewards) != len(gdcr_sequences):
        raise ValueError(f"{len(outcome_rewards)} outcome rewards for {len(gdcr_sequences)} GDCR sequences; "
                         "give one step-reward sequence per trajectory")
    return combine_sapo(outcome_rewards, [gdcr_step_advantages(sequence, eps) for sequence in gdcr_sequences],
                        lam=lam, eps=eps)


def combine_sapo(outcome_rewards: Sequence[float], step_advantages: Sequence[Sequence[float]], lam: float = 0.5,
                 eps: float = 1e-6) -> list[list[float]]:
    """A_t = A_o + lam * |A_o| * A_{t,g} from each rollout's step advantages A_{t,g} (GDCR paper Eq. 14)."""
    outcome = group_advantages(outcome_rewards, eps=eps)
    return [[a_o + lam * abs(a_o) * a_g for a_g in steps]
            for a_o, steps in zip(outcome, step_advantages, strict=True)]


def broadcast_steps_to_tokens(step_advantages: Sequence[Sequence[float]], token_steps: Sequence[Sequence[int]],
                              loss_masks: Sequence[Sequence[int]]) -> list[list[float]]:
    """Step t's advantage on every model token of step t (``token_steps``: the step index of each response token),
    0 on environment tokens.

    >>> broadcast_steps_to_tokens([[0.5, -1.0]], [[0, 0, 0, 1]], [[1, 1, 0, 1]])
    [[0.5, 0.5, 0.0, -1.0]]
    """
    out = []
    for advantages, steps, mask in zip(step_advantages, token_steps, loss_masks, strict=True):
        if len(steps) != len(mask):
            raise ValueError(f"{len(steps)} token step indices for {len(mask)} response tokens")
        out.append([advantages[step] if m and 0 <= step < len(advantages) else 0.0 for step, m in zip(steps, mask,
                                                                                                     strict=True)])
    return out


AdvantageFn = Callable[..., list[list[float]]]


def grpo(rewards: Sequence[float], loss_masks: Sequence[Sequence[int]], params: Params,
         **_step_info) -> list[list[float]]:
    """GRPO per-token advantages for ONE group of Solver rollouts (KG-paths Eq. 10, SSP Eq. 3)."""
    return broadcast_to_tokens(group_advantages(rewards, eps=params.selfplay.adv_eps), loss_masks)


def reinforce(rewards: Sequence[float], loss_masks: Sequence[Sequence[int]], params: Params,
              **_step_info) -> list[list[float]]:
    """REINFORCE per-token advantages for the batch of Proposer trajectories (KG-paths Eq. 9)."""
    return broadcast_to_tokens(reinforce_advantages(rewards, params.selfplay.proposer_baseline), loss_masks)


def sapo(rewards: Sequence[float], loss_masks: Sequence[Sequence[int]], params: Params, *,
         step_rewards: Sequence[Sequence[float]] | None = None, token_steps: Sequence[Sequence[int]] | None = None,
         details: dict[str, Any] | None = None, **_step_info) -> list[list[float]]:
    """SAPO per-token advantages for ONE group (GDCR paper Eqs. 13-14); GRPO where a rollout has no step rewards.
    ``details``, where given, receives each rollout's step advantages A_{t,g} (``'step_advantages'``)."""
    if step_rewards is None or token_steps is None:
        raise ValueError("the 'sapo' estimator needs step_rewards and token_steps (a step-level Solver reward "
                         "such as 'gdcr' provides them)")
    eps = params.selfplay.adv_eps
    step_advantages = [gdcr_step_advantages(sequence, eps) for sequence in step_rewards]
    if details is not None:
        details["step_advantages"] = step_advantages
    steps = combine_sapo(rewards, step_advantages, lam=params.gdcr.sapo_lambda, eps=eps)
    return broadcast_steps_to_tokens(steps, token_steps, loss_masks)


# fn(rewards, loss_masks, params, **step_info) -> per-token advantages. "grpo" takes one question's group;
# "reinforce" the step's Proposer batch. The step-level "sapo" (GDCR paper Eq. 13-14) reads step_rewards (per
# sample, per turn) and token_steps (turn index of each response token) from the keyword arguments; a recipe's
# estimator reads what its step passes (register_advantage_estimator) and ignores the rest.
ADVANTAGE_ESTIMATORS: dict[str, AdvantageFn] = {"grpo": grpo, "reinforce": reinforce, "sapo": sapo}


def register_advantage_estimator(name: str, fn: AdvantageFn) -> None:
    """Add an advantage estimator under ``name`` (a recipe's, at import); the same function again is a no-op."""
    if ADVANTAGE_ESTIMATORS.get(name, fn) is not fn:
        raise ValueError(f"advantage estimator {name!r} is already registered as {ADVANTAGE_ESTIMATORS[name]!r}")
    ADVANTAGE_ESTIMATORS[name] = fn


def get_advantage_estimator(name: str) -> AdvantageFn:
    """The registered estimator ``name``; an unknown name lists the known ones."""
    if name not in ADVANTAGE_ESTIMATORS:
        raise KeyError(f"unknown advantage estimator {name!r}; registered: {sorted(ADVANTAGE_ESTIMATORS)}")
    return ADVANTAGE_ESTIMATORS[name]
