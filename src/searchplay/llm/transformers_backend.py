"""Policy backend on Hugging Face transformers: batched, left-padded decoding with a KV cache.

All active rollouts go through one ``generate`` call per turn: a prefill of every row's new tokens, then
one model call per sampled token for the rows still writing. Each row stops on its own at a stop string,
EOS or ``max_new_tokens``; finished rows leave the batch once they are a quarter of it, so the rows still
writing decode without them (``model.generate`` would run every row to the longest one's end; measured
in ``benchmarks/rollout.py``). Greedy, or temperature then nucleus (top-p) sampling, optionally among
the tokens ``SamplingParams.allowed_tokens`` allows, or that write one of ``SamplingParams.choices`` (a token mask,
``choice_tokens``). Runs on CPU and CUDA.

Prefix cache: a multi-turn rollout passes its whole history back each turn, and all but the newest
tokens (the last sampled token and the environment's reply) were already run through the model on
the previous turn. The backend keeps the keys and values of every row of its last call; a prompt
that extends one of them only prefills its new tokens. Rows without a cached prefix share one: a prompt
prefix that several of them start with (the G rollouts of a question, a prompt family's instructions)
is prefilled once (``searchplay.prefix_kv``). Each row's new tokens are prefilled alone after its
prefix, so no padding is computed, and the rows' keys and values are then laid out left-padded in one
batch cache; positions count real tokens only, so a row's keys and values do not depend on the layout.
The cache is dropped whenever the weights change (``update_weights``, or any in-place update, seen
through the parameters' version counters).

Growing cache: transformers' ``DynamicLayer`` concatenates each step's keys and values onto the whole
cache, a copy of everything cached per decoded token; ``_GrowingLayer`` writes into spare room instead. On a
CPU a batch cache takes memory only where it is written (``searchplay.process.zeros_paged_on_write``): the rows'
left padding and the room no row reaches cost none, also when finished rows leave the batch (``keep_rows``).
Decode steps fold query heads onto their key/value heads whether or not the batch is padded
(``searchplay.llm.attention``).

Continuous batching (``generate_continuous``): a multi-turn caller hands over every rollout at once and
gets each finished generation back through a callback, which runs the search and returns the rollout's next
prompt; that row re-enters the running batch (its new tokens prefilled alone after its own cached keys and
values) while the other rows keep decoding, so no turn waits for its slowest row. New rows join once they
are a quarter of the rows still writing, or when none is; the batch cache is then laid out afresh. A row the
callback does not continue is finished: its keys and values are freed when it ends, not kept for a later call
(``keep_finished_rows=True`` keeps them), so an evaluation batch holds only the rows still in play. A row that
goes on stays a view of the running batch until it rejoins, and is copied out a layer at a time only when that
batch is laid out afresh or drops its finished rows, so its keys and values are never held twice for long.

Rollout dtype: generation may run in another dtype than the model it is given (``agent.rollout_dtype``:
bf16 rollouts from fp32 training weights, as verl's vLLM rollouts beside FSDP training). A module passed
in is then copied once, cast, and re-synced whenever the source's weights move.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from searchplay.llm.attention import use_lean_attention
from searchplay.llm.backend import Completion, SamplingParams, choice_tokens, end_token_ids
from searchplay.precision import bf16_is_native
from searchplay.process import large_blocks_mapped, return_free_heap, zeros_paged_on_write

log = logging.getLogger(__name__)

_STOP_TAIL_TOKENS = 16  # decoded tail checked for stop strings each step (longer than any stop string)


def pick_device(device: str) -> str:
    """'auto' -> 'cuda' when available, else 'cpu'."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    from searchplay.llm.weights import check_device

    check_device(device)
    return device


