"""Cost model: FLOPs per token, tokens per self-play step, and GPU-hours for one epoch at the KG paper's scale.

    .venv/bin/python benchmarks/cost_model.py                      # measure here, then estimate
    .venv/bin/python benchmarks/cost_model.py --skip-measure       # the estimate only (no model load)
    .venv/bin/python benchmarks/cost_model.py --train-mfu 0.3 --rollout-mfu 0.05

What is measured, and where:
- FLOPs per token of a model from its architecture (``flops_per_token``: the matmuls of attention, MLP and
  LM head, plus attention over the context): SmolLM2-135M from its bundled config, Qwen2.5-7B-Instruct
  from the numbers of its published ``config.json``.
- Tokens per rollout: the self-play prompts tokenized (Solver, KG Proposer, SSP Proposer), the
  ``<information>`` block of 3 real corpus passages, and the model tokens per turn and searches per
  rollout from the committed self-play histories (``reports/selfplay/*/history.csv``).
- This machine's throughput: one fp32 forward+backward of the policy on a rollout-length sequence, timed,
  as achieved FLOP/s (the per-token cost that the embedded default pays).
The estimate for the paper's scale is arithmetic on those figures and on the assumptions printed with it
(utilization, turns per rollout); it asserts nothing. docs/scale.md records one run of it.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Qwen2.5-7B-Instruct's config.json (the KG and SSP papers' backbone).
QWEN25_7B = {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
             "num_key_value_heads": 4, "vocab_size": 152064}
H20_BF16_FLOPS = 148e12  # dense bf16 peak of one H20 (NVIDIA's H20 datasheet)

# Decompression, MB of JSON out per CPU-second (benchmarks/kg_ingest.py --compressed; docs/scale.md says where):
# the stdlib's gzip and bz2, and the chunk feeds (decoding, cutting lines) of a .gz and of a .bz2 (indexed_bzip2).
GZIP_MB_S, GZIP_FEED_MB_S, BZ2_MB_S, BZ2_FEED_MB_S = 654.0, 509.0, 74.0, 73.0

# The KG paper's run (Tables 4-5, C.2): 195 steps of 256 seeds, G = 5, 1 Proposer sample, 10 rounds at
# most, about 242 ms per turn for about 69 h on 8 H20, about 552 GPU-hours.
PAPER = {"steps": 195, "seeds": 256, "group": 5, "hours": 69.0, "gpus": 8, "gpu_hours": 552.0, "turn_s": 0.242}


@dataclass(frozen=True)
class Architecture:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int

    @classmethod
    def from_config(cls, config: dict) -> Architecture:
        return cls(config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"],
                   config["num_attention_heads"], config.get("num_key_value_heads", config["num_attention_heads"]),
                   config["vocab_size"])

    @property
    def matmul_params(self) -> int:
        """Weights every token multiplies by: q/k/v/o, gated MLP (3 matrices), and the LM head."""
        head_dim = self.hidden // self.heads
        attention = 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_heads * head_dim
        mlp = 3 * self.hidden * self.intermediate
        return self.layers * (attention + mlp) + self.hidden * self.vocab


def flops_per_token(arch: Architecture, context: float) -> float:
    """Forward FLOPs of one token attending to ``context`` earlier tokens: 2 per weight, plus QK^T and AV.

    A backward pass costs twice the forward, so training a token costs 3x this (Kaplan et al. 2020, Sec. 2.1).
    """
    return 2.0 * arch.matmul_params + 4.0 * arch.layers * context * arch.hidden


def history_figures(folder: Path) -> dict[str, float]:
    """Model tokens per turn and searches per rollout, over every iteration of every committed variant."""
    per_turn, searches = [], []
    for history in sorted(folder.glob("*/history.csv")):
        for row in csv.DictReader(history.open()):
            for role in ("solver", "proposer"):
                tokens, count = row.get(f"rollout/response_tokens_{role}"), row.get(f"rollout/searches_{role}")
                if tokens and count:
                    per_turn.append(float(tokens) / (float(count) + 1.0))
                    searches.append(float(count))
    if not per_turn:
        raise SystemExit(f"no self-play histories under {folder}; run `make run` or pass --tokens-per-turn")
    return {"tokens_per_turn": statistics.mean(per_turn), "searches": statistics.mean(searches),
            "iterations": float(len(per_turn) // 2)}


def prompt_figures(model_path: str) -> dict[str, float]:
    """Prompt tokens of each role and tokens of one <information> block of 3 real passages."""
    from searchplay.agent.prompts import solver_messages
    from searchplay.agent.proposer_prompts import kg_proposer_messages, ssp_proposer_messages
    from searchplay.agent.protocol import information_block
    from searchplay.io import read_jsonl
    from searchplay.llm.tokenizer import encode_prompt, load_tokenizer
    from searchplay.retrieval.search import format_documents
    from searchplay.retrieval.types import Document

    tokenizer = load_tokenizer(model_path)
    records = list(read_jsonl(REPO / "data/kg/subgraphs.jsonl"))[:50]
    passages = list(read_jsonl(REPO / "data/corpus/passages.jsonl"))[:300]
    blocks = [information_block(format_documents([Document(p["id"], p.get("title", ""), p.get("text", p.get(
        "contents", "")), 1.0) for p in passages[k:k + 3]])) for k in range(0, 300, 3)]
    from searchplay.templates import template_question

    def mean_tokens(prompts: list) -> float:
        return statistics.mean(len(encode_prompt(tokenizer, m)) for m in prompts)

    return {"solver_prompt": mean_tokens([solver_messages(template_question(r)) for r in records]),
            "kg_proposer_prompt": mean_tokens([kg_proposer_messages(r) for r in records]),
            "ssp_proposer_prompt": mean_tokens([ssp_proposer_messages(str(r["answer"]), 3) for r in records]),
            "information_block": statistics.mean(len(tokenizer.encode(b, add_special_tokens=False)) for b in blocks)}


def measure_throughput(model_path: str, length: int, repeats: int) -> dict[str, float]:
    """Seconds of one fp32 forward+backward over ``length`` tokens here, and the FLOP/s that makes."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    arch = Architecture.from_config(model.config.to_dict())
    ids = torch.randint(0, arch.vocab, (1, length))
    timings = []
    for _ in range(repeats + 1):
        tic = time.perf_counter()
        model(input_ids=ids, labels=ids).loss.backward()
        timings.append(time.perf_counter() - tic)
        model.zero_grad(set_to_none=True)
    seconds = statistics.median(timings[1:])  # the first call warms up
    flops = 3.0 * length * flops_per_token(arch, length / 2)
    return {"seconds": seconds, "tokens_per_s": length / seconds, "flops_per_s": flops / seconds,
            "threads": float(torch.get_num_threads())}


