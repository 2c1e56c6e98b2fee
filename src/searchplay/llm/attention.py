"""Decode-step attention that keeps PyTorch's fast CPU path for grouped-query attention.

transformers' ``sdpa`` attention runs a one-token decode step two ways. With a padding mask it folds the
query heads onto their key/value heads (``pack_gqa``) and calls SDPA on the cache as it is. Without a mask
(every row of the batch unpadded: one row alone, or rows of equal length) it calls SDPA with
``enable_gqa=True`` instead, and on a CPU that kernel is several times slower: measured with SmolLM2-135M
(9 query heads on 3 key/value heads) in bf16, 1,000 cached tokens, 2 cores, a decode step took 38 ms
against 22 ms for one row and 134 ms against 42 ms for eight. ``packed_sdpa_attention`` takes the packed
path for every one-token step, mask or not, and hands everything else to transformers' own function, so
prefill and training forwards are unchanged. It computes the same attention as ``sdpa`` (the same kernel
as the masked path; ``tests/llm/test_attention.py``).
"""

from __future__ import annotations

from typing import Any

NAME = "sdpa_packed_decode"


def packed_sdpa_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                          dropout: float = 0.0, scaling: float | None = None, **kwargs: Any) -> tuple[Any, None]:
    """A decode step's attention with query heads folded onto their key/value heads; else transformers' sdpa.

    query ``[B, H, 1, D]``, key/value ``[B, H_kv, T, D]``, mask ``[B, 1, 1, T]`` (bool or additive) or None;
    returns ``[B, 1, H, D]`` as transformers' attention functions do.
    """
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    batch, heads, length, dim = query.shape
    groups = heads // key.shape[1]
    if length != 1 or groups == 1 or dropout or kwargs.get("position_bias") is not None or module.training:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    packed = query.reshape(batch, key.shape[1], groups, dim)  # query head h reads key/value head h // groups
    output = torch.nn.functional.scaled_dot_product_attention(packed, key, value, attn_mask=attention_mask,
                                                              scale=scaling)
    return output.reshape(batch, 1, heads, dim), None


def use_packed_decode(model: Any) -> None:
    """Switch ``model`` from ``sdpa`` to ``packed_sdpa_attention`` (registered once); other implementations stay."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    if getattr(model.config, "_attn_implementation", None) not in ("sdpa", NAME):
        return
    if NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(NAME, packed_sdpa_attention)
        AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    model.config._attn_implementation = NAME
