"""Rollout throughput: 16 multi-turn Solver rollouts, batched backend vs one rollout at a time.

With ``--compare-cache``: batched with the backend's prefix cache (each turn prefills only the new
tokens) vs without (each turn re-encodes the whole history), same process. Use a model that follows
the tags (``--model checkpoints/warmstart/model``), or no rollout gets past its first turn.

Bundled SmolLM2, real dense search on the bundled index (``data/index`` if ``searchplay index build``
wrote it, else a small index of bundled Wikipedia leads built in a temp folder). Both runs use the
same prompts and decoding, in the same process (batched twice: in one running batch, as
``agent.continuous_batching`` does, and turn by turn): by default the self-play rollout temperature
(``agent.temperature``, 1.0 as in the papers) with a fixed seed; ``--temperature 0`` is greedy, where
SmolLM2 stops after a few tokens and prompt prefill, which batching barely speeds up on a CPU,
dominates. Prints generated tokens/s for both and the ratio.

    .venv/bin/python benchmarks/rollout.py [--rollouts 16] [--max-turns 4] [--turn-tokens 128] [--temperature T]
    .venv/bin/python benchmarks/rollout.py --compare-cache --model checkpoints/warmstart/model --rollouts 10
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

from searchplay.process import apply_offline_defaults, keep_freed_memory

QUESTIONS = ["Who founded the city of Rome?", "What is the capital of Australia?", "Who painted the Mona Lisa?",
             "Which river flows through Vienna?", "When did the Berlin Wall fall?", "Who discovered penicillin?",
             "What language is spoken in Brazil?", "Who wrote Pride and Prejudice?"]


def search_tool(params, passages: int):
    from searchplay.retrieval import load_search_tool

    if Path(params.index.dir, "manifest.json").exists() or Path(params.index.dir).is_dir():
        try:
            return load_search_tool(params), params.index.dir
        except Exception as exc:  # not built, or built by another version: fall back to a small index
            print(f"data/index unusable ({exc}); building a small index")
    from searchplay.assets import resolve
    from searchplay.io import write_jsonl
    from searchplay.retrieval.corpus import CorpusReport, read_wiki_summaries
    from searchplay.retrieval.embedder import Embedder
    from searchplay.retrieval.index import build_index
    from searchplay.retrieval.search import LanceSearchTool

    root = Path(tempfile.mkdtemp(prefix="rollout-bench-"))
    rows = itertools.islice(read_wiki_summaries(Path(resolve("bundled:wiki-summaries")), CorpusReport("bundled")),
                            passages)
    write_jsonl(root / "passages.jsonl", [asdict(p) for p in rows])
    embedder = Embedder(params.models.embedder, device="cpu")
    build_index(root / "passages.jsonl", root / "index", "passages", embedder, ann_threshold=1_000_000,
                show_progress=False)
    return LanceSearchTool(root / "index", "passages", embedder, "dense"), f"{root / 'index'} ({passages} passages)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=16)
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--turn-tokens", type=int, default=128)
    parser.add_argument("--passages", type=int, default=500, help="size of the fallback index")
    parser.add_argument("--temperature", type=float, default=None, help="default: agent.temperature from params")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (turn t samples with seed + t)")
    parser.add_argument("--model", default=None, help="default: models.policy from params")
    parser.add_argument("--compare-cache", action="store_true", help="prefix cache on vs off instead")
    args = parser.parse_args()
    apply_offline_defaults()
    keep_freed_memory()  # as every searchplay command runs
    import torch

    from searchplay.agent.prompts import solver_messages
    from searchplay.agent.rollout import RolloutConfig, encode_prompt, run_rollouts
    from searchplay.llm import load_backend
    from searchplay.recipes import load_params

    params = load_params()
    tool, where = search_tool(params, args.passages)
    backend = load_backend(args.model or params.models.policy, params)
    prompts = [encode_prompt(backend.tokenizer, solver_messages(QUESTIONS[i % len(QUESTIONS)]))
               for i in range(args.rollouts)]
    temperature = params.agent.temperature if args.temperature is None else args.temperature
    config = RolloutConfig.from_params(params, temperature=temperature, max_turns=args.max_turns,
                                       max_turn_tokens=args.turn_tokens, seed=args.seed)
    print(f"model {params.models.policy}, index {where}, {args.rollouts} rollouts, torch threads "
          f"{torch.get_num_threads()}, max_turns {args.max_turns}, turn tokens {args.turn_tokens}, "
          f"temperature {temperature}, seed {args.seed}")

    def timed(batches):
        start, trajectories = time.perf_counter(), []
        for batch in batches:
            trajectories += run_rollouts(backend, tool, batch, "solver", config, params.search.top_k)
        seconds = time.perf_counter() - start
        tokens = sum(t.generated_token_count for t in trajectories)
        searches = sum(t.num_searches for t in trajectories)
        return tokens / seconds, tokens, seconds, searches

    if args.compare_cache:
        runs = {}
        for reuse in (True, False):
            backend.reuse_cache, backend.prefilled_tokens = reuse, 0
            runs["cache" if reuse else "no cache"] = (*timed([prompts]), backend.prefilled_tokens)
        for name, (rate, tokens, seconds, searches, prefilled) in runs.items():
            print(f"{name:>14}: {rate:8.1f} generated tokens/s ({tokens} tokens, {searches} searches, "
                  f"{prefilled} prompt tokens prefilled, {seconds:.1f} s)")
        print(f"ratio cache / no cache: {runs['cache'][0] / runs['no cache'][0]:.2f}x "
              f"(wall {runs['no cache'][2] / runs['cache'][2]:.2f}x)")
        return
    batched = timed([prompts])
    config = replace(config, continuous_batching=False)
    turn_by_turn = timed([prompts])
    single = timed([[p] for p in prompts])
    for name, (rate, tokens, seconds, searches) in (("continuous", batched), ("turn by turn", turn_by_turn),
                                                     ("one at a time", single)):
        print(f"{name:>14}: {rate:8.1f} generated tokens/s ({tokens} tokens, {searches} searches, {seconds:.1f} s)")
    print(f"ratio batched / one-at-a-time: {batched[0] / single[0]:.2f}x continuous, "
          f"{turn_by_turn[0] / single[0]:.2f}x turn by turn")

if __name__ == "__main__":
    main()
