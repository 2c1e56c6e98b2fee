"""The DVC stage this process runs, for MLflow: the params it depends on, and its lock entry's hash.

DVC starts a stage's command with ``DVC_ROOT`` set; the stage is the one of ``dvc.yaml`` whose command is this
process's command line. A run then logs only the params that stage depends on (a warm-start run has no
``selfplay.*``), and tags ``dvc.stage.<name>`` with ``entry_hash`` of the stage's inputs: its command, deps and
params as ``dvc.lock`` records them, outputs left out. For the running stage they are hashed from the workspace,
so the tag equals ``entry_hash`` of the lock entry DVC writes when the run ends; the other stages' come from
``dvc.lock`` as it stands (the stages that ran before this one are already in it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def entry_hash(entry: dict[str, Any]) -> str:
    """A lock entry's inputs (``cmd``, ``deps``, ``params``) hashed; its ``outs`` are left out."""
    inputs = {key: value for key, value in entry.items() if key != "outs"}
    return hashlib.md5(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:12]


def tag_name(stage: str) -> str:
    """MLflow tag keys allow letters, digits and ``_-./ ``: ``selfplay@kg_wcr`` -> ``dvc.stage.selfplay/kg_wcr``."""
    return f"dvc.stage.{stage.replace('@', '/')}"


def running_stage(argv: list[str] | None = None, program: str = "searchplay") -> Any | None:
    """The DVC stage (``dvc.stage.Stage``) whose command is ``program`` with this process's arguments (``argv``,
    default ``sys.argv[1:]``), when DVC started it; else None."""
    root = os.environ.get("DVC_ROOT")
    if not root:
        return None
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        from dvc.repo import Repo

        stages = Repo(os.getcwd()).index.stages
    except Exception as exc:  # a broken dvc.yaml is DVC's to report; tracking goes on without the stage
        log.warning("could not read the DVC stages (%s); the run logs every param", exc)
        return None
    for stage in stages:
        cmd = getattr(stage, "cmd", None)
        if isinstance(cmd, str) and cmd.strip():
            first, *rest = shlex.split(cmd)
            if Path(first).name == program and rest == words:
                return stage
    return None


def stage_params(stage: Any) -> list[str]:
    """The params keys (``agent``, ``models.policy``) the stage depends on."""
    return [key for dep in stage.deps if hasattr(dep, "params") for key in (dep.params or [])]


def workspace_entry(stage: Any) -> dict[str, Any]:
    """The stage's lock entry as DVC would write it now, its deps hashed from the workspace."""
    from dvc.stage.serialize import to_single_stage_lockfile

    for dep in stage.deps:
        dep.save()
    return to_single_stage_lockfile(stage)


def read_lock(path: str | Path) -> dict[str, Any]:
    """dvc.lock as DVC reads it (YAML 1.2: PyYAML's 1.1 would read ``lr: 1e-05`` as a string, another hash)."""
    from dvc.utils.serialize import load_yaml

    return dict(load_yaml(path) or {})


def stage_tags(stage: Any | None, lock_file: str | Path = "dvc.lock") -> dict[str, str]:
    """``dvc.stage.<name>`` -> ``entry_hash`` for every stage of ``dvc.lock``, the running one from the workspace."""
    path = Path(lock_file)
    entries = read_lock(path).get("stages", {}) if path.exists() else {}
    tags = {tag_name(name): entry_hash(entry) for name, entry in entries.items()}
    if stage is not None:
        try:
            tags[tag_name(stage.addressing)] = entry_hash(workspace_entry(stage))
        except Exception as exc:  # e.g. a dep DVC cannot hash; the run goes on, tagged from the lock
            log.warning("could not hash the inputs of stage %s (%s)", stage.addressing, exc)
        tags["dvc.stage"] = stage.addressing
    return tags
