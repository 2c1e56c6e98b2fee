"""Shared prompt prefixes (``searchplay.prefix_kv``): one self-play iteration's rollouts and update with them
and without them, same process, same prompts.

Real prompts: the KG Proposer prompt of the first self-play seeds (``data/kg/subgraphs.jsonl``) and the Solver
prompt of three questions, each asked ``group_size`` times as in self-play. Rollouts are greedy (the two runs
sample the same tokens) against the built index; the update trains on rollout-shaped samples of those prompts
(model turns around two ``<information>`` blocks of corpus text), two optimizer steps per setting so the second
one runs the reference forward. Prints seconds and prefilled tokens per setting and the ratios.

    .venv/bin/python benchmarks/shared_prefix.py --model checkpoints/warmstart/model
"""

from __future__ import annotations

import argparse
import random
import time

from searchplay.process import apply_offline_defaults, keep_freed_memory

QUESTIONS = ["Who founded the city of Rome?", "Which river flows through Vienna?", "Who discovered penicillin?"]


def _rollouts(params, model: str, share: bool, proposer_prompts, solver_prompts) -> tuple[float, int]:
    from searchplay.agent.rollout import RolloutConfig, run_rollouts
    from searchplay.llm.transformers_backend import TransformersBackend
    from searchplay.retrieval import load_search_tool

    backend = TransformersBackend(model, rollout_dtype=params.agent.rollout_dtype, share_prefixes=share)
    tool = load_search_tool(params)
    config = RolloutConfig.from_params(params, temperature=0.0)
    started = time.perf_counter()
    run_rollouts(backend, tool, proposer_prompts, "proposer", config)
    run_rollouts(backend, tool, solver_prompts, "solver", config)
    return time.perf_counter() - started, backend.prefilled_tokens


def _samples(proposer_prompts, solver_prompts, corpus: list[int], rng: random.Random):
    from searchplay.rl import TrainingSample

    def response() -> tuple[list[int], list[int]]:
        ids, mask = [], []
        for model_tokens, info_tokens in ((40, 400), (40, 400), (30, 0)):
            ids += rng.choices(corpus, k=model_tokens) + rng.choices(corpus, k=info_tokens)
            mask += [1] * model_tokens + [0] * info_tokens
        return ids, mask

    samples = []
    for prompt in [*proposer_prompts, *solver_prompts]:
        ids, mask = response()
        samples.append(TrainingSample(list(prompt), ids, mask, [rng.uniform(-1, 1) if m else 0.0 for m in mask]))
    return samples


def _update(params, model: str, share: bool, samples) -> float:
    import searchplay.rl.forward as forward_module
    from searchplay.rl import PolicyTrainer

    original = forward_module.shared_prefixes
    if not share:
        forward_module.shared_prefixes = lambda prompts, limits: []
    try:
        trainer = PolicyTrainer(model, params)
        started = time.perf_counter()
        for _ in range(2):  # the second step runs the reference forward (the first reuses the policy's values)
            trainer.update(samples, params.selfplay.solver_mini_batches)
        return time.perf_counter() - started
    finally:
        forward_module.shared_prefixes = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="checkpoints/warmstart/model")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--seeds", type=int, default=6, help="Proposer prompts (KG seeds)")
    args = parser.parse_args()
    apply_offline_defaults()
    keep_freed_memory()  # as every searchplay command runs
    from searchplay.agent.prompts import solver_messages
    from searchplay.agent.proposer_prompts import kg_proposer_messages
    from searchplay.llm.tokenizer import encode_prompt, load_tokenizer
    from searchplay.recipes import load_params
    from searchplay.selfplay.seeds import load_kg_seeds

    params = load_params(args.params)
    tokenizer = load_tokenizer(args.model)
    seeds = load_kg_seeds(params.kg.out_dir, "selfplay")[:args.seeds]
    proposer_prompts = [encode_prompt(tokenizer, kg_proposer_messages(seed.record)) for seed in seeds]
    solver_prompts = [encode_prompt(tokenizer, solver_messages(q)) for q in QUESTIONS
                      for _ in range(params.selfplay.group_size)]
    print(f"{len(proposer_prompts)} Proposer prompts ({sum(map(len, proposer_prompts))} tokens), "
          f"{len(solver_prompts)} Solver prompts ({sum(map(len, solver_prompts))} tokens)")
    figures = {}
    for share in (False, True):
        seconds, prefilled = _rollouts(params, args.model, share, proposer_prompts, solver_prompts)
        figures[share] = {"rollouts_s": seconds, "prefilled": prefilled}
        print(f"rollouts, shared prefixes {'on ' if share else 'off'}: {seconds:6.1f} s, {prefilled} tokens prefilled")
    corpus = tokenizer.encode(" ".join(["the river flows through the city founded in the year"] * 200))
    samples = _samples(proposer_prompts, solver_prompts, corpus, random.Random(0))
    for share in (False, True):
        figures[share]["update_s"] = _update(params, args.model, share, samples)
        print(f"update (2 steps, {len(samples)} samples), shared prefixes {'on ' if share else 'off'}: "
              f"{figures[share]['update_s']:6.1f} s")
    off, on = figures[False], figures[True]
    print(f"rollouts {off['rollouts_s'] / on['rollouts_s']:.2f}x faster ({off['prefilled'] / on['prefilled']:.2f}x "
          f"fewer prefilled tokens); update {off['update_s'] / on['update_s']:.2f}x faster")


if __name__ == "__main__":
    main()
