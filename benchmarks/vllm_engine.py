"""Which engine generates faster on the embedded default: vLLM's CPU build against the transformers backend.

Each engine runs in a process of its own (vLLM rebinds the process's threads), twice, alternating
(transformers, vLLM, transformers, vLLM), on the embedded default's shapes and settings from params.yaml
(SmolLM2-135M, ``models.dtype``, the Solver prompt, ``agent.max_turns`` and ``agent.max_turn_tokens``):

- **group**: a Solver group, 4 questions x G=5 identical prompts, at the rollout temperature with a seed,
  through the real rollout loop and search tool;
- **evaluation**: 16 distinct questions, greedy, as the evaluation stage asks them;
- **start-up**: building the backend (for vLLM: the engine, its KV cache and warm-up).

Prints each run's generated tokens/s, wall time and start-up, and each workload's median ratio vLLM /
transformers. ``--beside-busy`` runs a busy neighbour (one process of float32 matrix products, one thread)
for the whole measurement, as a CI machine often has.

    .venv/bin/python benchmarks/vllm_engine.py [--beside-busy] [--index data/index] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from searchplay.process import apply_offline_defaults

QUESTIONS = ["Who founded the city of Rome?", "What is the capital of Australia?", "Who painted the Mona Lisa?",
             "Which river flows through Vienna?", "When did the Berlin Wall fall?", "Who discovered penicillin?",
             "What language is spoken in Brazil?", "Who wrote Pride and Prejudice?",
             "Which country has the city of Porto?", "Who composed The Magic Flute?",
             "What is the largest moon of Saturn?", "Who was the first person on the Moon?",
             "Where is the headquarters of CERN?", "Which ocean lies west of Portugal?",
             "Who wrote the novel Dune?", "What is the chemical symbol of iron?"]
ENGINES = ("transformers", "vllm")


def measure(engine: str, index: str, out: str) -> None:
    """One engine, in this process: start-up, a Solver group, an evaluation batch; results to ``out``."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    from searchplay.agent.prompts import solver_messages
    from searchplay.agent.rollout import RolloutConfig, encode_prompt, run_rollouts
    from searchplay.llm import load_backend
    from searchplay.recipes import load_params
    from searchplay.retrieval import load_search_tool

    params = load_params()
    params = params.model_copy(update={"agent": params.agent.model_copy(update={"backend": engine}),
                                       "index": params.index.model_copy(update={"dir": index})})
    tool = load_search_tool(params)
    tic = time.perf_counter()
    extra = {"max_model_len": 4096} if engine == "vllm" else {}
    backend = load_backend(params.models.policy, params, **extra)
    startup = time.perf_counter() - tic
    group = [encode_prompt(backend.tokenizer, solver_messages(q)) for q in QUESTIONS[:4] for _ in range(5)]
    evaluation = [encode_prompt(backend.tokenizer, solver_messages(q)) for q in QUESTIONS]
    results = {"engine": engine, "startup_s": startup}
    for name, prompts, temperature in (("group", group, params.agent.temperature), ("evaluation", evaluation, 0.0)):
        config = RolloutConfig.from_params(params, temperature=temperature, seed=0)
        tic = time.perf_counter()
        trajectories = run_rollouts(backend, tool, prompts, "solver", config, params.search.top_k)
        seconds = time.perf_counter() - tic
        tokens = sum(t.generated_token_count for t in trajectories)
        results[name] = {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds,
                         "searches": sum(t.num_searches for t in trajectories)}
    Path(out).write_text(json.dumps(results))


def busy() -> None:
    import torch

    torch.set_num_threads(1)
    a = torch.randn(512, 512)
    while True:
        a = (a @ a).tanh()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default="data/index", help="a built index (searchplay index build)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--beside-busy", action="store_true", help="with one busy neighbour process")
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    apply_offline_defaults()
    if args.worker:
        measure(args.worker, args.index, args.out)
        return
    neighbour = multiprocessing.Process(target=busy, daemon=True) if args.beside_busy else None
    if neighbour is not None:
        neighbour.start()
    runs: list[dict] = []
    try:
        for repeat in range(args.repeats):
            for engine in ENGINES:
                out = Path(f"/tmp/vllm-engine-{os.getpid()}-{engine}-{repeat}.json")
                subprocess.run([sys.executable, __file__, "--worker", engine, "--index", args.index, "--out",
                                str(out)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                runs.append(json.loads(out.read_text()))
                out.unlink()
                run = runs[-1]
                print(f"{engine:>12} run {repeat + 1}: start-up {run['startup_s']:5.1f} s | " + " | ".join(
                    f"{name} {run[name]['tokens_per_s']:6.1f} tok/s ({run[name]['tokens']} tokens, "
                    f"{run[name]['seconds']:.1f} s, {run[name]['searches']} searches)"
                    for name in ("group", "evaluation")), flush=True)
    finally:
        if neighbour is not None:
            neighbour.terminate()
    for name in ("group", "evaluation"):
        rate = {e: statistics.median(r[name]["tokens_per_s"] for r in runs if r["engine"] == e) for e in ENGINES}
        wall = {e: statistics.median(r[name]["seconds"] for r in runs if r["engine"] == e) for e in ENGINES}
        print(f"{name}: vLLM / transformers {rate['vllm'] / rate['transformers']:.2f}x tokens/s, "
              f"wall {wall['transformers'] / wall['vllm']:.2f}x faster")
    start = {e: statistics.median(r["startup_s"] for r in runs if r["engine"] == e) for e in ENGINES}
    print(f"start-up: transformers {start['transformers']:.1f} s, vLLM {start['vllm']:.1f} s"
          + (" (beside a busy neighbour)" if args.beside_busy else " (idle)"))


if __name__ == "__main__":
    main()
