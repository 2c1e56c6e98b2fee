"""A trainer's resume state: weights and optimizer through ``torch.distributed.checkpoint`` (DCP), RNG per process.

Under FSDP2 every process writes the shard it holds (``__<rank>_0.distcp``) and the main one the ``.metadata``
index; a resume reads the shards back into the sharded model and optimizer. One process, or several that each
hold everything (DDP), write the same format (DCP keeps one copy of a tensor all processes hold). The folder is not
a Hugging Face model: ``export_model`` writes that, once, where something reads it.

Nothing is converted on the way: the tensors come back as they went, so a resumed run trains to the weights of an
unbroken one, bit for bit.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

WEIGHTS_DIR = "dcp"  # the DCP checkpoint: .metadata + one .distcp file per writing process
RNG_FILE = "random_states_{rank}.pkl"  # Python's, NumPy's and torch's generators of one process (.dvcignore'd)
MODEL_KEY, OPTIMIZER_KEY = "model", "optimizer"


def save_resume_state(folder: str | Path, model: Any, optimizer: Any, rank: int = 0) -> None:
    """Write ``model``'s and ``optimizer``'s states (this process's shards) and this process's RNG states into
    ``folder``; collective where a process group is up. An optimizer that has not stepped yet has no state to
    keep, and is left out: asking torch for it would take a zero step that starts AdamW's step count."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

    if optimizer.state:
        model_state, optimizer_state = get_state_dict(model, optimizer)
        state = {MODEL_KEY: model_state, OPTIMIZER_KEY: optimizer_state}
    else:
        state = {MODEL_KEY: get_model_state_dict(model)}
    try:
        with _no_single_process_warning():
            dcp.save(state, checkpoint_id=str(Path(folder) / WEIGHTS_DIR), no_dist=_one_process())
    except CheckpointException as exc:  # a BaseException: a caller catching OSError (a full disk) would miss it
        raise _first_failure(exc) from exc
    torch.save(_rng_states(), Path(folder) / RNG_FILE.format(rank=rank))


def load_resume_state(folder: str | Path, model: Any, optimizer: Any, rank: int = 0) -> None:
    """Read what ``save_resume_state`` wrote into ``model`` and ``optimizer`` (each process its shards) and
    restore this process's RNG states where their file is there (a folder DVC checked out may lack it)."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        get_state_dict,
        set_model_state_dict,
        set_state_dict,
    )

    weights = str(Path(folder) / WEIGHTS_DIR)
    if _has_optimizer_state(weights):
        model_state, optimizer_state = get_state_dict(model, optimizer)
        state = {MODEL_KEY: model_state, OPTIMIZER_KEY: optimizer_state}
        with _no_single_process_warning():
            dcp.load(state, checkpoint_id=weights, no_dist=_one_process())
        set_state_dict(model, optimizer, model_state_dict=state[MODEL_KEY], optim_state_dict=state[OPTIMIZER_KEY])
    else:
        state = {MODEL_KEY: get_model_state_dict(model)}
        with _no_single_process_warning():
            dcp.load(state, checkpoint_id=weights, no_dist=_one_process())
        set_model_state_dict(model, state[MODEL_KEY])
    rng = Path(folder) / RNG_FILE.format(rank=rank)
    if rng.is_file():
        _set_rng_states(torch.load(rng, weights_only=False))  # our own file, written by save_resume_state


def gathered_weights(model: Any) -> dict[str, Any]:
    """A sharded model's whole state dict, gathered onto the main process's CPU (the others get an empty dict);
    collective. What an export of an FSDP model writes."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def shard_files(folder: str | Path) -> list[Path]:
    """The DCP data files in a resume state (one per process that wrote tensors)."""
    return sorted((Path(folder) / WEIGHTS_DIR).glob("*.distcp"))


def _first_failure(exc: Any) -> Exception:
    """The error of the first process whose write failed, as it was raised (an ``OSError`` keeps its errno)."""
    for failure, _ in exc.failures.values():
        if isinstance(failure, Exception):
            return failure
    return RuntimeError(str(exc))


def _one_process() -> bool:
    """No process group: DCP is told to read and write alone (``no_dist``)."""
    import torch.distributed as dist

    return not (dist.is_available() and dist.is_initialized())


@contextmanager
def _no_single_process_warning() -> Iterator[None]:
    """Without DCP's warning that it assumes one process: torch warns on every ``no_dist`` call, asked or not,
    and a first look's log showed it after every self-play checkpoint. Other warnings pass."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")
        yield


def _has_optimizer_state(weights: str) -> bool:
    from torch.distributed.checkpoint import FileSystemReader

    keys = FileSystemReader(weights).read_metadata().state_dict_metadata
    return any(key.startswith(OPTIMIZER_KEY + ".") for key in keys)


def _rng_states() -> dict[str, Any]:
    import numpy as np
    import torch

    states = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _set_rng_states(states: dict[str, Any]) -> None:
    import numpy as np
    import torch

    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
