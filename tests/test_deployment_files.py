"""Configuration that cannot run here (Docker, GPU pools) is at least parsed and checked."""

import ast
import functools
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from searchplay.config import load_params


def test_dockerfile_lints_clean(repo_root):
    dockerfile = pytest.importorskip("dockerfile")
    commands = dockerfile.parse_file(str(repo_root / "Dockerfile"))
    kinds = [c.cmd.upper() for c in commands]
    base = commands[0].value[0]
    assert kinds[0] == "FROM" and base.startswith("nvidia/cuda:") and not base.endswith(":latest")
    assert "USER" in kinds and kinds.index("USER") < kinds.index("CMD"), "the image must not run as root"
    assert "ENTRYPOINT" not in kinds  # a Prefect worker's command (`prefect flow-run execute`) would become its args
    for command in commands:
        if command.cmd.upper() == "RUN" and "apt-get install" in command.value[0]:
            assert "--no-install-recommends" in command.value[0]
            assert "rm -rf /var/lib/apt/lists" in command.value[0]
    assert any(".[gpu]" in c.value[0] for c in commands if c.cmd.upper() == "RUN"), "installs the gpu extra"


def test_the_image_leaves_out_what_a_build_or_a_run_made_here(repo_root):
    """`COPY . .` follows the venv's install: a host's .venv copied in would replace the image's, and a run's
    outputs or stores do not belong in an image."""
    ignored = (repo_root / ".dockerignore").read_text().split()
    assert {".venv/", "checkpoints/", "mlflow.db", ".dvc/cache/", "data/*"} <= set(ignored)


def test_the_gpu_deployments_run_in_a_checkout_that_outlives_the_container(repo_root):
    """The flow is loaded from, and runs in, a checkout on a volume (its root): a container's own /app would lose
    dvc.lock, the checkpoints and the registered models' folders with the container."""
    gpu = yaml.safe_load((repo_root / "prefect.gpu.yaml").read_text())
    pinned = next(line for line in (repo_root / "pyproject.toml").read_text().splitlines() if '"prefect==' in line)
    for spec in (gpu, yaml.safe_load((repo_root / "prefect.yaml").read_text())):
        assert spec["prefect-version"] == pinned.split("==")[1].split('"')[0]
    (step,) = gpu["pull"]
    workspace = step["prefect.deployments.steps.set_working_directory"]["directory"]
    for deployment in gpu["deployments"]:
        assert deployment["parameters"]["root"] == workspace, deployment["name"]
        assert not Path(deployment["parameters"].get("launch_config") or "x").is_absolute()  # lands in dvc.lock
    docker = next(d for d in gpu["deployments"] if d["work_pool"]["name"] == "gpu-docker")
    assert any(volume.endswith(f":{Path(workspace).parent}") for volume in docker["work_pool"]["job_variables"]
               ["volumes"])


def test_prefect_deployments_point_at_real_flows(repo_root):
    spec = yaml.safe_load((repo_root / "prefect.yaml").read_text())
    gpu = yaml.safe_load((repo_root / "prefect.gpu.yaml").read_text())
    names = {d["name"] for d in spec["deployments"]}
    assert names == {"weekly", "on-demand"}  # `deploy --all` here must only need the local process pool
    assert {d["work_pool"]["name"] for d in spec["deployments"]} == {"local-process"}
    assert {d["name"] for d in gpu["deployments"]} == {"weekly-gpu-docker", "weekly-gpu-k8s"}
    for deployment in spec["deployments"] + gpu["deployments"]:
        path, function = deployment["entrypoint"].split(":")
        tree = ast.parse((repo_root / path).read_text())
        flows = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert function in flows, f"{deployment['entrypoint']} does not define {function}"
        arguments = {a.arg for a in flows[function].args.args}
        assert set(deployment.get("parameters", {})) <= arguments, deployment["name"]
    weekly = next(d for d in spec["deployments"] if d["name"] == "weekly")
    assert weekly["work_pool"]["name"] == "local-process"
    assert weekly["schedules"][0]["cron"].split()[-1] == "1"  # weekly


