"""One training sequence for the policy update: prompt, response, loss mask and per-token advantages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass
class TrainingSample:
    """A rollout ready for ``PolicyTrainer.step``.

    ``loss_mask[t]`` is 1 for model-generated response tokens and 0 for environment tokens
    (``<information>``), which are excluded from the policy loss, the KL and the entropy.
    ``advantages[t]`` is the advantage of response token t (from an ``ADVANTAGE_ESTIMATORS`` entry).
    ``old_logprobs`` may be given when the caller splits one rollout batch into several optimizer
    steps (verl mini-batches); left None, they are computed just before the update (ratio 1).
    """

    prompt_ids: list[int]
    response_ids: list[int]
    loss_mask: list[int]
    advantages: list[float]
    role: Literal["solver", "proposer"] = "solver"
    old_logprobs: list[float] | None = None
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.response_ids)
        lengths = {"loss_mask": len(self.loss_mask), "advantages": len(self.advantages)}
        if self.old_logprobs is not None:
            lengths["old_logprobs"] = len(self.old_logprobs)
        wrong = {k: v for k, v in lengths.items() if v != n}
        if wrong:
            raise ValueError(f"TrainingSample: {n} response tokens but {wrong}; give one value per response token")
        if not self.prompt_ids:
            raise ValueError("TrainingSample: empty prompt_ids (the first response token needs a context)")
        if any(m not in (0, 1) for m in self.loss_mask):
            raise ValueError("TrainingSample: loss_mask must hold only 0 (environment) and 1 (model) tokens")

    @property
    def num_loss_tokens(self) -> int:
        return sum(self.loss_mask)
