"""A variant is a folder and a registry entry: registering one makes it runnable by name, a valid
``selfplay.variant`` and an evaluable model; an unknown name lists what is registered; and the shared loop, its
commands, the shared warm-start, the params and evaluation never name a recipe's variant."""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from searchplay import model_paths
from searchplay.config import ConfigError, Params, load_params
from searchplay.selfplay import loop, phases, variants
from searchplay.selfplay.replay import ReplayBuffer
from searchplay.selfplay.seeds import Seed, SeedCursor
from searchplay.selfplay.step import LoopState, StepResult

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "searchplay"
SHARED = ["selfplay/loop.py", "selfplay/phases.py", "selfplay/commands.py", "selfplay/variants.py",
          "selfplay/step.py", "selfplay/seeds.py", "warmstart/stage.py", "warmstart/validity.py",
          "warmstart/formats.py", "warmstart/commands.py", "eval/commands.py", "model_paths.py", "status.py", "cli.py",
          "cliutil.py"]
MODEL_LISTS = ["config.py", "eval/evaluate.py", "eval/commands.py"]  # modules that once listed the models by name
TOY = variants.Variant("toy", seeds="toy_seeds", proposer_prompt="ssp", solver_reward="binary", step="toy_step")


def toy_seeds(params: Params) -> list[Seed]:
    return [Seed("s1", "Paris"), Seed("s2", "Rome")]


def toy_step(runtime, variant, params, state) -> StepResult:
    seed = state.cursor.seeds[state.iteration % len(state.cursor.seeds)]
    return StepResult({"toy/answer_length": float(len(seed.answer))}, {})


TOY_PHASES = phases.Phases(names=("one", "two"), iterations=lambda params, phase: 3 if phase == "one" else 4,
                           run_name=lambda variant, phase: f"{variant}_{phase}",
                           state=lambda params, phase, variant: {"phase": phase}, help="one = the first; two = next")


@pytest.fixture()
def toy(monkeypatch):
    """The toy variant, its step, seed source and phases registered for one test (the registries restored after)."""
    monkeypatch.setitem(variants.VARIANTS, "toy", TOY)
    monkeypatch.setitem(loop.STEP_FUNCTIONS, "toy_step", toy_step)
    monkeypatch.setitem(loop.SEED_SOURCES, "toy_seeds", toy_seeds)
    monkeypatch.setitem(phases.PHASED, "toy_step", TOY_PHASES)
    return TOY


def test_a_registered_variant_runs_by_name(toy):
    params = Params()
    variant = variants.get_variant("toy")
    seeds = loop.load_seeds(params, variant)
    state = LoopState(0, SeedCursor(seeds), ReplayBuffer(), random.Random(0))
    runtime = SimpleNamespace(trainer=SimpleNamespace())
    _, row = loop.train_iteration(runtime, variant, params, state, 1, 2)
    assert loop.step_function(variant) is toy_step and row["toy/answer_length"] == 5.0 and state.iteration == 1
    assert phases.run_name(variant, "one") == "toy_one" and phases.phase_iterations(params, variant, "two") == 4
    assert phases.pinned_state(params, variant, "two") == {"phase": "two"}


def test_the_register_functions_add_to_the_registries_and_refuse_a_different_entry(monkeypatch):
    monkeypatch.setattr(variants, "VARIANTS", dict(variants.VARIANTS))
    monkeypatch.setattr(model_paths, "SELFPLAY_VARIANTS", list(model_paths.SELFPLAY_VARIANTS))
    monkeypatch.setattr(loop, "STEP_FUNCTIONS", dict(loop.STEP_FUNCTIONS))
    monkeypatch.setattr(loop, "SEED_SOURCES", dict(loop.SEED_SOURCES))
    monkeypatch.setattr(phases, "PHASED", dict(phases.PHASED))
    loop.register_step("toy_step", toy_step)
    loop.register_seed_source("toy_seeds", toy_seeds)
    phases.register_phases("toy_step", TOY_PHASES)
    variants.register_variant(TOY)
    variants.register_variant(TOY)  # the same declaration again: a no-op (a recipe imported twice)
    assert variants.get_variant("toy") is TOY and loop.step_function(TOY) is toy_step
    assert loop.load_seeds(Params(), TOY) == toy_seeds(Params()) and phases.phases_of(TOY) is TOY_PHASES
    with pytest.raises(ValueError, match="already registered"):
        variants.register_variant(variants.Variant("toy", seeds="kg", proposer_prompt="kg", solver_reward="wcr"))
    with pytest.raises(ValueError, match="already registered"):
        loop.register_step("toy_step", lambda *args: None)