def test_dvc_stages_call_one_searchplay_verb_each(repo_root):
    from typer.testing import CliRunner

    from searchplay.cli import app

    stages = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    assert {"kg", "corpus", "index", "warmstart", "selfplay", "evaluate", "evaluate_reference", "report"} <= set(stages)
    for name, stage in stages.items():
        body = stage.get("do", stage)
        command = body["cmd"]
        assert command.startswith("searchplay "), f"stage {name}: {command}"
        verb = command.split()[1]
        assert CliRunner().invoke(app, [verb, "--help"]).exit_code == 0, f"stage {name}: no verb {verb!r}"


def test_every_params_key_a_stage_names_is_written_in_params_yaml(repo_root):
    """DVC reads params.yaml itself: a key the config defaults but the file lacks fails `dvc repro`."""
    raw = yaml.safe_load((repo_root / "params.yaml").read_text())
    params = load_params(repo_root / "params.yaml")

    def present(key: str) -> bool:
        node = raw
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    named = set()
    for stage in yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"].values():
        named |= {key for key in stage.get("do", stage).get("params", []) if "${" not in key}
    for entry in params.pipeline.variants.values():
        named |= set(entry.params)
    assert sorted(key for key in named if not present(key)) == []


def test_selfplay_stages_depend_on_whole_sections(repo_root):
    """The self-play stages depend on the whole selfplay section, and each variant adds only its method's
    section (wcr, gdcr, ssp, eve), so changing wcr.alpha re-runs kg_wcr's stages alone."""
    params = load_params(repo_root / "params.yaml")
    stages = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    for stage in (stages["selfplay"]["do"], stages["eve_phase_a"]["do"]):
        assert "selfplay" in stage["params"]
        assert not [key for key in stage["params"] if str(key).startswith("selfplay.")]
    sections = {key.split(".")[0] for entry in params.pipeline.variants.values() for key in entry.params}
    assert {"wcr", "gdcr", "ssp", "eve"} <= sections
    assert not {"wcr", "gdcr", "ssp", "eve"} & set(stages["selfplay"]["do"]["params"])  # never shared


def test_eve_phase_a_lists_every_shared_input_of_the_self_play_stage(repo_root):
    """Phase A runs the shared self-play loop, so whatever selfplay@ reads it reads (the held-out curve's
    benchmark with selfplay.eval_every, its seed), but for the variant's own entries, the launcher (the EVE
    phases run in one process) and waypoint matching (EVE's document seeds have no waypoints)."""
    stages = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    shared, phase_a = stages["selfplay"]["do"], stages["eve_phase_a"]["do"]
    assert not [d for d in shared["deps"] if d not in phase_a["deps"] and not d.startswith(("src/", "${item."))]
    assert not [key for key in shared["params"] if key not in phase_a["params"] and not key.startswith("${item.")
                and key not in ("pipeline.launch", "wcr.casefold")]


def test_the_eve_warm_start_depends_on_the_eve_keys_it_swaps_into_the_warm_start(repo_root):
    """warmstart_eve@eve trains the shared warm-start's code on ``eve.warmstart_steps`` steps: a changed count
    re-runs it (``eve_params`` swaps it in; the two folders it swaps in are the stage's outputs)."""
    from searchplay.recipes import load_params as load_recipe_params
    from searchplay.recipes.eve.warmstart import eve_params

    params = load_recipe_params(repo_root / "params.yaml")
    swapped = eve_params(params).warmstart
    changed = {key for key, value in swapped.model_dump().items() if value != getattr(params.warmstart, key)}
    assert changed == {"steps", "out_dir", "reports_dir"}
    listed = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]["warmstart_eve"]["do"]
    assert "eve.warmstart_steps" in listed["params"]
    outs = [out if isinstance(out, str) else next(iter(out)) for out in listed["outs"]]
    assert swapped.out_dir in outs and any(out.startswith(f"{swapped.reports_dir}/") for out in outs)


def test_quick_profile_only_overrides_known_keys(repo_root, tmp_path):
    from searchplay.config import delete_dotted
    from searchplay.pipeline import quick_overrides

    overrides = quick_overrides(repo_root / "params.quick.yaml")
    removed = [item[1:] for item in overrides if item.startswith("~")]  # Hydra's syntax, as DVC applies it
    assert removed and all("=" not in key for key in removed)
    tree = yaml.safe_load((repo_root / "params.yaml").read_text())
    for key in removed:
        delete_dotted(tree, key)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tree))
    values = dict(item.removeprefix("++").split("=", 1) for item in overrides if not item.startswith("~"))
    params = load_params(tmp_path / "params.yaml", {k: yaml.safe_load(v) for k, v in values.items()})
    assert list(params.pipeline.variants) == ["kg_wcr"] and params.pipeline.recipe_stages == []


