"""Figures for one PolicyTrainer step on the policy model: seconds, tokens/s, peak RSS.

    .venv/bin/python benchmarks/rl_trainer.py --samples 8 --response-tokens 256
    .venv/bin/python benchmarks/rl_trainer.py --compare-autocast   # fp32 vs bf16 autocast, same samples
    .venv/bin/python benchmarks/rl_trainer.py --compare-segmented --layout solver --model checkpoints/warmstart/model
        # exact vs segmented forward (selfplay.segmented_forward): seconds and the cosine of the two gradients,
        # on rollout-shaped samples of real corpus text (data/corpus/passages.jsonl) when it exists
    .venv/bin/python benchmarks/rl_trainer.py --compare-malloc --model checkpoints/warmstart/model --steps 3
        # the same steps in two child processes: glibc's malloc as it is, then searchplay.process.keep_freed_memory
    .venv/bin/python benchmarks/rl_trainer.py --memory --layout proposer --samples 10 --steps 3 \
        --model checkpoints/warmstart/model
        # resident memory per step (start, sampled peak, end), then live tensors against what the allocator holds;
        # --in-memory keeps AdamW's moments and the reference resident (the code before they went to disk);
        # --keep-activations keeps every layer's activations for the backward (selfplay.recompute_layers false)
    accelerate launch --config_file accelerate_configs/cpu.yaml benchmarks/rl_trainer.py   # same, via accelerate
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from searchplay.process import MALLOC_TUNING_ENV, keep_freed_memory
from searchplay.recipes import load_params
from searchplay.rl import PolicyTrainer, TrainingSample


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=300)
    parser.add_argument("--response-tokens", type=int, default=256)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--compare-autocast", action="store_true",
                        help="time the same steps with selfplay.autocast_bf16 off, then on; print the ratio")
    parser.add_argument("--compare-segmented", action="store_true",
                        help="time the same steps with selfplay.segmented_forward off, then on; print the ratio "
                        "and the cosine similarity of the first step's gradients")
    parser.add_argument("--layout", choices=["block", "solver", "proposer"], default="block",
                        help="block: one <information> block in the response; solver / proposer: a rollout's shape "
                        "(3 model turns around 2 searches of 3 passages; proposer prompts are 1,200 tokens)")
    parser.add_argument("--compare-malloc", action="store_true",
                        help="the same steps in two child processes, glibc's malloc as it is and then kept from "
                        "unmapping freed blocks (searchplay.process.keep_freed_memory, as every searchplay "
                        "command runs); print the ratio and whether every loss agrees")
    parser.add_argument("--model", default=None, help="policy folder (default: models.policy)")
    parser.add_argument("--micro-batch-size", type=int, default=None,
                        help="sequences per gradient-accumulation micro step (default: selfplay.micro_batch_size)")
    parser.add_argument("--memory", action="store_true",
                        help="sample resident memory during each step (start, peak, end); at the end, the bytes of "
                        "live tensors and the resident memory after glibc's malloc_trim(0), i.e. what the allocator "
                        "kept of memory already freed")
    parser.add_argument("--in-memory", action="store_true",
                        help="keep AdamW's moments and the frozen reference in memory throughout "
                        "(selfplay.moments_on_disk / reference_on_disk false; 'auto' puts them on disk on a CPU)")
    parser.add_argument("--keep-activations", action="store_true",
                        help="keep each layer's activations and cache copies for the backward instead of recomputing "
                        "the scored runs' layers (selfplay.recompute_layers false; 'auto' recomputes on a CPU)")
    args = parser.parse_args()
    if args.compare_malloc:
        _compare_malloc([arg for arg in sys.argv[1:] if arg != "--compare-malloc"])
        return
    print(f"malloc tuning ({MALLOC_TUNING_ENV}): {'on' if keep_freed_memory() else 'off'}")
    overrides = {"selfplay.micro_batch_size": args.micro_batch_size}
    if args.in_memory:
        overrides.update({"selfplay.moments_on_disk": False, "selfplay.reference_on_disk": False})
    if args.keep_activations:
        overrides["selfplay.recompute_layers"] = False
    params = load_params(overrides=overrides)
    if args.model:
        params = params.model_copy(update={"models": params.models.model_copy(update={"policy": args.model})})
    if args.compare_segmented:
        _compare_segmented(params, args)
        return
    settings = [False, True] if args.compare_autocast else [params.selfplay.autocast_bf16]
    seconds = {}
    for autocast in settings:
        run = params.model_copy(update={"selfplay": params.selfplay.model_copy(update={"autocast_bf16": autocast})})
        seconds[autocast] = _run(run, args)
    if args.compare_autocast:
        print(f"bf16 autocast speed-up over fp32: {seconds[False] / seconds[True]:.2f}x")


def _compare_malloc(argv: list[str]) -> None:
    """This script with ``argv`` twice, in child processes (mallopt settings last for the process): tuning off, on."""
    results = {}
    for setting in ("0", "1"):
        output = subprocess.run([sys.executable, __file__, *argv], env={**os.environ, MALLOC_TUNING_ENV: setting},
                                capture_output=True, text=True, check=True).stdout
        print(output, end="")
        results[setting] = json.loads(next(line for line in output.splitlines() if line.startswith("RESULT "))[7:])
    off, on = results["0"], results["1"]
    print(f"malloc tuning speed-up: {off['seconds'] / on['seconds']:.2f}x ({off['seconds']:.1f} s against "
          f"{on['seconds']:.1f} s); every loss the same: {off['losses'] == on['losses']}")


def _compare_segmented(params, args) -> None:
    seconds, grads = {}, {}
    for segmented in (False, True):
        cfg = params.selfplay.model_copy(update={"segmented_forward": segmented})
        trainer = PolicyTrainer(params.models.policy, params.model_copy(update={"selfplay": cfg}))
        samples = _samples(trainer, args)
        captured = []
        step = trainer.optimizer.step
        trainer.optimizer.step = lambda: captured.append(_flat_grad(trainer))  # noqa: B023 (used at once)
        stats = trainer.step(samples)
        trainer.optimizer.step = step
        grads[segmented] = captured[0]
        seconds[segmented] = stats["seconds"]
        for _ in range(args.steps - 1):
            seconds[segmented] += trainer.step(samples)["seconds"]
        print(f"segmented_forward={segmented}: {seconds[segmented]:.1f} s for {args.steps} steps "
              f"(first: loss {stats['loss']:.5f}, grad_norm {stats['grad_norm']:.4f})")
    import torch

    cosine = float(torch.nn.functional.cosine_similarity(grads[False], grads[True], dim=0))
    ratio = float(grads[True].norm() / grads[False].norm())
    print(f"segmented speed-up: {seconds[False] / seconds[True]:.2f}x; gradient cosine {cosine:.4f}, "
          f"norm ratio {ratio:.3f} ({args.samples} x {args.layout} samples, autocast_bf16="
          f"{params.selfplay.autocast_bf16})")


def _flat_grad(trainer):
    import torch

    return torch.cat([p.grad.flatten().double() for p in trainer.model.parameters() if p.grad is not None]).clone()


CORPUS = Path("data/corpus/passages.jsonl")


@functools.cache
def _corpus_ids(model_path: str) -> list[int]:
    """The first 400 corpus passages, tokenized once per model."""
    from transformers import AutoTokenizer

    lines = CORPUS.read_text(encoding="utf-8").splitlines()[:400]
    return AutoTokenizer.from_pretrained(model_path)(" ".join(json.loads(line)["text"] for line in lines))["input_ids"]


def _text_tokens(trainer, rng: random.Random, n: int, vocab: int) -> list[int]:
    """n tokens of real corpus text where the corpus is built, else random ids."""
    if not CORPUS.is_file():
        return [rng.randrange(vocab) for _ in range(n)]
    ids = _corpus_ids(trainer.model_path)
    start = rng.randrange(len(ids) - n)
    return ids[start:start + n]


def _samples(trainer, args) -> list[TrainingSample]:
    rng = random.Random(0)
    vocab = trainer.unwrapped_model.config.vocab_size
    samples = []
    for i in range(args.samples):
        if args.layout == "block":
            n = args.response_tokens
            mask = [0 if n // 3 <= t < n // 2 else 1 for t in range(n)]  # a third-to-half block of <information>
            prompt = args.prompt_tokens
        else:  # model turn, 3 passages, model turn, 3 passages, final model turn (the embedded default's shape)
            mask = [1] * 40 + [0] * 450 + [1] * 40 + [0] * 450 + [1] * 30
            prompt = 1200 if args.layout == "proposer" else 300
        ids = _text_tokens(trainer, rng, prompt + len(mask), vocab)
        samples.append(TrainingSample(ids[:prompt], ids[prompt:], mask, [(1.0 if i % 2 else -1.0) * m for m in mask]))
    return samples


def _run(params, args) -> float:
    t0 = time.perf_counter()
    trainer = PolicyTrainer(params.models.policy, params)
    print(f"autocast_bf16={params.selfplay.autocast_bf16}: load policy + reference: {time.perf_counter() - t0:.1f} s")
    samples = _samples(trainer, args)
    total, losses = 0.0, []
    sampler = _PeakSampler() if args.memory else None
    for _ in range(args.steps):
        start = sampler.reset() if sampler else 0.0
        stats = trainer.step(samples)
        if sampler:
            print(f"resident memory: {start:.2f} GiB at the step's start, {sampler.peak:.2f} peak, "
                  f"{_resident_gib():.2f} at its end")
        total += stats["seconds"]
        losses.append(stats["loss"])
        print(f"step {int(stats['step'])}: {stats['seconds']:.1f} s, {stats['tokens_per_s']:.0f} model tokens/s, "
              f"loss {stats['loss']:.4f}, kl {stats['kl']:.2e}, grad_norm {stats['grad_norm']:.3f}, "
              f"weights_changed {bool(stats['weights_changed'])}")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB "
          f"({args.samples} x ({args.prompt_tokens}+{args.response_tokens}) tokens, "
          f"micro-batch {params.selfplay.micro_batch_size})")
    if sampler:
        print(f"live tensors {_live_tensor_gib():.2f} GiB; resident {_resident_gib():.2f} GiB, after malloc_trim(0) "
              f"{_trimmed_resident_gib():.2f} GiB")
    print("RESULT " + json.dumps({"seconds": total, "losses": losses}))
    return total


def _resident_gib() -> float:
    return psutil.Process().memory_info().rss / 2**30


class _PeakSampler:
    """Resident memory sampled every 20 ms on a daemon thread; ``reset`` starts a new peak and returns the current."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a sample taken before a reset must not raise the new peak
        self.peak = _resident_gib()
        threading.Thread(target=self._run, daemon=True).start()

    def reset(self) -> float:
        with self._lock:
            self.peak = _resident_gib()
            return self.peak

    def _run(self) -> None:
        while True:
            with self._lock:
                self.peak = max(self.peak, _resident_gib())
            time.sleep(0.02)


def _live_tensor_gib() -> float:
    """Bytes of every distinct tensor storage the garbage collector can reach."""
    import gc
    import warnings

    import torch

    storages = {}
    with warnings.catch_warnings():  # isinstance on some deprecated torch module attributes warns
        warnings.simplefilter("ignore", FutureWarning)
        tensors = [obj for obj in gc.get_objects() if isinstance(obj, torch.Tensor) and obj.device.type == "cpu"]
    for tensor in tensors:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values()) / 2**30


def _trimmed_resident_gib() -> float:
    """Resident memory after glibc hands its free pages back (Linux/glibc only; else the resident memory)."""
    import contextlib
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return _resident_gib()


if __name__ == "__main__":
    main()
