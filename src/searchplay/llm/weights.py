"""Loading a causal LM's weights with an error that names the folder: a cut, empty or missing weights file (a
killed save, a full disk) is one line saying which checkpoint and what to run, not a library traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class ModelLoadError(RuntimeError):
    """The weights at a path cannot be loaded; the message names the path, the cause and the fix."""


def load_causal_lm(path: str | Path, **kwargs: Any) -> Any:
    """``AutoModelForCausalLM.from_pretrained(path, **kwargs)``, its load failures as ``ModelLoadError``; torch's
    math kernels are warmed first (``searchplay.runtime.warm_math_kernels``), so the first forward is exact."""
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM

    from searchplay.runtime import warm_math_kernels

    warm_math_kernels()
    try:
        return AutoModelForCausalLM.from_pretrained(str(path), **kwargs)
    except (SafetensorError, OSError, ValueError, json.JSONDecodeError) as exc:
        cause = " ".join(str(exc).split())[:200] or type(exc).__name__
        hint = ("its weights file is empty or cut (a killed save or a full disk?); run the stage that writes it "
                "again" if Path(path).is_dir() else "no such model folder, and no hub id reachable offline")
        raise ModelLoadError(f"{path}: the model cannot be loaded ({type(exc).__name__}: {cause}); {hint}") from exc
