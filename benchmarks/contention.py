"""Share of speed kept beside one busy process: each compute phase timed idle and beside a CPU-bound competitor.

    .venv/bin/python benchmarks/contention.py --model checkpoints/warmstart/model
    .venv/bin/python benchmarks/contention.py --policies torch,passive,searchplay --phases rollout,embed

Each (thread policy, phase) runs in a child process, because thread settings are fixed once torch loads. The
child loads its model, warms the phase up once, then times it idle, beside the competitor, and idle again,
so the idle figure is the mean of a run before and a run after (their spread is the machine's noise). The
competitor is one process spinning on one core (``while True: pass``), started and stopped by the child.

Phases (the embedded default's shapes): ``sft`` one warm-start SFT step (2 demos of 700 tokens, a sixth
trained); ``update`` one self-play PolicyTrainer step (2 Solver-shaped samples); ``rollout`` 8 batched
Solver rollouts of 2 turns (greedy, fixed documents, so every run decodes the same tokens); ``evaluate`` 8
greedy evaluation questions through ``run_benchmarks`` (the same fixed documents, at most 3 turns);
``embed`` 32 single-query embeddings one at a time (a retrieval server's latency-bound work).

Policies: ``torch`` (torch's own default: one thread per core, OpenMP's default waiting: GNU OpenMP spins
300,000 times before it sleeps), ``passive`` (``OMP_WAIT_POLICY=PASSIVE``: sleep at once), ``spin``
(``GOMP_SPINCOUNT=10000``: a short spin, then sleep), ``one`` (one thread), and ``searchplay``: what every
``searchplay`` command does, ``searchplay.process.choose_thread_wait`` deciding at the start from the load it
sees. Because that choice is made once, at the start, ``searchplay`` is timed by two children: one started
on the idle machine (idle before / after), one started beside the already running competitor (busy).
Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

PHASES = ("sft", "update", "rollout", "evaluate", "embed")
POLICIES = {"torch": {}, "passive": {"OMP_WAIT_POLICY": "PASSIVE"}, "spin": {"GOMP_SPINCOUNT": "10000"},
            "one": {"OMP_NUM_THREADS": "1"}, "searchplay": {"SEARCHPLAY_THREAD_WAIT": "auto"}}
DECIDES_AT_START = {"searchplay"}
COMPETITOR = [sys.executable, "-c", "while True: pass"]


def _text_ids(tokenizer, n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    words = ["the", "river", "flows", "through", "the", "old", "city", "near", "mountains", "where", "people",
             "build", "bridges", "and", "towers"]
    ids = tokenizer(" ".join(rng.choice(words) for _ in range(n)), add_special_tokens=False)["input_ids"]
    return (ids * (n // max(len(ids), 1) + 1))[:n]


def sft_phase(model_path: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from searchplay.warmstart.demos import Demo, Segment
    from searchplay.warmstart.sft import SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    trainer = SFTTrainer(AutoModelForCausalLM.from_pretrained(model_path), lr=1e-5, autocast=_bf16())
    demos = [Demo("solver", str(i), [Segment(_text_ids(tokenizer, 300, i), False),
                                      Segment(_text_ids(tokenizer, 120, i + 10), True),
                                      Segment(_text_ids(tokenizer, 280, i + 20), False)]) for i in range(2)]
    return lambda: trainer.step(demos)


def update_phase(model_path: str):
    from transformers import AutoTokenizer

    from searchplay.config import Params
    from searchplay.rl import PolicyTrainer, TrainingSample

    params = Params.model_validate({"models": {"policy": model_path}})
    trainer = PolicyTrainer(model_path, params)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    mask = [1] * 40 + [0] * 450 + [1] * 40 + [0] * 450 + [1] * 30
    samples = []
    for i in range(2):
        ids = _text_ids(tokenizer, 300 + len(mask), i)
        samples.append(TrainingSample(ids[:300], ids[300:], mask, [(1.0 if i % 2 else -1.0) * m for m in mask]))
    return lambda: trainer.step(samples)


class FixedDocuments:
    """A search tool that returns the same three passages for every query (no index, no variance)."""

    def search(self, queries, top_k: int = 3):
        from searchplay.retrieval.types import Document

        text = ("The river flows through the old city. " * 12).strip()
        return [[Document(id=f"d{k}", title=f"Passage {k}", text=text, score=1.0) for k in range(top_k)]
                for _ in queries]


def _backend(model_path: str):
    from searchplay.config import Params
    from searchplay.llm import load_backend

    params = Params.model_validate({"models": {"policy": model_path}})
    return params, load_backend(model_path, params)


def rollout_phase(model_path: str):
    from searchplay.agent.prompts import solver_messages
    from searchplay.agent.rollout import RolloutConfig, run_rollouts
    from searchplay.llm.tokenizer import encode_prompt

    params, backend = _backend(model_path)
    config = RolloutConfig.from_params(params, max_turns=2, temperature=0.0)
    prompts = [encode_prompt(backend.tokenizer, solver_messages(f"Which city lies on river number {i}?"))
               for i in range(8)]
    return lambda: run_rollouts(backend, FixedDocuments(), prompts, "solver", config)


def evaluate_phase(model_path: str):
    import tempfile

    from searchplay.eval.benchmarks import QAItem
    from searchplay.eval.runner import rollout_config, run_benchmarks
    from searchplay.llm.judge import make_judge

    params, backend = _backend(model_path)
    params = params.model_copy(update={"evaluate": params.evaluate.model_copy(update={"max_turns": 3})})
    judge = make_judge(params.judge, backend=backend)
    items = [QAItem(id=f"q{i}", question=f"which city lies on river number {i}", golden_answers=["Paris"],
                    benchmark="bench")
             for i in range(8)]
    folder = Path(tempfile.mkdtemp())
    counter = iter(range(10**6))

    def run():  # a new predictions file each time, so nothing is reused
        path = folder / f"run{next(counter)}.jsonl"
        run_benchmarks({path: items}, backend=backend, search_tool=FixedDocuments(), judge=judge,
                       config=rollout_config(params), model="bench", batch_size=8)
    return run


def embed_phase(model_path: str):
    from searchplay.config import Params
    from searchplay.retrieval.embedder import Embedder

    embedder = Embedder.from_params(Params())
    queries = [f"who built the bridge over river number {i}" for i in range(32)]
    return lambda: [embedder.encode_queries([q]) for q in queries]


def _bf16() -> bool:
    from searchplay.precision import bf16_is_native

    return bf16_is_native("cpu")


def child(phase: str, model_path: str, repeats: int, mode: str) -> None:
    """Time one phase idle, beside the competitor, idle again (``mode`` both); or only idle before and after
    (``idle``), or only beside a competitor the parent started before this process (``busy``). One JSON line."""
    from searchplay.process import apply_offline_defaults, choose_thread_wait, keep_freed_memory

    apply_offline_defaults()
    keep_freed_memory()
    if os.environ.get("SEARCHPLAY_THREAD_WAIT"):
        wait = choose_thread_wait()
    else:
        wait = "passive" if os.environ.get("OMP_WAIT_POLICY") == "PASSIVE" else "spin"
    import torch

    run = globals()[f"{phase}_phase"](model_path)
    run()  # warm-up: first kernels, caches

    def timed() -> float:
        tic = time.perf_counter()
        for _ in range(repeats):
            run()
        return (time.perf_counter() - tic) / repeats

    if mode == "busy":
        print("RESULT " + json.dumps({"phase": phase, "threads": torch.get_num_threads(), "wait": wait,
                                      "busy": timed()}))
        return
    before = timed()
    busy = None
    if mode == "both":
        with competing():
            busy = timed()
        time.sleep(1.0)
    after = timed()
    print("RESULT " + json.dumps({"phase": phase, "threads": torch.get_num_threads(), "wait": wait,
                                  "idle_before": before, "busy": busy, "idle_after": after}))


@contextlib.contextmanager
def competing():
    """One process spinning on one core for the duration of the block."""
    competitor = subprocess.Popen(COMPETITOR)
    try:
        time.sleep(1.0)  # let the scheduler see it
        yield
    finally:
        competitor.kill()
        competitor.wait()


def run_child(phase: str, args: argparse.Namespace, env: dict[str, str], mode: str) -> dict | str:
    """The child's RESULT, or the last line of its error."""
    done = subprocess.run([sys.executable, __file__, "--child", phase, "--mode", mode, "--model", args.model,
                           "--repeats", str(args.repeats)], env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        return f"failed: {done.stderr.strip().splitlines()[-1:]}"
    return json.loads(lines[-1].removeprefix("RESULT "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="checkpoints/warmstart/model", help="a policy folder (HF format)")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--policies", default="torch,passive")
    parser.add_argument("--repeats", type=int, default=1, help="runs of the phase per timing")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="both", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.model, args.repeats, args.mode)
        return
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} at the start; model {args.model}")
    print("| policy | phase | threads | waiting (idle / busy start) | idle s (before / after) | beside one busy "
          "process s | share kept |")
    print("|---|---|---|---|---|---|---|")
    for policy in args.policies.split(","):
        env = {key: value for key, value in os.environ.items()
               if key not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "SEARCHPLAY_THREAD_WAIT")}
        env.update(POLICIES[policy])
        for phase in args.phases.split(","):
            if policy in DECIDES_AT_START:
                r = run_child(phase, args, env, "idle")
                with competing():
                    busy = run_child(phase, args, env, "busy")
                if isinstance(r, dict) and isinstance(busy, dict):
                    r["busy"], r["wait"] = busy["busy"], f"{r['wait']} / {busy['wait']}"
                else:
                    r = r if isinstance(r, str) else busy
            else:
                r = run_child(phase, args, env, "both")
            if isinstance(r, str):
                print(f"| {policy} | {phase} | {r} | | | | |")
                continue
            idle = (r["idle_before"] + r["idle_after"]) / 2
            print(f"| {policy} | {phase} | {r['threads']} | {r['wait']} | {idle:.2f} ({r['idle_before']:.2f} / "
                  f"{r['idle_after']:.2f}) | {r['busy']:.2f} | {idle / r['busy']:.0%} |", flush=True)


if __name__ == "__main__":
    main()
