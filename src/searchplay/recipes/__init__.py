"""Recipes: one folder per paper's method, each registering itself into the generic registries.

``load_recipes()`` imports every recipe; the CLI calls it before it builds its commands, and so does anything
else that looks a variant up by name. A recipe's ``__init__`` registers its parts at import: its params section
(``searchplay.config.register_section``), self-play variant and Proposer prompt (``searchplay.selfplay.variants``),
rewards (``searchplay.rewards``), advantage estimators (``searchplay.rl``), step function and seed source
(``searchplay.selfplay.loop``), phases (``searchplay.selfplay.phases``), warm-start (``searchplay.model_paths``,
``searchplay.warmstart.commands``), warm-start demo formats (``searchplay.warmstart.formats``), its models'
colours (``searchplay.colors``) and what else it hooks into. The packages below never import a recipe
(docs/architecture.md, "Package floors").

Where recipes come from: every sub-package of this folder (a new method is a new folder here), then every module
named in the environment variable ``SEARCHPLAY_RECIPES`` (comma-separated, importable from ``sys.path``): a recipe
kept outside this repository, e.g. ``SEARCHPLAY_RECIPES=my_lab.recipe searchplay selfplay --variant mine``.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from searchplay.io import RECIPES_ENV, outside_recipes


class RecipeError(ImportError):
    """A recipe named in ``SEARCHPLAY_RECIPES`` that cannot be imported."""


def recipe_modules() -> list[str]:
    """The recipes' module names: this folder's sub-packages (sorted), then those of ``SEARCHPLAY_RECIPES``."""
    here = [f"{__name__}.{info.name}" for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name)
            if info.ispkg]
    return here + [name for name in outside_recipes() if name not in here]


def load_recipes() -> tuple[str, ...]:
    """Import (and so register) every recipe; returns their names (each module's ``NAME``, else its last part).
    Importing twice registers nothing twice."""
    names = []
    for module_name in recipe_modules():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module_name.startswith(exc.name):
                raise
            raise RecipeError(f"{RECIPES_ENV} names the recipe {module_name!r}, which is not importable "
                              f"({exc}); put its folder on PYTHONPATH or fix the name") from None
        names.append(getattr(module, "NAME", module_name.rpartition(".")[2]))
    return tuple(names)


def load_params(*args: Any, **kwargs: Any) -> Any:
    """``searchplay.config.load_params`` once every recipe has registered its params section: for entry points
    other than the CLI (the Prefect flows, the benchmarks), where a recipe's section would be an unknown key."""
    from searchplay.config import load_params as load

    load_recipes()
    return load(*args, **kwargs)
