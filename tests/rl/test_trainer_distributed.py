"""PolicyTrainer with two CPU processes equals the single-process trainer: one step under torchrun (gloo, DDP
through accelerate), and two updates with a KL term under `accelerate launch` with accelerate_configs/fsdp.yaml
(FSDP2), where the frozen reference is sharded like the policy. The samples are sharded over the processes, each
process's loss is scaled so that the gradient average is the single-process sum, and the statistics are reduced.
``two_process_step.py`` runs the steps."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from tests.processes import free_port, run

pytestmark = pytest.mark.slow  # two processes start torch, transformers and accelerate (~20 s on 2 cores)

SCRIPT = Path(__file__).with_name("two_process_step.py")
BIN = Path(sys.executable).parent
FSDP_CONFIG = Path(__file__).resolve().parents[2] / "accelerate_configs" / "fsdp.yaml"


def _initial(model_path: str) -> dict:
    from safetensors.torch import load_file

    return load_file(str(next(Path(model_path).glob("*.safetensors"))))


def _assert_same_weights(two: dict, one: dict) -> None:
    """AdamW's first step is about lr * g / (|g| + eps): where |g| is near eps, float-order differences of the
    all-reduce show up, so the bound is 1% of lr (1e-2) per weight; a wrong scaling or a missing reduce moves
    every weight by about lr."""
    import torch

    assert two.keys() == one.keys()
    for name, weights in one.items():
        torch.testing.assert_close(two[name], weights, atol=1e-4, rtol=0.0, msg=name)
    differences = torch.cat([(two[k] - w).abs().flatten() for k, w in one.items()])
    assert differences.mean().item() < 1e-6


def test_two_process_step_matches_the_single_process_step(tmp_path, tiny_model_path):
    import torch

    run([sys.executable, str(SCRIPT), str(tiny_model_path), str(tmp_path / "one.pt")])
    run([str(BIN / "torchrun"), "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port",
         str(free_port()), str(SCRIPT), str(tiny_model_path), str(tmp_path / "two.pt")])
    one, two = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")
    assert (one["processes"], two["processes"]) == (1, 2)
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-5)
    initial = _initial(tiny_model_path)
    moved = max((one["state"][k] - initial[k]).abs().max().item() for k in initial if k in one["state"])
    assert moved > 1e-4  # the step really updated the weights
    _assert_same_weights(two["state"], one["state"])


def test_two_fsdp_updates_with_a_kl_term_match_the_single_process_ones(tmp_path, tiny_model_path):
    """A step, then an update of two optimizer steps (the second slice's pi_old computed up front, a forward that
    leaves FSDP2's root and tail gathered). The reference is sharded like the policy (each process holds the same
    slice of both), stays at the start weights, gives the second update a finite, non-zero KL, and the distance
    from the start, the bf16 share and the largest weight change computed from the shards are the single-process
    figures (every tensor of the tiny model is under the 4,096 elements the loop fingerprints)."""
    import torch

    run([sys.executable, str(SCRIPT), str(tiny_model_path), str(tmp_path / "one.pt"), "2"])
    run([str(BIN / "accelerate"), "launch", "--config_file", str(FSDP_CONFIG), "--num_processes", "2",
         "--mixed_precision", "no", "--main_process_ip", "127.0.0.1", "--main_process_port", str(free_port()),
         str(SCRIPT), str(tiny_model_path), str(tmp_path / "two.pt"), "2"])
    one, two = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")
    assert (one["processes"], two["processes"], two["distributed_type"]) == (1, 2, "FSDP")
    initial = _initial(tiny_model_path)
    assert all(torch.equal(two["reference"][name], initial[name]) for name in initial)
    assert two["reference"].keys() == initial.keys()
    assert all(policy == reference for policy, reference in two["shards"])  # the same slice of every parameter
    assert two["prepared"] == 1  # the policy alone among the models a checkpoint saves
    # each micro-batch's gradient is reduce-scattered into the shard at once (FSDP2's no_sync would keep every
    # parameter's unsharded gradient until the last micro-batch: a 7B model's 30.5 GB on each GPU)
    assert two["gradients_held"][0] == two["shard_elements"] > 0
    full = [tuple(initial[name].shape) for name in two["state"]]
    assert sum(math.prod(p) for p, _ in two["shards"]) < sum(math.prod(shape) for shape in full)  # a slice
    kl_one, kl_two = one["stats"][1]["kl"], two["stats"][1]["kl"]
    assert math.isfinite(kl_two) and kl_two > 0 and kl_two == pytest.approx(kl_one, rel=1e-4)
    assert two["start"]["distance"] > 0
    assert two["start"]["distance"] == pytest.approx(one["start"]["distance"], rel=1e-5)
    assert two["start"]["changed_share"] == pytest.approx(one["start"]["changed_share"], rel=1e-4)
    assert two["delta"] == pytest.approx(one["delta"], rel=1e-4) and one["delta"] > 0  # the largest change
    _assert_same_weights(two["state"], one["state"])
