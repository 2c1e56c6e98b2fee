"""Masked supervised fine-tuning on demos: the loss covers only the tokens the model wrote.

Loss (per step): token-mean negative log-likelihood over every trained token of the step's demos,
``L = -(1/T) sum_{demos} sum_{t: mask_t = 1} log p(x_t | x_<t)``, the SFT analogue of the RL loss's
masking (prompt and ``<information>`` ids carry mask 0, exactly as in GRPO).

Segmented forward (``warmstart.segmented_forward``): a demo's positions are cut into runs that
predict trained tokens and runs that do not; they go through the model in order with one shared KV
cache, the latter under ``torch.no_grad`` and without the vocabulary projection. Only about 4% of a
demo's tokens are trained, so this skips most of the backward pass. The gradient does not flow
through the keys and values of untrained positions, nor through those of an earlier trained run once
an untrained run came between (docs/decisions/warmstart.md); the runs come from
``searchplay.rl.segments``, shared with the RL update. The plain forward (``segmented_forward: false``)
is the exact reference and is tested to give the same loss value.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from searchplay.moments import MomentsOnDisk
from searchplay.precision import skip_nonfinite_step
from searchplay.rl.segments import Run, forward_runs
from searchplay.warmstart.demos import Demo

__all__ = ["Run", "SFTTrainer", "Warmup", "demo_nll", "forward_runs"]  # Run, forward_runs: re-exported


def _autocast(enabled: bool, device_type: str) -> Any:
    import torch

    return torch.autocast(device_type=device_type, dtype=torch.bfloat16) if enabled else nullcontext()


def demo_nll(model: Any, demo: Demo, segmented: bool = True, autocast: bool = False) -> tuple[Any, int]:
    """(sum of -log p over the demo's trained tokens, a tensor with gradient; number of trained tokens)."""
    import torch
    import torch.nn.functional as F

    device = next(model.parameters()).device
    ids = torch.tensor(demo.input_ids, device=device)
    mask = demo.loss_mask
    count = sum(mask[1:])
    if count == 0:
        return torch.zeros((), device=device), 0
    if not segmented:
        with _autocast(autocast, device.type):
            logits = model(input_ids=ids[None, :-1], use_cache=False).logits[0].float()
        keep = torch.tensor(mask[1:], device=device, dtype=torch.bool)
        return F.cross_entropy(logits[keep], ids[1:][keep], reduction="sum"), count
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    total = torch.zeros((), device=device)
    with _autocast(autocast, device.type):  # one context per demo: the weights' bf16 copies are made once
        for run in forward_runs(mask):
            chunk = ids[None, run.start:run.end]
            with nullcontext() if run.trained else torch.no_grad():
                output = model(input_ids=chunk, past_key_values=cache, use_cache=True,
                               logits_to_keep=0 if run.trained else 1)
            if run.trained:
                total = total + F.cross_entropy(output.logits[0].float(), ids[run.start + 1:run.end + 1],
                                                reduction="sum")
    return total, count


class Warmup:
    """Linear warm-up to the full learning rate, then constant (a LambdaLR factor; picklable)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def __call__(self, k: int) -> float:
        return 1.0 if self.steps <= 0 else min(1.0, (k + 1) / self.steps)


class SFTTrainer:
    """AdamW on the trainable parameters (all, or the LoRA adapters), clipped, token-mean masked NLL."""

    def __init__(self, model: Any, lr: float, weight_decay: float = 0.0, warmup_steps: int = 0,
                 max_grad_norm: float = 1.0, segmented: bool = True, autocast: bool = False,
                 moments_dir: str | Path | None = None) -> None:
        """``moments_dir``: keep AdamW's moments in an unlinked file there between steps (``searchplay.moments``;
        the same training to the bit); None: in memory."""
        import torch

        from searchplay.llm.attention import use_lean_attention

        use_lean_attention(model)  # the backward recomputes attention instead of keeping its inputs' copies
        self.model = model
        self.parameters = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.parameters, lr=lr, weight_decay=weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, Warmup(warmup_steps))
        self.moments = MomentsOnDisk(self.optimizer, moments_dir) if moments_dir is not None else None
        self.max_grad_norm = max_grad_norm
        self.segmented = segmented
        self.autocast = autocast
        self.global_step = 0

    def step(self, demos: list[Demo]) -> dict[str, float]:
        """One optimizer step on ``demos``; returns loss (mean NLL per trained token), tokens and grad norm."""
        import torch

        trained = sum(sum(d.loss_mask[1:]) for d in demos)
        if trained == 0:
            raise ValueError("SFTTrainer.step: the demos hold no trained token")
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for demo in demos:  # one demo at a time: memory stays at one sequence's activations
            nll, _ = demo_nll(self.model, demo, self.segmented, self.autocast)
            (nll / trained).backward()
            loss_sum += float(nll.detach())
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.parameters, self.max_grad_norm))
        lr = self.scheduler.get_last_lr()[0]
        skip_nonfinite_step(self.optimizer, grad_norm, self.global_step + 1)
        self.scheduler.step()
        self.global_step += 1
        self.model.eval()
        return {"loss": loss_sum / trained, "grad_norm": grad_norm if math.isfinite(grad_norm) else math.nan,
                "lr": lr, "tokens": float(sum(d.num_tokens for d in demos)), "trained_tokens": float(trained)}
