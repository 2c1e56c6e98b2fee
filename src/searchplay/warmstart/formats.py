"""The warm-start's format table: demo families that a recipe adds to the shared stage.

The shared warm-start (``searchplay.warmstart.stage``) trains every self-play role of ``demos.ROLES``; a recipe
whose method speaks formats of its own (its Proposer's output, a Solver that quotes evidence, another verifier
prompt) registers a ``DemoFormat`` here with ``register_format``. The stage then builds its demos, schedules them
beside the plain ones and measures their validity before and after training, whenever ``enabled(params)`` says
so; it never names a format. A recipe's own warm-start stage reuses the same pieces (``DemoFormat.build`` and
``DemoFormat.validity`` over the stage's public functions).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from searchplay.warmstart.demos import Demo, DemoBuilder

DemoBuild = Callable[[DemoBuilder, list[dict[str, Any]], Sequence[str], random.Random], tuple[list[Demo], Counter]]
ValidityCheck = Callable[..., tuple[dict[str, float], dict[str, list[dict]]]]  # (backend, search_tool, records,
# params, seed) -> (rates, decoded samples), as ``validity.format_validity`` returns them


@dataclass(frozen=True)
class DemoFormat:
    """One family of demos beyond the self-play roles: its roles, how to build and check them, and where each
    role joins the schedule's Proposer, Solver and verifier rotations (``stage.schedule``)."""

    name: str
    roles: tuple[str, ...]  # demo roles, in the order the stage counts and reports them
    build: DemoBuild  # (builder, records, roles, rng) -> (demos of those roles, drop reasons)
    validity: ValidityCheck  # the family's format rates on the held-out check records
    enabled: Callable[[Any], bool]  # params -> whether the shared warm-start mixes this family in
    families: dict[str, tuple[str, ...]] = field(default_factory=dict)  # 'proposer' | 'solver' | 'verifier' ->
    # its roles that take a turn in that rotation, after the plain roles


FORMATS: dict[str, DemoFormat] = {}  # name -> format, in registration order (the schedule's and reports' order)


def register_format(demo_format: DemoFormat) -> None:
    """Add ``demo_format`` to the table (a recipe's, at import); the same declaration again is a no-op."""
    if FORMATS.get(demo_format.name, demo_format) is not demo_format:
        raise ValueError(f"warm-start format {demo_format.name!r} is already registered")
    FORMATS[demo_format.name] = demo_format


def registered_roles() -> tuple[str, ...]:
    """Every registered format's roles, in the table's order."""
    return tuple(role for demo_format in FORMATS.values() for role in demo_format.roles)


def enabled_formats(params: Any) -> list[DemoFormat]:
    """The formats the shared warm-start mixes in under ``params``."""
    return [demo_format for demo_format in FORMATS.values() if demo_format.enabled(params)]


def family_roles(family: str) -> tuple[str, ...]:
    """The registered roles that take turns in ``family``'s rotation ('proposer', 'solver' or 'verifier')."""
    return tuple(role for demo_format in FORMATS.values() for role in demo_format.families.get(family, ()))