def test_a_registered_variant_is_a_valid_selfplay_variant_and_an_evaluable_model(monkeypatch, tmp_path):
    from searchplay.eval.evaluate import ModelNotFoundError, evaluable_variants

    monkeypatch.setattr(variants, "VARIANTS", dict(variants.VARIANTS))  # the registries as they were, after the test
    monkeypatch.setattr(model_paths, "SELFPLAY_VARIANTS", list(model_paths.SELFPLAY_VARIANTS))
    monkeypatch.setitem(loop.STEP_FUNCTIONS, "toy_step", toy_step)
    monkeypatch.setitem(loop.SEED_SOURCES, "toy_seeds", toy_seeds)
    absent, toy = tmp_path / "absent.yaml", {"selfplay.variant": "toy"}
    with pytest.raises(ConfigError, match=r"selfplay\.variant: expected one of .*'eve'.*; got 'toy'"):
        load_params(absent, toy, variants=model_paths.selfplay_variants())
    assert "toy" not in evaluable_variants()
    variants.register_variant(TOY)
    assert load_params(absent, toy, variants=model_paths.selfplay_variants()).selfplay.variant == "toy"
    assert evaluable_variants() == ("base", "warmstart", "warmstart_eve", *variants.VARIANTS)
    assert evaluable_variants()[-1] == "toy"

    seen = []

    def fake_evaluate(params, variant, **kwargs):
        seen.append((variant, params.selfplay.variant))
        raise ModelNotFoundError("stopped by the test")

    from searchplay.cli import app

    monkeypatch.setattr("searchplay.eval.evaluate.evaluate", fake_evaluate)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["evaluate", "--variant", "toy"])
    assert result.exit_code == 2 and seen == [("toy", "toy")]  # a self-play variant: its params are logged


def test_an_unknown_variant_lists_the_registered_ones():
    with pytest.raises(ValueError, match=r"unknown self-play variant 'nope'; registered: \[") as error:
        variants.get_variant("nope")
    assert all(repr(name) in str(error.value) for name in variants.VARIANTS)
    assert "'eve'" in str(error.value)  # the recipe's variant, registered by load_recipes (tests/conftest.py)


def test_an_unknown_step_or_seed_source_lists_the_registered_ones():
    broken = variants.Variant("broken", seeds="nowhere", proposer_prompt="ssp", solver_reward="binary", step="nope")
    with pytest.raises(loop.SelfplayError, match=r"known: \['eve', 'joint'\]"):
        loop.step_function(broken)
    with pytest.raises(loop.SelfplayError, match=r"known: \['answers', 'documents', 'kg'\]"):
        loop.load_seeds(Params(), broken)


def test_a_registered_phased_variant_names_its_phases_and_the_cli_its_help(toy):
    from searchplay.selfplay.commands import phase_help, variant_help

    with pytest.raises(ValueError, match="'toy' has all, one, two"):
        phases.check_phase(toy, "three")
    assert "toy" in variant_help() and "toy: one = the first; two = next" in phase_help()


def test_the_cli_lists_the_recipes_flags_and_variants():
    from searchplay.cli import app

    warmstart = CliRunner().invoke(app, ["warmstart", "--help"], env={"COLUMNS": "200"})
    selfplay = CliRunner().invoke(app, ["selfplay", "--help"], env={"COLUMNS": "200"})
    assert warmstart.exit_code == 0 and "--eve" in warmstart.output
    assert selfplay.exit_code == 0 and "eve: a = Phase A + the hand-off set" in " ".join(selfplay.output.split())


def named_variants(text: str) -> list[str]:
    """Every recipe named as a word in ``text`` (any case; ``_`` separates words), e.g. ``eve`` in
    ``eve.run_step`` or ``proposer_eve``."""
    from searchplay.recipes import load_recipes

    return sorted({match.group(0) for name in load_recipes()
                   for match in re.finditer(rf"(?<![A-Za-z0-9]){name}(?![A-Za-z0-9])", text, re.IGNORECASE)})


