"""Per-iteration checkpoints that survive a kill at any moment: a run's resume state, never a model to read.

Layout under ``<selfplay.checkpoint_dir>/<run>/resume/`` (the run's final model, a Hugging Face folder exported once
at its end, is ``<run>/model/`` beside it: ``searchplay.selfplay.loop.export_model``)::

    iter_000003/            a complete checkpoint (only ever created by renaming a finished .partial)
      trainer/              PolicyTrainer.save: weights and optimizer as torch.distributed.checkpoint shards (one
                            file per process under FSDP), scheduler and step, each process's RNG states
      state.json            iteration, data cursor, replay buffer, loop RNG, metrics history (written last)
      run_state.json        what two runs with the same seed do not share: the MLflow run id and the
                            history's durations (``.dvcignore``d, as the global random states beside the weights)
    iter_000004.partial/    the iteration being written; ignored and removed on resume
    latest                  text file naming the newest complete checkpoint (updated atomically)
    resume_inputs.json      what the run started from (``searchplay.selfplay.inputs``)

A checkpoint is written into ``.partial``, flushed, renamed (atomic on POSIX), then ``latest`` is
replaced atomically, then old checkpoints beyond ``keep`` are removed. A kill anywhere leaves the
previous complete checkpoint intact, so a resume loses at most the iteration in flight.

A full disk is an ``OSError`` ENOSPC naming the folder (one line from the CLI, exit 2), never a library's
stream error: a save that the newest checkpoint's size says will not fit stops before writing, and a write
that fails with the disk (nearly) full removes its ``.partial`` and says so. The previous checkpoint stays.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from searchplay.io import InputError, atomic_write, write_json
from searchplay.model_paths import CHECKPOINT_STATE, complete_checkpoints
from searchplay.selfplay.distributed import Processes
from searchplay.timings import split_timings

log = logging.getLogger(__name__)

STATE_FILE = CHECKPOINT_STATE
RUN_STATE_FILE = "run_state.json"  # .dvcignore names it: a checkpoint folder's hash is the same for the same seed
RUN_KEYS = ("mlflow_run_id",)  # state keys that name this run rather than what it computed
LATEST_FILE = "latest"
LOW_SPACE_BYTES = 256 * 2**20  # a write that fails with less free than this failed for the disk


def split_run_state(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the run computed, what only this run has): ``RUN_KEYS``, each history row's durations
    (``searchplay.timings.is_timing``) and those of ``extra`` go to the second.

    >>> state = {"iteration": 1, "mlflow_run_id": "ab", "history": [{"loss": 1, "time/solve_s": 9}]}
    >>> kept, run = split_run_state(state)
    >>> kept, run
    ({'iteration': 1, 'history': [{'loss': 1}]}, {'mlflow_run_id': 'ab', 'history_timings': [{'time/solve_s': 9}]})
    >>> merge_run_state(kept, run) == state
    True
    """
    kept = {key: value for key, value in state.items() if key not in RUN_KEYS}
    run = {key: state[key] for key in RUN_KEYS if key in state}
    if "history" in state:
        rows = [split_timings(row) for row in state["history"]]
        kept["history"] = [results for results, _ in rows]
        run["history_timings"] = [timings for _, timings in rows]
    if "extra" in state:
        kept["extra"], run["extra_timings"] = split_timings(state["extra"])
    return kept, run


