"""How often does the Proposer write a question that self-play accepts? The rule filter's pass rate, sampled.

Run it in a checkout where the warm-start has run (data/kg, data/index, checkpoints/warmstart), e.g. after
``make run-quick``, whose params.yaml then holds the quick profile::

    .venv/bin/python benchmarks/proposer_validity.py --rounds 3
    .venv/bin/python benchmarks/proposer_validity.py --set agent.rollout_dtype=model   # fp32, as a CPU without bf16

Each round proposes once on every self-play seed of ``--variant`` in one batch, with the variant's prompt,
``selfplay.proposer_temperature`` and the agent's turn budget, from the checkpoint self-play starts from,
then applies self-play's rule filter (and RAG verification where ``selfplay.rag_verification`` is on). It
prints the passes with their Wilson interval, each rejection reason and the time. A warm-start setting
changes the rate: run ``searchplay warmstart`` with it, then this. In self-play a seed proposes again while
it has no valid question (``selfplay.resample_max_rounds``), so at rate p a run of r + 1 proposals finds one
with probability 1 - (1 - p)^(r + 1), if proposals are independent; the script prints that too. ``--seed``
seeds torch's generator, which the transformers backend samples from; a vLLM engine samples unseeded here.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from searchplay.config import load_params, parse_override  # noqa: E402
from searchplay.intervals import wilson_interval  # noqa: E402
from searchplay.recipes import load_recipes  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a params override")
    parser.add_argument("--variant", default="kg_wcr")
    parser.add_argument("--rounds", type=int, default=3, help="proposals per seed (default 3)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seeds torch's sampling as a self-play iteration does, and the filter's rng")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    load_recipes()
    from searchplay.selfplay.loop import build_runtime, load_seeds
    from searchplay.selfplay.seeding import seed_sampling
    from searchplay.selfplay.step import filter_and_verify, propose
    from searchplay.selfplay.variants import get_variant

    params = load_params(args.params, dict(parse_override(text) for text in args.set))
    variant = get_variant(args.variant)
    runtime = build_runtime(params, variant)
    seed_sampling(args.seed, iteration=0)
    seeds = load_seeds(params, variant)
    tic = time.perf_counter()
    proposals = propose(runtime, variant, seeds * args.rounds)
    filter_and_verify(runtime, proposals, params, random.Random(args.seed), sees_path=variant.proposer_sees_path)
    seconds = time.perf_counter() - tic

    reasons = Counter(proposal.reason or "valid" for proposal in proposals)
    passed, total = reasons.pop("valid", 0), len(proposals)
    low, high = wilson_interval(passed, total)
    rate = passed / total if total else float("nan")
    tries = params.selfplay.resample_max_rounds + 1
    found = 1 - (1 - rate) ** tries
    print(f"{args.variant}: {passed} of {total} proposals pass ({rate:.0%}, 95% interval {low:.0%}-{high:.0%}) "
          f"on {len(seeds)} seeds x {args.rounds}; {seconds:.0f} s ({seconds / max(total, 1):.1f} s a proposal)")
    print("rejected: " + (", ".join(f"{reason} {count}" for reason, count in reasons.most_common()) or "none"))
    print(f"with up to {tries} proposals a seed (selfplay.resample_max_rounds + 1): a valid question in {found:.1%} "
          f"of runs, {1 / rate if rate else float('inf'):.1f} proposals expected (independent proposals)")
    if args.json:
        args.json.write_text(json.dumps({"variant": args.variant, "passed": passed, "proposals": total,
                                         "rate": rate, "interval": [low, high], "rejected": dict(reasons),
                                         "seconds": seconds, "found_within_rounds": found}, indent=2) + "\n")


if __name__ == "__main__":
    main()
