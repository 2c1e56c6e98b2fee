"""The GPU training path in one short run: FSDP with fp32 master weights and bf16 compute, a KL term, a
checkpoint round trip, and the rollout backend's weights after the sync.

    python benchmarks/gpu_check.py --tokenizer PATH [--json FILE]      # on one GPU, a few minutes
    python benchmarks/gpu_check.py --tokenizer PATH --device cpu       # a dry run of the script, no FSDP

A Qwen2 model (4 layers, 512 wide, the tokenizer's vocabulary) is built from its config with random weights,
so only a tokenizer folder travels (``--tokenizer``; SmolLM2's, as ``searchplay assets`` installs it). On CUDA
the trainer runs under accelerate's FSDP2 with one process (``MixedPrecisionPolicy``: bf16 parameters in the
forward, fp32 reductions, fp32 masters). Rows:

- ``masters``: the optimizer's parameters are float32 under bf16 compute;
- ``updates``: two PolicyTrainer steps with ``kl_beta`` 0.01 at lr 1e-6 are finite and change the masters;
- ``reference``: the frozen reference sits on the policy's device, sharded like it, and the distance from the
  start weights is finite and positive;
- ``checkpoint``: after a third step, loading the saved checkpoint (DCP, a shard per process) restores its weights;
- ``sync``: after ``update_weights`` the transformers backend's greedy tokens equal those of a backend built
  fresh from the trainer's export (``PolicyTrainer.export``: the shards gathered into an HF folder), in bf16 on
  CUDA as the FSDP policy computes (in fp32 the greedy tokens part after a few on random weights).

vLLM cannot travel to a lent machine, so the backend here is the transformers one; CI runs the vLLM path on
its CPU build (tests/llm/test_vllm_backend.py). Exits 0 when every row holds; without CUDA, says so.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def tiny_qwen2(folder: Path, tokenizer_dir: Path) -> Path:
    from cuda_check import random_model  # this folder's GPU check of the single-device paths
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return random_model(folder, tokenizer_dir, Qwen2Config, Qwen2ForCausalLM, hidden_size=512,
                        intermediate_size=1024, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                        max_position_embeddings=2048, tie_word_embeddings=False)


def accelerator_for(device: str):
    """On CUDA: accelerate's FSDP2 on one process, bf16 compute over fp32 masters; on the CPU: plain."""
    import torch
    from accelerate import Accelerator, FullyShardedDataParallelPlugin
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if device == "cpu":
        return Accelerator(cpu=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "LOCAL_RANK": "0",
                       "WORLD_SIZE": "1"})
    plugin = FullyShardedDataParallelPlugin(
        fsdp_version=2, auto_wrap_policy="transformer_based_wrap", transformer_cls_names_to_wrap=["Qwen2DecoderLayer"],
        mixed_precision_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),
        state_dict_type="SHARDED_STATE_DICT")
    return Accelerator(fsdp_plugin=plugin)


def reference_row(trainer) -> tuple[bool, str]:
    """The reference beside the policy: the same devices and the same local shard of every parameter."""
    from searchplay.rl.drift import local_shards

    distance = trainer.start_distance()  # with the reference on disk (a CPU's default), reads and keeps it
    policy, reference = local_shards(trainer.model.parameters()), local_shards(trainer.ref_model.parameters())
    devices = ({p.device.type for p in policy}, {r.device.type for r in reference})
    same = all(p.shape == r.shape for p, r in zip(policy, reference, strict=True))
    held = devices[0] == devices[1] and same and math.isfinite(distance) and distance > 0
    return held, (f"policy on {sorted(devices[0])}, reference on {sorted(devices[1])}, "
                  f"{'the same' if same else 'NOT the same'} local shards, distance from the start {distance:.3g}")


