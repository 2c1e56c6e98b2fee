"""One colour per model in every chart the comparison draws (compare.png, retrieval.png, selfplay.png).

Fixed per name, so a model keeps its colour whatever else is plotted beside it: the references in greys and
blues, the self-play variants in distinct hues, a variant's first phase (``<variant>_phase_a``) a lighter
tint of its colour. A recipe adds its models' colours (``register_colors``) when it is imported. A name not listed
takes a colour from the rest of the tab20 palette by a stable hash.
"""

from __future__ import annotations

import zlib

MODEL_COLORS = {
    "base": "#7f7f7f",  # grey: no training
    "warmstart": "#1f77b4",  # blue: the format warm-start
    "ssp": "#ff7f0e",
    "kg_wcr": "#2ca02c",
    "gdcr": "#9467bd",
    "kg": "#d62728",
    "kg_wcr_gdcr": "#e377c2",
    "ssp_kg_answers": "#bcbd22",
    "kg_template": "#17becf",
    "gdcr_template": "#7b4173",  # dark purple: gdcr's reward on the template questions
    "kg_draft": "#393b79",
}
PHASE_TINTS: dict[str, str] = {}  # a two-phase variant's first-phase run -> its tint (a recipe's, register_colors)
SPARE = ("#98df8a", "#ff9896", "#c5b0d5", "#f7b6d2", "#dbdb8d", "#9edae5", "#ffbb78")
REFERENCE_HATCH = "//"  # bars of a paper's published result: hatched and white-filled, never one of ours


def register_colors(models: dict[str, str], phases: dict[str, str] | None = None) -> None:
    """Add a recipe's model colours and its first-phase tints (at import); a name taken by another colour is an
    error, the same colour again a no-op."""
    for table, entries in ((MODEL_COLORS, models), (PHASE_TINTS, phases or {})):
        for name, color in entries.items():
            if table.get(name, color) != color:
                raise ValueError(f"model {name!r} already has the colour {table[name]}")
            table[name] = color


def model_color(name: str) -> str:
    """The colour of model or run ``name``.

    >>> model_color("kg_wcr"), model_color("ssp")
    ('#2ca02c', '#ff7f0e')
    """
    if name in MODEL_COLORS:
        return MODEL_COLORS[name]
    if name in PHASE_TINTS:
        return PHASE_TINTS[name]
    return SPARE[zlib.crc32(name.encode()) % len(SPARE)]
