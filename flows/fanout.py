"""CPU fan-out across a Dask cluster: one evaluation task per benchmark, then one scoring pass.

    python flows/fanout.py kg_wcr --workers 4                    # a local Dask cluster
    python flows/fanout.py kg_wcr --dask-address tcp://sched:8786  # an existing cluster

Each task runs ``searchplay evaluate --benchmarks <one>`` (no MLflow run of its own); predictions
land in ``predictions/<benchmark>.jsonl``, which is also evaluation's resume log, so the final
``searchplay evaluate`` finds every question answered and only scores, reports and tracks. The KG
and index stages fan out by their own knobs instead (``kg.ingest_workers`` shards the dump across
processes; ``index.embed_batch_size`` with CUDA for embeddings).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect_dask import DaskTaskRunner

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # Prefect loads this file by path; make `flows` importable

from flows.retrain import one_flow_at_a_time  # noqa: E402


def evaluate_command(variant: str, benchmark: str | None, every: list[str] | None = None) -> list[str]:
    """The CLI call for one benchmark (``None``: the final scoring pass over ``every`` benchmark the flow ran;
    ``--replace``, since it writes the whole report over the tasks' one-benchmark ones)."""
    searchplay = str(Path(sys.executable).parent / "searchplay")
    if benchmark is None:
        chosen = ["--benchmarks", ",".join(every)] if every else []
        return [searchplay, "evaluate", "--variant", variant, *chosen, "--replace"]
    # --replace: each task's one-benchmark report stands in until the final pass writes the whole one
    return [searchplay, "evaluate", "--variant", variant, "--benchmarks", benchmark, "--no-track", "--replace"]


def dask_runner(workers: int, address: str | None = None) -> DaskTaskRunner:
    """A local cluster of single-threaded worker processes, or the scheduler at ``address``."""
    if address:
        return DaskTaskRunner(address=address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "processes": True})


@task(retries=1, retry_delay_seconds=30, task_run_name="evaluate {variant} on {benchmark}")
def evaluate_one(variant: str, benchmark: str | None, root: str, every: list[str] | None = None) -> str:
    from searchplay.pipeline import stage_environment, stream

    logger = get_run_logger()
    last = ""
    for line in stream(evaluate_command(variant, benchmark, every), Path(root), stage_environment()):
        logger.info(line)
        last = line
    return last


@flow(name="evaluate-fanout", log_prints=True)
def evaluate_fanout(variant: str = "kg_wcr", benchmarks: list[str] | None = None,
                    root: str = str(REPO_ROOT)) -> str:
    from searchplay.recipes import load_params

    with one_flow_at_a_time(Path(root), "evaluate-fanout"):
        chosen = benchmarks or list(load_params(Path(root) / "params.yaml").evaluate.benchmarks)
        futures = [evaluate_one.submit(variant, name, root) for name in chosen]
        for future in futures:
            future.result()
        return evaluate_one(variant, None, root, chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("variant")
    parser.add_argument("--benchmarks", nargs="*")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dask-address")
    args = parser.parse_args()
    runner = dask_runner(args.workers, args.dask_address)
    evaluate_fanout.with_options(task_runner=runner)(args.variant, args.benchmarks)


if __name__ == "__main__":
    main()
