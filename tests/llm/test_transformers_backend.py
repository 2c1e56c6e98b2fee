"""TransformersBackend's prefix cache: multi-turn histories prefill only their new tokens, same output."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchplay.llm.backend import SamplingParams


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, smollm2_path: Path) -> Path:
    """A 2-layer Llama with grouped-query attention and SmolLM2's tokenizer, random weights (seed 0)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from searchplay.llm.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(str(smollm2_path))
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    folder = tmp_path_factory.mktemp("tiny-gqa")
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def backend(folder: Path, reuse_cache: bool):
    from searchplay.llm.transformers_backend import TransformersBackend

    return TransformersBackend(str(folder), device="cpu", reuse_cache=reuse_cache)


GREEDY = SamplingParams(max_new_tokens=6, temperature=0.0)


def run_turns(engine, turns: int = 3) -> list[list[list[int]]]:
    """Three turns of a changing batch: each history grows by what was sampled plus an environment reply;
    after the first turn a row finishes and a fresh prompt joins (different cached lengths per row)."""
    tok = engine.tokenizer
    prompts = [tok.encode(text) for text in ("Paris is the capital of", "A story about a dog", "Colors:")]
    reply = tok.encode(" <information>Doc 1: some text.</information>", add_special_tokens=False)
    sampled = []
    for turn in range(turns):
        completions = engine.generate(prompts, GREEDY)
        sampled.append([c.token_ids for c in completions])
        pairs = enumerate(zip(prompts, completions, strict=True))
        prompts = [p + c.token_ids + reply * (i + 1) for i, (p, c) in pairs]
        if turn == 0:
            prompts = [*prompts[1:], tok.encode("A new question arrives")]
    return sampled


def test_cache_gives_the_same_greedy_tokens_and_prefills_only_new_tokens(tiny_dir):
    cached, plain = backend(tiny_dir, True), backend(tiny_dir, False)
    assert run_turns(cached) == run_turns(plain)
    assert 0 < cached.prefilled_tokens < 0.6 * plain.prefilled_tokens  # the replies are new, the history is not


def test_cache_is_dropped_when_the_weights_change_in_place(tiny_dir):
    import torch

    engine = backend(tiny_dir, True)
    prompt = engine.tokenizer.encode("Paris is the capital of")
    first = engine.generate([prompt], GREEDY)[0]
    longer = prompt + first.token_ids + [42]
    with torch.no_grad():
        next(engine.model.parameters()).add_(0.01)  # an optimizer step on the shared module
    engine.prefilled_tokens = 0
    engine.generate([longer], GREEDY)
    assert engine.prefilled_tokens == len(longer)


def test_update_weights_drops_the_cache(tiny_dir):
    engine = backend(tiny_dir, True)
    prompt = engine.tokenizer.encode("Paris is the capital of")
    first = engine.generate([prompt], GREEDY)[0]
    engine.update_weights(engine.model)
    engine.prefilled_tokens = 0
    engine.generate([prompt + first.token_ids + [42]], GREEDY)
    assert engine.prefilled_tokens == len(prompt) + len(first.token_ids) + 1


def test_a_prompt_equal_to_a_cached_row_is_prefilled_again(tiny_dir):
    """The model needs at least one new token to produce the next-token logits."""
    engine = backend(tiny_dir, True)
    prompt = engine.tokenizer.encode("Paris is the capital of")
    first = engine.generate([prompt], GREEDY)[0]
    again = engine.generate([prompt], GREEDY)[0]
    assert again.token_ids == first.token_ids


def test_growing_cache_appends_in_place_and_matches_concatenation():
    import torch
    from transformers.cache_utils import DynamicLayer

    from searchplay.llm.transformers_backend import _growing_layer_class

    growing, plain = _growing_layer_class()(room=4), DynamicLayer()
    torch.manual_seed(0)
    for length in (5, 1, 1, 1, 1, 1, 3):  # a prefill, decode steps past the spare room, then a longer chunk
        keys, values = torch.randn(2, 3, length, 8), torch.randn(2, 3, length, 6)
        got, want = growing.update(keys, values), plain.update(keys, values)
        assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    buffer = growing._buffers[0]
    before = buffer.data_ptr()
    growing.update(torch.randn(2, 3, 1, 8), torch.randn(2, 3, 1, 6))
    assert growing.keys.data_ptr() == before == growing._buffers[0].data_ptr()  # written into the room, no copy


