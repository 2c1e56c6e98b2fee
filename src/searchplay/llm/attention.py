"""transformers' ``sdpa`` attention, leaner in two places: CPU decode steps and forwards with gradient.

**Decode steps.** transformers' ``sdpa`` runs a one-token decode step two ways. With a padding mask it folds
the query heads onto their key/value heads (``pack_gqa``) and calls SDPA on the cache as it is. Without a
mask (every row of the batch unpadded: one row alone, or rows of equal length) it calls SDPA with
``enable_gqa=True`` instead, and on a CPU that kernel is several times slower: measured with SmolLM2-135M
(9 query heads on 3 key/value heads) in bf16, 1,000 cached tokens, 2 cores, a decode step took 38 ms
against 22 ms for one row and 134 ms against 42 ms for eight. ``lean_sdpa_attention`` takes the packed
path for every one-token step, mask or not.

**Forwards with gradient.** With a KV cache and a mask (the segmented forward's scored runs, which attend
to everything before them), ``sdpa`` repeats each key/value head for its query heads (``repeat_kv``) and
autograd keeps those copies for the backward: 3x the cache, per scored run and layer. For a Proposer
sample of 2,210 tokens that was 1.36 of the 1.68 GiB a micro-batch of two kept for its backward. Here
autograd keeps only the attention's inputs (``torch.utils.checkpoint``) and runs the attention again in
the backward: 0.75 GiB for the same micro-batch, the same gradients bit for bit (the recomputation runs
the same kernels on the same inputs), for about 2% more time in an update benchmark and the same update
time in a self-play stage (docs/benchmarks.md).

Inside a layer that is itself recomputed (``layer_recomputed``, the RL update's segmented forward) the
attention runs plain: the layer's checkpoint keeps less than this one would.

Everything else goes to transformers' own function unchanged. ``tests/llm/test_attention.py`` checks both
paths against ``sdpa``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

NAME = "sdpa_lean"
_in_recomputed_layer: ContextVar[bool] = ContextVar("searchplay_in_recomputed_layer", default=False)


@contextmanager
def layer_recomputed() -> Iterator[None]:
    """Within the block, attention under gradient is not checkpointed on its own: its layer is."""
    token = _in_recomputed_layer.set(True)
    try:
        yield
    finally:
        _in_recomputed_layer.reset(token)


def lean_sdpa_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                        dropout: float = 0.0, scaling: float | None = None, **kwargs: Any) -> tuple[Any, None]:
    """transformers' sdpa, packed for a one-token decode step and recomputed in the backward under gradient.

    query ``[B, H, L, D]``, key/value ``[B, H_kv, T, D]``, mask ``[B, 1, L, T]`` (bool or additive) or None;
    returns ``[B, L, H, D]`` as transformers' attention functions do.
    """
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def attend(q: Any, k: Any, v: Any, mask: Any) -> Any:
        return sdpa_attention_forward(module, q, k, v, mask, dropout=dropout, scaling=scaling, **kwargs)[0]

    if torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)):
        from torch.utils.checkpoint import checkpoint

        if _in_recomputed_layer.get():
            return attend(query, key, value, attention_mask), None
        return checkpoint(attend, query, key, value, attention_mask, use_reentrant=False,
                          preserve_rng_state=bool(dropout)), None
    batch, heads, length, dim = query.shape
    groups = heads // key.shape[1]
    if length != 1 or groups == 1 or dropout or kwargs.get("position_bias") is not None or module.training:
        return attend(query, key, value, attention_mask), None
    packed = query.reshape(batch, key.shape[1], groups, dim)  # query head h reads key/value head h // groups
    output = torch.nn.functional.scaled_dot_product_attention(packed, key, value, attn_mask=attention_mask,
                                                              scale=scaling)
    return output.reshape(batch, 1, heads, dim), None


def use_lean_attention(model: Any) -> None:
    """Switch ``model`` from ``sdpa`` to ``lean_sdpa_attention`` (registered once); other implementations stay."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    if getattr(model.config, "_attn_implementation", None) not in ("sdpa", NAME):
        return
    if NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(NAME, lean_sdpa_attention)
        AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    model.config._attn_implementation = NAME
