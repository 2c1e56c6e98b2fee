"""The GPU code paths, checked against the CPU: a GRPO update and rollouts with a small model built from a config.

    python benchmarks/cuda_check.py --tokenizer PATH [--json FILE]

No weights are downloaded: a Llama of SmolLM2's shape family (4 layers, 256 wide, SmolLM2's vocabulary) is built
from its config with random weights, so only a tokenizer folder is needed (``--tokenizer``; SmolLM2's, as
``searchplay assets`` installs it). Each check runs the same steps on CUDA (``models.device=cuda``, bf16
autocast in the update where the GPU has it, bf16 rollouts) and on the CPU in fp32, and prints one row:

- ``trainer``: two PolicyTrainer steps on a group sharing a long prompt (the shared-prefix forward) and a
  prompt of its own: the losses agree with the CPU's within the bf16 tolerance, the weights move, nothing
  is NaN; the time per step.
- ``checkpoint``: the CUDA trainer's exported model reloads (on the CPU) to the same weights.
- ``rollouts``: greedy ``run_rollouts`` over 16 prompts (continuous batching, KV-cache reuse) on both devices;
  each row's length and the share of generated tokens that agree with the CPU's (bf16 vs fp32 greedy can part
  ways after a near tie); generated tokens/s after a warm-up call.

Exits 0 when every check holds; without CUDA it says so and exits 0. Not a test: CI has no GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

LOSS_TOLERANCE = 0.05  # relative: bf16 autocast on the GPU against fp32 on the CPU


def tiny_llama(folder: Path, tokenizer_dir: Path) -> Path:
    """A 4-layer, 256-wide Llama with the tokenizer's vocabulary, random weights (seed 0), saved with it."""
    from transformers import LlamaConfig, LlamaForCausalLM

    return random_model(folder, tokenizer_dir, LlamaConfig, LlamaForCausalLM, hidden_size=256,
                        intermediate_size=512, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                        max_position_embeddings=4096, tie_word_embeddings=True)


def random_model(folder: Path, tokenizer_dir: Path, config_class, model_class, **shape) -> Path:
    """``model_class`` of ``config_class(**shape)`` with the tokenizer's vocabulary and special tokens, random
    weights (seed 0), saved with the tokenizer."""
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = config_class(vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
                          eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **shape)
    model_class(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def params_for(device: str):
    from searchplay.config import Params

    return Params.model_validate({"models": {"device": device, "dtype": "float32"},
                                  "selfplay": {"lr": 1e-3, "warmup_steps": 0, "micro_batch_size": 2,
                                               "autocast_bf16": "auto" if device == "cuda" else False,
                                               "segmented_forward": True},
                                  "agent": {"rollout_dtype": "auto" if device == "cuda" else "model"}})


def samples():
    from searchplay.rl import TrainingSample

    long_prompt = [1, *range(3, 43)]  # shared by a group: the shared-prefix forward
    rows = [([20, 50, 51, 21, 22], [1, 0, 0, 1, 1], 1.0, long_prompt),
            ([30, 31, 52, 32], [1, 1, 0, 1], -0.5, long_prompt),
            ([33, 34], [1, 1], 0.25, long_prompt), ([35, 53, 36], [1, 0, 1], -1.0, [1, 7, 8, 9])]
    return [TrainingSample(prompt, response, mask, [adv if m else 0.0 for m in mask])
            for response, mask, adv, prompt in rows]


def trainer_steps(model_dir: Path, device: str, checkpoint: Path | None = None) -> dict:
    import torch
    from accelerate.state import AcceleratorState

    from searchplay.rl import PolicyTrainer

    AcceleratorState._reset_state(reset_partial_state=True)  # one process, two devices: a fresh accelerator each
    trainer = PolicyTrainer(str(model_dir), params_for(device))
    stats, seconds = [], []
    for _ in range(2):
        tic = time.perf_counter()
        stats.append(trainer.step(samples()))
        if device == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - tic)
    if checkpoint is not None:
        trainer.export(checkpoint)  # the HF folder a run exports at its end
    weights = {k: v.detach().float().cpu() for k, v in trainer.unwrapped_model.state_dict().items()}
    return {"stats": stats, "seconds": seconds, "device": str(next(trainer.unwrapped_model.parameters()).device),
            "weights": weights}


