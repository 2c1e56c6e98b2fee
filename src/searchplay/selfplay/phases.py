"""Variants trained in phases, declared in one table: the loop and the CLI ask it, and never name a variant.

A variant whose ``Variant.step`` is a key of ``PHASED`` can run one phase at a time (``selfplay --phase a``),
each as its own DVC stage with its own checkpoints, reports and MLflow run; e.g. a first phase that trains
the Proposer and ends by writing a hand-off set, and a second that trains the Solver on that set. A new
phased method is a recipe (``searchplay.recipes``) that adds its entry here with ``register_phases`` and its
step function to the loop's registry (``searchplay.selfplay.loop.register_step``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from searchplay.config import Params
from searchplay.selfplay.variants import Variant

ALL = "all"  # every phase of the variant in one run (a one-phase variant's only choice)


@dataclass(frozen=True)
class Phases:
    """How a phased variant splits into runs."""

    names: tuple[str, ...]  # the phases, in training order
    iterations: Callable[[Params, str], int]  # a phase's iterations when --iterations is not given
    run_name: Callable[[str, str], str]  # (variant, phase) -> the run's checkpoint, report and MLflow name
    state: Callable[[Params, str, str], dict[str, Any]]  # (params, phase, variant) -> loop state pinning the phase
    finish: dict[str, Callable[..., Any]] = field(default_factory=dict)  # phase -> its last act (loop.finish_phase)
    prepare: Callable[..., None] | None = None  # (runtime, params, start, variant): hooks on the built runtime
    # (the recipe's own per-run objects go in ``runtime.recipe``)
    one_process: bool = True  # the phase hands off files one process writes: no `accelerate launch`
    help: str = ""  # what each phase does, for ``selfplay --phase``'s help


PHASED: dict[str, Phases] = {}  # Variant.step -> its phases; recipes add theirs (register_phases)


class PhaseError(RuntimeError):
    """A phase that cannot start (e.g. a second phase without the hand-off set of the first)."""


def register_phases(step: str, phases: Phases) -> None:
    """Declare that variants with ``Variant.step == step`` train in ``phases`` (a recipe's, at import)."""
    if PHASED.get(step, phases) is not phases:
        raise ValueError(f"the step {step!r} already has phases registered")
    PHASED[step] = phases


def phases_of(variant: Variant) -> Phases | None:
    """The variant's phases, or None for a variant trained in one run."""
    return PHASED.get(variant.step)


def check_phase(variant: Variant, phase: str) -> None:
    """A ``--phase`` the variant has, or ``all``; a ValueError naming the choices otherwise."""
    phases = phases_of(variant)
    if phase != ALL and (phases is None or phase not in phases.names):
        choices = ", ".join((ALL, *phases.names)) if phases else ALL
        raise ValueError(f"--phase {phase!r}: {variant.name!r} has {choices}")


def run_name(variant: Variant, phase: str) -> str:
    """The checkpoint, report and MLflow name of a run of ``phase`` (the variant's name for a whole run)."""
    phases = phases_of(variant)
    return phases.run_name(variant.name, phase) if phases else variant.name


def phase_iterations(params: Params, variant: Variant, phase: str) -> int:
    """Iterations of a run of ``phase`` when none are given: the phase's own, or ``selfplay.iterations``."""
    phases = phases_of(variant)
    return phases.iterations(params, phase) if phases and phase != ALL else params.selfplay.iterations


def pinned_state(params: Params, variant: Variant, phase: str) -> dict[str, Any]:
    """The loop state that keeps a run in ``phase`` (nothing for a whole run)."""
    phases = phases_of(variant)
    return phases.state(params, phase, variant.name) if phases and phase != ALL else {}


def finisher(variant: Variant, phase: str) -> Callable[..., Any] | None:
    """What runs after the last iteration of ``phase`` (e.g. writing a hand-off set), if anything."""
    phases = phases_of(variant)
    return phases.finish.get(phase) if phases else None


def one_process(variant: Variant) -> bool:
    phases = phases_of(variant)
    return bool(phases and phases.one_process)