def pick_rollout_dtype(name: str | None, device: str) -> Any:
    """``agent.rollout_dtype`` -> a torch dtype, or None (generate in the model's own dtype).

    'auto': bf16 where the hardware computes it natively (CUDA with bf16, a CPU with AVX512-BF16, AMX or
    Arm BF16: ``searchplay.precision``), else None; 'model' or None: None.
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

        def adopt(self, keys: Any, values: Any, used: int) -> None:
            """Take ``keys``/``values`` [B, heads, used + room, dim] as the buffers; their first ``used`` positions
            are the cache."""
            self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
            self._buffers = (keys, values)
            self.keys, self.values = keys[..., :used, :], values[..., :used, :]
            self._view = self.keys

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

        def batch_select_indices(self, indices: Any) -> None:
            """Keep the ``indices`` rows; the old buffers go now, not at the next ``update`` (which rebuilds
            them from the selection), so the whole cache is never held twice."""
            super().batch_select_indices(indices)
            self._buffers = self._view = None

        def keep_rows(self, rows: list[int], starts: list[int]) -> None:
            """Keep batch rows ``rows``, each copied from its first real position (``starts``) on into new
            buffers with this layer's room: its left padding stays unwritten (``zeros_paged_on_write``), where
            ``batch_select_indices`` would write it twice, in the selection and in the rebuilt buffers."""
            used = self.get_seq_length()
            self.adopt(*(_rows_from(t, rows, starts, used + self.room) for t in (self.keys, self.values)), used=used)

    return _GrowingLayer


@dataclass
class _CachedRow:
    """Keys and values (per layer, ``[1, kv_heads, len(ids), head_dim]``) of a token sequence."""

    ids: list[int]
    keys: list[Any]
    values: list[Any]
    batch_view: bool = False  # views of a running batch's cache: copied out (``own_layer``) before that is freed

    def own_layer(self, layer: int) -> None:
        """Copy layer ``layer``'s keys and values out of the batch cache they view; a no-op for a row of its own."""
        if self.batch_view:
            self.keys[layer], self.values[layer] = _own_copy(self.keys[layer]), _own_copy(self.values[layer])

    def prefixes(self, prompt: list[int]) -> bool:
        """Whether ``ids`` is a strict prefix of ``prompt`` (a prefill needs at least one new token)."""
        return len(self.ids) < len(prompt) and prompt[:len(self.ids)] == self.ids