def test_dvc_resolves_the_quick_profile_to_kg_wcr_and_its_stages_alone(repo_root, tmp_path):
    """A variant's stages are foreach groups over params (pipeline.variants, recipe_stages, references), so the
    quick profile's removals drop every stage of the variants it leaves out; the full params keep them all."""
    import shutil

    from dvc.repo import Repo

    from flows.retrain import apply_overrides, quick_profile, resolved_stages

    for name in ("dvc.yaml", "params.yaml", "params.quick.yaml"):
        shutil.copy(repo_root / name, tmp_path / name)
    Repo.init(str(tmp_path), no_scm=True).close()
    every = set(resolved_stages(tmp_path))
    assert {"warmstart_eve@eve", "eve_phase_a@eve", "selfplay@eve", "evaluate_reference@warmstart_eve",
            "selfplay@ssp", "selfplay@gdcr", "evaluate@gdcr"} <= every and len(every) == 18
    apply_overrides(tmp_path, *quick_profile(tmp_path))
    assert set(resolved_stages(tmp_path)) == {
        "kg", "corpus", "index", "warmstart", "selfplay@kg_wcr", "evaluate_reference@base",
        "evaluate_reference@warmstart", "evaluate@kg_wcr", "report"}


def test_flows_expose_their_parameters():
    import sys

    from flows.retrain import retrain

    assert {"iterations", "processes", "launch_config"} <= set(inspect.signature(retrain.fn).parameters)
    assert "flows.retrain" in sys.modules


def test_fanout_flow_builds_per_benchmark_commands_and_a_dask_runner():
    from flows.fanout import dask_runner, evaluate_command, evaluate_fanout

    one = evaluate_command("kg_wcr", "nq")
    assert one[1:] == ["evaluate", "--variant", "kg_wcr", "--benchmarks", "nq", "--no-track", "--replace"]
    assert evaluate_command("kg_wcr", None, ["nq", "fanoutqa"])[1:] == [
        "evaluate", "--variant", "kg_wcr", "--benchmarks", "nq,fanoutqa", "--replace"]  # what the tasks ran
    local = dask_runner(3)
    assert local.cluster_kwargs["n_workers"] == 3 and local.cluster_kwargs["threads_per_worker"] == 1
    assert dask_runner(2, "tcp://scheduler:8786").address == "tcp://scheduler:8786"
    assert evaluate_fanout.with_options(task_runner=local).task_runner is local


def test_accelerate_configs_parse(repo_root):
    """Every config loads through accelerate's own parser; CPU, one GPU, DDP and FSDP2 are there (no DeepSpeed:
    the trainer refuses it, docs/scale.md)."""
    from accelerate.commands.config.config_args import ClusterConfig

    configs = {p.stem: ClusterConfig.from_yaml_file(str(p)) for p in (repo_root / "accelerate_configs").glob("*.yaml")}
    kinds = {name: str(config.distributed_type).split(".")[-1] for name, config in configs.items()}
    assert kinds == {"cpu": "NO", "single_gpu": "NO", "ddp": "MULTI_GPU", "fsdp": "FSDP"}
    assert all(configs[name].num_processes >= 2 for name in ("ddp", "fsdp"))
    assert configs["fsdp"].fsdp_config["fsdp_version"] == 2  # the only sharding PolicyTrainer runs


def test_quick_profile_becomes_a_dvc_experiment(repo_root):
    from searchplay.pipeline import dvc_command

    command = dvc_command(True, repo_root / "params.quick.yaml", [])
    assert command[1:3] == ["exp", "run"] and command[4].startswith("quick-")
    assert "++selfplay.iterations=1" in command and "++evaluate.benchmarks=[bamboogle, nq, kg_heldout]" in command
    assert "++selfplay.moments_on_disk=false" in command  # a key params.yaml leaves at its default
    assert dvc_command(False, repo_root / "params.quick.yaml", [])[1:] == ["repro"]
    assert command.index("~pipeline.variants.eve") < command.index("++pipeline.recipe_stages=[]")