def test_growing_cache_follows_a_replaced_tensor():
    """crop / batch selection replace ``keys``: the next update must build on the replacement."""
    import weakref

    import torch

    from searchplay.llm.transformers_backend import _growing_layer_class

    layer = _growing_layer_class()(room=8)
    layer.update(torch.ones(3, 1, 4, 2), torch.ones(3, 1, 4, 2))
    old_buffer = weakref.ref(layer._buffers[0])
    layer.batch_select_indices(torch.tensor([0, 2]))
    assert old_buffer() is None  # the whole batch's buffer goes at the selection, not at the next update
    keys, _ = layer.update(torch.zeros(2, 1, 1, 2), torch.zeros(2, 1, 1, 2))
    assert keys.shape == (2, 1, 5, 2) and keys[:, :, :4].eq(1).all() and keys[:, :, 4].eq(0).all()


def test_kept_rows_match_a_batch_selection_and_leave_their_padding_unwritten():
    """Dropping finished rows copies each kept row from its first real position on: the same cache as
    transformers' batch selection (left padding zeros), room to grow in place, the padding never written."""
    import torch

    from searchplay.llm.transformers_backend import _growing_layer_class

    torch.manual_seed(0)
    lengths = [6, 2, 4]  # real tokens per row, left-padded to 6
    keys, values = torch.zeros(3, 2, 6, 4), torch.zeros(3, 2, 6, 5)
    for row, length in enumerate(lengths):
        keys[row, :, 6 - length:], values[row, :, 6 - length:] = torch.randn(2, length, 4), torch.randn(2, length, 5)
    kept, selected = _growing_layer_class()(room=3), _growing_layer_class()(room=3)
    for layer in (kept, selected):
        layer.update(keys.clone(), values.clone())
    kept.keep_rows([2, 1], [6 - lengths[2], 6 - lengths[1]])
    selected.batch_select_indices(torch.tensor([2, 1]))
    assert torch.equal(kept.keys, selected.keys) and torch.equal(kept.values, selected.values)
    buffer = kept._buffers[0]
    assert buffer.shape == (2, 2, 6 + 3, 4)
    step = (torch.randn(2, 2, 1, 4), torch.randn(2, 2, 1, 5))
    got, want = kept.update(*step), selected.update(*step)
    assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    assert kept._buffers[0] is buffer  # the next token went into the room


def test_dropping_finished_rows_decodes_the_same_logits_to_the_bit(tiny_dir):
    """A batch whose finished rows leave it (copied without their padding) samples what the same batch samples
    with transformers' own batch selection, logits equal to the bit."""
    import torch

    from searchplay.llm import transformers_backend

    prompts = [[1, 2, 3, 4, 5, 6, 7], [8, 9], [10, 11, 12, 13], [14, 15, 16]]
    eos = None

    def decode(select_plainly: bool) -> tuple[list[list[int]], list]:
        nonlocal eos
        engine = backend(tiny_dir, False)
        eos = engine.tokenizer.eos_token_id
        seen = []
        forward = engine.model.forward
        engine.model.forward = lambda *a, **k: (lambda out: (seen.append(out.logits.clone()), out)[1])(forward(*a, **k))
        sampling = SamplingParams(max_new_tokens=6, temperature=1.0, seed=5,
                                  allowed_tokens=lambda row, ids: [eos] if row == 1 else list(range(20, 60)))
        if select_plainly:
            original = transformers_backend._keep_rows
            transformers_backend._keep_rows = lambda past, rows, starts: [
                layer.batch_select_indices(torch.tensor(rows)) for layer in past.layers]
            try:
                completions = engine.generate(prompts, sampling)
            finally:
                transformers_backend._keep_rows = original
        else:
            completions = engine.generate(prompts, sampling)
        return [c.token_ids for c in completions], seen

    (lean_ids, lean_logits), (plain_ids, plain_logits) = decode(False), decode(True)
    assert lean_ids == plain_ids and lean_ids[1] == [eos] and len(lean_ids[0]) == 6
    assert len(lean_logits) == len(plain_logits)
    assert all(torch.equal(a, b) for a, b in zip(lean_logits, plain_logits, strict=True))


