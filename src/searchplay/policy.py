"""Which weights a model stage starts from: the base policy, or the warm-start checkpoint.

Shared by the warm-start (writes it), self-play (starts from it) and evaluation (scores it), so it
lives below all three (DESIGN.md, "Floors run one way").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MODEL_DIR = "model"  # the HF folder (weights + tokenizer) inside warmstart.out_dir


class PolicyError(RuntimeError):
    """A starting model that is not there; the message names the command that makes it."""


def warmstart_model_dir(params: Any) -> Path:
    """``<warmstart.out_dir>/model``: the warm-start's HF folder (from_pretrained-loadable)."""
    return Path(params.warmstart.out_dir) / MODEL_DIR


def is_model_dir(folder: Path) -> bool:
    return (folder / "config.json").is_file()


def initial_policy(params: Any) -> str:
    """The weights self-play starts from: the warm-start checkpoint when ``warmstart.enabled``, else
    ``models.policy`` (the papers' setting: instruct models that already follow the tags)."""
    if not params.warmstart.enabled:
        return params.models.policy
    folder = warmstart_model_dir(params)
    if not is_model_dir(folder):
        raise PolicyError(f"warmstart.enabled is true but {folder} holds no model; run `searchplay warmstart` "
                          "first (or set warmstart.enabled=false to start from models.policy)")
    return str(folder)
