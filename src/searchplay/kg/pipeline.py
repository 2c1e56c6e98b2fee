"""The kg stage end to end: fill the store from the configured source, pick seeds, extract, split, validate, write.

Every subgraph record carries its ``split`` (self-play seeds, warm-start demos or kg_heldout;
``searchplay.split``), and ``stats.json`` records the counts.

Output: ``out_dir/subgraphs.jsonl`` (sorted by num_nodes, descending) and ``out_dir/stats.json``.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from searchplay.assets import bundled_sample_path
from searchplay.io import InputError, atomic_dir, portable_name, write_json, write_jsonl
from searchplay.kg.extract import extract_subgraphs, pool_stats
from searchplay.kg.golds import answer_share, heldout_questions, with_answers
from searchplay.kg.readers import ReadReport
from searchplay.kg.relations import RelationFilter
from searchplay.kg.selectors import RelationSelector, make_selector
from searchplay.kg.store import GraphStore, ingest_dump
from searchplay.split import SALT, split_counts, split_of

log = logging.getLogger(__name__)


class KGInputError(InputError, ValueError):
    """An input or setting `kg extract` cannot use (no dump named, no eligible seed, no corpus to check titles
    against): a retry finds it the same way, so the command exits 2."""


def fill_store(params, dump: str | None, store_dir: Path, progress: Callable[[int], None] | None = None) -> ReadReport:
    """Ingest the dump (``--dump`` or kg.dump), the bundled sample, or a SPARQL pull into ``store_dir``."""
    config = params.kg
    dump = dump or (config.dump if config.source == "dump" else None)
    if dump is None and config.source == "sample":
        dump = str(bundled_sample_path())
    if dump is not None:
        return ingest_dump(dump, store_dir, workers=config.ingest_workers, max_bad_line_share=config.max_bad_line_share,
                           batch_size=config.ingest_batch_size, progress=progress)
    if config.source == "sparql":
        from searchplay.kg.sparql import SparqlReader, ingest_source

        return ingest_source(SparqlReader(config.sparql_endpoint, config.sparql_seeds, config.sparql_hops), store_dir)
    raise KGInputError("kg.source=dump needs kg.dump (or --dump FILE)")


def corpus_titles(params) -> set[str]:
    """Titles of the retrieval corpus (for kg.require_in_corpus): the bundled summaries or corpus.out."""
    from searchplay.assets import resolve

    if params.corpus.source == "bundled":
        return set(json.loads(Path(resolve("bundled:wiki-summaries")).read_text(encoding="utf-8")))
    out = Path(params.corpus.out)
    if not out.is_file():
        raise KGInputError(f"kg.require_in_corpus needs the corpus at {out}; run the corpus stage first")
    from searchplay.io import read_jsonl

    return {record.get("title", "") for record in read_jsonl(out)}


def eligible_seeds(store: GraphStore, config, rng: random.Random, titles: set[str] | None = None) -> list[str]:
    """Seed ids meeting kg.require_enwiki / kg.require_in_corpus (English label always), shuffled by ``rng``."""
    seeds = [item_id for item_id, label, enwiki in store.items(require_label=True, require_enwiki=config.require_enwiki)
             if titles is None or (enwiki or label) in titles]
    rng.shuffle(seeds)
    return seeds


def run_extract(params, dump: str | None, out_dir: Path, selector: RelationSelector | None = None,
                progress: Callable[[str, int | None], Callable[[int], None]] | None = None) -> dict[str, Any]:
    """Build the pool; returns stats. Raises DumpError / DataQualityError with readable messages.

    The store is built and walked in a staging folder that replaces the previous store only when the
    pool has been extracted and validated (``atomic_dir``): a bad or truncated dump, a failed
    extraction or Ctrl-C leaves the previous store, subgraphs.jsonl and stats.json as they were.
    """
    config = params.kg
    out_dir = Path(out_dir)
    # the stage's store is kg.store_dir (a DVC output beside kg.out_dir); a pool written elsewhere (`--out`) keeps
    # its store beside it, so it never replaces the store the project's pool was walked on
    store_dir = Path(config.store_dir) if out_dir.resolve() == Path(config.out_dir).resolve() else out_dir / "store"
    out_dir.mkdir(parents=True, exist_ok=True)  # a file there fails now, before a store is built (exit 2)
    with atomic_dir(store_dir) as staging:
        report = fill_store(params, dump, staging, progress("ingesting entities", None) if progress else None)
        log.info(report.summary())
        store = GraphStore(staging)
        try:
            records, summary = _extract_pool(params, store, store_dir, report, selector, progress)
        finally:
            store.close()
    write_jsonl(out_dir / "subgraphs.jsonl", records)
    write_json(out_dir / "stats.json", summary)
    return summary


def split_pool(store: GraphStore, records: list[dict[str, Any]], config) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every record with its ``answers`` (``searchplay.kg.golds``) and its ``split``, decided by its seed.

    All paths from one seed share a split, so no held-out question starts from an entity that a
    training question starts from, and no training path walks through a held-out question's seed
    (``isolate_heldout``). Held-out questions that cannot be scored fairly are not asked
    (``heldout_questions``); the returned summary says how many, and how the kept ones spread.
    """
    records = [with_answers(store, record) for record in records]
    for record in records:
        record["split"] = split_of(str(record["seed_id"]), config.heldout_share, config.warmstart_share)
    held = [r for r in records if r["split"] == "kg_heldout"]
    asked, not_asked = heldout_questions(held, config.heldout_max_golds, config.heldout_max_answer_share)
    asked_ids = {r["id"] for r in asked}
    records = [r for r in records if r["split"] != "kg_heldout" or r["id"] in asked_ids]
    records, through = isolate_heldout(records, {str(r["seed_id"]) for r in asked}, config.heldout_isolation)
    top_answer, top_share = answer_share(asked)
    hops = Counter(r["num_hops"] for r in asked)
    return records, {"questions": len(asked), "not_asked": not_asked, "isolation": config.heldout_isolation,
                     "training_paths_dropped": through,
                     "multi_gold_questions": sum(len(r["answers"]) > 1 for r in asked),
                     "hop_histogram": {str(k): hops[k] for k in sorted(hops)},
                     "top_answer": top_answer, "top_answer_share": round(top_share, 4),
                     "max_golds": config.heldout_max_golds, "max_answer_share": config.heldout_max_answer_share}


