"""One PolicyTrainer step with two CPU processes (torch.distributed, gloo) equals the single-process step
the samples are sharded over the processes, each process's loss is scaled so that DDP's gradient
average is the single-process sum, and the statistics are reduced. ``two_process_step.py`` runs the step."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.processes import free_port, run

pytestmark = pytest.mark.slow  # two processes start torch, transformers and accelerate (~20 s on 2 cores)

SCRIPT = Path(__file__).with_name("two_process_step.py")
BIN = Path(sys.executable).parent


def test_two_process_step_matches_the_single_process_step(tmp_path, tiny_model_path):
    import torch
    from safetensors.torch import load_file

    run([sys.executable, str(SCRIPT), str(tiny_model_path), str(tmp_path / "one.pt")])
    run([str(BIN / "torchrun"), "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port",
         str(free_port()), str(SCRIPT), str(tiny_model_path), str(tmp_path / "two.pt")])
    one, two = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")
    assert (one["processes"], two["processes"]) == (1, 2)
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-5)
    initial = load_file(str(next(Path(tiny_model_path).glob("*.safetensors"))))
    moved = max((one["state"][k] - initial[k]).abs().max().item() for k in initial if k in one["state"])
    assert moved > 1e-4  # the step really updated the weights
    # AdamW's first step is about lr * g / (|g| + eps): where |g| is near eps, float-order differences of the
    # all-reduce show up, so the bound is 1% of lr (1e-2) per weight; a wrong scaling or a missing reduce moves
    # every weight by about lr.
    for name, weights in one["state"].items():
        torch.testing.assert_close(two["state"][name], weights, atol=1e-4, rtol=0.0, msg=name)
    differences = torch.cat([(two["state"][k] - w).abs().flatten() for k, w in one["state"].items()])
    assert differences.mean().item() < 1e-6
