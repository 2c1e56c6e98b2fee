"""The ``retrain`` flow: every DVC stage in order, as Prefect tasks (deployed weekly by prefect.yaml).

    prefect deployment run 'retrain/weekly' -p iterations=50 -p variants='["kg_wcr"]'

Flow parameters that change knobs (``iterations``, ``quick``) apply to that run only: they are written
into params.yaml for the run, so dvc.lock records exactly what it used and unchanged stages are still
skipped, and params.yaml is restored byte for byte when the run ends, fails or is cancelled. A later
scheduled run never inherits a quick profile.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from prefect import flow, get_run_logger

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # Prefect loads this file by path; make `tasks` importable

from searchplay.pipeline import WORKSPACE_LOCK as FLOW_LOCK  # noqa: E402  `.flows.lock`: one run at a time
from tasks.stages import reproduce_stage  # noqa: E402


class WorkspaceCodeError(RuntimeError):
    """The workspace's code is not the code that would run its stages."""


def check_workspace_code(root: Path) -> None:
    """Refuse a workspace whose ``src/searchplay`` is not the installed package that runs its stages (a GPU
    image built from another commit than the checkout on its volume): dvc.lock would record the checkout's
    code for outputs that the image's code made."""
    from searchplay.io import package_digest

    source = Path(root) / "src" / "searchplay"
    if not source.is_dir():
        raise WorkspaceCodeError(f"{source} not found: the flow's root must be a searchplay checkout")
    if package_digest(source) != package_digest():  # the package alone: an outside recipe is in neither
        import searchplay

        raise WorkspaceCodeError(f"{source} differs from the installed searchplay that runs the stages "
                                 f"({Path(searchplay.__file__).parent}): check out the commit the image was built "
                                 "from, or build the image from this checkout")


@contextmanager
def one_flow_at_a_time(root: Path, name: str) -> Iterator[None]:
    """Hold the workspace for this flow run; a second one (a scheduled retrain beside an on-demand evaluation)
    waits, saying for whom. Two at once would share params.yaml, where each restores what it found when it began
    (so one run's overrides could outlive it), and dvc.lock. First the workspace's code is checked
    (``check_workspace_code``)."""
    from searchplay.io import OutputsBusyError, exclusive_outputs

    check_workspace_code(root)
    hold = ExitStack()
    try:
        hold.enter_context(exclusive_outputs(root / FLOW_LOCK, f"flow {name}"))
    except OutputsBusyError as busy:
        print(f"waiting: {busy}", flush=True)  # the flows log prints
        hold.enter_context(exclusive_outputs(root / FLOW_LOCK, f"flow {name}", wait=True))
    with hold:
        yield


def apply_overrides(root: Path, overrides: dict[str, object], removed: Sequence[str] = ()) -> None:
    """Write dotted-key overrides into params.yaml and delete the ``removed`` keys, keeping its comments (DVC's
    own YAML editor)."""
    from dvc.utils.serialize import modify_yaml

    from searchplay.config import delete_dotted, set_dotted
    from searchplay.recipes import load_params

    if not overrides and not removed:
        return
    with modify_yaml(root / "params.yaml") as tree:
        for key in removed:
            delete_dotted(tree, key, missing_ok=True)  # a quick run in a workspace that has the profile already
        for key, value in overrides.items():
            set_dotted(tree, key, value)
    load_params(root / "params.yaml")  # fail now, naming the key, rather than inside a stage


@contextmanager
def run_scoped_overrides(root: Path, overrides: dict[str, object], removed: Sequence[str] = ()) -> Iterator[None]:
    """``apply_overrides`` for the duration of the block; params.yaml is put back afterwards, whatever happens."""
    from searchplay.io import restored_afterwards

    if not overrides and not removed:  # nothing to put back: an edit made while the run lasts stays
        yield
        return
    with restored_afterwards(root / "params.yaml"):
        apply_overrides(root, overrides, removed)
        yield


def quick_profile(root: Path) -> tuple[dict[str, object], list[str]]:
    """The quick profile's (overrides, removed keys), as ``searchplay pipeline --quick`` applies them."""
    from searchplay import pipeline
    from searchplay.recipes import load_params

    return pipeline.quick_profile(root / load_params(root / "params.yaml").pipeline.quick)


def selected_variants(root: Path, variants: list[str] | None) -> list[str]:
    from searchplay.recipes import load_params

    configured = list(load_params(root / "params.yaml").pipeline.variants)
    unknown = sorted(set(variants or []) - set(configured))
    if unknown:
        raise ValueError(f"variants {unknown} are not in params.yaml pipeline.variants ({configured})")
    return variants or configured


