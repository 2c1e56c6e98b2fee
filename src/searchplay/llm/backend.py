"""The policy-backend interface: batched generation from token ids, with per-call stop strings.

Prompts are token ids, not text, so multi-turn rollouts never re-tokenize their history: the agent
appends generated ids and environment ids and passes the whole id sequence back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "eos", "length"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one generation call. ``temperature == 0`` means greedy.

    Constrained decoding, two ways (None leaves the vocabulary open):

    - ``choices[row]``: the replies row ``row`` may write, exactly one of them and then EOS (e.g. the KG selector's
      ``k}``). Declarative, so each backend applies it its own way: the transformers backend as a token mask
      (``choice_tokens``), vLLM as structured output (a choice list). Either way the model picks from its own
      next-token distribution renormalized over the allowed tokens, at the sampling temperature.
    - ``allowed_tokens(row, generated_ids)`` -> the token ids row ``row`` may write next: a token-level hook that
      only the transformers backend runs.
    """

    max_new_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    allowed_tokens: Callable[[int, list[int]], list[int]] | None = field(default=None, compare=False)
    choices: tuple[tuple[str, ...], ...] | None = field(default=None, compare=False)


def end_token_ids(tokenizer: Any, generation_config: Any = None) -> frozenset[int]:
    """The ids that end a generation: the tokenizer's EOS and the model's ``generation_config.eos_token_id`` (an
    id or a list: Qwen2.5's lists ``<|im_end|>`` and ``<|endoftext|>``), as vLLM stops on both.

    >>> from types import SimpleNamespace
    >>> sorted(end_token_ids(SimpleNamespace(eos_token_id=151645), SimpleNamespace(eos_token_id=[151645, 151643])))
    [151643, 151645]
    """
    listed = getattr(generation_config, "eos_token_id", None)
    listed = [] if listed is None else [listed] if isinstance(listed, int) else list(listed)
    return frozenset(i for i in [tokenizer.eos_token_id, *listed] if i is not None)


def choice_tokens(tokenizer: Any, choices: Sequence[Sequence[str]]) -> Callable[[int, list[int]], list[int]]:
    """``allowed_tokens`` for ``choices``: each reply's own token ids (``tokenizer.encode``) one by one, then EOS.

    >>> from types import SimpleNamespace
    >>> allowed = choice_tokens(SimpleNamespace(encode=lambda t, add_special_tokens: [ord(c) for c in t],
    ...                                         eos_token_id=0), [("1}", "10}")])
    >>> [chr(i) for i in allowed(0, [ord("1")])], allowed(0, [ord("1"), ord("}")])
    (['0', '}'], [0])
    """
    eos, known = tokenizer.eos_token_id, {}
    for row in choices:
        for text in row:
            known.setdefault(text, tokenizer.encode(text, add_special_tokens=False))
    encoded = [[known[text] for text in row] for row in choices]

    def allowed(row: int, written: list[int]) -> list[int]:
        n = len(written)
        following = {ids[n] for ids in encoded[row] if len(ids) > n and ids[:n] == written}
        if written in encoded[row] or not following:  # a whole reply written (or none can continue): end it
            following.add(eos)
        return sorted(following)

    return allowed


@dataclass
class Completion:
    """One generated continuation.

    ``token_ids`` are exactly the ids the model sampled (up to and including the tokens that
    completed a stop string or the EOS token); ``text`` is their decoding; ``stop`` is the stop
    string that ended generation (``finish_reason == 'stop'``), if any.
    """

    token_ids: list[int]
    text: str
    finish_reason: FinishReason
    stop: str | None = None
    logprobs: list[float] | None = field(default=None, repr=False)


@runtime_checkable
class PolicyBackend(Protocol):
    """A generator for many prompts at once. Implementations: transformers, vllm (ctranslate2 is not built yet)."""

    tokenizer: Any  # a transformers PreTrainedTokenizerBase (chat template, eos, decode)

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[Completion]: ...

    def update_weights(self, model: Any) -> None:
        """Make later generations use ``model``'s current weights (after an optimizer step)."""
        ...

    def release_memory(self) -> None:
        """Before an optimizer step: free what generation keeps between calls (caches, weight copies) for the
        update to use; the next generation rebuilds it, with the same results."""
        ...


def seed_generators(value: int) -> None:
    """Seed torch's global generator (CPU and every CUDA device) and numpy's: the transformers backend and vLLM's
    CPU runner sample from torch's, and vLLM's GPU model runner (V2, the default where Triton is) gives each
    unseeded request a seed drawn from numpy's global generator."""
    import numpy as np
    import torch

    torch.manual_seed(value)
    np.random.seed(value % 2**32)
