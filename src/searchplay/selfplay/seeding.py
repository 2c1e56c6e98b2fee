"""Seeding of the sampling in self-play, so a run repeats and a resumed run matches an unbroken one.

Rollouts sample from torch's global generator (``TransformersBackend``), whose initial seed is random per
process. Each iteration (and a recipe's hand-off between phases) therefore reseeds it from ``selfplay.seed``, the
iteration and the process rank: the draws of iteration ``i`` do not depend on what ran before it in this process, so a
run resumed from checkpoint ``i - 1`` samples what the unbroken run sampled (given the same weights), and
processes of a multi-process run draw different streams. ``agent.seed``, where set, still reseeds every
turn on top of this (docs/decisions/selfplay.md).
"""

from __future__ import annotations

ITERATION, HANDOFF = 0, 1  # what a seed is for: one self-play iteration, or a two-phase recipe's hand-off


def sampling_seed(seed: int, iteration: int, rank: int = 0, purpose: int = ITERATION) -> int:
    """A 63-bit seed for (``selfplay.seed``, iteration, rank, purpose), well spread by numpy's SeedSequence.

    >>> sampling_seed(0, 1) == sampling_seed(0, 1), sampling_seed(0, 1) == sampling_seed(0, 2)
    (True, False)
    """
    import numpy as np

    words = np.random.SeedSequence([seed & (2**64 - 1), iteration, rank, purpose]).generate_state(2, dtype=np.uint32)
    return (int(words[0]) << 31 | int(words[1]) >> 1) & (2**63 - 1)


def seed_sampling(seed: int, iteration: int, rank: int = 0, purpose: int = ITERATION) -> int:
    """Seed the generators rollouts draw from for this iteration (``seed_generators``); returns the seed used."""
    from searchplay.llm.backend import seed_generators

    value = sampling_seed(seed, iteration, rank, purpose)
    seed_generators(value)
    return value
