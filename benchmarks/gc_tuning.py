"""What CPython's garbage collector costs a searchplay process, with and without ``tune_garbage_collection``.

    .venv/bin/python benchmarks/gc_tuning.py                      # import the stack a stage imports, then exit
    .venv/bin/python benchmarks/gc_tuning.py --repeats 3 \\
        --command "searchplay evaluate --variant base"            # a real stage command, in a checkout after a run

Each repeat runs the same child twice, CPython's collector as it is (``SEARCHPLAY_GC_TUNING=0``) and tuned, in
alternating order, and times it from start to exit. The import child also reports its full collections (count and
seconds, from ``gc.callbacks``). An evaluation reuses the rollouts of an earlier run of the same command, so
repeats of it time the stage's start, its reports and its exit. Prints figures and the ratio; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

from searchplay.process import GC_TUNING_ENV

IMPORT_CHILD = """
import gc, json, sys, time
full = {"count": 0, "seconds": 0.0}
started = {}
def count(phase, info):
    if info["generation"] == 2:
        if phase == "start":
            started["t"] = time.perf_counter()
        else:
            full["count"] += 1
            full["seconds"] += time.perf_counter() - started["t"]
gc.callbacks.append(count)
from searchplay.process import tune_garbage_collection
tune_garbage_collection()
import torch, transformers, sentence_transformers, mlflow, lancedb  # what an evaluation stage imports
print(json.dumps(full))
"""


def run_child(command: list[str], tuned: bool) -> tuple[float, str]:
    """Seconds from start to exit, and the child's last line of output."""
    env = {**os.environ, GC_TUNING_ENV: "1" if tuned else "0"}
    tic = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - tic
    if result.returncode != 0:
        sys.exit(f"{shlex.join(command)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    lines = result.stdout.splitlines()
    return seconds, lines[-1] if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--command", help="a command to time instead of the import child, e.g. "
                        "'searchplay evaluate --variant base' (from the virtual environment's bin)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    if args.command:
        words = shlex.split(args.command)
        binary = os.path.join(os.path.dirname(sys.executable), words[0])
        command = [binary if os.path.exists(binary) else words[0], *words[1:]]
    else:
        command = [sys.executable, "-c", IMPORT_CHILD]
    runs: dict[bool, list[tuple[float, dict]]] = {False: [], True: []}
    for repeat in range(args.repeats):
        for tuned in ((False, True) if repeat % 2 == 0 else (True, False)):
            seconds, last_line = run_child(command, tuned)
            runs[tuned].append((seconds, {} if args.command else json.loads(last_line)))  # the import child's figures
    label = args.command or "importing torch, transformers, sentence-transformers, MLflow and LanceDB"
    print(f"{label}: {args.repeats} runs each, start to exit")
    medians = {}
    for tuned, setting in ((False, "CPython's defaults"), (True, "tuned")):
        seconds = [s for s, _ in runs[tuned]]
        medians[tuned] = statistics.median(seconds)
        line = f"  {setting:<19} median {medians[tuned]:6.2f} s  (min {min(seconds):.2f}, max {max(seconds):.2f})"
        stats = [s for _, s in runs[tuned]]
        if not args.command:
            line += (f"  full collections before exit: {statistics.median(s['count'] for s in stats):.0f}, "
                     f"{statistics.median(s['seconds'] for s in stats):.2f} s")
        print(line)
    print(f"  tuned / defaults: {medians[True] / medians[False]:.2f}")


if __name__ == "__main__":
    main()