def epoch_estimate(arch: Architecture, figures: dict[str, float], turns_per_rollout: float, train_mfu: float,
                   rollout_mfu: float, refill: float) -> dict[str, float]:
    """FLOPs and H20 GPU-hours of one epoch (195 steps x 256 seeds) of KG self-play with a 7B model.

    Per step: 256 Proposer rollouts (KG prompt), one RAG verification each, 256 x 5 Solver rollouts.
    Rollouts prefill each turn's new context once (prefix cache) and decode the model's tokens; the update
    runs verl's way: old and reference log-probs (one forward each) and forward+backward over every token.
    ``refill`` multiplies the rollouts for proposals the filters reject (resampling, dynamic sampling).
    """
    model_turn = figures["tokens_per_turn"]
    searches = max(turns_per_rollout - 1.0, 0.0)
    info = figures["information_block"] * searches

    def rollout(prompt: float) -> tuple[float, float, float]:
        """(prefilled tokens, decoded tokens, the sequence's length)."""
        decoded = model_turn * turns_per_rollout
        return prompt + info, decoded, prompt + info + decoded

    solver = rollout(figures["solver_prompt"])
    proposer = rollout(figures["kg_proposer_prompt"])
    verify_prompt = figures["solver_prompt"] + 4 * figures["information_block"] / 3 + info  # own + 4 noisy docs
    seeds, group = PAPER["seeds"] * refill, PAPER["group"]
    rollout_flops = 0.0
    for (prefill, decoded, length), count in ((solver, seeds * group), (proposer, seeds)):
        rollout_flops += count * (prefill + decoded) * flops_per_token(arch, length / 2)
    rollout_flops += seeds * (verify_prompt + 70) * flops_per_token(arch, verify_prompt / 2)
    train_tokens = PAPER["seeds"] * (group * solver[2] + proposer[2])
    train_flops = (3.0 + 2.0) * train_tokens * flops_per_token(arch, solver[2] / 2)
    rollout_seconds = rollout_flops / rollout_mfu / H20_BF16_FLOPS * PAPER["steps"]
    train_seconds = train_flops / train_mfu / H20_BF16_FLOPS * PAPER["steps"]
    return {"rollout_flops": rollout_flops, "train_flops": train_flops, "train_tokens": train_tokens,
            "solver_sequence": solver[2], "gpu_hours": (rollout_seconds + train_seconds) / 3600,
            "rollout_time_share": rollout_seconds / (rollout_seconds + train_seconds),
            "epoch_flops": (rollout_flops + train_flops) * PAPER["steps"]}