def test_the_log_counts_a_quick_runs_overrides_instead_of_listing_them(repo_root):
    from searchplay.pipeline import dvc_command, quick_overrides, shown_command

    command = dvc_command(True, repo_root / "params.quick.yaml", ["report"])
    line = shown_command(command, repo_root / "params.quick.yaml")
    count = len(quick_overrides(repo_root / "params.quick.yaml"))
    assert line.endswith(f" exp run --name {command[4]} report (and {count} --set-param overrides: "
                         "params.quick.yaml)")
    assert "++" not in line and "~" not in line
    main = dvc_command(False, repo_root / "params.quick.yaml", ["--force"])
    assert shown_command(main, "params.quick.yaml") == "$ " + " ".join(main)


def test_a_second_quick_run_does_not_remove_what_the_first_removed(repo_root):
    """After `make run-quick` the workspace's params.yaml lacks the removed variants; DVC refuses to delete a
    missing key, so the next quick run must not ask it to (measured: it failed before any stage)."""
    from searchplay.config import delete_dotted
    from searchplay.pipeline import quick_overrides

    tree = yaml.safe_load((repo_root / "params.yaml").read_text())
    full = quick_overrides(repo_root / "params.quick.yaml", tree)
    assert "~pipeline.variants.ssp" in full
    for key in [item[1:] for item in full if item.startswith("~")]:
        delete_dotted(tree, key)
    again = quick_overrides(repo_root / "params.quick.yaml", tree)
    assert not [item for item in again if item.startswith("~")]
    assert again == [item for item in full if not item.startswith("~")]


def test_a_quick_run_says_which_variants_it_trains(repo_root, tmp_path):
    from searchplay.pipeline import quick_summary

    assert quick_summary(repo_root / "params.quick.yaml", ["ssp", "kg_wcr", "gdcr", "eve"]) == (
        "quick profile (params.quick.yaml): trains kg_wcr; leaves out ssp, gdcr, eve (`searchplay pipeline` trains "
        "every variant)")
    (tmp_path / "every.yaml").write_text("selfplay:\n  iterations: 1\n")
    assert quick_summary(tmp_path / "every.yaml", ["ssp", "kg_wcr"]) == "quick profile (every.yaml): trains ssp, kg_wcr"


def test_stage_clock_times_each_stage_from_dvc_output():
    from searchplay.pipeline import StageClock

    ticks = iter([0.0, 75.4, 80.0, 200.0])
    clock = StageClock(now=lambda: next(ticks))
    for line in ["Running stage 'kg':", "> searchplay kg extract", "Updating lock file 'dvc.lock'",
                 "Stage 'corpus' didn't change, skipping", "Running stage 'index':", "Updating lock file 'dvc.lock'"]:
        clock.see(line)
    assert clock.seconds == {"kg": 75.4, "index": 120.0}
    assert clock.table() == ["stage times (wall clock):", "  index  2:00", "  kg     1:15", "  total  3:15"]
    assert StageClock().table() == []


def test_flow_overrides_apply_to_the_run_only(repo_root, tmp_path):
    """`prefect deployment run 'retrain/weekly' -p quick=true` must not leave the quick profile in params.yaml
   : during the run the file has it, afterwards it is byte-identical, even after a failure."""
    import shutil

    from flows.retrain import quick_profile, run_scoped_overrides

    shutil.copy(repo_root / "params.yaml", tmp_path / "params.yaml")
    shutil.copy(repo_root / "params.quick.yaml", tmp_path / "params.quick.yaml")
    original = (tmp_path / "params.yaml").read_bytes()
    values, removed = quick_profile(tmp_path)
    overrides = {**values, "selfplay.iterations": 7}
    with run_scoped_overrides(tmp_path, overrides, removed):
        during = load_params(tmp_path / "params.yaml")
        assert during.selfplay.iterations == 7 and list(during.pipeline.variants) == ["kg_wcr"]
    assert (tmp_path / "params.yaml").read_bytes() == original
    with run_scoped_overrides(tmp_path, overrides, removed), run_scoped_overrides(tmp_path, overrides, removed):
        assert list(load_params(tmp_path / "params.yaml").pipeline.variants) == ["kg_wcr"]  # on params that have it
    assert (tmp_path / "params.yaml").read_bytes() == original
    with pytest.raises(RuntimeError, match="stage failed"), run_scoped_overrides(tmp_path, overrides, removed):
        raise RuntimeError("stage failed")
    assert (tmp_path / "params.yaml").read_bytes() == original


