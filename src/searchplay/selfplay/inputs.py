"""What a self-play run started from, so that ``dvc repro`` after a kill continues only the same run.

The DVC stage runs ``searchplay selfplay --resume-if-unchanged``; its checkpoints (``<checkpoints>/<run>/resume/``)
are no DVC output, so DVC leaves them between runs. The run's inputs go to
``<checkpoints>/<run>/resume/resume_inputs.json`` before its first iteration: the digest of the params the stage
reads (``params_digest``: those ``dvc.yaml`` lists for ``selfplay@<variant>``, so an edit DVC would not re-run the
stage for, such as ``evaluate.n``, does not restart a killed run either), the start model's weights and
configuration, the state that pins a phase (a two-phase recipe's hand-off set), the package's code and the stage's
data (the KG pool and the index's fingerprint: DVC runs the stage again when they change, and a run that resumed its
old checkpoints would carry a model of the old data). A later run with the same inputs continues from the newest
complete checkpoint; one whose inputs differ, or that finds no inputs file, removes the old checkpoints and starts
at iteration 1, which is what DVC does to an output. ``.dvcignore`` lists the file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from searchplay.config import RESULT_NEUTRAL, Params, get_dotted
from searchplay.io import code_digest, files_digest, write_json
from searchplay.llm.weights import model_digest

INPUTS_FILE = "resume_inputs.json"

# the params keys every selfplay@<variant> stage lists in dvc.yaml (a test holds the two lists together), and the
# device: DVC does not re-run a stage for it (same outputs on one machine), but a run is not continued on another
STAGE_PARAMS = ("models.policy", "models.dtype", "models.embedder", "models.e5_prefixes", "models.embedder_dtype",
                "warmstart.enabled", "agent", "judge", "search", "index.nprobes", "index.refine_factor",
                "pipeline.launch", "selfplay", "wcr.casefold", "evaluate.data_dir", "evaluate.seed")
RUN_ONLY_PARAMS = ("models.device",)


def params_digest(params: Params, variant: str) -> str:
    """A short hash of the params a self-play run of ``variant`` reads: ``STAGE_PARAMS``, ``RUN_ONLY_PARAMS`` and
    the sections its ``pipeline.variants`` entry names, less ``RESULT_NEUTRAL``. A variant without an entry (one
    run from the CLI alone) reads sections no list names: its digest is ``Params.digest``, every section."""
    entry = params.pipeline.variants.get(variant)
    if entry is None:
        return params.digest()
    dumped = params.model_dump(mode="json", exclude=RESULT_NEUTRAL)
    picked = {key: get_dotted(dumped, key) for key in sorted({*STAGE_PARAMS, *RUN_ONLY_PARAMS, *entry.params})}
    return hashlib.sha256(json.dumps(picked, sort_keys=True).encode()).hexdigest()[:12]


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