class TransformersBackend:
    """``PolicyBackend`` over a transformers causal LM (the trainer's module can be shared in-process)."""

    def __init__(self, model: str | Any, tokenizer: Any = None, dtype: str = "float32", device: str = "auto",
                 reuse_cache: bool = True, rollout_dtype: str | None = None, share_prefixes: bool = True,
                 keep_finished_rows: bool = False, weights_on_disk: bool = False):
        import torch

        from searchplay.assets import resolve
        from searchplay.llm.tokenizer import load_tokenizer
        from searchplay.llm.weights import load_causal_lm, weights_stamp

        self._weights_folder: Path | None = None  # weights_on_disk: read from here for each call, dropped after it
        if isinstance(model, str):
            self.tokenizer = tokenizer or load_tokenizer(model)
            torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
            self.device = pick_device(device)
            folder = resolve(model)
            model = load_causal_lm(folder, dtype=torch_dtype).to(self.device)
            self.rollout_dtype = pick_rollout_dtype(rollout_dtype, self.device)
            if self.rollout_dtype is not None:
                _cast_parameters(model, self.rollout_dtype)  # loaded for generation only: cast in place
            if weights_on_disk and any(Path(folder).glob("*.safetensors")):
                self._weights_folder, self._weights_stamp = Path(folder), weights_stamp(folder)
                _drop_parameters(model)
            elif weights_on_disk:
                log.info("%s has no safetensors file to read back: its weights stay in memory", folder)
        else:
            if weights_on_disk:
                raise ValueError("TransformersBackend(weights_on_disk=True) reads its weights from a folder: pass "
                                 "the folder, not a module")
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
        self.end_ids = end_token_ids(self.tokenizer, getattr(self.source, "generation_config", None))
        # the positions the model was trained on (prompt + response): past them its position encoding extrapolates
        self.max_model_len = getattr(getattr(self.source, "config", None), "max_position_embeddings", None)
        self.reuse_cache = reuse_cache
        self.keep_finished_rows = keep_finished_rows  # continuous batching: keep rows no callback continued
        self.share_prefixes = share_prefixes  # shared prompt prefixes prefilled once (searchplay.prefix_kv)
        self._cache: list[_CachedRow] = []
        self._cache_version: tuple[int, ...] = ()
        self.prefilled_tokens = 0  # prompt tokens run through the model (cache hits excluded), for benchmarks
        self.continuous_batching = True  # ``generate_continuous`` is available (agent.continuous_batching uses it)

    def update_weights(self, model: Any) -> None:
        """Generate with ``model`` from now on: shared in-process, or copied once when the rollout dtype differs.
        A DDP-wrapped trainer model (several processes) generates through the module it wraps."""
        from accelerate.utils import extract_model_from_parallel

        model = extract_model_from_parallel(model, keep_torch_compile=False)
        if model is not self.source:
            self._copy = None  # another module (e.g. LoRA merged into a new one): copy it afresh
            self._weights_folder = None  # its weights are in memory: none wait on disk any more
        self.source = model
        self.device = str(next(model.parameters()).device)
        self.model = self._generation_model()
        self._cache = []

    def release_memory(self) -> None:
        """Free what generation holds between calls, for a trainer's update to use: the cached keys and values,
        and the storage of the rollout-dtype copy, refilled from ``source`` before the next generation.

        Results do not change: an optimizer step invalidates the cache anyway (its weights' versions move), and
        the refill is the same cast as the copy it replaces. Call it only before the source's weights change.
        """
        import torch

        self._cache = []
        if self._copy is not None:
            for parameter in self._copy.parameters():
                parameter.data = torch.empty(0, dtype=parameter.dtype, device=parameter.device)
            self._source_version = ()  # refilled by the next _follow_source

    def _generation_model(self) -> Any:
        """The module that generates: the source itself, or its copy in ``rollout_dtype`` kept in sync."""
        import copy

        import torch

        source = self.source
        if self.rollout_dtype is None or next(source.parameters()).dtype == self.rollout_dtype:
            use_lean_attention(source)  # shared with the trainer, which switched it already
            source.eval()
            return source
        version = tuple(p._version for p in source.parameters())
        if self._copy is None:
            self._copy = copy.deepcopy(source)
            _cast_parameters(self._copy, self.rollout_dtype)
            use_lean_attention(self._copy)
            self._copy.eval()
        elif version != self._source_version:
            with torch.no_grad():
                for mine, theirs in zip(self._copy.parameters(), source.parameters(), strict=True):
                    if mine.shape != theirs.shape:  # storage freed by release_memory
                        mine.data = torch.empty(theirs.shape, dtype=mine.dtype, device=mine.device)
                    mine.copy_(theirs)
        self._source_version = version
        return self._copy

    def _follow_source(self) -> None:
        """Re-sync the rollout-dtype copy if the source moved in place (an optimizer step)."""
        if self._copy is not None and tuple(p._version for p in self.source.parameters()) != self._source_version:
            self.model = self._generation_model()

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[Completion]:
        """One batched decode (``_decode``); each row cut at its own stop string, EOS or length."""
        import torch

        if not prompts:
            return []
        sampling = with_token_mask(sampling, self.tokenizer)
        with self.weights_in_memory():
            self._follow_source()
            prompts = [list(p) for p in prompts]
            hits = self._share_prefixes(prompts, self._lookup(prompts))
            self.prefilled_tokens += sum(len(p) - (len(h.ids) if h else 0) for p, h in zip(prompts, hits, strict=True))
            if sampling.seed is not None:
                torch.manual_seed(sampling.seed)
            with torch.inference_mode(), large_blocks_mapped():
                logits, past, attention = self._prefill(prompts, hits, room=sampling.max_new_tokens + 1)
                completions, kept = self._decode(prompts, logits, attention, past, sampling)
            if self.reuse_cache:
                self._cache, self._cache_version = kept, self._weights_version()
        return completions

    @contextmanager
    def weights_in_memory(self) -> Iterator[None]:
        """With ``weights_on_disk``: the weights are read from their folder for the block and dropped after it (the
        same bytes each time, cast as at load; the prefix cache stays valid). Otherwise nothing happens. Each
        generation runs in one; code that calls ``model`` itself wraps its forwards in one too."""
        from searchplay.llm.weights import ModelLoadError, read_weights_into_memory, weights_stamp

        if self._weights_folder is None:
            yield
            return
        if weights_stamp(self._weights_folder) != self._weights_stamp:
            raise RuntimeError(f"{self._weights_folder}: its weights changed since this backend loaded them (written "
                               "again by another run?); a frozen model does not switch weights mid-run. Resume once "
                               "that run is done, or keep the weights in memory (selfplay.reference_on_disk=false)")
        read_weights_into_memory(self.source, self._weights_folder, mapped=True)  # freed to the system, not the heap
        if missing := [name for name, p in self.source.named_parameters() if p.numel() == 0]:
            _drop_parameters(self.source)
            raise ModelLoadError(f"{self._weights_folder}: no weights for {', '.join(missing[:3])} in its safetensors "
                                 "files; keep the weights in memory (selfplay.reference_on_disk=false)")
        try:
            yield
        finally:
            _drop_parameters(self.source)

    def generate_continuous(self, prompts: Sequence[Sequence[int]], limits: Sequence[int], sampling: SamplingParams,
                            on_finished: Callable[[list[tuple[int, Completion]]], list[tuple[int, list[int], int]]]
                            ) -> None:
        """Decode every prompt, handing each generation to ``on_finished`` as soon as it ends; the ``(index,
        prompt ids, token limit)`` continuations it returns join the running batch (continuous batching).

        ``limits[i]`` caps prompt i's new tokens (``sampling.max_new_tokens`` is not read). A continuation
        extends its index's last prompt and generation (a rollout's history plus the environment's reply), so
        only its new tokens are prefilled. ``sampling.seed`` seeds once; ``allowed_tokens`` gets the prompt index, and
        ``choices`` are indexed by it.
        """
        todo = [(index, list(prompt), limit) for index, (prompt, limit) in enumerate(zip(prompts, limits, strict=True))]
        if not todo:
            return
        with self.weights_in_memory():
            self._follow_source()
            self._run_continuous(todo, limits, with_token_mask(sampling, self.tokenizer), on_finished)

    def _run_continuous(self, todo: list[tuple[int, list[int], int]], limits: Sequence[int], sampling: SamplingParams,
                        on_finished: Callable[[list[tuple[int, Completion]]], list[tuple[int, list[int], int]]]
                        ) -> None:
        """``generate_continuous``'s loop over the running batch."""
        import torch

        hits: dict[int, _CachedRow | None] = dict(enumerate(  # each index's cached prefix for its next prefill
            self._share_prefixes([ids for _, ids, _ in todo], self._lookup([ids for _, ids, _ in todo]))))
        limit = dict(enumerate(limits))
        generated: dict[int, list[int]] = {index: [] for index, _, _ in todo}
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        run: _Running | None = None
        with torch.inference_mode(), large_blocks_mapped():
            while todo or (run is not None and run.alive):
                if todo and (run is None or not run.alive or 4 * len(todo) >= len(run.alive)):
                    run = self._join(run, todo, hits, limit, generated)
                    todo = []
                assert run is not None
                tokens = self._next_tokens(run.logits[run.alive], sampling, [run.index[s] for s in run.alive],
                                           generated)
                feed, ended = [0] * len(run.index), []
                for slot, token in zip(run.alive, tokens, strict=True):
                    index = run.index[slot]
                    generated[index].append(token)
                    feed[slot] = token
                    completion = self._finished(generated[index], sampling, limit[index])
                    if completion is not None:
                        ended.append((slot, index, completion))
                if ended:
                    finished = {slot for slot, _, _ in ended}
                    run.alive = [slot for slot in run.alive if slot not in finished]
                    going_on = on_finished([(index, completion) for _, index, completion in ended])
                    continued = {index for index, _, _ in going_on}
                    for slot, index, _ in ended:  # the cache holds every token but the one just sampled
                        # a row that goes on stays a view of the batch until it rejoins or the batch is rebuilt
                        hits[index] = None  # no other name holds a view: one whose prefix goes unused is freed
                        if index in continued or self.keep_finished_rows:
                            hits[index] = run.row(slot, run.ids[slot] + generated[index][:-1],
                                                  copy=index not in continued)
                            hits[index].batch_view = index in continued
                    for index, ids, new_limit in going_on:
                        todo.append((index, list(ids), new_limit))
                        limit[index], generated[index] = new_limit, []
                if not run.alive:
                    continue
                if 4 * (len(run.index) - len(run.alive)) >= len(run.index):
                    feed = [feed[slot] for slot in run.alive]
                    run.drop_finished([row for row in hits.values() if row is not None and row.batch_view])
                run.step(self.model, feed)
        if self.reuse_cache:
            self._cache = [row for row in hits.values() if row is not None]
            self._cache_version = self._weights_version()

    def _join(self, run: _Running | None, todo: list[tuple[int, list[int], int]], hits: dict[int, _CachedRow | None],
              limit: dict[int, int], generated: dict[int, list[int]]) -> _Running:
        """A new running batch: the rows still writing in ``run`` and the ``todo`` rows, prefilled after their own
        cached prefix (the hit must be a strict prefix of the new prompt; else the whole prompt is run)."""
        import torch

        prompts = [ids for _, ids, _ in todo]
        prefixes = [_usable_prefix(hits.pop(index, None), ids) for index, ids, _ in todo]  # each read once
        self.prefilled_tokens += sum(len(p) - (len(h.ids) if h else 0) for p, h in zip(prompts, prefixes, strict=True))
        alive = run.alive if run is not None else []  # the rows still writing keep their place, first
        carried = [run.row(slot, run.ids[slot] + generated[run.index[slot]]) for slot in alive]
        if run is not None:
            run.past = None  # the carried rows' views now hold its buffers, freed as they are copied
        index = [run.index[slot] for slot in alive] + [index for index, _, _ in todo]
        room = max(limit[i] - len(generated[i]) for i in index) + 1
        logits, past, attention = self._prefill(prompts, prefixes, room, carried)
        if alive:
            logits = torch.cat([run.logits[alive], logits])
        return _Running(index=index, ids=[run.ids[slot] for slot in alive] + prompts, past=past, attention=attention,
                        logits=logits, lengths=[len(row.ids) for row in carried] + [len(p) for p in prompts],
                        alive=list(range(len(index))))

    # ---- decoding ---------------------------------------------------------------------------------
    def _prefill(self, prompts: list[list[int]], hits: list[_CachedRow | None], room: int,
                 carried: Sequence[_CachedRow] = ()) -> tuple[Any, Any, Any]:
        """One left-padded batch cache with ``room`` free positions: the ``carried`` rows (a running batch's)
        first, then each prompt, its new tokens run alone after its cached prefix (no padding to compute).

        Consumes ``carried`` and ``hits``: each row goes into its slot as soon as it is known, into buffers
        allocated at their final size, and is dropped then (each carried row layer by layer, so the running
        batch they view is freed a layer at a time as the new one grows; a prompt's cached prefix once its row
        is prefilled). So a call never holds its rows beside the whole batch cache: in fp32 at 135M, 40 rows of
        1,400 tokens are 2.6 GB each way. On a CPU the buffers take memory only where written
        (``searchplay.process.zeros_paged_on_write``): the rows' left padding, read as zeros under the mask, and
        the room no row reaches hold none. A rejoining row's copy out of the old batch is mapped too, and the
        heap's free pages go back at the end (``return_free_heap``), so the freed copies and prefills are not kept
        beside the batch they went into. Returns the last position's logits of each prompt's row
        [len(prompts), V], the cache and its mask [B, L].
        """
        import torch

        ids = [row.ids for row in carried] + prompts
        length = max(len(row) for row in ids)
        attention = torch.tensor([[0] * (length - len(row)) + [1] * len(row) for row in ids], device=self.device)
        buffers: list[tuple[Any, Any]] = []  # per layer: keys, values [B, kv_heads, length + room, head_dim]

        def place(slot: int, row: _CachedRow, layer: int) -> None:
            if layer == len(buffers):  # shapes and dtype from the first row placed
                buffers.append(tuple(zeros_paged_on_write((len(ids), t.shape[1], length + room, t.shape[-1]),
                                                          t.dtype, t.device)
                                     for t in (row.keys[layer], row.values[layer])))
            start = length - len(row.ids)
            buffers[layer][0][slot, :, start:length] = row.keys[layer][0]
            buffers[layer][1][slot, :, start:length] = row.values[layer][0]
            row.keys[layer] = row.values[layer] = None

        viewing = [hit for hit in hits if hit is not None and hit.batch_view]  # rows of the batch ``carried`` views
        for layer in range(len(carried[0].keys) if carried else len(viewing[0].keys) if viewing else 0):
            for hit in viewing:  # copied out a layer at a time, so the old batch goes a layer at a time
                hit.own_layer(layer)
            for slot, row in enumerate(carried):
                place(slot, row, layer)
        for hit in viewing:
            hit.batch_view = False
        logits = []
        for slot, prompt in enumerate(prompts):
            last, row = self._prefill_row(prompt, hits[slot])
            hits[slot] = None
            logits.append(last)
            for layer in range(len(row.keys)):
                place(len(carried) + slot, row, layer)
        past = self._new_cache(room)
        for layer, (keys, values) in zip(past.layers, buffers, strict=True):
            layer.adopt(keys, values, used=length)
        return_free_heap()  # each row's prefill ran on the heap, and its keys and values are in the batch now
        return torch.stack(logits), past, attention

    def _prefill_row(self, prompt: list[int], hit: _CachedRow | None) -> tuple[Any, _CachedRow]:
        """``prompt``'s new tokens run alone after its cached prefix ``hit``: its last logits, its keys and values."""
        import torch

        from searchplay.prefix_kv import seeded_cache

        cache = seeded_cache(self.model.config, list(zip(hit.keys, hit.values, strict=True)) if hit else None)
        ids = torch.tensor([prompt[len(hit.ids) if hit else 0:]], device=self.device)
        output = self.model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        return output.logits[0, -1], _CachedRow(prompt, [layer.keys for layer in cache.layers],
                                                [layer.values for layer in cache.layers])

    def _decode(self, prompts: list[list[int]], logits: Any, attention: Any, past: Any,
                sampling: SamplingParams) -> tuple[list[Completion], list[_CachedRow]]:
        """Sample one token per step for every unfinished row, from the prefill's ``logits`` on.

        A row is done at a stop string, EOS or ``max_new_tokens``; its keys and values are kept then (for the
        next turn's prefix cache), and finished rows leave the batch once they are a quarter of it, so the
        rest decode without them (``model.generate`` would pad a finished row to the batch's end).
        """
        import torch

        rows = list(range(len(prompts)))  # batch position -> prompt index
        generated: list[list[int]] = [[] for _ in prompts]
        completions: list[Completion | None] = [None] * len(prompts)
        kept: list[_CachedRow | None] = [None] * len(prompts)
        positions = torch.tensor([[len(prompt) - 1] for prompt in prompts], device=self.device)  # real tokens only
        attention = torch.cat([attention, attention.new_ones(len(rows), 1)], dim=1)  # the first sampled token
        with torch.inference_mode():
            while True:
                tokens = self._next_tokens(logits, sampling, rows, generated)
                for slot, (row, token) in enumerate(zip(rows, tokens, strict=True)):
                    if completions[row] is not None:
                        continue
                    generated[row].append(token)
                    completions[row] = self._finished(generated[row], sampling)
                    if completions[row] is not None:  # the cache holds every token but the one just sampled
                        kept[row] = self._row_cache(past, attention, slot, prompts[row] + generated[row][:-1])
                done = [slot for slot, row in enumerate(rows) if completions[row] is not None]
                if len(done) == len(rows):
                    break
                step_ids = torch.tensor([[token] for token in tokens], device=self.device)
                positions = positions + 1
                if len(done) * 4 >= len(rows):  # drop the finished rows from the batch
                    kept_slots = [slot for slot in range(len(rows)) if slot not in done]
                    cached = past.layers[0].keys.shape[-2]
                    _keep_rows(past, kept_slots, [cached - int(attention[slot, :cached].sum()) for slot in kept_slots])
                    keep = torch.tensor(kept_slots, device=self.device)
                    rows = [rows[slot] for slot in kept_slots]
                    attention, positions, step_ids = attention[keep], positions[keep], step_ids[keep]
                logits = self.model(input_ids=step_ids, attention_mask=attention, position_ids=positions,
                                    past_key_values=past, use_cache=True, logits_to_keep=1).logits[:, -1]
                attention = torch.cat([attention, attention.new_ones(len(rows), 1)], dim=1)
        return completions, [row for row in kept if row is not None]  # type: ignore[return-value]

    def _next_tokens(self, logits: Any, sampling: SamplingParams, rows: list[int],
                     generated: list[list[int]]) -> list[int]:
        """One token per batch row: greedy at temperature 0, else sampled (temperature, then nucleus top-p),
        among the tokens ``sampling.allowed_tokens`` allows where it is set."""
        import torch

        logits = logits.float()
        if sampling.allowed_tokens is not None:
            allowed = torch.full_like(logits, float("-inf"))
            for slot, row in enumerate(rows):
                allowed[slot, sampling.allowed_tokens(row, generated[row])] = 0.0
            logits = logits + allowed
        if sampling.temperature <= 0:
            return logits.argmax(dim=-1).tolist()
        logits = logits / sampling.temperature
        if sampling.top_p < 1.0:
            ordered, order = logits.sort(dim=-1, descending=True)
            probs = ordered.softmax(dim=-1)
            ordered[(probs.cumsum(dim=-1) - probs) > sampling.top_p] = float("-inf")  # the first token always stays
            logits = torch.full_like(logits, float("-inf")).scatter(-1, order, ordered)
        return torch.multinomial(logits.softmax(dim=-1), 1)[:, 0].tolist()

    def _finished(self, ids: list[int], sampling: SamplingParams, limit: int | None = None) -> Completion | None:
        """The row's completion if its newest token ended it (a stop string, EOS, the token limit: ``limit``, else
        ``sampling.max_new_tokens``), else None."""
        if sampling.stop:
            tail = self.tokenizer.decode(ids[-_STOP_TAIL_TOKENS:], skip_special_tokens=False)
            hit = next((stop for stop in sampling.stop if stop in tail), None)
            if hit is not None:
                return self._completion(ids, "stop", hit)
        if ids[-1] in self.end_ids:
            return self._completion(ids, "eos", None)
        if len(ids) >= (sampling.max_new_tokens if limit is None else limit):
            return self._completion(ids, "length", None)
        return None

    def _row_cache(self, past: Any, attention: Any, slot: int, ids: list[int]) -> _CachedRow:
        """Batch row ``slot``'s keys and values at its real (unpadded) positions, which hold ``ids``."""
        import torch

        cached = past.layers[0].keys.shape[-2]  # the attention mask already has a column for the next token
        columns = torch.nonzero(attention[slot, :cached], as_tuple=True)[0]
        return _CachedRow(ids, [layer.keys[slot:slot + 1].index_select(2, columns) for layer in past.layers],
                          [layer.values[slot:slot + 1].index_select(2, columns) for layer in past.layers])

    # ---- prefix cache ---------------------------------------------------------------------------
    def _new_cache(self, room: int) -> Any:
        """An empty DynamicCache whose full-attention layers grow into spare room (``_GrowingLayer``)."""
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        growing = _growing_layer_class()
        cache = DynamicCache(config=self.model.config)
        cache.layers = [growing(room) if type(layer) is DynamicLayer else layer for layer in cache.layers]
        return cache

    def _weights_version(self) -> tuple[int, ...]:
        return tuple(p._version for p in self.model.parameters())

    def _lookup(self, prompts: list[list[int]]) -> list[_CachedRow | None]:
        """Per prompt, the longest cached row that is a strict prefix of it (None: prefill it all). The cache is
        emptied: the rows no prompt extends are freed now, not when the calling generation replaces them."""
        if not self.reuse_cache or not self._cache or self._weights_version() != self._cache_version:
            self._cache = []
            return [None] * len(prompts)
        hits: list[_CachedRow | None] = []
        for prompt in prompts:
            fits = [row for row in self._cache if row.prefixes(prompt)]
            hits.append(max(fits, key=lambda row: len(row.ids), default=None))
        self._cache = []
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

    def _completion(self, ids: list[int], reason: str, stop: str | None) -> Completion:
        return Completion(token_ids=ids, text=self.tokenizer.decode(ids, skip_special_tokens=True),
                          finish_reason=reason, stop=stop)  # type: ignore[arg-type]


