"""Which weights a model stage starts from or scores: the base policy, the warm-start, a self-play checkpoint.

Shared by the warm-start (writes it), self-play (starts from it) and evaluation (scores it), so it
lives below all three (docs/architecture.md, "Package floors").
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

MODEL_DIR = "model"  # the HF folder (weights + tokenizer) inside warmstart.out_dir and each checkpoint
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
    folder = Path(getattr(params.warmstart, WARMSTARTS[warmstart][0])) / MODEL_DIR
    if not is_model_dir(folder):
        raise PolicyError(f"warmstart.enabled is true but {folder} holds no model; run `{WARMSTARTS[warmstart][1]}` "
                          "first (or set warmstart.enabled=false to start from models.policy)")
    return str(folder)


WARMSTARTS = {"shared": ("out_dir", "searchplay warmstart")}  # name -> (warmstart.<key> of its folder, the command
# that writes it); recipes add theirs (register_warmstart)


def register_warmstart(name: str, out_dir_key: str, command: str) -> None:
    """Add a warm-start that variants may start from: its folder is ``warmstart.<out_dir_key>``, written by
    ``command`` (a recipe's, at import)."""
    if WARMSTARTS.get(name, (out_dir_key, command)) != (out_dir_key, command):
        raise ValueError(f"warm-start {name!r} is already registered as {WARMSTARTS[name]}")
    WARMSTARTS[name] = (out_dir_key, command)


def complete_checkpoints(root: str | Path) -> list[tuple[int, Path]]:
    """A variant's complete self-play checkpoints ``iter_NNNNNN/`` holding their state file, oldest first
    (layout: ``searchplay.selfplay.checkpoint``)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        match = CHECKPOINT_NAME.match(path.name)
        if match and path.is_dir() and (path / CHECKPOINT_STATE).is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_model_dir(checkpoint_root: str | Path, variant: str) -> Path | None:
    """The HF model folder of a variant's newest complete checkpoint, or None (for evaluation)."""
    complete = complete_checkpoints(Path(checkpoint_root) / variant)
    if not complete or not is_model_dir(complete[-1][1] / MODEL_DIR):
        return None
    return complete[-1][1] / MODEL_DIR