def dump_estimate(dump_bytes: float, entities: float, mb_per_core: float, rss_mb: float, workers: int) -> str:
    """Ingest time and memory of a whole Wikidata dump from ``benchmarks/kg_ingest.py``'s per-core figures."""
    core_hours = dump_bytes / (mb_per_core * 1e6) / 3600
    return (f"{dump_bytes / 1e12:.1f} TB, {entities / 1e6:.0f}M entities at {mb_per_core} MB/s per core: "
            f"{core_hours:.1f} core-hours, {core_hours / workers * 60:.0f} min on {workers} workers, "
            f"peak RSS about {rss_mb * workers / 1000:.1f} GB ({rss_mb:.0f} MB per worker, flat in the dump size)")


def compressed_dump_minutes(dump_bytes: float, mb_per_core: float, workers: int, rates: dict[str, float]) -> dict:
    """Minutes to ingest a compressed dump on ``workers`` cores, the old way and the new (decompressed once).

    Old: every worker decompresses the whole stream (the stdlib, one thread each) and parses 1/n of it.
    New .gz: the parent's one thread feeds every worker, so the slower of feed and parsing bounds the run.
    New .bz2: indexed_bzip2's threads and the workers share the cores: the feed's and the parsing's CPU add up.
    """
    megabytes = dump_bytes / 1e6
    parse = megabytes / mb_per_core / workers
    seconds = {"gz old": megabytes / rates["gzip"] + parse, "gz new": max(parse, megabytes / rates["gzip_feed"]),
               "bz2 old": megabytes / rates["bz2"] + parse,
               "bz2 new": (megabytes / rates["bz2_feed"] + megabytes / mb_per_core) / workers}
    return {name: value / 60 for name, value in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="policy folder (default: the bundled SmolLM2-135M)")
    parser.add_argument("--skip-measure", action="store_true", help="no throughput measurement here")
    parser.add_argument("--length", type=int, default=1024, help="tokens of the timed forward+backward")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--train-mfu", type=float, default=0.35, help="share of H20 peak the update reaches")
    parser.add_argument("--rollout-mfu", type=float, default=0.05,
                        help="share of H20 peak that rollouts reach (decoding is memory-bound)")
    parser.add_argument("--refill", type=float, default=1.3, help="rollouts per seed slot, for rejected proposals")
    parser.add_argument("--ingest-mb-per-core", type=float, default=40.9,
                        help="benchmarks/kg_ingest.py's MB/s per core (README: 44.9 on 1 worker, 40.9 on 2)")
    parser.add_argument("--ingest-rss-mb", type=float, default=51.0, help="benchmarks/kg_ingest.py's peak RSS")
    parser.add_argument("--ingest-workers", type=int, default=16)
    parser.add_argument("--gzip-mb-s", type=float, default=GZIP_MB_S,
                        help="stdlib gzip, MB decompressed per CPU-second (benchmarks/kg_ingest.py --compressed)")
    parser.add_argument("--gzip-feed-mb-s", type=float, default=GZIP_FEED_MB_S,
                        help="a .gz's chunk feed (decoding and cutting lines), MB per CPU-second")
    parser.add_argument("--bz2-mb-s", type=float, default=BZ2_MB_S, help="stdlib bz2, MB per CPU-second")
    parser.add_argument("--bz2-feed-mb-s", type=float, default=BZ2_FEED_MB_S,
                        help="a .bz2's chunk feed on indexed_bzip2's threads, MB per CPU-second (all threads)")
    args = parser.parse_args()

    from searchplay.assets import resolve
    from searchplay.recipes import load_params

    model_path = str(resolve(args.model or load_params(REPO / "params.yaml").models.policy))
    small = Architecture.from_config(json.loads((Path(model_path) / "config.json").read_text()))
    big = Architecture.from_config(QWEN25_7B)
    figures = {**history_figures(REPO / "reports/selfplay"), **prompt_figures(model_path)}
    paper_turns = PAPER["hours"] * 3600 / PAPER["turn_s"] / PAPER["steps"] / (PAPER["seeds"] * (PAPER["group"] + 1))
    print("model                    matmul params   fwd FLOPs/token (1k-token sequence)   train FLOPs/token")
    for name, arch in (("SmolLM2-135M", small), ("Qwen2.5-7B", big)):
        forward = flops_per_token(arch, 512)
        print(f"{name:<24} {arch.matmul_params / 1e6:>10.1f} M   {forward / 1e9:>25.3f} GFLOP   "
              f"{3 * forward / 1e9:>14.3f} GFLOP")
    print(f"\nfrom the committed histories ({figures['iterations']:.0f} iterations): "
          f"{figures['tokens_per_turn']:.1f} model tokens per turn, {figures['searches']:.2f} searches per rollout")
    print(f"prompts: Solver {figures['solver_prompt']:.0f}, KG Proposer {figures['kg_proposer_prompt']:.0f}, "
          f"SSP Proposer {figures['ssp_proposer_prompt']:.0f} tokens; <information> of 3 passages "
          f"{figures['information_block']:.0f} tokens")
    if not args.skip_measure:
        measured = measure_throughput(model_path, args.length, args.repeats)
        print(f"\nthis machine: forward+backward of {args.length} tokens (fp32, {measured['threads']:.0f} threads) "
              f"{measured['seconds']:.2f} s = {measured['tokens_per_s']:.0f} tokens/s = "
              f"{measured['flops_per_s'] / 1e9:.1f} GFLOP/s")
    print(f"\nKG paper's run: {PAPER['hours']:.0f} h x {PAPER['gpus']} H20 at {PAPER['turn_s'] * 1000:.0f} ms per turn "
          f"-> {paper_turns:.2f} turns per rollout")
    for turns in (paper_turns, figures["searches"] + 1.0, 10.0):
        estimate = epoch_estimate(big, figures, turns, args.train_mfu, args.rollout_mfu, args.refill)
        print(f"  {turns:5.2f} turns per rollout: Solver sequence {estimate['solver_sequence']:.0f} tokens, "
              f"{estimate['epoch_flops'] / 1e18:.2f} EFLOP per epoch (rollouts "
              f"{estimate['rollout_flops'] / (estimate['rollout_flops'] + estimate['train_flops']):.0%} of FLOPs, "
              f"{estimate['rollout_time_share']:.0%} of GPU time), "
              f"{estimate['gpu_hours']:.0f} H20 GPU-hours at MFU {args.train_mfu} (update) / {args.rollout_mfu} "
              f"(rollouts); paper {PAPER['gpu_hours']:.0f} ({PAPER['gpu_hours'] / estimate['gpu_hours']:.1f}x)")
    print("\nfull Wikidata dump (KG paper C.2: about 1.7 TB, 120M entities): "
          + dump_estimate(1.7e12, 120e6, args.ingest_mb_per_core, args.ingest_rss_mb, args.ingest_workers)
          + " (uncompressed, split by byte ranges)")
    rates = {"gzip": args.gzip_mb_s, "gzip_feed": args.gzip_feed_mb_s, "bz2": args.bz2_mb_s,
             "bz2_feed": args.bz2_feed_mb_s}
    minutes = compressed_dump_minutes(1.7e12, args.ingest_mb_per_core, args.ingest_workers, rates)
    print(f"  compressed, on {args.ingest_workers} workers (MB per CPU-second: "
          + ", ".join(f"{name} {rate:.0f}" for name, rate in rates.items()) + "): "
          + ", ".join(f"{name} {value:.0f} min" for name, value in minutes.items()))


if __name__ == "__main__":
    main()
