"""The warm-start survives a kill: every ``warmstart.save_every`` steps its weights, AdamW and scheduler state,
RNG and history go to ``<out_dir>/resume/``; a later run with the same demos continues from there.

A resume state is used only when its fingerprint (the demos' tokens and the training settings) matches, so a
changed pool or setting starts over instead of mixing two trainings. The folder is removed once the
stage finishes, so it never becomes part of the stage's output.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

STATE_FILE = "state.pt"


def fingerprint(demos: list[Any], settings: dict[str, Any]) -> str:
    """A hash of the demos (role, tokens, trained mask) and the settings that shape the training."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for demo in demos:
        digest.update(f"{demo.role}:{demo.input_ids}:{demo.loss_mask};".encode())
    return digest.hexdigest()[:16]


def save(folder: Path, trainer: Any, history: list[dict[str, float]], step: int, key: str) -> None:
    """Write the state after ``step`` (atomically: a partial folder, then a rename)."""
    import torch

    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    torch.save({"step": step, "fingerprint": key, "history": history,
                "model": trainer.model.state_dict(), "optimizer": trainer.optimizer.state_dict(),
                "scheduler": trainer.scheduler.state_dict(), "global_step": trainer.global_step,
                "rng": torch.get_rng_state()}, partial / STATE_FILE)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    log.info("warm-start state after step %d saved to %s", step, folder)


def load(folder: Path, trainer: Any, key: str) -> tuple[int, list[dict[str, float]]] | None:
    """Restore the trainer from ``folder`` if it holds a state of this training; (step, history) or None."""
    import torch

    path = folder / STATE_FILE
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # a state cut by the kill itself: start over
        log.warning("warm-start resume state %s is unreadable (%s); starting from step 0", path, exc)
        return None
    if state.get("fingerprint") != key:
        log.warning("warm-start resume state %s is of other demos or settings; starting from step 0", path)
        return None
    trainer.model.load_state_dict(state["model"])
    trainer.optimizer.load_state_dict(state["optimizer"])
    trainer.scheduler.load_state_dict(state["scheduler"])
    trainer.global_step = state["global_step"]
    torch.set_rng_state(state["rng"])
    return int(state["step"]), list(state["history"])


def clear(folder: Path) -> None:
    """Remove the resume state (the stage finished)."""
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(folder.with_name(folder.name + ".partial"), ignore_errors=True)
