"""Which weights a model stage starts from or scores: the base policy, the warm-start, a self-play checkpoint.

Shared by the warm-start (writes it), self-play (starts from it) and evaluation (scores it), so it
lives below all three (docs/architecture.md, "Package floors"). It also holds the names of the models
there are, as their stages register them: the warm-starts (``WARMSTARTS``) and the self-play variants
(``SELFPLAY_VARIANTS``), which evaluation and the CLI's params check read without importing self-play.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

MODEL_DIR = "model"  # the HF folder (weights + tokenizer) inside warmstart.out_dir and a self-play run's folder
RESUME_DIR = "resume"  # a self-play run's per-iteration checkpoints, inside its folder (never a model to read)
CHECKPOINT_STATE = "state.json"  # written last into a self-play checkpoint: its presence marks it complete
CHECKPOINT_NAME = re.compile(r"^iter_(\d{6})$")


class PolicyError(RuntimeError):
    """A starting model that is not there; the message names the command that makes it."""


def warmstart_model_dir(params: Any) -> Path:
    """``<warmstart.out_dir>/model``: the warm-start's HF folder (from_pretrained-loadable)."""
    return Path(params.warmstart.out_dir) / MODEL_DIR


def is_model_dir(folder: Path) -> bool:
    return (folder / "config.json").is_file()


def initial_policy(params: Any, warmstart: str = "shared") -> str:
    """The weights self-play starts from: the warm-start checkpoint when ``warmstart.enabled``, else
    ``models.policy`` (the papers' setting: instruct models that already follow the tags).

    ``warmstart``: a key of ``WARMSTARTS`` (``Variant.warmstart``): the shared warm-start, or a recipe's own
    (e.g. the shared one continued on its formats, which only its variant starts from).
    """
    if not params.warmstart.enabled:
        return params.models.policy
    if warmstart not in WARMSTARTS:
        raise PolicyError(f"unknown warm-start {warmstart!r}; known: {sorted(WARMSTARTS)}")
    folder = warmstart_dir(params, warmstart)
    if not is_model_dir(folder):
        raise PolicyError(f"warmstart.enabled is true but {folder} holds no model; run "
                          f"`{WARMSTARTS[warmstart].command}` first (or set warmstart.enabled=false to start from "
                          "models.policy)")
    return str(folder)


class Warmstart(NamedTuple):
    """A warm-start that variants may start from."""

    out_dir_key: str  # the dotted params key of its folder (warmstart.out_dir, or a recipe section's key)
    command: str  # the command that writes it
    model: str  # its name as an evaluated model (``evaluate --variant``, ``reports/eval/<model>/``)
    started_from: str = "base"  # the evaluated model it continues (what a paired comparison sets it against)


WARMSTARTS: dict[str, Warmstart] = {"shared": Warmstart("warmstart.out_dir", "searchplay warmstart", "warmstart")}
# name -> its entry (Variant.warmstart names one); recipes add theirs (register_warmstart)


def register_warmstart(name: str, out_dir_key: str, command: str, model: str, started_from: str = "base") -> None:
    """Add a warm-start that variants may start from: its folder is the params key ``out_dir_key`` (dotted),
    written by ``command``, evaluated as ``model``, continuing the model ``started_from`` (a recipe's, at import)."""
    entry = Warmstart(out_dir_key, command, model, started_from)
    if WARMSTARTS.get(name, entry) != entry:
        raise ValueError(f"warm-start {name!r} is already registered as {WARMSTARTS[name]}")
    WARMSTARTS[name] = entry


def warmstart_out_dir(params: Any, warmstart: str) -> Path:
    """The folder of the warm-start registered as ``warmstart``: the value of its ``out_dir_key``."""
    value = params
    for part in WARMSTARTS[warmstart].out_dir_key.split("."):
        value = getattr(value, part)
    return Path(value)


def warmstart_dir(params: Any, warmstart: str) -> Path:
    """``<its out_dir>/model``: the HF folder of the warm-start registered as ``warmstart``."""
    return warmstart_out_dir(params, warmstart) / MODEL_DIR


def warmstart_models() -> tuple[str, ...]:
    """The registered warm-starts' model names (``warmstart``, then the recipes'), in registration order."""
    return tuple(entry.model for entry in WARMSTARTS.values())