@dataclass
class _Running:
    """The running batch of ``generate_continuous``: slot -> prompt index, that generation's prompt ids, the
    left-padded cache and its mask [B, L], the next-token logits [B, V], real tokens cached per slot, and the
    slots still writing (finished slots stay until a quarter of the batch has finished). A slot's real tokens
    are the cache's last ``lengths[slot]`` positions: its prefix is laid out right-aligned and every decode step
    appends one position to every slot."""

    index: list[int]
    ids: list[list[int]]
    past: Any
    attention: Any
    logits: Any
    lengths: list[int]
    alive: list[int]

    def row(self, slot: int, ids: list[int], copy: bool = False) -> _CachedRow:
        """Slot ``slot``'s keys and values: views of the cache (its last ``len(ids)`` positions), or copies that
        outlive it (``copy``)."""
        if len(ids) != self.lengths[slot]:
            raise RuntimeError(f"slot {slot} caches {self.lengths[slot]} tokens, not {len(ids)}")
        keys = [layer.keys[slot:slot + 1, :, -len(ids):] for layer in self.past.layers]
        values = [layer.values[slot:slot + 1, :, -len(ids):] for layer in self.past.layers]
        if copy:
            keys, values = [_own_copy(k) for k in keys], [_own_copy(v) for v in values]
        return _CachedRow(ids, keys, values)

    def drop_finished(self, waiting: Sequence[_CachedRow] = ()) -> None:
        """Remove the finished slots from the batch and its cache; the ``waiting`` rows (finished slots that will
        rejoin, viewing this cache) are copied out of it first, a layer at a time as the cache is rebuilt."""
        import torch

        keep = torch.tensor(self.alive, device=self.attention.device)
        cached = self.past.layers[0].keys.shape[-2]
        _keep_rows(self.past, self.alive, [cached - self.lengths[slot] for slot in self.alive], waiting)
        self.index = [self.index[slot] for slot in self.alive]
        self.ids = [self.ids[slot] for slot in self.alive]
        self.lengths = [self.lengths[slot] for slot in self.alive]
        self.attention, self.logits = self.attention[keep], self.logits[keep]
        self.alive = list(range(len(self.index)))

    def step(self, model: Any, feed: list[int]) -> None:
        """One decode step: each slot's newest token goes into the cache; the logits of the next come back."""
        import torch

        device = self.attention.device
        self.attention = torch.cat([self.attention, self.attention.new_ones(len(self.index), 1)], dim=1)
        positions = torch.tensor([[length] for length in self.lengths], device=device)
        self.logits = model(input_ids=torch.tensor([[token] for token in feed], device=device),
                            attention_mask=self.attention, position_ids=positions, past_key_values=self.past,
                            use_cache=True, logits_to_keep=1).logits[:, -1]
        self.lengths = [length + 1 for length in self.lengths]