@pytest.mark.parametrize("continuous", [False, True])
def test_a_prefill_drops_each_rows_keys_once_they_are_in_the_batch_cache(tiny_dir, continuous):
    """Rows are prefilled one at a time and copied into the batch cache at once: when a row's prefill starts,
    the previous row's own keys and values are gone (only the batch cache holds them)."""
    import gc
    import weakref

    engine = backend(tiny_dir, True)
    engine.share_prefixes = False  # every row prefilled from its first token
    prefill_row, alive_before = engine._prefill_row, []
    previous: list[weakref.ref] = []

    def watched(prompt, hit):
        gc.collect()
        alive_before.append(sum(ref() is not None for ref in previous))
        last, row = prefill_row(prompt, hit)
        previous[:] = [weakref.ref(t) for t in (*row.keys, *row.values)]
        return last, row

    engine._prefill_row = watched
    prompts = [engine.tokenizer.encode(text) for text in ("Paris is the capital of", "A dog", "Colors: red,")]
    if continuous:
        engine.generate_continuous(prompts, [3, 3, 3], GREEDY, lambda ended: [])
    else:
        engine.generate(prompts, GREEDY)
    assert alive_before == [0, 0, 0]


def test_a_continuations_cached_prefix_is_dropped_once_its_row_is_prefilled(tiny_dir):
    """Continuous batching keeps a finished row's keys and values only until its continuation is prefilled
    after them; the running batch a join replaces is gone once its rows are copied. The tokens stay those of
    the same prompts generated alone (test above)."""
    import gc
    import weakref

    engine = backend(tiny_dir, True)
    engine.share_prefixes = False  # every hit is a continuation's own copy
    prefill_row, consumed, alive_before = engine._prefill_row, [], []

    def watched(prompt, hit):
        gc.collect()
        alive_before.append(sum(ref() is not None for ref in consumed))
        result = prefill_row(prompt, hit)
        if hit is not None:
            consumed.extend(weakref.ref(t) for t in (*hit.keys, *hit.values))
        return result

    engine._prefill_row = watched
    tok = engine.tokenizer
    prompts = [tok.encode(text) for text in ("Paris is the capital of", "A story about a dog", "Colors:")]
    generations = continue_turns(engine, prompts, [2, 9, 4], [2, 0, 1],
                                 tok.encode(" <information>Doc 1.</information>", add_special_tokens=False))
    assert len(generations) == 6 and len(consumed) == 3 * 2 * 2  # three continuations, two layers, keys + values
    assert set(alive_before) == {0}


def test_rollout_dtype_generates_from_a_synced_copy(tiny_dir):
    """bf16 rollouts beside fp32 weights: a cast copy, re-synced when the source moves in place."""
    import torch
    from transformers import AutoModelForCausalLM

    from searchplay.llm.tokenizer import load_tokenizer

    source = AutoModelForCausalLM.from_pretrained(str(tiny_dir))
    engine = backend_for(source, load_tokenizer(str(tiny_dir)), "bfloat16")
    assert engine.model is not source and next(engine.model.parameters()).dtype == torch.bfloat16
    assert next(source.parameters()).dtype == torch.float32
    prompt = engine.tokenizer.encode("Paris is the capital of")
    engine.generate([prompt], GREEDY)
    with torch.no_grad():
        next(source.parameters()).add_(1.0)  # an optimizer step on the trainer's module
    engine.generate([prompt], GREEDY)
    mine, theirs = next(engine.model.parameters()), next(source.parameters())
    assert torch.equal(mine, theirs.to(torch.bfloat16))
    rotary = dict(engine.model.named_buffers())
    assert all(buffer.dtype == torch.float32 for name, buffer in rotary.items() if "inv_freq" in name)


def test_rollout_dtype_model_shares_the_module(tiny_dir):
    from transformers import AutoModelForCausalLM

    from searchplay.llm.tokenizer import load_tokenizer

    source = AutoModelForCausalLM.from_pretrained(str(tiny_dir))
    assert backend_for(source, load_tokenizer(str(tiny_dir)), "model").model is source


def backend_for(model, tokenizer, rollout_dtype: str):
    from searchplay.llm.transformers_backend import TransformersBackend

    return TransformersBackend(model, tokenizer, rollout_dtype=rollout_dtype)


