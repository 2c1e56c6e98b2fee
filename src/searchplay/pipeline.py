"""Run the DVC pipeline (the main job) from Python: ``searchplay pipeline [--quick]``.

``dvc repro`` runs every stage whose inputs changed (a second call does nothing). ``--quick`` runs
the same stages as a DVC experiment with the small overrides of ``params.quick.yaml`` (CI and a
first look on a laptop). The experiment keeps them (``dvc exp show``, ``dvc exp apply``), and params.yaml is
put back afterwards, so a later ``searchplay pipeline`` runs the main job: dvc.lock then records the quick
values, and every stage they changed runs again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import yaml

from searchplay.config import PROFILE_REMOVE, ConfigError, _flatten, has_dotted, read_params_tree
from searchplay.io import InputError, exclusive_outputs, put_back_after_a_kill, restored_afterwards

WORKSPACE_LOCK = "flows"  # `.flows.lock`: one run at a time edits params.yaml and dvc.lock (the Prefect flows too)
STAGE_LINE_PREFIXES = ("Running stage", "Stage '", "Updating lock file", "ERROR")
STAGE_START = "Running stage '"
STAGE_END = "Updating lock file"


def stage_environment() -> dict[str, str]:
    """The environment for stage commands: this interpreter's scripts first on PATH, offline defaults."""
    from searchplay.process import OFFLINE_DEFAULTS

    env = {**OFFLINE_DEFAULTS, **os.environ}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def quick_profile(path: str | Path) -> tuple[dict[str, Any], list[str]]:
    """``params.quick.yaml`` as (dotted key -> value, the dotted keys it removes); a missing or malformed file
    is a ``ConfigError`` naming it (exit 2: a retry reads the same file)."""
    if not Path(path).is_file():
        raise ConfigError(f"{path}: no such quick profile (pipeline.quick names it)")
    tree = read_params_tree(Path(path))
    removed = [str(key) for key in tree.pop(PROFILE_REMOVE, None) or []]
    return dict(_flatten(tree)), removed


def quick_overrides(path: str | Path, params_tree: dict[str, Any] | None = None) -> list[str]:
    """``params.quick.yaml`` as ``dvc exp run --set-param`` strings in Hydra's override syntax, which DVC uses:
    ``~key`` for each removed key, then ``++key=value`` (set, or add a key params.yaml leaves at its default;
    the stages' params check still refuses an unknown one). With ``params_tree`` (the params.yaml the run
    starts from) a key it already lacks is not removed again: DVC refuses that, and a workspace where an
    earlier quick run was applied lacks them."""
    values, removed = quick_profile(path)
    removed = [key for key in removed if params_tree is None or has_dotted(params_tree, key)]
    return [*(f"~{key}" for key in removed),
            *(f"++{key}={yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}"
              for key, value in values.items())]


def quick_summary(path: str | Path, variants: list[str]) -> str:
    """One line on what the quick profile trains: ``variants`` (pipeline.variants) less those ``path`` removes."""
    gone = [key.rsplit(".", 1)[1] for key in quick_profile(path)[1] if key.startswith("pipeline.variants.")]
    kept = [name for name in variants if name not in gone]
    line = f"quick profile ({Path(path).name}): trains {', '.join(kept) or 'no variant'}"
    return f"{line}; leaves out {', '.join(gone)} (`searchplay pipeline` trains every variant)" if gone else line


def dvc_command(quick: bool, quick_file: str | Path, targets: list[str], force: bool = False) -> list[str]:
    dvc = str(Path(sys.executable).parent / "dvc")
    if not quick:
        return [dvc, "repro", *(["--force"] if force else []), *targets]
    name = time.strftime("quick-%Y%m%d-%H%M%S")  # experiment names must be unique
    command = [dvc, "exp", "run", "--name", name, *(["--force"] if force else [])]
    params_file = Path(quick_file).parent / "params.yaml"
    tree = read_params_tree(params_file) if params_file.is_file() else None
    for override in quick_overrides(quick_file, tree):
        command += ["--set-param", override]
    return [*command, *targets]


def shown_command(command: list[str], quick_file: str | Path) -> str:
    """``command`` as the log shows it: a quick run's ``--set-param`` overrides, 30-odd of them, counted instead of
    listed (``params.quick.yaml`` holds them, and ``dvc exp show`` the values the experiment ran with)."""
    overrides = command.count("--set-param")
    rest = [arg for i, arg in enumerate(command) if arg != "--set-param" and command[i - 1:i] != ["--set-param"]]
    line = "$ " + " ".join(rest)
    return f"{line} (and {overrides} --set-param overrides: {Path(quick_file).name})" if overrides else line