def warmstart_of_model(model: str) -> str | None:
    """The ``WARMSTARTS`` key of the warm-start evaluated as ``model`` (``warmstart`` -> ``shared``), or None."""
    return next((name for name, entry in WARMSTARTS.items() if entry.model == model), None)


SELFPLAY_VARIANTS: list[str] = []  # the registered self-play variants' names, in registration order: filled by
# searchplay.selfplay.variants (its built-ins, and register_variant for the recipes')
VARIANT_WARMSTARTS: dict[str, str] = {}  # variant -> the WARMSTARTS key it starts from (Variant.warmstart)


def register_selfplay_variant(name: str, warmstart: str = "shared") -> None:
    """Record a self-play variant's name and the warm-start it starts from (``searchplay.selfplay.variants.
    register_variant`` does); again: a no-op."""
    if name not in SELFPLAY_VARIANTS:
        SELFPLAY_VARIANTS.append(name)
    VARIANT_WARMSTARTS[name] = warmstart


def started_from(model: str) -> str | None:
    """The evaluated model that ``model`` was trained from: a warm-start's ``started_from``; a self-play variant's
    warm-start model (``Variant.warmstart``); None for the base model or a name nothing registered."""
    warmstart = warmstart_of_model(model)
    if warmstart is not None:
        return WARMSTARTS[warmstart].started_from
    if model in VARIANT_WARMSTARTS:
        return WARMSTARTS[VARIANT_WARMSTARTS[model]].model
    return None


def selfplay_variants() -> tuple[str, ...]:
    """The registered self-play variants' names: what ``selfplay.variant`` and ``pipeline.variants`` may name."""
    return tuple(SELFPLAY_VARIANTS)


def selfplay_run_dir(checkpoint_root: str | Path, run: str) -> Path:
    """``<selfplay.checkpoint_dir>/<run>``: a self-play run's folder. ``model/`` in it is the run's final model (a
    Hugging Face folder, exported once at the end: what evaluation reads), ``resume/`` its checkpoints."""
    return Path(checkpoint_root) / run


def resume_dir(checkpoint_root: str | Path, run: str) -> Path:
    """``<selfplay.checkpoint_dir>/<run>/resume``: the run's per-iteration checkpoints (layout:
    ``searchplay.selfplay.checkpoint``)."""
    return selfplay_run_dir(checkpoint_root, run) / RESUME_DIR


def complete_checkpoints(root: str | Path) -> list[tuple[int, Path]]:
    """The complete self-play checkpoints ``iter_NNNNNN/`` under ``root`` (a run's ``resume/``) holding their
    state file, oldest first (layout: ``searchplay.selfplay.checkpoint``)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        match = CHECKPOINT_NAME.match(path.name)
        if match and path.is_dir() and (path / CHECKPOINT_STATE).is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def final_model_dir(checkpoint_root: str | Path, variant: str) -> Path | None:
    """A variant's final model, the HF folder its self-play run exported at its end, or None (for evaluation)."""
    folder = selfplay_run_dir(checkpoint_root, variant) / MODEL_DIR
    return folder if is_model_dir(folder) else None


def start_model_mismatches(params: Any) -> list[str]:
    """Where a variant's ``weights`` or a warm-start reference's input is not the folder the code loads (given
    the registered variants and warm-starts): DVC would then not re-run the stage when that model changes. The
    shipped params files have none (tested); a run outside DVC may point the warm-starts elsewhere."""
    problems = []
    for name, entry in params.pipeline.variants.items():
        loads = warmstart_out_dir(params, VARIANT_WARMSTARTS[name]).as_posix() if name in VARIANT_WARMSTARTS else None
        if loads is not None and entry.weights != loads:
            problems.append(f"pipeline.variants.{name}.weights: {name}'s self-play loads {loads}/model; got "
                            f"{entry.weights!r}, so DVC would not re-run it when that model changes")
    for model, made_by in params.pipeline.references.items():
        warmstart = warmstart_of_model(model)
        loads = warmstart_out_dir(params, warmstart).as_posix() if warmstart is not None else None
        if loads is not None and made_by != loads:
            problems.append(f"pipeline.references.{model}: its evaluation loads {loads}/model; got "
                            f"{made_by!r}, so DVC would not re-run it when that model changes")
    return problems
