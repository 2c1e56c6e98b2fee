"""Refresh dvc.lock's hashes of code dependencies (``src/``), its commands and params keys a stage newly
depends on (never a changed value) in place, leaving every output's hash as it is.

Only for a change that is known not to change any stage's outputs (a refactor checked to give the same
checkpoints, a docstring): otherwise re-run the stages (`dvc repro`). Run from the repository root:

    .venv/bin/python scripts/lock_code_hashes.py
"""
from pathlib import Path

import yaml
from dvc.repo import Repo

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
                states = set(dep.workspace_status()["params.yaml"].values())
                if states == {"new"}:  # a key the stage did not read before: its default changed nothing
                    dep.save()
                    changed = True
        if changed:
            stage.dump(update_pipeline=False)
            print("refreshed", stage.addressing)
