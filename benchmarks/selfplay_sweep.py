"""Does self-play teach the Solver? A sweep of self-play settings, each judged by a paired test on kg_heldout.

Run it in a checkout where the main job has run (it needs data/kg, data/index, checkpoints/warmstart and the
warm-start's kg_heldout predictions in reports/eval/warmstart)::

    .venv/bin/python benchmarks/selfplay_sweep.py --out /tmp/sweep \\
        --config lr=5e-5,warmup=0,batch=3,iterations=8,eval=2:4:8 --config lr=1e-4,warmup=0,batch=3,iterations=4

Each config trains one self-play run of ``--variant`` (kg_wcr) from the warm-start in a scratch folder,
keeping every checkpoint, then evaluates the checkpoints of the iterations listed in ``eval`` (default: the
last) on every kg_heldout question, greedy, as the main job evaluates. A run of 8 iterations evaluated at
2, 4 and 8 gives three configs: the schedule is warm-up then constant and sampling is seeded per
iteration, so its first 4 iterations are the 4-iteration run. Each row is the paired table of that
checkpoint against the warm-start (exact McNemar), the Solver's accuracy on its fresh self-play questions,
the budget and the time. Figures print as a Markdown table and go to ``<out>/sweep.json``.

Disk: every iteration's checkpoint is kept (about 1.5 GB each on the embedded default, AdamW state
included); a config of 8 iterations needs about 12 GB in ``--out``. ``--delete-checkpoints`` deletes
``<out>/<config>/checkpoints`` once its rows are printed.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from searchplay.eval.paired import compare_paired  # noqa: E402
from searchplay.io import read_jsonl  # noqa: E402
from searchplay.selfplay.metrics import fresh_accuracy_trend  # noqa: E402

KEYS = {"lr": "selfplay.lr", "warmup": "selfplay.warmup_steps", "batch": "selfplay.batch_size",
        "group": "selfplay.group_size", "head": "selfplay.require_head_entity", "seed": "selfplay.seed",
        "kl": "selfplay.kl_beta"}


def parse_config(text: str) -> dict[str, str]:
    """``lr=5e-5,batch=3,iterations=8,eval=2:4:8`` -> a dict of its fields."""
    fields = dict(part.split("=", 1) for part in text.split(",") if part)
    unknown = set(fields) - {*KEYS, "iterations", "eval"}
    if unknown or "iterations" not in fields:
        raise SystemExit(f"config {text!r}: needs iterations=N; known fields {sorted({*KEYS, 'iterations', 'eval'})}")
    return fields


def searchplay(args: list[str], log: Path) -> float:
    """Run one ``searchplay`` command from the checkout, its output to ``log``; the seconds it took."""
    tic = time.perf_counter()
    with log.open("w") as handle:
        code = subprocess.call([str(Path(sys.executable).parent / "searchplay"), *args], cwd=ROOT, stdout=handle,
                               stderr=subprocess.STDOUT)
    if code != 0:
        raise SystemExit(f"searchplay {' '.join(args[-6:])} failed ({code}); see {log}")
    return time.perf_counter() - tic


def kg_correctness(predictions: Path) -> dict[tuple[str, str], bool]:
    return {("kg_heldout", str(r["id"])): bool(r["judge_correct"]) for r in read_jsonl(predictions)}


def history_totals(history: Path, upto: int) -> dict[str, float]:
    """Budget and fresh-question accuracy over the first ``upto`` iterations of a self-play history."""
    rows = [r for r in csv.DictReader(history.open()) if int(float(r["iteration"])) <= upto]

    def total(key: str) -> float:
        return sum(float(r.get(key) or 0) for r in rows)

    fresh = total("solver/fresh_rollouts")
    right = sum(float(r.get("solver/fresh_accuracy") or 0) * float(r.get("solver/fresh_rollouts") or 0) for r in rows)
    checked = [float(r["filter/gold_checked_rate"]) for r in rows if r.get("filter/gold_checked_rate")]
    trend = fresh_accuracy_trend([{k: float(r.get(k) or "nan") for k in ("solver/fresh_accuracy",
                                                                        "solver/fresh_rollouts")} for r in rows])
    return {"groups": total("train/groups"), "rollouts": total("solver/rollouts"),
            "gold_checked": sum(checked) / len(checked) if checked else float("nan"),
            "fresh_first_third": trend["trend/fresh_accuracy_first_third"],
            "fresh_last_third": trend["trend/fresh_accuracy_last_third"], "trend_p": trend["trend/fresh_accuracy_p"],
            "optimizer_steps": total("train/optimizer_steps"), "tokens": total("train/tokens"),
            "fresh_accuracy": right / fresh if fresh else float("nan"),
            "bf16_changed_share": float(rows[-1].get("train/bf16_changed_share") or "nan") if rows else float("nan")}


def warmstart_sets(args: argparse.Namespace) -> list[str]:
    """``--set`` items pointing self-play at ``--warmstart`` (a copy, safe from a pipeline re-running beside)."""
    return [f"warmstart.out_dir={args.warmstart}"] if args.warmstart else []


def evaluate_baseline(args: argparse.Namespace) -> Path:
    """Evaluate the warm-start on kg_heldout exactly as each checkpoint is (same command, same batches), so the
    paired test compares like with like; its predictions file."""
    folder = args.out / "warmstart"
    folder.mkdir(parents=True, exist_ok=True)
    model = (args.warmstart or ROOT / "checkpoints/warmstart") / "model"
    flags = [arg for item in [f"tracking.uri=sqlite:///{folder / 'mlflow.db'}", f"evaluate.model={model}"]
             for arg in ("--set", item)]
    seconds = searchplay([*flags, "evaluate", "--variant", "warmstart", "--benchmarks", "kg_heldout", "--out",
                          str(folder / "eval"), "--no-track"], folder / "eval.log")
    print(f"warm-start evaluated in {seconds:.0f} s", flush=True)
    return folder / "eval" / "warmstart" / "predictions" / "kg_heldout.jsonl"


def run_config(name: str, fields: dict[str, str], args: argparse.Namespace, baseline_file: Path) -> list[dict]:
    folder = args.out / name
    folder.mkdir(parents=True, exist_ok=True)
    sets = [f"{KEYS[k]}={v}" for k, v in fields.items() if k in KEYS]
    common = [f"selfplay.checkpoint_dir={folder / 'checkpoints'}", f"selfplay.reports_dir={folder / 'reports'}",
              "selfplay.keep_checkpoints=100", f"tracking.uri=sqlite:///{folder / 'mlflow.db'}",
              *warmstart_sets(args), *sets]
    flags = [arg for item in common for arg in ("--set", item)]
    iterations = int(fields["iterations"])
    train_s = searchplay([*flags, "selfplay", "--variant", args.variant, "--iterations", str(iterations)],
                         folder / "selfplay.log")
    rows = []
    for upto in [int(i) for i in fields.get("eval", str(iterations)).split(":")]:
        model = folder / "checkpoints" / args.variant / f"iter_{upto:06d}" / "model"
        out = folder / f"eval_{upto}"
        eval_s = searchplay([*flags, "--set", f"evaluate.model={model}", "evaluate", "--variant", args.variant,
                             "--benchmarks", "kg_heldout", "--out", str(out), "--no-track"],
                            folder / f"eval_{upto}.log")
        correct = kg_correctness(out / args.variant / "predictions" / "kg_heldout.jsonl")
        baseline = kg_correctness(baseline_file)  # read late: another sweep may still be writing it
        paired = compare_paired(name, correct, "warmstart", baseline, "kg_heldout")
        rows.append({"config": name, "variant": args.variant, **fields, "iteration": upto, "n": paired.n,
                     "em": 100 * sum(correct.values()) / len(correct), "wrong_to_right": paired.only_a,
                     "right_to_wrong": paired.only_b, "p": paired.p,
                     **history_totals(folder / "reports" / args.variant / "history.csv", upto),
                     "selfplay_s_whole_run": round(train_s), "eval_s": round(eval_s)})
        print(markdown([rows[-1]], header=False), flush=True)
    if args.delete_checkpoints:
        shutil.rmtree(folder / "checkpoints", ignore_errors=True)
    return rows


COLUMNS = ("config", "variant", "lr", "batch", "kl", "seed", "iteration", "groups", "rollouts", "optimizer_steps",
           "fresh_accuracy", "fresh_first_third", "fresh_last_third", "trend_p", "gold_checked", "bf16_changed_share",
           "n", "em", "wrong_to_right", "right_to_wrong", "p", "selfplay_s_whole_run", "eval_s")


def markdown(rows: list[dict], header: bool = True) -> str:
    def cell(value) -> str:
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    lines = [f"| {' | '.join(COLUMNS)} |", f"|{'---|' * len(COLUMNS)}"] if header else []
    return "\n".join(lines + [f"| {' | '.join(cell(r.get(c, '')) for c in COLUMNS)} |" for r in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="scratch folder (checkpoints, reports, logs)")
    parser.add_argument("--config", action="append", required=True, help="lr=..,warmup=..,batch=..,iterations=N,"
                        "eval=i:j:k (repeatable)")
    parser.add_argument("--variant", default="kg_wcr")
    parser.add_argument("--baseline", type=Path, default=ROOT / "reports/eval/warmstart/predictions/kg_heldout.jsonl",
                        help="the warm-start's kg_heldout predictions (the main job writes them)")
    parser.add_argument("--evaluate-baseline", action="store_true",
                        help="evaluate the warm-start here first, as each checkpoint is, instead of --baseline "
                             "(greedy bf16 answers depend on the batch a question shares)")
    parser.add_argument("--warmstart", type=Path, help="the warm-start folder to start from (default: "
                        "warmstart.out_dir); a copy keeps the sweep safe from a pipeline running beside it")
    parser.add_argument("--delete-checkpoints", action="store_true",
                        help="delete each config's checkpoints once its rows are printed (about 1.5 GB an iteration)")
    args = parser.parse_args()
    baseline_file = evaluate_baseline(args) if args.evaluate_baseline else args.baseline
    if args.evaluate_baseline:
        baseline = kg_correctness(baseline_file)
        print(f"warm-start: {sum(baseline.values())}/{len(baseline)} kg_heldout questions right", flush=True)
    print(markdown([]), flush=True)
    rows = []
    for index, text in enumerate(args.config):
        rows += run_config(f"{args.variant}-c{index}", parse_config(text), args, baseline_file)
        (args.out / "sweep.json").write_text(json.dumps(rows, indent=1))
    print(markdown(rows))


if __name__ == "__main__":
    main()