def test_auto_rollout_dtype_is_bf16_only_where_the_cpu_has_bf16_instructions(monkeypatch):
    import torch

    from searchplay import precision
    from searchplay.llm.transformers_backend import pick_rollout_dtype

    monkeypatch.setattr(precision, "cpu_bf16_instructions", lambda: "AMX")
    assert pick_rollout_dtype("auto", "cpu") is torch.bfloat16
    monkeypatch.setattr(precision, "cpu_bf16_instructions", lambda: None)
    assert pick_rollout_dtype("auto", "cpu") is None
    assert pick_rollout_dtype("model", "cpu") is None and pick_rollout_dtype("float16", "cpu") is torch.float16


def test_shared_prompt_prefixes_are_prefilled_once_with_the_same_greedy_tokens(tiny_dir):
    """A group of identical prompts and a prompt sharing their instructions (as a Solver group and its batch):
    the shared prefixes run once, and every row samples what it samples alone."""
    from searchplay.llm.transformers_backend import TransformersBackend

    shared = TransformersBackend(str(tiny_dir), device="cpu", reuse_cache=False)
    alone = TransformersBackend(str(tiny_dir), device="cpu", reuse_cache=False, share_prefixes=False)
    tok = shared.tokenizer
    instructions = tok.encode("Answer the given question, and search when you lack some knowledge. " * 2)
    group = instructions + tok.encode(" Question: who wrote Hamlet?")
    prompts = [group, group, group, instructions + tok.encode(" Question: which river flows through Vienna?")]
    assert [c.token_ids for c in shared.generate(prompts, GREEDY)] == [c.token_ids for c in alone.generate(prompts,
                                                                                                        GREEDY)]
    common = next(i for i, (a, b) in enumerate(zip(group, prompts[-1], strict=False)) if a != b)
    assert alone.prefilled_tokens == sum(len(p) for p in prompts)
    assert shared.prefilled_tokens == len(group) - 1 + 3 * 1 + (len(prompts[-1]) - common)


def test_finished_rows_leave_the_batch_and_allowed_tokens_bind_sampling(tiny_dir):
    """A row that ends at once (only EOS allowed) is decoded no further: later steps run the other rows only;
    sampled rows keep to their allowed tokens under temperature and top-p."""
    engine = backend(tiny_dir, True)
    eos = engine.tokenizer.eos_token_id
    allowed = {0: [eos], 1: [5, 6], 2: [7], 3: [8, 9]}
    sampling = SamplingParams(max_new_tokens=5, temperature=1.0, top_p=0.9, seed=3,
                              allowed_tokens=lambda row, ids: allowed[row])
    widths = []
    forward = engine.model.forward
    engine.model.forward = lambda *args, **kwargs: (widths.append(kwargs["input_ids"].shape[0]), forward(
        *args, **kwargs))[1]
    prompts = [engine.tokenizer.encode(text) for text in ("One", "Two words", "Three more words", "Four")]
    completions = engine.generate(prompts, sampling)
    assert completions[0].token_ids == [eos] and completions[0].finish_reason == "eos"
    for row in (1, 2, 3):
        assert completions[row].finish_reason == "length" and set(completions[row].token_ids) <= set(allowed[row])
    assert widths[:4] == [1, 1, 1, 1]  # the prefill: one row at a time
    assert widths[4:] == [3, 3, 3, 3]  # four more tokens for the three rows still writing


def test_a_row_ends_on_any_end_token_of_the_models_generation_config(tiny_dir, tmp_path):
    """Qwen2.5's generation config ends on <|im_end|> and <|endoftext|>, its tokenizer names one: vLLM stops on
    both, and so does this backend (``end_token_ids``)."""
    import json
    import shutil

    folder = tmp_path / "two-ends"
    shutil.copytree(tiny_dir, folder)
    config = json.loads((folder / "generation_config.json").read_text())
    other_end = 0  # SmolLM2's <|endoftext|>; its tokenizer's EOS is <|im_end|>
    config["eos_token_id"] = [config["eos_token_id"], other_end]
    (folder / "generation_config.json").write_text(json.dumps(config))
    engine = backend(folder, True)
    assert other_end != engine.tokenizer.eos_token_id and engine.end_ids == set(config["eos_token_id"])
    sampling = SamplingParams(max_new_tokens=5, temperature=0.0, allowed_tokens=lambda row, ids: [other_end])
    [completion] = engine.generate([engine.tokenizer.encode("One")], sampling)
    assert completion.token_ids == [other_end] and completion.finish_reason == "eos"


