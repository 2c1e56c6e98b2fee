"""Two ranks under torchrun (gloo, CPU) train the tiny model sharded with FSDP2 (torch's ``fully_shard``) and
save or read its resume state with ``searchplay.rl.resume_state``. Used by test_resume_state.py.

    torchrun --nproc_per_node 2 fsdp2_resume.py unbroken|first|resumed MODEL_DIR WORK_DIR

``unbroken``: three AdamW steps. ``first``: two steps, then the resume state into WORK_DIR/state. ``resumed``: a
fresh sharded model reads that state and takes the third step. Rank 0 writes the gathered weights (the full state
dict the HF export gathers) to WORK_DIR/<mode>.pt, with a draw of torch's generator after the save or load.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

STEPS = 3
SAVED_AFTER = 2


def batch(step: int, rank: int):
    """A different sequence per step and rank (each rank trains on its own data, as in data parallelism)."""
    import torch

    return torch.tensor([[1 + (7 * step + 13 * rank + 3 * j) % 60 for j in range(12)]])


def sharded_model(model_dir: str):
    import torch
    from torch.distributed.fsdp import fully_shard

    from searchplay.llm.weights import load_causal_lm

    model = load_causal_lm(model_dir, dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)


def train(model, optimizer, steps: range, rank: int) -> None:
    for step in steps:
        ids = batch(step, rank)
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def main(mode: str, model_dir: str, work: str) -> None:
    import torch
    import torch.distributed as dist

    from searchplay.rl.resume_state import gathered_weights, load_resume_state, save_resume_state

    dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    torch.manual_seed(0)
    model, optimizer = sharded_model(model_dir)
    state = Path(work) / "state"
    draw = None
    if mode == "unbroken":
        train(model, optimizer, range(STEPS), rank)
    elif mode == "first":
        train(model, optimizer, range(SAVED_AFTER), rank)
        save_resume_state(state, model, optimizer, rank)
        draw = torch.rand(4)
    else:
        torch.manual_seed(1)  # another generator state than the saved one: the load must bring that back
        load_resume_state(state, model, optimizer, rank)
        draw = torch.rand(4)
        train(model, optimizer, range(SAVED_AFTER, STEPS), rank)
    full = gathered_weights(model)  # what PolicyTrainer.export writes under FSDP
    local = {name: tuple(p.to_local().shape) for name, p in model.named_parameters()}
    if rank == 0:
        torch.save({"weights": full, "draw": draw, "local_shapes": local, "world": dist.get_world_size()},
                   Path(work) / f"{mode}.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:4])