def samples():
    from searchplay.rl import TrainingSample

    prompt = [1, *range(3, 60)]
    rows = [([20, 50, 51, 21, 22], 1.0), ([30, 31, 52, 32], -0.5), ([33, 34], 0.25), ([35, 53, 36], -1.0)]
    return [TrainingSample(prompt, response, [1] * len(response), [adv] * len(response)) for response, adv in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", type=Path, required=True, help="a tokenizer folder (SmolLM2's)")
    parser.add_argument("--device", default="cuda", help="cpu: a dry run of the script (no FSDP)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: nothing to check here (run this on a GPU machine)")
        return 0
    from searchplay.config import Params
    from searchplay.llm.backend import SamplingParams
    from searchplay.llm.transformers_backend import TransformersBackend
    from searchplay.rl import PolicyTrainer

    params = Params.model_validate({"models": {"device": args.device, "dtype": "float32"},
                                    "selfplay": {"lr": 1e-6, "warmup_steps": 0, "kl_beta": 0.01,
                                                 "micro_batch_size": 2, "autocast_bf16": False}})
    rows: list[tuple[str, bool, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_dir = tiny_qwen2(work / "model", args.tokenizer)
        trainer = PolicyTrainer(str(model_dir), params, accelerator=accelerator_for(args.device))
        dtypes = {p.dtype for group in trainer.optimizer.param_groups for p in group["params"]}
        rows.append(("masters", dtypes == {torch.float32}, f"optimizer parameters {sorted(map(str, dtypes))}, "
                     f"model {type(trainer.model).__name__}"))
        before = [p.detach().float().clone() for p in trainer.model.parameters()]
        stats = [trainer.step(samples()) for _ in range(2)]
        moved = sum(int(not torch.equal(b, p.detach().float())) for b, p in zip(before, trainer.model.parameters(),
                                                                                strict=True))
        finite = all(math.isfinite(s[k]) for s in stats for k in ("loss", "kl", "grad_norm"))
        rows.append(("updates", finite and moved > 0, f"losses {[round(s['loss'], 5) for s in stats]}, KL "
                     f"{[round(s['kl'], 8) for s in stats]}, {moved}/{len(before)} parameter tensors changed"))
        rows.append(("reference", *reference_row(trainer)))
        trainer.save(work / "ckpt")
        state = {k: v.detach().float().cpu() for k, v in trainer.accelerator.get_state_dict(trainer.model).items()}
        trainer.step(samples())  # moves the weights away from the checkpoint
        trainer.load(work / "ckpt")
        reloaded = {k: v.detach().float().cpu() for k, v in trainer.accelerator.get_state_dict(trainer.model).items()}
        same = state.keys() == reloaded.keys() and all(torch.equal(state[k], reloaded[k]) for k in state)
        rows.append(("checkpoint", same, f"{len(reloaded)} tensors {'equal' if same else 'NOT equal'} to the saved "
                     f"ones after a third step and load"))
        backend = TransformersBackend(str(model_dir), device=args.device, reuse_cache=False)
        backend.update_weights(trainer.model)
        fresh_dir = work / "fresh"
        trainer.export(fresh_dir)  # collective: the loaded checkpoint's weights, gathered, as an HF folder
        fresh = TransformersBackend(str(fresh_dir), tokenizer=backend.tokenizer, device=args.device,
                                    reuse_cache=False,  # on CUDA the synced FSDP module computes in bf16
                                    rollout_dtype=None if args.device == "cpu" else "bfloat16")
        prompts = [list(range(3, 40)), [1, 9, 8, 7, 6, 5]]
        greedy = SamplingParams(max_new_tokens=16, temperature=0.0)
        synced = [c.token_ids for c in backend.generate(prompts, greedy)]
        expected = [c.token_ids for c in fresh.generate(prompts, greedy)]
        rows.append(("sync", synced == expected, f"greedy tokens after update_weights {synced[0][:6]}..., from the "
                     f"gathered weights {expected[0][:6]}..."))
    print("| check | held | observed |\n|---|---|---|")
    for name, held, observed in rows:
        print(f"| {name} | {'yes' if held else '**no**'} | {observed} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(held for _, held, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
