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

    ``allowed_tokens(row, generated_ids)`` -> the token ids row ``row`` may write next (constrained
    decoding, e.g. the KG selector's ``{"answer": k}``); None leaves the vocabulary open.
    """

    max_new_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    allowed_tokens: Callable[[int, list[int]], list[int]] | None = field(default=None, compare=False)


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
