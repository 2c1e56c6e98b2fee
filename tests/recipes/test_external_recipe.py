"""A recipe kept outside this repository, found through ``SEARCHPLAY_RECIPES``: a toy package in a temporary folder
adds its own params section, a Solver reward that reads a per-rollout signal of its own and its own warm-start
demo format; then the real CLI, in its own processes, runs the warm-start with that format, one self-play iteration
of the toy variant and an evaluation of its checkpoint. Nothing outside the toy package is edited. A tiny
random-init model and a tiny real LanceDB index keep it short."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.warmstart.test_stage import write_chain_index, write_pool

pytestmark = pytest.mark.slow  # three CLI processes (torch + transformers + mlflow imports)

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]

TOY_RECIPE = '''
"""A toy recipe: a Solver reward from the rollout's own length, a params section and a demo format."""

from pydantic import Field

from searchplay.agent.prompts import solver_messages
from searchplay.config import Section, register_section
from searchplay.rewards import SolverRewards, register_rollout_field, register_solver_reward
from searchplay.selfplay.variants import Variant, register_variant
from searchplay.warmstart.demos import Demo, Segment
from searchplay.warmstart.formats import DemoFormat, register_format

NAME = "toy"


class ToyParams(Section):
    min_tokens: int = Field(1, ge=0, description="tokens a rollout must generate to earn the reward")
    demos: bool = Field(False, description="mix the toy demos into the shared warm-start")


def generated_tokens(trajectory):
    """A per-rollout signal no shared dataclass carries."""
    return trajectory.generated_token_count


def solver_long_enough(group, params):
    """1 for a rollout that generated at least ``toy.min_tokens`` tokens, else 0."""
    return SolverRewards([float(r["generated"] >= params.toy.min_tokens) for r in group.rollouts])


def build_demos(builder, records, roles, rng):
    demos = [Demo("solver_toy", r["id"], [Segment(builder.encode_prompt(solver_messages(r["answer"])), False),
                                          Segment(builder.encode_text(f"<answer> {r['answer']} </answer>"), True)])
             for r in records]
    return demos, {}


def validity(backend, search_tool, records, params, seed=0):
    return {"solver_toy_records": float(len(records))}, {}


register_section("toy", ToyParams)
register_rollout_field("generated", generated_tokens)
register_solver_reward("long_enough", solver_long_enough)
register_format(DemoFormat(name="toy", roles=("solver_toy",), build=build_demos, validity=validity,
                           enabled=lambda params: params.toy.demos, families={"solver": ("solver_toy",)}))
register_variant(Variant("toy", seeds="kg", proposer_prompt="kg", solver_reward="long_enough", questions="template",
                         rollout_fields=("generated",), description="toy: reward = generated enough tokens"))
'''


def run(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(project / "packages"), "SEARCHPLAY_RECIPES": "toy_recipe",
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["searchplay", "--params", "params.yaml", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=900)


def test_a_recipe_outside_the_repository_trains_and_evaluates_through_the_cli(tmp_path, tiny_model_dir):
    package = tmp_path / "packages" / "toy_recipe"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(TOY_RECIPE))
    records = write_pool(tmp_path / "kg", ["warmstart"] * 4 + ["selfplay"] * 4)
    write_chain_index(tmp_path / "retrieval", records)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "models": {"policy": str(tiny_model_dir), "device": "cpu"},
        "kg": {"out_dir": str(tmp_path / "kg"), "heldout_share": 0.0},
        "index": {"dir": str(tmp_path / "retrieval" / "index")},
        "search": {"mode": "fts"},
        "agent": {"max_turns": 2, "max_turn_tokens": 16, "max_response_tokens": 128},
        "warmstart": {"demos_per_role": 2, "steps": 2, "warmup_steps": 0, "eval_prompts": 1},
        "selfplay": {"batch_size": 2, "group_size": 2, "micro_batch_size": 1, "checkpoint_dir": "checkpoints",
                     "reports_dir": "reports/selfplay"},
        "evaluate": {"max_turns": 2, "batch_size": 2},
        "tracking": {"uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
        "toy": {"min_tokens": 1, "demos": True},
    }))

    refused = run(tmp_path, "--set", "toy.min_tokens=-1", "selfplay", "--variant", "toy")
    assert refused.returncode != 0 and "toy.min_tokens" in refused.stderr + refused.stdout

    warmstart = run(tmp_path, "warmstart")
    assert warmstart.returncode == 0, warmstart.stdout[-3000:] + warmstart.stderr[-3000:]
    metrics = json.loads((tmp_path / "reports" / "warmstart" / "metrics.json").read_text())
    assert metrics["demos_solver_toy"] == 2 and metrics["solver_toy_records"] == 1  # its demos trained, its check ran

    selfplay = run(tmp_path, "selfplay", "--variant", "toy", "--iterations", "1")
    assert selfplay.returncode == 0, selfplay.stdout[-3000:] + selfplay.stderr[-3000:]
    row = json.loads((tmp_path / "reports" / "selfplay" / "toy" / "metrics.json").read_text())
    assert row["solver/rollouts"] == 4 and row["train/samples_solver"] == 4  # 2 template questions x 2 rollouts
    # every rollout generated a token: the toy reward, read from its own rollout field, not the judge's c_i
    assert row["solver/reward_mean"] == 1.0 and row["solver/accuracy"] < 1.0
    assert (tmp_path / "checkpoints" / "toy" / "resume" / "iter_000001").is_dir()
    assert (tmp_path / "checkpoints" / "toy" / "model" / "config.json").is_file()  # the export evaluation reads

    evaluate = run(tmp_path, "evaluate", "--variant", "toy", "--benchmarks", "bamboogle", "--n", "1",
                   "--data-dir", str(REPO / "data" / "benchmarks"), "--out", str(tmp_path / "eval"))
    assert evaluate.returncode == 0, evaluate.stdout[-3000:] + evaluate.stderr[-3000:]
    assert json.loads((tmp_path / "eval" / "toy" / "metrics.json").read_text())["bamboogle.n"] == 1