def test_on_demand_evaluation_can_force_a_real_re_run():
    from flows.evaluate import evaluate
    from tasks.stages import repro_command

    assert inspect.signature(evaluate.fn).parameters["force"].default is False
    assert repro_command("evaluate@ssp")[1:] == ["repro", "--single-item", "evaluate@ssp"]
    assert repro_command("evaluate@ssp", force=True)[1:] == ["repro", "--single-item", "--force", "evaluate@ssp"]


def test_on_demand_evaluation_re_scores_the_reference_models_too(repo_root):
    """A forced re-evaluation (e.g. a new judge) must re-score base and warm-start as well, or the report
    would compare rows judged differently."""
    from flows.evaluate import evaluation_stages

    references = ["evaluate_reference@base", "evaluate_reference@warmstart", "evaluate_reference@warmstart_eve"]
    assert evaluation_stages(repo_root, ["kg_wcr"]) == [*references, "evaluate@kg_wcr"]
    every = evaluation_stages(repo_root, None)
    assert every[:3] == references
    assert {"evaluate@ssp", "evaluate@kg_wcr", "evaluate@gdcr", "evaluate@eve"} <= set(every[2:])


def test_the_retrain_flow_runs_a_variants_own_stages_before_its_self_play(repo_root):
    from flows.retrain import variant_prerequisites

    shared = {"kg", "corpus", "index", "warmstart"}
    assert variant_prerequisites(repo_root, "eve", shared) == ["warmstart_eve@eve", "eve_phase_a@eve"]
    assert variant_prerequisites(repo_root, "kg_wcr", shared) == []
    assert variant_prerequisites(repo_root, "eve", shared | {"warmstart_eve@eve"}) == ["eve_phase_a@eve"]


def test_the_retrain_flow_evaluates_a_reference_model_once_its_stage_has_made_it(repo_root):
    from flows.retrain import reference_ready

    shared = {"kg", "corpus", "index", "warmstart"}
    assert reference_ready(repo_root, "evaluate_reference@base", set())
    assert reference_ready(repo_root, "evaluate_reference@warmstart", shared)
    assert not reference_ready(repo_root, "evaluate_reference@warmstart", {"kg"})
    assert not reference_ready(repo_root, "evaluate_reference@warmstart_eve", shared)
    assert reference_ready(repo_root, "evaluate_reference@warmstart_eve", shared | {"warmstart_eve@eve"})


def test_the_architecture_page_shows_every_stage_dvc_runs(repo_root):
    """docs/architecture.md's data flow names every stage of dvc.yaml, each foreach item as ``@<item>``."""
    stages = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    page = (repo_root / "docs" / "architecture.md").read_text()
    flow = page[page.index("## Data flow"):page.index("## Package floors")]
    params = yaml.safe_load((repo_root / "params.yaml").read_text())
    for name, body in stages.items():
        items = body.get("foreach")  # "${pipeline.<key>}": that params entry's keys or items
        items = list(functools.reduce(dict.get, items[2:-1].split("."), params)) if isinstance(items, str) else []
        missing = [f"{name}@{item}" for item in items if f"@{item}" not in flow] if items else (
            [] if f"[ {name} ]" in flow else [name])
        assert not missing, f"docs/architecture.md's data flow does not show {missing}"
        assert not items or f"[ {name}@" in flow, f"docs/architecture.md's data flow does not show {name}@..."


def test_every_code_path_a_stage_lists_exists(repo_root):
    """A moved module must move in dvc.yaml too, or `dvc repro` fails at that stage (as it once did for report)."""
    stages = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    listed = {dep for stage in stages.values() for dep in stage.get("do", stage).get("deps", [])
              if isinstance(dep, str) and dep.startswith("src/")}
    assert listed and sorted(dep for dep in listed if not (repo_root / dep).exists()) == []


