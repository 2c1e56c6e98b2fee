"""Did an update reach the weights that answer? Parameter changes as the rollout/evaluation dtype sees them.

Training keeps fp32 weights while rollouts and evaluation may run in bf16 (``agent.rollout_dtype: auto``,
``searchplay.llm.transformers_backend``). bf16 keeps 8 significant bits, so an fp32 change smaller than half
the bf16 spacing at a weight (about |w| / 512) leaves its bf16 value, and every answer, as it was. These
helpers compare weights in that dtype, one parameter (and one chunk of it) at a time, so no full-precision
copy of the model is ever made.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from searchplay.config import Params

CHUNK_ELEMENTS = 1 << 22  # elements cast at once: 8 MB per side in bf16 (SmolLM2's embedding is 28M elements)


def evaluation_dtype(params: Params, device_type: str, model_dtype: Any) -> Any:
    """The torch dtype rollouts and evaluation see the policy in: ``agent.rollout_dtype`` ('auto': bf16 where
    native, else the model's), on either backend (vLLM's engine is built in it)."""
    from searchplay.llm.transformers_backend import pick_rollout_dtype

    return pick_rollout_dtype(params.agent.rollout_dtype, device_type) or model_dtype


def cast_snapshot(parameters: Iterable[Any], dtype: Any) -> list[Any]:
    """A detached copy of every parameter in ``dtype`` on its device (cast tensor by tensor)."""
    import torch

    with torch.no_grad():
        return [p.detach().to(dtype=dtype, copy=True) for p in parameters]


def local_shards(parameters: Iterable[Any]) -> list[Any]:
    """This process's part of every parameter: the local tensor of an FSDP2 (DTensor) shard, else the tensor."""
    return [p.to_local() if hasattr(p, "to_local") else p for p in parameters]


def compare_with_start(parameters: Iterable[Any], start: Iterable[Any], dtype: Any,
                       chunk: int = CHUNK_ELEMENTS) -> tuple[float, int, int]:
    """(squared L2 distance from ``start`` in float64, elements whose value cast to ``dtype`` differs from the same
    element of ``start`` cast to ``dtype``, all elements). ``start`` holds one tensor per parameter, of any dtype
    (a cast snapshot or full-precision start weights); both sides are cast ``chunk`` elements at a time. A NaN
    counts as changed. The distance means what it says only where ``start`` holds the start weights exactly."""
    import torch

    squares, changed, total = 0.0, 0, 0
    with torch.no_grad():
        for param, before in zip(parameters, start, strict=True):
            now, then = param.detach().reshape(-1), before.detach().reshape(-1)
            if now.numel() != then.numel():
                raise ValueError(f"compare_with_start: a parameter of {now.numel()} elements against a start "
                                 f"tensor of {then.numel()}")
            differs = torch.zeros((), dtype=torch.int64, device=now.device)
            squared = torch.zeros((), dtype=torch.float64, device=now.device)
            for offset in range(0, now.numel(), chunk):
                piece, old = now[offset:offset + chunk], then[offset:offset + chunk].to(now.device)
                differs += (piece.to(dtype) != old.to(dtype)).sum()
                squared += (piece.float() - old.float()).square().sum(dtype=torch.float64)
            squares += float(squared)
            changed += int(differs)
            total += now.numel()
    return squares, changed, total