def merge_run_state(kept: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """``split_run_state`` undone; without a run state (a folder DVC checked out) the history has no durations
    and ``mlflow_run_id`` is None."""
    state = {**kept, **{key: run.get(key) for key in RUN_KEYS}}
    timings = run.get("history_timings") or []
    if "history" in kept and len(timings) == len(kept["history"]):
        state["history"] = [{**row, **extra} for row, extra in zip(kept["history"], timings, strict=True)]
    if "extra" in kept:
        state["extra"] = {**kept["extra"], **run.get("extra_timings", {})}
    return state


class CheckpointError(InputError, RuntimeError):
    """A checkpoint folder that cannot be used; the message says which and what to do."""


def checkpoint_name(iteration: int) -> str:
    return f"iter_{iteration:06d}"


def _fsync_tree(folder: Path) -> None:
    """Flush every file and the folder entries to disk (a rename must not expose unwritten data)."""
    for path in sorted(folder.rglob("*"), reverse=True):
        if path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointManager:
    """Atomic save, discovery of the newest complete checkpoint, and pruning to the last ``keep``."""

    def __init__(self, root: str | Path, keep: int = 2, processes: Processes | None = None):
        if keep < 1:
            raise ValueError(f"keep must be >= 1 (the checkpoint a resume needs); got {keep}")
        self.root = Path(root)
        self.keep = keep
        self.processes = processes or Processes()  # several: ``write`` is collective, the rest is the main's

    def complete(self) -> list[tuple[int, Path]]:
        """Complete checkpoints (renamed and holding a readable state.json), oldest first."""
        return complete_checkpoints(self.root)

    def latest(self) -> Path | None:
        """The newest complete checkpoint (the ``latest`` pointer is a convenience; the folders decide)."""
        complete = self.complete()
        return complete[-1][1] if complete else None

    def remove_partials(self) -> list[Path]:
        """Delete folders left by a killed save (``*.partial``); returns what was removed."""
        removed = []
        if self.root.is_dir():
            for path in self.root.glob("iter_*.partial"):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        return removed

    def clear(self) -> list[Path]:
        """Delete everything under ``root`` (the checkpoints of another run); returns what was removed."""
        removed = sorted(self.root.iterdir()) if self.root.is_dir() else []
        for path in removed:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        return removed

    def save(self, iteration: int, state: dict[str, Any], write: Callable[[Path], None]) -> Path:
        """Write a checkpoint for ``iteration``: ``write(folder)`` stores the model and trainer files, then
        ``state`` goes to state.json, then the folder is renamed into place and ``latest`` updated."""
        final = self.root / checkpoint_name(iteration)
        partial = final.with_name(final.name + ".partial")
        main = self.processes.is_main
        if main:
            self.root.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(partial, ignore_errors=True)
        self.check_space(partial)  # every process: none may wait at the barrier for one that stopped
        if main:
            partial.mkdir()
        self.processes.barrier()
        try:
            write(partial)
        except (OSError, RuntimeError) as exc:  # torch.save reports a full disk as "basic_ios::clear: iostream error"
            full = getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT)
            full = full or _free_bytes(self.root) < LOW_SPACE_BYTES
            if main:
                shutil.rmtree(partial, ignore_errors=True)
            if not full:
                raise
            raise OSError(errno.ENOSPC, f"the disk filled while writing checkpoint {final.name} ({exc}); the "
                          "previous checkpoint is intact (--resume continues from it)", str(self.root)) from exc
        if not main:
            self.processes.barrier()  # wait until the main process has renamed the folder into place
            return final
        kept, run = split_run_state(state)
        write_json(partial / RUN_STATE_FILE, run)
        write_json(partial / STATE_FILE, kept)  # last: a folder with a readable state.json is complete
        _fsync_tree(partial)
        if final.exists():  # the same iteration completed before a kill that preceded the pointer update
            stale = final.with_name(final.name + ".stale")
            shutil.rmtree(stale, ignore_errors=True)
            final.rename(stale)
            shutil.rmtree(stale, ignore_errors=True)
        partial.rename(final)
        _fsync_dir(self.root)
        with atomic_write(self.root / LATEST_FILE) as handle:
            handle.write(final.name + "\n")
        self.prune()
        self.processes.barrier()
        return final

    def check_space(self, partial: Path) -> None:
        """Raise ENOSPC before writing when the free space under ``root`` is less than the newest complete
        checkpoint's size (the next one is as large: the same model, optimizer and a longer history)."""
        latest = self.latest()
        if latest is None:
            return
        needed, free = _tree_bytes(latest), _free_bytes(self.root)
        if free < needed:
            raise OSError(errno.ENOSPC, f"checkpoint {partial.name.removesuffix('.partial')} needs about "
                          f"{needed / 2**30:.2f} GiB (the size of {latest.name}) and {free / 2**30:.2f} GiB is free",
                          str(self.root))

    def prune(self) -> None:
        """Keep the newest ``keep`` complete checkpoints; never the one ``latest`` names."""
        complete = self.complete()
        pointer = read_latest_pointer(self.root)
        for _, path in complete[:-self.keep]:
            if pointer is not None and path.name == pointer.name:
                continue
            shutil.rmtree(path, ignore_errors=True)


def _tree_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _free_bytes(folder: Path) -> int:
    return shutil.disk_usage(folder).free


def read_state(checkpoint: Path) -> dict[str, Any]:
    """state.json with ``run_state.json`` merged back in (an unreadable run state only loses durations and
    the MLflow run to continue, so it is a warning)."""
    try:
        kept = json.loads((checkpoint / STATE_FILE).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{checkpoint}: unreadable {STATE_FILE} ({exc}); delete this folder to resume from "
                              "the previous checkpoint") from None
    run: dict[str, Any] = {}
    if (checkpoint / RUN_STATE_FILE).is_file():
        try:
            run = json.loads((checkpoint / RUN_STATE_FILE).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            log.warning("%s: unreadable %s (%s); resuming without its durations and MLflow run id", checkpoint,
                        RUN_STATE_FILE, exc)
    return merge_run_state(kept, run)


def read_latest_pointer(root: Path) -> Path | None:
    try:
        name = (root / LATEST_FILE).read_text().strip()
    except OSError:
        return None
    return root / name if name else None


