"""The whole pipeline, for real, at the quick profile's size (``CI_SIZE``), in a temporary copy of the repository.

One module-scoped fixture runs `dvc repro` once (every stage of the quick profile, which trains kg_wcr
alone: KG, corpus, index, warm-start, self-play, the evaluations of base, warm-start and kg_wcr, report;
tests/test_deployment_files.py checks that the full params resolve every variant's stages); the tests
then check the outputs, that a second `dvc repro` does nothing, that changing `wcr.alpha` in a queued
`dvc exp run` (run in a temporary copy, as `--temp` runs) re-runs only kg_wcr's downstream stages (the
copy checks the other outputs out of the DVC cache) and that `dvc exp apply` brings the point back,
that a Prefect server + process worker runs the `retrain/weekly` deployment to completion, and that an
evaluation stage run again asks no question its predictions (a ``persist`` output) already answer.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

# The first `dvc repro` (the fixture, timed with the first test) took 29 min on a 2-core fp32 machine
# and its time varies by 1.5x across CI machines; the limits stop a hang, not a slow machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(4800)]

BIN = Path(sys.executable).parent


def run(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 4500) -> str:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{output[-6000:]}"
    return output


def stages_that_ran(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage '")}


@pytest.fixture(scope="module")
def pipeline_env(tmp_path_factory) -> dict[str, str]:
    from searchplay.pipeline import stage_environment

    env = stage_environment()
    env["PREFECT_HOME"] = str(tmp_path_factory.mktemp("prefect-home"))
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


# CI's own size on top of the quick profile: this file checks the orchestration (DVC, experiments, Prefect), not
# whether the quick run's Proposer writes a valid question (docs/decisions.md measures that), so its warm-start
# and its Proposer rounds stay at the size they had before the quick profile was made to train on a signal.
CI_SIZE = {"warmstart.steps": 3, "selfplay.resample_max_rounds": 1}


def shrink_quick_profile(path: Path) -> None:
    """Write ``CI_SIZE`` into the copy's quick profile, so that the Prefect run's `-p quick=true` applies it too."""
    from searchplay.config import set_dotted

    tree = yaml.safe_load(path.read_text())
    for key, value in CI_SIZE.items():
        set_dotted(tree, key, value)
    path.write_text(yaml.safe_dump(tree, sort_keys=False))


@pytest.fixture(scope="module")
def quick_repo(repo_root, tmp_path_factory, pipeline_env) -> tuple[Path, str]:
    """A git+DVC copy of the tracked tree, quick profile (at ``CI_SIZE``) applied, after one full `dvc repro`."""
    from flows.retrain import apply_overrides
    from searchplay.pipeline import quick_profile

    repo = tmp_path_factory.mktemp("pipeline") / "searchplay"
    tracked = subprocess.run(["git", "ls-files"], cwd=repo_root, capture_output=True, text=True,
                             check=True).stdout.split()
    for name in tracked:
        if (repo_root / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo_root / name, repo / name)
    shrink_quick_profile(repo / "params.quick.yaml")
    apply_overrides(repo, *quick_profile(repo / "params.quick.yaml"))  # as `-p quick=true` does
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.com"]
    run(["git", "init", "-q"], repo, pipeline_env)
    run([*git, "add", "-A"], repo, pipeline_env)
    run([*git, "commit", "-qm", "quick profile"], repo, pipeline_env)
    output = run([str(BIN / "dvc"), "repro"], repo, pipeline_env)
    return repo, output


QUICK_VARIANTS = ["kg_wcr"]  # params.quick.yaml removes the others and their stages
QUICK_MODELS = ["base", "warmstart", *QUICK_VARIANTS]


def test_first_repro_runs_every_stage_and_writes_the_outputs(quick_repo):
    repo, output = quick_repo
    expected = ({"kg", "corpus", "index", "warmstart", "report"}
                | {f"{s}@{v}" for s in ("selfplay", "evaluate") for v in QUICK_VARIANTS}
                | {f"evaluate_reference@{m}" for m in ("base", "warmstart")})
    assert stages_that_ran(output) == expected
    warmstart = json.loads((repo / "reports/warmstart/metrics.json").read_text())
    assert warmstart["enabled"] and warmstart["trained_tokens"] > 0
    assert (repo / "checkpoints/warmstart/model/config.json").is_file()
    assert sum(1 for _ in (repo / "data/kg/subgraphs.jsonl").open()) > 0
    for variant in QUICK_MODELS:
        metrics = json.loads((repo / f"reports/eval/{variant}/metrics.json").read_text())
        assert metrics, f"empty evaluation metrics for {variant}"
    for variant in QUICK_VARIANTS:
        assert (repo / f"reports/selfplay/{variant}/metrics.json").exists()
        assert (repo / f"checkpoints/{variant}/model/config.json").is_file()
    assert not (repo / "checkpoints/warmstart_eve").exists()  # the variants the profile removed left no trace
    compared = (repo / "reports/compare/compare.md").read_text().splitlines()[2]
    assert compared.startswith(f"models: {', '.join(QUICK_MODELS)} ("), compared  # the report names what ran
    assert (repo / "dvc.lock").exists()
    assert (repo / "mlflow.db").exists()


def test_second_repro_does_nothing(quick_repo, pipeline_env):
    repo, _ = quick_repo
    output = run([str(BIN / "dvc"), "repro"], repo, pipeline_env)
    assert stages_that_ran(output) == set(), output


def test_metrics_show_lists_the_headline_files_and_a_full_file_on_request(quick_repo, pipeline_env):
    repo, _ = quick_repo
    shown = json.loads(run([str(BIN / "dvc"), "metrics", "show", "--json"], repo, pipeline_env))
    files = set(shown[""]["data"])  # "": the workspace
    assert files == {f"reports/eval/{model}/headline.json" for model in QUICK_MODELS}, files
    full = json.loads(run([str(BIN / "dvc"), "metrics", "show", "--json", "reports/eval/kg_wcr/metrics.json"],
                          repo, pipeline_env))
    assert "kg_heldout.em" in full[""]["data"]["reports/eval/kg_wcr/metrics.json"]["data"]


def commit_all(repo: Path, env: dict[str, str], message: str) -> None:
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.com"]
    run([*git, "add", "-A"], repo, env)
    run([*git, "commit", "-qm", message], repo, env)


def experiment_params(repo: Path, env: dict[str, str]) -> dict[str, float]:
    """``dvc exp show``: experiment name -> its wcr.alpha."""
    shown = json.loads(run([str(BIN / "dvc"), "exp", "show", "--json"], repo, env))
    found = {}
    for baseline in shown:
        for experiment in baseline.get("experiments") or []:
            for revision in experiment["revs"]:
                params = revision["data"]["params"]["params.yaml"]["data"]
                found[revision["name"]] = params["wcr"]["alpha"]
    return found


# The stages wcr.alpha reaches: kg_wcr's self-play always; its evaluation and the report only where its results
# changed. DVC compares the content of their inputs (the exported model, the reports), and in the quick profile's
# one iteration a different alpha can leave the weights and every answer as they were (alpha scales only valid
# wrong rollouts that cover a waypoint).
KG_WCR_ALWAYS, KG_WCR_DOWNSTREAM = {"selfplay@kg_wcr"}, {"selfplay@kg_wcr", "evaluate@kg_wcr", "report"}


def test_a_queued_experiment_reruns_only_kg_wcr_downstream(quick_repo, pipeline_env):
    """`dvc exp run --queue` then `--run-all`: the run happens in a temporary copy (the executor `--temp`
    uses too), which checks out unchanged stages' outputs from the DVC cache. One experiment, not a
    `--temp` one beside it: each re-runs kg_wcr's self-play, the costliest part of this file after the
    first `dvc repro`."""
    import mlflow

    repo, _ = quick_repo
    dvc = str(BIN / "dvc")
    commit_all(repo, pipeline_env, "quick run")
    params_before = (repo / "params.yaml").read_text()
    run([dvc, "exp", "run", "--queue", "--name", "alpha-05", "-S", "wcr.alpha=0.5"], repo, pipeline_env)
    run([dvc, "exp", "run", "--run-all"], repo, pipeline_env)
    logs = run([dvc, "queue", "logs", "alpha-05"], repo, pipeline_env)
    assert KG_WCR_ALWAYS <= stages_that_ran(logs) <= KG_WCR_DOWNSTREAM, logs
    assert experiment_params(repo, pipeline_env) == {"alpha-05": 0.5}
    assert (repo / "params.yaml").read_text() == params_before  # the workspace is left alone
    assert stages_that_ran(run([dvc, "repro", "--dry"], repo, pipeline_env)) == set()
    client = mlflow.MlflowClient(f"sqlite:///{repo}/mlflow.db")  # the copies' runs land in the project's store
    tagged = {run_.data.tags.get("dvc.exp_name") for run_ in client.search_runs(
        [e.experiment_id for e in client.search_experiments()], max_results=1000)}
    assert "alpha-05" in tagged


def test_applying_an_experiment_brings_its_outputs_back_from_the_cache(quick_repo, pipeline_env):
    """`dvc exp apply`: the point's params, reports and checkpoint in the workspace, nothing left to run."""
    repo, _ = quick_repo
    dvc = str(BIN / "dvc")
    run([dvc, "exp", "apply", "alpha-05"], repo, pipeline_env)
    assert yaml.safe_load((repo / "params.yaml").read_text())["wcr"]["alpha"] == 0.5
    assert (repo / "checkpoints/kg_wcr/model/config.json").is_file()  # the resume state is no output: not restored
    assert stages_that_ran(run([dvc, "repro", "--dry"], repo, pipeline_env)) == set()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(url: str, seconds: float) -> None:
    import httpx

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise TimeoutError(f"{url} did not answer within {seconds} s")