def continue_turns(engine, prompts, limits, more_turns, reply):
    """``generate_continuous`` where row i goes on for ``more_turns[i]`` more generations, each time with its
    history plus ``reply`` and a limit one token larger; returns every generation as (row, prompt, limit, ids)."""
    generations, left, histories = [], list(more_turns), [list(p) for p in prompts]
    current = dict(enumerate(limits))

    def on_finished(ended):
        going_on = []
        for row, completion in ended:
            generations.append((row, histories[row], current[row], completion.token_ids))
            if left[row]:
                left[row] -= 1
                histories[row] = histories[row] + completion.token_ids + reply
                current[row] += 1
                going_on.append((row, histories[row], current[row]))
        return going_on

    engine.generate_continuous(prompts, limits, GREEDY, on_finished)
    return generations


def test_continuous_batching_samples_what_each_generation_samples_alone(tiny_dir):
    """Rows of different lengths and turn counts: every generation, whichever rows it decoded beside, gives the
    greedy tokens of the same prompt generated alone, and a continuation prefills only its new tokens."""
    engine, alone = backend(tiny_dir, True), backend(tiny_dir, False)
    tok = engine.tokenizer
    prompts = [tok.encode(text) for text in ("Paris is the capital of", "A story about a dog", "Colors:")]
    reply = tok.encode(" <information>Doc 1: some text.</information>", add_special_tokens=False)
    generations = continue_turns(engine, prompts, [2, 9, 4], [2, 0, 1], reply)
    assert sorted(row for row, *_ in generations) == [0, 0, 0, 1, 2, 2]
    for _, prompt, limit, ids in generations:
        assert len(ids) == limit
        assert ids == alone.generate([prompt], SamplingParams(max_new_tokens=limit, temperature=0.0))[0].token_ids
    continuations = len(generations) - len(prompts)
    assert engine.prefilled_tokens == sum(map(len, prompts)) + continuations * (1 + len(reply))


def test_a_continuation_joins_the_rows_still_writing(tiny_dir):
    """Row 0 ends after 2 tokens and goes on while row 1 writes 9: its next generation decodes in the same
    forwards as row 1 (batch width 2), not after it."""
    engine = backend(tiny_dir, True)
    widths = []
    forward = engine.model.forward
    engine.model.forward = lambda *args, **kwargs: (widths.append(tuple(kwargs["input_ids"].shape)), forward(
        *args, **kwargs))[1]
    tok = engine.tokenizer
    prompts = [tok.encode("Paris is the capital of"), tok.encode("A story about a dog")]
    continue_turns(engine, prompts, [2, 9], [1, 0], tok.encode(" ok", add_special_tokens=False))
    decode = [width for width, length in widths if length == 1 and width >= 1]
    assert widths[:2] == [(1, len(prompts[0])), (1, len(prompts[1]))]  # each prompt prefilled alone
    assert (1, 2) in widths  # the continuation's new tokens: the last sampled token and the reply
    assert len(decode) < 8 + 2 and max(decode) == 2  # the continuation decoded beside row 1


def test_continuous_batching_frees_each_finished_row_when_it_ends(tiny_dir, monkeypatch):
    """A row the callback does not continue is finished: its keys and values are never copied out of the running
    batch and none stay after the call; ``keep_finished_rows`` keeps them for a later call. A row that goes on
    views the batch until it rejoins (no copy at its end). The tokens agree."""
    from searchplay.llm import transformers_backend
    from searchplay.llm.transformers_backend import TransformersBackend

    copies = []
    row = transformers_backend._Running.row
    monkeypatch.setattr(transformers_backend._Running, "row", lambda self, slot, ids, copy=False: (
        copies.append(copy), row(self, slot, ids, copy))[1])
    freeing = backend(tiny_dir, True)
    keeping = TransformersBackend(str(tiny_dir), device="cpu", keep_finished_rows=True)
    tok = freeing.tokenizer
    prompts = [tok.encode(text) for text in ("Paris is the capital of", "A story about a dog", "Colors:")]
    reply = tok.encode(" <information>Doc 1: some text.</information>", add_special_tokens=False)

    freed = continue_turns(freeing, prompts, [2, 3, 4], [2, 0, 1], reply)
    freed_copies, copies[:] = copies.count(True), []
    kept = continue_turns(keeping, prompts, [2, 3, 4], [2, 0, 1], reply)
    assert [ids for *_, ids in freed] == [ids for *_, ids in kept]
    assert freed_copies == 0 and copies.count(True) == 3  # none; each row's last generation, kept for later
    assert freeing._cache == []
    last = {r: len(prompt) + len(ids) - 1 for r, prompt, _, ids in kept}  # each row's last generation, cached
    assert sorted(len(cached.ids) for cached in keeping._cache) == sorted(last.values())


