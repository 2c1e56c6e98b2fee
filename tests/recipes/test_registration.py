"""A variant is a folder and a registry entry: registering one makes it runnable by name, an unknown name lists
what is registered, and the shared loop, its commands and the shared warm-start never name a variant."""

from __future__ import annotations

import random
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from searchplay.config import Params
from searchplay.selfplay import loop, phases, variants
from searchplay.selfplay.replay import ReplayBuffer
from searchplay.selfplay.seeds import Seed, SeedCursor
from searchplay.selfplay.step import LoopState, StepResult

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "searchplay"
SHARED = ["selfplay/loop.py", "selfplay/phases.py", "selfplay/commands.py", "selfplay/variants.py",
          "warmstart/stage.py", "warmstart/validity.py", "warmstart/formats.py", "warmstart/commands.py", "cli.py"]
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
    monkeypatch.setattr(loop, "STEP_FUNCTIONS", dict(loop.STEP_FUNCTIONS))
    monkeypatch.setattr(loop, "SEED_SOURCES", dict(loop.SEED_SOURCES))
    monkeypatch.setattr(phases, "PHASED", dict(phases.PHASED))
    variants.register_variant(TOY)
    variants.register_variant(TOY)  # the same declaration again: a no-op (a recipe imported twice)
    loop.register_step("toy_step", toy_step)
    loop.register_seed_source("toy_seeds", toy_seeds)
    phases.register_phases("toy_step", TOY_PHASES)
    assert variants.get_variant("toy") is TOY and loop.step_function(TOY) is toy_step
    assert loop.load_seeds(Params(), TOY) == toy_seeds(Params()) and phases.phases_of(TOY) is TOY_PHASES
    with pytest.raises(ValueError, match="already registered"):
        variants.register_variant(variants.Variant("toy", seeds="kg", proposer_prompt="kg", solver_reward="wcr"))
    with pytest.raises(ValueError, match="already registered"):
        loop.register_step("toy_step", lambda *args: None)


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


def test_the_name_check_sees_a_variant_creep_back():
    assert named_variants('steps = {"joint": run_step, "eve": eve.run_eve_step}  # EVE') == ["EVE", "eve"]
    assert named_variants('("proposer_kg", "proposer_eve")') == ["eve"]
    assert named_variants("every event; evening; seven; retrieve; Steve; reverse") == []