def with_token_mask(sampling: SamplingParams, tokenizer: Any) -> SamplingParams:
    """``sampling`` with its ``choices`` (if any) turned into the ``allowed_tokens`` mask this backend applies."""
    if sampling.choices is None:
        return sampling
    if sampling.allowed_tokens is not None:
        raise ValueError("SamplingParams takes choices or allowed_tokens, not both")
    return replace(sampling, allowed_tokens=choice_tokens(tokenizer, sampling.choices), choices=None)


def _usable_prefix(hit: _CachedRow | None, prompt: list[int]) -> _CachedRow | None:
    """``hit`` where it is a strict prefix of ``prompt``, else None. A hit that does not prefix its prompt (a
    continuation cut or re-encoded) is dropped here, with no name left holding it, so a view of the running batch
    does not keep that batch in memory through the join."""
    return hit if hit is not None and hit.prefixes(prompt) else None


def _own_copy(tensor: Any) -> Any:
    """A copy of ``tensor`` in a mapping of its own (``zeros_paged_on_write``): a row copied out of a batch cache
    (about a megabyte a layer) goes back to the system when it is freed, where the heap would keep it. Off the
    CPU a plain clone: the device's allocator has no such heap, and zeros first would write the row twice."""
    if tensor.device.type != "cpu":
        return tensor.clone()
    return zeros_paged_on_write(tuple(tensor.shape), tensor.dtype, tensor.device).copy_(tensor)


