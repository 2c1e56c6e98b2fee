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
"""

from __future__ import annotations

from contextlib import nullcontext
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


def segmented_logits(decoder: Any, head: Any, config: Any, ids: Any, loss_mask: list[int],
                     autocast: Any = None, prefix: tuple[int, Layers | None] = (0, None)) -> list[tuple[Run, Any]]:
    """(run, fp32 logits of its positions) for every scored run of one sequence ``ids`` [L].

    ``decoder`` maps ids to hidden states and takes a KV cache (a HF ``*Model``); ``head`` is the LM head.
    Unscored runs only fill the cache, without gradient. ``autocast`` is a context factory (or None),
    entered once for the whole sequence so the bf16 copies of the weights are made once, not per run.
    ``prefix``: (length, keys and values) of the sequence's first tokens, computed elsewhere
    (``searchplay.prefix_kv``); at most ``first_untrained_end(loss_mask)`` long.
    """
    import torch

    skip, layers = prefix
    _check_prefix(skip, loss_mask)
    cache = seeded_cache(config, layers)
    scored = []
    with autocast() if autocast else nullcontext():
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