def test_continuous_batching_needs_a_limit_per_prompt(tiny_dir):
    engine = backend(tiny_dir, True)
    with pytest.raises(ValueError):
        engine.generate_continuous([[1, 2, 3]], [], GREEDY, lambda ended: [])


def test_release_memory_frees_the_rollout_copy_and_refills_it_with_the_same_cast(tiny_dir):
    """A trainer's update runs between ``release_memory`` and the next generation; what generates after is the
    source's fresh bf16 cast, bit for bit what the kept copy would have been, and the greedy tokens agree."""
    import torch

    from searchplay.llm.tokenizer import load_tokenizer
    from searchplay.llm.transformers_backend import TransformersBackend
    from searchplay.llm.weights import load_causal_lm

    source = load_causal_lm(str(tiny_dir), dtype=torch.float32)
    tokenizer = load_tokenizer(str(tiny_dir))
    kept, released = (TransformersBackend(source, tokenizer, rollout_dtype="bfloat16") for _ in range(2))
    prompt = tokenizer.encode("Paris is the capital of")
    assert kept.generate([prompt], GREEDY)[0].token_ids == released.generate([prompt], GREEDY)[0].token_ids

    released.release_memory()
    assert released._cache == [] and all(p.numel() == 0 for p in released._copy.parameters())
    with torch.no_grad():
        for parameter in source.parameters():  # an optimizer step on the source
            parameter.mul_(1.01)
    after = released.generate([prompt], GREEDY)[0].token_ids
    assert after == kept.generate([prompt], GREEDY)[0].token_ids
    for mine, theirs in zip(released._copy.parameters(), kept._copy.parameters(), strict=True):
        assert mine.dtype == torch.bfloat16 and torch.equal(mine, theirs)


def test_release_memory_without_a_copy_keeps_the_shared_module(tiny_dir):
    engine = backend(tiny_dir, True)
    prompt = engine.tokenizer.encode("Paris is the capital of")
    first = engine.generate([prompt], GREEDY)[0]
    engine.release_memory()  # fp32 generation shares the source: only the cache goes
    assert engine._cache == [] and next(engine.model.parameters()).numel() > 0
    assert engine.generate([prompt], GREEDY)[0].token_ids == first.token_ids


def test_weights_on_disk_are_read_for_each_call_and_give_the_same_generations(tiny_dir):
    """A frozen backend whose weights wait on disk: no parameter storage between calls, the same tokens and
    logits as the same backend in memory, and its prefix cache still serves the next turn."""
    import torch

    from searchplay.llm.transformers_backend import TransformersBackend

    kept = backend(tiny_dir, True)
    waiting = TransformersBackend(str(tiny_dir), device="cpu", reuse_cache=True, weights_on_disk=True)
    assert all(p.numel() == 0 for p in waiting.model.parameters())
    assert run_turns(waiting) == run_turns(kept)
    assert waiting.prefilled_tokens == kept.prefilled_tokens  # later turns prefilled only their new tokens
    assert all(p.numel() == 0 for p in waiting.model.parameters())
    tok = kept.tokenizer
    prompts = [tok.encode("Paris is the capital of"), tok.encode("Colors:")]
    assert continue_turns(waiting, prompts, [3, 5], [1, 0], tok.encode(" ok", add_special_tokens=False)) == \
        continue_turns(kept, prompts, [3, 5], [1, 0], tok.encode(" ok", add_special_tokens=False))
    with waiting.weights_in_memory(), torch.no_grad():  # code that runs the model itself
        ids = torch.tensor([prompts[0]])
        assert torch.equal(waiting.model(input_ids=ids).logits, kept.model(input_ids=ids).logits)
    assert all(p.numel() == 0 for p in waiting.model.parameters())
    from_disk = waiting.generate([prompts[0]], GREEDY)[0].token_ids
    torch.manual_seed(0)
    with torch.no_grad():  # trained weights, unlike those on disk
        for parameter in kept.model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5)
    fresh = TransformersBackend(kept.model, tokenizer=kept.tokenizer, device="cpu", reuse_cache=False)  # no old KV
    trained = fresh.generate([prompts[0]], GREEDY)[0].token_ids
    assert trained != from_disk
    waiting.update_weights(kept.model)  # a module in memory from now on: nothing is read over it
    assert waiting.generate([prompts[0]], GREEDY)[0].token_ids == trained
    assert all(p.numel() > 0 for p in waiting.model.parameters())


