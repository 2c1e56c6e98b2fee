"""Refresh dvc.lock's hashes of code dependencies (``src/``), its commands, params keys that are new to a
stage (never a changed value) and deps new to a stage whose content is what the lock records for the same path
elsewhere, in place, leaving every output's hash as it is.

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
# each path's hash as the lock records it for some stage: a dep new to a stage takes it only where the file is the same
recorded = {dep["path"]: dep.get("md5") for entry in locked.values() for dep in entry.get("deps", []) if "md5" in dep}
repo = Repo(".")
with repo.lock:
    for stage in repo.index.stages:
        if not getattr(stage, "cmd", None):
            continue
        changed = locked.get(stage.addressing, {}).get("cmd") != stage.cmd  # e.g. a new flag
        for dep in stage.deps:
            known = [d["path"] for d in locked.get(stage.addressing, {}).get("deps", [])]
            if dep.def_path.startswith("src/"):
                old = dep.hash_info
                dep.save()
                changed |= dep.hash_info != old
            elif dep.def_path not in known and dep.def_path in recorded:  # a dep new to the stage
                old = dep.hash_info
                dep.save()
                if dep.hash_info.value == recorded[dep.def_path]:  # what the stages that read it were run on
                    changed = True
                else:
                    dep.hash_info = old  # other content: the stage must run again
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
