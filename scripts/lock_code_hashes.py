"""Refresh dvc.lock's hashes of code dependencies (``src/``), its commands and params keys that are new to a
stage (never a changed value) in place, leaving every output's hash as it is.

Only for a change that is known not to change any stage's outputs (a refactor checked to give the same
checkpoints, a docstring): otherwise re-run the stages (`dvc repro`). Run from the repository root:

    .venv/bin/python scripts/lock_code_hashes.py
"""
from pathlib import Path

import yaml
from dvc.repo import Repo


def only_added(old: object, new: object) -> bool:
    """Whether ``new`` is ``old`` with keys added (at any depth) and no value changed."""
    if isinstance(old, dict) and isinstance(new, dict):
        return all(key in new and only_added(value, new[key]) for key, value in old.items())
    return old == new


locked = yaml.safe_load(Path("dvc.lock").read_text())["stages"]
repo = Repo(".")
with repo.lock:
    for stage in repo.index.stages:
        if not getattr(stage, "cmd", None):
            continue
        changed = locked.get(stage.addressing, {}).get("cmd") != stage.cmd  # e.g. a new flag
        for dep in stage.deps:
            if dep.def_path.startswith("src/"):
                old = dep.hash_info
                dep.save()
                changed |= dep.hash_info != old
            elif dep.def_path == "params.yaml" and dep.workspace_status():
                old = dict(dep.hash_info.value or {})
                dep.save()
                if only_added(old, dict(dep.hash_info.value or {})):  # new keys: their defaults changed nothing
                    changed = True
                else:
                    dep.hash_info = type(dep.hash_info)(dep.hash_info.name, old)  # a changed value: re-run it
        if changed:
            stage.dump(update_pipeline=False)
            print("refreshed", stage.addressing)
