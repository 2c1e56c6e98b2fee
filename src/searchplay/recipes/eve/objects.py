"""EVE's own per-run objects, kept on the shared runtime's ``recipe`` slot (``searchplay.selfplay.step.Runtime``).

``phases.prepare_runtime`` (EVE's ``prepare`` hook, run by ``searchplay.selfplay.loop.build_runtime``) sets the
hand-off's two hooks; the corpus selector is built on first use (``phases.corpus_selector``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from searchplay.selfplay.seeds import Seed
from searchplay.selfplay.step import Runtime


@dataclass
class EveObjects:
    """What EVE's step needs beyond the shared runtime."""

    handoff_documents: Callable[[], list[Seed]] | None = None  # the held-out source documents of the hand-off
    reset_policy: Callable[[], None] | None = None  # trainer and backend back to the initial weights
    selector: Any = None  # the corpus selector (searchplay.recipes.eve.corpus_selector), built on first use


def eve_objects(runtime: Runtime) -> EveObjects:
    """``runtime.recipe``, an empty ``EveObjects`` put there first if it holds none (a runtime built without
    EVE's ``prepare`` hook, e.g. a test's)."""
    if runtime.recipe is None:
        runtime.recipe = EveObjects()
    return runtime.recipe