def test_prefect_server_worker_and_deployment_run(quick_repo, pipeline_env):
    """A real Prefect server on 127.0.0.1, a process worker, `prefect deployment run 'retrain/weekly'`."""
    repo, _ = quick_repo
    port = free_port()
    env = {**pipeline_env, "PREFECT_API_URL": f"http://127.0.0.1:{port}/api"}
    prefect = str(BIN / "prefect")
    server = subprocess.Popen([prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)], cwd=repo,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    worker = None
    try:
        wait_for(f"http://127.0.0.1:{port}/api/health", 180)
        run([prefect, "work-pool", "create", "local-process", "--type", "process"], repo, env)
        run([prefect, "--no-prompt", "deploy", "--name", "weekly"], repo, env)
        worker = subprocess.Popen([prefect, "worker", "start", "--pool", "local-process"], cwd=repo, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        output = run([prefect, "deployment", "run", "retrain/weekly", "-p", "quick=true", "--watch",
                      "--watch-interval", "2", "--watch-timeout", "900"], repo, env, timeout=1000)
        assert "Completed" in output, output
    finally:
        for process in (worker, server):  # the worker first: it talks to the server while stopping
            if process is not None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_an_evaluation_stage_asks_again_no_question_its_resume_log_holds(quick_repo, pipeline_env):
    """DVC removes a stage's outputs before it runs it, except ``persist`` ones: an evaluation's predictions, its
    resume log, are kept, so a stage run again (after a kill, or here after an edit of one record) asks no
    question the same model, settings and code answered. Without ``persist`` the edit would be gone."""
    repo, _ = quick_repo
    path = repo / "reports/eval/base/predictions/bamboogle.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records[0]["output"] += " [kept from the resume log]"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    output = run([str(BIN / "dvc"), "repro", "--single-item", "evaluate_reference@base"], repo, pipeline_env)
    assert stages_that_ran(output) == {"evaluate_reference@base"}, output
    assert "5 of 5 questions answered before by the same model, settings and code" in " ".join(output.split())
    kept = [json.loads(line) for line in path.read_text().splitlines()]
    assert kept[0]["output"].endswith(" [kept from the resume log]") and len(kept) == len(records)
