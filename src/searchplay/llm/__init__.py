"""searchplay.llm: policy backends, tokenizer loading and the answer judge.

``load_backend(model, params)`` and ``load_tokenizer(model)`` are the entry points; heavy libraries
are imported only when a backend is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from searchplay.llm.tokenizer import encode_prompt, load_tokenizer

if TYPE_CHECKING:
    from searchplay.config import Params
    from searchplay.llm.backend import PolicyBackend

__all__ = ["encode_prompt", "load_backend", "load_tokenizer"]


def load_backend(model: str, params: Params | None = None, **kwargs: Any) -> PolicyBackend:
    """The policy backend ``params.agent.backend`` names, serving ``model`` (alias, folder or hub id).

    ``params`` supplies the backend kind, dtype and device (defaults when None); ``kwargs`` go to
    the backend's constructor.
    """
    from searchplay.config import Params

    params = params or Params()
    kind = params.agent.backend
    if kind == "transformers":
        from searchplay.llm.transformers_backend import TransformersBackend

        kwargs.setdefault("rollout_dtype", params.agent.rollout_dtype)
        return TransformersBackend(model, dtype=params.models.dtype, device=params.models.device, **kwargs)
    if kind == "vllm":
        from searchplay.llm.vllm_backend import VllmBackend

        kwargs.setdefault("memory_share", params.agent.vllm_memory_share)
        kwargs.setdefault("seed", params.agent.seed or 0)
        return VllmBackend(model, dtype=engine_dtype(params), **kwargs)
    raise ValueError(f"agent.backend: {kind!r} is not available in this build (choose 'transformers' or 'vllm'; "
                     "see docs/decisions/agent.md on ctranslate2)")


def engine_dtype(params: Params) -> str:
    """The dtype a vLLM engine serves: ``agent.rollout_dtype`` ('auto': bf16 where native, else ``models.dtype``),
    as the transformers backend generates, so the trainer's fp32 masters reach a bf16 engine on a GPU."""
    from searchplay.llm.transformers_backend import pick_device, pick_rollout_dtype

    chosen = pick_rollout_dtype(params.agent.rollout_dtype, pick_device(params.models.device))
    return str(chosen).removeprefix("torch.") if chosen is not None else params.models.dtype
