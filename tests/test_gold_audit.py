"""scripts/gold_audit.py: a hand-check sheet of self-play's accepted KG questions that keeps its labels."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_sheet_lists_fresh_questions_with_path_golds_and_check_and_keeps_labels(tmp_path):
    record = {"id": "sg-1", "answer": "Europe", "answers": ["Europe", "Asia"],
              "path": [{"label": "Ravenna"}, {"label": "Italy"}, {"label": "Europe"}],
              "relations": [{"label": "country"}, {"label": "continent"}]}
    (tmp_path / "pool.jsonl").write_text(json.dumps(record) + "\n")
    questions = [{"iteration": 1, "seed_id": "sg-1", "question": "Which continent holds the country of Ravenna?",
                  "answer": "Europe", "source": "fresh"},
                 {"iteration": 1, "seed_id": "sg-1", "question": "Which continent holds the country of Ravenna?",
                  "answer": "Europe", "source": "replicate"},
                 {"iteration": 2, "seed_id": "sg-1", "question": "What is the capital of Italy today?",
                  "answer": "Europe", "source": "fresh"}]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    out = tmp_path / "audit.csv"
    command = [sys.executable, str(ROOT / "scripts/gold_audit.py"), "--questions", str(tmp_path / "q.jsonl"),
               "--pool", str(tmp_path / "pool.jsonl"), "--out", str(out)]
    subprocess.run(command, check=True, capture_output=True)
    rows = list(csv.DictReader(out.open()))
    assert [(r["run"], r["iteration"], r["auto_check"]) for r in rows] == [(tmp_path.name, "1", "True"),
                                                                          (tmp_path.name, "2", "False")]
    assert rows[0]["path"] == "Ravenna -country-> Italy -continent-> Europe" and rows[0]["other_golds"] == "Asia"
    rows[0]["label"], rows[0]["reason"] = "answered", "Italy is in Europe"
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    subprocess.run(command, check=True, capture_output=True)
    assert next(csv.DictReader(out.open()))["label"] == "answered"  # a second run keeps the hand labels
