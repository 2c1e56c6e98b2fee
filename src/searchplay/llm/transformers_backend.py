"""Policy backend on Hugging Face transformers: batched, left-padded ``model.generate`` with KV cache.

All active rollouts go through one ``generate`` call per turn. Each sequence stops on its own at a
stop string, EOS or ``max_new_tokens``; a finished row is padded by ``generate`` while the others
continue, and its ids are cut back to what was sampled. Runs on CPU and CUDA.

Prefix cache: a multi-turn rollout passes its whole history back each turn, and all but the newest
tokens (the last sampled token and the environment's reply) were already run through the model on
the previous turn. The backend keeps the keys and values of every row of its last call; a prompt
that extends one of them only prefills its new tokens. Rows are laid out ``[pad | cached | pad |
new]`` so the cached parts line up; padding anywhere is masked, and positions count real tokens
only, so a row's keys and values do not depend on its layout. The cache is dropped whenever the
weights change (``update_weights``, or any in-place update, seen through the parameters' version
counters). Rows without a cached prefix share one: a prompt prefix that several of them start with (the
G rollouts of a question, a prompt family's instructions) is prefilled once (``searchplay.prefix_kv``).

Growing cache: transformers' ``DynamicLayer`` concatenates each step's keys and values onto the whole
cache, a copy of everything cached per decoded token; ``_GrowingLayer`` writes into spare room instead.

Rollout dtype: generation may run in another dtype than the model it is given (``agent.rollout_dtype``:
bf16 rollouts from fp32 training weights, as verl's vLLM rollouts beside FSDP training). A module passed
in is then copied once, cast, and re-synced whenever the source's weights move.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from searchplay.llm.backend import Completion, SamplingParams
from searchplay.precision import bf16_is_native

log = logging.getLogger(__name__)

_STOP_TAIL_TOKENS = 16  # decoded tail checked for stop strings each step (longer than any stop string)


def pick_device(device: str) -> str:
    """'auto' -> 'cuda' when available, else 'cpu'."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def pick_rollout_dtype(name: str | None, device: str) -> Any:
    """``agent.rollout_dtype`` -> a torch dtype, or None (generate in the model's own dtype).

    'auto': bf16 where the hardware computes it natively (CUDA with bf16, a CPU with AVX512-BF16 or AMX
    as oneDNN reports), else None; 'model' or None: None.
    """
    import torch

    if name in (None, "model"):
        return None
    if name == "auto":
        return torch.bfloat16 if bf16_is_native(device) else None
    return getattr(torch, name)


