"""Per-iteration checkpoints that survive a kill at any moment.

Layout under ``<selfplay.checkpoint_dir>/<variant>/``::

    iter_000003/            a complete checkpoint (only ever created by renaming a finished .partial)
      model/                PolicyTrainer.save: HF folder (from_pretrained-loadable: evaluation uses it)
                            plus optimizer, scheduler and RNG states
      state.json            iteration, data cursor, replay buffer, loop RNG, metrics history (written last)
    iter_000004.partial/    the iteration being written; ignored and removed on resume
    latest                  text file naming the newest complete checkpoint (updated atomically)

A checkpoint is written into ``.partial``, flushed, renamed (atomic on POSIX), then ``latest`` is
replaced atomically, then old checkpoints beyond ``keep`` are removed. A kill anywhere leaves the
previous complete checkpoint intact, so a resume loses at most the iteration in flight.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from searchplay.io import atomic_write, write_json
from searchplay.policy import CHECKPOINT_STATE, complete_checkpoints
from searchplay.selfplay.distributed import Processes

log = logging.getLogger(__name__)

STATE_FILE = CHECKPOINT_STATE
LATEST_FILE = "latest"


class CheckpointError(RuntimeError):
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

    def save(self, iteration: int, state: dict[str, Any], write: Callable[[Path], None]) -> Path:
        """Write a checkpoint for ``iteration``: ``write(folder)`` stores the model and trainer files, then
        ``state`` goes to state.json, then the folder is renamed into place and ``latest`` updated."""
        final = self.root / checkpoint_name(iteration)
        partial = final.with_name(final.name + ".partial")
        main = self.processes.is_main
        if main:
            self.root.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir()
        self.processes.barrier()
        write(partial)
        if not main:
            self.processes.barrier()  # wait until the main process has renamed the folder into place
            return final
        write_json(partial / STATE_FILE, state)
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

    def prune(self) -> None:
        """Keep the newest ``keep`` complete checkpoints; never the one ``latest`` names."""
        complete = self.complete()
        pointer = read_latest_pointer(self.root)
        for _, path in complete[:-self.keep]:
            if pointer is not None and path.name == pointer.name:
                continue
            shutil.rmtree(path, ignore_errors=True)


def read_state(checkpoint: Path) -> dict[str, Any]:
    try:
        return json.loads((checkpoint / STATE_FILE).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{checkpoint}: unreadable {STATE_FILE} ({exc}); delete this folder to resume from "
                              "the previous checkpoint") from None


def read_latest_pointer(root: Path) -> Path | None:
    try:
        name = (root / LATEST_FILE).read_text().strip()
    except OSError:
        return None
    return root / name if name else None


