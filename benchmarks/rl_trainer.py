"""Figures for one PolicyTrainer step on the policy model: seconds, tokens/s, peak RSS.

    .venv/bin/python benchmarks/rl_trainer.py --samples 8 --response-tokens 256
    .venv/bin/python benchmarks/rl_trainer.py --compare-autocast   # fp32 vs bf16 autocast, same samples
    accelerate launch --config_file accelerate_configs/cpu.yaml benchmarks/rl_trainer.py   # same, via accelerate
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import resource
import time

from searchplay.config import load_params
from searchplay.rl import PolicyTrainer, TrainingSample


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=300)
    parser.add_argument("--response-tokens", type=int, default=256)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--compare-autocast", action="store_true",
                        help="time the same steps with selfplay.autocast_bf16 off, then on; print the ratio")
    args = parser.parse_args()
    params = load_params()
    settings = [False, True] if args.compare_autocast else [params.selfplay.autocast_bf16]
    seconds = {}
    for autocast in settings:
        run = params.model_copy(update={"selfplay": params.selfplay.model_copy(update={"autocast_bf16": autocast})})
        seconds[autocast] = _run(run, args)
    if args.compare_autocast:
        print(f"bf16 autocast speed-up over fp32: {seconds[False] / seconds[True]:.2f}x")


def _run(params, args) -> float:
    t0 = time.perf_counter()
    trainer = PolicyTrainer(params.models.policy, params)
    print(f"autocast_bf16={params.selfplay.autocast_bf16}: load policy + reference: {time.perf_counter() - t0:.1f} s")
    rng = random.Random(0)
    vocab = trainer.unwrapped_model.config.vocab_size
    samples = []
    for i in range(args.samples):
        n = args.response_tokens
        mask = [0 if n // 3 <= t < n // 2 else 1 for t in range(n)]  # a third-to-half block of <information>
        samples.append(TrainingSample([rng.randrange(vocab) for _ in range(args.prompt_tokens)],
                                      [rng.randrange(vocab) for _ in range(n)], mask,
                                      [(1.0 if i % 2 else -1.0) * m for m in mask]))
    total = 0.0
    for _ in range(args.steps):
        stats = trainer.step(samples)
        total += stats["seconds"]
        print(f"step {int(stats['step'])}: {stats['seconds']:.1f} s, {stats['tokens_per_s']:.0f} model tokens/s, "
              f"loss {stats['loss']:.4f}, kl {stats['kl']:.2e}, grad_norm {stats['grad_norm']:.3f}, "
              f"weights_changed {bool(stats['weights_changed'])}")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB "
          f"({args.samples} x ({args.prompt_tokens}+{args.response_tokens}) tokens, "
          f"micro-batch {params.selfplay.micro_batch_size})")
    return total


if __name__ == "__main__":
    main()