@functools.cache
def _growing_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class _GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` that appends into spare room: a decode step copies one token, not the cache.

        ``keys``/``values`` are views of larger buffers; anything that replaces them (crop, batch select)
        is noticed by identity and the buffers are rebuilt from the replacement.
        """

        def __init__(self, room: int):
            super().__init__()
            self.room = room
            self._buffers: tuple[Any, Any] | None = None
            self._view: Any = None

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            used = self.get_seq_length()
            total = used + key_states.shape[-2]
            if self._buffers is None or self.keys is not self._view or total > self._buffers[0].shape[-2]:
                old = (self.keys, self.values)
                self._buffers = tuple(new.new_empty((*new.shape[:-2], total + self.room, new.shape[-1]))
                                      for new in (key_states, value_states))
                for buffer, tensor in zip(self._buffers, old, strict=True):
                    if used:
                        buffer[..., :used, :] = tensor
            keys, values = self._buffers
            keys[..., used:total, :] = key_states
            values[..., used:total, :] = value_states
            self.keys, self.values = keys[..., :total, :], values[..., :total, :]
            self._view = self.keys
            return self.keys, self.values

    return _GrowingLayer


class PerSequenceStops:
    """A transformers ``StoppingCriteria``: a row is done once its generated text contains a stop string.

    Records, per row, the generated length at which it stopped and which string stopped it, so the
    backend can cut the padding ``generate`` appends after a finished row.
    """

    def __init__(self, tokenizer: Any, stops: Sequence[str], prompt_length: int, batch_size: int):
        self.tokenizer = tokenizer
        self.stops = tuple(stops)
        self.prompt_length = prompt_length
        self.stopped_at: list[int | None] = [None] * batch_size
        self.stop: list[str | None] = [None] * batch_size

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        generated = input_ids.shape[1] - self.prompt_length
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        if not self.stops:
            return done
        tail = input_ids[:, max(self.prompt_length, input_ids.shape[1] - _STOP_TAIL_TOKENS):].tolist()
        for row, ids in enumerate(tail):
            if self.stopped_at[row] is not None:
                done[row] = True
                continue
            text = self.tokenizer.decode(ids, skip_special_tokens=False)
            hit = next((stop for stop in self.stops if stop in text), None)
            if hit is not None:
                self.stopped_at[row], self.stop[row] = generated, hit
                done[row] = True
        return done


@dataclass
class _CachedRow:
    """Keys and values (per layer, ``[1, kv_heads, len(ids), head_dim]``) of a token sequence."""

    ids: list[int]
    keys: list[Any]
    values: list[Any]


class TransformersBackend:
    """``PolicyBackend`` over a transformers causal LM (the trainer's module can be shared in-process)."""

    def __init__(self, model: str | Any, tokenizer: Any = None, dtype: str = "float32", device: str = "auto",
                 reuse_cache: bool = True, rollout_dtype: str | None = None, share_prefixes: bool = True):
        import torch
        from transformers import AutoModelForCausalLM

        from searchplay.assets import resolve
        from searchplay.llm.tokenizer import load_tokenizer

        if isinstance(model, str):
            self.tokenizer = tokenizer or load_tokenizer(model)
            torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
            self.device = pick_device(device)
            model = AutoModelForCausalLM.from_pretrained(str(resolve(model)), dtype=torch_dtype).to(self.device)
            self.rollout_dtype = pick_rollout_dtype(rollout_dtype, self.device)
            if self.rollout_dtype is not None:
                _cast_parameters(model, self.rollout_dtype)  # loaded for generation only: cast in place
        else:
            if tokenizer is None:
                raise ValueError("TransformersBackend(model=<nn.Module>) also needs its tokenizer")
            self.tokenizer = tokenizer
            self.device = str(next(model.parameters()).device)
            self.rollout_dtype = pick_rollout_dtype(rollout_dtype, self.device)
        self.source = model  # the weights to follow (a trainer's module, shared or copied)
        self._copy: Any = None
        self._source_version: tuple[int, ...] = ()
        self.model = self._generation_model()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.reuse_cache = reuse_cache
        self.share_prefixes = share_prefixes  # shared prompt prefixes prefilled once (searchplay.prefix_kv)
        self._cache: list[_CachedRow] = []
        self._cache_version: tuple[int, ...] = ()
        self.prefilled_tokens = 0  # prompt tokens run through the model (cache hits excluded), for benchmarks

    def update_weights(self, model: Any) -> None:
        """Generate with ``model`` from now on: shared in-process, or copied once when the rollout dtype differs."""
        if model is not self.source:
            self._copy = None  # another module (e.g. LoRA merged into a new one): copy it afresh
        self.source = model
        self.device = str(next(model.parameters()).device)
        self.model = self._generation_model()
        self._cache = []

    def _generation_model(self) -> Any:
        """The module that generates: the source itself, or its copy in ``rollout_dtype`` kept in sync."""
        import copy

        import torch

        source = self.source
        if self.rollout_dtype is None or next(source.parameters()).dtype == self.rollout_dtype:
            source.eval()
            return source
        version = tuple(p._version for p in source.parameters())
        if self._copy is None:
            self._copy = copy.deepcopy(source)
            _cast_parameters(self._copy, self.rollout_dtype)
            self._copy.eval()
        elif version != self._source_version:
            with torch.no_grad():
                for mine, theirs in zip(self._copy.parameters(), source.parameters(), strict=True):
                    mine.copy_(theirs)
        self._source_version = version
        return self._copy

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[Completion]:
        """One batched generate; each row cut at its own stop string, EOS or length."""
        import torch
        from transformers import StoppingCriteriaList

        if not prompts:
            return []
        if self._copy is not None and tuple(p._version for p in self.source.parameters()) != self._source_version:
            self.model = self._generation_model()  # the source moved in place (an optimizer step): re-sync
        prompts = [list(p) for p in prompts]
        hits = self._share_prefixes(prompts, self._lookup(prompts))
        cached = [len(hit.ids) if hit else 0 for hit in hits]
        head = max(cached)
        tail = max(len(p) - c for p, c in zip(prompts, cached, strict=True))
        pad = self.tokenizer.pad_token_id
        rows, masks = [], []
        for prompt, c in zip(prompts, cached, strict=True):
            new = len(prompt) - c
            rows.append([pad] * (head - c) + prompt[:c] + [pad] * (tail - new) + prompt[c:])
            masks.append([0] * (head - c) + [1] * c + [0] * (tail - new) + [1] * new)
        width = head + tail
        input_ids = torch.tensor(rows, device=self.device)
        attention = torch.tensor(masks, device=self.device)
        past = self._new_cache(hits, head, room=sampling.max_new_tokens + 1)
        self.prefilled_tokens += sum(len(p) - c for p, c in zip(prompts, cached, strict=True))
        stops = PerSequenceStops(self.tokenizer, sampling.stop, width, len(prompts))
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        options: dict[str, Any] = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        if sampling.temperature > 0:
            options = {"do_sample": True, "temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": 0}
        if sampling.allowed_tokens is not None:
            allowed = sampling.allowed_tokens
            options["prefix_allowed_tokens_fn"] = lambda row, ids: allowed(row, ids[width:].tolist())
        with torch.inference_mode():
            output = self.model.generate(
                input_ids=input_ids, attention_mask=attention, max_new_tokens=sampling.max_new_tokens,
                stopping_criteria=StoppingCriteriaList([stops]), pad_token_id=pad,
                eos_token_id=self.tokenizer.eos_token_id, use_cache=True, past_key_values=past,
                return_dict_in_generate=True, **options,
            )
        generated = output.sequences[:, width:].tolist()
        completions = [self._completion(ids, stops.stopped_at[i], stops.stop[i], sampling.max_new_tokens)
                       for i, ids in enumerate(generated)]
        if self.reuse_cache:
            self._keep(prompts, masks, completions, output.past_key_values)
        return completions

    # ---- prefix cache ---------------------------------------------------------------------------
    def _new_cache(self, hits: list[_CachedRow | None], head: int, room: int) -> Any:
        """A DynamicCache with growing full-attention layers, holding the rows' cached prefixes (if any)."""
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        growing = _growing_layer_class()
        cache = DynamicCache(config=self.model.config)
        cache.layers = [growing(room) if type(layer) is DynamicLayer else layer for layer in cache.layers]
        if head:
            for layer, (keys, values) in zip(cache.layers, self._stack(hits, head), strict=True):
                layer.update(keys, values)
        return cache

    def _weights_version(self) -> tuple[int, ...]:
        return tuple(p._version for p in self.model.parameters())

    def _lookup(self, prompts: list[list[int]]) -> list[_CachedRow | None]:
        """Per prompt, the longest cached row that is a strict prefix of it (None: prefill it all)."""
        if not self.reuse_cache or not self._cache or self._weights_version() != self._cache_version:
            self._cache = []
            return [None] * len(prompts)
        hits: list[_CachedRow | None] = []
        for prompt in prompts:
            fits = [row for row in self._cache if len(row.ids) < len(prompt) and prompt[:len(row.ids)] == row.ids]
            hits.append(max(fits, key=lambda row: len(row.ids), default=None))
        return hits

    def _share_prefixes(self, prompts: list[list[int]], hits: list[_CachedRow | None]) -> list[_CachedRow | None]:
        """Rows without a cached prefix: the prompt prefixes they share (a Solver group's prompt, a prompt
        family's instruction block) run through the model once, and each row starts from the longest of them."""
        import torch

        from searchplay.prefix_kv import PrefixStore, shared_prefixes

        fresh = [row for row, hit in enumerate(hits) if hit is None]
        if not self.share_prefixes or len(fresh) < 2:
            return hits
        prefixes = shared_prefixes([prompts[row] for row in fresh], [len(prompts[row]) - 1 for row in fresh])
        if not prefixes:
            return hits
        store = PrefixStore()
        with torch.inference_mode():
            store.build(self.model.get_decoder(), self.model.config, prefixes)
        self.prefilled_tokens += store.computed_tokens
        hits = list(hits)
        for row in fresh:
            length, layers = store.longest(prompts[row], len(prompts[row]) - 1)
            if layers is not None:
                hits[row] = _CachedRow(prompts[row][:length], [k for k, _ in layers], [v for _, v in layers])
        return hits

    def _stack(self, hits: list[_CachedRow | None], head: int) -> list[tuple[Any, Any]]:
        """The rows' cached keys/values, left-padded (zeros, masked) to ``head`` positions, per layer."""
        import torch

        template = next(hit for hit in hits if hit is not None)

        def padded(hit: _CachedRow | None, kind: str, layer: int) -> Any:
            ref = getattr(template, kind)[layer]
            tensor = getattr(hit, kind)[layer] if hit is not None else ref[:, :, :0]
            zeros = ref.new_zeros(ref.shape[0], ref.shape[1], head - tensor.shape[2], ref.shape[3])
            return torch.cat([zeros, tensor], dim=2)

        return [tuple(torch.cat([padded(hit, kind, layer) for hit in hits], dim=0) for kind in ("keys", "values"))
                for layer in range(len(template.keys))]

    def _keep(self, prompts: list[list[int]], masks: list[list[int]], completions: list[Completion],
              cache: Any) -> None:
        """Remember each row's keys/values for its prompt plus the sampled ids the cache covers."""
        import torch

        keys = [layer.keys for layer in cache.layers]
        values = [layer.values for layer in cache.layers]
        length = keys[0].shape[2]
        width = len(masks[0])
        rows = []
        for row, (prompt, mask, completion) in enumerate(zip(prompts, masks, completions, strict=True)):
            covered = max(0, min(len(completion.token_ids), length - width))
            columns = [i for i, m in enumerate(mask) if m] + list(range(width, width + covered))
            index = torch.tensor(columns, device=keys[0].device)
            rows.append(_CachedRow(prompt + completion.token_ids[:covered],
                                   [k[row:row + 1].index_select(2, index) for k in keys],
                                   [v[row:row + 1].index_select(2, index) for v in values]))
        self._cache = rows
        self._cache_version = self._weights_version()

    def _completion(self, ids: list[int], stopped_at: int | None, stop: str | None, limit: int) -> Completion:
        eos = self.tokenizer.eos_token_id
        eos_at = ids.index(eos) + 1 if eos in ids else None
        if stopped_at is not None and (eos_at is None or stopped_at <= eos_at):
            ids, reason = ids[:stopped_at], "stop"
        elif eos_at is not None:
            ids, reason, stop = ids[:eos_at], "eos", None
        else:
            ids, reason, stop = ids[:limit], "length", None
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return Completion(token_ids=ids, text=text, finish_reason=reason, stop=stop)


def _cast_parameters(model: Any, dtype: Any) -> None:
    """Cast floating parameters only: buffers such as rotary ``inv_freq`` keep their precision."""
    for parameter in model.parameters():
        if parameter.is_floating_point():
            parameter.data = parameter.data.to(dtype)