class NotACheckoutError(InputError, RuntimeError):
    """The pipeline runs in a git checkout (DVC versions outputs against git); a retry finds the same folder."""


def ensure_dvc_repository(root: Path) -> None:
    """DVC needs a git repository with a commit; say so clearly instead of DVC's traceback."""
    if not (root / ".git").exists():
        raise NotACheckoutError(f"{root} is not a git checkout; clone the repository (DVC versions outputs "
                                "against git)")
    if not (root / ".dvc").exists():
        subprocess.run([str(Path(sys.executable).parent / "dvc"), "init", "--quiet"], cwd=root, check=True)


STOP_GRACE_S = 20.0  # a stopped run's stage gets this long after SIGTERM (Prefect's SIGKILL follows at 30 s)


def stream(command: list[str], cwd: Path, env: dict[str, str]) -> Iterator[str]:
    """Run ``command`` and yield its output lines as they come (stderr merged). Where the caller stops (Ctrl-C, a
    cancelled flow run's SIGTERM, an error), the command's whole process group is stopped first (``stop_group``):
    a ``dvc repro`` and the stage it runs would otherwise go on alone, and the caller's cleanup (params.yaml put
    back) would wait for them past the SIGKILL that follows."""
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, bufsize=1, start_new_session=True) as process:
        assert process.stdout is not None
        try:
            yield from (line.rstrip("\n") for line in process.stdout)
        except BaseException:
            stop_group(process)
            raise
    if process.returncode != 0:
        raise subprocess.CalledProcessError(process.returncode, command)


def stop_group(process: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to ``process``'s group (DVC and the stage's process: the stage ends its MLflow run KILLED and keeps
    its last checkpoint), SIGKILL to what is left of it after ``grace_s``."""
    import signal

    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            process.poll()  # reaps the leader once it exits
            if not group_alive(process.pid):
                return
            time.sleep(0.1)


def group_alive(group: int) -> bool:
    """Whether a process of ``group`` still runs (a zombie, exited and not yet reaped, does not count)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            return True
    return False


class StageClock:
    """Wall-clock seconds of each stage DVC runs, read from its output: a stage starts at its
    ``Running stage '<name>':`` line and ends at the next ``Updating lock file`` line (or the next stage)."""

    def __init__(self, now: Any = time.monotonic) -> None:
        self.now = now
        self.seconds: dict[str, float] = {}
        self._stage: str | None = None
        self._started = 0.0

    def see(self, line: str) -> None:
        if line.startswith(STAGE_START):
            self.stop()
            self._stage, self._started = line.split("'")[1], self.now()
        elif line.startswith(STAGE_END):
            self.stop()

    def stop(self) -> None:
        if self._stage is not None:
            self.seconds[self._stage] = self.now() - self._started
            self._stage = None

    def table(self) -> list[str]:
        """One line a stage, slowest first, and the total; empty when no stage ran."""
        if not self.seconds:
            return []
        width = max(len(name) for name in self.seconds)
        rows = sorted(self.seconds.items(), key=lambda item: -item[1])
        total = sum(self.seconds.values())
        return ["stage times (wall clock):",
                *(f"  {name:<{width}}  {minutes(seconds)}" for name, seconds in rows),
                f"  {'total':<{width}}  {minutes(total)}"]


def minutes(seconds: float) -> str:
    """``m:ss``, e.g. ``minutes(75.4) == '1:15'``."""
    whole = round(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def run(root: Path, quick: bool = False, quick_file: str = "params.quick.yaml", targets: list[str] | None = None,
        force: bool = False, echo: Any = print, variants: list[str] | None = None) -> dict[str, float]:
    """Run the pipeline, echoing DVC's output, then each stage's time; returns the seconds by stage. ``variants``
    (pipeline.variants) lets a quick run say first which of them it trains."""
    ensure_dvc_repository(root)
    command = dvc_command(quick, root / quick_file, targets or [], force=force)
    if quick and variants is not None:
        echo(quick_summary(root / quick_file, variants))
    echo(shown_command(command, quick_file))
    clock = StageClock()
    try:
        with exclusive_outputs(root / WORKSPACE_LOCK, "searchplay pipeline"):
            put_back_after_a_kill(root / "params.yaml")  # a killed quick run's overrides never reach this one
            with restored_afterwards(root / "params.yaml") if quick else nullcontext():
                for line in stream(command, root, stage_environment()):
                    clock.see(line)
                    echo(line)
    finally:
        clock.stop()
        for line in clock.table():
            echo(line)
    if quick:
        name = command[command.index("--name") + 1]
        echo(f"params.yaml is as it was; this run's params are in the DVC experiment {name}: "
             f"`dvc exp show`, and `dvc exp apply {name}` brings them back")
    return clock.seconds