def test_weights_on_disk_that_change_mid_run_stop_the_run(tiny_dir, tmp_path):
    import shutil

    from searchplay.llm.transformers_backend import TransformersBackend

    folder = tmp_path / "model"
    shutil.copytree(tiny_dir, folder)
    waiting = TransformersBackend(str(folder), device="cpu", weights_on_disk=True)
    weights = next(folder.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes())  # written again: a new modification time
    with pytest.raises(RuntimeError, match="weights changed since this backend loaded them"):
        waiting.generate([waiting.tokenizer.encode("Colors:")], GREEDY)
    with pytest.raises(ValueError, match="reads its weights from a folder"):
        TransformersBackend(waiting.model, tokenizer=waiting.tokenizer, weights_on_disk=True)


@pytest.mark.parametrize(("limits", "more_turns"), [
    ([2, 9, 9, 9, 9], [1, 0, 0, 0, 0]),  # row 0 rejoins four rows still writing, no batch rebuilt in between
    ([2, 2, 2], [1, 1, 1]),  # every row ends at once and goes on: the new batch carries nothing
    ([2, 9, 4], [2, 0, 1])])  # rows end while the batch drops its finished rows
def test_a_row_that_goes_on_views_the_batch_until_it_rejoins_and_samples_the_same(tiny_dir, limits, more_turns):
    engine, alone = backend(tiny_dir, True), backend(tiny_dir, False)
    tok = engine.tokenizer
    texts = ("Paris is the capital of", "A story about a dog", "Colors:", "One two three", "The weather today")
    prompts = [tok.encode(text) for text in texts[:len(limits)]]
    reply = tok.encode(" ok then", add_special_tokens=False)
    generations = continue_turns(engine, prompts, limits, more_turns, reply)
    assert len(generations) == len(prompts) + sum(more_turns)
    for _, prompt, limit, ids in generations:
        assert ids == alone.generate([prompt], SamplingParams(max_new_tokens=limit, temperature=0.0))[0].token_ids
    assert engine._cache == []  # nothing viewing a freed batch is left behind


def test_rows_waiting_to_rejoin_are_copied_out_as_the_batch_drops_its_finished_rows():
    """Dropping finished rows frees the old buffers a layer at a time; a finished row that will rejoin (a view of
    them) gets its own copy of each layer first, with the same values."""
    import weakref
    from types import SimpleNamespace

    import torch

    from searchplay.llm.transformers_backend import _CachedRow, _growing_layer_class, _keep_rows

    torch.manual_seed(0)
    layers = [_growing_layer_class()(room=2) for _ in range(2)]
    for layer in layers:
        layer.update(torch.randn(3, 1, 4, 2), torch.randn(3, 1, 4, 2))
    old = [weakref.ref(layer._buffers[0]) for layer in layers]
    waiting = _CachedRow([1, 2, 3], [layer.keys[1:2, :, -3:] for layer in layers],
                         [layer.values[1:2, :, -3:] for layer in layers], batch_view=True)
    expected = [key.clone() for key in waiting.keys]
    _keep_rows(SimpleNamespace(layers=layers), [0, 2], [0, 0], [waiting])
    assert not waiting.batch_view and all(ref() is None for ref in old)  # nothing views the old buffers
    assert all(torch.equal(key, want) for key, want in zip(waiting.keys, expected, strict=True))
    assert layers[0].keys.shape == (2, 1, 4, 2)


def test_a_row_copied_off_the_cpu_is_a_plain_clone(monkeypatch):
    """Off the CPU a copied row is cloned, not zero-filled and then written (a meta tensor stands for a GPU's)."""
    import torch

    import searchplay.llm.transformers_backend as backend

    monkeypatch.setattr(backend, "zeros_paged_on_write", lambda *args: pytest.fail("zero-filled off the CPU"))
    row = torch.empty(1, 2, 3, 4, device="meta")
    copy = backend._own_copy(row)
    assert copy.device.type == "meta" and copy.shape == row.shape and copy is not row


