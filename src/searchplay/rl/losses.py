"""Token-level losses of the policy update (tensors in, tensors out; torch imported by the caller).

Follows the SSP code's verl recipe: PPO clipped ratio with clip-low 0.2 / clip-high 0.285 and verl's
dual clip, low-variance KL (k3) to the frozen reference, the papers' seq-mean-token-mean aggregation.
Every function takes ``mask`` (1 = model token) so environment tokens (``<information>``) never contribute.
"""

from __future__ import annotations

from typing import Any

# verl clamps log-ratios before exponentiating so a stale sample cannot overflow exp().
LOG_RATIO_CLAMP = 20.0
# verl clamps the low_var_kl value itself to [-10, 10].
KL_CLAMP = 10.0
LOSS_AGG_MODES = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum")


def policy_loss_terms(logprobs: Any, old_logprobs: Any, advantages: Any, clip_low: float = 0.2,
                      clip_high: float = 0.285, clip_ratio_c: float = 3.0) -> tuple[Any, Any]:
    """Per-token clipped surrogate loss -min(rho A, clip(rho, 1-eps_low, 1+eps_high) A): KG-paths Eq. 7/11's PPO
    clip with one epsilon, made asymmetric as in the SSP code (clip-high 0.285, docs/decisions/rl.md L1).

    rho = pi_theta / pi_old per token. For A < 0 verl's dual clip also caps the loss at -c * A.
    Returns (loss per token, 1.0 where the clipped branch was taken).
    """
    import torch

    log_ratio = torch.clamp(logprobs - old_logprobs, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    dual = torch.minimum(-advantages * clip_ratio_c, loss)
    loss = torch.where(advantages < 0, dual, loss)
    return loss, (clipped > unclipped).float()


def low_var_kl(logprobs: Any, ref_logprobs: Any) -> Any:
    """Per-token low-variance KL estimate k3 = exp(q - p) - (q - p) - 1, q = log pi_ref, p = log pi_theta.

    Schulman's k3 estimator of KL(pi_theta || pi_ref), verl's ``low_var_kl`` (the "low-variance KL
    surrogate" of KG-paths §3.1), clamped as verl does. It is 0 where the policy equals the reference.
    """
    import torch

    log_ratio = torch.clamp(ref_logprobs - logprobs, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    kl = torch.exp(log_ratio) - log_ratio - 1.0
    return torch.clamp(kl, -KL_CLAMP, KL_CLAMP)


def token_weights(mask: Any, mode: str, num_tokens: float, num_sequences: float) -> Any:
    """Weight of each token so that sum(weights * loss) is the aggregated loss of the whole batch.

    ``seq-mean-token-mean`` (default; the papers' objective 1/G sum_i 1/|tau_i| sum_t, KG-paths Eq. 7,
    and in effect the SSP code, whose micro-batches hold one sequence): token weight
    1 / (|tau_i| * num_sequences). ``token-mean`` (verl's default): every model token of the whole
    (mini-)batch weighs 1 / num_tokens, so long sequences weigh more, and in a batch mixing roles the
    other role's tokens dilute each role's gradient. ``seq-mean-token-sum`` (verl option): token weight
    1 / num_sequences. ``num_tokens``/``num_sequences`` count the WHOLE batch, so micro-batches add
    up to the batch loss under gradient accumulation.
    """
    mask = mask.float()
    if mode == "token-mean":
        return mask / max(num_tokens, 1.0)
    if mode == "seq-mean-token-mean":
        per_seq = mask.sum(dim=-1, keepdim=True).clamp(min=1.0)
        return mask / per_seq / max(num_sequences, 1.0)
    if mode == "seq-mean-token-sum":
        return mask / max(num_sequences, 1.0)
    raise ValueError(f"unknown loss_agg_mode {mode!r}; expected one of {LOSS_AGG_MODES}")


def entropy_from_logits(logits: Any) -> Any:
    """Per-position entropy -sum_v p log p of the next-token distribution (logged; coefficient 0)."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)
