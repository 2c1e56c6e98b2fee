"""Speed of the evaluate stage: questions/s for the bundled model on 50 Bamboogle questions, and the
share of time in generation, retrieval and judging (timers inside the runner).

    .venv/bin/python benchmarks/evaluate.py [--n 50] [--passages 1000] [--index DIR] [--data-dir DIR] [--rerun]
    .venv/bin/python benchmarks/evaluate.py --model checkpoints/warmstart/model --index data/index --batch-size 8

``--main-job`` instead evaluates ``--model`` on the main job's evaluation (params.yaml: every benchmark, its n,
``kg_heldout``, its batch size and index) twice in one process, with ``agent.continuous_batching`` on and off
(one backend, one search tool), and prints questions/s for both and whether every score agrees:

    .venv/bin/python benchmarks/evaluate.py --main-job --model checkpoints/warmstart/model

``--rerun`` then evaluates twice more into the same folder: unchanged (every prediction is reused by its
settings fingerprint) and with another metric option (``evaluate.normalization: unicode``: every question
is asked and scored again), and prints both walls against the first run's.

Without --index, a real LanceDB index of the first --passages bundled Wikipedia lead sections is
built in a temp folder (MiniLM embeddings); the build is timed separately and not counted.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

from searchplay.config import Params
from searchplay.process import apply_offline_defaults, keep_freed_memory

BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "data" / "benchmarks"  # shipped in the repo


def build_small_index(root: Path, passages: int) -> Path:
    from searchplay import assets
    from searchplay.io import write_jsonl
    from searchplay.retrieval.corpus import CorpusReport, read_wiki_summaries
    from searchplay.retrieval.embedder import Embedder
    from searchplay.retrieval.index import build_index

    source = Path(assets.resolve("bundled:wiki-summaries"))
    rows = itertools.islice(read_wiki_summaries(source, CorpusReport(str(source))), passages)
    write_jsonl(root / "passages.jsonl", (p.to_dict() for p in rows))
    build_index(root / "passages.jsonl", root / "index", "passages", Embedder.from_params(Params()),
                ann_threshold=10**6, fts=False, show_progress=False)
    return root / "index"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--passages", type=int, default=1000)
    parser.add_argument("--index", default=None)
    parser.add_argument("--data-dir", default=str(BENCHMARKS_DIR))
    parser.add_argument("--rerun", action="store_true", help="time an unchanged and a changed re-run too")
    parser.add_argument("--model", default=None, help="a model folder (e.g. checkpoints/warmstart/model); default: "
                        "models.policy, which stops at once before the warm-start")
    parser.add_argument("--batch-size", type=int, default=None, help="default: 8 (params.yaml: 32)")
    parser.add_argument("--main-job", action="store_true", help="params.yaml's evaluation, continuous batching "
                        "on vs off (needs data/index and --model)")
    args = parser.parse_args()
    apply_offline_defaults()
    keep_freed_memory()  # as every searchplay command runs
    if args.main_job:
        compare_continuous(args.model)
        return
    from searchplay.eval.evaluate import evaluate

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        clock = time.perf_counter()
        index = args.index or str(build_small_index(tmp_path, args.passages))
        print(f"index: {index} (ready in {time.perf_counter() - clock:.1f} s)")
        params = Params.model_validate({
            "index": {"dir": index},
            "evaluate": {"benchmarks": ["bamboogle"], "n": args.n, "data_dir": args.data_dir,
                         "out_dir": str(tmp_path / "eval"), "model": args.model,
                         **({"batch_size": args.batch_size} if args.batch_size else {})},
            "selfplay": {"checkpoint_dir": str(tmp_path / "none")}})
        clock = time.perf_counter()
        result = evaluate(params, "speed", track=False, progress=True)
        wall = time.perf_counter() - clock
        if args.rerun:
            rerun_walls(params, wall)
    times, shares = result.times, result.times.shares()
    print(f"model: {result.run['model']}; judge: {result.run['judge']}")
    print(f"questions: {times.questions}; wall incl. model load: {wall:.1f} s; timed phases: {times.total:.1f} s")
    print(f"questions/s: {times.questions / times.total:.3f} (timed phases), {times.questions / wall:.3f} (wall)")
    print(f"share of time: generation {shares['generation']:.1%}, retrieval {shares['retrieval']:.1%}, "
          f"judging {shares['judging']:.1%}")
    metrics = result.metrics
    print(f"bamboogle (judge: {result.run['judge']}) acc {metrics['bamboogle.judge_acc']:.1f}, "
          f"EM {metrics['bamboogle.em']:.1f}, F1 {metrics['bamboogle.f1']:.1f}, "
          f"sub-EM {metrics['bamboogle.sub_em']:.1f}")


def compare_continuous(model: str | None) -> None:
    """The main job's evaluation of ``model``, rollouts in one running batch and turn by turn, same process."""
    from searchplay.eval.evaluate import evaluate
    from searchplay.llm import load_backend
    from searchplay.recipes import load_params
    from searchplay.retrieval import load_search_tool

    if not model:
        raise SystemExit("--main-job needs --model (e.g. checkpoints/warmstart/model)")
    params = load_params()
    params.evaluate.model = model
    backend, search_tool = load_backend(model, params), load_search_tool(params)
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for continuous in (False, True):
            params.agent.continuous_batching = continuous
            params.evaluate.out_dir = str(Path(tmp) / f"continuous-{continuous}")
            result = evaluate(params, "speed", backend=backend, search_tool=search_tool, track=False, progress=False)
            runs[continuous] = result
    for continuous, result in runs.items():
        times = result.times
        print(f"{'continuous' if continuous else 'turn by turn':>12}: {times.questions} questions, generation "
              f"{times.generation:.1f} s, {times.questions / times.total:.3f} questions/s (timed phases)")
    scores = [{k: v for k, v in r.metrics.items() if k.endswith((".em", ".f1", ".judge_acc"))} for r in runs.values()]
    print(f"generation turn by turn / continuous: {runs[False].times.generation / runs[True].times.generation:.2f}x; "
          f"every EM, F1 and judge score the same: {scores[0] == scores[1]}")


def rerun_walls(params: Params, first: float) -> None:
    """The same evaluation again (reused), then with another metric option (re-scored), into one folder."""
    from searchplay.eval.evaluate import evaluate

    for label, normalization in (("unchanged re-run", params.evaluate.normalization), ("changed setting", "unicode")):
        params.evaluate.normalization = normalization
        clock = time.perf_counter()
        result = evaluate(params, "speed", track=False, progress=False)
        wall = time.perf_counter() - clock
        print(f"{label}: {wall:.1f} s wall against {first:.1f} s for the first run ({first / wall:.1f}x faster), "
              f"{result.times.questions} questions asked")


if __name__ == "__main__":
    main()
