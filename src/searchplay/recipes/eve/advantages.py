"""HRPO, the Proposer's advantage in EVE Phase A: rewards standardized within hop-count groups (EVE Eq. 5)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from searchplay.rl import broadcast_to_tokens

if TYPE_CHECKING:
    from searchplay.config import Params


def hop_grouped_advantages(rewards: Sequence[float], hops: Sequence[int], eps: float = 1e-6) -> list[float]:
    """HRPO: each reward standardized within the batch's group of equal hop count (Dr. Zero; EVE Eq. 5).

    A_i = (R_i - mean_{j: h_j = h_i} R_j) / (std_{j: h_j = h_i} R_j + eps), std unbiased (ddof = 1) as
    Dr. Zero's verl ``grpo_batch``; a hop group of one gets mean 0 and std 1 there, so A = R / (1 + eps).
    One Proposer sample per source document: the hop group replaces GRPO's nested group.

    >>> [round(a, 4) for a in hop_grouped_advantages([1.0, 0.0, 0.5, 2.0], [1, 1, 2, 3])]
    [0.7071, -0.7071, 0.5, 2.0]
    """
    if len(rewards) != len(hops):
        raise ValueError(f"hop_grouped_advantages: {len(rewards)} rewards but {len(hops)} hop counts")
    members: dict[int, list[int]] = {}
    for index, hop in enumerate(hops):
        members.setdefault(hop, []).append(index)
    out = [0.0] * len(rewards)
    for indices in members.values():
        group = [rewards[i] for i in indices]
        if len(group) == 1:
            mean, std = 0.0, 1.0
        else:
            mean = sum(group) / len(group)
            std = math.sqrt(sum((r - mean) ** 2 for r in group) / (len(group) - 1))
        for i in indices:
            out[i] = (rewards[i] - mean) / (std + eps)
    return out


def hrpo(rewards: Sequence[float], loss_masks: Sequence[Sequence[int]], params: Params, *,
         hops: Sequence[int] | None = None, **_step_info) -> list[list[float]]:
    """HRPO per-token advantages for the batch of Proposer trajectories, one per source document (EVE Eq. 5)."""
    if hops is None:
        raise ValueError("the 'hrpo' estimator needs the hop count of every sample (EVE's Proposer step gives them)")
    return broadcast_to_tokens(hop_grouped_advantages(rewards, hops, eps=params.selfplay.adv_eps), loss_masks)
