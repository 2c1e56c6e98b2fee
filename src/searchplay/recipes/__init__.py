"""Recipes: one folder per paper's method, each registering itself into the generic registries.

``load_recipes()`` imports every recipe; the CLI calls it before it builds its commands, and so does anything
else that looks a variant up by name. A recipe's ``__init__`` registers its parts at import: its self-play
variant and Proposer prompt (``searchplay.selfplay.variants``), rewards (``searchplay.rewards``), step function
and seed source (``searchplay.selfplay.loop``), phases (``searchplay.selfplay.phases``), warm-start
(``searchplay.policy.WARMSTARTS``, ``searchplay.warmstart.commands``), warm-start demo formats
(``searchplay.warmstart.formats``) and what else it hooks into. The packages below never import a recipe
(docs/architecture.md, "Package floors"); a new method is a new folder here and a line in ``load_recipes``.

* ``eve``: EVE-Agent (evidence-grounded self-play in two phases).
"""

from __future__ import annotations


def load_recipes() -> tuple[str, ...]:
    """Import (and so register) every recipe; returns their names. Importing twice registers nothing twice."""
    from searchplay.recipes import eve

    return (eve.NAME,)
