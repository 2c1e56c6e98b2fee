"""Loading a causal LM's weights with an error that names the folder: a cut, empty or missing weights file (a
killed save, a full disk) is one line saying which checkpoint and what to run, not a library traceback.

``read_weights_into_memory`` gives a loaded model weights of its own: transformers maps a safetensors file
whose dtype is the model's and hands out views of the mapping, whose pages, once read, add to the process's
resident memory beside whatever its allocator holds free.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from searchplay.io import InputError, files_digest

SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}  # header -> torch
MODEL_PATTERNS = ("*.safetensors", "*.json", "*.jinja")  # weights, configs, chat template; not optimizer states


class ModelLoadError(InputError, RuntimeError):
    """The weights at a path cannot be loaded; the message names the path, the cause and the fix. An input a
    retry reads the same way: the CLI exits 2 and a flow does not retry it."""


def model_digest(model: str | Path) -> str:
    """A model's identity: its weights and configs where it is a local folder, else its name (a hub id)."""
    folder = Path(model)
    if not folder.is_dir():
        return str(model)
    return files_digest(folder, {p for pattern in MODEL_PATTERNS for p in folder.rglob(pattern) if p.is_file()})


def load_causal_lm(path: str | Path, **kwargs: Any) -> Any:
    """``AutoModelForCausalLM.from_pretrained(path, **kwargs)``, its load failures as ``ModelLoadError``; torch's
    math kernels are warmed first (``searchplay.process.warm_math_kernels``), so the first forward is exact."""
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM

    from searchplay.process import warm_math_kernels

    warm_math_kernels()
    try:
        return AutoModelForCausalLM.from_pretrained(str(path), **kwargs)
    except (SafetensorError, OSError, ValueError, json.JSONDecodeError) as exc:
        cause = " ".join(str(exc).split())[:200] or type(exc).__name__
        hint = ("its weights file is empty or cut (a killed save or a full disk?); run the stage that writes it "
                "again" if Path(path).is_dir() else "no such model folder, and no hub id reachable offline")
        raise ModelLoadError(f"{path}: the model cannot be loaded ({type(exc).__name__}: {cause}); {hint}") from exc


def check_model(model: str | Path, setting: str = "--model, models.policy or evaluate.model") -> None:
    """A ``ModelLoadError`` naming what is wrong where ``model`` (an alias, a folder or a hub id) cannot load: a
    path to no folder, a folder whose ``config.json`` does not parse or whose safetensors files are missing or cut,
    a hub id outside the local cache while offline. Run before a backend starts: vLLM's own errors come from its
    engine as a long traceback, and a tokenizer's as an ``OSError``. ``setting``: where the name came from."""
    import os

    from searchplay.assets import resolve

    folder = Path(resolve(str(model)))
    if folder.is_dir():
        _check_folder(folder)
    elif folder.exists() or str(model).startswith((".", "/", "~")) or str(model).count("/") > 1:
        raise ModelLoadError(f"{model}: no such model folder; check the path ({setting})")
    elif os.environ.get("HF_HUB_OFFLINE") == "1":
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(str(model), "config.json"), str):
            raise ModelLoadError(f"{model}: no such folder, and no hub id in the local Hugging Face cache "
                                 "(searchplay runs offline); check the path, or run once with `searchplay --online`")


def check_device(device: str) -> None:
    """A ``ModelLoadError`` where ``models.device`` asks for CUDA that torch does not see (a CPU build of torch,
    no driver), instead of torch's assertion deep inside the first load."""
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(f"models.device is {device}, but torch finds no CUDA device (a CPU build of torch, or "
                             "no driver); set models.device to auto or cpu")


def _check_folder(folder: Path) -> None:
    try:
        json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{folder}: its config.json is missing or does not parse ({exc}); run the stage that "
                             "writes this model again") from None
    weights = sorted(folder.glob("*.safetensors"))
    if not weights and not any(folder.glob("*.bin")):
        raise ModelLoadError(f"{folder}: no weights file (*.safetensors); run the stage that writes this model again")
    for file in weights:
        try:
            with file.open("rb") as handle:
                header_size, header = _safetensors_header(handle)
        except (struct.error, ValueError):  # shorter than its length field, or a cut header
            header_size, header = 0, None
        end = max((entry["data_offsets"][1] for name, entry in (header or {}).items() if name != "__metadata__"),
                  default=0)
        if header is None or 8 + header_size + end > file.stat().st_size:
            raise ModelLoadError(f"{file}: the weights file is empty or cut (a killed save or a full disk?); run the "
                                 "stage that writes this model again")


def _safetensors_header(handle: Any) -> tuple[int, dict[str, Any]]:
    """(its length in bytes, its JSON) of the header of the safetensors file ``handle`` reads from its start."""
    header_size = struct.unpack("<Q", handle.read(8))[0]
    return header_size, json.loads(handle.read(header_size))


def read_weights_into_memory(model: Any, folder: str | Path, mapped: bool = False) -> None:
    """Replace each parameter of ``model`` that ``folder``'s safetensors files hold by a tensor read from them with
    plain reads, cast to the parameter's dtype as ``from_pretrained`` casts: the same values, in memory the
    process's allocator hands out (and takes back on free), not a file mapping. A folder without safetensors
    files leaves the model as it is.

    A frozen reference loaded for each update needs this: the mapping's pages would sit on top of the memory the
    allocator keeps from the previous step (0.5 GiB at 135M in fp32). ``mapped`` (CPU parameters): each tensor is
    an anonymous mapping of its own instead (``searchplay.process.zeros_paged_on_write``), whose pages go back to
    the system the moment it is freed, where glibc's heap would keep them (``keep_freed_memory``): for weights
    that are read for a call and dropped after it."""
    import torch

    from searchplay.process import zeros_paged_on_write

    params = dict(model.named_parameters())
    with torch.no_grad():
        for file in sorted(Path(folder).glob("*.safetensors")):
            with open(file, "rb") as handle:
                header_size, header = _safetensors_header(handle)
                for name, entry in header.items():
                    if name not in params or entry["dtype"] not in SAFETENSORS_DTYPES:
                        continue
                    begin, end = entry["data_offsets"]
                    shape, dtype = entry["shape"], getattr(torch, SAFETENSORS_DTYPES[entry["dtype"]])
                    target = params[name]
                    mapping = mapped and target.device.type == "cpu"
                    if mapping:
                        tensor = zeros_paged_on_write(tuple(shape), dtype, "cpu")
                    else:
                        tensor = torch.empty(shape, dtype=dtype)
                    view = memoryview(tensor.view(-1).view(torch.uint8).numpy())
                    handle.seek(8 + header_size + begin)
                    if handle.readinto(view) != end - begin:
                        raise ModelLoadError(f"{file}: {name} is cut short; run the stage that writes it again")
                    if mapping and dtype != target.dtype:  # cast into a mapping too (copy_ casts as .to does)
                        tensor = zeros_paged_on_write(tuple(shape), target.dtype, "cpu").copy_(tensor)
                    target.data = tensor.to(device=target.device, dtype=target.dtype)


def weights_stamp(model_path: str | Path) -> dict[str, tuple[int, int, int]]:
    """(size, mtime in ns, inode) of each weights file in a model folder; {} for a hub id (its cache is fixed).
    Weights read again later (a frozen model waiting on disk) must be these bytes."""
    folder = Path(model_path)
    if not folder.is_dir():
        return {}
    return {path.name: (stat.st_size, stat.st_mtime_ns, stat.st_ino) for path in sorted(folder.iterdir())
            if path.suffix in (".safetensors", ".bin") and (stat := path.stat())}
