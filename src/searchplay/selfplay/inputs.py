"""What a self-play run started from, so that ``dvc repro`` after a kill continues only the same run.

The DVC stage runs ``searchplay selfplay --resume-if-unchanged``; its checkpoints (``<checkpoints>/<run>/resume/``)
are no DVC output, so DVC leaves them between runs. The run's inputs go to
``<checkpoints>/<run>/resume/resume_inputs.json`` before its first iteration: the params digest
(``Params.digest``), the start model's weights and configuration, the state that pins a phase (a two-phase recipe's
hand-off set), the package's code and the stage's data (the KG pool and the index's fingerprint: DVC runs the stage
again when they change, and a run that resumed its old checkpoints would carry a model of the old data). A later
run with the same inputs continues from the newest complete checkpoint; one whose inputs differ, or that finds no
inputs file, removes the old checkpoints and starts at iteration 1, which is what DVC does to an output.
``.dvcignore`` lists the file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from searchplay.io import code_digest, files_digest, write_json
from searchplay.llm.weights import model_digest

INPUTS_FILE = "resume_inputs.json"


def run_inputs(params_digest: str, start: str, pinned: dict[str, Any], data: Iterable[Path] = ()) -> dict[str, str]:
    """The inputs ``resume_inputs.json`` records: what shapes the run besides its seed. ``data``: the files the run
    reads (``data_digest``)."""
    pinned_blob = json.dumps(pinned, sort_keys=True, default=str).encode()
    return {"params": params_digest, "start": model_digest(start),
            "pinned": hashlib.sha256(pinned_blob).hexdigest()[:16], "code": code_digest(), "data": data_digest(data)}


def data_digest(paths: Iterable[Path]) -> str:
    """A hash of each file (``files_digest``) by the path given; a file absent (a search server's index, not here)
    counts by its absence."""
    entries = [f"{path}={files_digest(Path(path).parent, [Path(path)]) if Path(path).is_file() else 'absent'}"
               for path in paths]
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()[:16]


def changed_inputs(root: Path, inputs: dict[str, str]) -> list[str]:
    """The inputs that differ from those the checkpoints under ``root`` recorded (all, where none are)."""
    try:
        saved = json.loads((root / INPUTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        saved = None  # none written (a folder from before this file, or checked out by DVC), or torn
    if not isinstance(saved, dict):
        return sorted(inputs)
    return sorted(key for key in inputs if saved.get(key) != inputs[key])


def write_inputs(root: Path, inputs: dict[str, str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    write_json(root / INPUTS_FILE, inputs)
