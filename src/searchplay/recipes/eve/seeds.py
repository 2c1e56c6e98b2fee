"""EVE's source documents as Proposer seeds (EVE Alg. 1, App. C): the corpus passages split by a stable hash into
the Phase A shard ('proposer') and the held-out shard the trained Proposer writes the Phase B set on ('handoff').

``document_seeds`` is what the ``documents`` seed source and the hand-off read (``searchplay.recipes.eve``,
``phases.prepare_runtime``).
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

from searchplay.config import Params
from searchplay.io import read_jsonl
from searchplay.model_paths import initial_policy
from searchplay.selfplay.seeds import Seed, SeedError, shuffled


def document_shard(passage_id: str, handoff_share: float, salt: str = "searchplay-eve") -> str:
    """'handoff' for a stable ``handoff_share`` of the passages (by a hash of the id), else 'proposer'.

    EVE App. C: the frozen Proposer writes the Phase B set on a held-out shard of the corpus that Phase A
    never sampled (EVE §3.2, §3.4).
    """
    digest = hashlib.sha256(f"{salt}:{passage_id}".encode()).digest()
    return "handoff" if int.from_bytes(digest[:8], "big") / 2**64 < handoff_share else "proposer"


def load_document_seeds(passages: str | Path, shard: str, handoff_share: float, hop_weights: list[float],
                        seed: int = 0, tokenizer: Any = None, max_tokens: int | None = None) -> list[Seed]:
    """EVE's source documents d (EVE Alg. 1): the corpus passages of one shard as seeds, shuffled by ``seed``.

    Each document is ``(Title: t)\\n<text>`` (Dr. Zero's data preparation), cut to ``max_tokens`` policy tokens
    when a tokenizer is given, with a hop count h drawn from ``hop_weights`` (pmf over 1, 2, ...; the paper's
    4:3:2:1), fixed per passage. ``answer`` is empty: the EVE Proposer chooses its own.
    """
    path = Path(passages)
    if not path.exists():
        raise SeedError(f"{path}: no corpus passages; run `searchplay corpus build` first (or set corpus.out)")
    if not hop_weights or min(hop_weights) < 0 or sum(hop_weights) <= 0:
        raise SeedError(f"eve.hop_weights must be non-negative with a positive sum; got {hop_weights}")
    seeds = []
    for number, row in enumerate(read_jsonl(path), start=1):
        if not {"id", "title", "text"} <= set(row):
            raise SeedError(f"{path}:{number}: a passage needs id, title and text; rebuild with `searchplay corpus`")
        if document_shard(str(row["id"]), handoff_share) != shard:
            continue
        document = f"(Title: {row['title']})\n{row['text']}"
        if tokenizer is not None and max_tokens:
            ids = tokenizer.encode(document, add_special_tokens=False)
            if len(ids) > max_tokens:
                document = tokenizer.decode(ids[:max_tokens])
        hops = random.Random(f"{seed}:{row['id']}").choices(range(1, len(hop_weights) + 1), hop_weights)[0]
        seeds.append(Seed(seed_id=f"doc-{row['id']}", answer="", num_hops=hops,
                          record={"document": document, "title": row["title"], "shard": shard}))
    if not seeds:
        raise SeedError(f"{path}: no passage in the {shard!r} shard; add passages or change eve.handoff_share")
    return shuffled(seeds, seed)


def document_seeds(params: Params, shard: str) -> list[Seed]:
    """EVE's source documents of one corpus shard ('proposer' for Phase A, 'handoff' for the Solver set),
    cut to ``eve.document_tokens`` policy tokens."""
    from searchplay.assets import resolve
    from searchplay.llm.tokenizer import load_tokenizer

    cfg = params.eve
    tokenizer = load_tokenizer(resolve(initial_policy(params)))
    return load_document_seeds(params.corpus.out, shard, cfg.handoff_share, cfg.hop_weights, cfg.seed, tokenizer,
                               cfg.document_tokens)