def _rows_from(cache: Any, rows: list[int], starts: list[int], length: int) -> Any:
    """A new buffer [len(rows), heads, length, dim] holding ``cache``'s rows ``rows``, each from ``starts[i]`` on;
    everything before (left padding) and after stays zeros that take no memory on a CPU."""
    buffer = zeros_paged_on_write((len(rows), cache.shape[1], length, cache.shape[-1]), cache.dtype, cache.device)
    used = cache.shape[-2]
    for slot, (row, start) in enumerate(zip(rows, starts, strict=True)):
        buffer[slot, :, start:used] = cache[row, :, start:used]
    return buffer


def _keep_rows(past: Any, rows: list[int], starts: list[int], waiting: Sequence[_CachedRow] = ()) -> None:
    """Keep batch rows ``rows`` of every layer of ``past``, whose real (unpadded) positions start at ``starts``:
    growing layers copy only those (``keep_rows``), others select as transformers does. Each layer of the
    ``waiting`` rows, which view ``past``, is copied out just before that layer is rebuilt."""
    import torch

    growing = _growing_layer_class()
    for number, layer in enumerate(past.layers):
        for row in waiting:
            row.own_layer(number)
        if isinstance(layer, growing):
            layer.keep_rows(rows, starts)
        else:
            layer.batch_select_indices(torch.tensor(rows, device=layer.keys.device))
    for row in waiting:
        row.batch_view = False


def _drop_parameters(model: Any) -> None:
    """Free every parameter's storage (shapes go too; dtypes and devices stay for the next read)."""
    import torch

    for parameter in model.parameters():
        parameter.data = torch.empty(0, dtype=parameter.dtype, device=parameter.device)


def _cast_parameters(model: Any, dtype: Any) -> None:
    """Cast floating parameters only: buffers such as rotary ``inv_freq`` keep their precision."""
    for parameter in model.parameters():
        if parameter.is_floating_point():
            parameter.data = parameter.data.to(dtype)
