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