@pytest.mark.parametrize("module", SHARED)
def test_the_shared_loop_commands_and_warm_start_name_no_recipe(module):
    assert named_variants((PACKAGE / module).read_text(encoding="utf-8")) == []


def test_no_module_outside_a_recipes_folder_names_the_recipe():
    """Config, rl, rewards, eval, colours and every other shared module: a recipe lives in its folder only."""
    from searchplay.recipes import load_recipes

    for name in load_recipes():
        folder = PACKAGE / "recipes" / name
        named = {str(path.relative_to(PACKAGE)): found for path in sorted(PACKAGE.rglob("*.py"))
                 if not path.is_relative_to(folder) and (found := named_variants(path.read_text(encoding="utf-8")))}
        assert named == {}, f"shared modules that name the recipe {name!r}: {named}"


def test_a_variant_naming_what_is_not_registered_is_refused_at_registration(monkeypatch):
    monkeypatch.setattr(variants, "VARIANTS", dict(variants.VARIANTS))
    typo = variants.Variant("typo", seeds="kg", proposer_prompt="kg", solver_reward="wrc", rollout_fields=("nope",))
    with pytest.raises(ValueError, match=r"^self-play variant 'typo' names what is not registered: solver_reward "
                                         r"'wrc' \(registered: \[.*'wcr'.*\]\); rollout_fields 'nope'") as error:
        variants.register_variant(typo)
    assert "\n" not in str(error.value) and "typo" not in variants.VARIANTS


@pytest.mark.parametrize("module", MODEL_LISTS)
def test_the_params_and_evaluation_list_no_recipe_model_by_name(module):
    assert listed_recipe_models((PACKAGE / module).read_text(encoding="utf-8")) == []


def listed_recipe_models(source: str) -> list[str]:
    """A recipe's models named where ``source`` lists or picks models: its warm-start's model name anywhere as a
    string; its variant's name beside another model's name in one tuple, list, set, dict or ``Literal[...]``, or
    compared with ``==`` / ``in``. (The word alone is no sign: ``eve`` is also a params section.)"""
    from searchplay.recipes import load_recipes

    recipe_variants = set(load_recipes())
    recipe_warmstarts = set(model_paths.warmstart_models()) - {model_paths.WARMSTARTS["shared"].model}
    models = {"base", *model_paths.warmstart_models(), *model_paths.selfplay_variants()}
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and node.value in recipe_warmstarts:
            found.add(node.value)
        names = string_items(node)
        ours = names & recipe_variants
        if ours and (isinstance(node, ast.Compare) or names & (models - ours)):
            found |= ours
    return sorted(found)


def string_items(node: ast.AST) -> set[str]:
    """The string constants a collection (its items, a dict's keys) or a comparison (both sides) holds."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        items = node.elts
    elif isinstance(node, ast.Dict):
        items = node.keys
    elif isinstance(node, ast.Compare):
        items = [node.left, *node.comparators]
    else:
        return set()
    return {item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)}


def test_the_model_list_check_sees_a_recipe_listed_or_picked_by_name():
    assert listed_recipe_models('Variant = Literal["ssp", "kg_wcr", "eve"]') == ["eve"]
    assert listed_recipe_models('names = (BASE, WARMSTART, "warmstart_eve")') == ["warmstart_eve"]
    assert listed_recipe_models('folder = eve_dir if variant == "eve" else shared') == ["eve"]
    assert listed_recipe_models('STARTED_FROM = {"kg_wcr": "warmstart", "eve": "warmstart_eve"}') == [
        "eve", "warmstart_eve"]
    assert listed_recipe_models('SECTIONS = ("selfplay", "eve")  # params sections') == []
    assert listed_recipe_models('x = Field(description="the `eve` variant"); params.eve.seed') == []


def test_the_name_check_sees_a_variant_creep_back():
    assert named_variants('steps = {"joint": run_step, "eve": eve.run_eve_step}  # EVE') == ["EVE", "eve"]
    assert named_variants('("proposer_kg", "proposer_eve")') == ["eve"]
    assert named_variants("every event; evening; seven; retrieve; Steve; reverse") == []


def test_every_registered_variant_names_only_registered_parts():
    assert {name: variants.unregistered_names(v) for name, v in variants.VARIANTS.items()
            if variants.unregistered_names(v)} == {}
