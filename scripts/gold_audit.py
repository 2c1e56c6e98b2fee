"""A sheet for checking by hand whether self-play's accepted KG questions are answered by their golds.

    .venv/bin/python scripts/gold_audit.py --questions reports/selfplay/kg_wcr/questions.jsonl \
        --pool data/kg/subgraphs.jsonl --out reports/selfplay/kg_wcr/gold_audit.csv [--limit 60]

One row per distinct question the Proposer wrote (``source == fresh``): the question, its gold a* and the
other answers the KG gives to its path, the path itself (``head -relation-> node ...``), and the automatic KG
check the loop logs (``filter/gold_checked_rate``: the question names the path's head entity and mentions
its last relation). The ``label`` and ``reason`` columns are for the reader: ``answered`` when a gold answers
the question as written, ``not_answered`` otherwise, with a short reason. Running it again keeps the labels
already written (rows are matched by seed id and question), so a sheet grows with a run.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from searchplay.question_rules import asks_relation, names_entity  # noqa: E402

COLUMNS = ("run", "iteration", "seed_id", "question", "gold", "other_golds", "path", "names_head", "asks_last_relation",
           "auto_check", "label", "reason")


def path_text(record: dict) -> str:
    """``Romania -official language-> Romanian -subclass of-> Eastern Romance languages``."""
    nodes = [str(node.get("label", "?")) for node in record["path"]]
    relations = [str(relation.get("label", "?")) for relation in record["relations"]]
    parts = [nodes[0]]
    for relation, node in zip(relations, nodes[1:], strict=False):
        parts.append(f"-{relation}-> {node}")
    return " ".join(parts)


def audit_rows(questions: list[dict], pool: dict[str, dict], limit: int, run: str = "") -> list[dict]:
    """The first ``limit`` distinct fresh questions with their golds, path and automatic check."""
    rows, seen = [], set()
    for entry in questions:
        key = (entry["seed_id"], entry["question"])
        if entry.get("source") != "fresh" or key in seen or entry["seed_id"] not in pool:
            continue
        seen.add(key)
        record = pool[entry["seed_id"]]
        heads = [str(record["path"][0]["label"]), *map(str, record["path"][0].get("aliases") or [])]
        named = names_entity(entry["question"], heads)
        asked = asks_relation(entry["question"], str(record["relations"][-1]["label"]))
        rows.append({"run": run, "iteration": entry.get("iteration"), "seed_id": entry["seed_id"],
                     "question": entry["question"],
                     "gold": entry["answer"],
                     "other_golds": "; ".join(a for a in record.get("answers") or [] if a != entry["answer"]),
                     "path": path_text(record), "names_head": named, "asks_last_relation": asked,
                     "auto_check": named and asked, "label": "", "reason": ""})
        if len(rows) >= limit:
            break
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=Path, nargs="+", required=True,
                        help="self-play runs' questions.jsonl (RUN=PATH names the run; default: its folder)")
    parser.add_argument("--pool", type=Path, default=ROOT / "data/kg/subgraphs.jsonl")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=60)
    args = parser.parse_args()
    pool = {str(r["id"]): r for r in map(json.loads, args.pool.read_text(encoding="utf-8").splitlines())}
    rows: list[dict] = []
    for item in args.questions:
        run, _, path = str(item).rpartition("=") if "=" in str(item) else (Path(item).parent.name, "", str(item))
        questions = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line]
        rows += audit_rows(questions, pool, args.limit - len(rows), run)
    if args.out.exists():  # keep the labels already written
        with args.out.open(encoding="utf-8") as handle:
            labelled = {(r["seed_id"], r["question"]): r for r in csv.DictReader(handle)}
        for row in rows:
            old = labelled.get((row["seed_id"], row["question"]), {})
            row["label"], row["reason"] = old.get("label", ""), old.get("reason", "")
    with args.out.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} questions -> {args.out}; automatic check passes {sum(r['auto_check'] for r in rows)}")


if __name__ == "__main__":
    main()