def isolate_heldout(records: list[dict[str, Any]], heldout_seeds: set[str],
                    isolation: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The records without the training paths that walk through a held-out question's seed, and how many
    of each split were dropped (``kg.heldout_isolation``: "path"; "none" keeps all).

    The split by seed keeps a held-out seed from starting a training path, not from lying on one: a
    warm-start path Beethoven -> Vienna -> Austria -> Europe ends with the held-out question from Vienna.

    >>> held = {"id": "h", "split": "kg_heldout", "seed_id": "Q2", "path": [{"id": "Q2"}, {"id": "Q3"}]}
    >>> train = {"id": "t", "split": "selfplay", "seed_id": "Q1", "path": [{"id": "Q1"}, {"id": "Q2"}, {"id": "Q3"}]}
    >>> kept, dropped = isolate_heldout([held, train], {"Q2"}, "path")
    >>> [r["id"] for r in kept], dropped
    (['h'], {'selfplay': 1})
    """
    if isolation == "none":
        return records, {}
    kept, dropped = [], Counter()
    for record in records:
        if record["split"] != "kg_heldout" and any(str(node["id"]) in heldout_seeds for node in record["path"]):
            dropped[record["split"]] += 1
        else:
            kept.append(record)
    return kept, dict(sorted(dropped.items()))


def _extract_pool(params, store: GraphStore, store_dir: Path, report: ReadReport, selector: RelationSelector | None,
                  progress: Callable[[str, int | None], Callable[[int], None]] | None
                  ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Seeds, Algorithm 1, splits and the quality gate over a filled store: the records and their stats."""
    from searchplay.quality.kg import validate_subgraphs

    config = params.kg
    rng = random.Random(config.seed)
    titles = corpus_titles(params) if config.require_in_corpus else None
    seeds = eligible_seeds(store, config, rng, titles)
    if not seeds:
        raise KGInputError(f"no eligible seed in {store_dir}: need an English label"
                         + (", an enwiki sitelink" if config.require_enwiki else "")
                         + (" and a title in the corpus" if titles is not None else ""))
    selector = selector or make_selector(config, params=params)
    records, stats = extract_subgraphs(store, seeds, selector, RelationFilter.from_config(config), config,
                                       config.num_seeds, rng,
                                       progress("extracting subgraphs", config.num_seeds) if progress else None)
    records, heldout = split_pool(store, records, config)
    summary = pool_stats(records, stats)
    summary["split"] = {"counts": split_counts(records), "by": "seed_id", "heldout_share": config.heldout_share,
                        "warmstart_share": config.warmstart_share, "salt": SALT, "kg_heldout": heldout}
    summary["ingest"] = {"source": portable_name(report.source), "entities": report.entities, "lines": report.lines,
                         "bad_lines": report.bad_lines, "bad_line_examples": report.examples}
    summary["seed"] = config.seed
    summary["eligible_seeds"] = len(seeds)
    summary["quality"] = validate_subgraphs(records, config.min_hops, config.max_hops).to_dict()
    return records, summary