def test_a_row_copied_out_of_the_batch_has_a_mapping_that_goes_when_it_does(monkeypatch):
    """A row copied out of a batch cache (``own_layer``) holds the same values in memory of its own, which goes
    back to the system once the row is dropped: the heap would keep it, beside the batch it was copied into."""
    import gc
    import mmap
    import weakref

    import torch

    from searchplay.llm.transformers_backend import _CachedRow

    mappings = []
    new_mapping = mmap.mmap
    monkeypatch.setattr(mmap, "mmap", lambda *args, **kwargs: (lambda made: (mappings.append(weakref.ref(made)),
                                                                              made)[1])(new_mapping(*args, **kwargs)))
    batch = torch.randn(3, 2, 5, 4)
    row = _CachedRow([1, 2, 3], [batch[1:2, :, -3:]], [batch[2:3, :, -3:]], batch_view=True)
    row.own_layer(0)
    assert torch.equal(row.keys[0], batch[1:2, :, -3:]) and torch.equal(row.values[0], batch[2:3, :, -3:])
    assert row.keys[0].untyped_storage().data_ptr() != batch.untyped_storage().data_ptr()
    assert len(mappings) == 2 and all(ref() is not None for ref in mappings)
    del row
    gc.collect()
    assert all(ref() is None for ref in mappings)


def test_a_prefill_hands_the_heaps_free_pages_back(tiny_dir, monkeypatch):
    from searchplay.llm import transformers_backend

    engine = backend(tiny_dir, True)
    trims = []
    monkeypatch.setattr(transformers_backend, "return_free_heap", lambda: trims.append(1))
    engine.generate([engine.tokenizer.encode("Paris is the capital of")], GREEDY)
    assert trims == [1]


@pytest.mark.parametrize("extends", [True, False])
def test_a_join_frees_the_old_batch_before_the_rejoining_rows_are_prefilled(tiny_dir, monkeypatch, extends):
    """When rows rejoin, the old batch is gone (freed a layer at a time as the rows still writing are copied)
    before the rejoining rows are prefilled, also when a continuation does not extend its row's cached tokens:
    that row's view is dropped, not kept through the join. (Views made under inference mode record no base, so
    the batch buffers' own mappings are watched.)"""
    import mmap
    import weakref

    from searchplay.llm import transformers_backend

    engine = backend(tiny_dir, True)
    mappings, seen = [], {"old": [], "alive": []}
    new_mapping = mmap.mmap
    monkeypatch.setattr(mmap, "mmap", lambda *args, **kwargs: (lambda made: (mappings.append(weakref.ref(made)),
                                                                              made)[1])(new_mapping(*args, **kwargs)))
    engine_class = transformers_backend.TransformersBackend
    join, prefill_row = engine_class._join, engine_class._prefill_row

    def watched_join(self, run, *args):
        seen["old"] = [ref for ref in mappings if ref() is not None] if run is not None else []
        return join(self, run, *args)

    def watched_prefill_row(self, prompt, hit):
        if seen["old"]:
            seen["alive"].append(sum(ref() is not None for ref in seen["old"]))
            seen["old"] = []
        return prefill_row(self, prompt, hit)

    monkeypatch.setattr(engine_class, "_join", watched_join)
    monkeypatch.setattr(engine_class, "_prefill_row", watched_prefill_row)
    tok = engine.tokenizer
    prompts = [tok.encode(text) for text in ("Paris is the capital of", "A story about a dog", "Colors:",
                                             "One two three", "The weather today")]
    reply = tok.encode(" ok then", add_special_tokens=False)
    first: dict = {}

    def on_finished(ended):
        going_on = []
        for row, completion in ended:
            if row == 0 and row not in first:
                first[row] = completion.token_ids
                kept = completion.token_ids if extends else completion.token_ids[:-2]  # cut: no longer a prefix
                going_on.append((row, prompts[0] + kept + reply, 3))
        return going_on

    engine.generate_continuous(prompts, [2, 9, 9, 9, 9], GREEDY, on_finished)
    assert seen["alive"] == [0]  # one join, and no layer of the old batch left when its new row is prefilled


def test_choices_and_a_token_hook_are_not_both_taken():
    from searchplay.llm.transformers_backend import with_token_mask

    with pytest.raises(ValueError, match="not both"):
        with_token_mask(SamplingParams(choices=(("0}",),), allowed_tokens=lambda row, ids: [0]), tokenizer=None)
