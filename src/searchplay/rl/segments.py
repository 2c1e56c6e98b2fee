"""Segmented forward: run a sequence through the model in order, with gradient only where it is scored.

A rollout (or a warm-start demo) is mostly tokens the model did not write: the prompt and the
``<information>`` blocks, about 95% of a Solver or Proposer sequence on the embedded default. Their
positions are cut into runs (``forward_runs``) that share one KV cache; runs that predict no scored
token go through the decoder under ``torch.no_grad`` and without the vocabulary projection, runs that
do go through with gradient. The log-probabilities are those of the plain forward (tested); the
gradient is not. It does not flow through the keys and values of the unscored positions, nor through
those of an earlier scored run once an unscored run came between: extending the cache under
``no_grad`` detaches it, so a later model turn sees the earlier turns' keys and values as constants
(tested; docs/decisions/rl.md L14, docs/decisions/warmstart.md).

Layers recomputed in the backward (``recompute=True``): a sequence's keys and values go into one buffer of
its final length (``_SegmentLayer``), and each decoder layer of a scored run runs inside
``torch.utils.checkpoint``, so autograd keeps the layer's input instead of its activations and of the cache
the run attended to (a copy of the whole cache per scored run and layer with ``DynamicCache``). The backward
runs the layer again, writing the same keys and values to the same positions; the run's view of the cache
is read from the buffer, whose earlier positions no later run writes. The attention and the layers see the
same tensors as without it, so log-probabilities and gradients are the same to the bit (tested).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from searchplay.prefix_kv import Layers, seeded_cache


@dataclass(frozen=True)
class Run:
    """Input positions [start, end) of a sequence; ``trained``: their next tokens are scored."""

    start: int
    end: int
    trained: bool


def forward_runs(loss_mask: list[int]) -> list[Run]:
    """Cut input positions 0..L-2 into maximal runs by whether position p predicts a scored token (mask[p+1]).

    >>> forward_runs([0, 0, 1, 1, 0, 1])
    [Run(start=0, end=1, trained=False), Run(start=1, end=3, trained=True), Run(start=3, end=4, trained=False), \
Run(start=4, end=5, trained=True)]
    """
    runs: list[Run] = []
    for position in range(len(loss_mask) - 1):
        trained = bool(loss_mask[position + 1])
        if runs and runs[-1].trained == trained:
            runs[-1] = Run(runs[-1].start, position + 1, trained)
        else:
            runs.append(Run(position, position + 1, trained))
    return runs


def first_untrained_end(loss_mask: list[int]) -> int:
    """Where the first run ends if it predicts no scored token (the prompt), else 0: the most a shared prefix may cover.

    >>> first_untrained_end([0, 0, 0, 1, 1]), first_untrained_end([0, 1, 1])
    (2, 0)
    """
    runs = forward_runs(loss_mask)
    return runs[0].end if runs and not runs[0].trained else 0


def _check_prefix(length: int, loss_mask: list[int]) -> None:
    if length > first_untrained_end(loss_mask):
        raise ValueError(f"a shared prefix of {length} tokens reaches into the scored positions")


@functools.cache
def _segment_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class _SegmentLayer(DynamicLayer):
        """One layer's keys and values of one sequence, in buffers of the sequence's length.

        ``update`` writes the new states at ``write_at`` (a recomputed layer's run start) or after what is
        cached, and returns what ``DynamicLayer`` would: the cache before them (read from the buffer, without
        gradient) concatenated with the new states as given (a run with gradient), or a contiguous copy of the
        cache through them (a run without). ``keys``/``values`` are views of the filled part.
        """

        def __init__(self, capacity: int):
            super().__init__()
            self.capacity = capacity
            self.filled = 0
            self.write_at: int | None = None
            self._buffers: tuple[Any, Any] | None = None

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            import torch

            if self._buffers is None:
                self.dtype, self.device, self.is_initialized = key_states.dtype, key_states.device, True
                self._buffers = tuple(new.new_empty((*new.shape[:-2], self.capacity, new.shape[-1]))
                                      for new in (key_states, value_states))
            if key_states.dtype != self.dtype:  # DynamicLayer's cat would promote; a buffer would cast
                raise ValueError(f"a segment cache of {self.dtype} got {key_states.dtype} states")
            start = self.filled if self.write_at is None else self.write_at
            end, self.write_at = start + key_states.shape[-2], None
            if end > self.capacity:
                raise ValueError(f"a segment cache of {self.capacity} positions got states up to {end}")
            keys, values = self._buffers
            with torch.no_grad():
                keys[..., start:end, :] = key_states
                values[..., start:end, :] = value_states
            self.filled = max(self.filled, end)
            self.keys, self.values = keys[..., :self.filled, :], values[..., :self.filled, :]
            if key_states.requires_grad or value_states.requires_grad:
                return (torch.cat([keys[..., :start, :], key_states], dim=-2),
                        torch.cat([values[..., :start, :], value_states], dim=-2))
            return keys[..., :end, :].contiguous(), values[..., :end, :].contiguous()

        def get_seq_length(self) -> int:
            return self.filled

    return _SegmentLayer


def segment_cache(config: Any, capacity: int, layers: Layers | None) -> Any:
    """A ``DynamicCache`` of ``_SegmentLayer``s for a sequence of ``capacity`` positions, holding ``layers``;
    None for a model whose cache has other layers than full attention's (sliding windows)."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    segment_layer = _segment_layer_class()
    cache = DynamicCache(config=config)
    if any(type(layer) is not DynamicLayer for layer in cache.layers):
        return None
    cache.layers = [segment_layer(capacity) for _ in cache.layers]
    if layers is not None:
        for layer, (keys, values) in zip(cache.layers, layers, strict=True):
            layer.update(keys, values)
    return cache


@contextmanager
def recomputed_layers(decoder: Any, cache: Any) -> Iterator[None]:
    """Within the block, each of ``decoder``'s layers that runs under gradient runs inside
    ``torch.utils.checkpoint`` (non-reentrant), its recomputation writing ``cache`` (a ``segment_cache``) where
    the first run did. Attention's own recomputation (``searchplay.llm.attention``) is off inside them."""
    layers = list(decoder.layers)
    own = [vars(layer).get("forward") for layer in layers]  # a forward set on the instance, put back after
    for layer, cached in zip(layers, cache.layers, strict=True):
        layer.forward = functools.partial(_recomputed_forward, layer.forward, cached)
    try:
        yield
    finally:
        for layer, forward in zip(layers, own, strict=True):
            if forward is None:
                del layer.forward
            else:
                layer.forward = forward


def _recomputed_forward(forward: Any, cached: Any, hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
    import torch
    from torch.utils.checkpoint import checkpoint

    from searchplay.llm.attention import layer_recomputed

    if not torch.is_grad_enabled():
        return forward(hidden_states, *args, **kwargs)
    start = cached.filled

    def run(hidden: Any) -> Any:  # the forward, and again in the backward
        cached.write_at = start
        with layer_recomputed():
            return forward(hidden, *args, **kwargs)

    return checkpoint(run, hidden_states, use_reentrant=False, preserve_rng_state=False)


def segmented_logits(decoder: Any, head: Any, config: Any, ids: Any, loss_mask: list[int],
                     autocast: Any = None, prefix: tuple[int, Layers | None] = (0, None),
                     recompute: bool = False) -> list[tuple[Run, Any]]:
    """(run, fp32 logits of its positions) for every scored run of one sequence ``ids`` [L].

    ``decoder`` maps ids to hidden states and takes a KV cache (a HF ``*Model``); ``head`` is the LM head.
    Unscored runs only fill the cache, without gradient. ``autocast`` is a context factory (or None),
    entered once for the whole sequence so the bf16 copies of the weights are made once, not per run.
    ``prefix``: (length, keys and values) of the sequence's first tokens, computed elsewhere
    (``searchplay.prefix_kv``); at most ``first_untrained_end(loss_mask)`` long. ``recompute``: the scored
    runs' layers are recomputed in the backward (module docstring; the same values and gradients), where the
    model's cache is full attention's only.
    """
    import torch

    skip, layers = prefix
    _check_prefix(skip, loss_mask)
    cache = segment_cache(config, len(loss_mask) - 1, layers) if recompute and hasattr(decoder, "layers") else None
    recompute = cache is not None  # not with sliding-window layers, nor without a layer list
    if cache is None:
        cache = seeded_cache(config, layers)
    scored = []
    with autocast() if autocast else nullcontext(), recomputed_layers(decoder, cache) if recompute else nullcontext():
        for run in forward_runs(loss_mask):
            if run.end <= skip:
                continue
            chunk = ids[None, max(run.start, skip):run.end]
            with nullcontext() if run.trained else torch.no_grad():
                hidden = decoder(input_ids=chunk, past_key_values=cache, use_cache=True).last_hidden_state
                if run.trained:
                    scored.append((run, head(hidden[0]).float()))
    return scored


def scored_logits(decoder: Any, head: Any, config: Any, ids: Any, loss_mask: list[int], autocast: Any = None,
                  prefix: tuple[int, Layers | None] = (0, None)) -> tuple[Any, Any]:
    """Without gradient: (positions that predict a scored token, their fp32 logits) of one sequence ``ids`` [L],
    in one forward after the shared ``prefix`` (the reference and pi_old forwards of the RL update)."""
    import torch

    skip, layers = prefix
    _check_prefix(skip, loss_mask)
    positions = torch.tensor([p for p in range(len(loss_mask) - 1) if loss_mask[p + 1]], dtype=torch.long,
                             device=ids.device)
    with torch.no_grad(), autocast() if autocast else nullcontext():
        hidden = decoder(input_ids=ids[None, skip:len(loss_mask) - 1], past_key_values=seeded_cache(config, layers),
                         use_cache=True).last_hidden_state[0]
        return positions, head(hidden[positions - skip]).float()
