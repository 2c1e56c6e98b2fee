"""One PolicyTrainer step on fixed samples, run as one process or under `accelerate launch` with two CPU
processes (gloo); the main process saves the updated weights. Used by test_trainer_distributed.py.

    python two_process_step.py MODEL_DIR OUT.pt
    accelerate launch --cpu --num_processes 2 two_process_step.py MODEL_DIR OUT.pt
"""

from __future__ import annotations

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


def main(model_dir: str, out: str) -> None:
    import torch

    from searchplay.config import load_params
    from searchplay.rl import PolicyTrainer

    torch.manual_seed(0)
    params = load_params("/nonexistent/params.yaml", {
        "models.device": "cpu", "models.dtype": "float32", "selfplay.lr": 1e-2, "selfplay.warmup_steps": 0,
        "selfplay.micro_batch_size": 1, "selfplay.segmented_forward": False, "selfplay.autocast_bf16": False,
        "selfplay.kl_beta": 0.01})
    trainer = PolicyTrainer(model_dir, params)
    stats = trainer.step(fixed_samples())
    if trainer.accelerator.is_main_process:
        state = {k: v.detach().cpu().clone() for k, v in trainer.unwrapped_model.state_dict().items()}
        torch.save({"state": state, "loss": stats["loss"], "processes": trainer.accelerator.num_processes}, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