def check_trainer(model_dir: Path, work: Path, device: str) -> tuple[list[tuple[str, bool, str]], dict]:
    from transformers import AutoModelForCausalLM

    gpu = trainer_steps(model_dir, device, checkpoint=work / "ckpt")
    cpu = trainer_steps(model_dir, "cpu")
    rows = []
    worst = 0.0
    for g, c in zip(gpu["stats"], cpu["stats"], strict=True):
        for key in ("pg_loss", "entropy", "grad_norm", "kl"):
            worst = max(worst, abs(g[key] - c[key]) / max(abs(c[key]), 1e-6))
    finite = all(math.isfinite(s[k]) for s in gpu["stats"] for k in ("pg_loss", "entropy", "grad_norm"))
    moved = all(s["weights_changed"] == 1.0 for s in gpu["stats"])
    rows.append(("trainer", gpu["device"].startswith(device) and finite and moved and worst <= LOSS_TOLERANCE,
                 f"on {gpu['device']}: pg_loss {gpu['stats'][0]['pg_loss']:.4f} / {gpu['stats'][1]['pg_loss']:.4f} "
                 f"(CPU fp32 {cpu['stats'][0]['pg_loss']:.4f} / {cpu['stats'][1]['pg_loss']:.4f}), grad norm "
                 f"{gpu['stats'][0]['grad_norm']:.4f} (CPU {cpu['stats'][0]['grad_norm']:.4f}), largest relative gap "
                 f"of loss, entropy, grad norm and KL {worst:.3%}; weights moved; "
                 f"{gpu['seconds'][1] * 1000:.0f} ms/step (CPU {cpu['seconds'][1] * 1000:.0f} ms)"))
    reloaded = AutoModelForCausalLM.from_pretrained(work / "ckpt").state_dict()
    same = all(reloaded[k].float().equal(v) for k, v in gpu["weights"].items() if k in reloaded)
    rows.append(("checkpoint", same, f"{len(reloaded)} tensors reloaded on the CPU, "
                 f"{'all equal' if same else 'NOT equal'} to the CUDA trainer's"))
    return rows, {"gpu": gpu["stats"], "cpu": cpu["stats"]}


def rollouts(model_dir: Path, device: str) -> tuple[list[list[int]], float]:
    import torch

    from searchplay.agent.rollout import RolloutConfig, run_rollouts
    from searchplay.llm.tokenizer import encode_prompt
    from searchplay.llm.transformers_backend import TransformersBackend
    from searchplay.retrieval.types import Document

    class OneDocument:
        def search(self, queries, top_k=3):
            return [[Document("0", "Paris", "Paris is the capital of France.")] for _ in queries]

    backend = TransformersBackend(str(model_dir), device=device, rollout_dtype="auto" if device == "cuda" else None)
    prompts = [encode_prompt(backend.tokenizer, [{"role": "user", "content": f"Question {i}: where is {city}?"}])
               for i, city in enumerate(["Paris", "Rome", "Oslo", "Lima"] * 4)]
    config = RolloutConfig(max_turns=2, max_turn_tokens=48, temperature=0.0, seed=0)
    run_rollouts(backend, OneDocument(), prompts, "solver", config)  # warm-up: CUDA context, kernels of each shape
    tic = time.perf_counter()
    done = run_rollouts(backend, OneDocument(), prompts, "solver", config)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - tic
    return [t.response_ids for t in done], sum(t.generated_token_count for t in done) / seconds


def check_rollouts(model_dir: Path, device: str) -> tuple[str, bool, str]:
    gpu, gpu_rate = rollouts(model_dir, device)
    cpu, cpu_rate = rollouts(model_dir, "cpu")
    lengths = all(len(g) > 0 for g in gpu) and len(gpu) == len(cpu)
    agree = sum(a == b for g, c in zip(gpu, cpu, strict=True) for a, b in zip(g, c, strict=False))
    total = sum(max(len(g), len(c)) for g, c in zip(gpu, cpu, strict=True))
    return ("rollouts", lengths, f"{len(gpu)} greedy rollouts, {agree}/{total} response tokens as on the CPU "
            f"(bf16 against fp32); {gpu_rate:.0f} generated tokens/s (CPU {cpu_rate:.0f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", type=Path, required=True, help="a tokenizer folder (SmolLM2's)")
    parser.add_argument("--json", type=Path, help="also write the rows and the raw step statistics here")
    parser.add_argument("--profile", action="store_true", help="also print where the CUDA rollouts spend their time "
                        "(cProfile, the 25 largest by own time)")
    parser.add_argument("--device", default="cuda", help="cpu: run the script against itself on the CPU (a dry run "
                        "of the script, where there is no GPU)")
    args = parser.parse_args()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: nothing to check here (run this on a GPU machine)")
        return 0
    if args.device == "cuda":
        print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, bf16 {torch.cuda.is_bf16_supported()}",
              flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_dir = tiny_llama(work / "model", args.tokenizer)
        rows, raw = check_trainer(model_dir, work, args.device)
        rows.append(check_rollouts(model_dir, args.device))
    print("| check | held | observed |\n|---|---|---|")
    for name, held, observed in rows:
        print(f"| {name} | {'yes' if held else '**no**'} | {observed} |")
    if args.profile:
        import cProfile
        import pstats

        with tempfile.TemporaryDirectory() as tmp:
            model_dir = tiny_llama(Path(tmp) / "model", args.tokenizer)
            profiler = cProfile.Profile()
            profiler.runcall(rollouts, model_dir, args.device)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "raw": raw}, indent=1, default=str))
    return 0 if all(held for _, held, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
