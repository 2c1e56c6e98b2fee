"""`searchplay pipeline --quick` leaves params.yaml as it found it: the quick values live in the DVC experiment,
so the main job that follows runs the main profile. Real DVC and git, on a one-stage pipeline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from searchplay import pipeline

DVC = str(Path(sys.executable).parent / "dvc")
PARAMS = "# the main job's size\nrows: 100    # a comment DVC's own editor would keep\nname: main\n"
# (not `size`: DVC leaves keys named size out of a run-cache key, so a stage with a `size` param and new
# values is restored from the cache of the old ones)
STAGE = ("stages:\n  count:\n    cmd: python -c \"import yaml; print(yaml.safe_load(open('params.yaml'))['rows'])\" "
         "> out.txt\n    params: [rows]\n    outs: [out.txt]\n")

pytestmark = pytest.mark.slow  # a few `dvc exp run` and `dvc repro` calls


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=60)


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "config", "user.email", "test@example.com")
    git(root, "config", "user.name", "test")
    (root / "params.yaml").write_text(PARAMS)
    (root / "params.quick.yaml").write_text("rows: 3\n")
    (root / "dvc.yaml").write_text(STAGE)
    (root / ".gitignore").write_text("/out.txt\n")
    subprocess.run([DVC, "init", "-q"], cwd=root, check=True, capture_output=True, timeout=120)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "tiny pipeline")
    return root


def test_a_quick_run_puts_params_yaml_back_and_the_main_job_then_runs_the_main_profile(repo):
    lines: list[str] = []
    ran = pipeline.run(repo, quick=True, echo=lines.append)
    assert set(ran) == {"count"}
    assert (repo / "out.txt").read_text().strip() == "3"  # the quick run's outputs stay in the workspace
    assert (repo / "params.yaml").read_text() == PARAMS  # byte for byte, comments included
    assert lines[-1].startswith("params.yaml is as it was; this run's params are in the DVC "
                                "experiment quick-")
    shown = subprocess.run([DVC, "exp", "show", "--json"], cwd=repo, check=True, capture_output=True, text=True,
                           timeout=120).stdout
    experiments = [exp for commit in json.loads(shown) for exp in commit.get("experiments") or []]
    assert [exp["name"] for exp in experiments if exp["name"].startswith("quick-")]  # the quick values live here

    assert set(pipeline.run(repo, echo=lines.append)) == {"count"}  # the main job: the stage runs again
    assert (repo / "out.txt").read_text().strip() == "100"


def test_a_failed_quick_run_puts_params_yaml_back(repo):
    (repo / "dvc.yaml").write_text(STAGE.replace("python -c", "python -c \"raise SystemExit(3)\" && python -c"))
    git(repo, "commit", "-q", "-am", "a stage that fails")
    with pytest.raises(subprocess.CalledProcessError):
        pipeline.run(repo, quick=True, echo=lambda line: None)
    assert (repo / "params.yaml").read_text() == PARAMS


def test_a_stopped_stream_stops_the_command_and_the_processes_it_started(tmp_path):
    """Ctrl-C or a cancelled flow run's SIGTERM reaches the caller of ``stream`` only: the `dvc repro` it runs,
    and the stage under it, are stopped too (SIGTERM to the group, then SIGKILL), before the caller's cleanup."""
    import os
    import sys
    import time

    from searchplay.pipeline import group_alive, stream

    script = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
              "print(child.pid, flush=True)\n"
              "time.sleep(120)\n")
    lines = stream([sys.executable, "-c", script], tmp_path, dict(os.environ))
    stage = int(next(lines))  # the command's own child, as DVC's stage is
    group = os.getpgid(stage)
    assert group != os.getpgid(0) and group_alive(group)  # a group of its own, the caller outside it
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        lines.throw(KeyboardInterrupt())
    assert time.monotonic() - started < 15  # the SIGTERM ended both; no wait for their two minutes
    assert not group_alive(group)


def test_a_missing_or_malformed_quick_profile_is_a_configuration_error_naming_it(tmp_path):
    from searchplay.config import ConfigError

    with pytest.raises(ConfigError, match=r"nofile\.yaml: no such quick profile"):
        pipeline.quick_profile(tmp_path / "nofile.yaml")
    (tmp_path / "bad.yaml").write_text("rows: [3\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: not valid YAML"):
        pipeline.quick_profile(tmp_path / "bad.yaml")


def test_a_run_while_a_flow_holds_the_workspace_is_refused_at_once(repo):
    """A Prefect flow run edits params.yaml for its duration and writes dvc.lock: a pipeline beside it would
    read the flow's overrides, or put its own params.yaml back over them, so it stops before DVC starts."""
    from searchplay.io import OutputsBusyError, exclusive_outputs

    with exclusive_outputs(repo / pipeline.WORKSPACE_LOCK, "flow retrain"), \
            pytest.raises(OutputsBusyError, match="flow retrain"):
        pipeline.run(repo, quick=True, echo=lambda line: None)
    assert (repo / "params.yaml").read_text() == PARAMS and not (repo / "out.txt").exists()


def test_the_main_job_after_a_killed_quick_run_runs_the_main_profile(repo):
    """A quick run killed outright leaves its overrides in params.yaml and the original beside it: the next
    pipeline, quick or not, puts the original back before DVC reads it."""
    (repo / ".params.yaml.before-run").write_text(PARAMS)
    (repo / "params.yaml").write_text("rows: 3\n")  # the killed quick run's overrides
    assert set(pipeline.run(repo, echo=lambda line: None)) == {"count"}
    assert (repo / "out.txt").read_text().strip() == "100" and (repo / "params.yaml").read_text() == PARAMS
    assert not (repo / ".params.yaml.before-run").exists()
