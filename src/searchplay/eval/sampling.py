"""Which questions an evaluation asks: n per benchmark, drawn with a recorded seed.

The papers sample 500 questions per benchmark and use all 125 of Bamboogle (SSP §4.1).
``min(n, size)`` gives exactly that at n=500; the drawn ids are saved with the results
(``sample.json``) so a later run can be repeated on the same questions.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from searchplay.eval.benchmarks import QAItem


def sample_items(items: Sequence[QAItem], n: int, seed: int) -> list[QAItem]:
    """``n`` items chosen by ``random.Random(seed)``, kept in file order; all of them when ``n >= len``.

    Same rule as the benchmark files' own sampling (``sorted(Random(seed).sample(range(N), n))``),
    so a sample depends only on the file, ``n`` and ``seed``.
    """
    if n >= len(items):
        return list(items)
    indices = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in indices]
