"""lean_sdpa_attention: transformers' sdpa for decode steps (packed) and forwards with gradient (recomputed)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def tiny_gqa(seed: int = 0):
    """A 2-layer Llama, 4 query heads on 2 key/value heads, random weights, sdpa attention."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         attn_implementation="sdpa")
    return LlamaForCausalLM(config).eval()


def decode_logits(model, padded: bool, steps: int = 4) -> torch.Tensor:
    """Logits of ``steps`` one-token decode steps after a 12-token prefill, for 3 rows (row 0 left-padded)."""
    from transformers import DynamicCache

    torch.manual_seed(1)
    ids = torch.randint(3, 97, (3, 12))
    mask = torch.ones(3, 12, dtype=torch.long)
    if padded:
        mask[0, :5] = 0
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = []
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache).logits
        for _ in range(steps):
            token = logits[:, -1:].argmax(-1)
            mask = torch.cat([mask, mask.new_ones(3, 1)], dim=1)
            positions = positions[:, -1:] + 1
            logits = model(input_ids=token, attention_mask=mask, position_ids=positions, past_key_values=cache).logits
            out.append(logits[:, -1])
    return torch.stack(out)


@pytest.mark.parametrize("padded", [False, True])
def test_decode_steps_match_sdpa_with_and_without_padding(padded):
    from searchplay.llm.attention import NAME, use_lean_attention

    model = tiny_gqa()
    reference = decode_logits(model, padded)
    use_lean_attention(model)
    assert model.config._attn_implementation == NAME
    torch.testing.assert_close(decode_logits(model, padded), reference, rtol=1e-5, atol=1e-5)


def test_prefill_and_training_forwards_are_unchanged():
    from searchplay.llm.attention import use_lean_attention

    model = tiny_gqa().train()
    ids = torch.randint(3, 97, (2, 10))
    reference = model(input_ids=ids).logits
    use_lean_attention(model)
    torch.testing.assert_close(model(input_ids=ids).logits, reference)


def test_other_attention_implementations_are_left_alone():
    from searchplay.llm.attention import use_lean_attention

    model = tiny_gqa()
    model.config._attn_implementation = "eager"
    use_lean_attention(model)
    assert model.config._attn_implementation == "eager"


def test_saved_config_keeps_no_trace_of_the_switch(tmp_path):
    import json

    from searchplay.llm.attention import NAME, use_lean_attention

    model = tiny_gqa()
    use_lean_attention(model)
    model.save_pretrained(tmp_path)
    assert NAME not in json.dumps(json.loads((tmp_path / "config.json").read_text()))


def cached_chunk_backward(model) -> tuple[torch.Tensor, list[tuple[int, ...]]]:
    """The segmented forward's shape: 20 prompt tokens into a KV cache without gradient, then 6 tokens with
    gradient attending to them (a mask), then 4 more; returns every parameter's gradient, flattened, and the
    shapes of the tensors autograd kept for the backward."""
    from transformers import DynamicCache

    torch.manual_seed(2)
    ids = torch.randint(3, 97, (1, 30))
    cache = DynamicCache(config=model.config)
    model.zero_grad(set_to_none=True)
    kept = []

    def keep(tensor):
        kept.append(tuple(tensor.shape))
        return tensor

    with torch.no_grad():
        model(input_ids=ids[:, :20], past_key_values=cache, use_cache=True)
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
        first = model(input_ids=ids[:, 20:26], past_key_values=cache, use_cache=True).logits
        second = model(input_ids=ids[:, 26:], past_key_values=cache, use_cache=True).logits
    (first.logsumexp(-1).sum() + second.logsumexp(-1).sum()).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]), kept


def test_gradients_through_a_cache_are_sdpa_s_bit_for_bit():
    from searchplay.llm.attention import use_lean_attention

    model = tiny_gqa()
    reference, _ = cached_chunk_backward(model)
    use_lean_attention(model)
    lean, _ = cached_chunk_backward(model)
    assert torch.equal(lean, reference)


def test_the_backward_keeps_no_repeated_key_value_heads():
    """sdpa keeps each key/value head repeated for its query heads ([1, 4, T, 8]); the lean attention keeps the
    cache as it is ([1, 2, T, 8]) and repeats it again in the backward."""
    from searchplay.llm.attention import use_lean_attention

    model = tiny_gqa()
    repeated = {(1, 4, 26, 8), (1, 4, 30, 8)}
    _, kept = cached_chunk_backward(model)
    assert repeated <= set(kept)
    use_lean_attention(model)
    _, kept = cached_chunk_backward(model)
    assert not repeated & set(kept)
    assert {(1, 2, 26, 8), (1, 2, 30, 8)} <= set(kept)
