"""packed_sdpa_attention: the same decode-step attention as transformers' sdpa, with and without padding."""

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
    from searchplay.llm.attention import NAME, use_packed_decode

    model = tiny_gqa()
    reference = decode_logits(model, padded)
    use_packed_decode(model)
    assert model.config._attn_implementation == NAME
    torch.testing.assert_close(decode_logits(model, padded), reference, rtol=1e-5, atol=1e-5)


def test_prefill_and_training_forwards_are_unchanged():
    from searchplay.llm.attention import use_packed_decode

    model = tiny_gqa().train()
    ids = torch.randint(3, 97, (2, 10))
    reference = model(input_ids=ids).logits
    use_packed_decode(model)
    torch.testing.assert_close(model(input_ids=ids).logits, reference)


def test_other_attention_implementations_are_left_alone():
    from searchplay.llm.attention import use_packed_decode

    model = tiny_gqa()
    model.config._attn_implementation = "eager"
    use_packed_decode(model)
    assert model.config._attn_implementation == "eager"


def test_saved_config_keeps_no_trace_of_the_switch(tmp_path):
    import json

    from searchplay.llm.attention import use_packed_decode

    model = tiny_gqa()
    use_packed_decode(model)
    model.save_pretrained(tmp_path)
    assert "sdpa_packed_decode" not in json.dumps(json.loads((tmp_path / "config.json").read_text()))
