"""Two ranks under torchrun (gloo, CPU): each builds its own vLLM engine (external launcher), takes an optimizer
step and streams the weights into its engine; rank 0 saves what every rank saw. Used by test_vllm_backend.py.

    torchrun --nproc_per_node 2 vllm_two_ranks.py ddp|fsdp2 MODEL_DIR OUT.pt

``ddp``: a PolicyTrainer step (accelerate wraps the model in DDP, whose names start with ``module.``).
``fsdp2``: the model sharded with torch's ``fully_shard`` (fp32 parameters, bf16-free), one AdamW step.
"""

from __future__ import annotations

import os
import sys

PROMPT = [1 + (5 * j) % 97 for j in range(40)]


def ddp_step(model_dir: str):
    from searchplay.config import load_params
    from searchplay.rl import PolicyTrainer, TrainingSample

    params = load_params("/nonexistent/params.yaml", {
        "models.device": "cpu", "models.dtype": "float32", "selfplay.lr": 1e-2, "selfplay.warmup_steps": 0,
        "selfplay.micro_batch_size": 1, "selfplay.segmented_forward": False, "selfplay.autocast_bf16": False})
    trainer = PolicyTrainer(model_dir, params)
    response = list(range(200, 212))
    trainer.step([TrainingSample(PROMPT, response, [1] * len(response), [1.0] * len(response))])
    return trainer.model, trainer.unwrapped_model


def fsdp2_step(model_dir: str):
    import torch
    from torch.distributed.fsdp import fully_shard

    from searchplay.llm.weights import load_causal_lm

    model = load_causal_lm(model_dir, dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.tensor([PROMPT])
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    return model, model


def main(mode: str, model_dir: str, out: str) -> None:
    import torch
    import torch.distributed as dist

    import searchplay.llm.vllm_backend as vllm_backend
    from searchplay.llm.backend import SamplingParams

    if not dist.is_initialized():
        dist.init_process_group("gloo")
    model, unwrapped = (ddp_step if mode == "ddp" else fsdp2_step)(model_dir)
    backend = vllm_backend.VllmBackend(model_dir, dtype="float32", max_model_len=256)
    recorded: list[tuple[str, tuple[int, ...], torch.Tensor]] = []
    original = vllm_backend.trainer_weights

    def recording(model, dtype=None):
        for name, tensor in original(model, dtype):
            recorded.append((name, tuple(tensor.shape), tensor.clone()))
            yield name, tensor

    vllm_backend.trainer_weights = recording
    greedy = SamplingParams(max_new_tokens=8, temperature=0.0)
    before = backend.generate([PROMPT], greedy)[0].token_ids
    backend.update_weights(model)
    after = backend.generate([PROMPT], greedy)[0].token_ids
    if dist.get_rank() == 0:  # one rank generates alone, as a rank with no prompts left in a turn skips: engines
        backend.generate([PROMPT[:20]], greedy)  # in one data-parallel group would wait for each other here
    dist.barrier()
    full = {name: tensor for name, _, tensor in recorded}  # the gathered weights (== the parameters under DDP)
    local = {vllm_backend.unwrapped_name(n): p.detach() for n, p in model.named_parameters()}
    live = {n: p.full_tensor() if hasattr(p, "full_tensor") else p for n, p in local.items()}  # every rank, in order
    report = {"rank": int(os.environ["RANK"]), "wrapped": type(model).__name__,
              "engine_rank": backend.engine.collective_rpc(lambda worker: worker.rank)[0],
              "names": [name for name, _, _ in recorded], "shapes": {n: s for n, s, _ in recorded},
              "local_shapes": {n: tuple(getattr(p, "_local_tensor", p).shape) for n, p in local.items()},
              "expected_names": [n for n, _ in unwrapped.named_parameters()],
              "sent_unequal_to_live": [n for n in live if n not in full or not torch.equal(full[n], live[n])],
              "engine_logprobs": prompt_logprobs(backend.engine),
              "trainer_logprobs": trainer_logprobs(model),
              "before": before, "after": after}
    reports = [None] * dist.get_world_size()
    dist.all_gather_object(reports, report)
    if report["rank"] == 0:
        torch.save(reports, out)
    dist.barrier()


def prompt_logprobs(engine) -> list[float]:
    """The engine's log-probability of each prompt token after the first."""
    from vllm import SamplingParams

    output = engine.generate([{"prompt_token_ids": PROMPT}], SamplingParams(max_tokens=1, prompt_logprobs=0),
                             use_tqdm=False)[0]
    return [next(v.logprob for k, v in entry.items() if k == token)
            for token, entry in zip(PROMPT[1:], output.prompt_logprobs[1:], strict=True)]


def trainer_logprobs(model) -> list[float]:
    """The same log-probabilities from the trained model itself (under FSDP2 a collective: every rank calls it)."""
    import torch

    with torch.no_grad():
        logits = model(input_ids=torch.tensor([PROMPT])).logits[0, :-1].float().log_softmax(-1)
    return logits.gather(1, torch.tensor(PROMPT[1:])[:, None])[:, 0].tolist()


if __name__ == "__main__":
    main(*sys.argv[1:4])