def resolved_stages(root: Path) -> dict[str, tuple[list[str], list[str]]]:
    """Every stage of dvc.yaml as DVC resolves it from params.yaml (a foreach group gives one stage per entry,
    none for an empty one): name -> (its deps, its outs)."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return {stage.name: ([dep.def_path for dep in stage.deps], [out.def_path for out in stage.outs])
                for stage in repo.index.stages}


def producers(stages: dict[str, tuple[list[str], list[str]]]) -> dict[str, str]:
    """Output path -> the stage that writes it."""
    return {out: name for name, (_, outs) in stages.items() for out in outs}


def reference_stages(root: Path) -> list[str]:
    """``evaluate_reference@<model>`` per model of params.yaml's ``pipeline.references`` (base, the warm-starts):
    the rows every variant is compared against."""
    from searchplay.recipes import load_params

    return [f"evaluate_reference@{name}" for name in load_params(root / "params.yaml").pipeline.references]


def reference_ready(root: Path, stage: str, done: set[str]) -> bool:
    """Whether ``evaluate_reference@<model>`` can run: the stage that makes its model (warmstart for the
    warm-start, warmstart_eve@eve for the EVE warm-start) is in ``done``, or no stage makes it (the base model)."""
    from searchplay.recipes import load_params

    model_input = load_params(root / "params.yaml").pipeline.references[stage.split("@", 1)[1]]
    return producers(resolved_stages(root)).get(model_input) in (None, *done)


def run_ready_references(repo: Path, ran: dict[str, list[str]]) -> None:
    """Evaluate every reference model not yet evaluated whose model has been made (``reference_ready``)."""
    for stage in reference_stages(repo):
        if stage not in ran and reference_ready(repo, stage, set(ran)):
            ran[stage] = reproduce_stage(stage, str(repo))


def variant_prerequisites(root: Path, variant: str, done: set[str]) -> list[str]:
    """The stages between the shared ones and ``selfplay@<variant>``, in run order: the producers of its
    ``pipeline.variants`` start and weights and their own inputs, back to stages in ``done`` (eve: warmstart_eve@eve,
    eve_phase_a@eve; a one-phase variant: none)."""
    from searchplay.recipes import load_params

    stages = resolved_stages(root)
    made_by = producers(stages)
    needed: set[str] = set()
    entry = load_params(root / "params.yaml").pipeline.variants[variant]
    todo = [entry.start, entry.weights]
    while todo:
        name = made_by.get(todo.pop())
        if name is None or name in done or name in needed:
            continue
        needed.add(name)
        todo += stages[name][0]
    return [name for name in stages if name in needed]  # dvc.yaml lists a stage after those it reads


@flow(name="retrain", log_prints=True)
def retrain(variants: list[str] | None = None, iterations: int | None = None, quick: bool = False,
            root: str = str(REPO_ROOT), processes: int | None = None,
            launch_config: str | None = None) -> dict[str, list[str]]:
    """KG -> corpus -> index -> warm-start (+ base and warm-start scores) -> self-play and evaluation per
    variant -> comparison report. ``processes`` and ``launch_config``: ``pipeline.launch`` for this run (e.g. 8
    and accelerate_configs/fsdp.yaml on an 8-GPU worker; searchplay.launch)."""
    logger = get_run_logger()
    repo = Path(root)
    overrides, removed = quick_profile(repo) if quick else ({}, [])
    if iterations is not None:
        overrides["selfplay.iterations"] = iterations
    if processes is not None:
        overrides["pipeline.launch.processes"] = processes
    if launch_config is not None:
        overrides["pipeline.launch.config"] = launch_config
    with one_flow_at_a_time(repo, "retrain"), run_scoped_overrides(repo, overrides, removed):
        chosen = selected_variants(repo, variants)
        logger.info("retraining variants %s with overrides %s%s (this run only)", chosen, overrides,
                    f" and without {removed}" if removed else "")
        ran: dict[str, list[str]] = {}
        # one stage at a time, in this thread: a cancelled run's SIGTERM reaches the stage it waits on, which it
        # then stops (tasks.stages); a stage in a worker thread would go on after params.yaml was put back
        for stage in ("kg", "corpus", "index"):
            ran[stage] = reproduce_stage(stage, root)
        ran["warmstart"] = reproduce_stage("warmstart", root)  # once, shared by every variant
        run_ready_references(repo, ran)
        for variant in chosen:  # one variant at a time: each self-play run uses the whole machine
            for stage in variant_prerequisites(repo, variant, set(ran)):  # eve: its warm-start and Phase A
                ran[stage] = reproduce_stage(stage, root)
            run_ready_references(repo, ran)
            ran[f"selfplay@{variant}"] = reproduce_stage(f"selfplay@{variant}", root)
            ran[f"evaluate@{variant}"] = reproduce_stage(f"evaluate@{variant}", root)
        ran["report"] = reproduce_stage("report", root)
    return ran


if __name__ == "__main__":
    retrain()
