"""PolicyTrainer updates on fixed samples (one step, then updates of two optimizer steps), run as one process,
under torchrun with two CPU processes (gloo, DDP through accelerate), or under `accelerate launch` with
accelerate_configs/fsdp.yaml (FSDP2, two CPU processes); the main process saves the updated weights, the
statistics and the gathered reference. Used by test_trainer_distributed.py.

    python two_process_step.py MODEL_DIR OUT.pt [UPDATES]
    torchrun --nproc_per_node 2 two_process_step.py MODEL_DIR OUT.pt [UPDATES]
    accelerate launch --config_file accelerate_configs/fsdp.yaml --num_processes 2 two_process_step.py MODEL_DIR OUT.pt
"""

from __future__ import annotations

import os
import sys


def fixed_samples():
    """Four Solver-like samples with different lengths, masks and advantages (the same on every process)."""
    from searchplay.rl import TrainingSample

    samples = []
    for k in range(4):
        prompt = [1 + (7 * k + j) % 50 for j in range(6 + k)]
        response = [2 + (11 * k + j) % 60 for j in range(5 + 2 * k)]
        mask = [0 if j in (2, 3) else 1 for j in range(len(response))]
        samples.append(TrainingSample(prompt, response, mask, [(-1.0) ** k * (0.5 + k / 4)] * len(response)))
    return samples


def fsdp_on_cpu() -> None:
    """accelerate (1.15) turns FSDP on only over a group of accelerator devices: on a CPU-only machine its gloo
    group is MULTI_CPU, and the FSDP settings that `accelerate launch` passed are ignored. Name the group a
    multi-device one before the trainer's Accelerator reads it; from there on it is accelerate's FSDP2 path, with
    the config file's plugin, as on GPUs."""
    from accelerate import PartialState
    from accelerate.utils import DistributedType

    PartialState(cpu=True).distributed_type = DistributedType.MULTI_GPU


def whole(parameters) -> dict:
    """Every parameter gathered whole on every process (a collective under FSDP2), on the CPU."""
    return {name: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().cpu().clone()
            for name, p in parameters}


def record_gradients_held(trainer) -> list[int]:
    """After each micro-batch's backward, the gradient elements this process holds in ``.grad`` (the local shard
    under FSDP2). Under FSDP2's no_sync a gradient is kept unsharded inside FSDP and ``.grad`` stays empty until the
    last micro-batch: 0 here."""
    from searchplay.rl.drift import local_shards

    held: list[int] = []
    backward = trainer.accelerator.backward

    def recording(loss, **kwargs):
        backward(loss, **kwargs)
        grads = [p.grad for p in trainer.model.parameters() if p.grad is not None]
        held.append(sum(g.numel() for g in local_shards(grads)))

    trainer.accelerator.backward = recording
    return held


def main(model_dir: str, out: str, updates: int) -> None:
    import torch

    from searchplay.config import load_params
    from searchplay.rl import PolicyTrainer
    from searchplay.rl.drift import local_shards
    from searchplay.selfplay.step import weight_delta, weight_fingerprint

    if os.environ.get("ACCELERATE_USE_FSDP") == "true":
        fsdp_on_cpu()
    torch.manual_seed(0)
    params = load_params("/nonexistent/params.yaml", {
        "models.device": "cpu", "models.dtype": "float32", "selfplay.lr": 1e-2, "selfplay.warmup_steps": 0,
        "selfplay.micro_batch_size": 1, "selfplay.segmented_forward": False, "selfplay.autocast_bf16": False,
        "selfplay.kl_beta": 0.01, "selfplay.reference_on_disk": False})
    trainer = PolicyTrainer(model_dir, params)
    held = record_gradients_held(trainer)
    before = weight_fingerprint(trainer.model)
    stats = [trainer.step(fixed_samples())]  # then whole updates: the second slice's pi_old computed up front
    stats += [trainer.update(fixed_samples(), mini_batches=2) for _ in range(updates - 1)]
    start = trainer.start_statistics()
    delta = weight_delta(before, trainer.model, trainer.accelerator)  # the self-play loop's train/weight_delta_max
    state = whole(trainer.unwrapped_model.named_parameters())
    reference = whole(trainer.ref_model.named_parameters())
    shards = [(tuple(p.shape), tuple(r.shape)) for p, r in zip(local_shards(trainer.model.parameters()),
                                                                local_shards(trainer.ref_model.parameters()),
                                                                strict=True)]
    if trainer.accelerator.is_main_process:
        torch.save({"state": state, "reference": reference, "shards": shards, "stats": stats, "start": start,
                    "delta": delta, "loss": stats[0]["loss"], "processes": trainer.accelerator.num_processes,
                    "gradients_held": held, "shard_elements": sum(p.numel() for p in local_shards(
                        trainer.model.parameters())),
                    "prepared": len(trainer.accelerator._models),  # the models a checkpoint saves
                    "distributed_type": trainer.accelerator.distributed_type.name}, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1)
