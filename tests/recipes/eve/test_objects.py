"""EVE's per-run objects ride on the shared runtime's ``recipe`` slot, set by EVE's prepare hook."""

from __future__ import annotations

from types import SimpleNamespace

from searchplay.recipes.eve.objects import EveObjects, eve_objects
from searchplay.recipes.eve.phases import prepare_runtime
from searchplay.selfplay.variants import get_variant


def test_the_prepare_hook_puts_the_hand_off_hooks_in_the_recipe_slot():
    runtime = SimpleNamespace(recipe=None)
    prepare_runtime(runtime, SimpleNamespace(), "start", get_variant("eve"))
    assert isinstance(runtime.recipe, EveObjects) and eve_objects(runtime) is runtime.recipe
    assert callable(runtime.recipe.handoff_documents) and callable(runtime.recipe.reset_policy)
    assert runtime.recipe.selector is None  # built on first use


def test_a_runtime_built_without_the_hook_gets_an_empty_one_on_first_use():
    runtime = SimpleNamespace(recipe=None)
    made = eve_objects(runtime)
    assert made == EveObjects() and eve_objects(runtime) is made
