"""Policy backend on vLLM (extra ``gpu``): a thin adapter, vllm imported only when it is built.

Prompts go in as token ids (``{"prompt_token_ids": ...}``), stop strings are kept in the output
text, and vLLM's token ids are returned exactly as sampled. ``update_weights`` loads the trainer's
current weights into the colocated engine after each optimizer step, the way TRL's colocate mode
does (``model_runner.model.load_weights(state_dict.items())``), then resets the prefix cache so no
KV blocks from the old weights are reused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from searchplay.llm.backend import Completion, SamplingParams

# Where the in-process model sits under LLM.llm_engine in vLLM releases (V0 layout, then V1 in-process).
_MODEL_PATHS = (
    ("model_executor", "driver_worker", "model_runner", "model"),
    ("model_executor", "driver_worker", "worker", "model_runner", "model"),
)


class VllmBackend:
    """``PolicyBackend`` over ``vllm.LLM``; ``engine`` injects a ready LLM (tests pass a fake one)."""

    def __init__(self, model: str, dtype: str = "auto", engine: Any = None, tokenizer: Any = None,
                 gpu_memory_utilization: float = 0.6, **engine_kwargs: Any):
        from searchplay.assets import resolve
        from searchplay.llm.tokenizer import load_tokenizer

        if engine is None:
            try:
                from vllm import LLM
            except ImportError as exc:
                raise ImportError("agent.backend 'vllm' needs the gpu extra: pip install 'searchplay[gpu]'") from exc
            engine = LLM(model=str(resolve(model)), dtype=dtype, gpu_memory_utilization=gpu_memory_utilization,
                         **engine_kwargs)
        self.engine = engine
        self.tokenizer = tokenizer or load_tokenizer(model)

    def _vllm_sampling(self, sampling: SamplingParams) -> Any:
        from vllm import SamplingParams as VllmSamplingParams

        return VllmSamplingParams(max_tokens=sampling.max_new_tokens, temperature=sampling.temperature,
                                  top_p=sampling.top_p, stop=list(sampling.stop), seed=sampling.seed,
                                  include_stop_str_in_output=True)

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[Completion]:
        if not prompts:
            return []
        if sampling.allowed_tokens is not None:
            raise NotImplementedError("constrained decoding (allowed_tokens) runs on the transformers backend "
                                      "only; for the KG selector set kg.selector_constrained=false or "
                                      "agent.backend=transformers")
        requests = [{"prompt_token_ids": list(p)} for p in prompts]
        outputs = self.engine.generate(requests, self._vllm_sampling(sampling), use_tqdm=False)
        return [completion_from_vllm(out.outputs[0]) for out in outputs]

    def update_weights(self, model: Any) -> None:
        """Load ``model``'s current parameters into the colocated vLLM engine."""
        target = colocated_model(self.engine)
        target.load_weights(model.state_dict().items())
        reset = getattr(self.engine, "reset_prefix_cache", None)
        if reset is not None:
            reset()

    def release_memory(self) -> None:
        """Nothing to free in host memory: vLLM keeps its weights and its preallocated KV cache on the GPU
        (``gpu_memory_utilization`` sizes what it leaves to the trainer)."""


def colocated_model(engine: Any) -> Any:
    """The nn.Module the engine generates with, found along the known ``llm_engine`` paths."""
    for path in _MODEL_PATHS:
        node = engine.llm_engine
        try:
            for name in path:
                node = getattr(node, name)
        except AttributeError:
            continue
        return node
    raise RuntimeError("cannot reach the vLLM model for in-process weight loading; run vLLM in-process "
                       "(VLLM_ENABLE_V1_MULTIPROCESSING=0) or use a vLLM release with model_executor.driver_worker")


def completion_from_vllm(output: Any) -> Completion:
    """Map a vLLM ``CompletionOutput``: a string ``stop_reason`` is our stop string, otherwise EOS or length."""
    if output.finish_reason == "length":
        reason, stop = "length", None
    elif isinstance(output.stop_reason, str):
        reason, stop = "stop", output.stop_reason
    else:
        reason, stop = "eos", None
    return Completion(token_ids=list(output.token_ids), text=output.text, finish_reason=reason, stop=stop)
