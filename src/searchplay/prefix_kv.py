"""Shared prefixes: the keys and values of a token prefix computed once, reused by every sequence that starts with it.

Self-play's sequences share long prefixes. The G Solver rollouts of a question share its whole prompt,
and every Proposer prompt of one family shares the instruction block before its seed (about 630 of
the KG prompt's 1,200 tokens). Under causal attention a prefix's keys and values do not depend on what
follows it, so they are computed once, without gradient, and copied into the cache of each sequence that
starts with it. The rollout backend does this
before its first turn, and the RL update before its forwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

MIN_SHARED_TOKENS = 16  # shorter common prefixes are not worth a forward of their own

Layers = list[tuple[Any, Any]]  # per layer: keys, values [1, kv_heads, length, head_dim]


def _common_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def shared_prefixes(sequences: Sequence[Sequence[int]], limits: Sequence[int],
                    min_length: int = MIN_SHARED_TOKENS) -> list[tuple[int, ...]]:
    """The prefixes worth computing once: every longest common prefix of two sequences (neighbours in sorted
    order), cut to both sequences' ``limits`` (e.g. ``len - 1``, so each keeps a token of its own), at least
    ``min_length`` tokens long; shortest first, so each can be built on a shorter one.

    >>> shared_prefixes([[1, 2, 3, 9], [1, 2, 3, 8], [5, 6]], [3, 3, 1], min_length=2)
    [(1, 2, 3)]
    """
    order = sorted(range(len(sequences)), key=lambda i: list(sequences[i]))
    found: set[tuple[int, ...]] = set()
    for a, b in pairwise(order):
        length = min(_common_length(sequences[a], sequences[b]), limits[a], limits[b])
        if length >= min_length:
            found.add(tuple(sequences[a][:length]))
    return sorted(found, key=len)


class PrefixStore:
    """Keys and values of token prefixes under one set of weights; look up the longest stored prefix of a sequence."""

    def __init__(self) -> None:
        self.entries: dict[tuple[int, ...], Layers] = {}
        self.computed_tokens = 0  # tokens run through the model to build the entries

    def longest(self, ids: Sequence[int], limit: int | None = None) -> tuple[int, Layers | None]:
        """(length, layers) of the longest stored prefix of ``ids`` no longer than ``limit``; (0, None) if none."""
        limit = len(ids) if limit is None else limit
        best: tuple[int, Layers | None] = (0, None)
        for prefix, layers in self.entries.items():
            if best[0] < len(prefix) <= limit and tuple(ids[:len(prefix)]) == prefix:
                best = (len(prefix), layers)
        return best

    def build(self, decoder: Any, config: Any, prefixes: Sequence[tuple[int, ...]]) -> None:
        """Run each prefix through ``decoder`` (a HF ``*Model`` that takes a KV cache), continuing from the
        longest stored prefix of it, and store its keys and values. Call under ``no_grad``/``inference_mode``
        (and the forward's autocast, so the entries carry the dtype the sequences' own forwards would)."""
        import torch

        for prefix in sorted(prefixes, key=len):
            start, base = self.longest(prefix)
            if start == len(prefix):
                continue
            cache = seeded_cache(config, base)
            device = next(decoder.parameters()).device
            decoder(input_ids=torch.tensor([prefix[start:]], device=device), past_key_values=cache, use_cache=True)
            self.entries[tuple(prefix)] = [(layer.keys, layer.values) for layer in cache.layers]
            self.computed_tokens += len(prefix) - start


def seeded_cache(config: Any, layers: Layers | None) -> Any:
    """A fresh ``DynamicCache`` holding ``layers`` (copied on the first append; the stored tensors stay as they are)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=config)
    if layers is not None:
        for layer, (keys, values) in zip(cache.layers, layers, strict=True):
            layer.update(keys, values)
    return cache