def test_stages_that_read_the_index_depend_on_its_content_fingerprint(repo_root):
    """LanceDB names its files by random UUIDs, so the index folder's hash changes on every build; a stage
    that depended on the folder would re-run after a rebuild from the same passages, and the folder as an output
    would change dvc.lock on every fresh run."""
    from searchplay.retrieval.index import fingerprint_path

    stages = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    fingerprint = str(fingerprint_path("data/index"))
    readers = {name for name, stage in stages.items() if fingerprint in stage.get("do", stage).get("deps", [])}
    on_folder = {name for name, stage in stages.items() if "data/index" in stage.get("do", stage).get("deps", [])}
    assert stages["index"]["outs"] == [fingerprint]  # the folder is rebuilt where missing (rebuild_if_stale)
    assert on_folder == set() and {"warmstart", "warmstart_eve", "eve_phase_a", "selfplay", "evaluate"} <= readers
    # how an ANN index is searched is read per query and is in no fingerprint: each reader lists it
    for name in readers:
        assert {"index.nprobes", "index.refine_factor"} <= set(stages[name].get("do", stages[name])["params"]), name


def test_the_outputs_a_killed_stage_resumes_from_are_kept_between_runs(repo_root):
    """DVC deletes an output before it runs its stage unless it is ``persist``; the warm-start folders hold what a
    killed run continues from, and the self-play stages are told to resume only their own. A self-play run's resume
    state is no output at all: DVC neither hashes, caches nor deletes it, and a clone without it is not out of date.
    What DVC caches is what a later stage reads: the exported final model, and EVE's hand-off set."""
    stages = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]

    def outs(name: str) -> dict[str, dict]:
        entries = stages[name].get("do", stages[name])["outs"]
        return {next(iter(o)) if isinstance(o, dict) else o: next(iter(o.values())) if isinstance(o, dict) else {}
                for o in entries}

    def persisted(name: str) -> set[str]:
        return {path for path, options in outs(name).items() if options.get("persist")}

    def cached(name: str) -> set[str]:
        return {path for path, options in outs(name).items() if options.get("cache", True)}

    assert persisted("warmstart") == {"checkpoints/warmstart"}
    assert persisted("warmstart_eve") == {"checkpoints/warmstart_eve"}
    assert persisted("eve_phase_a") == {"reports/selfplay/eve_phase_a/questions.jsonl"}
    assert persisted("selfplay") == {"reports/selfplay/${key}/questions.jsonl"}
    assert cached("selfplay") == {"checkpoints/${key}/model"}
    assert cached("eve_phase_a") == {"checkpoints/eve_phase_a/solver_set.jsonl"}
    every_out = [path for name in stages for path in outs(name)]
    assert not [path for path in every_out if "resume" in path or path.rstrip("/") in (
        "checkpoints/${key}", "checkpoints/eve_phase_a")]  # no output holds a resume state
    assert "checkpoints/${key}/model" in stages["evaluate"]["do"]["deps"]
    assert yaml.safe_load((repo_root / "params.yaml").read_text())["pipeline"]["variants"]["eve"]["start"] == (
        "checkpoints/eve_phase_a/solver_set.jsonl")
    for name in ("eve_phase_a", "selfplay"):
        assert stages[name].get("do", stages[name])["cmd"].endswith("--resume-if-unchanged")


def test_the_flows_read_params_with_every_recipe_section(repo_root):
    """A Prefect worker runs the flow in a fresh interpreter, where no CLI has loaded the recipes: the flow's
    params reads must know a recipe's section (``eve``) rather than call it an unknown key."""
    code = ("from pathlib import Path; from flows.retrain import quick_profile, selected_variants; "
            "root = Path('.'); print(sorted(selected_variants(root, None)), bool(quick_profile(root)[0]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=repo_root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "'eve'" in done.stdout and "True" in done.stdout


def test_a_forced_evaluation_removes_the_predictions_dvc_keeps_even_under_force(tmp_path):
    """The predictions are a ``persist`` output (the resume log), which ``dvc repro --force`` keeps: the forced
    on-demand evaluation removes them first, so every question is answered again (a new judge, say)."""
    from tasks.stages import remove_saved_answers

    dvc_yaml = {"stages": {"evaluate": {"foreach": ["base"], "do": {
        "cmd": "true", "outs": [{"reports/eval/${item}/predictions": {"cache": False, "persist": True}},
                                {"reports/eval/${item}/metrics.json": {"cache": False}},
                                {"reports/eval/${item}/pool.jsonl": {"cache": False, "persist": True}}]}}}}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(dvc_yaml))
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=tmp_path, check=True)
    predictions = tmp_path / "reports/eval/base/predictions"
    predictions.mkdir(parents=True)
    (predictions / "nq.jsonl").write_text('{"id": "1"}\n')
    (tmp_path / "reports/eval/base/metrics.json").write_text("{}")
    (tmp_path / "reports/eval/base/pool.jsonl").write_text("{}\n")  # another persisted output: not answers
    assert remove_saved_answers("evaluate@base", tmp_path) == [predictions]
    assert not predictions.exists() and (tmp_path / "reports/eval/base/metrics.json").exists()  # DVC's to remove
    assert (tmp_path / "reports/eval/base/pool.jsonl").exists()
    assert remove_saved_answers("evaluate@base", tmp_path) == []


