"""Replay buffer of past valid questions (SSP App. B.2, "Replay Buffer (Periodic Reset)").

SSP refills batch slots whose Proposer question failed the filters with a question sampled uniformly
from past valid ones, and clears the buffer every 10 steps (its best strategy, Table 5). The buffer is
plain data (JSON-serializable) so it goes into every checkpoint.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ReplayBuffer:
    """Past valid questions; each entry is a dict with at least ``question`` and ``answer``."""

    entries: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, questions: list[dict[str, Any]]) -> None:
        """Append valid questions (SSP code re-adds replayed ones too, so duplicates may accumulate)."""
        self.entries.extend(dict(q) for q in questions)

    def sample(self, k: int, rng: random.Random) -> list[dict[str, Any]]:
        """``k`` entries drawn uniformly with replacement (SSP code: one uniform draw per empty slot)."""
        if not self.entries:
            return []
        return [dict(rng.choice(self.entries)) for _ in range(k)]

    def clear(self) -> None:
        self.entries.clear()

    def to_state(self) -> list[dict[str, Any]]:
        return [dict(e) for e in self.entries]

    @classmethod
    def from_state(cls, state: list[dict[str, Any]]) -> ReplayBuffer:
        return cls(entries=[dict(e) for e in state])


def is_reset_step(iteration: int, reset_every: int) -> bool:
    """True after the step that completes a reset period (steps are counted from 1: 10, 20, ...)."""
    return reset_every > 0 and iteration % reset_every == 0