def test_a_failed_stage_carries_its_own_exit_code_to_the_retry_condition(tmp_path):
    """`dvc repro` exits 255 whatever its stage's code: read from DVC's output, a stage's exit 2 (an input a retry
    reads the same way) is not retried, its exit 1 is."""
    from searchplay.pipeline import stream
    from tasks.stages import retry_unless_deterministic, stage_exit_code

    stages = {f"exit{code}": {"cmd": f"sh -c 'echo failing >&2; exit {code}'"} for code in (1, 2)}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=tmp_path, check=True)
    dvc = str(Path(sys.executable).parent / "dvc")
    for code in (1, 2):
        lines = []
        with pytest.raises(subprocess.CalledProcessError) as failed:
            lines.extend(stream([dvc, "repro", "--single-item", f"exit{code}"], tmp_path, dict(os.environ)))
        assert failed.value.returncode == 255 and stage_exit_code(lines, 255) == code
        state = type("State", (), {"data": subprocess.CalledProcessError(stage_exit_code(lines, 255), "dvc")})
        assert retry_unless_deterministic(None, None, state) is (code == 1)
    assert stage_exit_code(["ERROR: unexpected error"], 255) == 255  # DVC failed before the command


def test_a_second_flow_run_on_the_workspace_waits_for_the_first(tmp_path, capsys):
    """Two flow runs at once would share params.yaml (each restores what it found) and dvc.lock: the second waits,
    naming the first, and goes on once it ends."""
    import threading

    import searchplay
    from flows.retrain import one_flow_at_a_time

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "searchplay").symlink_to(Path(searchplay.__file__).parent)  # the code that runs it
    entered = threading.Event()

    def second() -> None:
        with one_flow_at_a_time(tmp_path, "evaluate"):
            entered.set()

    with one_flow_at_a_time(tmp_path, "retrain"):
        waiting = threading.Thread(target=second)
        waiting.start()
        assert not entered.wait(1.0)  # held while the first runs
    assert entered.wait(30)
    waiting.join()
    said = capsys.readouterr().out
    assert "waiting:" in said and "`searchplay flow retrain`" in said  # whom it waited for


def test_a_flow_refuses_a_workspace_whose_code_is_not_the_installed_one(tmp_path, monkeypatch):
    """On a GPU worker the image's searchplay runs the stages of a checkout on a volume: where the two differ,
    dvc.lock would record one code for outputs the other made, so the flow stops before any stage."""
    import shutil

    import searchplay
    from flows.retrain import WorkspaceCodeError, check_workspace_code, one_flow_at_a_time

    with pytest.raises(WorkspaceCodeError, match="the flow's root must be a searchplay checkout"):
        check_workspace_code(tmp_path)
    source = tmp_path / "src" / "searchplay"
    shutil.copytree(Path(searchplay.__file__).parent, source, ignore=shutil.ignore_patterns("__pycache__"))
    check_workspace_code(tmp_path)  # the same files: a checkout of the image's commit
    monkeypatch.setenv("SEARCHPLAY_RECIPES", "tests.recipes")  # a recipe from outside is in neither side
    check_workspace_code(tmp_path)
    (source / "io.py").write_text((source / "io.py").read_text() + "\n# another commit\n")
    with pytest.raises(WorkspaceCodeError, match="differs from the installed searchplay"), \
            one_flow_at_a_time(tmp_path, "retrain"):
        pass
    assert not (tmp_path / ".flows.lock").exists()  # refused before it held the workspace
